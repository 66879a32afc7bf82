/*
 * sf_reduce.c -- segmented reductions and softmax with a fill (RFC.md 6).
 *
 * A segment is one slice being reduced: the stored rows
 * values[seg_ptr[s] .. seg_ptr[s+1]) (each row `w` wide: the flattened
 * dense part) plus n - (seg_ptr[s+1] - seg_ptr[s]) unspecified elements that
 * all equal the segment's fill row fill[s * fill_stride ..]. Every function
 * handles the segments [seg_begin, seg_end), so the C++ layer can split them
 * across threads; segments write disjoint outputs.
 *
 * The value formulas follow the dense definition literally (no reordering
 * that changes NaN or infinity behaviour): an unspecified element takes part
 * only when the slice has one, so a fully stored slice never sees its fill.
 */
#include "sparsefill_core.h"

#include <math.h>
#include <string.h>

/* Shared argument checks: segment range, widths, counts. */
static sf_status check_segments(const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end,
                                int64_t w, int64_t n) {
  if (seg_ptr == NULL) return SF_ERR_NULL_POINTER;
  if (seg_begin < 0 || seg_end < seg_begin || w < 0 || n < 0) return SF_ERR_NEGATIVE_SIZE;
  for (int64_t s = seg_begin; s < seg_end; ++s) {
    const int64_t cnt = seg_ptr[s + 1] - seg_ptr[s];
    if (cnt < 0) return SF_ERR_NOT_COALESCED;
    if (cnt > n) return SF_ERR_INVALID_ARGUMENT; /* more stored than the slice holds */
  }
  return SF_OK;
}

sf_status sf_segment_sort(int64_t *perm, int64_t *seg_ptr, const int64_t *segment, int64_t nse,
                          int64_t nseg) {
  if (seg_ptr == NULL || (nse > 0 && (perm == NULL || segment == NULL))) {
    return SF_ERR_NULL_POINTER;
  }
  if (nse < 0 || nseg < 0) return SF_ERR_NEGATIVE_SIZE;
  for (int64_t s = 0; s <= nseg; ++s) seg_ptr[s] = 0;
  for (int64_t k = 0; k < nse; ++k) {
    if (segment[k] < 0 || segment[k] >= nseg) return SF_ERR_INDEX_OUT_OF_RANGE;
    seg_ptr[segment[k] + 1]++;
  }
  for (int64_t s = 0; s < nseg; ++s) seg_ptr[s + 1] += seg_ptr[s];
  /* seg_ptr[s] is segment s's cursor while placing; shifted back after. */
  for (int64_t k = 0; k < nse; ++k) perm[seg_ptr[segment[k]]++] = k;
  for (int64_t s = nseg; s > 0; --s) seg_ptr[s] = seg_ptr[s - 1];
  seg_ptr[0] = 0;
  return SF_OK;
}

/* exp(x) for x <= 0 or NaN (a softmax's x - max), written without a branch
 * (the selects on the integer bits) so that a loop of it vectorizes; libm's
 * expf is a call per element. 2^n e^r with n = round(x / ln 2), |r| <= ln 2
 * / 2 and Cephes' degree-6 polynomial: relative error below 1e-7. Where the
 * result would be subnormal (x < -87.3) it is 0, an absolute error under
 * FLT_MIN; -inf gives 0, NaN stays NaN. */
static inline float exp_nonpositive_f32(float x) {
  const int32_t lim = 0x42ae999a; /* the bits of 87.3f */
  int32_t xi;
  memcpy(&xi, &x, sizeof xi);
  xi &= 0x7fffffff; /* |x|; x <= 0, so x = -|x| */
  const int32_t over = -(int32_t)(xi >= lim), is_nan = -(int32_t)(xi > 0x7f800000);
  const int32_t ci = (xi & ~over) | (lim & over); /* NaN and -inf clamped too */
  float a;
  memcpy(&a, &ci, sizeof a);
  const float xc = -a;
  const float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* nearest */
  const float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const int32_t scale_bits = ((int32_t)n + 127) << 23; /* n in [-126, 0]: normal */
  float scale;
  memcpy(&scale, &scale_bits, sizeof scale);
  const float e = (p * r * r + r + 1.0f) * scale;
  int32_t ei;
  memcpy(&ei, &e, sizeof ei);
  ei = (ei & ~(over | is_nan)) | (is_nan & 0x7fc00000);
  float out;
  memcpy(&out, &ei, sizeof out);
  return out;
}

/* The f64 kernels keep libm's exp. */
#define SF_EXP_ROW_f32(x) exp_nonpositive_f32(x)
#define SF_EXP_ROW_f64(x) exp(x)

/* ---- per-type kernels, instantiated for float and double below ------------ */

