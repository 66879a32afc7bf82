/* sf_attention.c -- fused sparse attention on a CSR pattern and its backward
 * (sparsefill_core.h, "products"), over row (and column) ranges for the
 * caller's threads.
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
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sf_internal.h"

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

#define SF_TEMPLATE "templates/dot.h"
#define SF_TYPES (SF_F32 | SF_F64)
#include "sf_instantiate.h"

#define SF_TEMPLATE "templates/attention.h"
#define SF_TYPES (SF_F32 | SF_F64)
#include "sf_instantiate.h"
