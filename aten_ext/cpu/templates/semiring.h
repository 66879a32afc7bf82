/* templates/semiring.h -- the semiring products of sf_semiring.c (contracts
 * in sparsefill_core.h): matrix-vector by rows (pull) and vector-matrix by
 * the vector's stored elements (push). Terms are computed in T as torch
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
    /* torch.minimum / maximum propagate NaN (C's fmin does not). */
    case SF_OP_MIN: return (l < r || l != l) ? l : r;
    case SF_OP_MAX: return (l > r || l != l) ? l : r;
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

/* Folds term t (at position p) into acc; arg keeps the term that decides a
 * min, max or any (the first of ties: the smallest k). */
SF_SR_INLINE void SF_FN(sf_sr_fold)(const int monoid, ACC *acc, int64_t *arg, const T t,
                                    const int64_t p) {
  switch (monoid) {
#if SF_IS_FLOAT
    case SF_MONOID_PLUS: *acc += (ACC)t; break;
    case SF_MONOID_TIMES: *acc *= (ACC)t; break;
    /* NaN wins and stays, as torch.amin / amax propagate it. */
    case SF_MONOID_MIN: if ((ACC)t < *acc || t != t) { if (*acc == *acc) { *acc = (ACC)t; *arg = p; } } break;
    case SF_MONOID_MAX: if ((ACC)t > *acc || t != t) { if (*acc == *acc) { *acc = (ACC)t; *arg = p; } } break;
#else
    case SF_MONOID_PLUS: *acc = (ACC)((uint64_t)*acc + (uint64_t)t); break;
    case SF_MONOID_TIMES: *acc = (ACC)((uint64_t)*acc * (uint64_t)t); break;
    case SF_MONOID_MIN: if (t < *acc) { *acc = t; *arg = p; } break;
    case SF_MONOID_MAX: if (t > *acc) { *acc = t; *arg = p; } break;
#endif
    case SF_MONOID_LOR: *acc = (ACC)((*acc != 0) | (t != 0)); break;
    case SF_MONOID_LAND: *acc = (ACC)((*acc != 0) & (t != 0)); break;
    default: break; /* SF_MONOID_ANY: the first term stays */
  }
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
    if (monoid != SF_MONOID_ANY) {
      for (; p < hi; ++p) {
        const int64_t k = col[p];
        if ((uint64_t)k >= (uint64_t)ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
        if (x_present && !x_present[k]) continue;
        SF_FN(sf_sr_fold)(monoid, &acc, &best, SF_FN(sf_sr_term)(op, values[p], x[k]), p);
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
  for (int64_t j = 0; j < ncols; ++j) arg[j] = -1;
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
        SF_FN(sf_sr_fold)(monoid, &out[j], &arg[j], t, p);
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
     * stops here rather than writing outside the row. */
    while (pa < ea && pb < eb) {
      if (q >= eq) return SF_ERR_INVALID_ARGUMENT;
      const int64_t ja = col_a[pa], jb = col_b[pb];
      if (ja == jb) {
        val_out[q] = SF_FN(sf_sr_term)(op, val_a[pa++], val_b[pb++]);
      } else if (ja < jb) {
        val_out[q] = with_defaults ? SF_FN(sf_sr_term)(op, val_a[pa], db) : val_a[pa];
        ++pa;
      } else {
        val_out[q] = with_defaults ? SF_FN(sf_sr_term)(op, da, val_b[pb]) : val_b[pb];
        ++pb;
      }
      col_out[q++] = ja < jb ? ja : jb;
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
