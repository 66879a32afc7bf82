/* sf_merge.c -- pattern merges: the union plan and fill substitution. */
#include <string.h>

#include "sf_internal.h"

static int strictly_increasing(const int64_t *x, int64_t n) {
  for (int64_t k = 1; k < n; ++k) {
    if (x[k] <= x[k - 1]) return 0;
  }
  return 1;
}

sf_status sf_union_count(int64_t *nse_out, const int64_t *linear_a, int64_t nse_a,
                         const int64_t *linear_b, int64_t nse_b) {
  SF_FAIL_IF(nse_out == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(nse_a < 0 || nse_b < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(linear_a, nse_a);
  SF_NEED(linear_b, nse_b);
  SF_FAIL_IF(!strictly_increasing(linear_a, nse_a) || !strictly_increasing(linear_b, nse_b),
             SF_ERR_NOT_COALESCED);
  int64_t i = 0, j = 0, n = 0;
  while (i < nse_a && j < nse_b) {
    const int64_t a = linear_a[i], b = linear_b[j];
    i += (a <= b);
    j += (b <= a);
    ++n;
  }
  *nse_out = n + (nse_a - i) + (nse_b - j);
  return SF_OK;
}

sf_status sf_union_plan(int64_t *nse_out, int64_t *linear_out, int64_t *src_a, int64_t *src_b,
                        const int64_t *linear_a, int64_t nse_a, const int64_t *linear_b,
                        int64_t nse_b) {
  SF_FAIL_IF(nse_out == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(nse_a < 0 || nse_b < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(linear_a, nse_a);
  SF_NEED(linear_b, nse_b);
  /* The outputs hold nse_a + nse_b (the sum is not formed: it could overflow). */
  const int64_t any = (nse_a > 0 || nse_b > 0);
  SF_NEED(linear_out, any);
  SF_NEED(src_a, any);
  SF_NEED(src_b, any);
  SF_FAIL_IF(!strictly_increasing(linear_a, nse_a) || !strictly_increasing(linear_b, nse_b),
             SF_ERR_NOT_COALESCED);
  int64_t i = 0, j = 0, n = 0;
  while (i < nse_a && j < nse_b) {
    const int64_t a = linear_a[i], b = linear_b[j];
    linear_out[n] = a <= b ? a : b;
    src_a[n] = a <= b ? i : -1;
    src_b[n] = b <= a ? j : -1;
    i += (a <= b);
    j += (b <= a);
    ++n;
  }
  for (; i < nse_a; ++i, ++n) {
    linear_out[n] = linear_a[i];
    src_a[n] = i;
    src_b[n] = -1;
  }
  for (; j < nse_b; ++j, ++n) {
    linear_out[n] = linear_b[j];
    src_a[n] = -1;
    src_b[n] = j;
  }
  *nse_out = n;
  return SF_OK;
}

/* One copy loop per common row width, so that the compiler inlines memcpy. */
#define SF_GATHER_FIXED(BYTES)                                                    \
  for (int64_t k = 0; k < n; ++k) {                                               \
    const int64_t s = src[k];                                                     \
    memcpy(dst + k * (BYTES), s < 0 ? fill : base + s * (BYTES), (BYTES));       \
  }

sf_status sf_gather_rows_with_fill(void *out, const void *values, int64_t nse_values,
                                   const void *fill_row, const int64_t *src, int64_t n,
                                   size_t row_bytes) {
  SF_FAIL_IF(n < 0 || nse_values < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(src, n);
  if (n == 0 || row_bytes == 0) {
    for (int64_t k = 0; k < n; ++k) SF_FAIL_IF(src[k] >= nse_values, SF_ERR_INDEX_OUT_OF_RANGE);
    return SF_OK;
  }
  SF_FAIL_IF(out == NULL || fill_row == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(values, nse_values);
  for (int64_t k = 0; k < n; ++k) SF_FAIL_IF(src[k] >= nse_values, SF_ERR_INDEX_OUT_OF_RANGE);
  char *dst = out;
  const char *base = values;
  const char *fill = fill_row;
  switch (row_bytes) {
    case 1: SF_GATHER_FIXED(1) break;
    case 2: SF_GATHER_FIXED(2) break;
    case 4: SF_GATHER_FIXED(4) break;
    case 8: SF_GATHER_FIXED(8) break;
    case 16: SF_GATHER_FIXED(16) break;
    default:
      for (int64_t k = 0; k < n; ++k) {
        const int64_t s = src[k];
        memcpy(dst + (size_t)k * row_bytes, s < 0 ? fill : base + (size_t)s * row_bytes,
               row_bytes);
      }
  }
  return SF_OK;
}
