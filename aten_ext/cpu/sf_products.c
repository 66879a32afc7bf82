/* sf_products.c -- fill-aware sparse matrix products on CSR operands.
 *
 * A (m x k) with fill F is A0 + F, where A0 holds `values - F` on A's pattern
 * with fill 0. For a dense B (k x n):
 *     C[i, :] = sum_{p in row i} (v_p - F[i, j_p]) B[j_p, :] + (F B)[i, :]
 * and F B is a rank-one term: a scalar or per-row fill r gives r_i (1^T B),
 * a per-column fill c gives (c^T B) on every row. The kernels below write
 * that correction row first and accumulate the sparse part on top, so C is
 * written once, in the same pass (RFC.md section 5).
 *
 * Every function works on the rows [row_begin, row_end) only, so that the
 * caller can run disjoint row ranges on several threads. Index data is
 * checked as it is read (a row pointer outside [0, nse] or a column outside
 * [0, ncols) returns an error), so malformed input never reads out of bounds.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sf_internal.h"

/* The inner loops are axpy and dot products over rows of a dense operand:
 * with GCC on x86-64, each hot kernel is compiled for AVX-512, AVX2+FMA and
 * the baseline, and the loader picks one for the machine (ifunc). Elsewhere
 * the baseline build alone. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SF_CLONES
#endif

/* The block read of max |values| (below) stays out of the kernels' inner
 * loops: inlined, it changed how GCC compiled the SpMV's loop (its index
 * checks vectorised into extracts; 1.7x slower). */
#if defined(__GNUC__)
#define SF_NOINLINE __attribute__((noinline))
#else
#define SF_NOINLINE
#endif

/* Shared argument checks of the row-range functions. */
#define SF_CHECK_RANGE(nrows, row_begin, row_end)                                   \
  do {                                                                              \
    SF_FAIL_IF((nrows) < 0, SF_ERR_NEGATIVE_SIZE);                                  \
    SF_FAIL_IF((row_begin) < 0 || (row_end) < (row_begin) || (row_end) > (nrows),   \
               SF_ERR_INVALID_ARGUMENT);                                            \
  } while (0)

/* Row i's stored range [*lo, *hi), checked against nse. */
static inline sf_status sf_row_span(int64_t *lo, int64_t *hi, const int64_t *crow, int64_t i,
                                    int64_t nse) {
  *lo = crow[i];
  *hi = crow[i + 1];
  if (*lo < 0 || *hi < *lo || *hi > nse) return SF_ERR_CROW_DECREASING;
  return SF_OK;
}

/* max |x| over n elements at stride `stride`, as the bits of |x|: for IEEE
 * values with the sign cleared, the unsigned order of the bits is the order
 * of the magnitudes, with inf above every finite value and every NaN above
 * inf. So one unsigned max (which vectorises, where a float max with NaN
 * rules does not) gives max |x|, inf if x holds one, NaN if x holds one. */
#define SF_DEFINE_ABSMAX(T, SUFFIX, U, MAGNITUDE)                                       \
  static inline U sf_absmax_bits_##SUFFIX(const T *x, int64_t n, int64_t stride) {      \
    U mx[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                 \
    int64_t i = 0;                                                                      \
    if (stride == 1) {                                                                  \
      for (; i + 8 <= n; i += 8)                                                        \
        for (int u = 0; u < 8; ++u) {                                                   \
          U b;                                                                          \
          memcpy(&b, x + i + u, sizeof b);                                              \
          b &= MAGNITUDE;                                                               \
          mx[u] = b > mx[u] ? b : mx[u];                                                \
        }                                                                               \
    }                                                                                   \
    for (; i < n; ++i) {                                                                \
      U b;                                                                              \
      memcpy(&b, x + i * stride, sizeof b);                                             \
      b &= MAGNITUDE;                                                                   \
      mx[0] = b > mx[0] ? b : mx[0];                                                    \
    }                                                                                   \
    U m = 0;                                                                            \
    for (int u = 0; u < 8; ++u) m = mx[u] > m ? mx[u] : m;                              \
    return m;                                                                           \
  }                                                                                     \
                                                                                        \
  static inline T sf_from_bits_##SUFFIX(U b) {                                          \
    T v;                                                                                \
    memcpy(&v, &b, sizeof v);                                                           \
    return v;                                                                           \
  }                                                                                     \
                                                                                        \
  /* max |values| of a row range, read in blocks of whole rows behind a kernel's   \
   * pass, while a block is still in L1 (a pass of its own vectorises; the same      \
   * steps inside a gather loop cost the SpMV half its time again, a pass over the   \
   * whole range after it about as much, from memory). */                            \
  typedef struct {                                                                      \
    U bits;              /* max |v| so far, as bits */                                  \
    int64_t start, end;  /* the block not yet read: [start, end) */                     \
  } sf_absmax_block_##SUFFIX;                                                           \
                                                                                        \
  SF_CLONES static SF_NOINLINE void sf_absmax_fold_##SUFFIX(sf_absmax_block_##SUFFIX *s,             \
                                             const T *values) {                         \
    const U b = sf_absmax_bits_##SUFFIX(values + s->start, s->end - s->start, 1);       \
    s->bits = b > s->bits ? b : s->bits;                                                \
    s->start = s->end;                                                                  \
  }                                                                                     \
                                                                                        \
  /* The kernel read row [lo, hi) (rows come in order, each starting where the     \
   * last ended). */                                                                    \
  static inline void sf_absmax_block_add_##SUFFIX(sf_absmax_block_##SUFFIX *s,          \
                                                  const T *values, int64_t lo,          \
                                                  int64_t hi) {                         \
    if (s->start < 0) s->start = lo;                                                    \
    s->end = hi;                                                                        \
    if (s->end - s->start >= SF_ABSMAX_BLOCK) sf_absmax_fold_##SUFFIX(s, values);       \
  }                                                                                     \
                                                                                        \
  static inline T sf_absmax_block_end_##SUFFIX(sf_absmax_block_##SUFFIX *s,             \
                                               const T *values) {                       \
    if (s->end > s->start) sf_absmax_fold_##SUFFIX(s, values);                          \
    return sf_from_bits_##SUFFIX(s->bits);                                              \
  }
/* Stored elements per block of sf_absmax_block (8 or 16 KB, well inside L1). */
#define SF_ABSMAX_BLOCK 2048
SF_DEFINE_ABSMAX(float, f32, uint32_t, 0x7fffffffu)
SF_DEFINE_ABSMAX(double, f64, uint64_t, 0x7fffffffffffffffull)