#define SF_DEFINE_FLOAT_KERNELS(T, SUFFIX, EXP, LOG, POW)                                       \
  /* Softmax's backward, one home for the segment and the slot kernels.      \
   * dot: the slice's sum of g y (softmax) or of g (log_softmax); the u      \
   * unspecified outputs y_f have the summed gradient g_fill. Their term of  \
   * the dot, a stored element's gradient, and the fill's (0 where u == 0). */ \
  static inline T softmax_fill_dot_##SUFFIX(T y_f, T g_fill, int64_t u, int log_softmax) {      \
    return u > 0 ? (log_softmax ? g_fill : g_fill * y_f) : (T)0;                                \
  }                                                                                             \
  static inline T softmax_grad_##SUFFIX(T y, T g, T dot, int log_softmax) {                     \
    return log_softmax ? g - EXP(y) * dot : y * (g - dot);                                      \
  }                                                                                             \
  static inline T softmax_fill_grad_##SUFFIX(T y_f, T g_fill, T dot, int64_t u,                 \
                                             int log_softmax) {                                 \
    if (u == 0) return 0;                                                                       \
    return log_softmax ? g_fill - (T)u * EXP(y_f) * dot : y_f * (g_fill - (T)u * dot);          \
  }                                                                                             \
                                                                                                \
  /* Softmax of one value per stored element (w == 1), the common case: unit \
   * strides, the max in four independent branch-free lanes (NaN noted on   \
   * the side: it wins, as in torch), then one pass of exp and sum, one of  \
   * scaling. Same formulas, same results as the general loop below. */      \
  static sf_status seg_softmax_row_##SUFFIX(T *out_values, T *out_fill, const T *values,        \
                                            const T *fill, int64_t fill_stride,                 \
                                            const int64_t *seg_ptr, int64_t seg_begin,          \
                                            int64_t seg_end, int64_t n, int log_softmax) {      \
    for (int64_t s = seg_begin; s < seg_end; ++s) {                                             \
      const int64_t lo = seg_ptr[s], hi = seg_ptr[s + 1], u = n - (hi - lo);                    \
      const T f = fill[s * fill_stride];                                                        \
      const T *x = values + lo;                                                                 \
      T *y = out_values + lo;                                                                   \
      const int64_t len = hi - lo;                                                              \
      T m0 = -INFINITY, m1 = -INFINITY, m2 = -INFINITY, m3 = -INFINITY;                         \
      int nan = u > 0 && isnan(f);                                                              \
      int64_t k = 0;                                                                            \
      for (; k + 4 <= len; k += 4) {                                                            \
        m0 = x[k] > m0 ? x[k] : m0;                                                             \
        m1 = x[k + 1] > m1 ? x[k + 1] : m1;                                                     \
        m2 = x[k + 2] > m2 ? x[k + 2] : m2;                                                     \
        m3 = x[k + 3] > m3 ? x[k + 3] : m3;                                                     \
        nan |= (x[k] != x[k]) | (x[k + 1] != x[k + 1]) | (x[k + 2] != x[k + 2]) |               \
               (x[k + 3] != x[k + 3]);                                                          \
      }                                                                                         \
      for (; k < len; ++k) {                                                                    \
        m0 = x[k] > m0 ? x[k] : m0;                                                             \
        nan |= x[k] != x[k];                                                                    \
      }                                                                                         \
      T m = m0 > m1 ? m0 : m1;                                                                  \
      m = m2 > m ? m2 : m;                                                                      \
      m = m3 > m ? m3 : m;                                                                      \
      if (u > 0 && f > m) m = f;                                                                \
      if (nan) m = (T)NAN;                                                                      \
      /* exp into the output (log_softmax overwrites it below), then the sum */                \
      for (k = 0; k < len; ++k) y[k] = SF_EXP_ROW_##SUFFIX(x[k] - m);                           \
      T z0 = 0, z1 = 0, z2 = 0, z3 = 0;                                                         \
      for (k = 0; k + 4 <= len; k += 4) {                                                       \
        z0 += y[k];                                                                             \
        z1 += y[k + 1];                                                                         \
        z2 += y[k + 2];                                                                         \
        z3 += y[k + 3];                                                                         \
      }                                                                                         \
      for (; k < len; ++k) z0 += y[k];                                                          \
      T z = (z0 + z1) + (z2 + z3);                                                              \
      const T ef = u > 0 ? EXP(f - m) : (T)0;                                                   \
      z += (T)u * ef;                                                                           \
      if (log_softmax) {                                                                        \
        const T lz = LOG(z);                                                                    \
        for (k = 0; k < len; ++k) y[k] = x[k] - m - lz;                                         \
        out_fill[s] = u > 0 ? f - m - lz : (T)0;                                                \
      } else {                                                                                  \
        const T inv = (T)1 / z;                                                                 \
        for (k = 0; k < len; ++k) y[k] *= inv;                                                  \
        out_fill[s] = u > 0 ? ef * inv : (T)0;                                                  \
      }                                                                                         \
    }                                                                                           \
    return SF_OK;                                                                               \
  }                                                                                             \
                                                                                                \
  sf_status sf_seg_softmax_##SUFFIX(T *out_values, T *out_fill, const T *values, const T *fill, \
                                    int64_t fill_stride, const int64_t *seg_ptr,                \
                                    int64_t seg_begin, int64_t seg_end, int64_t w, int64_t n,   \
                                    int log_softmax) {                                          \
    sf_status st = check_segments(seg_ptr, seg_begin, seg_end, w, n);                           \
    if (st != SF_OK) return st;                                                                 \
    if (w == 1) {                                                                               \
      return seg_softmax_row_##SUFFIX(out_values, out_fill, values, fill, fill_stride, seg_ptr, \
                                      seg_begin, seg_end, n, log_softmax);                      \
    }                                                                                           \
    for (int64_t s = seg_begin; s < seg_end; ++s) {                                             \
      const int64_t lo = seg_ptr[s], hi = seg_ptr[s + 1], u = n - (hi - lo);                    \
      const T *f = fill + s * fill_stride;                                                      \
      for (int64_t c = 0; c < w; ++c) {                                                         \
        /* max over the slice; NaN wins so that it propagates as in torch */                   \
        T m = -INFINITY;                                                                        \
        if (u > 0) m = f[c];                                                                    \
        for (int64_t k = lo; k < hi; ++k) {                                                     \
          const T x = values[k * w + c];                                                        \
          if (x > m || isnan(x)) m = x;                                                         \
        }                                                                                       \
        T z = 0;                                                                                \
        for (int64_t k = lo; k < hi; ++k) {                                                     \
          const T e = EXP(values[k * w + c] - m);                                               \
          if (!log_softmax) out_values[k * w + c] = e;                                          \
          z += e;                                                                               \
        }                                                                                       \
        const T ef = u > 0 ? EXP(f[c] - m) : (T)0;                                              \
        z += (T)u * ef;                                                                         \
        if (log_softmax) {                                                                      \
          const T lz = LOG(z);                                                                  \
          for (int64_t k = lo; k < hi; ++k) {                                                   \
            out_values[k * w + c] = values[k * w + c] - m - lz;                                 \
          }                                                                                     \
          out_fill[s * w + c] = u > 0 ? f[c] - m - lz : (T)0;                                   \
        } else {                                                                                \
          const T inv = (T)1 / z;                                                               \
          for (int64_t k = lo; k < hi; ++k) out_values[k * w + c] *= inv;                       \
          out_fill[s * w + c] = u > 0 ? ef * inv : (T)0;                                        \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
    return SF_OK;                                                                               \
  }                                                                                             \
                                                                                                \
  sf_status sf_seg_softmax_backward_##SUFFIX(                                                   \
      T *grad_values, T *grad_fill, const T *out_values, const T *out_fill, const T *g_values,  \
      const T *g_fill, const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end, int64_t w,   \
      int64_t n, int log_softmax) {                                                             \
    sf_status st = check_segments(seg_ptr, seg_begin, seg_end, w, n);                           \
    if (st != SF_OK) return st;                                                                 \
    for (int64_t s = seg_begin; s < seg_end; ++s) {                                             \
      const int64_t lo = seg_ptr[s], hi = seg_ptr[s + 1], u = n - (hi - lo);                    \
      for (int64_t c = 0; c < w; ++c) {                                                         \
        const int64_t sc = s * w + c;                                                           \
        T acc = 0; /* softmax: sum g*y over the slice; log_softmax: sum g */                    \
        for (int64_t k = lo; k < hi; ++k) {                                                     \
          const T g = g_values[k * w + c];                                                      \
          acc += log_softmax ? g : g * out_values[k * w + c];                                   \
        }                                                                                       \
        acc += softmax_fill_dot_##SUFFIX(out_fill[sc], g_fill[sc], u, log_softmax);             \
        for (int64_t k = lo; k < hi; ++k) {                                                     \
          grad_values[k * w + c] = softmax_grad_##SUFFIX(out_values[k * w + c],                 \
                                                         g_values[k * w + c], acc, log_softmax); \
        }                                                                                       \
        grad_fill[sc] = softmax_fill_grad_##SUFFIX(out_fill[sc], g_fill[sc], acc, u, log_softmax); \
      }                                                                                         \
    }                                                                                           \
    return SF_OK;                                                                               \
  }                                                                                             \
                                                                                                \
  sf_status sf_seg_prod_##SUFFIX(T *out, const T *values, const T *fill, int64_t fill_stride,    \
                                 const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end,    \
                                 int64_t w, int64_t n) {                                        \
    sf_status st = check_segments(seg_ptr, seg_begin, seg_end, w, n);                           \
    if (st != SF_OK) return st;                                                                 \
    for (int64_t s = seg_begin; s < seg_end; ++s) {                                             \
      const int64_t lo = seg_ptr[s], hi = seg_ptr[s + 1], u = n - (hi - lo);                    \
      const T *f = fill + s * fill_stride;                                                      \
      for (int64_t c = 0; c < w; ++c) {                                                         \
        T p = u > 0 ? POW(f[c], (T)u) : (T)1;                                                   \
        for (int64_t k = lo; k < hi; ++k) p *= values[k * w + c];                               \
        out[s * w + c] = p;                                                                     \
      }                                                                                         \
    }                                                                                           \
    return SF_OK;                                                                               \
  }

