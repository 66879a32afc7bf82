/* templates/semiring.h -- the semiring products of sf_semiring.c (contracts
 * in sparsefill_core.h): matrix-vector by rows (pull), vector-matrix by the
 * vector's stored elements (push), the masked product by dots or by rows,
 * and the union of two patterns (ewise_add / ewise_union). Terms are computed in T as torch
 * computes them (integers wrap: the arithmetic goes through uint64_t, where
 * C defines the wrap); the monoid folds them in ACC, so a plus of 0/1 terms
 * counts exactly even in f32. */

/* op(l, r) of one present pair; comparisons and logical ops give 0 or 1. */
SF_SR_INLINE T SF_FN(sf_sr_term)(const int op, const T l, const T r) {
  switch (op) {
#if SF_IS_FLOAT
    case SF_OP_PLUS: return l + r;
    case SF_OP_MINUS: return l - r;
    case SF_OP_RMINUS: return r - l;
    case SF_OP_TIMES: return l * r;
    case SF_OP_DIV: return l / r;
    case SF_OP_RDIV: return r / l;
    /* torch.minimum / maximum: NaN propagates (C's fmin does not), and a tie
     * (0 and -0) gives the first operand. */
    case SF_OP_MIN: return (r < l || r != r) ? r : l;
    case SF_OP_MAX: return (r > l || r != r) ? r : l;
#else
    case SF_OP_PLUS: return (T)((uint64_t)l + (uint64_t)r);
    case SF_OP_MINUS: return (T)((uint64_t)l - (uint64_t)r);
    case SF_OP_RMINUS: return (T)((uint64_t)r - (uint64_t)l);
    case SF_OP_TIMES: return (T)((uint64_t)l * (uint64_t)r);
    case SF_OP_MIN: return l < r ? l : r;
    case SF_OP_MAX: return l > r ? l : r;
#endif
    case SF_OP_FIRST: return l;
    case SF_OP_SECOND: return r;
    case SF_OP_PAIR: return (T)1;
    case SF_OP_LAND: return (T)((l != 0) & (r != 0));
    case SF_OP_LOR: return (T)((l != 0) | (r != 0));
    case SF_OP_LXOR: return (T)((l != 0) ^ (r != 0));
    case SF_OP_EQ: return (T)(l == r);
    case SF_OP_NE: return (T)(l != r);
    case SF_OP_LT: return (T)(l < r);
    case SF_OP_GT: return (T)(l > r);
    case SF_OP_LE: return (T)(l <= r);
    default: return (T)(l >= r); /* SF_OP_GE; the dispatch refuses other codes */
  }
}

/* The first present term of an output: its value as the monoid keeps it. */
SF_SR_INLINE ACC SF_FN(sf_sr_first)(const int monoid, const T t) {
  if (monoid == SF_MONOID_LOR || monoid == SF_MONOID_LAND) return (ACC)(t != 0);
  return (ACC)t;
}

/* Folds term t into acc. min and max select rather than branch (a branch
 * on random values mispredicts); NaN wins and stays, as torch.amin / amax
 * propagate it. */
SF_SR_INLINE void SF_FN(sf_sr_fold)(const int monoid, ACC *acc, const T t) {
  switch (monoid) {
#if SF_IS_FLOAT
    case SF_MONOID_PLUS: *acc += (ACC)t; break;
    /* A product rounds to T at each step, as torch.prod's: in double, f32
     * terms 1e30 * 1e30 * 0 would give 0 where torch gives inf * 0 = NaN. */
    case SF_MONOID_TIMES: *acc = (ACC)((T)*acc * t); break;
    case SF_MONOID_MIN: {
      const int take = (((ACC)t < *acc) | (t != t)) & (*acc == *acc);
      *acc = take ? (ACC)t : *acc;
      break;
    }
    case SF_MONOID_MAX: {
      const int take = (((ACC)t > *acc) | (t != t)) & (*acc == *acc);
      *acc = take ? (ACC)t : *acc;
      break;
    }
#else
    case SF_MONOID_PLUS: *acc = (ACC)((uint64_t)*acc + (uint64_t)t); break;
    case SF_MONOID_TIMES: *acc = (ACC)((uint64_t)*acc * (uint64_t)t); break;
    case SF_MONOID_MIN: *acc = t < *acc ? t : *acc; break;
    case SF_MONOID_MAX: *acc = t > *acc ? t : *acc; break;
#endif
    case SF_MONOID_LOR: *acc = (ACC)((*acc != 0) | (t != 0)); break;
    case SF_MONOID_LAND: *acc = (ACC)((*acc != 0) & (t != 0)); break;
    default: break; /* SF_MONOID_ANY: the first term stays */
  }
}

