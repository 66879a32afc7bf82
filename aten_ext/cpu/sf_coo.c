/* sf_coo.c -- COO index validation, linearisation and the coalescing plan. */
#include <stdlib.h>
#include <string.h>

#include "sf_internal.h"

sf_status sf_coo_check(sf_site *site, int *is_coalesced, const int64_t *indices,
                       int64_t sparse_dim, int64_t nse, const int64_t *sizes) {
  SF_FAIL_IF(sparse_dim < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(sizes, sparse_dim);
  SF_NEED2(indices, sparse_dim, nse);
  int64_t numel = 0;
  sf_status status = sf_sizes_numel(&numel, sizes, sparse_dim);
  if (status != SF_OK) return status;
  /* With no sparse dims there is one position: every element has linear
   * index 0, so nse > 1 means duplicates (valid, not coalesced). */
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
  SF_NEED2(indices, sparse_dim, nse);
  SF_NEED(sizes, sparse_dim);
  int64_t numel = 0;
  sf_status status = sf_sizes_numel(&numel, sizes, sparse_dim);
  if (status != SF_OK) return status;
  if (sparse_dim == 0) {
    for (int64_t k = 0; k < nse; ++k) linear[k] = 0;
    return SF_OK;
  }
  /* Row by row over the index matrix: contiguous reads. Bounds are checked
   * on the way (an unchecked index would land on another element); a row is
   * checked before it is used, so every partial product stays < numel. */
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
  SF_NEED2(indices, sparse_dim, nse);
  SF_NEED(linear, nse);
  SF_NEED(sizes, sparse_dim);
  int64_t numel = 0;
  sf_status status = sf_sizes_numel(&numel, sizes, sparse_dim);
  if (status != SF_OK) return status;
  for (int64_t k = 0; k < nse; ++k) {
    SF_FAIL_IF(linear[k] < 0, SF_ERR_INDEX_NEGATIVE);
    SF_FAIL_IF(linear[k] >= numel, SF_ERR_INDEX_OUT_OF_RANGE);
  }
  if (sparse_dim == 0 || nse == 0) return SF_OK;
  /* The last dimension varies fastest; peel dimensions off the back. Here
   * numel > 0, so no size is 0. Row 0 holds the running quotient (linear
   * may be row 0 itself: in place). */
  int64_t *rest = indices;
  if (rest != linear) memmove(rest, linear, (size_t)nse * sizeof *rest);
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

/* ---- coalescing plan: stable LSD radix sort of (key, position) pairs ----- */

#define SF_RADIX_BITS 11
#define SF_RADIX_SIZE (1 << SF_RADIX_BITS)
#define SF_RADIX_MASK ((uint64_t)SF_RADIX_SIZE - 1)
#define SF_RADIX_MAX_PASSES ((63 + SF_RADIX_BITS - 1) / SF_RADIX_BITS) /* keys >= 0 */

/* One counting pass on digit `shift`: (src_key, src_pos) -> (dst_key,
 * dst_pos), stable. src_pos == NULL stands for positions 0..n-1. `offset`
 * holds the exclusive prefix sums of the digit's histogram (consumed). */
static void radix_pass(int64_t *dst_key, int64_t *dst_pos, const int64_t *src_key,
                       const int64_t *src_pos, int64_t n, int shift, int64_t *offset) {
  if (src_pos == NULL) {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t key = src_key[k];
      const int64_t o = offset[((uint64_t)key >> shift) & SF_RADIX_MASK]++;
      dst_key[o] = key;
      dst_pos[o] = k;
    }
  } else {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t key = src_key[k];
      const int64_t o = offset[((uint64_t)key >> shift) & SF_RADIX_MASK]++;
      dst_key[o] = key;
      dst_pos[o] = src_pos[k];
    }
  }
}

/* Run-length pass over sorted (key, position) pairs. */
static int64_t run_lengths(int64_t *unique_linear, int64_t *segment, const int64_t *key,
                           const int64_t *pos, int64_t n) {
  int64_t count = 0;
  for (int64_t k = 0; k < n; ++k) {
    if (k == 0 || key[k] != key[k - 1]) unique_linear[count++] = key[k];
    segment[pos[k]] = count - 1;
  }
  return count;
}

/* Sort and run-length encode n >= 2 non-negative keys <= max_key that are
 * not sorted. The output buffers double as one half of the ping-pong. */
