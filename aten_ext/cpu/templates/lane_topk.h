/* templates/lane_topk.h -- the k best stored values of each CSR row, in
 * torch's order (descending: NaN above everything; ascending: NaN after
 * everything), ties by position (the earlier element is better), as a stable
 * sort of the row gives them. A heap of k element numbers per row, held in
 * the row's own output slots (no scratch): its root the worst one kept. */

/* Whether element a (value x) comes before element b (value y) in the order. */
static inline int SF_FN(sf_lt_before)(T x, int64_t a, T y, int64_t b, int descending) {
  const int xn = ISNAN(x), yn = ISNAN(y);
  if (xn || yn) {
    if (xn && yn) return a < b;
    return descending ? xn : yn; /* NaN first descending, last ascending */
  }
  if (x != y) return descending ? x > y : x < y;
  return a < b;
}

/* Restores the heap below slot i (root: the worst kept element). */
static void SF_FN(sf_lt_sift)(int64_t *h, int64_t k, int64_t i, const T *values,
                              int descending) {
  for (;;) {
    const int64_t l = 2 * i + 1, r = l + 1;
    int64_t w = i;
    if (l < k && SF_FN(sf_lt_before)(values[h[w]], h[w], values[h[l]], h[l], descending)) w = l;
    if (r < k && SF_FN(sf_lt_before)(values[h[w]], h[w], values[h[r]], h[r], descending)) w = r;
    if (w == i) return;
    const int64_t t = h[i];
    h[i] = h[w];
    h[w] = t;
    i = w;
  }
}

/* Restores the max-heap of element numbers h[0..n) below slot i. */
static void SF_FN(sf_lt_sift_max)(int64_t *h, int64_t n, int64_t i) {
  for (;;) {
    const int64_t l = 2 * i + 1, r = l + 1;
    int64_t w = i;
    if (l < n && h[l] > h[w]) w = l;
    if (r < n && h[r] > h[w]) w = r;
    if (w == i) return;
    const int64_t t = h[i];
    h[i] = h[w];
    h[w] = t;
    i = w;
  }
}

/* Sorts element numbers ascending in place (heapsort: no allocation). */
static void SF_FN(sf_lt_sort_idx)(int64_t *h, int64_t k) {
  for (int64_t s = k / 2 - 1; s >= 0; --s) SF_FN(sf_lt_sift_max)(h, k, s);
  for (int64_t end = k - 1; end > 0; --end) {
    const int64_t t = h[0];
    h[0] = h[end];
    h[end] = t;
    SF_FN(sf_lt_sift_max)(h, end, 0);
  }
}

sf_status SF_FN(sf_lane_topk)(int64_t *out, const int64_t *crow, const T *values, int64_t nrows,
                              int64_t nse, int64_t k, int descending, int64_t row_begin,
                              int64_t row_end) {
  SF_FAIL_IF(nrows < 0 || nse < 0 || k < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(values, nse);
  SF_NEED(out, nrows * k);
  SF_FAIL_IF(row_begin < 0 || row_begin > row_end || row_end > nrows, SF_ERR_INVALID_ARGUMENT);
  for (int64_t r = row_begin; r < row_end; ++r) {
    const int64_t b = crow[r], e = crow[r + 1];
    SF_FAIL_IF(e < b, SF_ERR_CROW_DECREASING);
    SF_FAIL_IF(b < 0 || e > nse, SF_ERR_INDEX_OUT_OF_RANGE);
    int64_t *h = out + r * k;
    const int64_t m = e - b < k ? e - b : k;
    for (int64_t i = 0; i < m; ++i) h[i] = b + i;
    for (int64_t i = m; i < k; ++i) h[i] = -1;
    if (m == k && m > 0) {
      for (int64_t s = k / 2 - 1; s >= 0; --s) SF_FN(sf_lt_sift)(h, k, s, values, descending);
      for (int64_t p = b + k; p < e; ++p) {
        if (SF_FN(sf_lt_before)(values[p], p, values[h[0]], h[0], descending)) {
          h[0] = p;
          SF_FN(sf_lt_sift)(h, k, 0, values, descending);
        }
      }
      SF_FN(sf_lt_sort_idx)(h, k);
    }
  }
  return SF_OK;
}
