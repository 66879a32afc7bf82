/*
 * sf_reduce.c -- segmented reductions and softmax with a fill (RFC.md#reductions-and-softmax).
 *
 * A segment is one slice being reduced: the stored rows
 * values[seg_ptr[s] .. seg_ptr[s+1]) (each row `w` wide: the flattened
 * dense part) plus n - (seg_ptr[s+1] - seg_ptr[s]) unspecified elements that
 * all equal the segment's fill row fill[s * fill_stride ..]. Every function
 * handles the segments [seg_begin, seg_end), so the C++ layer can split them
 * across threads; segments write disjoint outputs.
 *
 * The value formulas follow the dense definition literally (no reordering
 * that changes NaN or infinity behaviour): an unspecified element takes part
 * only when the slice has one, so a fully stored slice never sees its fill.
 */
#include <math.h>
#include <string.h>

#include "sf_internal.h"
#include "sf_softmax.h"

/* Shared argument checks: segment range, widths, counts. */
static sf_status check_segments(const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end,
                                int64_t w, int64_t n) {
  if (seg_ptr == NULL) return SF_ERR_NULL_POINTER;
  if (seg_begin < 0 || seg_end < seg_begin || w < 0 || n < 0) return SF_ERR_NEGATIVE_SIZE;
  for (int64_t s = seg_begin; s < seg_end; ++s) {
    const int64_t cnt = seg_ptr[s + 1] - seg_ptr[s];
    if (cnt < 0) return SF_ERR_NOT_COALESCED;
    if (cnt > n) return SF_ERR_INVALID_ARGUMENT; /* more stored than the slice holds */
  }
  return SF_OK;
}

sf_status sf_segment_sort(int64_t *perm, int64_t *seg_ptr, const int64_t *segment, int64_t nse,
                          int64_t nseg) {
  if (seg_ptr == NULL || (nse > 0 && (perm == NULL || segment == NULL))) {
    return SF_ERR_NULL_POINTER;
  }
  if (nse < 0 || nseg < 0) return SF_ERR_NEGATIVE_SIZE;
  for (int64_t s = 0; s <= nseg; ++s) seg_ptr[s] = 0;
  for (int64_t k = 0; k < nse; ++k) {
    if (segment[k] < 0 || segment[k] >= nseg) return SF_ERR_INDEX_OUT_OF_RANGE;
    seg_ptr[segment[k] + 1]++;
  }
  for (int64_t s = 0; s < nseg; ++s) seg_ptr[s + 1] += seg_ptr[s];
  /* seg_ptr[s] is segment s's cursor while placing; shifted back after. */
  for (int64_t k = 0; k < nse; ++k) perm[seg_ptr[segment[k]]++] = k;
  for (int64_t s = nseg; s > 0; --s) seg_ptr[s] = seg_ptr[s - 1];
  seg_ptr[0] = 0;
  return SF_OK;
}

/* ---- per-type kernels (templates/), each compiled once per element type ---- */

#define SF_TEMPLATE "templates/softmax_rule.h"
#define SF_TYPES (SF_F64 | SF_F32)
#include "sf_instantiate.h"

#define SF_TEMPLATE "templates/seg_softmax.h"
#define SF_TYPES (SF_F64 | SF_F32)
#include "sf_instantiate.h"

#define SF_TEMPLATE "templates/seg_reduce.h"
#define SF_TYPES (SF_F64 | SF_F32 | SF_I64)
#include "sf_instantiate.h"
