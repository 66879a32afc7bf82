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