/* ---- type-generic kernels ---------------------------------------------------- */

#define SF_DEFINE_PRODUCTS(T, SUFFIX, U)                                                          \
  /* A dot product in 8 independent lanes, which the compiler vectorises (a   \
   * single running sum may not be reassociated). */                                           \
  static inline T sf_dot_##SUFFIX(const T *restrict x, const T *restrict y, int64_t n) {       \
    T lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                                      \
    int64_t t = 0;                                                                             \
    for (; t + 8 <= n; t += 8)                                                                 \
      for (int u = 0; u < 8; ++u) lane[u] += x[t + u] * y[t + u];                              \
    T s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7])); \
    for (; t < n; ++t) s += x[t] * y[t];                                                       \
    return s;                                                                                  \
  }                                                                                            \
                                                                                               \
  SF_CLONES sf_status sf_csr_spmm_##SUFFIX(T *c, int64_t ldc, const int64_t *crow, const int64_t *col,  \
                                 const T *values, int64_t nrows, int64_t ncols, int64_t nse,  \
                                 const T *b, int64_t ldb, int64_t n, const T *row_fill,       \
                                 int64_t row_fill_stride, const T *col_fill, const T *colsum, \
                                 const T *corr, int64_t row_begin, int64_t row_end,           \
                                 T *values_absmax) {                                          \
    SF_CHECK_RANGE(nrows, row_begin, row_end);                                                 \
    SF_FAIL_IF(ncols < 0 || nse < 0 || n < 0, SF_ERR_NEGATIVE_SIZE);                          \
    SF_FAIL_IF(ldc < n || ldb < n, SF_ERR_INVALID_ARGUMENT);                                  \
    if (values_absmax) *values_absmax = 0;                                                     \
    if (row_end == row_begin || n == 0) return SF_OK;                                          \
    SF_FAIL_IF(c == NULL || crow == NULL, SF_ERR_NULL_POINTER);                                \
    SF_NEED(col, nse);                                                                         \
    SF_NEED(values, nse);                                                                      \
    SF_NEED2(b, ncols, n);                                                                     \
    sf_absmax_block_##SUFFIX seen = {0, -1, -1}; /* max |values| of the range (in blocks) */       \
    for (int64_t i = row_begin; i < row_end; ++i) {                                            \
      int64_t lo, hi;                                                                          \
      sf_status st = sf_row_span(&lo, &hi, crow, i, nse);                                      \
      if (st != SF_OK) return st;                                                              \
      const T rf = row_fill ? row_fill[i * row_fill_stride] : (T)0;                           \
      T *restrict ci = c + i * ldc;                                                            \
      /* The correction row first: C is written once, in this pass. */                         \
      for (int64_t t = 0; t < n; ++t) {                                                        \
        T v = colsum ? rf * colsum[t] : (T)0;                                                  \
        ci[t] = corr ? v + corr[t] : v;                                                        \
      }                                                                                        \
      for (int64_t p = lo; p < hi; ++p) {                                                      \
        const int64_t j = col[p];                                                              \
        if (j < 0 || j >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;                             \
        const T a = values[p] - rf - (col_fill ? col_fill[j] : (T)0);                          \
        const T *restrict bj = b + j * ldb;                                                    \
        for (int64_t t = 0; t < n; ++t) ci[t] += a * bj[t];                                    \
      }                                                                                        \
      if (values_absmax) sf_absmax_block_add_##SUFFIX(&seen, values, lo, hi);               \
    }                                                                                          \
    if (values_absmax) *values_absmax = sf_absmax_block_end_##SUFFIX(&seen, values);           \
    return SF_OK;                                                                              \
  }                                                                                            \
                                                                                               \
  SF_CLONES sf_status sf_csr_spmv_##SUFFIX(T *y, int64_t incy, const int64_t *crow, const int64_t *col, \
                                 const T *values, int64_t nrows, int64_t ncols, int64_t nse,  \
                                 const T *x, int64_t incx, const T *row_fill,                 \
                                 int64_t row_fill_stride, const T *col_fill, T xsum, T corr,   \
                                 int64_t row_begin, int64_t row_end, T *values_absmax) {      \
    SF_CHECK_RANGE(nrows, row_begin, row_end);                                                 \
    SF_FAIL_IF(ncols < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);                                   \
    if (values_absmax) *values_absmax = 0;                                                     \
    if (row_end == row_begin) return SF_OK;                                                    \
    SF_FAIL_IF(y == NULL || crow == NULL, SF_ERR_NULL_POINTER);                                \
    SF_NEED(col, nse);                                                                         \
    SF_NEED(values, nse);                                                                      \
    SF_NEED(x, ncols);                                                                         \
    sf_absmax_block_##SUFFIX seen = {0, -1, -1}; /* max |values| of the range (in blocks) */       \
    for (int64_t i = row_begin; i < row_end; ++i) {                                            \
      int64_t lo, hi;                                                                          \
      sf_status st = sf_row_span(&lo, &hi, crow, i, nse);                                      \
      if (st != SF_OK) return st;                                                              \
      const T rf = row_fill ? row_fill[i * row_fill_stride] : (T)0;                           \
      /* Four partial sums: one running sum would serialise on the add's latency. */           \
      T a0 = 0, a1 = 0, a2 = 0, a3 = 0;                                                        \
      int64_t p = lo;                                                                          \
      for (; p + 4 <= hi; p += 4) {                                                            \
        const int64_t j0 = col[p], j1 = col[p + 1], j2 = col[p + 2], j3 = col[p + 3];          \
        if (((uint64_t)j0 >= (uint64_t)ncols) | ((uint64_t)j1 >= (uint64_t)ncols) |            \
            ((uint64_t)j2 >= (uint64_t)ncols) | ((uint64_t)j3 >= (uint64_t)ncols))             \
          return SF_ERR_INDEX_OUT_OF_RANGE;                                                    \
        a0 += (values[p] - rf - (col_fill ? col_fill[j0] : (T)0)) * x[j0 * incx];             \
        a1 += (values[p + 1] - rf - (col_fill ? col_fill[j1] : (T)0)) * x[j1 * incx];         \
        a2 += (values[p + 2] - rf - (col_fill ? col_fill[j2] : (T)0)) * x[j2 * incx];         \
        a3 += (values[p + 3] - rf - (col_fill ? col_fill[j3] : (T)0)) * x[j3 * incx];         \
      }                                                                                        \
      for (; p < hi; ++p) {                                                                    \
        const int64_t j = col[p];                                                              \
        if (j < 0 || j >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;                             \
        a0 += (values[p] - rf - (col_fill ? col_fill[j] : (T)0)) * x[j * incx];               \
      }                                                                                        \
      y[i * incy] = (rf * xsum + corr) + ((a0 + a1) + (a2 + a3));                              \
      if (values_absmax) sf_absmax_block_add_##SUFFIX(&seen, values, lo, hi);               \
    }                                                                                          \
    if (values_absmax) *values_absmax = sf_absmax_block_end_##SUFFIX(&seen, values);           \
    return SF_OK;                                                                              \
  }                                                                                            \
                                                                                               \
  SF_CLONES sf_status sf_csr_sddmm_##SUFFIX(T *out, const int64_t *crow, const int64_t *col,            \
                                  int64_t nrows, int64_t ncols, int64_t nse, const T *x,      \
                                  int64_t ldx, const T *y, int64_t ldy, int64_t n,            \
                                  int64_t row_begin, int64_t row_end) {                       \
    SF_CHECK_RANGE(nrows, row_begin, row_end);                                                 \
    SF_FAIL_IF(ncols < 0 || nse < 0 || n < 0, SF_ERR_NEGATIVE_SIZE);                          \
    SF_FAIL_IF(ldx < n || ldy < n, SF_ERR_INVALID_ARGUMENT);                                  \
    if (row_end == row_begin) return SF_OK;                                                    \
    SF_FAIL_IF(crow == NULL, SF_ERR_NULL_POINTER);                                             \
    SF_NEED(out, nse);                                                                         \
    SF_NEED(col, nse);                                                                         \
    SF_NEED2(x, nrows, n);                                                                     \
    SF_NEED2(y, ncols, n);                                                                     \
    for (int64_t i = row_begin; i < row_end; ++i) {                                            \
      int64_t lo, hi;                                                                          \
      sf_status st = sf_row_span(&lo, &hi, crow, i, nse);                                      \
      if (st != SF_OK) return st;                                                              \
      const T *restrict xi = x + i * ldx;                                                      \
      for (int64_t p = lo; p < hi; ++p) {                                                      \
        const int64_t j = col[p];                                                              \
        if (j < 0 || j >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;                             \
        out[p] = sf_dot_##SUFFIX(xi, y + j * ldy, n);                                          \
      }                                                                                        \
    }                                                                                          \
    return SF_OK;                                                                              \
  }                                                                                            \
                                                                                               \
  SF_CLONES sf_status sf_csr_spgemm_rows_##SUFFIX(                                             \
      int64_t *col_out, T *val_out, int64_t capacity, int64_t *used, int64_t *row_nse,          \
      int64_t *next_row, const int64_t *row_bound, const int64_t *crow_a, const int64_t *col_a, \
      const T *val_a, int64_t m, int64_t k, int64_t nse_a, const int64_t *crow_b,               \
      const int64_t *col_b, const T *val_b, int64_t n, int64_t nse_b, T *acc, uint64_t *bits,   \
      int64_t row_begin, int64_t row_end) {                                                     \
    SF_CHECK_RANGE(m, row_begin, row_end);                                                     \
    SF_FAIL_IF(k < 0 || n < 0 || nse_a < 0 || nse_b < 0 || capacity < 0, SF_ERR_NEGATIVE_SIZE); \
    SF_FAIL_IF(used == NULL || next_row == NULL, SF_ERR_NULL_POINTER);                         \
    SF_FAIL_IF(*used < 0 || *used > capacity, SF_ERR_INVALID_ARGUMENT);                        \
    *next_row = row_begin;                                                                     \
    if (row_end == row_begin) return SF_OK;                                                    \
    SF_FAIL_IF(row_nse == NULL || row_bound == NULL || crow_a == NULL || crow_b == NULL,       \
               SF_ERR_NULL_POINTER);                                                           \
    SF_NEED(col_out, capacity);                                                                \
    SF_NEED(val_out, capacity);                                                                \
    SF_NEED(col_a, nse_a);                                                                     \
    SF_NEED(val_a, nse_a);                                                                     \
    SF_NEED(col_b, nse_b);                                                                     \
    SF_NEED(val_b, nse_b);                                                                     \
    SF_NEED(acc, n);                                                                           \
    SF_NEED(bits, n);                                                                          \
    for (int64_t w = 0; w < (n + 63) / 64; ++w) bits[w] = 0;                                   \
    int64_t out0 = *used;                                                                      \
    for (int64_t i = row_begin; i < row_end; ++i) {                                            \
      const int64_t bound = row_bound[i];                                                      \
      SF_FAIL_IF(bound < 0, SF_ERR_INVALID_ARGUMENT);                                          \
      if (bound > capacity - out0) { /* the caller grows the buffer and goes on from row i */  \
        *used = out0;                                                                          \
        *next_row = i;                                                                         \
        return SF_OK;                                                                          \
      }                                                                                        \
      int64_t lo, hi, cnt = 0, cmin = n, cmax = -1;                                            \
      sf_status st = sf_row_span(&lo, &hi, crow_a, i, nse_a);                                  \
      if (st != SF_OK) return st;                                                              \
      for (int64_t p = lo; p < hi; ++p) {                                                      \
        const int64_t j = col_a[p];                                                            \
        if (j < 0 || j >= k) return SF_ERR_INDEX_OUT_OF_RANGE;                                 \
        int64_t blo, bhi;                                                                      \
        st = sf_row_span(&blo, &bhi, crow_b, j, nse_b);                                        \
        if (st != SF_OK) return st;                                                            \
        const T a = val_a[p];                                                                  \
        for (int64_t q = blo; q < bhi; ++q) {                                                  \
          const int64_t t = col_b[q];                                                          \
          if (t < 0 || t >= n) return SF_ERR_INDEX_OUT_OF_RANGE;                               \
          const uint64_t bit = (uint64_t)1 << (t & 63);                                        \
          if (!(bits[t >> 6] & bit)) { /* the row's bitmap marks columns seen */               \
            /* a row beyond its bound is refused, never written past the buffer */             \
            if (cnt == bound) return SF_ERR_INVALID_ARGUMENT;                                  \
            bits[t >> 6] |= bit;                                                               \
            acc[t] = a * val_b[q];                                                             \
            col_out[out0 + cnt++] = t;                                                         \
            if (t < cmin) cmin = t;                                                            \
            if (t > cmax) cmax = t;                                                            \
          } else {                                                                             \
            acc[t] += a * val_b[q];                                                            \
          }                                                                                    \
        }                                                                                      \
      }                                                                                        \
      if (cnt > 0) sf_sorted_columns(col_out + out0, cnt, bits, cmin, cmax);                   \
      for (int64_t q = 0; q < cnt; ++q) val_out[out0 + q] = acc[col_out[out0 + q]];            \
      row_nse[i] = cnt;                                                                        \
      out0 += cnt;                                                                             \
    }                                                                                          \
    *used = out0;                                                                              \
    *next_row = row_end;                                                                       \
    return SF_OK;                                                                              \
  }                                                                                            \
                                                                                               \
  sf_status sf_csr_sddmm_sparse_##SUFFIX(                                                      \
      T *out, const int64_t *crow_p, const int64_t *col_p, int64_t nrows, int64_t ncols,      \
      int64_t nse_p, const int64_t *crow_x, const int64_t *col_x, const T *val_x,             \
      int64_t nse_x, const int64_t *crow_s, const int64_t *col_s, const T *val_s,             \
      int64_t nse_s, int64_t n, T *acc, int64_t row_begin, int64_t row_end) {                 \
    SF_CHECK_RANGE(nrows, row_begin, row_end);                                                 \
    SF_FAIL_IF(ncols < 0 || n < 0 || nse_p < 0 || nse_x < 0 || nse_s < 0,                     \
               SF_ERR_NEGATIVE_SIZE);                                                          \
    if (row_end == row_begin) return SF_OK;                                                    \
    SF_FAIL_IF(crow_p == NULL || crow_x == NULL || crow_s == NULL, SF_ERR_NULL_POINTER);       \
    SF_NEED(out, nse_p);                                                                       \
    SF_NEED(col_p, nse_p);                                                                     \
    SF_NEED(col_x, nse_x);                                                                     \
    SF_NEED(val_x, nse_x);                                                                     \
    SF_NEED(col_s, nse_s);                                                                     \
    SF_NEED(val_s, nse_s);                                                                     \
    SF_NEED(acc, n);                                                                           \
    for (int64_t t = 0; t < n; ++t) acc[t] = 0;                                                \
    for (int64_t i = row_begin; i < row_end; ++i) {                                            \
      int64_t lo, hi, xlo, xhi;                                                                \
      sf_status st = sf_row_span(&lo, &hi, crow_p, i, nse_p);                                  \
      if (st != SF_OK) return st;                                                              \
      st = sf_row_span(&xlo, &xhi, crow_x, i, nse_x);                                          \
      if (st != SF_OK) return st;                                                              \
      /* Row i of X, scattered into a dense row; duplicates add up. */                         \
      for (int64_t q = xlo; q < xhi; ++q) {                                                    \
        if (col_x[q] < 0 || col_x[q] >= n) return SF_ERR_INDEX_OUT_OF_RANGE;                   \
        acc[col_x[q]] += val_x[q];                                                             \
      }                                                                                        \
      for (int64_t p = lo; p < hi; ++p) {                                                      \
        const int64_t j = col_p[p];                                                            \
        if (j < 0 || j >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;                             \
        int64_t slo, shi;                                                                      \
        st = sf_row_span(&slo, &shi, crow_s, j, nse_s);                                        \
        if (st != SF_OK) return st;                                                            \
        T sum = 0;                                                                             \
        for (int64_t q = slo; q < shi; ++q) {                                                  \
          if (col_s[q] < 0 || col_s[q] >= n) return SF_ERR_INDEX_OUT_OF_RANGE;                 \
          sum += acc[col_s[q]] * val_s[q];                                                     \
        }                                                                                      \
        out[p] = sum;                                                                          \
      }                                                                                        \
      for (int64_t q = xlo; q < xhi; ++q) acc[col_x[q]] = 0;                                   \
    }                                                                                          \
    return SF_OK;                                                                              \
  }

/* Sort a row's columns. Rows are usually short: insertion sort; long rows
 * go to qsort, unless the bitmap below is cheaper. */
/* Index of the lowest set bit of a non-zero word. */
static inline int64_t sf_ctz64(uint64_t w) {
#if defined(__GNUC__)
  return (int64_t)__builtin_ctzll(w);
#else
  int64_t n = 0;
  while (!(w & 1)) {
    w >>= 1;
    ++n;
  }
  return n;
#endif
}

static int sf_cmp_i64(const void *x, const void *y) {
  const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

static void sf_sort_i64(int64_t *x, int64_t n) {
  if (n > 32) {
    qsort(x, (size_t)n, sizeof(int64_t), sf_cmp_i64);
    return;
  }
  for (int64_t i = 1; i < n; ++i) {
    const int64_t v = x[i];
    int64_t j = i - 1;
    while (j >= 0 && x[j] > v) {
      x[j + 1] = x[j];
      --j;
    }
    x[j + 1] = v;
  }
}

/* The row's columns x[0..cnt), all in [cmin, cmax], in increasing order.
 * They are also set in `bits` (one bit per column); when the words spanning
 * [cmin, cmax] are few compared with a sort's work, read them back from the
 * bitmap in order. Either way the row's bits are cleared. */
static void sf_sorted_columns(int64_t *x, int64_t cnt, uint64_t *bits, int64_t cmin,
                              int64_t cmax) {
  const int64_t w0 = cmin >> 6, w1 = cmax >> 6;
  if (cnt > 16 && w1 - w0 + 1 <= 4 * cnt) {
    int64_t q = 0, w = w0;
    /* A sparse row's word holds 0, 1 or 2 of its columns most often, and a
     * loop over a word's bits mispredicts its exit about once per word (this
     * read was 40% of a SpGEMM). So a word's first two columns are written
     * without a branch: x[q] and x[q + 1] are written whether or not they are
     * kept (q advances only past kept ones), which stays inside the row
     * while two of its slots are left; the rare third bit takes the loop. */
    for (; w <= w1 && q + 2 <= cnt; ++w) {
      uint64_t word = bits[w];
      bits[w] = 0;
      const int64_t base = w << 6;
      x[q] = base + sf_ctz64(word | ((uint64_t)1 << 63));
      q += word != 0;
      word &= word - 1;
      x[q] = base + sf_ctz64(word | ((uint64_t)1 << 63));
      q += word != 0;
      word &= word - 1;
      while (word) {
        x[q++] = base + sf_ctz64(word);
        word &= word - 1;
      }
    }
    for (; w <= w1; ++w) {
      uint64_t word = bits[w];
      bits[w] = 0;
      while (word) {
        x[q++] = (w << 6) + sf_ctz64(word);
        word &= word - 1;
      }
    }
    return;
  }
  for (int64_t q = 0; q < cnt; ++q) bits[x[q] >> 6] = 0;
  sf_sort_i64(x, cnt);
}

SF_DEFINE_PRODUCTS(float, f32, uint32_t)
SF_DEFINE_PRODUCTS(double, f64, uint64_t)

/* ---- the range facts of a product's fast path ------------------------------------
 *
 * max |x| (NaN if x holds one) and the sum of a dense block in one read,
 * for the test that picks a product's fast path (RFC.md section 5.5). The
 * sum runs in eight double lanes (float's too): no worse than a float
 * cascade for the sizes a product's operand has, and deterministic. */
#define SF_DEFINE_FACTS(T, SUFFIX, U)                                                        \
  /* The sum of len elements at stride `stride` into eight double lanes. */                  \
  static inline void sf_sum_run_##SUFFIX(const T *x, int64_t len, int64_t stride,            \
                                         double *lanes) {                                    \
    int64_t i = 0;                                                                          \
    if (stride == 1)                                                                        \
      for (; i + 8 <= len; i += 8)                                                          \
        for (int u = 0; u < 8; ++u) lanes[u] += (double)x[i + u];                           \
    for (; i < len; ++i) lanes[0] += (double)x[i * stride];                                 \
  }                                                                                         \
                                                                                            \
  SF_CLONES sf_status sf_dense_facts_##SUFFIX(T *absmax, T *sum, const T *x, int64_t rows,  \
                                              int64_t cols, int64_t ld) {                   \
    SF_FAIL_IF(rows < 0 || cols < 0, SF_ERR_NEGATIVE_SIZE);                                \
    SF_FAIL_IF(absmax == NULL, SF_ERR_NULL_POINTER);                                        \
    SF_FAIL_IF(cols > 1 && rows > 1 && ld < cols, SF_ERR_INVALID_ARGUMENT);                 \
    SF_FAIL_IF(cols == 1 && rows > 1 && ld < 0, SF_ERR_INVALID_ARGUMENT);                   \
    SF_NEED2(x, rows, cols);                                                                \
    double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};                                             \
    U m = 0;                                                                                \
    /* a vector at stride ld, or rows of cols contiguous elements */                       \
    const int64_t runs = cols == 1 ? 1 : rows, len = cols == 1 ? rows : cols;               \
    const int64_t stride = cols == 1 ? ld : 1;                                              \
    for (int64_t r = 0; r < runs && len > 0; ++r) {                                        \
      const U b = sf_absmax_bits_##SUFFIX(x + r * ld, len, stride);                         \
      m = b > m ? b : m;                                                                    \
      if (sum) sf_sum_run_##SUFFIX(x + r * ld, len, stride, lanes);                         \
    }                                                                                       \
    *absmax = sf_from_bits_##SUFFIX(m);                                                     \
    if (sum)                                                                                \
      *sum = (T)(((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +                          \
                 ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])));                          \
    return SF_OK;                                                                           \
  }

