/*
 * sparsefill_core.h -- the C ABI of the torch_sparsefill kernel core.
 *
 * The core knows nothing of torch: it takes pointers, lengths and sizes and
 * returns an sf_status. It owns the *structure* of sparse tensors (index
 * validation, linearisation, coalescing plans, COO <-> CSR, pattern merges
 * with fill substitution). Per-value arithmetic is done by the caller.
 *
 * Conventions (GraphBLAS style):
 *  - every function returns SF_OK (0) or a negative sf_status;
 *  - outputs come first and are written through pointers; the caller owns
 *    all memory and sizes output buffers as each contract says;
 *  - COO indices are row-major [sparse_dim x nse] int64 (torch's layout);
 *  - "linear index" is the row-major position of an element over the sparse
 *    dimensions only: for sizes (s0, s1, s2), l = (i0 * s1 + i1) * s2 + i2;
 *  - "sorted" means strictly increasing linear indices (coalesced: sorted and
 *    without duplicates);
 *  - on a validation error, *site (if not NULL) says where: the element
 *    position, the dimension (or -1) and the offending value;
 *  - all functions are deterministic and single-threaded; n == 0 is valid.
 */
#ifndef SPARSEFILL_CORE_H
#define SPARSEFILL_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sf_status {
  SF_OK = 0,
  SF_ERR_NULL_POINTER = -1,       /* a required pointer is NULL               */
  SF_ERR_NEGATIVE_SIZE = -2,      /* a size, length or count is negative       */
  SF_ERR_OVERFLOW = -3,           /* a product of sizes overflows int64        */
  SF_ERR_INDEX_NEGATIVE = -4,     /* an index is < 0                           */
  SF_ERR_INDEX_OUT_OF_RANGE = -5, /* an index is >= the size of its dimension  */
  SF_ERR_CROW_FIRST = -6,         /* crow_indices[0] != 0                      */
  SF_ERR_CROW_DECREASING = -7,    /* crow_indices[i+1] < crow_indices[i]       */
  SF_ERR_CROW_LAST = -8,          /* crow_indices[nrows] != nse                */
  SF_ERR_COL_UNSORTED = -9,       /* columns of a row not strictly increasing  */
  SF_ERR_NOT_COALESCED = -10,     /* a sorted, duplicate-free input was not    */
  SF_ERR_NO_MEMORY = -11,         /* a scratch allocation failed               */
  SF_ERR_INVALID_ARGUMENT = -12   /* any other contract violation              */
} sf_status;

/* Where a validation error was found. Fields are -1 when not applicable. */
typedef struct sf_site {
  int64_t position; /* element (column of indices), or row for crow errors */
  int64_t dim;      /* sparse dimension of the bad index                   */
  int64_t value;    /* the offending value                                  */
} sf_site;

/* One operand of the union in chunks (sf_union_cuts, sf_union_count_range,
 * sf_union_write_range): indices [sparse_dim x nse] row-major; [begin, end)
 * the chunk (from sf_union_cuts). For the write pass, optionally: src [nse of the
 * union] receives each union element's position in this operand or -1;
 * values_out [nse of the union rows of row_bytes] receives its values row,
 * or fill_row where it stores none (values: nse rows of row_bytes). */
typedef struct sf_union_side {
  const int64_t *indices;
  int64_t nse;
  int64_t begin, end;
  int64_t *src;
  void *values_out;
  const void *values;
  const void *fill_row;
  size_t row_bytes;
} sf_union_side;

/* The reduction of the slot functions (sf_slot_partial_*, sf_slot_finish_*,
 * sf_slot_runs_*). */
typedef enum { SF_SLOT_SUM = 0, SF_SLOT_PROD = 1, SF_SLOT_MAX = 2, SF_SLOT_MIN = 3 } sf_slot_op;

/* The semiring products' monoid and binary op (sf_csr_semiring_mv_*,
 * sf_csr_semiring_vm_*): the names of torch_sparsefill/graph/operators.py,
 * which maps them to these codes (NATIVE_MONOIDS, NATIVE_OPS). */
typedef enum {
  SF_MONOID_PLUS = 0, SF_MONOID_TIMES = 1, SF_MONOID_MIN = 2, SF_MONOID_MAX = 3,
  SF_MONOID_LOR = 4, SF_MONOID_LAND = 5, SF_MONOID_ANY = 6
} sf_monoid;
typedef enum {
  SF_OP_PLUS = 0, SF_OP_MINUS = 1, SF_OP_RMINUS = 2, SF_OP_TIMES = 3, SF_OP_DIV = 4,
  SF_OP_RDIV = 5, SF_OP_MIN = 6, SF_OP_MAX = 7, SF_OP_FIRST = 8, SF_OP_SECOND = 9,
  SF_OP_PAIR = 10, SF_OP_LAND = 11, SF_OP_LOR = 12, SF_OP_LXOR = 13, SF_OP_EQ = 14,
  SF_OP_NE = 15, SF_OP_LT = 16, SF_OP_GT = 17, SF_OP_LE = 18, SF_OP_GE = 19
} sf_binop;

/* Every entry point: its contract, then its prototype (for a typed entry,
 * one per element type: _f32, _f64, _i64). Written from the one list of the
 * native ops and core entries, tools/codegen/native.yaml. */
#include "generated/core_entries.h"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPARSEFILL_CORE_H */