#define SF_DEFINE_SUM_MAX(T, ACC, SUFFIX, ISNAN)                                                 \
  sf_status sf_seg_sum_##SUFFIX(T *out, const T *values, const T *fill, int64_t fill_stride,     \
                                const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end,     \
                                int64_t w, int64_t n) {                                         \
    sf_status st = check_segments(seg_ptr, seg_begin, seg_end, w, n);                           \
    if (st != SF_OK) return st;                                                                 \
    for (int64_t s = seg_begin; s < seg_end; ++s) {                                             \
      const int64_t lo = seg_ptr[s], hi = seg_ptr[s + 1], u = n - (hi - lo);                    \
      const T *f = fill + s * fill_stride;                                                      \
      if (w == 1) { /* the common non-hybrid case: one contiguous run, summed in */            \
        ACC a0 = 0, a1 = 0, a2 = 0, a3 = 0; /* four registers: no add waits on the last */     \
        int64_t k = lo;                                                                         \
        for (; k + 4 <= hi; k += 4) {                                                           \
          a0 += (ACC)values[k];                                                                 \
          a1 += (ACC)values[k + 1];                                                             \
          a2 += (ACC)values[k + 2];                                                             \
          a3 += (ACC)values[k + 3];                                                             \
        }                                                                                       \
        for (; k < hi; ++k) a0 += (ACC)values[k];                                               \
        ACC acc = (a0 + a1) + (a2 + a3);                                                        \
        if (u > 0) acc += (ACC)u * (ACC)f[0];                                                   \
        out[s] = (T)acc;                                                                        \
        continue;                                                                               \
      }                                                                                         \
      for (int64_t c = 0; c < w; ++c) {                                                         \
        ACC acc = 0;                                                                            \
        for (int64_t k = lo; k < hi; ++k) acc += (ACC)values[k * w + c];                        \
        if (u > 0) acc += (ACC)u * (ACC)f[c];                                                   \
        out[s * w + c] = (T)acc;                                                                \
      }                                                                                         \
    }                                                                                           \
    return SF_OK;                                                                               \
  }                                                                                             \
                                                                                                \
  sf_status sf_seg_max_##SUFFIX(T *out, int64_t *winner, int64_t *index, const T *values,       \
                                const T *fill, int64_t fill_stride, const int64_t *coord,       \
                                const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end,     \
                                int64_t w, int64_t n, int is_min) {                             \
    sf_status st = check_segments(seg_ptr, seg_begin, seg_end, w, n);                           \
    if (st != SF_OK) return st;                                                                 \
    for (int64_t s = seg_begin; s < seg_end; ++s) {                                             \
      const int64_t lo = seg_ptr[s], hi = seg_ptr[s + 1], u = n - (hi - lo);                    \
      const T *f = fill + s * fill_stride;                                                      \
      /* first unspecified coordinate: the first gap in the sorted coords */                   \
      int64_t gap = -1;                                                                         \
      if (coord != NULL && u > 0) {                                                             \
        gap = hi - lo;                                                                          \
        for (int64_t k = lo; k < hi; ++k) {                                                     \
          if (coord[k] != k - lo) {                                                             \
            gap = k - lo;                                                                       \
            break;                                                                              \
          }                                                                                     \
        }                                                                                       \
      }                                                                                         \
      for (int64_t c = 0; c < w; ++c) {                                                         \
        int64_t best = -1; /* stored position, -1: none yet */                                  \
        T bv = 0;                                                                               \
        for (int64_t k = lo; k < hi; ++k) {                                                     \
          const T x = values[k * w + c];                                                        \
          if (best < 0 || (ISNAN(x) && !ISNAN(bv)) ||                                           \
              (!ISNAN(bv) && (is_min ? x < bv : x > bv))) {                                     \
            best = k;                                                                           \
            bv = x;                                                                             \
          }                                                                                     \
        }                                                                                       \
        int64_t win = best;                                                                     \
        if (u > 0) {                                                                            \
          const T x = f[c];                                                                     \
          int fill_wins;                                                                        \
          if (best < 0) {                                                                       \
            fill_wins = 1;                                                                      \
          } else if (ISNAN(bv)) {                                                               \
            fill_wins = ISNAN(x) && coord != NULL && gap < coord[best];                         \
          } else if (ISNAN(x)) {                                                                \
            fill_wins = 1;                                                                      \
          } else if (x == bv) { /* a tie: the first occurrence wins */                         \
            fill_wins = coord != NULL && gap < coord[best];                                     \
          } else {                                                                              \
            fill_wins = is_min ? x < bv : x > bv;                                               \
          }                                                                                     \
          if (fill_wins) {                                                                      \
            win = -1;                                                                           \
            bv = x;                                                                             \
          }                                                                                     \
        }                                                                                       \
        out[s * w + c] = bv;                                                                    \
        if (winner != NULL) winner[s * w + c] = win;                                            \
        if (index != NULL) {                                                                    \
          index[s * w + c] = coord == NULL ? 0 : (win >= 0 ? coord[win] : gap);                 \
        }                                                                                       \
      }                                                                                         \
    }                                                                                           \
    return SF_OK;                                                                               \
  }

#define SF_ISNAN_FLOAT(x) isnan(x)
#define SF_ISNAN_INT(x) 0

SF_DEFINE_FLOAT_KERNELS(double, f64, exp, log, pow)
SF_DEFINE_FLOAT_KERNELS(float, f32, expf, logf, powf)
SF_DEFINE_SUM_MAX(double, double, f64, SF_ISNAN_FLOAT)
SF_DEFINE_SUM_MAX(float, double, f32, SF_ISNAN_FLOAT)
SF_DEFINE_SUM_MAX(int64_t, int64_t, i64, SF_ISNAN_INT)

/* ---- reductions by output slot (no reordering of the stored elements) ---------- */

