/* templates/bsr.h -- fill-aware BSR @ dense (sf_bsr_spmm_*) for f32 and f64:
 * compiled once per type by sf_instantiate.h from sf_bsr.c (tiles, SF_BSR_* ). */

/* The vector type of T's tiles (sf_bsr.c). */
#if SF_TYPE == SF_F32
#define V sf_vf32
#else
#define V sf_vf64
#endif

/* One tile: rows u0 .. u0 + SF_BSR_ROWS of block row [lo, hi), columns t0 ..
 * t0 + 2 lanes, all within bounds (the full-size fast case). */
SF_BSR_INLINE void SF_FN(sf_bsr_tile)(T *restrict c, int64_t ldc, const int64_t *col,
                                      const T *restrict values, int64_t lo, int64_t hi,
                                      int64_t r, int64_t bc, const T *restrict b,
                                      int64_t ldb, T f, const T *restrict colsum,
                                      int64_t u0, int64_t t0) {
  typedef SF_BSR_VEC(V, T) vec;
  enum { L = SF_BSR_LANES(V, T) };
  vec acc[SF_BSR_ROWS][2];
  for (int k = 0; k < 2; ++k) {
    vec cs;
    if (colsum) memcpy(&cs, colsum + t0 + k * L, sizeof cs); else memset(&cs, 0, sizeof cs);
    for (int u = 0; u < SF_BSR_ROWS; ++u) acc[u][k] = cs * f;
  }
  for (int64_t p = lo; p < hi; ++p) {
    const T *restrict vp = values + (p * r + u0) * bc;
    const T *restrict bp = b + col[p] * bc * ldb + t0;
    for (int64_t v = 0; v < bc; ++v) {
      vec bv[2];
      memcpy(&bv[0], bp + v * ldb, sizeof bv[0]);
      memcpy(&bv[1], bp + v * ldb + L, sizeof bv[1]);
      for (int u = 0; u < SF_BSR_ROWS; ++u) {
        const T a = vp[u * bc + v] - f;
        acc[u][0] += a * bv[0];
        acc[u][1] += a * bv[1];
      }
    }
  }
  for (int u = 0; u < SF_BSR_ROWS; ++u)
    for (int k = 0; k < 2; ++k)
      memcpy(c + (u0 + u) * ldc + t0 + k * L, &acc[u][k], sizeof acc[u][k]);
}

/* The same for any rows [u0, u1) and columns [t0, t1) (the edges). */
SF_BSR_INLINE void SF_FN(sf_bsr_edge)(T *restrict c, int64_t ldc, const int64_t *col,
                               const T *restrict values, int64_t lo, int64_t hi,
                               int64_t r, int64_t bc, const T *restrict b, int64_t ldb,
                               T f, const T *restrict colsum, int64_t u0, int64_t u1,
                               int64_t t0, int64_t t1) {
  for (int64_t u = u0; u < u1; ++u) {
    T *restrict cu = c + u * ldc;
    /* from +0 as dense's sums (templates/products.h) */
    for (int64_t t = t0; t < t1; ++t) cu[t] = colsum ? (T)0 + f * colsum[t] : (T)0;
    for (int64_t p = lo; p < hi; ++p) {
      const T *restrict vp = values + (p * r + u) * bc;
      const T *restrict bp = b + col[p] * bc * ldb;
      for (int64_t v = 0; v < bc; ++v) {
        const T a = vp[v] - f;
        const T *restrict bv = bp + v * ldb;
        for (int64_t t = t0; t < t1; ++t) cu[t] += a * bv[t];
      }
    }
  }
}

SF_BSR_CLONES sf_status SF_FN(sf_bsr_spmm)(
  T *c, int64_t ldc, const int64_t *crow, const int64_t *col, const T *values,
  int64_t nbrows, int64_t nbcols, int64_t nblocks, int64_t r, int64_t bc, const T *b,
  int64_t ldb, int64_t n, const T *fill, const T *colsum, int64_t brow_begin,
  int64_t brow_end) {
  SF_FAIL_IF(nbrows < 0 || nbcols < 0 || nblocks < 0 || r < 0 || bc < 0 || n < 0,
             SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(brow_begin < 0 || brow_end < brow_begin || brow_end > nbrows,
             SF_ERR_INVALID_ARGUMENT);
  SF_FAIL_IF(ldc < n || ldb < n, SF_ERR_INVALID_ARGUMENT);
  if (brow_end == brow_begin || n == 0 || r == 0) return SF_OK;
  SF_FAIL_IF(c == NULL || crow == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(col, nblocks);
  SF_NEED(values, nblocks);
  SF_NEED2(b, nbcols, n);
  const T f = fill ? *fill : (T)0;
  const int64_t tile = 2 * SF_BSR_LANES(V, T);
  const int64_t nt = n - n % tile, nu = r - r % SF_BSR_ROWS;
  for (int64_t i = brow_begin; i < brow_end; ++i) {
    const int64_t lo = crow[i], hi = crow[i + 1];
    if (lo < 0 || hi < lo || hi > nblocks) return SF_ERR_CROW_DECREASING;
    for (int64_t p = lo; p < hi; ++p)
      if (col[p] < 0 || col[p] >= nbcols) return SF_ERR_INDEX_OUT_OF_RANGE;
    T *ci = c + i * r * ldc;
    for (int64_t u = 0; u < nu; u += SF_BSR_ROWS) {
      for (int64_t t = 0; t < nt; t += tile)
        SF_FN(sf_bsr_tile)(ci, ldc, col, values, lo, hi, r, bc, b, ldb, f, colsum, u, t);
      if (nt < n)
        SF_FN(sf_bsr_edge)(ci, ldc, col, values, lo, hi, r, bc, b, ldb, f, colsum, u,
                           u + SF_BSR_ROWS, nt, n);
    }
    if (nu < r)
      SF_FN(sf_bsr_edge)(ci, ldc, col, values, lo, hi, r, bc, b, ldb, f, colsum, nu, r, 0,
                         n);
  }
  return SF_OK;
}

#undef V
