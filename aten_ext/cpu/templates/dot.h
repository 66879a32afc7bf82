/* templates/dot.h -- the dot product of the products' and attention's inner
 * loops (sf_products.c, sf_attention.c), for f32 and f64. */

/* A dot product in 8 independent lanes, which the compiler vectorises (a
 * single running sum may not be reassociated). */
static inline T SF_FN(sf_dot)(const T *restrict x, const T *restrict y, int64_t n) {
  T lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t t = 0;
  for (; t + 8 <= n; t += 8)
    for (int u = 0; u < 8; ++u) lane[u] += x[t + u] * y[t + u];
  T s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
  for (; t < n; ++t) s += x[t] * y[t];
  return s;
}