SF_DEFINE_FACTS(float, f32, uint32_t)
SF_DEFINE_FACTS(double, f64, uint64_t)

/* ---- fused sparse attention ------------------------------------------------------
 *
 * Forward: one pass over each row's stored elements with an online softmax:
 * the running max m, the running sum l of exp(s - m) and the output row,
 * rescaled by exp(m_old - m_new) when a block of scores brings a larger
 * max. No score is kept beyond a block, so memory is the output and one
 * log-sum-exp per row.
 *
 * Backward: the weights come back from the saved lse (w = exp(s - lse)), so
 * nothing of the forward is re-run but the scores. The rows pass writes dq
 * and each stored element's ds and w; the columns pass reads them through
 * the transposed pattern and writes dk and dv, so every output row has one
 * writer and no atomics or per-thread copies are needed.
 *
 * Rows and columns are numbered over all batches (r = b * nrows + i); the
 * pattern is shared. */

/* The batch count times rows (or columns) of one batch, checked: the
 * virtual row space [0, *total) of a batched call. */
static inline sf_status sf_batched_rows(int64_t *total, int64_t nbatch, int64_t n) {
  if (nbatch < 0 || n < 0) return SF_ERR_NEGATIVE_SIZE;
  if (n > 0 && nbatch > INT64_MAX / n) return SF_ERR_INVALID_ARGUMENT;
  *total = nbatch * n;
  return SF_OK;
}

