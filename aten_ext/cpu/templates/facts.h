/* templates/facts.h -- sf_dense_facts_* (sf_products.c), for f32 and f64, after
 * templates/absmax.h. */

/* The sum of len elements at stride `stride` into eight double lanes. */
static inline void SF_FN(sf_sum_run)(const T *x, int64_t len, int64_t stride,
                                     double *lanes) {
  int64_t i = 0;
  if (stride == 1)
    for (; i + 8 <= len; i += 8)
      for (int u = 0; u < 8; ++u) lanes[u] += (double)x[i + u];
  for (; i < len; ++i) lanes[0] += (double)x[i * stride];
}

SF_CLONES sf_status SF_FN(sf_dense_facts)(T *absmax, T *sum, const T *x, int64_t rows,
                                          int64_t cols, int64_t ld) {
  SF_FAIL_IF(rows < 0 || cols < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(absmax == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(cols > 1 && rows > 1 && ld < cols, SF_ERR_INVALID_ARGUMENT);
  SF_FAIL_IF(cols == 1 && rows > 1 && ld < 0, SF_ERR_INVALID_ARGUMENT);
  SF_NEED2(x, rows, cols);
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  U m = 0;
  /* a vector at stride ld, or rows of cols contiguous elements */
  const int64_t runs = cols == 1 ? 1 : rows, len = cols == 1 ? rows : cols;
  const int64_t stride = cols == 1 ? ld : 1;
  for (int64_t r = 0; r < runs && len > 0; ++r) {
    const U b = SF_FN(sf_absmax_bits)(x + r * ld, len, stride);
    m = b > m ? b : m;
    if (sum) SF_FN(sf_sum_run)(x + r * ld, len, stride, lanes);
  }
  *absmax = SF_FN(sf_from_bits)(m);
  if (sum)
    *sum = (T)(((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
               ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7])));
  return SF_OK;
}

/* The spread of a dense block's products: for each column t the finite
 * |s_j x_jt| (in double) summed and their maximum in one pass, and the
 * smallest ratio sum / max over the columns with a non-zero maximum. A sum
 * that overflows double (float64 products near its largest) is taken again
 * scaled by its column's maximum. */
static inline double SF_FN(sf_spread_term)(const T *x, int64_t r, int64_t t, int64_t ld,
                                            const T *row_scale) {
  const double p = fabs((row_scale ? (double)row_scale[r] : 1.0) * (double)x[r * ld + t]);
  return p <= DBL_MAX ? p : 0.0; /* finite products only (NaN fails the test) */
}

SF_CLONES sf_status SF_FN(sf_dense_spread)(double *spread, double *col_max, double *col_sum,
                                           const T *x, int64_t rows, int64_t cols, int64_t ld,
                                           const T *row_scale) {
  SF_FAIL_IF(rows < 0 || cols < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(spread == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(cols > 1 && rows > 1 && ld < cols, SF_ERR_INVALID_ARGUMENT);
  SF_FAIL_IF(cols == 1 && rows > 1 && ld < 0, SF_ERR_INVALID_ARGUMENT);
  *spread = INFINITY;
  if (rows == 0 || cols == 0) return SF_OK;
  SF_FAIL_IF(col_max == NULL || col_sum == NULL, SF_ERR_NULL_POINTER);
  SF_NEED2(x, rows, cols);
  if (cols == 1 && ld == 1 && row_scale == NULL) {
    /* a contiguous vector (the common SpMV): eight lanes, so the sum does
     * not wait on one add's latency */
    double mx[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sm[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t r = 0;
    for (; r + 8 <= rows; r += 8)
      for (int u = 0; u < 8; ++u) {
        double p = fabs((double)x[r + u]);
        p = p <= DBL_MAX ? p : 0.0;
        mx[u] = p > mx[u] ? p : mx[u];
        sm[u] += p;
      }
    for (; r < rows; ++r) {
      double p = fabs((double)x[r]);
      p = p <= DBL_MAX ? p : 0.0;
      mx[0] = p > mx[0] ? p : mx[0];
      sm[0] += p;
    }
    double m = 0, sum = 0;
    for (int u = 0; u < 8; ++u) {
      m = mx[u] > m ? mx[u] : m;
      sum += sm[u];
    }
    if (m > 0 && sum <= DBL_MAX) {
      col_max[0] = m;
      col_sum[0] = sum / m;
      *spread = sum / m;
      return SF_OK;
    }
    if (m == 0) {
      col_max[0] = 0;
      col_sum[0] = 0;
      return SF_OK;
    }
  }
  for (int64_t t = 0; t < cols; ++t) {
    /* one column at a time, in registers: a vector (the common SpMV) reads
     * contiguously, a row-major block at stride ld */
    double mx = 0, sum = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const double p = SF_FN(sf_spread_term)(x, r, t, ld, row_scale);
      mx = p > mx ? p : mx;
      sum += p;
    }
    if (mx > 0 && !(sum <= DBL_MAX)) {
      sum = 0;
      for (int64_t r = 0; r < rows; ++r) sum += SF_FN(sf_spread_term)(x, r, t, ld, row_scale) / mx;
    } else if (mx > 0) {
      sum /= mx;
    }
    col_max[t] = mx;
    col_sum[t] = sum;
    if (mx > 0 && sum < *spread) *spread = sum;
  }
  return SF_OK;
}
