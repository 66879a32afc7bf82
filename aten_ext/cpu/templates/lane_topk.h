/* templates/lane_topk.h -- per CSR row, the stored values in torch's order
 * (descending: NaN above everything; ascending: NaN after everything), ties
 * by position (the earlier element is better), as a stable sort of the row
 * gives them, merged with the row's fill block. sf_lane_topk_fill: the first
 * k slots of the stable sort of the dense row (the k best kept in the row's
 * own output slots, no scratch); sf_lane_sort_fill: every stored value's
 * slot, and optionally the whole dense row's sort indices. */

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

/* Up to this k a sorted array beats the heap (insertion costs O(k)). */
#ifndef SF_LT_SMALL_K
#define SF_LT_SMALL_K 32
#endif

/* Whether value x comes before value y in the order (equal values, -0.0 and
 * 0.0, NaN and NaN: neither). */
static inline int SF_FN(sf_lt_vbefore)(T x, T y, int descending) {
  const int xn = ISNAN(x), yn = ISNAN(y);
  if (xn || yn) return xn && yn ? 0 : (descending ? xn : yn);
  return descending ? x > y : x < y;
}

/* The best m elements of row [b, e) (h[0..m), m <= e - b), best first, for
 * a small m: a sorted array. Each later element costs one comparison with
 * the worst kept one (a later element never wins a tie: value only) unless
 * it enters; far fewer mispredicted branches than a heap's sifts. */
static void SF_FN(sf_lt_insert_sorted)(int64_t *h, int64_t m, int64_t b, int64_t e,
                                       const T *values, int descending) {
  for (int64_t i = 0; i < m; ++i) {
    const T x = values[b + i];
    int64_t j = i;
    while (j > 0 && SF_FN(sf_lt_vbefore)(x, values[h[j - 1]], descending)) {
      h[j] = h[j - 1];
      --j;
    }
    h[j] = b + i;
  }
  if (m == 0) return;
  T worst = values[h[m - 1]];
  for (int64_t p = b + m; p < e; ++p) {
    const T x = values[p];
    if (!SF_FN(sf_lt_vbefore)(x, worst, descending)) continue;
    int64_t j = m - 1;
    while (j > 0 && SF_FN(sf_lt_vbefore)(x, values[h[j - 1]], descending)) {
      h[j] = h[j - 1];
      --j;
    }
    h[j] = p;
    worst = values[h[m - 1]];
  }
}

/* The same for any m: the heap selection above, then a heapsort that moves
 * the worst kept one to the end each time. */
static void SF_FN(sf_lt_select_sorted)(int64_t *h, int64_t m, int64_t b, int64_t e,
                                       const T *values, int descending) {
  for (int64_t i = 0; i < m; ++i) h[i] = b + i;
  if (m == 0) return;
  for (int64_t s = m / 2 - 1; s >= 0; --s) SF_FN(sf_lt_sift)(h, m, s, values, descending);
  for (int64_t p = b + m; p < e; ++p) {
    if (SF_FN(sf_lt_before)(values[p], p, values[h[0]], h[0], descending)) {
      h[0] = p;
      SF_FN(sf_lt_sift)(h, m, 0, values, descending);
    }
  }
  for (int64_t end = m - 1; end > 0; --end) {
    const int64_t t = h[0];
    h[0] = h[end];
    h[end] = t;
    SF_FN(sf_lt_sift)(h, end, 0, values, descending);
  }
}

