/* templates/products.h -- the fill-aware products of sf_products.c for f32
 * and f64: SpMM, SpMV, SDDMM, SpGEMM's rows and the SpGEMM backward's sparse
 * SDDMM (contracts in sparsefill_core.h). Compiled once per type by
 * sf_instantiate.h after templates/dot.h and templates/absmax.h. */

SF_CLONES sf_status SF_FN(sf_csr_spmm)(T *c, int64_t ldc, const int64_t *crow, const int64_t *col,
                             const T *values, int64_t nrows, int64_t ncols, int64_t nse,
                             const T *b, int64_t ldb, int64_t n, const T *row_fill,
                             int64_t row_fill_stride, const T *col_fill, const T *colsum,
                             const T *corr, int64_t row_begin, int64_t row_end,
                             T *values_absmax) {
  SF_CHECK_RANGE(nrows, row_begin, row_end);
  SF_FAIL_IF(ncols < 0 || nse < 0 || n < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(ldc < n || ldb < n, SF_ERR_INVALID_ARGUMENT);
  if (values_absmax) *values_absmax = 0;
  if (row_end == row_begin || n == 0) return SF_OK;
  SF_FAIL_IF(c == NULL || crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(col, nse);
  SF_NEED(values, nse);
  SF_NEED2(b, ncols, n);
  SF_FN(sf_absmax_block) seen = {0, -1, -1}; /* max |values| of the range (in blocks) */
  for (int64_t i = row_begin; i < row_end; ++i) {
    int64_t lo, hi;
    sf_status st = sf_row_span(&lo, &hi, crow, i, nse);
    if (st != SF_OK) return st;
    const T rf = row_fill ? row_fill[i * row_fill_stride] : (T)0;
    T *restrict ci = c + i * ldc;
    /* The correction row first: C is written once, in this pass. It starts
     * from +0, as dense's sums of products do: a zero fill times a negative
     * column sum alone is -0.0, which 1/x or atan2 would tell apart. */
    for (int64_t t = 0; t < n; ++t) {
      T v = colsum ? rf * colsum[t] : (T)0;
      ci[t] = (T)0 + (corr ? v + corr[t] : v);
    }
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t j = col[p];
      if (j < 0 || j >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
      const T a = values[p] - rf - (col_fill ? col_fill[j] : (T)0);
      const T *restrict bj = b + j * ldb;
      for (int64_t t = 0; t < n; ++t) ci[t] += a * bj[t];
    }
    if (values_absmax) SF_FN(sf_absmax_block_add)(&seen, values, lo, hi);
  }
  if (values_absmax) *values_absmax = SF_FN(sf_absmax_block_end)(&seen, values);
  return SF_OK;
}

SF_CLONES sf_status SF_FN(sf_csr_spmv)(T *y, int64_t incy, const int64_t *crow, const int64_t *col,
                             const T *values, int64_t nrows, int64_t ncols, int64_t nse,
                             const T *x, int64_t incx, const T *row_fill,
                             int64_t row_fill_stride, const T *col_fill, T xsum, T corr,
                             int64_t row_begin, int64_t row_end, T *values_absmax) {
  SF_CHECK_RANGE(nrows, row_begin, row_end);
  SF_FAIL_IF(ncols < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  if (values_absmax) *values_absmax = 0;
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(y == NULL || crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(col, nse);
  SF_NEED(values, nse);
  SF_NEED(x, ncols);
  SF_FN(sf_absmax_block) seen = {0, -1, -1}; /* max |values| of the range (in blocks) */
  for (int64_t i = row_begin; i < row_end; ++i) {
    int64_t lo, hi;
    sf_status st = sf_row_span(&lo, &hi, crow, i, nse);
    if (st != SF_OK) return st;
    const T rf = row_fill ? row_fill[i * row_fill_stride] : (T)0;
    /* Four partial sums: one running sum would serialise on the add's latency. */
    T a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t p = lo;
    for (; p + 4 <= hi; p += 4) {
      const int64_t j0 = col[p], j1 = col[p + 1], j2 = col[p + 2], j3 = col[p + 3];
      if (((uint64_t)j0 >= (uint64_t)ncols) | ((uint64_t)j1 >= (uint64_t)ncols) |
          ((uint64_t)j2 >= (uint64_t)ncols) | ((uint64_t)j3 >= (uint64_t)ncols))
        return SF_ERR_INDEX_OUT_OF_RANGE;
      a0 += (values[p] - rf - (col_fill ? col_fill[j0] : (T)0)) * x[j0 * incx];
      a1 += (values[p + 1] - rf - (col_fill ? col_fill[j1] : (T)0)) * x[j1 * incx];
      a2 += (values[p + 2] - rf - (col_fill ? col_fill[j2] : (T)0)) * x[j2 * incx];
      a3 += (values[p + 3] - rf - (col_fill ? col_fill[j3] : (T)0)) * x[j3 * incx];
    }
    for (; p < hi; ++p) {
      const int64_t j = col[p];
      if (j < 0 || j >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
      a0 += (values[p] - rf - (col_fill ? col_fill[j] : (T)0)) * x[j * incx];
    }
    y[i * incy] = (rf * xsum + corr) + ((a0 + a1) + (a2 + a3));
    if (values_absmax) SF_FN(sf_absmax_block_add)(&seen, values, lo, hi);
  }
  if (values_absmax) *values_absmax = SF_FN(sf_absmax_block_end)(&seen, values);
  return SF_OK;
}

SF_CLONES sf_status SF_FN(sf_csr_sddmm)(T *out, const int64_t *crow, const int64_t *col,
                              int64_t nrows, int64_t ncols, int64_t nse, const T *x,
                              int64_t ldx, const T *y, int64_t ldy, int64_t n,
                              int64_t row_begin, int64_t row_end) {
  SF_CHECK_RANGE(nrows, row_begin, row_end);
  SF_FAIL_IF(ncols < 0 || nse < 0 || n < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(ldx < n || ldy < n, SF_ERR_INVALID_ARGUMENT);
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(out, nse);
  SF_NEED(col, nse);
  SF_NEED2(x, nrows, n);
  SF_NEED2(y, ncols, n);
  for (int64_t i = row_begin; i < row_end; ++i) {
    int64_t lo, hi;
    sf_status st = sf_row_span(&lo, &hi, crow, i, nse);
    if (st != SF_OK) return st;
    const T *restrict xi = x + i * ldx;
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t j = col[p];
      if (j < 0 || j >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
      out[p] = SF_FN(sf_dot)(xi, y + j * ldy, n);
    }
  }
  return SF_OK;
}

SF_CLONES sf_status SF_FN(sf_csr_spgemm_rows)(
  int64_t *col_out, T *val_out, int64_t capacity, int64_t *used, int64_t *row_nse,
  int64_t *next_row, const int64_t *row_bound, const int64_t *crow_a, const int64_t *col_a,
  const T *val_a, int64_t m, int64_t k, int64_t nse_a, const int64_t *crow_b,
  const int64_t *col_b, const T *val_b, int64_t n, int64_t nse_b, T *acc, uint64_t *bits,
  int64_t row_begin, int64_t row_end) {
  SF_CHECK_RANGE(m, row_begin, row_end);
  SF_FAIL_IF(k < 0 || n < 0 || nse_a < 0 || nse_b < 0 || capacity < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(used == NULL || next_row == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(*used < 0 || *used > capacity, SF_ERR_INVALID_ARGUMENT);
  *next_row = row_begin;
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(row_nse == NULL || row_bound == NULL || crow_a == NULL || crow_b == NULL,
             SF_ERR_NULL_POINTER);
  SF_NEED(col_out, capacity);
  SF_NEED(val_out, capacity);
  SF_NEED(col_a, nse_a);
  SF_NEED(val_a, nse_a);
  SF_NEED(col_b, nse_b);
  SF_NEED(val_b, nse_b);
  SF_NEED(acc, n);
  SF_NEED(bits, n);
  for (int64_t w = 0; w < (n + 63) / 64; ++w) bits[w] = 0;
  int64_t out0 = *used;
  for (int64_t i = row_begin; i < row_end; ++i) {
    const int64_t bound = row_bound[i];
    SF_FAIL_IF(bound < 0, SF_ERR_INVALID_ARGUMENT);
    if (bound > capacity - out0) { /* the caller grows the buffer and goes on from row i */
      *used = out0;
      *next_row = i;
      return SF_OK;
    }
    int64_t lo, hi, cnt = 0, cmin = n, cmax = -1;
    sf_status st = sf_row_span(&lo, &hi, crow_a, i, nse_a);
    if (st != SF_OK) return st;
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t j = col_a[p];
      if (j < 0 || j >= k) return SF_ERR_INDEX_OUT_OF_RANGE;
      int64_t blo, bhi;
      st = sf_row_span(&blo, &bhi, crow_b, j, nse_b);
      if (st != SF_OK) return st;
      const T a = val_a[p];
      for (int64_t q = blo; q < bhi; ++q) {
        const int64_t t = col_b[q];
        if (t < 0 || t >= n) return SF_ERR_INDEX_OUT_OF_RANGE;
        const uint64_t bit = (uint64_t)1 << (t & 63);
        if (!(bits[t >> 6] & bit)) { /* the row's bitmap marks columns seen */
          /* a row beyond its bound is refused, never written past the buffer */
          if (cnt == bound) return SF_ERR_INVALID_ARGUMENT;
          bits[t >> 6] |= bit;
          acc[t] = a * val_b[q];
          col_out[out0 + cnt++] = t;
          if (t < cmin) cmin = t;
          if (t > cmax) cmax = t;
        } else {
          acc[t] += a * val_b[q];
        }
      }
    }
    if (cnt > 0) sf_sorted_columns(col_out + out0, cnt, bits, cmin, cmax);
    for (int64_t q = 0; q < cnt; ++q) val_out[out0 + q] = acc[col_out[out0 + q]];
    row_nse[i] = cnt;
    out0 += cnt;
  }
  *used = out0;
  *next_row = row_end;
  return SF_OK;
}

sf_status SF_FN(sf_csr_sddmm_sparse)(
  T *out, const int64_t *crow_p, const int64_t *col_p, int64_t nrows, int64_t ncols,
  int64_t nse_p, const int64_t *crow_x, const int64_t *col_x, const T *val_x,
  int64_t nse_x, const int64_t *crow_s, const int64_t *col_s, const T *val_s,
  int64_t nse_s, int64_t n, T *acc, int64_t row_begin, int64_t row_end) {
  SF_CHECK_RANGE(nrows, row_begin, row_end);
  SF_FAIL_IF(ncols < 0 || n < 0 || nse_p < 0 || nse_x < 0 || nse_s < 0,
             SF_ERR_NEGATIVE_SIZE);
  if (row_end == row_begin) return SF_OK;
  SF_FAIL_IF(crow_p == NULL || crow_x == NULL || crow_s == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(out, nse_p);
  SF_NEED(col_p, nse_p);
  SF_NEED(col_x, nse_x);
  SF_NEED(val_x, nse_x);
  SF_NEED(col_s, nse_s);
  SF_NEED(val_s, nse_s);
  SF_NEED(acc, n);
  for (int64_t t = 0; t < n; ++t) acc[t] = 0;
  for (int64_t i = row_begin; i < row_end; ++i) {
    int64_t lo, hi, xlo, xhi;
    sf_status st = sf_row_span(&lo, &hi, crow_p, i, nse_p);
    if (st != SF_OK) return st;
    st = sf_row_span(&xlo, &xhi, crow_x, i, nse_x);
    if (st != SF_OK) return st;
    /* Row i of X, scattered into a dense row; duplicates add up. */
    for (int64_t q = xlo; q < xhi; ++q) {
      if (col_x[q] < 0 || col_x[q] >= n) return SF_ERR_INDEX_OUT_OF_RANGE;
      acc[col_x[q]] += val_x[q];
    }
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t j = col_p[p];
      if (j < 0 || j >= ncols) return SF_ERR_INDEX_OUT_OF_RANGE;
      int64_t slo, shi;
      st = sf_row_span(&slo, &shi, crow_s, j, nse_s);
      if (st != SF_OK) return st;
      T sum = 0;
      for (int64_t q = slo; q < shi; ++q) {
        if (col_s[q] < 0 || col_s[q] >= n) return SF_ERR_INDEX_OUT_OF_RANGE;
        sum += acc[col_s[q]] * val_s[q];
      }
      out[p] = sum;
    }
    for (int64_t q = xlo; q < xhi; ++q) acc[col_x[q]] = 0;
  }
  return SF_OK;
}
