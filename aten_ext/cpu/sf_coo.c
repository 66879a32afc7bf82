/* sf_coo.c -- COO index validation, linearisation and the coalescing plan. */
#include <stdlib.h>
#include <string.h>

#include "sf_internal.h"

sf_status sf_coo_check(sf_site *site, int *is_coalesced, const int64_t *indices,
                       int64_t sparse_dim, int64_t nse, const int64_t *sizes) {
  SF_FAIL_IF(sparse_dim < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(sizes, sparse_dim);
  SF_NEED(indices, sparse_dim * nse);
  int64_t numel = 0;
  sf_status status = sf_sizes_numel(&numel, sizes, sparse_dim);
  if (status != SF_OK) return status;
  /* With no sparse dims there is one position: at most one element, unless
   * duplicated (then uncoalesced). */
  int coalesced = 1;
  int64_t previous = -1;
  for (int64_t k = 0; k < nse; ++k) {
    int64_t linear = 0;
    for (int64_t d = 0; d < sparse_dim; ++d) {
      const int64_t i = indices[d * nse + k];
      if (i < 0) {
        sf_set_site(site, k, d, i);
        return SF_ERR_INDEX_NEGATIVE;
      }
      if (i >= sizes[d]) {
        sf_set_site(site, k, d, i);
        return SF_ERR_INDEX_OUT_OF_RANGE;
      }
      linear = linear * sizes[d] + i; /* < numel: cannot overflow */
    }
    if (linear <= previous) coalesced = 0;
    previous = linear;
  }
  if (is_coalesced != NULL) *is_coalesced = coalesced;
  return SF_OK;
}

sf_status sf_coo_linearize(int64_t *linear, const int64_t *indices, int64_t sparse_dim,
                           int64_t nse, const int64_t *sizes) {
  SF_FAIL_IF(sparse_dim < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(linear, nse);
  SF_NEED(indices, sparse_dim * nse);
  SF_NEED(sizes, sparse_dim);
  int64_t numel = 0;
  sf_status status = sf_sizes_numel(&numel, sizes, sparse_dim);
  if (status != SF_OK) return status;
  if (sparse_dim == 0) {
    for (int64_t k = 0; k < nse; ++k) linear[k] = 0;
    return SF_OK;
  }
  /* Row by row over the index matrix: contiguous reads. Bounds are checked
   * on the way (an unchecked index would land on another element). */
  for (int64_t d = 0; d < sparse_dim; ++d) {
    const int64_t *row = indices + d * nse;
    const int64_t size = sizes[d];
    int bad = 0;
    for (int64_t k = 0; k < nse; ++k) bad |= (row[k] < 0) | (row[k] >= size);
    if (bad) {
      for (int64_t k = 0; k < nse; ++k) {
        SF_FAIL_IF(row[k] < 0, SF_ERR_INDEX_NEGATIVE);
        SF_FAIL_IF(row[k] >= size, SF_ERR_INDEX_OUT_OF_RANGE);
      }
    }
    if (d == 0) {
      for (int64_t k = 0; k < nse; ++k) linear[k] = row[k];
    } else {
      for (int64_t k = 0; k < nse; ++k) linear[k] = linear[k] * size + row[k];
    }
  }
  return SF_OK;
}

sf_status sf_coo_delinearize(int64_t *indices, const int64_t *linear, int64_t sparse_dim,
                             int64_t nse, const int64_t *sizes) {
  SF_FAIL_IF(sparse_dim < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(indices, sparse_dim * nse);
  SF_NEED(linear, nse);
  SF_NEED(sizes, sparse_dim);
  int64_t numel = 0;
  sf_status status = sf_sizes_numel(&numel, sizes, sparse_dim);
  if (status != SF_OK) return status;
  for (int64_t k = 0; k < nse; ++k) {
    SF_FAIL_IF(linear[k] < 0 || linear[k] >= numel, SF_ERR_INDEX_OUT_OF_RANGE);
  }
  if (sparse_dim == 0) return SF_OK;
  /* The last dimension varies fastest; peel dimensions off the back. */
  int64_t *rest = indices; /* row 0 holds the running quotient */
  for (int64_t k = 0; k < nse; ++k) rest[k] = linear[k];
  for (int64_t d = sparse_dim - 1; d >= 1; --d) {
    int64_t *row = indices + d * nse;
    const int64_t size = sizes[d];
    for (int64_t k = 0; k < nse; ++k) {
      const int64_t q = rest[k] / size;
      row[k] = rest[k] - q * size;
      rest[k] = q;
    }
  }
  return SF_OK;
}

/* Stable LSD radix sort of positions 0..n-1 by key[], 8 bits a pass; passes
 * whose digit is the same for every key are skipped. Returns the sorted
 * positions in `order` (scratch is n more int64). */
static void radix_order(int64_t *order, int64_t *scratch, const int64_t *key, int64_t n,
                        int64_t max_key) {
  for (int64_t k = 0; k < n; ++k) order[k] = k;
  for (int shift = 0; shift < 64 && (max_key >> shift) != 0; shift += 8) {
    int64_t count[257];
    memset(count, 0, sizeof count);
    for (int64_t k = 0; k < n; ++k) count[((key[order[k]] >> shift) & 0xff) + 1]++;
    int uniform = 0;
    for (int b = 1; b <= 256; ++b) uniform |= (count[b] == n);
    if (uniform) continue;
    for (int b = 0; b < 256; ++b) count[b + 1] += count[b];
    for (int64_t k = 0; k < n; ++k) {
      const int64_t p = order[k];
      scratch[count[(key[p] >> shift) & 0xff]++] = p;
    }
    memcpy(order, scratch, (size_t)n * sizeof *order);
  }
}

sf_status sf_coalesce_plan(int64_t *unique_linear, int64_t *segment, int64_t *nse_out,
                           const int64_t *linear, int64_t nse) {
  SF_FAIL_IF(nse_out == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(unique_linear, nse);
  SF_NEED(segment, nse);
  SF_NEED(linear, nse);
  int sorted = 1;
  int64_t max_key = 0;
  for (int64_t k = 0; k < nse; ++k) {
    SF_FAIL_IF(linear[k] < 0, SF_ERR_INDEX_NEGATIVE);
    if (k > 0 && linear[k] <= linear[k - 1]) sorted = 0;
    if (linear[k] > max_key) max_key = linear[k];
  }
  if (sorted) { /* already coalesced: identity plan, linear time */
    for (int64_t k = 0; k < nse; ++k) {
      unique_linear[k] = linear[k];
      segment[k] = k;
    }
    *nse_out = nse;
    return SF_OK;
  }
  int64_t *order = malloc((size_t)nse * sizeof *order);
  int64_t *scratch = malloc((size_t)nse * sizeof *scratch);
  if (order == NULL || scratch == NULL) {
    free(order);
    free(scratch);
    return SF_ERR_NO_MEMORY;
  }
  radix_order(order, scratch, linear, nse, max_key);
  int64_t count = 0;
  for (int64_t k = 0; k < nse; ++k) {
    const int64_t p = order[k];
    if (count == 0 || unique_linear[count - 1] != linear[p]) unique_linear[count++] = linear[p];
    segment[p] = count - 1;
  }
  free(order);
  free(scratch);
  *nse_out = count;
  return SF_OK;
}
