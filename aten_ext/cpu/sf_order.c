/* sf_order.c -- per-lane selection of the k best stored values of CSR rows
 * in torch's order, ties by position, and its merge with each row's fill
 * block; each row's full sort with the block placed (contracts in
 * sparsefill_core.h). */
#include <math.h>

#include "sf_internal.h"

#define SF_TEMPLATE "templates/lane_topk.h"
#define SF_TYPES (SF_F64 | SF_F32 | SF_I64)
#include "sf_instantiate.h"
