/* templates/slot_softmax.h -- softmax by output slot and its backward
 * (sf_slot_softmax_*), for f32 and f64: compiled once per type by
 * sf_instantiate.h from sf_slot.c, after the slot reductions (slot_count) and
 * the softmax rule. */

sf_status SF_FN(sf_slot_softmax_max)(T *m, int64_t *count, const double *acc,
                                     int64_t nparts, const T *fill, int64_t fill_stride,
                                     int64_t s_begin, int64_t s_end, int64_t nslots,
                                     int64_t w, int64_t n) {
  sf_status st = check_slot_range(s_begin, s_end, nslots, w, nparts, n, fill_stride);
  if (st != SF_OK) return st;
  if (s_end > s_begin &&
      (count == NULL || (w > 0 && (m == NULL || fill == NULL)) || (nparts > 0 && acc == NULL))) {
    return SF_ERR_NULL_POINTER;
  }
  const int64_t row = w + 1, part = nslots * row;
  for (int64_t s = s_begin; s < s_end; ++s) {
    const int64_t t = SF_FN(slot_count)(acc, nparts, part, s * row + w, n);
    if (t < 0) return SF_ERR_NOT_COALESCED;
    count[s] = t;
    const T *f = fill + s * fill_stride;
    for (int64_t c = 0; c < w; ++c) {
      double a = -INFINITY;
      for (int64_t p = 0; p < nparts; ++p) {
        const double x = acc[p * part + s * row + c];
        if (isnan(x) || x > a) a = x;
      }
      if (t < n && !isnan(a) && (isnan((double)f[c]) || (double)f[c] > a)) a = (double)f[c];
      m[s * w + c] = (T)a;
    }
  }
  return SF_OK;
}

sf_status SF_FN(sf_slot_softmax_exp)(T *out_values, double *zsum, const T *values,
                                     const int64_t *slot, const T *m, int64_t k_begin,
                                     int64_t k_end, int64_t nslots, int64_t w,
                                     int log_softmax) {
  sf_status st = check_slot_rows(slot, k_begin, k_end, nslots, w);
  if (st != SF_OK) return st;
  (void)log_softmax; /* the exponentials are written either way: the pass's scratch */
  if ((nslots > 0 && w > 0 && (zsum == NULL || m == NULL)) ||
      (k_end > k_begin && w > 0 && (values == NULL || out_values == NULL))) {
    return SF_ERR_NULL_POINTER;
  }
  for (int64_t i = 0; i < nslots * w; ++i) zsum[i] = 0;
  if (w == 1) {
    /* one value per stored row, in blocks that stay in L1: the gather of
     * x - m, the exponentials in a loop of their own (it vectorizes), the
     * sums scattered into the slots */
    for (int64_t kb = k_begin; kb < k_end; kb += 512) {
      const int64_t ke = kb + 512 < k_end ? kb + 512 : k_end;
      T *y = out_values;
      for (int64_t k = kb; k < ke; ++k) y[k] = values[k] - m[slot[k]];
      for (int64_t k = kb; k < ke; ++k) y[k] = SF_FN(SF_EXP_ROW)(y[k]);
      for (int64_t k = kb; k < ke; ++k) zsum[slot[k]] += (double)y[k];
    }
    return SF_OK;
  }
  for (int64_t k = k_begin; k < k_end; ++k) {
    const int64_t s = slot[k];
    for (int64_t c = 0; c < w; ++c) {
      const T e = SF_FN(SF_EXP_ROW)(values[k * w + c] - m[s * w + c]);
      out_values[k * w + c] = e;
      zsum[s * w + c] += (double)e;
    }
  }
  return SF_OK;
}

sf_status SF_FN(sf_slot_softmax_norm)(T *out_fill, T *scale, const double *zsum,
                                      int64_t nparts, const int64_t *count, const T *m,
                                      const T *fill, int64_t fill_stride, int64_t s_begin,
                                      int64_t s_end, int64_t nslots, int64_t w, int64_t n,
                                      int log_softmax) {
  sf_status st = check_slot_range(s_begin, s_end, nslots, w, nparts, n, fill_stride);
  if (st != SF_OK) return st;
  if (s_end > s_begin && (count == NULL || (w > 0 && (out_fill == NULL || scale == NULL ||
                                                      m == NULL || fill == NULL ||
                                                      (nparts > 0 && zsum == NULL))))) {
    return SF_ERR_NULL_POINTER;
  }
  const int64_t part = nslots * w;
  for (int64_t s = s_begin; s < s_end; ++s) {
    if (count[s] < 0 || count[s] > n) return SF_ERR_NOT_COALESCED;
    const int64_t u = n - count[s];
    const T *f = fill + s * fill_stride;
    for (int64_t c = 0; c < w; ++c) {
      const int64_t sc = s * w + c;
      double zd = 0;
      for (int64_t p = 0; p < nparts; ++p) zd += zsum[p * part + sc];
      T z = (T)zd;
      const T ef = u > 0 ? EXP(f[c] - m[sc]) : (T)0;
      z += (T)u * ef;
      if (log_softmax) {
        const T lz = LOG(z);
        scale[sc] = lz;
        out_fill[sc] = u > 0 ? f[c] - m[sc] - lz : (T)0;
      } else {
        const T inv = (T)1 / z;
        scale[sc] = inv;
        out_fill[sc] = u > 0 ? ef * inv : (T)0;
      }
    }
  }
  return SF_OK;
}

