/* sf_type.h -- one element type's names (sf_instantiate.h lists them), the
 * template SF_TEMPLATE compiled with them, then every name undefined. Only
 * sf_instantiate.h includes it, with SF_TYPE set. */
#if SF_TYPE == SF_F32
#define T float
#define ACC double
#define U uint32_t
#define SF_SUFFIX f32
#define SF_IS_FLOAT 1
#define EXP expf
#define LOG logf
#define POW powf
#define MAGNITUDE 0x7fffffffu
#elif SF_TYPE == SF_F64
#define T double
#define ACC double
#define U uint64_t
#define SF_SUFFIX f64
#define SF_IS_FLOAT 1
#define EXP exp
#define LOG log
#define POW pow
#define MAGNITUDE 0x7fffffffffffffffull
#elif SF_TYPE == SF_I64
#define T int64_t
#define ACC int64_t
#define U uint64_t
#define SF_SUFFIX i64
#define SF_IS_FLOAT 0
#else
#error "sf_type.h: SF_TYPE must be SF_F32, SF_F64 or SF_I64"
#endif

#if SF_IS_FLOAT
#define ISNAN(x) isnan(x)
#define LOWEST -INFINITY
#define HIGHEST INFINITY
#define NANV NAN
#define HAS_PROD 1
#define POW_ACC(f, u) pow((f), (double)(u))
#else
#define ISNAN(x) 0
#define LOWEST INT64_MIN
#define HIGHEST INT64_MAX
#define NANV 0
#define HAS_PROD 0
#define POW_ACC(f, u) ((void)(f), (void)(u), 1)
#endif
#define SF_FN(name) SF_CAT(name, SF_SUFFIX)

#include SF_TEMPLATE

#undef T
#undef ACC
#undef U
#undef SF_SUFFIX
#undef SF_IS_FLOAT
#undef EXP
#undef LOG
#undef POW
#undef MAGNITUDE
#undef ISNAN
#undef LOWEST
#undef HIGHEST
#undef NANV
#undef HAS_PROD
#undef POW_ACC
#undef SF_FN
#undef SF_TYPE
