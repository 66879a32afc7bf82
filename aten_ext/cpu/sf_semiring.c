/* sf_semiring.c -- semiring products of indefinite operands (the graph
 * domain, RFC.md#indefinite-fill): an absent element makes no term, a monoid
 * folds the present terms only, and an output with no term stays absent
 * (its arg is -1; the caller drops it). arg marks presence: the position of
 * an output's first present term.
 *
 * One body per (monoid, op) pair: the kernels below are written once with
 * the monoid and the op as arguments, and the dispatch calls them with
 * constants so that the compiler inlines the switch away (a switch per term
 * in the inner loop would cost more than the term itself). */
#include <math.h>
#include <stdint.h>

#include "sf_internal.h"

#if defined(__GNUC__)
#define SF_SR_INLINE static inline __attribute__((always_inline))
#else
#define SF_SR_INLINE static inline
#endif

/* case per binary op: CALL(MONOID, OP) with both constants. */
#define SF_SR_OP_CASES(M, CALL)                          \
  case SF_OP_PLUS: return CALL(M, SF_OP_PLUS);           \
  case SF_OP_MINUS: return CALL(M, SF_OP_MINUS);         \
  case SF_OP_RMINUS: return CALL(M, SF_OP_RMINUS);       \
  case SF_OP_TIMES: return CALL(M, SF_OP_TIMES);         \
  case SF_OP_DIV: return CALL(M, SF_OP_DIV);             \
  case SF_OP_RDIV: return CALL(M, SF_OP_RDIV);           \
  case SF_OP_MIN: return CALL(M, SF_OP_MIN);             \
  case SF_OP_MAX: return CALL(M, SF_OP_MAX);             \
  case SF_OP_FIRST: return CALL(M, SF_OP_FIRST);         \
  case SF_OP_SECOND: return CALL(M, SF_OP_SECOND);       \
  case SF_OP_PAIR: return CALL(M, SF_OP_PAIR);           \
  case SF_OP_LAND: return CALL(M, SF_OP_LAND);           \
  case SF_OP_LOR: return CALL(M, SF_OP_LOR);             \
  case SF_OP_LXOR: return CALL(M, SF_OP_LXOR);           \
  case SF_OP_EQ: return CALL(M, SF_OP_EQ);               \
  case SF_OP_NE: return CALL(M, SF_OP_NE);               \
  case SF_OP_LT: return CALL(M, SF_OP_LT);               \
  case SF_OP_GT: return CALL(M, SF_OP_GT);               \
  case SF_OP_LE: return CALL(M, SF_OP_LE);               \
  case SF_OP_GE: return CALL(M, SF_OP_GE);               \
  default: return SF_ERR_INVALID_ARGUMENT;

/* The (monoid, op) dispatch: CALL(MONOID, OP) for the pair given at run time. */
#define SF_SR_DISPATCH(monoid, op, CALL)                               \
  switch (monoid) {                                                    \
    case SF_MONOID_PLUS: switch (op) { SF_SR_OP_CASES(SF_MONOID_PLUS, CALL) } \
    case SF_MONOID_TIMES: switch (op) { SF_SR_OP_CASES(SF_MONOID_TIMES, CALL) } \
    case SF_MONOID_MIN: switch (op) { SF_SR_OP_CASES(SF_MONOID_MIN, CALL) } \
    case SF_MONOID_MAX: switch (op) { SF_SR_OP_CASES(SF_MONOID_MAX, CALL) } \
    case SF_MONOID_LOR: switch (op) { SF_SR_OP_CASES(SF_MONOID_LOR, CALL) } \
    case SF_MONOID_LAND: switch (op) { SF_SR_OP_CASES(SF_MONOID_LAND, CALL) } \
    case SF_MONOID_ANY: switch (op) { SF_SR_OP_CASES(SF_MONOID_ANY, CALL) } \
    default: return SF_ERR_INVALID_ARGUMENT;                           \
  }

#define SF_TEMPLATE "templates/semiring.h"
#define SF_TYPES (SF_F32 | SF_F64 | SF_I64)
#include "sf_instantiate.h"

/* Both rows' columns checked (in range, strictly increasing): the status
 * that names the first bad column, A's before B's. */
