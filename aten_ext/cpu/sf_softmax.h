/* sf_softmax.h -- what the segment (sf_reduce.c) and slot (sf_slot.c) softmax
 * kernels share (not installed): the exponential of a softmax's row. */
#ifndef SF_SOFTMAX_H
#define SF_SOFTMAX_H

#include <math.h>
#include <stdint.h>
#include <string.h>

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

/* The exponential of x - max in a template: SF_FN(SF_EXP_ROW)(x). The f64
 * kernels keep libm's exp. */
#define SF_EXP_ROW_f32(x) exp_nonpositive_f32(x)
#define SF_EXP_ROW_f64(x) exp(x)

#endif /* SF_SOFTMAX_H */
