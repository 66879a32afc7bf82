/* templates/attention.h -- fused sparse attention and its backward
 * (sf_csr_attention_*, sf_csr_attention_backward_rows_* / _cols_*) for f32 and
 * f64: compiled once per type by sf_instantiate.h from sf_attention.c, after
 * templates/dot.h. */

SF_CLONES sf_status SF_FN(sf_csr_attention)(
  T *out, int64_t ldo, T *lse, const int64_t *crow, const int64_t *col, const T *bias,
  int64_t bias_stride, int64_t nrows, int64_t ncols, int64_t nse, int64_t nbatch,
  const T *q, int64_t ldq, const T *k, int64_t ldk, const T *v, int64_t ldv, int64_t e,
  int64_t dv, T scale, int64_t row_begin, int64_t row_end) {
  int64_t total;
  sf_status st = sf_batched_rows(&total, nbatch, nrows);
  if (st != SF_OK) return st;
  SF_CHECK_RANGE(total, row_begin, row_end);
  SF_FAIL_IF(ncols < 0 || nse < 0 || e < 0 || dv < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(ldq < e || ldk < e || ldv < dv || ldo < dv, SF_ERR_INVALID_ARGUMENT);
  SF_FAIL_IF(bias_stride != 0 && bias_stride != nse, SF_ERR_INVALID_ARGUMENT);
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(crow == NULL || lse == NULL, SF_ERR_NULL_POINTER);
  SF_NEED2(out, total, dv);
  SF_NEED(col, nse);
  SF_NEED2(q, total, e);
  SF_NEED2(k, ncols, e);
  SF_NEED2(v, ncols, dv);
  T sc[SF_ATTENTION_BLOCK];
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t b = r / nrows, i = r - b * nrows;
    int64_t lo, hi;
    st = sf_row_span(&lo, &hi, crow, i, nse);
    if (st != SF_OK) return st;
    const T *restrict qi = q + r * ldq;
    const T *kb = k + b * ncols * ldk, *vb = v + b * ncols * ldv;
    const T *bb = bias ? bias + b * bias_stride : NULL;
    T *restrict o = out + r * ldo;
    for (int64_t t = 0; t < dv; ++t) o[t] = 0;
    T m = -INFINITY, l = 0; /* running max and sum of exp(s - m) */
    int nan = 0;
    for (int64_t p0 = lo; p0 < hi; p0 += SF_ATTENTION_BLOCK) {
      const int64_t n = hi - p0 < SF_ATTENTION_BLOCK ? hi - p0 : SF_ATTENTION_BLOCK;
      T top = -INFINITY;
      for (int64_t a = 0; a < n; ++a) {
        const int64_t j = col[p0 + a];
        if (j < 0 || j >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
        if (p0 + a + SF_ATTENTION_AHEAD < hi) {
          const int64_t jn = col[p0 + a + SF_ATTENTION_AHEAD];
          if (jn >= 0 && jn < ncols) SF_PREFETCH_ROW(T, kb + jn * ldk, e);
        }
        const T s = scale * SF_FN(sf_dot)(qi, kb + j * ldk, e) + (bb ? bb[p0 + a] : 0);
        sc[a] = s;
        nan |= s != s;
        if (s > top) top = s;
      }
      if (top == -INFINITY) continue; /* weights 0 (a nan is flagged), no -inf - -inf */
      if (top > m) { /* a new max: rescale what is summed so far */
        const T c = EXP(m - top);
        l *= c;
        for (int64_t t = 0; t < dv; ++t) o[t] *= c;
        m = top;
      }
      for (int64_t a = 0; a < n; ++a) {
        sc[a] = EXP(sc[a] - m); /* 0 for -inf; nan for +inf once m is +inf */
        l += sc[a];
      }
      /* Four rows of V per pass over o: a quarter of its loads and stores. */
      int64_t a = 0;
      for (; a + 4 <= n; a += 4) {
        if (a + 4 + SF_ATTENTION_AHEAD / 2 <= n)
          for (int u = 0; u < 4; ++u)
            SF_PREFETCH_ROW(T, vb + col[p0 + a + SF_ATTENTION_AHEAD / 2 + u] * ldv, dv);
        const T *restrict v0 = vb + col[p0 + a] * ldv, *restrict v1 = vb + col[p0 + a + 1] * ldv;
        const T *restrict v2 = vb + col[p0 + a + 2] * ldv;
        const T *restrict v3 = vb + col[p0 + a + 3] * ldv;
        const T w0 = sc[a], w1 = sc[a + 1], w2 = sc[a + 2], w3 = sc[a + 3];
        for (int64_t t = 0; t < dv; ++t)
          o[t] += (w0 * v0[t] + w1 * v1[t]) + (w2 * v2[t] + w3 * v3[t]);
      }
      for (; a < n; ++a) {
        const T w = sc[a], *restrict vj = vb + col[p0 + a] * ldv;
        for (int64_t t = 0; t < dv; ++t) o[t] += w * vj[t];
      }
    }
    if (nan || m == INFINITY) { /* as the dense softmax: exp(inf - inf) or a nan */
      for (int64_t t = 0; t < dv; ++t) o[t] = NAN;
      lse[r] = NAN;
      continue;
    }
    if (l == 0) { /* nothing stored, or only -inf: weights 0 (torch's safe softmax) */
      lse[r] = -INFINITY;
      continue;
    }
    const T inv = 1 / l;
    for (int64_t t = 0; t < dv; ++t) o[t] *= inv;
    lse[r] = m + LOG(l);
  }
  return SF_OK;
}

SF_CLONES sf_status SF_FN(sf_csr_attention_backward_rows)(
  T *dq, int64_t lddq, T *ds, T *w, const int64_t *crow, const int64_t *col, const T *bias,
  int64_t bias_stride, int64_t nrows, int64_t ncols, int64_t nse, int64_t nbatch,
  const T *q, int64_t ldq, const T *k, int64_t ldk, const T *v, int64_t ldv, const T *lse,
  const T *g, int64_t ldg, const T *g_lse, int64_t e, int64_t dv, T scale,
  int64_t row_begin, int64_t row_end) {
  int64_t total;
  sf_status st = sf_batched_rows(&total, nbatch, nrows);
  if (st != SF_OK) return st;
  SF_CHECK_RANGE(total, row_begin, row_end);
  SF_FAIL_IF(ncols < 0 || nse < 0 || e < 0 || dv < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(ldq < e || ldk < e || ldv < dv || ldg < dv || lddq < e,
             SF_ERR_INVALID_ARGUMENT);
  SF_FAIL_IF(bias_stride != 0 && bias_stride != nse, SF_ERR_INVALID_ARGUMENT);
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(crow == NULL || lse == NULL, SF_ERR_NULL_POINTER);
  SF_NEED2(dq, total, e);
  SF_NEED(col, nse);
  SF_NEED2(ds, nbatch, nse);
  SF_NEED2(w, nbatch, nse);
  SF_NEED2(q, total, e);
  SF_NEED2(k, ncols, e);
  SF_NEED2(v, ncols, dv);
  SF_NEED2(g, total, dv);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t b = r / nrows, i = r - b * nrows;
    int64_t lo, hi;
    st = sf_row_span(&lo, &hi, crow, i, nse);
    if (st != SF_OK) return st;
    const T *restrict qi = q + r * ldq, *restrict gi = g + r * ldg;
    const T *kb = k + b * ncols * ldk, *vb = v + b * ncols * ldv;
    const T *bb = bias ? bias + b * bias_stride : NULL;
    T *restrict dsb = ds + b * nse, *restrict wb = w + b * nse;
    T *restrict dqi = dq + r * lddq;
    const T top = lse[r], gl = g_lse ? g_lse[r] : 0;
    /* First pass: the weights and dw (kept in ds), and their dot D. */
    T dot = 0;
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t j = col[p];
      if (j < 0 || j >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
      if (p + SF_ATTENTION_AHEAD < hi) {
        const int64_t jn = col[p + SF_ATTENTION_AHEAD];
        if (jn >= 0 && jn < ncols) {
          SF_PREFETCH_ROW(T, kb + jn * ldk, e);
          SF_PREFETCH_ROW(T, vb + jn * ldv, dv);
        }
      }
      const T s = scale * SF_FN(sf_dot)(qi, kb + j * ldk, e) + (bb ? bb[p] : 0);
      const T wp = top == -INFINITY ? 0 : EXP(s - top);
      const T dwp = SF_FN(sf_dot)(gi, vb + j * ldv, dv);
      wb[p] = wp;
      dsb[p] = dwp;
      dot += wp * dwp;
    }
    /* Second pass: ds, and dq as its product with K. */
    for (int64_t t = 0; t < e; ++t) dqi[t] = 0;
    for (int64_t p = lo; p < hi; ++p) dsb[p] = wb[p] * (dsb[p] - dot + gl);
    int64_t p = lo;
    for (; p + 4 <= hi; p += 4) { /* four rows of K per pass over dq (as the forward) */
      const T *restrict k0 = kb + col[p] * ldk, *restrict k1 = kb + col[p + 1] * ldk;
      const T *restrict k2 = kb + col[p + 2] * ldk, *restrict k3 = kb + col[p + 3] * ldk;
      const T d0 = dsb[p], d1 = dsb[p + 1], d2 = dsb[p + 2], d3 = dsb[p + 3];
      for (int64_t t = 0; t < e; ++t)
        dqi[t] += (d0 * k0[t] + d1 * k1[t]) + (d2 * k2[t] + d3 * k3[t]);
    }
    for (; p < hi; ++p) {
      const T d = dsb[p], *restrict kj = kb + col[p] * ldk;
      for (int64_t t = 0; t < e; ++t) dqi[t] += d * kj[t];
    }
    for (int64_t t = 0; t < e; ++t) dqi[t] *= scale;
  }
  return SF_OK;
}

SF_CLONES sf_status SF_FN(sf_csr_attention_backward_cols)(
  T *dk, int64_t lddk, T *dv_out, int64_t lddv, const int64_t *crow_t,
  const int64_t *row_t, const int64_t *perm, int64_t nrows, int64_t ncols, int64_t nse,
  int64_t nbatch, const T *ds, const T *w, const T *q, int64_t ldq, const T *g,
  int64_t ldg, int64_t e, int64_t dv, T scale, int64_t col_begin, int64_t col_end) {
  int64_t total, total_rows;
  sf_status st = sf_batched_rows(&total, nbatch, ncols);
  if (st != SF_OK) return st;
  st = sf_batched_rows(&total_rows, nbatch, nrows);
  if (st != SF_OK) return st;
  SF_CHECK_RANGE(total, col_begin, col_end);
  SF_FAIL_IF(nse < 0 || e < 0 || dv < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(ldq < e || ldg < dv || lddk < e || lddv < dv, SF_ERR_INVALID_ARGUMENT);
  if (col_end == col_begin) return SF_OK;
  SF_FAIL_IF(crow_t == NULL, SF_ERR_NULL_POINTER);
  SF_NEED2(dk, total, e);
  SF_NEED2(dv_out, total, dv);
  SF_NEED(row_t, nse);
  SF_NEED(perm, nse);
  SF_NEED2(ds, nbatch, nse);
  SF_NEED2(w, nbatch, nse);
  SF_NEED2(q, total_rows, e);
  SF_NEED2(g, total_rows, dv);
  for (int64_t c = col_begin; c < col_end; ++c) {
    const int64_t b = c / ncols, j = c - b * ncols;
    int64_t lo, hi;
    st = sf_row_span(&lo, &hi, crow_t, j, nse);
    if (st != SF_OK) return st;
    const T *qb = q + b * nrows * ldq, *gb = g + b * nrows * ldg;
    const T *dsb = ds + b * nse, *wb = w + b * nse;
    T *restrict dkc = dk + c * lddk, *restrict dvc = dv_out + c * lddv;
    for (int64_t t = 0; t < e; ++t) dkc[t] = 0;
    for (int64_t t = 0; t < dv; ++t) dvc[t] = 0;
    for (int64_t a = lo; a < hi; ++a) {
      const int64_t i = row_t[a], p = perm[a];
      if (i < 0 || i >= nrows || p < 0 || p >= nse) return SF_ERR_INDEX_OUT_OF_RANGE;
    }
    int64_t a = lo;
    for (; a + 4 <= hi; a += 4) { /* four rows of Q and g per pass, as the forward */
      const int64_t *ra = row_t + a, *pa = perm + a;
      const T *restrict q0 = qb + ra[0] * ldq, *restrict q1 = qb + ra[1] * ldq;
      const T *restrict q2 = qb + ra[2] * ldq, *restrict q3 = qb + ra[3] * ldq;
      const T *restrict g0 = gb + ra[0] * ldg, *restrict g1 = gb + ra[1] * ldg;
      const T *restrict g2 = gb + ra[2] * ldg, *restrict g3 = gb + ra[3] * ldg;
      const T d0 = dsb[pa[0]], d1 = dsb[pa[1]], d2 = dsb[pa[2]], d3 = dsb[pa[3]];
      const T w0 = wb[pa[0]], w1 = wb[pa[1]], w2 = wb[pa[2]], w3 = wb[pa[3]];
      for (int64_t t = 0; t < e; ++t)
        dkc[t] += (d0 * q0[t] + d1 * q1[t]) + (d2 * q2[t] + d3 * q3[t]);
      for (int64_t t = 0; t < dv; ++t)
        dvc[t] += (w0 * g0[t] + w1 * g1[t]) + (w2 * g2[t] + w3 * g3[t]);
    }
    for (; a < hi; ++a) {
      const T d = dsb[perm[a]], wp = wb[perm[a]];
      const T *restrict qi = qb + row_t[a] * ldq, *restrict gi = gb + row_t[a] * ldg;
      for (int64_t t = 0; t < e; ++t) dkc[t] += d * qi[t];
      for (int64_t t = 0; t < dv; ++t) dvc[t] += wp * gi[t];
    }
    for (int64_t t = 0; t < e; ++t) dkc[t] *= scale;
  }
  return SF_OK;
}
