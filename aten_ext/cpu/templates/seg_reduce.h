/* templates/seg_reduce.h -- sum, prod and max/min over segments
 * (sf_seg_sum_*, sf_seg_prod_*, sf_seg_max_*): sum and max for f32, f64 and
 * i64 (floats sum in double), prod for the floats. Compiled once per type by
 * sf_instantiate.h from sf_reduce.c, which defines check_segments. */

sf_status SF_FN(sf_seg_sum)(T *out, const T *values, const T *fill, int64_t fill_stride,
                            const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end,
                            int64_t w, int64_t n) {
  sf_status st = check_segments(seg_ptr, seg_begin, seg_end, w, n);
  if (st != SF_OK) return st;
  for (int64_t s = seg_begin; s < seg_end; ++s) {
    const int64_t lo = seg_ptr[s], hi = seg_ptr[s + 1], u = n - (hi - lo);
    const T *f = fill + s * fill_stride;
    if (w == 1) { /* the common non-hybrid case: one contiguous run, summed in */
      ACC a0 = 0, a1 = 0, a2 = 0, a3 = 0; /* four registers: no add waits on the last */
      int64_t k = lo;
      for (; k + 4 <= hi; k += 4) {
        a0 += (ACC)values[k];
        a1 += (ACC)values[k + 1];
        a2 += (ACC)values[k + 2];
        a3 += (ACC)values[k + 3];
      }
      for (; k < hi; ++k) a0 += (ACC)values[k];
      ACC acc = (a0 + a1) + (a2 + a3);
      if (u > 0) acc += (ACC)u * (ACC)f[0];
      out[s] = (T)acc;
      continue;
    }
    for (int64_t c = 0; c < w; ++c) {
      ACC acc = 0;
      for (int64_t k = lo; k < hi; ++k) acc += (ACC)values[k * w + c];
      if (u > 0) acc += (ACC)u * (ACC)f[c];
      out[s * w + c] = (T)acc;
    }
  }
  return SF_OK;
}

#if SF_IS_FLOAT
sf_status SF_FN(sf_seg_prod)(T *out, const T *values, const T *fill, int64_t fill_stride,
                             const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end,
                             int64_t w, int64_t n) {
  sf_status st = check_segments(seg_ptr, seg_begin, seg_end, w, n);
  if (st != SF_OK) return st;
  for (int64_t s = seg_begin; s < seg_end; ++s) {
    const int64_t lo = seg_ptr[s], hi = seg_ptr[s + 1], u = n - (hi - lo);
    const T *f = fill + s * fill_stride;
    for (int64_t c = 0; c < w; ++c) {
      T p = u > 0 ? POW(f[c], (T)u) : (T)1;
      for (int64_t k = lo; k < hi; ++k) p *= values[k * w + c];
      out[s * w + c] = p;
    }
  }
  return SF_OK;
}
#endif

sf_status SF_FN(sf_seg_max)(T *out, int64_t *winner, int64_t *index, const T *values,
                            const T *fill, int64_t fill_stride, const int64_t *coord,
                            const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end,
                            int64_t w, int64_t n, int is_min) {
  sf_status st = check_segments(seg_ptr, seg_begin, seg_end, w, n);
  if (st != SF_OK) return st;
  for (int64_t s = seg_begin; s < seg_end; ++s) {
    const int64_t lo = seg_ptr[s], hi = seg_ptr[s + 1], u = n - (hi - lo);
    const T *f = fill + s * fill_stride;
    /* first unspecified coordinate: the first gap in the sorted coords */
    int64_t gap = -1;
    if (coord != NULL && u > 0) {
      gap = hi - lo;
      for (int64_t k = lo; k < hi; ++k) {
        if (coord[k] != k - lo) {
          gap = k - lo;
          break;
        }
      }
    }
    for (int64_t c = 0; c < w; ++c) {
      int64_t best = -1; /* stored position, -1: none yet */
      T bv = 0;
      for (int64_t k = lo; k < hi; ++k) {
        const T x = values[k * w + c];
        if (best < 0 || (ISNAN(x) && !ISNAN(bv)) ||
            (!ISNAN(bv) && (is_min ? x < bv : x > bv))) {
          best = k;
          bv = x;
        }
      }
      int64_t win = best;
      if (u > 0) {
        const T x = f[c];
        int fill_wins;
        if (best < 0) {
          fill_wins = 1;
        } else if (ISNAN(bv)) {
          fill_wins = ISNAN(x) && coord != NULL && gap < coord[best];
        } else if (ISNAN(x)) {
          fill_wins = 1;
        } else if (x == bv) { /* a tie: the first occurrence wins */
          fill_wins = coord != NULL && gap < coord[best];
        } else {
          fill_wins = is_min ? x < bv : x > bv;
        }
        if (fill_wins) {
          win = -1;
          bv = x;
        }
      }
      out[s * w + c] = bv;
      if (winner != NULL) winner[s * w + c] = win;
      if (index != NULL) {
        index[s * w + c] = coord == NULL ? 0 : (win >= 0 ? coord[win] : gap);
      }
    }
  }
  return SF_OK;
}
