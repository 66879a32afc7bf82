/* sf_bsr.c -- fill-aware BSR @ dense (sparsefill_core.h, "BSR products").
 *
 * A BSR operand with a scalar fill f is A0 + f, where A0 holds `block - f` in
 * the stored blocks and 0 elsewhere, so
 *     C[I r + u, :] = f colsum + sum_{p in block row I} sum_v (V[p, u, v] - f) B[J_p c + v, :]
 * with colsum = 1^T B (the caller's). The correction row starts each output
 * tile, the blocks are accumulated on top: C is written once.
 *
 * The inner loops work on a tile of output rows by columns held in
 * registers: each element of B read feeds SF_BSR_ROWS multiply-adds, and
 * each output's sum over a block row's blocks is formed in a fixed order,
 * whatever the caller's split into block-row ranges (deterministic). Index
 * data is checked before it is used.
 */
#include <string.h>

#include "sf_internal.h"

/* See sf_products.c: the kernels are cloned for AVX-512, AVX2 and the
 * baseline with GCC on x86-64 Linux, the loader picks one. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SF_BSR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SF_BSR_CLONES
#endif
/* The tile functions must be compiled inside each clone, with its ISA. */
#if defined(__GNUC__)
#define SF_BSR_INLINE static inline __attribute__((always_inline))
#else
#define SF_BSR_INLINE static inline
#endif

/* A tile: SF_BSR_ROWS output rows by two vectors of 32 bytes (16 floats or
 * 8 doubles): 8 accumulator registers with AVX2, a B vector loaded once per
 * SF_BSR_ROWS multiply-adds. GCC's and clang's vector extension makes the
 * compiler's code the one written here (left to the auto-vectoriser, the
 * fully unrolled tile came out scalar-heavy, 8x slower); other compilers
 * get the same loop on scalars. */
#define SF_BSR_ROWS 4
#if defined(__GNUC__)
typedef float sf_vf32 __attribute__((vector_size(32)));
typedef double sf_vf64 __attribute__((vector_size(32)));
#define SF_BSR_VEC(V, T) V
#else
#define SF_BSR_VEC(V, T) T
#endif
#define SF_BSR_LANES(V, T) ((int)(sizeof(SF_BSR_VEC(V, T)) / sizeof(T)))

#define SF_TEMPLATE "templates/bsr.h"
#define SF_TYPES (SF_F32 | SF_F64)
#include "sf_instantiate.h"