/* Scores per block of stored elements in the forward: the block's dot
 * products are independent (they overlap in the core), then one max and at
 * most one rescale per block instead of a test per element. */
#define SF_ATTENTION_BLOCK 32
/* How many elements ahead the forward asks for the next key and value rows:
 * they are gathered rows of K and V, the loop's main cost. */
#define SF_ATTENTION_AHEAD 8
#if defined(__GNUC__)
#define SF_PREFETCH(ptr) __builtin_prefetch(ptr)
#else
#define SF_PREFETCH(ptr) ((void)(ptr))
#endif

/* Asks for the n elements of row x, one request per 64-byte line. */
#define SF_PREFETCH_ROW(T, x, n)                                              \
  do {                                                                        \
    for (int64_t c_ = 0; c_ < (n); c_ += 64 / (int64_t)sizeof(T))             \
      SF_PREFETCH((x) + c_);                                                  \
  } while (0)

#define SF_DEFINE_ATTENTION(T, SUFFIX, EXP, LOG)                                               \
  SF_CLONES sf_status sf_csr_attention_##SUFFIX(                                               \
      T *out, int64_t ldo, T *lse, const int64_t *crow, const int64_t *col, const T *bias,     \
      int64_t bias_stride, int64_t nrows, int64_t ncols, int64_t nse, int64_t nbatch,          \
      const T *q, int64_t ldq, const T *k, int64_t ldk, const T *v, int64_t ldv, int64_t e,    \
      int64_t dv, T scale, int64_t row_begin, int64_t row_end) {                               \
    int64_t total;                                                                             \
    sf_status st = sf_batched_rows(&total, nbatch, nrows);                                     \
    if (st != SF_OK) return st;                                                                \
    SF_CHECK_RANGE(total, row_begin, row_end);                                                 \
    SF_FAIL_IF(ncols < 0 || nse < 0 || e < 0 || dv < 0, SF_ERR_NEGATIVE_SIZE);                \
    SF_FAIL_IF(ldq < e || ldk < e || ldv < dv || ldo < dv, SF_ERR_INVALID_ARGUMENT);          \
    SF_FAIL_IF(bias_stride != 0 && bias_stride != nse, SF_ERR_INVALID_ARGUMENT);              \
    if (row_end == row_begin) return SF_OK;                                                    \
    SF_FAIL_IF(crow == NULL || lse == NULL, SF_ERR_NULL_POINTER);                              \
    SF_NEED2(out, total, dv);                                                                  \
    SF_NEED(col, nse);                                                                         \
    SF_NEED2(q, total, e);                                                                     \
    SF_NEED2(k, ncols, e);                                                                     \
    SF_NEED2(v, ncols, dv);                                                                    \
    T sc[SF_ATTENTION_BLOCK];                                                                  \
    for (int64_t r = row_begin; r < row_end; ++r) {                                            \
      const int64_t b = r / nrows, i = r - b * nrows;                                          \
      int64_t lo, hi;                                                                          \
      st = sf_row_span(&lo, &hi, crow, i, nse);                                                \
      if (st != SF_OK) return st;                                                              \
      const T *restrict qi = q + r * ldq;                                                      \
      const T *kb = k + b * ncols * ldk, *vb = v + b * ncols * ldv;                            \
      const T *bb = bias ? bias + b * bias_stride : NULL;                                      \
      T *restrict o = out + r * ldo;                                                           \
      for (int64_t t = 0; t < dv; ++t) o[t] = 0;                                               \
      T m = -INFINITY, l = 0; /* running max and sum of exp(s - m) */                          \
      int nan = 0;                                                                             \
      for (int64_t p0 = lo; p0 < hi; p0 += SF_ATTENTION_BLOCK) {                               \
        const int64_t n = hi - p0 < SF_ATTENTION_BLOCK ? hi - p0 : SF_ATTENTION_BLOCK;         \
        T top = -INFINITY;                                                                     \
        for (int64_t a = 0; a < n; ++a) {                                                      \
          const int64_t j = col[p0 + a];                                                       \
          if (j < 0 || j >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;                           \
          if (p0 + a + SF_ATTENTION_AHEAD < hi) {                                              \
            const int64_t jn = col[p0 + a + SF_ATTENTION_AHEAD];                               \
            if (jn >= 0 && jn < ncols) SF_PREFETCH_ROW(T, kb + jn * ldk, e);                   \
          }                                                                                    \
          const T s = scale * sf_dot_##SUFFIX(qi, kb + j * ldk, e) + (bb ? bb[p0 + a] : 0);    \
          sc[a] = s;                                                                           \
          nan |= s != s;                                                                       \
          if (s > top) top = s;                                                                \
        }                                                                                      \
        if (top == -INFINITY) continue; /* weights 0 (a nan is flagged), no -inf - -inf */     \
        if (top > m) { /* a new max: rescale what is summed so far */                          \
          const T c = EXP(m - top);                                                            \
          l *= c;                                                                              \
          for (int64_t t = 0; t < dv; ++t) o[t] *= c;                                          \
          m = top;                                                                             \
        }                                                                                      \
        for (int64_t a = 0; a < n; ++a) {                                                      \
          sc[a] = EXP(sc[a] - m); /* 0 for -inf; nan for +inf once m is +inf */                \
          l += sc[a];                                                                          \
        }                                                                                      \
        /* Four rows of V per pass over o: a quarter of its loads and stores. */               \
        int64_t a = 0;                                                                         \
        for (; a + 4 <= n; a += 4) {                                                           \
          if (a + 4 + SF_ATTENTION_AHEAD / 2 <= n)                                             \
            for (int u = 0; u < 4; ++u)                                                        \
              SF_PREFETCH_ROW(T, vb + col[p0 + a + SF_ATTENTION_AHEAD / 2 + u] * ldv, dv);     \
          const T *restrict v0 = vb + col[p0 + a] * ldv, *restrict v1 = vb + col[p0 + a + 1] * ldv; \
          const T *restrict v2 = vb + col[p0 + a + 2] * ldv;                                   \
          const T *restrict v3 = vb + col[p0 + a + 3] * ldv;                                   \
          const T w0 = sc[a], w1 = sc[a + 1], w2 = sc[a + 2], w3 = sc[a + 3];                  \
          for (int64_t t = 0; t < dv; ++t)                                                     \
            o[t] += (w0 * v0[t] + w1 * v1[t]) + (w2 * v2[t] + w3 * v3[t]);                     \
        }                                                                                      \
        for (; a < n; ++a) {                                                                   \
          const T w = sc[a], *restrict vj = vb + col[p0 + a] * ldv;                            \
          for (int64_t t = 0; t < dv; ++t) o[t] += w * vj[t];                                  \
        }                                                                                      \
      }                                                                                        \
      if (nan || m == INFINITY) { /* as the dense softmax: exp(inf - inf) or a nan */          \
        for (int64_t t = 0; t < dv; ++t) o[t] = NAN;                                           \
        lse[r] = NAN;                                                                          \
        continue;                                                                              \
      }                                                                                        \
      if (l == 0) { /* nothing stored, or only -inf: weights 0 (torch's safe softmax) */       \
        lse[r] = -INFINITY;                                                                    \
        continue;                                                                              \
      }                                                                                        \
      const T inv = 1 / l;                                                                     \
      for (int64_t t = 0; t < dv; ++t) o[t] *= inv;                                            \
      lse[r] = m + LOG(l);                                                                     \
    }                                                                                          \
    return SF_OK;                                                                              \
  }                                                                                            \
                                                                                               \
  SF_CLONES sf_status sf_csr_attention_backward_rows_##SUFFIX(                                 \
      T *dq, int64_t lddq, T *ds, T *w, const int64_t *crow, const int64_t *col, const T *bias, \
      int64_t bias_stride, int64_t nrows, int64_t ncols, int64_t nse, int64_t nbatch,          \
      const T *q, int64_t ldq, const T *k, int64_t ldk, const T *v, int64_t ldv, const T *lse, \
      const T *g, int64_t ldg, const T *g_lse, int64_t e, int64_t dv, T scale,                \
      int64_t row_begin, int64_t row_end) {                                                    \
    int64_t total;                                                                             \
    sf_status st = sf_batched_rows(&total, nbatch, nrows);                                     \
    if (st != SF_OK) return st;                                                                \
    SF_CHECK_RANGE(total, row_begin, row_end);                                                 \
    SF_FAIL_IF(ncols < 0 || nse < 0 || e < 0 || dv < 0, SF_ERR_NEGATIVE_SIZE);                \
    SF_FAIL_IF(ldq < e || ldk < e || ldv < dv || ldg < dv || lddq < e,                        \
               SF_ERR_INVALID_ARGUMENT);                                                       \
    SF_FAIL_IF(bias_stride != 0 && bias_stride != nse, SF_ERR_INVALID_ARGUMENT);              \
    if (row_end == row_begin) return SF_OK;                                                    \
    SF_FAIL_IF(crow == NULL || lse == NULL, SF_ERR_NULL_POINTER);                              \
    SF_NEED2(dq, total, e);                                                                    \
    SF_NEED(col, nse);                                                                         \
    SF_NEED2(ds, nbatch, nse);                                                                 \
    SF_NEED2(w, nbatch, nse);                                                                  \
    SF_NEED2(q, total, e);                                                                     \
    SF_NEED2(k, ncols, e);                                                                     \
    SF_NEED2(v, ncols, dv);                                                                    \
    SF_NEED2(g, total, dv);                                                                    \
    for (int64_t r = row_begin; r < row_end; ++r) {                                            \
      const int64_t b = r / nrows, i = r - b * nrows;                                          \
      int64_t lo, hi;                                                                          \
      st = sf_row_span(&lo, &hi, crow, i, nse);                                                \
      if (st != SF_OK) return st;                                                              \
      const T *restrict qi = q + r * ldq, *restrict gi = g + r * ldg;                          \
      const T *kb = k + b * ncols * ldk, *vb = v + b * ncols * ldv;                            \
      const T *bb = bias ? bias + b * bias_stride : NULL;                                      \
      T *restrict dsb = ds + b * nse, *restrict wb = w + b * nse;                              \
      T *restrict dqi = dq + r * lddq;                                                         \
      const T top = lse[r], gl = g_lse ? g_lse[r] : 0;                                         \
      /* First pass: the weights and dw (kept in ds), and their dot D. */                      \
      T dot = 0;                                                                               \
      for (int64_t p = lo; p < hi; ++p) {                                                      \
        const int64_t j = col[p];                                                              \
        if (j < 0 || j >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;                             \
        if (p + SF_ATTENTION_AHEAD < hi) {                                                     \
          const int64_t jn = col[p + SF_ATTENTION_AHEAD];                                      \
          if (jn >= 0 && jn < ncols) {                                                         \
            SF_PREFETCH_ROW(T, kb + jn * ldk, e);                                              \
            SF_PREFETCH_ROW(T, vb + jn * ldv, dv);                                             \
          }                                                                                    \
        }                                                                                      \
        const T s = scale * sf_dot_##SUFFIX(qi, kb + j * ldk, e) + (bb ? bb[p] : 0);           \
        const T wp = top == -INFINITY ? 0 : EXP(s - top);                                      \
        const T dwp = sf_dot_##SUFFIX(gi, vb + j * ldv, dv);                                   \
        wb[p] = wp;                                                                            \
        dsb[p] = dwp;                                                                          \
        dot += wp * dwp;                                                                       \
      }                                                                                        \
      /* Second pass: ds, and dq as its product with K. */                                     \
      for (int64_t t = 0; t < e; ++t) dqi[t] = 0;                                              \
      for (int64_t p = lo; p < hi; ++p) dsb[p] = wb[p] * (dsb[p] - dot + gl);                \
      int64_t p = lo;                                                                          \
      for (; p + 4 <= hi; p += 4) { /* four rows of K per pass over dq (as the forward) */     \
        const T *restrict k0 = kb + col[p] * ldk, *restrict k1 = kb + col[p + 1] * ldk;        \
        const T *restrict k2 = kb + col[p + 2] * ldk, *restrict k3 = kb + col[p + 3] * ldk;    \
        const T d0 = dsb[p], d1 = dsb[p + 1], d2 = dsb[p + 2], d3 = dsb[p + 3];                \
        for (int64_t t = 0; t < e; ++t)                                                        \
          dqi[t] += (d0 * k0[t] + d1 * k1[t]) + (d2 * k2[t] + d3 * k3[t]);                     \
      }                                                                                        \
      for (; p < hi; ++p) {                                                                    \
        const T d = dsb[p], *restrict kj = kb + col[p] * ldk;                                  \
        for (int64_t t = 0; t < e; ++t) dqi[t] += d * kj[t];                                   \
      }                                                                                        \
      for (int64_t t = 0; t < e; ++t) dqi[t] *= scale;                                         \
    }                                                                                          \
    return SF_OK;                                                                              \
  }                                                                                            \
                                                                                               \
  SF_CLONES sf_status sf_csr_attention_backward_cols_##SUFFIX(                                 \
      T *dk, int64_t lddk, T *dv_out, int64_t lddv, const int64_t *crow_t,                     \
      const int64_t *row_t, const int64_t *perm, int64_t nrows, int64_t ncols, int64_t nse,    \
      int64_t nbatch, const T *ds, const T *w, const T *q, int64_t ldq, const T *g,            \
      int64_t ldg, int64_t e, int64_t dv, T scale, int64_t col_begin, int64_t col_end) {       \
    int64_t total, total_rows;                                                                 \
    sf_status st = sf_batched_rows(&total, nbatch, ncols);                                     \
    if (st != SF_OK) return st;                                                                \
    st = sf_batched_rows(&total_rows, nbatch, nrows);                                          \
    if (st != SF_OK) return st;                                                                \
    SF_CHECK_RANGE(total, col_begin, col_end);                                                 \
    SF_FAIL_IF(nse < 0 || e < 0 || dv < 0, SF_ERR_NEGATIVE_SIZE);                             \
    SF_FAIL_IF(ldq < e || ldg < dv || lddk < e || lddv < dv, SF_ERR_INVALID_ARGUMENT);        \
    if (col_end == col_begin) return SF_OK;                                                    \
    SF_FAIL_IF(crow_t == NULL, SF_ERR_NULL_POINTER);                                           \
    SF_NEED2(dk, total, e);                                                                    \
    SF_NEED2(dv_out, total, dv);                                                               \
    SF_NEED(row_t, nse);                                                                       \
    SF_NEED(perm, nse);                                                                        \
    SF_NEED2(ds, nbatch, nse);                                                                 \
    SF_NEED2(w, nbatch, nse);                                                                  \
    SF_NEED2(q, total_rows, e);                                                                \
    SF_NEED2(g, total_rows, dv);                                                               \
    for (int64_t c = col_begin; c < col_end; ++c) {                                            \
      const int64_t b = c / ncols, j = c - b * ncols;                                          \
      int64_t lo, hi;                                                                          \
      st = sf_row_span(&lo, &hi, crow_t, j, nse);                                              \
      if (st != SF_OK) return st;                                                              \
      const T *qb = q + b * nrows * ldq, *gb = g + b * nrows * ldg;                            \
      const T *dsb = ds + b * nse, *wb = w + b * nse;                                          \
      T *restrict dkc = dk + c * lddk, *restrict dvc = dv_out + c * lddv;                      \
      for (int64_t t = 0; t < e; ++t) dkc[t] = 0;                                              \
      for (int64_t t = 0; t < dv; ++t) dvc[t] = 0;                                             \
      for (int64_t a = lo; a < hi; ++a) {                                                      \
        const int64_t i = row_t[a], p = perm[a];                                               \
        if (i < 0 || i >= nrows || p < 0 || p >= nse) return SF_ERR_INDEX_OUT_OF_RANGE;        \
      }                                                                                        \
      int64_t a = lo;                                                                          \
      for (; a + 4 <= hi; a += 4) { /* four rows of Q and g per pass, as the forward */        \
        const int64_t *ra = row_t + a, *pa = perm + a;                                         \
        const T *restrict q0 = qb + ra[0] * ldq, *restrict q1 = qb + ra[1] * ldq;              \
        const T *restrict q2 = qb + ra[2] * ldq, *restrict q3 = qb + ra[3] * ldq;              \
        const T *restrict g0 = gb + ra[0] * ldg, *restrict g1 = gb + ra[1] * ldg;              \
        const T *restrict g2 = gb + ra[2] * ldg, *restrict g3 = gb + ra[3] * ldg;              \
        const T d0 = dsb[pa[0]], d1 = dsb[pa[1]], d2 = dsb[pa[2]], d3 = dsb[pa[3]];            \
        const T w0 = wb[pa[0]], w1 = wb[pa[1]], w2 = wb[pa[2]], w3 = wb[pa[3]];                \
        for (int64_t t = 0; t < e; ++t)                                                        \
          dkc[t] += (d0 * q0[t] + d1 * q1[t]) + (d2 * q2[t] + d3 * q3[t]);                     \
        for (int64_t t = 0; t < dv; ++t)                                                       \
          dvc[t] += (w0 * g0[t] + w1 * g1[t]) + (w2 * g2[t] + w3 * g3[t]);                     \
      }                                                                                        \
      for (; a < hi; ++a) {                                                                    \
        const T d = dsb[perm[a]], wp = wb[perm[a]];                                            \
        const T *restrict qi = qb + row_t[a] * ldq, *restrict gi = gb + row_t[a] * ldg;        \
        for (int64_t t = 0; t < e; ++t) dkc[t] += d * qi[t];                                   \
        for (int64_t t = 0; t < dv; ++t) dvc[t] += wp * gi[t];                                 \
      }                                                                                        \
      for (int64_t t = 0; t < e; ++t) dkc[t] *= scale;                                         \
    }                                                                                          \
    return SF_OK;                                                                              \
  }