sf_status SF_FN(sf_slot_softmax_write)(T *out_values, const T *values, const int64_t *slot,
                                       const T *m, const T *scale, int64_t k_begin,
                                       int64_t k_end, int64_t nslots, int64_t w,
                                       int log_softmax) {
  sf_status st = check_slot_rows(slot, k_begin, k_end, nslots, w);
  if (st != SF_OK) return st;
  if (k_end > k_begin && w > 0 &&
      (out_values == NULL || scale == NULL || (log_softmax && (values == NULL || m == NULL)))) {
    return SF_ERR_NULL_POINTER;
  }
  for (int64_t k = k_begin; k < k_end; ++k) {
    const int64_t s = slot[k];
    for (int64_t c = 0; c < w; ++c) {
      const int64_t i = k * w + c, sc = s * w + c;
      if (log_softmax) {
        out_values[i] = values[i] - m[sc] - scale[sc];
      } else {
        out_values[i] *= scale[sc];
      }
    }
  }
  return SF_OK;
}

sf_status SF_FN(sf_slot_softmax_backward_partial)(
  double *acc, const T *out_values, const T *g_values, const int64_t *slot, int64_t k_begin,
  int64_t k_end, int64_t nslots, int64_t w, int log_softmax) {
  sf_status st = check_slot_rows(slot, k_begin, k_end, nslots, w);
  if (st != SF_OK) return st;
  if ((nslots > 0 && acc == NULL) ||
      (k_end > k_begin && w > 0 &&
       (g_values == NULL || (!log_softmax && out_values == NULL)))) {
    return SF_ERR_NULL_POINTER;
  }
  const int64_t row = w + 1;
  for (int64_t i = 0; i < nslots * row; ++i) acc[i] = 0;
  for (int64_t k = k_begin; k < k_end; ++k) {
    double *a = acc + slot[k] * row;
    for (int64_t c = 0; c < w; ++c) {
      const T g = g_values[k * w + c];
      a[c] += (double)(log_softmax ? g : g * out_values[k * w + c]);
    }
    a[w] += 1;
  }
  return SF_OK;
}

sf_status SF_FN(sf_slot_softmax_backward_norm)(
  T *grad_fill, T *dot, const double *acc, int64_t nparts, const T *out_fill,
  const T *g_fill, int64_t s_begin, int64_t s_end, int64_t nslots, int64_t w, int64_t n,
  int log_softmax) {
  sf_status st = check_slot_range(s_begin, s_end, nslots, w, nparts, n, 0);
  if (st != SF_OK) return st;
  if (s_end > s_begin && w > 0 &&
      (grad_fill == NULL || dot == NULL || out_fill == NULL || g_fill == NULL ||
       (nparts > 0 && acc == NULL))) {
    return SF_ERR_NULL_POINTER;
  }
  const int64_t row = w + 1, part = nslots * row;
  for (int64_t s = s_begin; s < s_end; ++s) {
    const int64_t t = SF_FN(slot_count)(acc, nparts, part, s * row + w, n);
    if (t < 0) return SF_ERR_NOT_COALESCED;
    const int64_t u = n - t;
    for (int64_t c = 0; c < w; ++c) {
      const int64_t sc = s * w + c;
      double ad = 0;
      for (int64_t p = 0; p < nparts; ++p) ad += acc[p * part + s * row + c];
      const T a = (T)ad + SF_FN(softmax_fill_dot)(out_fill[sc], g_fill[sc], u, log_softmax);
      dot[sc] = a;
      grad_fill[sc] = SF_FN(softmax_fill_grad)(out_fill[sc], g_fill[sc], a, u, log_softmax);
    }
  }
  return SF_OK;
}

sf_status SF_FN(sf_slot_softmax_backward_write)(
  T *grad_values, const T *out_values, const T *g_values, const int64_t *slot, const T *dot,
  int64_t k_begin, int64_t k_end, int64_t nslots, int64_t w, int log_softmax) {
  sf_status st = check_slot_rows(slot, k_begin, k_end, nslots, w);
  if (st != SF_OK) return st;
  if (k_end > k_begin && w > 0 &&
      (grad_values == NULL || out_values == NULL || g_values == NULL || dot == NULL)) {
    return SF_ERR_NULL_POINTER;
  }
  for (int64_t k = k_begin; k < k_end; ++k) {
    const int64_t s = slot[k];
    for (int64_t c = 0; c < w; ++c) {
      const int64_t i = k * w + c;
      grad_values[i] = SF_FN(softmax_grad)(out_values[i], g_values[i], dot[s * w + c],
                                           log_softmax);
    }
  }
  return SF_OK;
}