static sf_status coalesce_by_radix(int64_t *unique_linear, int64_t *segment, int64_t *nse_out,
                                   const int64_t *linear, int64_t n, int64_t max_key) {
  if ((uint64_t)n > (uint64_t)(SIZE_MAX / (2 * sizeof(int64_t)))) return SF_ERR_NO_MEMORY;
  int passes = 0; /* digits that max_key needs */
  while (passes < SF_RADIX_MAX_PASSES && ((uint64_t)max_key >> (passes * SF_RADIX_BITS)) != 0) {
    ++passes;
  }
  int64_t *scratch = malloc((size_t)n * 2 * sizeof *scratch);
  int64_t *hist = calloc((size_t)passes * SF_RADIX_SIZE, sizeof *hist);
  if (scratch == NULL || hist == NULL) {
    free(scratch);
    free(hist);
    return SF_ERR_NO_MEMORY;
  }
  int64_t *s_key = scratch, *s_pos = scratch + n;   /* S: scratch */
  int64_t *o_key = unique_linear, *o_pos = segment; /* O: the outputs */

  /* Every digit's histogram in one read of the keys. */
  for (int64_t k = 0; k < n; ++k) {
    const uint64_t key = (uint64_t)linear[k];
    for (int p = 0; p < passes; ++p) {
      hist[p * SF_RADIX_SIZE + ((key >> (p * SF_RADIX_BITS)) & SF_RADIX_MASK)]++;
    }
  }
  /* Skip digits shared by every key; prefix sums for the others. */
  int active[SF_RADIX_MAX_PASSES];
  int nactive = 0;
  for (int p = 0; p < passes; ++p) {
    int64_t *h = hist + p * SF_RADIX_SIZE;
    int uniform = 0;
    int64_t sum = 0;
    for (int b = 0; b < SF_RADIX_SIZE; ++b) {
      const int64_t c = h[b];
      uniform |= (c == n);
      h[b] = sum;
      sum += c;
    }
    if (!uniform) active[nactive++] = p;
  }

  /* The first pass reads `linear` itself (positions implicit) and the
   * destinations alternate so that the last pass lands in S, from which the
   * run-length pass writes the outputs. If an output aliases `linear`, the
   * keys are copied to S first and the first pass goes to O instead. */
  const int aliased = (unique_linear == linear || segment == linear);
  const int64_t *src_key = linear, *src_pos = NULL;
  int to_s = (nactive % 2 == 1); /* destination of the first pass */
  if (aliased) {
    memcpy(s_key, linear, (size_t)n * sizeof *s_key);
    src_key = s_key;
    to_s = 0;
  }
  for (int a = 0; a < nactive; ++a) {
    const int p = active[a];
    int64_t *dst_key = to_s ? s_key : o_key;
    int64_t *dst_pos = to_s ? s_pos : o_pos;
    radix_pass(dst_key, dst_pos, src_key, src_pos, n, p * SF_RADIX_BITS,
               hist + p * SF_RADIX_SIZE);
    src_key = dst_key;
    src_pos = dst_pos;
    to_s = !to_s;
  }
  /* Bring the sorted pairs to S (needed only when aliased, or with no active
   * pass, which keys that are not all equal cannot have). */
  if (src_key != s_key) memcpy(s_key, src_key, (size_t)n * sizeof *s_key);
  if (src_pos == NULL) {
    for (int64_t k = 0; k < n; ++k) s_pos[k] = k;
  } else if (src_pos != s_pos) {
    memcpy(s_pos, src_pos, (size_t)n * sizeof *s_pos);
  }
  *nse_out = run_lengths(unique_linear, segment, s_key, s_pos, n);
  free(hist);
  free(scratch);
  return SF_OK;
}

sf_status sf_coalesce_plan(int64_t *unique_linear, int64_t *segment, int64_t *nse_out,
                           const int64_t *linear, int64_t nse) {
  SF_FAIL_IF(nse_out == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(unique_linear, nse);
  SF_NEED(segment, nse);
  SF_NEED(linear, nse);
  int increasing = 1, non_decreasing = 1;
  int64_t max_key = 0;
  for (int64_t k = 0; k < nse; ++k) {
    const int64_t key = linear[k];
    SF_FAIL_IF(key < 0, SF_ERR_INDEX_NEGATIVE);
    if (k > 0) {
      increasing &= (key > linear[k - 1]);
      non_decreasing &= (key >= linear[k - 1]);
    }
    if (key > max_key) max_key = key;
  }
  if (increasing) { /* already coalesced: identity plan, linear time */
    if (unique_linear != linear) memcpy(unique_linear, linear, (size_t)nse * sizeof *linear);
    for (int64_t k = 0; k < nse; ++k) segment[k] = k;
    *nse_out = nse;
    return SF_OK;
  }
  if (non_decreasing) { /* sorted with duplicates: one run-length pass */
    int64_t count = 0;
    for (int64_t k = 0; k < nse; ++k) {
      const int64_t key = linear[k]; /* read before segment[k] is written */
      if (count == 0 || unique_linear[count - 1] != key) unique_linear[count++] = key;
      segment[k] = count - 1;
    }
    *nse_out = count;
    return SF_OK;
  }
  return coalesce_by_radix(unique_linear, segment, nse_out, linear, nse, max_key);
}
