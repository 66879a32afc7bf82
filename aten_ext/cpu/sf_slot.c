/*
 * sf_slot.c -- reductions and softmax by output slot (RFC.md#reductions-and-softmax): for reducing
 * dims that the stored order does not group (sum along dim 0 of a matrix,
 * softmax along COO dim 0), in stored order, with no reordering of the stored
 * elements. Stored row k belongs to slot slot[k]; a slot is one slice of n
 * elements, the ones not stored equal to the fill. The contracts and phases
 * are in sparsefill_core.h; the formulas are sf_reduce.c's (the fill only
 * where a slice has an unspecified element).
 */
#include <math.h>
#include <string.h>

#include "sf_internal.h"
#include "sf_softmax.h"

/* Shared argument checks of the two phases. */
static sf_status check_slots(int64_t lo, int64_t hi, int64_t nslots, int64_t w, int op,
                             int has_prod) {
  if (lo < 0 || hi < lo || nslots < 0 || w < 0) return SF_ERR_NEGATIVE_SIZE;
  if (op < SF_SLOT_SUM || op > SF_SLOT_MIN || (op == SF_SLOT_PROD && !has_prod)) {
    return SF_ERR_INVALID_ARGUMENT;
  }
  return SF_OK;
}

/* Columns of a dense part folded at once by sf_slot_runs_* (registers on the stack). */
#define SF_RUN_COLS 32

/* ---- softmax by output slot (slices the stored order does not group) ------------ */

/* Phases of sf_slot_softmax_* (contracts in sparsefill_core.h): the maximum of
 * each slot comes from sf_slot_partial_*(SF_SLOT_MAX) and is finished here with
 * the fill; each part then sums the exponentials of its rows into its own
 * accumulators (double), the parts are folded in part order with the fill, and
 * one pass over the rows writes the outputs. Same formulas as sf_seg_softmax_*:
 * m = max(values, fill if u > 0) (NaN wins), z = sum exp(x - m) + u exp(f - m),
 * the fill only where u > 0. */
static sf_status check_slot_rows(const int64_t *slot, int64_t k_begin, int64_t k_end,
                                 int64_t nslots, int64_t w) {
  if (k_begin < 0 || k_end < k_begin || nslots < 0 || w < 0) return SF_ERR_NEGATIVE_SIZE;
  if (k_end > k_begin && slot == NULL) return SF_ERR_NULL_POINTER;
  for (int64_t k = k_begin; k < k_end; ++k) {
    if ((uint64_t)slot[k] >= (uint64_t)nslots) return SF_ERR_INDEX_OUT_OF_RANGE;
  }
  return SF_OK;
}

static sf_status check_slot_range(int64_t s_begin, int64_t s_end, int64_t nslots, int64_t w,
                                  int64_t nparts, int64_t n, int64_t fill_stride) {
  if (s_begin < 0 || s_end < s_begin || nslots < 0 || w < 0 || nparts < 0 || n < 0) {
    return SF_ERR_NEGATIVE_SIZE;
  }
  if (s_end > nslots || (fill_stride != 0 && fill_stride != w)) return SF_ERR_INVALID_ARGUMENT;
  return SF_OK;
}

/* ---- per-type kernels (templates/), each compiled once per element type ---- */

#define SF_TEMPLATE "templates/slot_reduce.h"
#define SF_TYPES (SF_F64 | SF_F32 | SF_I64)
#include "sf_instantiate.h"

#define SF_TEMPLATE "templates/softmax_rule.h"
#define SF_TYPES (SF_F64 | SF_F32)
#include "sf_instantiate.h"

#define SF_TEMPLATE "templates/slot_softmax.h"
#define SF_TYPES (SF_F64 | SF_F32)
#include "sf_instantiate.h"