/* min or max of the terms [p, hi) of a row onto acc, every x present: two
 * lanes (the select's latency chains one lane), NaN counted apart so that
 * each lane's select is one minsd / maxsd. */
SF_SR_INLINE sf_status SF_FN(sf_sr_extreme_rows)(const int monoid, const int op, ACC *acc,
                                                 const int64_t *col, const T *values,
                                                 int64_t ncols, const T *x, int64_t p,
                                                 int64_t hi) {
  ACC a0 = *acc, a1 = *acc;
  int nan = 0;
  for (; p + 2 <= hi; p += 2) {
    const int64_t k0 = col[p], k1 = col[p + 1];
    if (((uint64_t)k0 >= (uint64_t)ncols) | ((uint64_t)k1 >= (uint64_t)ncols))
      return SF_ERR_INDEX_OUT_OF_RANGE;
    const ACC t0 = (ACC)SF_FN(sf_sr_term)(op, values[p], x[k0]);
    const ACC t1 = (ACC)SF_FN(sf_sr_term)(op, values[p + 1], x[k1]);
    nan |= ISNAN(t0) | ISNAN(t1);  /* (0 for integers: no self-comparison) */
    if (monoid == SF_MONOID_MIN) {
      a0 = t0 < a0 ? t0 : a0;
      a1 = t1 < a1 ? t1 : a1;
    } else {
      a0 = t0 > a0 ? t0 : a0;
      a1 = t1 > a1 ? t1 : a1;
    }
  }
  for (; p < hi; ++p) {
    const int64_t k = col[p];
    if ((uint64_t)k >= (uint64_t)ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
    const ACC t = (ACC)SF_FN(sf_sr_term)(op, values[p], x[k]);
    nan |= ISNAN(t);
    a0 = monoid == SF_MONOID_MIN ? (t < a0 ? t : a0) : (t > a0 ? t : a0);
  }
  const ACC a = monoid == SF_MONOID_MIN ? (a1 < a0 ? a1 : a0) : (a1 > a0 ? a1 : a0);
  /* A NaN term, or a NaN first term already in acc (which the lanes dropped). */
  *acc = (nan | ISNAN(*acc)) ? (ACC)NANV : a;
  return SF_OK;
}

/* Rows [row_begin, row_end) of A (op) x with constant monoid and op. */
SF_SR_INLINE sf_status SF_FN(sf_sr_mv_rows)(const int monoid, const int op, ACC *restrict out,
                                           int64_t *restrict arg, const int64_t *crow,
                                           const int64_t *col, const T *values, int64_t ncols,
                                           int64_t nse, const T *x, const uint8_t *x_present,
                                           int64_t row_begin, int64_t row_end) {
#if !SF_IS_FLOAT
  if (op == SF_OP_DIV || op == SF_OP_RDIV) return SF_ERR_INVALID_ARGUMENT; /* torch: a float */
#endif
  for (int64_t i = row_begin; i < row_end; ++i) {
    int64_t lo, hi;
    sf_status st = sf_row_span(&lo, &hi, crow, i, nse);
    if (st != SF_OK) return st;
    ACC acc = 0;
    int64_t best = -1;
    int64_t p = lo;
    /* Up to the first present term, then the fold (no "have one" test per term). */
    for (; p < hi; ++p) {
      const int64_t k = col[p];
      if ((uint64_t)k >= (uint64_t)ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
      if (x_present && !x_present[k]) continue;
      acc = SF_FN(sf_sr_first)(monoid, SF_FN(sf_sr_term)(op, values[p], x[k]));
      best = p++;
      break;
    }
    if ((monoid == SF_MONOID_MIN || monoid == SF_MONOID_MAX) && !x_present) {
      st = SF_FN(sf_sr_extreme_rows)(monoid, op, &acc, col, values, ncols, x, p, hi);
      if (st != SF_OK) return st;
    } else if (monoid != SF_MONOID_ANY) {
      for (; p < hi; ++p) {
        const int64_t k = col[p];
        if ((uint64_t)k >= (uint64_t)ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
        if (x_present && !x_present[k]) continue;
        SF_FN(sf_sr_fold)(monoid, &acc, SF_FN(sf_sr_term)(op, values[p], x[k]));
      }
    } else {
      for (; p < hi; ++p) /* the rest is only checked */
        if ((uint64_t)col[p] >= (uint64_t)ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
    }
    out[i] = acc;
    arg[i] = best;
  }
  return SF_OK;
}

#define SF_SR_MV_CALL(M, OP)                                                                  \
  SF_FN(sf_sr_mv_rows)(M, OP, out, arg, crow, col, values, ncols, nse, x, x_present, row_begin, \
                       row_end)

sf_status SF_FN(sf_csr_semiring_mv)(ACC *out, int64_t *arg, const int64_t *crow,
                                    const int64_t *col, const T *values, int64_t nrows,
                                    int64_t ncols, int64_t nse, const T *x,
                                    const uint8_t *x_present, int monoid, int op,
                                    int64_t row_begin, int64_t row_end) {
  SF_CHECK_RANGE(nrows, row_begin, row_end);
  SF_FAIL_IF(ncols < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(out == NULL || arg == NULL || crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(col, nse);
  SF_NEED(values, nse);
  SF_NEED(x, ncols);
  SF_SR_DISPATCH(monoid, op, SF_SR_MV_CALL)
  return SF_ERR_INVALID_ARGUMENT; /* not reached: every case returns */
}
#undef SF_SR_MV_CALL

/* u (op) A by u's stored elements, in order: each row k of A adds its terms
 * to the outputs of its columns (push), with constant monoid and op. */
SF_SR_INLINE sf_status SF_FN(sf_sr_vm_rows)(const int monoid, const int op, ACC *restrict out,
                                           int64_t *restrict arg, const int64_t *crow,
                                           const int64_t *col, const T *values, int64_t nrows,
                                           int64_t ncols, int64_t nse, const int64_t *u_keys,
                                           const T *u_values, int64_t u_nse) {
#if !SF_IS_FLOAT
  if (op == SF_OP_DIV || op == SF_OP_RDIV) return SF_ERR_INVALID_ARGUMENT;
#endif
  for (int64_t j = 0; j < ncols; ++j) { /* absent: out 0, deterministic */
    arg[j] = -1;
    out[j] = 0;
  }
  int64_t previous = -1;
  for (int64_t q = 0; q < u_nse; ++q) {
    const int64_t k = u_keys[q];
    /* Sorted keys: the first term an output meets has the smallest k (any, ties). */
    if (k <= previous) return SF_ERR_NOT_COALESCED;
    if (k >= nrows) return SF_ERR_INDEX_OUT_OF_RANGE;
    previous = k;
    int64_t lo, hi;
    sf_status st = sf_row_span(&lo, &hi, crow, k, nse);
    if (st != SF_OK) return st;
    const T u = u_values[q];
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t j = col[p];
      if ((uint64_t)j >= (uint64_t)ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
      const T t = SF_FN(sf_sr_term)(op, u, values[p]);
      if (arg[j] < 0) {
        out[j] = SF_FN(sf_sr_first)(monoid, t);
        arg[j] = p;
      } else {
        SF_FN(sf_sr_fold)(monoid, &out[j], t);
      }
    }
  }
  return SF_OK;
}

#define SF_SR_VM_CALL(M, OP) \
  SF_FN(sf_sr_vm_rows)(M, OP, out, arg, crow, col, values, nrows, ncols, nse, u_keys, u_values, u_nse)

sf_status SF_FN(sf_csr_semiring_vm)(ACC *out, int64_t *arg, const int64_t *crow,
                                    const int64_t *col, const T *values, int64_t nrows,
                                    int64_t ncols, int64_t nse, const int64_t *u_keys,
                                    const T *u_values, int64_t u_nse, int monoid, int op) {
  SF_FAIL_IF(nrows < 0 || ncols < 0 || nse < 0 || u_nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(out, ncols);
  SF_NEED(arg, ncols);
  SF_NEED(col, nse);
  SF_NEED(values, nse);
  SF_NEED(u_keys, u_nse);
  SF_NEED(u_values, u_nse);
  SF_SR_DISPATCH(monoid, op, SF_SR_VM_CALL)
  return SF_ERR_INVALID_ARGUMENT; /* not reached: every case returns */
}
#undef SF_SR_VM_CALL

/* Rows [row_begin, row_end) of the union of two sorted CSR patterns with a
 * constant op: both present -> op(a, b); one present -> its value
 * (ewise_add: defaults NULL) or op with the other's default (ewise_union). */
SF_SR_INLINE sf_status SF_FN(sf_sr_union_rows)(
  const int op, int64_t *restrict col_out, T *restrict val_out, const int64_t *crow_out,
  int64_t nse_out, const int64_t *crow_a, const int64_t *col_a, const T *val_a, int64_t nse_a,
  const int64_t *crow_b, const int64_t *col_b, const T *val_b, int64_t nse_b,
  const T *a_default, const T *b_default, int64_t row_begin, int64_t row_end) {
#if !SF_IS_FLOAT
  if (op == SF_OP_DIV || op == SF_OP_RDIV) return SF_ERR_INVALID_ARGUMENT;
#endif
  const int with_defaults = a_default != NULL;
  const T da = with_defaults ? *a_default : (T)0, db = with_defaults ? *b_default : (T)0;
  for (int64_t i = row_begin; i < row_end; ++i) {
    int64_t pa, ea, pb, eb, q, eq;
    sf_status st = sf_row_span(&pa, &ea, crow_a, i, nse_a);
    if (st == SF_OK) st = sf_row_span(&pb, &eb, crow_b, i, nse_b);
    if (st == SF_OK) st = sf_row_span(&q, &eq, crow_out, i, nse_out);
    if (st != SF_OK) return st;
    /* The count pass checked the columns; a crow_out that disagrees with it
     * stops here rather than writing outside the row. One merge with
     * branches: a mispredicted branch costs less than selects, whose loads
     * wait on each other (measured: half the time of a two-ended select
     * merge on short power-law rows and on 50 + 50 random columns alike).
     * ewise_union is op(a or a_default, b or b_default); ewise_add passes a
     * one-sided element through. */
    if (with_defaults) {
      while (pa < ea && pb < eb) {
        if (q >= eq) return SF_ERR_INVALID_ARGUMENT;
        const int64_t ja = col_a[pa], jb = col_b[pb];
        if (ja < jb) {
          col_out[q] = ja;
          val_out[q++] = SF_FN(sf_sr_term)(op, val_a[pa++], db);
        } else if (jb < ja) {
          col_out[q] = jb;
          val_out[q++] = SF_FN(sf_sr_term)(op, da, val_b[pb++]);
        } else {
          col_out[q] = ja;
          val_out[q++] = SF_FN(sf_sr_term)(op, val_a[pa++], val_b[pb++]);
        }
      }
    } else {
      while (pa < ea && pb < eb) {
        if (q >= eq) return SF_ERR_INVALID_ARGUMENT;
        const int64_t ja = col_a[pa], jb = col_b[pb];
        if (ja < jb) {
          col_out[q] = ja;
          val_out[q++] = val_a[pa++];
        } else if (jb < ja) {
          col_out[q] = jb;
          val_out[q++] = val_b[pb++];
        } else {
          col_out[q] = ja;
          val_out[q++] = SF_FN(sf_sr_term)(op, val_a[pa++], val_b[pb++]);
        }
      }
    }
    if (eq - q != (ea - pa) + (eb - pb)) return SF_ERR_INVALID_ARGUMENT;
    for (; pa < ea; ++pa, ++q) {
      col_out[q] = col_a[pa];
      val_out[q] = with_defaults ? SF_FN(sf_sr_term)(op, val_a[pa], db) : val_a[pa];
    }
    for (; pb < eb; ++pb, ++q) {
      col_out[q] = col_b[pb];
      val_out[q] = with_defaults ? SF_FN(sf_sr_term)(op, da, val_b[pb]) : val_b[pb];
    }
  }
  return SF_OK;
}

#define SF_SR_UNION_CALL(M, OP)                                                              \
  SF_FN(sf_sr_union_rows)(OP, col_out, val_out, crow_out, nse_out, crow_a, col_a, val_a, nse_a, \
                          crow_b, col_b, val_b, nse_b, a_default, b_default, row_begin, row_end)

sf_status SF_FN(sf_csr_ewise_union)(int64_t *col_out, T *val_out, const int64_t *crow_out,
                                    int64_t nse_out, const int64_t *crow_a, const int64_t *col_a,
                                    const T *val_a, int64_t nse_a, const int64_t *crow_b,
                                    const int64_t *col_b, const T *val_b, int64_t nse_b,
                                    int64_t nrows, int op, const T *a_default,
                                    const T *b_default, int64_t row_begin, int64_t row_end) {
  SF_CHECK_RANGE(nrows, row_begin, row_end);
  SF_FAIL_IF(nse_out < 0 || nse_a < 0 || nse_b < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF((a_default == NULL) != (b_default == NULL), SF_ERR_INVALID_ARGUMENT);
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(crow_out == NULL || crow_a == NULL || crow_b == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(col_out, nse_out);
  SF_NEED(val_out, nse_out);
  SF_NEED(col_a, nse_a);
  SF_NEED(val_a, nse_a);
  SF_NEED(col_b, nse_b);
  SF_NEED(val_b, nse_b);
  switch (op) { SF_SR_OP_CASES(0, SF_SR_UNION_CALL) }
  return SF_ERR_INVALID_ARGUMENT; /* not reached: every case returns */
}
#undef SF_SR_UNION_CALL

/* The first position in [lo, hi) of sorted col whose value is >= key. */
SF_SR_INLINE int64_t SF_FN(sf_sr_lower_bound)(const int64_t *col, int64_t lo, int64_t hi,
                                              int64_t key) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (col[mid] < key) lo = mid + 1; else hi = mid;
  }
  return lo;
}

/* The masked product by dots, rows [row_begin, row_end) of the mask, with
 * constant monoid and op: each stored (i, j) of the mask intersects row i of
 * A with row j of B^T (both sorted); a row much shorter than the other
 * looks its columns up by binary search instead of walking both. */
SF_SR_INLINE sf_status SF_FN(sf_sr_dots_rows)(
  const int monoid, const int op, ACC *restrict out, int64_t *restrict arg,
  const int64_t *crow_m, const int64_t *col_m, int64_t nse_m, const int64_t *crow_a,
  const int64_t *col_a, const T *val_a, int64_t nse_a, const int64_t *crow_bt,
  const int64_t *col_bt, const T *val_bt, int64_t nse_bt, int64_t n, int64_t row_begin,
  int64_t row_end) {
#if !SF_IS_FLOAT
  if (op == SF_OP_DIV || op == SF_OP_RDIV) return SF_ERR_INVALID_ARGUMENT;
#endif
  for (int64_t i = row_begin; i < row_end; ++i) {
    int64_t pm, em, a0, a1;
    sf_status st = sf_row_span(&pm, &em, crow_m, i, nse_m);
    if (st == SF_OK) st = sf_row_span(&a0, &a1, crow_a, i, nse_a);
    if (st != SF_OK) return st;
    for (int64_t q = pm; q < em; ++q) {
      const int64_t j = col_m[q];
      if ((uint64_t)j >= (uint64_t)n) return SF_ERR_INDEX_OUT_OF_RANGE;
      int64_t b0, b1;
      st = sf_row_span(&b0, &b1, crow_bt, j, nse_bt);
      if (st != SF_OK) return st;
      ACC acc = 0;
      int64_t best = -1;
      int64_t pa = a0, pb = b0;
      const int64_t la = a1 - a0, lb = b1 - b0;
      while (pa < a1 && pb < b1) {
        const int64_t ka = col_a[pa], kb = col_bt[pb];
        if (ka == kb) {
          const T t = SF_FN(sf_sr_term)(op, val_a[pa], val_bt[pb]);
          if (best < 0) {
            acc = SF_FN(sf_sr_first)(monoid, t);
            best = pa;
            if (monoid == SF_MONOID_ANY) break;
          } else {
            SF_FN(sf_sr_fold)(monoid, &acc, t);
          }
          ++pa;
          ++pb;
        } else if (ka < kb) {
          pa = la > 16 * lb ? SF_FN(sf_sr_lower_bound)(col_a, pa + 1, a1, kb) : pa + 1;
        } else {
          pb = lb > 16 * la ? SF_FN(sf_sr_lower_bound)(col_bt, pb + 1, b1, ka) : pb + 1;
        }
      }
      out[q] = acc;
      arg[q] = best;
    }
  }
  return SF_OK;
}

#define SF_SR_DOTS_CALL(M, OP)                                                           \
  SF_FN(sf_sr_dots_rows)(M, OP, out, arg, crow_m, col_m, nse_m, crow_a, col_a, val_a, nse_a, \
                         crow_bt, col_bt, val_bt, nse_bt, n, row_begin, row_end)

sf_status SF_FN(sf_csr_semiring_masked)(ACC *out, int64_t *arg, const int64_t *crow_m,
                                        const int64_t *col_m, int64_t nse_m,
                                        const int64_t *crow_a, const int64_t *col_a,
                                        const T *val_a, int64_t nse_a, const int64_t *crow_bt,
                                        const int64_t *col_bt, const T *val_bt, int64_t nse_bt,
                                        int64_t m, int64_t n, int monoid, int op,
                                        int64_t row_begin, int64_t row_end) {
  SF_CHECK_RANGE(m, row_begin, row_end);
  SF_FAIL_IF(n < 0 || nse_m < 0 || nse_a < 0 || nse_bt < 0, SF_ERR_NEGATIVE_SIZE);
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(crow_m == NULL || crow_a == NULL || crow_bt == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(out, nse_m);
  SF_NEED(arg, nse_m);
  SF_NEED(col_m, nse_m);
  SF_NEED(col_a, nse_a);
  SF_NEED(val_a, nse_a);
  SF_NEED(col_bt, nse_bt);
  SF_NEED(val_bt, nse_bt);
  SF_SR_DISPATCH(monoid, op, SF_SR_DOTS_CALL)
  return SF_ERR_INVALID_ARGUMENT; /* not reached: every case returns */
}
#undef SF_SR_DOTS_CALL

/* The masked product by rows (Gustavson), with constant monoid and op: row
 * i's mask elements marked in `mark` (n entries, -1 outside the row), then
 * every A[i, k] meets row k of B and a term lands only where the mask
 * marks its column; k ascends, so the first term of an output has the
 * smallest k. The unmasked row is never formed. */
SF_SR_INLINE sf_status SF_FN(sf_sr_saxpy_rows)(
  const int monoid, const int op, ACC *restrict out, int64_t *restrict arg, int64_t *mark,
  const int64_t *crow_m, const int64_t *col_m, int64_t nse_m, const int64_t *crow_a,
  const int64_t *col_a, const T *val_a, int64_t nse_a, const int64_t *crow_b,
  const int64_t *col_b, const T *val_b, int64_t nse_b, int64_t k, int64_t n,
  int64_t row_begin, int64_t row_end) {
#if !SF_IS_FLOAT
  if (op == SF_OP_DIV || op == SF_OP_RDIV) return SF_ERR_INVALID_ARGUMENT;
#endif
  sf_status st = SF_OK;
  for (int64_t i = row_begin; i < row_end && st == SF_OK; ++i) {
    int64_t pm, em, a0, a1;
    st = sf_row_span(&pm, &em, crow_m, i, nse_m);
    if (st == SF_OK) st = sf_row_span(&a0, &a1, crow_a, i, nse_a);
    if (st != SF_OK) break;
    int64_t q = pm;
    for (; q < em; ++q) {
      const int64_t j = col_m[q];
      if ((uint64_t)j >= (uint64_t)n) { st = SF_ERR_INDEX_OUT_OF_RANGE; break; }
      mark[j] = q;
      arg[q] = -1;
    }
    for (int64_t p = a0; p < a1 && st == SF_OK && q == em; ++p) {
      const int64_t kk = col_a[p];
      int64_t b0, b1;
      if ((uint64_t)kk >= (uint64_t)k) { st = SF_ERR_INDEX_OUT_OF_RANGE; break; }
      st = sf_row_span(&b0, &b1, crow_b, kk, nse_b);
      if (st != SF_OK) break;
      const T a = val_a[p];
      for (int64_t pb = b0; pb < b1; ++pb) {
        const int64_t j = col_b[pb];
        if ((uint64_t)j >= (uint64_t)n) { st = SF_ERR_INDEX_OUT_OF_RANGE; break; }
        const int64_t at = mark[j];
        if (at < 0) continue;
        const T t = SF_FN(sf_sr_term)(op, a, val_b[pb]);
        if (arg[at] < 0) {
          out[at] = SF_FN(sf_sr_first)(monoid, t);
          arg[at] = p;
        } else {
          SF_FN(sf_sr_fold)(monoid, &out[at], t);
        }
      }
    }
    /* Unmarked again (also on an error: the scratch stays clean). */
    for (int64_t r = pm; r < q; ++r) mark[col_m[r]] = -1;
  }
  return st;
}

#define SF_SR_SAXPY_CALL(M, OP)                                                               \
  SF_FN(sf_sr_saxpy_rows)(M, OP, out, arg, mark, crow_m, col_m, nse_m, crow_a, col_a, val_a, \
                          nse_a, crow_b, col_b, val_b, nse_b, k, n, row_begin, row_end)

sf_status SF_FN(sf_csr_semiring_masked_rows)(
  ACC *out, int64_t *arg, int64_t *mark, const int64_t *crow_m, const int64_t *col_m,
  int64_t nse_m, const int64_t *crow_a, const int64_t *col_a, const T *val_a, int64_t nse_a,
  const int64_t *crow_b, const int64_t *col_b, const T *val_b, int64_t nse_b, int64_t m,
  int64_t k, int64_t n, int monoid, int op, int64_t row_begin, int64_t row_end) {
  SF_CHECK_RANGE(m, row_begin, row_end);
  SF_FAIL_IF(k < 0 || n < 0 || nse_m < 0 || nse_a < 0 || nse_b < 0, SF_ERR_NEGATIVE_SIZE);
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(crow_m == NULL || crow_a == NULL || crow_b == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(mark, n);
  SF_NEED(out, nse_m);
  SF_NEED(arg, nse_m);
  SF_NEED(col_m, nse_m);
  SF_NEED(col_a, nse_a);
  SF_NEED(val_a, nse_a);
  SF_NEED(col_b, nse_b);
  SF_NEED(val_b, nse_b);
  SF_SR_DISPATCH(monoid, op, SF_SR_SAXPY_CALL)
  return SF_ERR_INVALID_ARGUMENT; /* not reached: every case returns */
}
#undef SF_SR_SAXPY_CALL
