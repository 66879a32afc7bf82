/* sf_status.c -- status names and size arithmetic. */
#include "sf_internal.h"

const char *sf_status_string(sf_status status) {
  switch (status) {
    case SF_OK: return "success";
    case SF_ERR_NULL_POINTER: return "a required pointer is NULL";
    case SF_ERR_NEGATIVE_SIZE: return "a size or length is negative";
    case SF_ERR_OVERFLOW: return "the product of the sizes overflows int64";
    case SF_ERR_INDEX_NEGATIVE: return "an index is negative";
    case SF_ERR_INDEX_OUT_OF_RANGE: return "an index is out of range";
    case SF_ERR_CROW_FIRST: return "crow_indices[0] is not 0";
    case SF_ERR_CROW_DECREASING: return "crow_indices decreases";
    case SF_ERR_CROW_LAST: return "crow_indices[-1] is not the number of stored elements";
    case SF_ERR_COL_UNSORTED: return "column indices of a row are not strictly increasing";
    case SF_ERR_NOT_COALESCED: return "indices are not sorted and unique (not coalesced)";
    case SF_ERR_NO_MEMORY: return "out of memory";
    case SF_ERR_INVALID_ARGUMENT: return "invalid argument";
  }
  return "unknown status";
}

sf_status sf_sizes_numel(int64_t *numel, const int64_t *sizes, int64_t ndim) {
  SF_FAIL_IF(numel == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(ndim < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(sizes, ndim);
  /* Overflow is judged on the non-zero sizes, so that (0, 2^40, 2^40) is
   * reported too: such sizes cannot be linearised even if numel is 0. */
  int64_t product = 1;
  int has_zero = 0;
  for (int64_t d = 0; d < ndim; ++d) {
    SF_FAIL_IF(sizes[d] < 0, SF_ERR_NEGATIVE_SIZE);
    if (sizes[d] == 0) {
      has_zero = 1;
      continue;
    }
    SF_FAIL_IF(product > INT64_MAX / sizes[d], SF_ERR_OVERFLOW);
    product *= sizes[d];
  }
  if (has_zero) product = 0;
  *numel = product;
  return SF_OK;
}
