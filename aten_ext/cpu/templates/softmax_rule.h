/* templates/softmax_rule.h -- softmax's backward rule, one home for the segment
 * (sf_reduce.c) and the slot (sf_slot.c) kernels; floats only. Compiled once
 * per type by sf_instantiate.h. */
/* dot: the slice's sum of g y (softmax) or of g (log_softmax); the u
 * unspecified outputs y_f have the summed gradient g_fill. Their term of
 * the dot, a stored element's gradient, and the fill's (0 where u == 0). */
static inline T SF_FN(softmax_fill_dot)(T y_f, T g_fill, int64_t u, int log_softmax) {
  return u > 0 ? (log_softmax ? g_fill : g_fill * y_f) : (T)0;
}
static inline T SF_FN(softmax_grad)(T y, T g, T dot, int log_softmax) {
  return log_softmax ? g - EXP(y) * dot : y * (g - dot);
}
static inline T SF_FN(softmax_fill_grad)(T y_f, T g_fill, T dot, int64_t u,
                                         int log_softmax) {
  if (u == 0) return 0;
  return log_softmax ? g_fill - (T)u * EXP(y_f) * dot : y_f * (g_fill - (T)u * dot);
}
