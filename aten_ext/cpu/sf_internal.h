/* sf_internal.h -- helpers shared by the C core's files (not installed). */
#ifndef SF_INTERNAL_H
#define SF_INTERNAL_H

#include "../sparsefill_core.h"

/* Return `status` from the enclosing function when `cond` holds. */
#define SF_FAIL_IF(cond, status) \
  do {                           \
    if (cond) return (status);   \
  } while (0)

/* A pointer argument may be NULL only when its length is 0. */
#define SF_NEED(ptr, len) SF_FAIL_IF((ptr) == NULL && (len) > 0, SF_ERR_NULL_POINTER)

/* The same for a length a * b (a, b >= 0), without forming the product,
 * which could overflow int64 for arbitrary arguments. */
#define SF_NEED2(ptr, a, b) \
  SF_FAIL_IF((ptr) == NULL && (a) > 0 && (b) > 0, SF_ERR_NULL_POINTER)

/* The element types of the typed entry points, as bits of a template's type
 * set (sf_instantiate.h): a function `name` of a template file is compiled
 * as name_f32, name_f64 and name_i64 (SF_FN). */
#define SF_F32 1
#define SF_F64 2
#define SF_I64 4
#define SF_CAT_(a, b) a##_##b
#define SF_CAT(a, b) SF_CAT_(a, b)

/* The inner loops of the products and attention are axpy and dot products
 * over rows of a dense operand: with GCC on x86-64, each hot kernel is
 * compiled for AVX-512, AVX2+FMA and the baseline, and the loader picks one
 * for the machine (ifunc). Elsewhere the baseline build alone. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SF_CLONES
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

/* Row i of a CSR pattern whose positions the caller counts (the per-row order
 * kernels): its span within nse, and its columns in [0, ncols) and strictly
 * increasing. */
static inline sf_status sf_sorted_row(int64_t *lo, int64_t *hi, const int64_t *crow,
                                      const int64_t *col, int64_t i, int64_t nse,
                                      int64_t ncols) {
  const int64_t b = crow[i], e = crow[i + 1];
  if (e < b) return SF_ERR_CROW_DECREASING;
  if (b < 0 || e > nse) return SF_ERR_INDEX_OUT_OF_RANGE;
  for (int64_t p = b; p < e; ++p) {
    if (col[p] < 0) return SF_ERR_INDEX_NEGATIVE;
    if (col[p] >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
    if (p > b && col[p] <= col[p - 1]) return SF_ERR_COL_UNSORTED;
  }
  *lo = b;
  *hi = e;
  return SF_OK;
}

static inline void sf_set_site(sf_site *site, int64_t position, int64_t dim, int64_t value) {
  if (site != NULL) {
    site->position = position;
    site->dim = dim;
    site->value = value;
  }
}

#endif /* SF_INTERNAL_H */