SF_DEFINE_ATTENTION(float, f32, expf, logf)
SF_DEFINE_ATTENTION(double, f64, exp, log)

/* ---- index-only functions ------------------------------------------------------ */

sf_status sf_csr_spgemm_bounds(int64_t *row_bound, const int64_t *crow_a, const int64_t *col_a,
                               int64_t m, int64_t k, int64_t nse_a, const int64_t *crow_b,
                               int64_t nse_b, int64_t row_begin, int64_t row_end) {
  SF_CHECK_RANGE(m, row_begin, row_end);
  SF_FAIL_IF(k < 0 || nse_a < 0 || nse_b < 0, SF_ERR_NEGATIVE_SIZE);
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(row_bound == NULL || crow_a == NULL || crow_b == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(col_a, nse_a);
  for (int64_t i = row_begin; i < row_end; ++i) {
    int64_t lo, hi, bound = 0;
    sf_status st = sf_row_span(&lo, &hi, crow_a, i, nse_a);
    if (st != SF_OK) return st;
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t j = col_a[p];
      if (j < 0 || j >= k) return SF_ERR_INDEX_OUT_OF_RANGE;
      int64_t blo, bhi;
      st = sf_row_span(&blo, &bhi, crow_b, j, nse_b);
      if (st != SF_OK) return st;
      /* each term is at most nse_b; the sum is kept below INT64_MAX */
      SF_FAIL_IF(bound > INT64_MAX - (bhi - blo), SF_ERR_OVERFLOW);
      bound += bhi - blo;
    }
    row_bound[i] = bound;
  }
  return SF_OK;
}