static sf_status sf_union_row_check(const int64_t *col_a, int64_t pa, int64_t ea,
                                    const int64_t *col_b, int64_t pb, int64_t eb, int64_t ncols) {
  for (int64_t p = pa; p < ea; ++p) {
    if ((uint64_t)col_a[p] >= (uint64_t)ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
    if (p > pa && col_a[p] <= col_a[p - 1]) return SF_ERR_COL_UNSORTED;
  }
  for (int64_t p = pb; p < eb; ++p) {
    if ((uint64_t)col_b[p] >= (uint64_t)ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
    if (p > pb && col_b[p] <= col_b[p - 1]) return SF_ERR_COL_UNSORTED;
  }
  return SF_OK;
}

/* Row i's union size by marks (one bit per column, all zero on entry and
 * on return): A's columns marked, B's looked up, A's words cleared. No
 * merge, so no mispredicted branch and no chain of dependent loads: on
 * 50 + 50 random columns a row (the union bench), 15 ms against the merge's
 * 22; on power-law rows (ewise_add), 6 against 10 (2 threads, the C core
 * alone). Each column is checked as it is read: one out of range marks
 * nothing. *bad = nonzero where a row fails its check. */
static int64_t sf_union_row_marked(uint64_t *marks, const int64_t *col_a, int64_t pa, int64_t ea,
                                   const int64_t *col_b, int64_t pb, int64_t eb, int64_t ncols,
                                   int *bad) {
  int64_t prev = -1, common = 0;
  int failed = 0;
  for (int64_t p = pa; p < ea; ++p) {
    const int64_t j = col_a[p];
    const uint64_t u = (uint64_t)j, in = u < (uint64_t)ncols;
    failed |= (j <= prev) | !in;
    prev = j;
    marks[in ? u >> 6 : 0] |= in << (u & 63);
  }
  prev = -1;
  for (int64_t p = pb; p < eb; ++p) {
    const int64_t j = col_b[p];
    const uint64_t u = (uint64_t)j, in = u < (uint64_t)ncols;
    failed |= (j <= prev) | !in;
    prev = j;
    common += (int64_t)(in & (marks[in ? u >> 6 : 0] >> (u & 63)));
  }
  for (int64_t p = pa; p < ea; ++p) {
    const uint64_t u = (uint64_t)col_a[p];
    marks[u < (uint64_t)ncols ? u >> 6 : 0] = 0; /* every set word holds only this row's marks */
  }
  *bad = failed;
  return (ea - pa) + (eb - pb) - common;
}

/* The union's size per row, and the check of both operands' rows (spans,
 * columns in range and strictly increasing) that the typed write pass
 * relies on. With marks, by sf_union_row_marked; without, the check rides
 * on the merge rather than two loops of its own (the count pass was over a
 * third of ewise_add's time): each row is a subsequence of the merged
 * columns (the front's, the middle's, the back's reversed), so both rows
 * are valid exactly when the merged columns increase strictly from >= 0 to
 * < ncols. A row that fails is checked again column by column to name its
 * error. */
sf_status sf_csr_union_row_nse(int64_t *row_nse, uint64_t *marks, const int64_t *crow_a,
                               const int64_t *col_a, int64_t nse_a, const int64_t *crow_b,
                               const int64_t *col_b, int64_t nse_b, int64_t nrows, int64_t ncols,
                               int64_t row_begin, int64_t row_end) {
  SF_CHECK_RANGE(nrows, row_begin, row_end);
  SF_FAIL_IF(ncols < 0 || nse_a < 0 || nse_b < 0, SF_ERR_NEGATIVE_SIZE);
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(row_nse == NULL || crow_a == NULL || crow_b == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(col_a, nse_a);
  SF_NEED(col_b, nse_b);
  for (int64_t i = row_begin; i < row_end; ++i) {
    int64_t pa, ea, pb, eb;
    sf_status st = sf_row_span(&pa, &ea, crow_a, i, nse_a);
    if (st == SF_OK) st = sf_row_span(&pb, &eb, crow_b, i, nse_b);
    if (st != SF_OK) return st;
    if (marks != NULL) {
      int bad;
      const int64_t size = sf_union_row_marked(marks, col_a, pa, ea, col_b, pb, eb, ncols, &bad);
      if (bad) {
        st = sf_union_row_check(col_a, pa, ea, col_b, pb, eb, ncols);
        return st != SF_OK ? st : SF_ERR_INVALID_ARGUMENT; /* not reached */
      }
      row_nse[i] = size;
      continue;
    }
    const int64_t a0 = pa, b0 = pb;
    int64_t common = 0, prev = -1, bad = 0, qa = ea, qb = eb, hi = ncols;
    /* Two merges at once, from the front and from the back (the largest
     * columns first, down to hi): two independent chains of loads, where
     * one merge waits on each load in turn. */
    while (qa - pa >= 2 && qb - pb >= 2) {
      const int64_t ja = col_a[pa], jb = col_b[pb], ka = col_a[qa - 1], kb = col_b[qb - 1];
      const int64_t j = ja < jb ? ja : jb, k = ka > kb ? ka : kb;
      bad |= (j <= prev) | (k >= hi);
      prev = j;
      hi = k;
      common += (ja == jb) + (ka == kb);
      pa += ja <= jb;
      pb += jb <= ja;
      qa -= ka >= kb;
      qb -= kb >= ka;
    }
    while (pa < qa && pb < qb) {
      const int64_t ja = col_a[pa], jb = col_b[pb];
      const int64_t j = ja < jb ? ja : jb;
      bad |= j <= prev;
      prev = j;
      common += ja == jb;
      pa += ja <= jb;
      pb += jb <= ja;
    }
    for (; pa < qa; ++pa) {
      bad |= col_a[pa] <= prev;
      prev = col_a[pa];
    }
    for (; pb < qb; ++pb) {
      bad |= col_b[pb] <= prev;
      prev = col_b[pb];
    }
    if (bad | (prev >= hi)) {
      st = sf_union_row_check(col_a, a0, ea, col_b, b0, eb, ncols);
      return st != SF_OK ? st : SF_ERR_INVALID_ARGUMENT; /* not reached */
    }
    row_nse[i] = (ea - a0) + (eb - b0) - common;
  }
  return SF_OK;
}
