/* sf_instantiate.h -- compiles a template file once per element type (not
 * installed; no include guard: it is included once per template).
 *
 * A template file (templates/) holds type-generic C written with the names
 * below; a core file instantiates it for a set of types:
 *
 *   #define SF_TEMPLATE "templates/seg_sum_max.h"
 *   #define SF_TYPES (SF_F32 | SF_F64 | SF_I64)
 *   #include "sf_instantiate.h"
 *
 * Each function `name` of the template becomes name_f32, name_f64, name_i64
 * (write it SF_FN(name)), and every line of it is a line of the template
 * file, which is what debuggers, sanitizers and compiler messages report.
 * For each type (sf_type.h), the template sees:
 *   T             the element type: float, double, int64_t
 *   ACC           its accumulator: double for both floats, int64_t
 *   U             the unsigned integer of T's size (bit tricks on floats)
 *   SF_IS_FLOAT   1 for f32 and f64, else 0; SF_TYPE the type's bit
 *   EXP LOG POW   libm in T (expf, logf, powf for f32); floats only
 *   MAGNITUDE     the mask of |x|'s bits in U; floats only
 *   ISNAN(x)      isnan(x), 0 for integers
 *   LOWEST HIGHEST  the identities of max and min in ACC
 *   NANV          ACC's NaN (0 for integers), HAS_PROD whether prod exists
 *   POW_ACC(f, u) f^u in ACC (floats only)
 * They are undefined again after the template, with SF_TEMPLATE and SF_TYPES.
 * A new element type is one more branch in sf_type.h, one more block here,
 * and its suffix in the one list of typed entries (tools/codegen/native.yaml),
 * which declares the prototypes. */
#ifndef SF_TEMPLATE
#error "sf_instantiate.h: define SF_TEMPLATE (the template file) and SF_TYPES first"
#endif

#if (SF_TYPES) & SF_F64
#define SF_TYPE SF_F64
#include "sf_type.h"
#endif
#if (SF_TYPES) & SF_F32
#define SF_TYPE SF_F32
#include "sf_type.h"
#endif
#if (SF_TYPES) & SF_I64
#define SF_TYPE SF_I64
#include "sf_type.h"
#endif

#undef SF_TEMPLATE
#undef SF_TYPES
