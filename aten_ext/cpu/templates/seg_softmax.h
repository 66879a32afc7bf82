/* templates/seg_softmax.h -- softmax and log_softmax over segments and their
 * backward (sf_seg_softmax_*, sf_seg_softmax_backward_*), for f32 and f64:
 * compiled once per type by sf_instantiate.h from sf_reduce.c, which defines
 * check_segments and includes sf_softmax.h and the softmax rule first. */

/* Softmax of one value per stored element (w == 1), the common case: unit
 * strides, the max in four independent branch-free lanes (NaN noted on
 * the side: it wins, as in torch), then one pass of exp and sum, one of
 * scaling. Same formulas, same results as the general loop below. */
static sf_status SF_FN(seg_softmax_row)(T *out_values, T *out_fill, const T *values,
                                        const T *fill, int64_t fill_stride,
                                        const int64_t *seg_ptr, int64_t seg_begin,
                                        int64_t seg_end, int64_t n, int log_softmax) {
  for (int64_t s = seg_begin; s < seg_end; ++s) {
    const int64_t lo = seg_ptr[s], hi = seg_ptr[s + 1], u = n - (hi - lo);
    const T f = fill[s * fill_stride];
    const T *x = values + lo;
    T *y = out_values + lo;
    const int64_t len = hi - lo;
    T m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;
    int nan = u > 0 && isnan(f);
    int64_t k = 0;
    for (; k + 4 <= len; k += 4) {
      m0 = x[k] > m0 ? x[k] : m0;
      m1 = x[k + 1] > m1 ? x[k + 1] : m1;
      m2 = x[k + 2] > m2 ? x[k + 2] : m2;
      m3 = x[k + 3] > m3 ? x[k + 3] : m3;
      nan |= (x[k] != x[k]) | (x[k + 1] != x[k + 1]) | (x[k + 2] != x[k + 2]) |
             (x[k + 3] != x[k + 3]);
    }
    for (; k < len; ++k) {
      m0 = x[k] > m0 ? x[k] : m0;
      nan |= x[k] != x[k];
    }
    T m = m0 > m1 ? m0 : m1;
    m = m2 > m ? m2 : m;
    m = m3 > m ? m3 : m;
    if (u > 0 && f > m) m = f;
    if (nan) m = (T)NAN;
    /* exp into the output (log_softmax overwrites it below), then the sum */
    for (k = 0; k < len; ++k) y[k] = SF_FN(SF_EXP_ROW)(x[k] - m);
    T z0 = 0, z1 = 0, z2 = 0, z3 = 0;
    for (k = 0; k + 4 <= len; k += 4) {
      z0 += y[k];
      z1 += y[k + 1];
      z2 += y[k + 2];
      z3 += y[k + 3];
    }
    for (; k < len; ++k) z0 += y[k];
    T z = (z0 + z1) + (z2 + z3);
    const T ef = u > 0 ? EXP(f - m) : (T)0;
    z += (T)u * ef;
    if (log_softmax) {
      const T lz = LOG(z);
      for (k = 0; k < len; ++k) y[k] = x[k] - m - lz;
      out_fill[s] = u > 0 ? f - m - lz : (T)0;
    } else {
      const T inv = (T)1 / z;
      for (k = 0; k < len; ++k) y[k] *= inv;
      out_fill[s] = u > 0 ? ef * inv : (T)0;
    }
  }
  return SF_OK;
}

sf_status SF_FN(sf_seg_softmax)(T *out_values, T *out_fill, const T *values, const T *fill,
                                int64_t fill_stride, const int64_t *seg_ptr,
                                int64_t seg_begin, int64_t seg_end, int64_t w, int64_t n,
                                int log_softmax) {
  sf_status st = check_segments(seg_ptr, seg_begin, seg_end, w, n);
  if (st != SF_OK) return st;
  if (w == 1) {
    return SF_FN(seg_softmax_row)(out_values, out_fill, values, fill, fill_stride, seg_ptr,
                                  seg_begin, seg_end, n, log_softmax);
  }
  for (int64_t s = seg_begin; s < seg_end; ++s) {
    const int64_t lo = seg_ptr[s], hi = seg_ptr[s + 1], u = n - (hi - lo);
    const T *f = fill + s * fill_stride;
    for (int64_t c = 0; c < w; ++c) {
      /* max over the slice; NaN wins so that it propagates as in torch */
      T m = -INFINITY;
      if (u > 0) m = f[c];
      for (int64_t k = lo; k < hi; ++k) {
        const T x = values[k * w + c];
        if (x > m || isnan(x)) m = x;
      }
      T z = 0;
      for (int64_t k = lo; k < hi; ++k) {
        const T e = EXP(values[k * w + c] - m);
        if (!log_softmax) out_values[k * w + c] = e;
        z += e;
      }
      const T ef = u > 0 ? EXP(f[c] - m) : (T)0;
      z += (T)u * ef;
      if (log_softmax) {
        const T lz = LOG(z);
        for (int64_t k = lo; k < hi; ++k) {
          out_values[k * w + c] = values[k * w + c] - m - lz;
        }
        out_fill[s * w + c] = u > 0 ? f[c] - m - lz : (T)0;
      } else {
        const T inv = (T)1 / z;
        for (int64_t k = lo; k < hi; ++k) out_values[k * w + c] *= inv;
        out_fill[s * w + c] = u > 0 ? ef * inv : (T)0;
      }
    }
  }
  return SF_OK;
}

sf_status SF_FN(sf_seg_softmax_backward)(
  T *grad_values, T *grad_fill, const T *out_values, const T *out_fill, const T *g_values,
  const T *g_fill, const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end, int64_t w,
  int64_t n, int log_softmax) {
  sf_status st = check_segments(seg_ptr, seg_begin, seg_end, w, n);
  if (st != SF_OK) return st;
  for (int64_t s = seg_begin; s < seg_end; ++s) {
    const int64_t lo = seg_ptr[s], hi = seg_ptr[s + 1], u = n - (hi - lo);
    for (int64_t c = 0; c < w; ++c) {
      const int64_t sc = s * w + c;
      T acc = 0; /* softmax: sum g*y over the slice; log_softmax: sum g */
      for (int64_t k = lo; k < hi; ++k) {
        const T g = g_values[k * w + c];
        acc += log_softmax ? g : g * out_values[k * w + c];
      }
      acc += SF_FN(softmax_fill_dot)(out_fill[sc], g_fill[sc], u, log_softmax);
      for (int64_t k = lo; k < hi; ++k) {
        grad_values[k * w + c] = SF_FN(softmax_grad)(out_values[k * w + c],
                                                     g_values[k * w + c], acc, log_softmax);
      }
      grad_fill[sc] = SF_FN(softmax_fill_grad)(out_fill[sc], g_fill[sc], acc, u, log_softmax);
    }
  }
  return SF_OK;
}