sf_status SF_FN(sf_lane_topk_fill)(int64_t *src, int64_t *pos, const int64_t *crow,
                                   const int64_t *col, const T *values, const T *fill,
                                   int64_t fill_stride, int64_t nrows, int64_t n, int64_t nse,
                                   int64_t k, int descending, int64_t row_begin,
                                   int64_t row_end) {
  SF_FAIL_IF(nrows < 0 || nse < 0 || k < 0 || n < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(crow == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(fill == NULL && row_begin < row_end, SF_ERR_NULL_POINTER); /* none when no rows */
  SF_NEED(values, nse);
  SF_NEED(col, nse);
  SF_NEED2(src, nrows, k);
  SF_NEED2(pos, nrows, k);
  SF_FAIL_IF(k > n || (fill_stride != 0 && fill_stride != 1), SF_ERR_INVALID_ARGUMENT);
  SF_FAIL_IF(row_begin < 0 || row_begin > row_end || row_end > nrows, SF_ERR_INVALID_ARGUMENT);
  for (int64_t r = row_begin; r < row_end; ++r) {
    /* the block's positions are counted past the stored ones */
    int64_t b, e;
    const sf_status st = sf_sorted_row(&b, &e, crow, col, r, nse, n);
    if (st != SF_OK) return st;
    int64_t *h = src + r * k, *where = pos + r * k;
    const T f = fill[r * fill_stride];
    const int64_t block = n - (e - b);
    const int64_t m = e - b < k ? e - b : k;
    if (m <= SF_LT_SMALL_K) SF_FN(sf_lt_insert_sorted)(h, m, b, e, values, descending);
    else SF_FN(sf_lt_select_sorted)(h, m, b, e, values, descending);
    /* Pick i (rank i among the row's stored values) takes slot i before the
     * block, i + (unspecified positions before it) tied with the fill (the
     * stable sort interleaves by position), i + block after it. Slots only
     * grow with i and t_i >= i: placed from the last pick down, no pick is
     * overwritten before it is read; the slots between are the block's. */
    int64_t next = k;
    for (int64_t i = m - 1; i >= 0; --i) {
      const int64_t p = h[i];
      const T v = values[p];
      int64_t t = i;
      if (SF_FN(sf_lt_vbefore)(f, v, descending)) t = i + block;
      else if (!SF_FN(sf_lt_vbefore)(v, f, descending)) t = i + (col[p] - (p - b));
      if (t >= k) continue;
      for (int64_t j = t + 1; j < next; ++j) h[j] = -1;
      h[t] = p;
      next = t;
    }
    for (int64_t j = 0; j < next; ++j) h[j] = -1;
    /* positions: a stored pick's column; the block's slots take the
     * unspecified positions in increasing order */
    int64_t q = 0, c = b;
    for (int64_t t = 0; t < k; ++t) {
      if (h[t] >= 0) {
        where[t] = col[h[t]];
        continue;
      }
      while (c < e && col[c] == q) {
        ++q;
        ++c;
      }
      where[t] = q++;
    }
  }
  return SF_OK;
}

/* Writes the next `count` unspecified columns of row [b, e) to out[0..count):
 * runs between stored columns (*q the next candidate column, *c the next
 * stored element), so each run is a plain counting loop. */
static void SF_FN(sf_ls_unspecified)(int64_t *out, int64_t count, int64_t *q, int64_t *c,
                                     int64_t e, const int64_t *col, int64_t n) {
  while (count > 0) {
    const int64_t stop = *c < e ? col[*c] : n;
    int64_t run = stop - *q;
    if (run > count) run = count;
    if (run <= 0 && *c >= e) return; /* no column left (inconsistent counts) */
    for (int64_t j = 0; j < run; ++j) out[j] = *q + j;
    out += run;
    count -= run;
    *q += run;
    if (*q == stop && *c < e) {
      ++*q;
      ++*c;
    }
  }
}

sf_status SF_FN(sf_lane_sort_fill)(int64_t *perm, int64_t *slot, int64_t *indices,
                                   const int64_t *crow, const int64_t *col, const T *values,
                                   const T *fill, int64_t fill_stride, int64_t nrows, int64_t n,
                                   int64_t nse, int descending, int64_t row_begin,
                                   int64_t row_end) {
  SF_FAIL_IF(nrows < 0 || nse < 0 || n < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(crow == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(fill == NULL && row_begin < row_end, SF_ERR_NULL_POINTER); /* none when no rows */
  SF_NEED(values, nse);
  SF_NEED(col, nse);
  SF_NEED(perm, nse);
  SF_NEED(slot, nse);
  SF_FAIL_IF(fill_stride != 0 && fill_stride != 1, SF_ERR_INVALID_ARGUMENT);
  SF_FAIL_IF(row_begin < 0 || row_begin > row_end || row_end > nrows, SF_ERR_INVALID_ARGUMENT);
  for (int64_t r = row_begin; r < row_end; ++r) {
    /* slots count unspecified positions past the stored ones */
    int64_t b, e;
    const sf_status st = sf_sorted_row(&b, &e, crow, col, r, nse, n);
    if (st != SF_OK) return st;
    /* the whole row sorted, best first, in its own span of perm */
    int64_t *h = perm + b;
    const int64_t s = e - b, block = n - s;
    if (s <= SF_LT_SMALL_K) SF_FN(sf_lt_insert_sorted)(h, s, b, e, values, descending);
    else SF_FN(sf_lt_select_sorted)(h, s, b, e, values, descending);
    /* rank i takes slot i before the block, i + (unspecified columns before
     * it) tied with the fill (the stable sort interleaves by position),
     * i + block after it: increasing in i */
    const T f = fill[r * fill_stride];
    for (int64_t i = 0; i < s; ++i) {
      const int64_t p = h[i];
      const T v = values[p];
      int64_t t = i;
      if (SF_FN(sf_lt_vbefore)(f, v, descending)) t = i + block;
      else if (!SF_FN(sf_lt_vbefore)(v, f, descending)) t = i + (col[p] - (p - b));
      slot[b + i] = t;
    }
    if (indices == NULL) continue;
    /* the dense row's sort indices: stored columns at their slots, the
     * block's slots (between them) the unspecified columns in order */
    int64_t *out = indices + r * n;
    int64_t q = 0, c = b, next = 0;
    for (int64_t i = 0; i < s; ++i) {
      const int64_t t = slot[b + i];
      SF_FN(sf_ls_unspecified)(out + next, t - next, &q, &c, e, col, n);
      out[t] = col[h[i]];
      next = t + 1;
    }
    SF_FN(sf_ls_unspecified)(out + next, n - next, &q, &c, e, col, n);
  }
  return SF_OK;
}
