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

sf_status sf_crow_from_rows(int64_t *crow, const int64_t *rows, int64_t nse, int64_t nrows) {
  SF_FAIL_IF(nse < 0 || nrows < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(rows, nse);
  int64_t k = 0;
  crow[0] = 0;
  for (int64_t i = 0; i < nrows; ++i) {
    while (k < nse && rows[k] == i) ++k;
    crow[i + 1] = k;
  }
  if (k < nse) { /* a row left over: negative, out of range, or unsorted */
    if (rows[k] < 0) return SF_ERR_INDEX_NEGATIVE;
    if (rows[k] >= nrows) return SF_ERR_INDEX_OUT_OF_RANGE;
    return SF_ERR_NOT_COALESCED;
  }
  return SF_OK;
}
