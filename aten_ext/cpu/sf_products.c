/* sf_products.c -- fill-aware sparse matrix products on CSR operands.
 *
 * A (m x k) with fill F is A0 + F, where A0 holds `values - F` on A's pattern
 * with fill 0. For a dense B (k x n):
 *     C[i, :] = sum_{p in row i} (v_p - F[i, j_p]) B[j_p, :] + (F B)[i, :]
 * and F B is a rank-one term: a scalar or per-row fill r gives r_i (1^T B),
 * a per-column fill c gives (c^T B) on every row. The kernels below write
 * that correction row first and accumulate the sparse part on top, so C is
 * written once, in the same pass (RFC.md#products).
 *
 * Every function works on the rows [row_begin, row_end) only, so that the
 * caller can run disjoint row ranges on several threads. Index data is
 * checked as it is read (a row pointer outside [0, nse] or a column outside
 * [0, ncols) returns an error), so malformed input never reads out of bounds.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sf_internal.h"

/* The block read of max |values| (below) stays out of the kernels' inner
 * loops: inlined, it changed how GCC compiled the SpMV's loop (its index
 * checks vectorised into extracts; 1.7x slower). */
#if defined(__GNUC__)
#define SF_NOINLINE __attribute__((noinline))
#else
#define SF_NOINLINE
#endif

/* Stored elements per block of sf_absmax_block (8 or 16 KB, well inside L1). */
#define SF_ABSMAX_BLOCK 2048

/* ---- type-generic kernels (templates/), each compiled once per element type -- */

#define SF_TEMPLATE "templates/dot.h"
#define SF_TYPES (SF_F32 | SF_F64)
#include "sf_instantiate.h"

#define SF_TEMPLATE "templates/absmax.h"
#define SF_TYPES (SF_F32 | SF_F64)
#include "sf_instantiate.h"

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

#define SF_TEMPLATE "templates/products.h"
#define SF_TYPES (SF_F32 | SF_F64)
#include "sf_instantiate.h"

/* ---- the range facts of a product's fast path ------------------------------------
 *
 * max |x| (NaN if x holds one) and the sum of a dense block in one read,
 * for the test that picks a product's fast path (RFC.md#non-finite-products). The
 * sum runs in eight double lanes (float's too): no worse than a float
 * cascade for the sizes a product's operand has, and deterministic. */
#define SF_TEMPLATE "templates/facts.h"
#define SF_TYPES (SF_F32 | SF_F64)
#include "sf_instantiate.h"

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
