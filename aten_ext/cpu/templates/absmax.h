/* templates/absmax.h -- max |x| read as bits, and its block-wise read behind a
 * product's pass (sf_products.c), for f32 and f64.
 *
 * max |x| over n elements at stride `stride`, as the bits of |x|: for IEEE
 * values with the sign cleared, the unsigned order of the bits is the order
 * of the magnitudes, with inf above every finite value and every NaN above
 * inf. So one unsigned max (which vectorises, where a float max with NaN
 * rules does not) gives max |x|, inf if x holds one, NaN if x holds one. */

static inline U SF_FN(sf_absmax_bits)(const T *x, int64_t n, int64_t stride) {
  U mx[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  if (stride == 1) {
    for (; i + 8 <= n; i += 8)
      for (int u = 0; u < 8; ++u) {
        U b;
        memcpy(&b, x + i + u, sizeof b);
        b &= MAGNITUDE;
        mx[u] = b > mx[u] ? b : mx[u];
      }
  }
  for (; i < n; ++i) {
    U b;
    memcpy(&b, x + i * stride, sizeof b);
    b &= MAGNITUDE;
    mx[0] = b > mx[0] ? b : mx[0];
  }
  U m = 0;
  for (int u = 0; u < 8; ++u) m = mx[u] > m ? mx[u] : m;
  return m;
}

static inline T SF_FN(sf_from_bits)(U b) {
  T v;
  memcpy(&v, &b, sizeof v);
  return v;
}

/* max |values| of a row range, read in blocks of whole rows behind a kernel's
 * pass, while a block is still in L1 (a pass of its own vectorises; the same
 * steps inside a gather loop cost the SpMV half its time again, a pass over the
 * whole range after it about as much, from memory). */
typedef struct {
  U bits;              /* max |v| so far, as bits */
  int64_t start, end;  /* the block not yet read: [start, end) */
} SF_FN(sf_absmax_block);

SF_CLONES static SF_NOINLINE void SF_FN(sf_absmax_fold)(SF_FN(sf_absmax_block) *s,
                                         const T *values) {
  const U b = SF_FN(sf_absmax_bits)(values + s->start, s->end - s->start, 1);
  s->bits = b > s->bits ? b : s->bits;
  s->start = s->end;
}

/* The kernel read row [lo, hi) (rows come in order, each starting where the
 * last ended). */
static inline void SF_FN(sf_absmax_block_add)(SF_FN(sf_absmax_block) *s,
                                              const T *values, int64_t lo,
                                              int64_t hi) {
  if (s->start < 0) s->start = lo;
  s->end = hi;
  if (s->end - s->start >= SF_ABSMAX_BLOCK) SF_FN(sf_absmax_fold)(s, values);
}

static inline T SF_FN(sf_absmax_block_end)(SF_FN(sf_absmax_block) *s,
                                           const T *values) {
  if (s->end > s->start) SF_FN(sf_absmax_fold)(s, values);
  return SF_FN(sf_from_bits)(s->bits);
}