/* Shared argument checks of the two phases. */
static sf_status check_slots(int64_t lo, int64_t hi, int64_t nslots, int64_t w, int op,
                             int has_prod) {
  if (lo < 0 || hi < lo || nslots < 0 || w < 0) return SF_ERR_NEGATIVE_SIZE;
  if (op < SF_SLOT_SUM || op > SF_SLOT_MIN || (op == SF_SLOT_PROD && !has_prod)) {
    return SF_ERR_INVALID_ARGUMENT;
  }
  return SF_OK;
}

/* Sums the run of slot s that starts at k (values[k] already known in it),
   e = k + 1 on entry, into sum; e ends past the run or at end. Four registers,
   each block of four checked for the slot before it is added: one pass over
   slots and values, no add waits on the last. */
#define SF_SUM_RUN4(ACC, values, slot, s, k, e, end, sum)                                        \
  do {                                                                                           \
    ACC sf_a0_ = (ACC)(values)[k], sf_a1_ = 0, sf_a2_ = 0, sf_a3_ = 0;                           \
    for (; (e) + 4 <= (end); (e) += 4) {                                                         \
      if (((slot)[e] != (s)) | ((slot)[(e) + 1] != (s)) | ((slot)[(e) + 2] != (s)) |             \
          ((slot)[(e) + 3] != (s))) {                                                            \
        break;                                                                                   \
      }                                                                                          \
      sf_a0_ += (ACC)(values)[e];                                                                \
      sf_a1_ += (ACC)(values)[(e) + 1];                                                          \
      sf_a2_ += (ACC)(values)[(e) + 2];                                                          \
      sf_a3_ += (ACC)(values)[(e) + 3];                                                          \
    }                                                                                            \
    for (; (e) < (end) && (slot)[e] == (s); ++(e)) sf_a0_ += (ACC)(values)[e];                   \
    (sum) = (sf_a0_ + sf_a1_) + (sf_a2_ + sf_a3_);                                               \
  } while (0)

/* Folds column c of the stored rows [k, e) (w values a row) into x by op: one
   home for the fold that both slot passes below make of a run (NaN wins max/min). */
#define SF_FOLD_RUN(ACC, ISNAN, op, x, values, k, e, w, c)                                       \
  switch (op) {                                                                                  \
    case SF_SLOT_SUM:                                                                            \
      for (int64_t sf_j_ = (k); sf_j_ < (e); ++sf_j_) (x) += (ACC)(values)[sf_j_ * (w) + (c)];   \
      break;                                                                                     \
    case SF_SLOT_PROD:                                                                           \
      for (int64_t sf_j_ = (k); sf_j_ < (e); ++sf_j_) (x) *= (ACC)(values)[sf_j_ * (w) + (c)];   \
      break;                                                                                     \
    case SF_SLOT_MAX:                                                                            \
      for (int64_t sf_j_ = (k); sf_j_ < (e); ++sf_j_) {                                          \
        const ACC sf_y_ = (ACC)(values)[sf_j_ * (w) + (c)];                                      \
        if (sf_y_ > (x) || ISNAN(sf_y_)) (x) = sf_y_;                                            \
      }                                                                                          \
      break;                                                                                     \
    default:                                                                                     \
      for (int64_t sf_j_ = (k); sf_j_ < (e); ++sf_j_) {                                          \
        const ACC sf_y_ = (ACC)(values)[sf_j_ * (w) + (c)];                                      \
        if (sf_y_ < (x) || ISNAN(sf_y_)) (x) = sf_y_;                                            \
      }                                                                                          \
  }

/* T: the element type, ACC: the accumulator, LOWEST / HIGHEST: max's and
 * min's identities, POW(f, u): fill^u in ACC. A partial's row per slot is
 * w accumulators and then the slot's stored row count (in ACC: exact below
 * 2^53 rows), side by side so that one element touches one cache line. */
