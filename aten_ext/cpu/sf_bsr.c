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

#define SF_DEFINE_BSR(T, SUFFIX, V)                                                            \
  /* One tile: rows u0 .. u0 + SF_BSR_ROWS of block row [lo, hi), columns t0 ..          \
   * t0 + 2 lanes, all within bounds (the full-size fast case). */                            \
  SF_BSR_INLINE void sf_bsr_tile_##SUFFIX(T *restrict c, int64_t ldc, const int64_t *col,     \
                                          const T *restrict values, int64_t lo, int64_t hi,   \
                                          int64_t r, int64_t bc, const T *restrict b,         \
                                          int64_t ldb, T f, const T *restrict colsum,         \
                                          int64_t u0, int64_t t0) {                           \
    typedef SF_BSR_VEC(V, T) vec;                                                              \
    enum { L = SF_BSR_LANES(V, T) };                                                           \
    vec acc[SF_BSR_ROWS][2];                                                                   \
    for (int k = 0; k < 2; ++k) {                                                              \
      vec cs;                                                                                  \
      if (colsum) memcpy(&cs, colsum + t0 + k * L, sizeof cs); else memset(&cs, 0, sizeof cs); \
      for (int u = 0; u < SF_BSR_ROWS; ++u) acc[u][k] = cs * f;                                \
    }                                                                                          \
    for (int64_t p = lo; p < hi; ++p) {                                                        \
      const T *restrict vp = values + (p * r + u0) * bc;                                       \
      const T *restrict bp = b + col[p] * bc * ldb + t0;                                       \
      for (int64_t v = 0; v < bc; ++v) {                                                       \
        vec bv[2];                                                                             \
        memcpy(&bv[0], bp + v * ldb, sizeof bv[0]);                                            \
        memcpy(&bv[1], bp + v * ldb + L, sizeof bv[1]);                                        \
        for (int u = 0; u < SF_BSR_ROWS; ++u) {                                                \
          const T a = vp[u * bc + v] - f;                                                      \
          acc[u][0] += a * bv[0];                                                              \
          acc[u][1] += a * bv[1];                                                              \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
    for (int u = 0; u < SF_BSR_ROWS; ++u)                                                      \
      for (int k = 0; k < 2; ++k)                                                              \
        memcpy(c + (u0 + u) * ldc + t0 + k * L, &acc[u][k], sizeof acc[u][k]);               \
  }                                                                                            \
                                                                                               \
  /* The same for any rows [u0, u1) and columns [t0, t1) (the edges). */                      \
  SF_BSR_INLINE void sf_bsr_edge_##SUFFIX(T *restrict c, int64_t ldc, const int64_t *col,            \
                                   const T *restrict values, int64_t lo, int64_t hi,          \
                                   int64_t r, int64_t bc, const T *restrict b, int64_t ldb,   \
                                   T f, const T *restrict colsum, int64_t u0, int64_t u1,     \
                                   int64_t t0, int64_t t1) {                                  \
    for (int64_t u = u0; u < u1; ++u) {                                                        \
      T *restrict cu = c + u * ldc;                                                            \
      for (int64_t t = t0; t < t1; ++t) cu[t] = colsum ? f * colsum[t] : (T)0;                 \
      for (int64_t p = lo; p < hi; ++p) {                                                      \
        const T *restrict vp = values + (p * r + u) * bc;                                      \
        const T *restrict bp = b + col[p] * bc * ldb;                                          \
        for (int64_t v = 0; v < bc; ++v) {                                                     \
          const T a = vp[v] - f;                                                               \
          const T *restrict bv = bp + v * ldb;                                                 \
          for (int64_t t = t0; t < t1; ++t) cu[t] += a * bv[t];                                \
        }                                                                                      \
      }                                                                                        \
    }                                                                                          \
  }                                                                                            \
                                                                                               \
  SF_BSR_CLONES sf_status sf_bsr_spmm_##SUFFIX(                                                 \
      T *c, int64_t ldc, const int64_t *crow, const int64_t *col, const T *values,            \
      int64_t nbrows, int64_t nbcols, int64_t nblocks, int64_t r, int64_t bc, const T *b,     \
      int64_t ldb, int64_t n, const T *fill, const T *colsum, int64_t brow_begin,             \
      int64_t brow_end) {                                                                      \
    SF_FAIL_IF(nbrows < 0 || nbcols < 0 || nblocks < 0 || r < 0 || bc < 0 || n < 0,           \
               SF_ERR_NEGATIVE_SIZE);                                                          \
    SF_FAIL_IF(brow_begin < 0 || brow_end < brow_begin || brow_end > nbrows,                  \
               SF_ERR_INVALID_ARGUMENT);                                                       \
    SF_FAIL_IF(ldc < n || ldb < n, SF_ERR_INVALID_ARGUMENT);                                  \
    if (brow_end == brow_begin || n == 0 || r == 0) return SF_OK;                              \
    SF_FAIL_IF(c == NULL || crow == NULL, SF_ERR_NULL_POINTER);                                \
    SF_NEED(col, nblocks);                                                                     \
    SF_NEED(values, nblocks);                                                                  \
    SF_NEED2(b, nbcols, n);                                                                    \
    const T f = fill ? *fill : (T)0;                                                           \
    const int64_t tile = 2 * SF_BSR_LANES(V, T);                                       \
    const int64_t nt = n - n % tile, nu = r - r % SF_BSR_ROWS;                          \
    for (int64_t i = brow_begin; i < brow_end; ++i) {                                          \
      const int64_t lo = crow[i], hi = crow[i + 1];                                            \
      if (lo < 0 || hi < lo || hi > nblocks) return SF_ERR_CROW_DECREASING;                   \
      for (int64_t p = lo; p < hi; ++p)                                                        \
        if (col[p] < 0 || col[p] >= nbcols) return SF_ERR_INDEX_OUT_OF_RANGE;                 \
      T *ci = c + i * r * ldc;                                                                 \
      for (int64_t u = 0; u < nu; u += SF_BSR_ROWS) {                                          \
        for (int64_t t = 0; t < nt; t += tile)                                          \
          sf_bsr_tile_##SUFFIX(ci, ldc, col, values, lo, hi, r, bc, b, ldb, f, colsum, u, t);  \
        if (nt < n)                                                                            \
          sf_bsr_edge_##SUFFIX(ci, ldc, col, values, lo, hi, r, bc, b, ldb, f, colsum, u,      \
                               u + SF_BSR_ROWS, nt, n);                                        \
      }                                                                                        \
      if (nu < r)                                                                              \
        sf_bsr_edge_##SUFFIX(ci, ldc, col, values, lo, hi, r, bc, b, ldb, f, colsum, nu, r, 0, \
                             n);                                                               \
    }                                                                                          \
    return SF_OK;                                                                              \
  }

SF_DEFINE_BSR(float, f32, sf_vf32)
SF_DEFINE_BSR(double, f64, sf_vf64)