sf_status sf_csr_transpose(int64_t *crow_t, int64_t *col_t, int64_t *perm, const int64_t *crow,
                           const int64_t *col, int64_t nrows, int64_t ncols, int64_t nse) {
  SF_FAIL_IF(nrows < 0 || ncols < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(crow_t == NULL || crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(col_t, nse);
  SF_NEED(perm, nse);
  SF_NEED(col, nse);
  SF_FAIL_IF(crow[0] != 0, SF_ERR_CROW_FIRST);
  SF_FAIL_IF(crow[nrows] != nse, SF_ERR_CROW_LAST);
  /* Counting sort by column: stable, so each transposed row lists its
   * original rows in increasing order, i.e. the result is valid CSR. */
  for (int64_t j = 0; j <= ncols; ++j) crow_t[j] = 0;
  for (int64_t i = 0; i < nrows; ++i) {
    SF_FAIL_IF(crow[i + 1] < crow[i] || crow[i + 1] > nse, SF_ERR_CROW_DECREASING);
  }
  for (int64_t p = 0; p < nse; ++p) {
    const int64_t j = col[p];
    SF_FAIL_IF(j < 0 || j >= ncols, SF_ERR_INDEX_OUT_OF_RANGE);
    ++crow_t[j + 1];
  }
  for (int64_t j = 0; j < ncols; ++j) crow_t[j + 1] += crow_t[j];
  /* crow_t[j] serves as row j's write cursor, then is shifted back. */
  for (int64_t i = 0; i < nrows; ++i) {
    for (int64_t p = crow[i]; p < crow[i + 1]; ++p) {
      const int64_t j = col[p];
      const int64_t dst = crow_t[j]++;
      col_t[dst] = i;
      perm[dst] = p;
    }
  }
  /* crow_t[j] now holds the end of row j: shift back to the starts. */
  for (int64_t j = ncols; j > 0; --j) crow_t[j] = crow_t[j - 1];
  crow_t[0] = 0;
  return SF_OK;
}