#define SF_DEFINE_SLOT_KERNELS(T, ACC, SUFFIX, ISNAN, LOWEST, HIGHEST, HAS_PROD, POW)            \
  /* a (the stored rows' reduction) with u fills added, as every slot pass                       \
   * adds them; with a = the identity, a slot with nothing stored */                             \
  static inline ACC slot_fills_##SUFFIX(ACC a, ACC f, int64_t u, int op) {                       \
    if (u > 0) {                                                                                 \
      switch (op) {                                                                              \
        case SF_SLOT_SUM: a += (ACC)u * f; break;                                                \
        case SF_SLOT_PROD: a *= POW(f, u); break;                                                \
        default:                                                                                 \
          if (!ISNAN(a) && (ISNAN(f) || (op == SF_SLOT_MAX ? f > a : f < a))) a = f;             \
      }                                                                                          \
    }                                                                                            \
    return a;                                                                                    \
  }                                                                                              \
                                                                                                 \
  sf_status sf_slot_partial_##SUFFIX(ACC *acc, const T *values, const int64_t *slot,            \
                                     int64_t k_begin, int64_t k_end, int64_t nslots, int64_t w, \
                                     int op) {                                                  \
    sf_status st = check_slots(k_begin, k_end, nslots, w, op, HAS_PROD);                         \
    if (st != SF_OK) return st;                                                                  \
    if (acc == NULL || (k_end > k_begin && ((w > 0 && values == NULL) || slot == NULL))) {       \
      return SF_ERR_NULL_POINTER;                                                                \
    }                                                                                            \
    const ACC ident = op == SF_SLOT_SUM ? (ACC)0 : op == SF_SLOT_PROD ? (ACC)1                   \
                      : op == SF_SLOT_MAX ? LOWEST : HIGHEST;                                    \
    const int64_t row = w + 1;                                                                   \
    for (int64_t s = 0; s < nslots; ++s) {                                                       \
      for (int64_t c = 0; c < w; ++c) acc[s * row + c] = ident;                                  \
      acc[s * row + w] = 0;                                                                      \
    }                                                                                            \
    /* Runs of equal slots (sorted slots) are folded in registers, so that no \
     * step waits on a store; sums of one value per stored element in four    \
     * registers, each block of four checked for the slot before it is added. \
     * A lone element (scattered slots) is added directly. */                 \
    int64_t k = k_begin;                                                                         \
    while (k < k_end) {                                                                          \
      const int64_t s = slot[k];                                                                 \
      if ((uint64_t)s >= (uint64_t)nslots) return SF_ERR_INDEX_OUT_OF_RANGE;                     \
      ACC *a = acc + s * row;                                                                    \
      int64_t e = k + 1;                                                                         \
      if (op == SF_SLOT_SUM && w == 1) {                                                         \
        if (e == k_end || slot[e] != s) {                                                        \
          a[0] += (ACC)values[k];                                                                \
          a[1] += 1;                                                                             \
          k = e;                                                                                 \
          continue;                                                                              \
        }                                                                                        \
        ACC run;                                                                                 \
        SF_SUM_RUN4(ACC, values, slot, s, k, e, k_end, run);                                     \
        a[0] += run;                                                                             \
      } else if (w == 1 && op != SF_SLOT_PROD && (e == k_end || slot[e] != s)) {                 \
        /* a lone element of max/min (scattered slots, softmax's maxima):    \
         * folded directly, a select rather than the run loop (NaN wins) */  \
        const ACC y = (ACC)values[k], x = a[0];                                                  \
        a[0] = (ISNAN(y) || (op == SF_SLOT_MAX ? y > x : y < x)) ? y : x;                        \
        a[1] += 1;                                                                               \
        k = e;                                                                                   \
        continue;                                                                                \
      } else {                                                                                   \
        while (e < k_end && slot[e] == s) ++e;                                                   \
        for (int64_t c = 0; c < w; ++c) {                                                        \
          ACC x = a[c];                                                                          \
          SF_FOLD_RUN(ACC, ISNAN, op, x, values, k, e, w, c);                                    \
          a[c] = x;                                                                              \
        }                                                                                        \
      }                                                                                          \
      a[w] += (ACC)(e - k);                                                                      \
      k = e;                                                                                     \
    }                                                                                            \
    return SF_OK;                                                                                \
  }                                                                                              \
                                                                                                 \
  /* The elements slot `at` holds: its count column summed over the parts in                     \
     part order; -1 when more than n positions (the indices repeat). */                          \
  static inline int64_t slot_count_##SUFFIX(const ACC *acc, int64_t nparts,                      \
                                            int64_t part, int64_t at, int64_t n) {               \
    int64_t t = 0;                                                                               \
    for (int64_t p = 0; p < nparts; ++p) t += (int64_t)acc[p * part + at];                       \
    return t > n ? -1 : t;                                                                       \
  }                                                                                              \
                                                                                                 \
  sf_status sf_slot_finish_##SUFFIX(T *out, int64_t *total, const ACC *acc, int64_t nparts,     \
                                    const T *fill, int64_t s_begin, int64_t s_end,              \
                                    int64_t nslots, int64_t w, int64_t n, int op) {             \
    sf_status st = check_slots(s_begin, s_end, nslots, w, op, HAS_PROD);                         \
    if (st != SF_OK) return st;                                                                  \
    if (nparts < 0 || n < 0) return SF_ERR_NEGATIVE_SIZE;                                        \
    if (s_end > nslots) return SF_ERR_INVALID_ARGUMENT;                                          \
    if (s_end > s_begin &&                                                                       \
        ((w > 0 && (out == NULL || fill == NULL)) || total == NULL ||                            \
         (nparts > 0 && acc == NULL))) {                                                         \
      return SF_ERR_NULL_POINTER;                                                                \
    }                                                                                            \
    const ACC ident = op == SF_SLOT_SUM ? (ACC)0 : op == SF_SLOT_PROD ? (ACC)1                   \
                      : op == SF_SLOT_MAX ? LOWEST : HIGHEST;                                    \
    const int64_t row = w + 1, part = nslots * row;                                              \
    for (int64_t s = s_begin; s < s_end; ++s) {                                                  \
      const int64_t t = slot_count_##SUFFIX(acc, nparts, part, s * row + w, n);                  \
      if (t < 0) return SF_ERR_NOT_COALESCED;                                                    \
      total[s] = t;                                                                              \
      const int64_t u = n - t;                                                                   \
      for (int64_t c = 0; c < w; ++c) {                                                          \
        ACC a = ident;                                                                           \
        for (int64_t p = 0; p < nparts; ++p) {                                                   \
          const ACC x = acc[p * part + s * row + c];                                             \
          switch (op) {                                                                          \
            case SF_SLOT_SUM: a += x; break;                                                     \
            case SF_SLOT_PROD: a *= x; break;                                                    \
            default:                                                                             \
              if (ISNAN(x) || (op == SF_SLOT_MAX ? x > a : x < a)) a = x;                        \
          }                                                                                      \
        }                                                                                        \
        out[s * w + c] = (T)slot_fills_##SUFFIX(a, (ACC)fill[c], u, op);                         \
      }                                                                                          \
    }                                                                                            \
    return SF_OK;                                                                                \
  }

/* Slots sorted (a reduction whose kept dims lead: the stored order is the
 * slots' order): each run of equal slots is reduced whole, in registers, and
 * written once; the slots before a run (and after the last one) hold nothing
 * and get the reduction of n fills. A range handles the runs that start in
 * it, whatever its ends, so any cut of [0, nse) gives the same bits. The
 * fill enters as in sf_slot_finish_*: once, after the stored rows, only
 * where u > 0. */
/* Columns of a dense part folded at once by sf_slot_runs_* (registers on the stack). */
#define SF_RUN_COLS 32

#define SF_DEFINE_SLOT_RUNS(T, ACC, SUFFIX, ISNAN, LOWEST, HIGHEST, NANV, HAS_PROD, POW)         \
  sf_status sf_slot_runs_##SUFFIX(T *out, int64_t *total, const T *values, const int64_t *slot, \
                                  const T *fill, int64_t nse, int64_t k_begin, int64_t k_end,   \
                                  int64_t nslots, int64_t w, int64_t n, int op) {               \
    sf_status st = check_slots(k_begin, k_end, nslots, w, op, HAS_PROD);                         \
    if (st != SF_OK) return st;                                                                  \
    if (nse < 0 || n < 0) return SF_ERR_NEGATIVE_SIZE;                                           \
    if (k_end > nse) return SF_ERR_INVALID_ARGUMENT;                                             \
    if ((nslots > 0 && (total == NULL || (w > 0 && (out == NULL || fill == NULL)))) ||          \
        (nse > 0 && (slot == NULL || (w > 0 && values == NULL)))) {                              \
      return SF_ERR_NULL_POINTER;                                                                \
    }                                                                                            \
    const ACC ident = op == SF_SLOT_SUM ? (ACC)0 : op == SF_SLOT_PROD ? (ACC)1                   \
                      : op == SF_SLOT_MAX ? LOWEST : HIGHEST;                                    \
    /* The first run that starts in range; none when the range lies in one. */                  \
    int64_t k = k_begin;                                                                         \
    if (k > 0) {                                                                                 \
      while (k < k_end && slot[k] == slot[k - 1]) ++k;                                           \
    }                                                                                            \
    while (k < k_end) {                                                                          \
      const int64_t s = slot[k], before = k > 0 ? slot[k - 1] : -1;                              \
      if (s < 0) return SF_ERR_INDEX_NEGATIVE;                                                   \
      if (s >= nslots) return SF_ERR_INDEX_OUT_OF_RANGE;                                         \
      if (s < before) return SF_ERR_NOT_COALESCED; /* not sorted: the caller's partials */     \
      int64_t e = k + 1;                                                                         \
      ACC run_sum = 0; /* sums of one value per row: found with the run's end */                 \
      if (op == SF_SLOT_SUM && w == 1) {                                                         \
        SF_SUM_RUN4(ACC, values, slot, s, k, e, nse, run_sum);                                   \
      } else {                                                                                   \
        while (e < nse && slot[e] == s) ++e;                                                     \
      }                                                                                          \
      if (e - k > n) return SF_ERR_NOT_COALESCED; /* duplicates */                              \
      const int64_t u = n - (e - k);                                                             \
      /* empty slots: n fills each (from 0 at least: an invalid `before` is its own \
       * run's error, found by the range that holds it) */                          \
      for (int64_t g = before < 0 ? 0 : before + 1; g < s; ++g) {                                \
        total[g] = 0;                                                                            \
        for (int64_t c = 0; c < w; ++c) {                                                        \
          out[g * w + c] = (T)slot_fills_##SUFFIX(ident, (ACC)fill[c], n, op);                   \
        }                                                                                        \
      }                                                                                          \
      total[s] = e - k;                                                                          \
      if (w == 1 && (op == SF_SLOT_MAX || op == SF_SLOT_MIN)) {                                  \
        /* four branch-free lanes in T (a max is exact), NaN noted on the     \
         * side: it wins, as in the loop below */                             \
        const int is_max = op == SF_SLOT_MAX;                                                    \
        T m0 = values[k], m1 = m0, m2 = m0, m3 = m0;                                             \
        int nan = 0;                                                                             \
        int64_t j = k + 1;                                                                       \
        for (; j + 4 <= e; j += 4) {                                                             \
          const T x0 = values[j], x1 = values[j + 1], x2 = values[j + 2], x3 = values[j + 3];    \
          m0 = (is_max ? x0 > m0 : x0 < m0) ? x0 : m0;                                           \
          m1 = (is_max ? x1 > m1 : x1 < m1) ? x1 : m1;                                           \
          m2 = (is_max ? x2 > m2 : x2 < m2) ? x2 : m2;                                           \
          m3 = (is_max ? x3 > m3 : x3 < m3) ? x3 : m3;                                           \
          nan |= ISNAN(x0) | ISNAN(x1) | ISNAN(x2) | ISNAN(x3);                                  \
        }                                                                                        \
        for (; j < e; ++j) {                                                                     \
          m0 = (is_max ? values[j] > m0 : values[j] < m0) ? values[j] : m0;                      \
          nan |= ISNAN(values[j]);                                                               \
        }                                                                                        \
        T m = (is_max ? m1 > m0 : m1 < m0) ? m1 : m0;                                            \
        m = (is_max ? m2 > m : m2 < m) ? m2 : m;                                                 \
        m = (is_max ? m3 > m : m3 < m) ? m3 : m;                                                 \
        const ACC a = (nan | ISNAN(values[k])) ? (ACC)NANV : (ACC)m;                             \
        out[s] = (T)slot_fills_##SUFFIX(a, (ACC)fill[0], u, op);                                 \
        k = e;                                                                                   \
        continue;                                                                                \
      }                                                                                          \
      if (op == SF_SLOT_SUM && w == 1) {                                                         \
        out[s] = (T)slot_fills_##SUFFIX(run_sum, (ACC)fill[0], u, op);                           \
        k = e;                                                                                   \
        continue;                                                                                \
      }                                                                                          \
      /* a dense part (w > 1): the run's rows read in order, SF_RUN_COLS      \
       * columns at a time into registers, each column folded over the rows  \
       * in row order (the same sums as a column at a time), max/min by a    \
       * select: no branch on the data, a loop the compiler vectorizes */     \
      for (int64_t c0 = 0; c0 < w; c0 += SF_RUN_COLS) {                                          \
        const int64_t cw = w - c0 < SF_RUN_COLS ? w - c0 : SF_RUN_COLS;                          \
        ACC a[SF_RUN_COLS];                                                                      \
        for (int64_t c = 0; c < cw; ++c) a[c] = ident;                                           \
        for (int64_t j = k; j < e; ++j) {                                                        \
          const T *row = values + j * w + c0;                                                    \
          switch (op) {                                                                          \
            case SF_SLOT_SUM:                                                                    \
              for (int64_t c = 0; c < cw; ++c) a[c] += (ACC)row[c];                              \
              break;                                                                             \
            case SF_SLOT_PROD:                                                                   \
              for (int64_t c = 0; c < cw; ++c) a[c] *= (ACC)row[c];                              \
              break;                                                                             \
            case SF_SLOT_MAX:                                                                    \
              for (int64_t c = 0; c < cw; ++c) {                                                 \
                const ACC y = (ACC)row[c];                                                       \
                a[c] = (y > a[c] || ISNAN(y)) ? y : a[c];                                        \
              }                                                                                  \
              break;                                                                             \
            default:                                                                             \
              for (int64_t c = 0; c < cw; ++c) {                                                 \
                const ACC y = (ACC)row[c];                                                       \
                a[c] = (y < a[c] || ISNAN(y)) ? y : a[c];                                        \
              }                                                                                  \
          }                                                                                      \
        }                                                                                        \
        for (int64_t c = 0; c < cw; ++c) {                                                       \
          out[s * w + c0 + c] = (T)slot_fills_##SUFFIX(a[c], (ACC)fill[c0 + c], u, op);          \
        }                                                                                        \
      }                                                                                          \
      k = e;                                                                                     \
    }                                                                                            \
    if (k_end == nse) { /* the slots after the last run */                                      \
      int64_t last = nse > 0 ? slot[nse - 1] : -1;                                               \
      if (last < -1) return SF_ERR_INDEX_NEGATIVE;                                               \
      if (last >= nslots) return SF_ERR_INDEX_OUT_OF_RANGE;                                      \
      for (int64_t g = last + 1; g < nslots; ++g) {                                              \
        total[g] = 0;                                                                            \
        for (int64_t c = 0; c < w; ++c) {                                                        \
          out[g * w + c] = (T)slot_fills_##SUFFIX(ident, (ACC)fill[c], n, op);                   \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
    return SF_OK;                                                                                \
  }

#define SF_POW_DOUBLE(f, u) pow((f), (double)(u))
#define SF_POW_NONE(f, u) ((void)(f), (void)(u), 1)

SF_DEFINE_SLOT_KERNELS(double, double, f64, SF_ISNAN_FLOAT, -INFINITY, INFINITY, 1, SF_POW_DOUBLE)
SF_DEFINE_SLOT_KERNELS(float, double, f32, SF_ISNAN_FLOAT, -INFINITY, INFINITY, 1, SF_POW_DOUBLE)
SF_DEFINE_SLOT_KERNELS(int64_t, int64_t, i64, SF_ISNAN_INT, INT64_MIN, INT64_MAX, 0, SF_POW_NONE)

SF_DEFINE_SLOT_RUNS(double, double, f64, SF_ISNAN_FLOAT, -INFINITY, INFINITY, NAN, 1, SF_POW_DOUBLE)
SF_DEFINE_SLOT_RUNS(float, double, f32, SF_ISNAN_FLOAT, -INFINITY, INFINITY, NAN, 1, SF_POW_DOUBLE)
SF_DEFINE_SLOT_RUNS(int64_t, int64_t, i64, SF_ISNAN_INT, INT64_MIN, INT64_MAX, 0, 0, SF_POW_NONE)

/* ---- softmax by output slot (slices the stored order does not group) ------------ */

/* Phases of sf_slot_softmax_* (contracts in sparsefill_core.h): the maximum of
 * each slot comes from sf_slot_partial_*(SF_SLOT_MAX) and is finished here with
 * the fill; each part then sums the exponentials of its rows into its own
 * accumulators (double), the parts are folded in part order with the fill, and
 * one pass over the rows writes the outputs. Same formulas as sf_seg_softmax_*:
 * m = max(values, fill if u > 0) (NaN wins), z = sum exp(x - m) + u exp(f - m),
 * the fill only where u > 0. */
static sf_status check_slot_rows(const int64_t *slot, int64_t k_begin, int64_t k_end,
                                 int64_t nslots, int64_t w) {
  if (k_begin < 0 || k_end < k_begin || nslots < 0 || w < 0) return SF_ERR_NEGATIVE_SIZE;
  if (k_end > k_begin && slot == NULL) return SF_ERR_NULL_POINTER;
  for (int64_t k = k_begin; k < k_end; ++k) {
    if ((uint64_t)slot[k] >= (uint64_t)nslots) return SF_ERR_INDEX_OUT_OF_RANGE;
  }
  return SF_OK;
}

static sf_status check_slot_range(int64_t s_begin, int64_t s_end, int64_t nslots, int64_t w,
                                  int64_t nparts, int64_t n, int64_t fill_stride) {
  if (s_begin < 0 || s_end < s_begin || nslots < 0 || w < 0 || nparts < 0 || n < 0) {
    return SF_ERR_NEGATIVE_SIZE;
  }
  if (s_end > nslots || (fill_stride != 0 && fill_stride != w)) return SF_ERR_INVALID_ARGUMENT;
  return SF_OK;
}

#define SF_DEFINE_SLOT_SOFTMAX(T, SUFFIX, EXP, LOG)                                               \
  sf_status sf_slot_softmax_max_##SUFFIX(T *m, int64_t *count, const double *acc,               \
                                         int64_t nparts, const T *fill, int64_t fill_stride,    \
                                         int64_t s_begin, int64_t s_end, int64_t nslots,        \
                                         int64_t w, int64_t n) {                                \
    sf_status st = check_slot_range(s_begin, s_end, nslots, w, nparts, n, fill_stride);         \
    if (st != SF_OK) return st;                                                                  \
    if (s_end > s_begin &&                                                                       \
        (count == NULL || (w > 0 && (m == NULL || fill == NULL)) || (nparts > 0 && acc == NULL))) { \
      return SF_ERR_NULL_POINTER;                                                                \
    }                                                                                            \
    const int64_t row = w + 1, part = nslots * row;                                              \
    for (int64_t s = s_begin; s < s_end; ++s) {                                                  \
      const int64_t t = slot_count_##SUFFIX(acc, nparts, part, s * row + w, n);                  \
      if (t < 0) return SF_ERR_NOT_COALESCED;                                                    \
      count[s] = t;                                                                              \
      const T *f = fill + s * fill_stride;                                                       \
      for (int64_t c = 0; c < w; ++c) {                                                          \
        double a = -INFINITY;                                                                    \
        for (int64_t p = 0; p < nparts; ++p) {                                                   \
          const double x = acc[p * part + s * row + c];                                          \
          if (isnan(x) || x > a) a = x;                                                          \
        }                                                                                        \
        if (t < n && !isnan(a) && (isnan((double)f[c]) || (double)f[c] > a)) a = (double)f[c];   \
        m[s * w + c] = (T)a;                                                                     \
      }                                                                                          \
    }                                                                                            \
    return SF_OK;                                                                                \
  }                                                                                              \
                                                                                                 \
  sf_status sf_slot_softmax_exp_##SUFFIX(T *out_values, double *zsum, const T *values,          \
                                         const int64_t *slot, const T *m, int64_t k_begin,      \
                                         int64_t k_end, int64_t nslots, int64_t w,              \
                                         int log_softmax) {                                     \
    sf_status st = check_slot_rows(slot, k_begin, k_end, nslots, w);                             \
    if (st != SF_OK) return st;                                                                  \
    (void)log_softmax; /* the exponentials are written either way: the pass's scratch */       \
    if ((nslots > 0 && w > 0 && (zsum == NULL || m == NULL)) ||                                  \
        (k_end > k_begin && w > 0 && (values == NULL || out_values == NULL))) {                  \
      return SF_ERR_NULL_POINTER;                                                                \
    }                                                                                            \
    for (int64_t i = 0; i < nslots * w; ++i) zsum[i] = 0;                                        \
    if (w == 1) {                                                                                \
      /* one value per stored row, in blocks that stay in L1: the gather of  \
       * x - m, the exponentials in a loop of their own (it vectorizes), the \
       * sums scattered into the slots */                                    \
      for (int64_t kb = k_begin; kb < k_end; kb += 512) {                                        \
        const int64_t ke = kb + 512 < k_end ? kb + 512 : k_end;                                  \
        T *y = out_values;                                                                       \
        for (int64_t k = kb; k < ke; ++k) y[k] = values[k] - m[slot[k]];                         \
        for (int64_t k = kb; k < ke; ++k) y[k] = SF_EXP_ROW_##SUFFIX(y[k]);                      \
        for (int64_t k = kb; k < ke; ++k) zsum[slot[k]] += (double)y[k];                         \
      }                                                                                          \
      return SF_OK;                                                                              \
    }                                                                                            \
    for (int64_t k = k_begin; k < k_end; ++k) {                                                  \
      const int64_t s = slot[k];                                                                 \
      for (int64_t c = 0; c < w; ++c) {                                                          \
        const T e = SF_EXP_ROW_##SUFFIX(values[k * w + c] - m[s * w + c]);                       \
        out_values[k * w + c] = e;                                                               \
        zsum[s * w + c] += (double)e;                                                            \
      }                                                                                          \
    }                                                                                            \
    return SF_OK;                                                                                \
  }                                                                                              \
                                                                                                 \
  sf_status sf_slot_softmax_norm_##SUFFIX(T *out_fill, T *scale, const double *zsum,            \
                                          int64_t nparts, const int64_t *count, const T *m,     \
                                          const T *fill, int64_t fill_stride, int64_t s_begin,  \
                                          int64_t s_end, int64_t nslots, int64_t w, int64_t n,  \
                                          int log_softmax) {                                    \
    sf_status st = check_slot_range(s_begin, s_end, nslots, w, nparts, n, fill_stride);         \
    if (st != SF_OK) return st;                                                                  \
    if (s_end > s_begin && (count == NULL || (w > 0 && (out_fill == NULL || scale == NULL ||     \
                                                        m == NULL || fill == NULL ||             \
                                                        (nparts > 0 && zsum == NULL))))) {       \
      return SF_ERR_NULL_POINTER;                                                                \
    }                                                                                            \
    const int64_t part = nslots * w;                                                             \
    for (int64_t s = s_begin; s < s_end; ++s) {                                                  \
      if (count[s] < 0 || count[s] > n) return SF_ERR_NOT_COALESCED;                             \
      const int64_t u = n - count[s];                                                            \
      const T *f = fill + s * fill_stride;                                                       \
      for (int64_t c = 0; c < w; ++c) {                                                          \
        const int64_t sc = s * w + c;                                                            \
        double zd = 0;                                                                           \
        for (int64_t p = 0; p < nparts; ++p) zd += zsum[p * part + sc];                          \
        T z = (T)zd;                                                                             \
        const T ef = u > 0 ? EXP(f[c] - m[sc]) : (T)0;                                           \
        z += (T)u * ef;                                                                          \
        if (log_softmax) {                                                                       \
          const T lz = LOG(z);                                                                   \
          scale[sc] = lz;                                                                        \
          out_fill[sc] = u > 0 ? f[c] - m[sc] - lz : (T)0;                                       \
        } else {                                                                                 \
          const T inv = (T)1 / z;                                                                \
          scale[sc] = inv;                                                                       \
          out_fill[sc] = u > 0 ? ef * inv : (T)0;                                                \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
    return SF_OK;                                                                                \
  }                                                                                              \
                                                                                                 \
  sf_status sf_slot_softmax_write_##SUFFIX(T *out_values, const T *values, const int64_t *slot, \
                                           const T *m, const T *scale, int64_t k_begin,         \
                                           int64_t k_end, int64_t nslots, int64_t w,            \
                                           int log_softmax) {                                   \
    sf_status st = check_slot_rows(slot, k_begin, k_end, nslots, w);                             \
    if (st != SF_OK) return st;                                                                  \
    if (k_end > k_begin && w > 0 &&                                                              \
        (out_values == NULL || scale == NULL || (log_softmax && (values == NULL || m == NULL)))) { \
      return SF_ERR_NULL_POINTER;                                                                \
    }                                                                                            \
    for (int64_t k = k_begin; k < k_end; ++k) {                                                  \
      const int64_t s = slot[k];                                                                 \
      for (int64_t c = 0; c < w; ++c) {                                                          \
        const int64_t i = k * w + c, sc = s * w + c;                                             \
        if (log_softmax) {                                                                       \
          out_values[i] = values[i] - m[sc] - scale[sc];                                         \
        } else {                                                                                 \
          out_values[i] *= scale[sc];                                                            \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
    return SF_OK;                                                                                \
  }                                                                                              \
                                                                                                 \
  sf_status sf_slot_softmax_backward_partial_##SUFFIX(                                          \
      double *acc, const T *out_values, const T *g_values, const int64_t *slot, int64_t k_begin, \
      int64_t k_end, int64_t nslots, int64_t w, int log_softmax) {                               \
    sf_status st = check_slot_rows(slot, k_begin, k_end, nslots, w);                             \
    if (st != SF_OK) return st;                                                                  \
    if ((nslots > 0 && acc == NULL) ||                                                           \
        (k_end > k_begin && w > 0 &&                                                             \
         (g_values == NULL || (!log_softmax && out_values == NULL)))) {                          \
      return SF_ERR_NULL_POINTER;                                                                \
    }                                                                                            \
    const int64_t row = w + 1;                                                                   \
    for (int64_t i = 0; i < nslots * row; ++i) acc[i] = 0;                                       \
    for (int64_t k = k_begin; k < k_end; ++k) {                                                  \
      double *a = acc + slot[k] * row;                                                           \
      for (int64_t c = 0; c < w; ++c) {                                                          \
        const T g = g_values[k * w + c];                                                         \
        a[c] += (double)(log_softmax ? g : g * out_values[k * w + c]);                           \
      }                                                                                          \
      a[w] += 1;                                                                                 \
    }                                                                                            \
    return SF_OK;                                                                                \
  }                                                                                              \
                                                                                                 \
  sf_status sf_slot_softmax_backward_norm_##SUFFIX(                                             \
      T *grad_fill, T *dot, const double *acc, int64_t nparts, const T *out_fill,               \
      const T *g_fill, int64_t s_begin, int64_t s_end, int64_t nslots, int64_t w, int64_t n,    \
      int log_softmax) {                                                                         \
    sf_status st = check_slot_range(s_begin, s_end, nslots, w, nparts, n, 0);                    \
    if (st != SF_OK) return st;                                                                  \
    if (s_end > s_begin && w > 0 &&                                                              \
        (grad_fill == NULL || dot == NULL || out_fill == NULL || g_fill == NULL ||               \
         (nparts > 0 && acc == NULL))) {                                                         \
      return SF_ERR_NULL_POINTER;                                                                \
    }                                                                                            \
    const int64_t row = w + 1, part = nslots * row;                                              \
    for (int64_t s = s_begin; s < s_end; ++s) {                                                  \
      const int64_t t = slot_count_##SUFFIX(acc, nparts, part, s * row + w, n);                  \
      if (t < 0) return SF_ERR_NOT_COALESCED;                                                    \
      const int64_t u = n - t;                                                                   \
      for (int64_t c = 0; c < w; ++c) {                                                          \
        const int64_t sc = s * w + c;                                                            \
        double ad = 0;                                                                           \
        for (int64_t p = 0; p < nparts; ++p) ad += acc[p * part + s * row + c];                  \
        const T a = (T)ad + softmax_fill_dot_##SUFFIX(out_fill[sc], g_fill[sc], u, log_softmax);  \
        dot[sc] = a;                                                                             \
        grad_fill[sc] = softmax_fill_grad_##SUFFIX(out_fill[sc], g_fill[sc], a, u, log_softmax);  \
      }                                                                                          \
    }                                                                                            \
    return SF_OK;                                                                                \
  }                                                                                              \
                                                                                                 \
  sf_status sf_slot_softmax_backward_write_##SUFFIX(                                            \
      T *grad_values, const T *out_values, const T *g_values, const int64_t *slot, const T *dot, \
      int64_t k_begin, int64_t k_end, int64_t nslots, int64_t w, int log_softmax) {              \
    sf_status st = check_slot_rows(slot, k_begin, k_end, nslots, w);                             \
    if (st != SF_OK) return st;                                                                  \
    if (k_end > k_begin && w > 0 &&                                                              \
        (grad_values == NULL || out_values == NULL || g_values == NULL || dot == NULL)) {        \
      return SF_ERR_NULL_POINTER;                                                                \
    }                                                                                            \
    for (int64_t k = k_begin; k < k_end; ++k) {                                                  \
      const int64_t s = slot[k];                                                                 \
      for (int64_t c = 0; c < w; ++c) {                                                          \
        const int64_t i = k * w + c;                                                             \
        grad_values[i] = softmax_grad_##SUFFIX(out_values[i], g_values[i], dot[s * w + c],       \
                                               log_softmax);                                     \
      }                                                                                          \
    }                                                                                            \
    return SF_OK;                                                                                \
  }

SF_DEFINE_SLOT_SOFTMAX(double, f64, exp, log)
SF_DEFINE_SLOT_SOFTMAX(float, f32, expf, logf)
