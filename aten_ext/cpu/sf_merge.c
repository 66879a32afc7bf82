/* sf_merge.c -- pattern merges: the union plan and fill substitution. */
#include <string.h>

#include "sf_internal.h"

static int strictly_increasing(const int64_t *x, int64_t n) {
  for (int64_t k = 1; k < n; ++k) {
    if (x[k] <= x[k - 1]) return 0;
  }
  return 1;
}

sf_status sf_union_count(int64_t *nse_out, const int64_t *linear_a, int64_t nse_a,
                         const int64_t *linear_b, int64_t nse_b) {
  SF_FAIL_IF(nse_out == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(nse_a < 0 || nse_b < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(linear_a, nse_a);
  SF_NEED(linear_b, nse_b);
  SF_FAIL_IF(!strictly_increasing(linear_a, nse_a) || !strictly_increasing(linear_b, nse_b),
             SF_ERR_NOT_COALESCED);
  int64_t i = 0, j = 0, n = 0;
  while (i < nse_a && j < nse_b) {
    const int64_t a = linear_a[i], b = linear_b[j];
    i += (a <= b);
    j += (b <= a);
    ++n;
  }
  *nse_out = n + (nse_a - i) + (nse_b - j);
  return SF_OK;
}

sf_status sf_union_plan(int64_t *nse_out, int64_t *linear_out, int64_t *src_a, int64_t *src_b,
                        const int64_t *linear_a, int64_t nse_a, const int64_t *linear_b,
                        int64_t nse_b) {
  SF_FAIL_IF(nse_out == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(nse_a < 0 || nse_b < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(linear_a, nse_a);
  SF_NEED(linear_b, nse_b);
  /* The outputs hold nse_a + nse_b (the sum is not formed: it could overflow). */
  const int64_t any = (nse_a > 0 || nse_b > 0);
  SF_NEED(linear_out, any);
  SF_NEED(src_a, any);
  SF_NEED(src_b, any);
  SF_FAIL_IF(!strictly_increasing(linear_a, nse_a) || !strictly_increasing(linear_b, nse_b),
             SF_ERR_NOT_COALESCED);
  int64_t i = 0, j = 0, n = 0;
  while (i < nse_a && j < nse_b) {
    const int64_t a = linear_a[i], b = linear_b[j];
    linear_out[n] = a <= b ? a : b;
    src_a[n] = a <= b ? i : -1;
    src_b[n] = b <= a ? j : -1;
    i += (a <= b);
    j += (b <= a);
    ++n;
  }
  for (; i < nse_a; ++i, ++n) {
    linear_out[n] = linear_a[i];
    src_a[n] = i;
    src_b[n] = -1;
  }
  for (; j < nse_b; ++j, ++n) {
    linear_out[n] = linear_b[j];
    src_a[n] = -1;
    src_b[n] = j;
  }
  *nse_out = n;
  return SF_OK;
}

/* One copy loop per common row width (`bytes` a constant where it is inlined
 * below), so that the compiler inlines memcpy. The source row is chosen by
 * masking addresses, not by a branch: a union of random patterns takes the
 * fill at random, which a branch would mispredict. */
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
static inline void gather_fixed(char *dst, const char *base, const char *fill, const int64_t *src,
                                int64_t n, size_t bytes) {
  for (int64_t k = 0; k < n; ++k) {
    const int64_t s = src[k];
    const uintptr_t use_fill = (uintptr_t)0 - (uintptr_t)(s < 0);
    const uintptr_t row = (uintptr_t)base + (uintptr_t)((s < 0 ? 0 : s) * bytes);
    const char *from = (const char *)((row & ~use_fill) | ((uintptr_t)fill & use_fill));
    memcpy(dst + k * bytes, from, bytes);
  }
}

/* Rows base[src[k]] (fill where src[k] < 0) to dst; src already checked. */
static void gather_rows(char *dst, const char *base, const char *fill, const int64_t *src,
                        int64_t n, size_t row_bytes) {
  switch (row_bytes) {
    case 1: gather_fixed(dst, base, fill, src, n, 1); break;
    case 2: gather_fixed(dst, base, fill, src, n, 2); break;
    case 4: gather_fixed(dst, base, fill, src, n, 4); break;
    case 8: gather_fixed(dst, base, fill, src, n, 8); break;
    case 16: gather_fixed(dst, base, fill, src, n, 16); break;
    default:
      for (int64_t k = 0; k < n; ++k) {
        const int64_t s = src[k];
        memcpy(dst + (size_t)k * row_bytes, s < 0 ? fill : base + (size_t)s * row_bytes,
               row_bytes);
      }
  }
}

sf_status sf_gather_rows_with_fill(void *out, const void *values, int64_t nse_values,
                                   const void *fill_row, const int64_t *src, int64_t n,
                                   size_t row_bytes) {
  SF_FAIL_IF(n < 0 || nse_values < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(src, n);
  if (n == 0 || row_bytes == 0) {
    for (int64_t k = 0; k < n; ++k) SF_FAIL_IF(src[k] >= nse_values, SF_ERR_INDEX_OUT_OF_RANGE);
    return SF_OK;
  }
  SF_FAIL_IF(out == NULL || fill_row == NULL, SF_ERR_NULL_POINTER);
  SF_NEED(values, nse_values);
  for (int64_t k = 0; k < n; ++k) SF_FAIL_IF(src[k] >= nse_values, SF_ERR_INDEX_OUT_OF_RANGE);
  gather_rows(out, values, fill_row, src, n, row_bytes);
  return SF_OK;
}

/* ---- the union on COO columns, in chunks ------------------------------------ */

/* Sign of column i of x [sd x nx] minus column j of y [sd x ny], lexicographic.
 * Every dimension is read and no branch depends on the data: a merge of
 * random patterns would mispredict half of its comparisons. */
static inline int compare_columns(const int64_t *x, int64_t nx, int64_t i, const int64_t *y,
                                  int64_t ny, int64_t j, int64_t sd) {
  if (sd == 1) return (x[i] > y[j]) - (x[i] < y[j]);
  int c = 0;
  for (int64_t d = 0; d < sd; ++d) {
    const int64_t u = x[d * nx + i], v = y[d * ny + j];
    const int cd = (u > v) - (u < v);
    c = c != 0 ? c : cd;
  }
  return c;
}

/* First position in x [sd x nx] whose column is not below column j of y. */
static int64_t lower_bound_column(const int64_t *x, int64_t nx, const int64_t *y, int64_t ny,
                                  int64_t j, int64_t sd) {
  int64_t lo = 0, hi = nx;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (compare_columns(x, nx, mid, y, ny, j, sd) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

sf_status sf_union_cuts(int64_t *cut_a, int64_t *cut_b, int64_t parts, const int64_t *indices_a,
                        int64_t nse_a, const int64_t *indices_b, int64_t nse_b,
                        int64_t sparse_dim) {
  SF_FAIL_IF(cut_a == NULL || cut_b == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(parts < 1, SF_ERR_INVALID_ARGUMENT);
  SF_FAIL_IF(nse_a < 0 || nse_b < 0 || sparse_dim < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(nse_a > INT64_MAX - nse_b, SF_ERR_OVERFLOW);
  SF_NEED2(indices_a, sparse_dim, nse_a);
  SF_NEED2(indices_b, sparse_dim, nse_b);
  const int64_t total = nse_a + nse_b;
  cut_a[0] = cut_b[0] = 0;
  cut_a[parts] = nse_a;
  cut_b[parts] = nse_b;
  for (int64_t t = 1; t < parts; ++t) {
    /* The first `diag` elements of the merge (A first on ties) hold A[0, i)
     * and B[0, diag - i): i by bisection (merge path). */
    const int64_t diag = total / parts * t + total % parts * t / parts;
    int64_t lo = diag > nse_b ? diag - nse_b : 0, hi = diag < nse_a ? diag : nse_a;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (compare_columns(indices_a, nse_a, mid, indices_b, nse_b, diag - mid - 1,
                          sparse_dim) <= 0) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    const int64_t i = lo, j = diag - lo;
    /* Cut both operands before the next key in merge order, so that equal
     * keys stay in one chunk. */
    if (i < nse_a && (j >= nse_b || compare_columns(indices_a, nse_a, i, indices_b, nse_b, j,
                                                    sparse_dim) <= 0)) {
      cut_a[t] = i;
      cut_b[t] = lower_bound_column(indices_b, nse_b, indices_a, nse_a, i, sparse_dim);
    } else if (j < nse_b) {
      cut_a[t] = lower_bound_column(indices_a, nse_a, indices_b, nse_b, j, sparse_dim);
      cut_b[t] = j;
    } else {
      cut_a[t] = nse_a;
      cut_b[t] = nse_b;
    }
  }
  /* Non-decreasing whatever the input (unsorted indices bisect anywhere). */
  for (int64_t t = 1; t < parts; ++t) {
    if (cut_a[t] < cut_a[t - 1]) cut_a[t] = cut_a[t - 1];
    if (cut_b[t] < cut_b[t - 1]) cut_b[t] = cut_b[t - 1];
  }
  return SF_OK;
}

static sf_status check_side(sf_site *site, const sf_union_side *s, int64_t sd,
                            const int64_t *sizes) {
  SF_FAIL_IF(s == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(s->nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(s->begin < 0 || s->begin > s->end || s->end > s->nse, SF_ERR_INVALID_ARGUMENT);
  SF_NEED2(s->indices, sd, s->nse);
  const int64_t *x = s->indices;
  for (int64_t k = s->begin; k < s->end; ++k) {
    if (sizes != NULL) {
      for (int64_t d = 0; d < sd; ++d) {
        const int64_t v = x[d * s->nse + k];
        if (v < 0 || v >= sizes[d]) {
          sf_set_site(site, k, d, v);
          return v < 0 ? SF_ERR_INDEX_NEGATIVE : SF_ERR_INDEX_OUT_OF_RANGE;
        }
      }
    }
    if (k > 0 && compare_columns(x, s->nse, k - 1, x, s->nse, k, sd) >= 0) {
      sf_set_site(site, k, -1, sd > 0 ? x[(sd - 1) * s->nse + k] : 0);
      return SF_ERR_NOT_COALESCED;
    }
  }
  return SF_OK;
}

sf_status sf_union_count_range(int64_t *count, sf_site *site, const sf_union_side *a,
                               const sf_union_side *b, int64_t sparse_dim,
                               const int64_t *sizes) {
  SF_FAIL_IF(count == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(sparse_dim < 0, SF_ERR_NEGATIVE_SIZE);
  sf_status st = check_side(site, a, sparse_dim, sizes);
  if (st == SF_OK) st = check_side(site, b, sparse_dim, sizes);
  if (st != SF_OK) return st;
  int64_t i = a->begin, j = b->begin, n = 0;
  while (i < a->end && j < b->end) {
    const int c = compare_columns(a->indices, a->nse, i, b->indices, b->nse, j, sparse_dim);
    i += (c <= 0);
    j += (c >= 0);
    ++n;
  }
  *count = n + (a->end - i) + (b->end - j);
  return SF_OK;
}

/* Union elements are merged a block at a time (indices written, sources kept
 * here), then each side's sources and rows are copied out in bulk. */
#define SF_UNION_BLOCK 512

static sf_status check_outputs(const sf_union_side *s) {
  SF_FAIL_IF(s->values_out != NULL && s->row_bytes > 0 &&
                 (s->fill_row == NULL || (s->values == NULL && s->nse > 0)),
             SF_ERR_NULL_POINTER);
  return SF_OK;
}

static void flush_side(const sf_union_side *s, const int64_t *src, int64_t out, int64_t n) {
  if (s->src != NULL) memcpy(s->src + out, src, (size_t)n * sizeof *src);
  if (s->values_out != NULL && s->row_bytes > 0) {
    gather_rows((char *)s->values_out + (size_t)out * s->row_bytes, s->values, s->fill_row, src,
                n, s->row_bytes);
  }
}

/* Merges up to `room` union elements from A[*i, ea) and B[*j, eb): index
 * columns to out (column o0 on, of nse_out), sources to src_a/src_b; returns
 * how many. One sparse dim: the keys themselves, without branches. */
static int64_t merge_block(int64_t *out, int64_t nse_out, int64_t o0, int64_t *src_a,
                           int64_t *src_b, const sf_union_side *a, int64_t *pi,
                           const sf_union_side *b, int64_t *pj, int64_t sd, int64_t room) {
  const int64_t *xa = a->indices, *xb = b->indices;
  const int64_t na = a->nse, nb = b->nse, ea = a->end, eb = b->end;
  int64_t i = *pi, j = *pj, m = 0;
  if (sd == 1) {
    for (; m < room && i < ea && j < eb; ++m) {
      const int64_t u = xa[i], v = xb[j];
      const int take_a = u <= v, take_b = v <= u;
      out[o0 + m] = take_a ? u : v;
      src_a[m] = take_a ? i : -1;
      src_b[m] = take_b ? j : -1;
      i += take_a;
      j += take_b;
    }
  } else {
    for (; m < room && i < ea && j < eb; ++m) {
      const int c = compare_columns(xa, na, i, xb, nb, j, sd);
      const int64_t *from = c <= 0 ? xa + i : xb + j; /* A's column on ties: equal */
      const int64_t stride = c <= 0 ? na : nb;
      for (int64_t d = 0; d < sd; ++d) out[d * nse_out + o0 + m] = from[d * stride];
      src_a[m] = c <= 0 ? i : -1;
      src_b[m] = c >= 0 ? j : -1;
      i += (c <= 0);
      j += (c >= 0);
    }
  }
  /* One side is used up (or the block full): the other's columns follow. */
  for (; m < room && i < ea && j >= eb; ++m, ++i) {
    for (int64_t d = 0; d < sd; ++d) out[d * nse_out + o0 + m] = xa[d * na + i];
    src_a[m] = i;
    src_b[m] = -1;
  }
  for (; m < room && j < eb && i >= ea; ++m, ++j) {
    for (int64_t d = 0; d < sd; ++d) out[d * nse_out + o0 + m] = xb[d * nb + j];
    src_a[m] = -1;
    src_b[m] = j;
  }
  *pi = i;
  *pj = j;
  return m;
}

sf_status sf_union_write_range(int64_t *indices_out, int64_t nse_out, int64_t out_begin,
                               const sf_union_side *a, const sf_union_side *b,
                               int64_t sparse_dim) {
  SF_FAIL_IF(a == NULL || b == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(sparse_dim < 0 || nse_out < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(out_begin < 0 || out_begin > nse_out, SF_ERR_INVALID_ARGUMENT);
  SF_FAIL_IF(a->begin < 0 || a->begin > a->end || a->end > a->nse, SF_ERR_INVALID_ARGUMENT);
  SF_FAIL_IF(b->begin < 0 || b->begin > b->end || b->end > b->nse, SF_ERR_INVALID_ARGUMENT);
  SF_NEED2(indices_out, sparse_dim, nse_out);
  SF_NEED2(a->indices, sparse_dim, a->nse);
  SF_NEED2(b->indices, sparse_dim, b->nse);
  sf_status st = check_outputs(a);
  if (st == SF_OK) st = check_outputs(b);
  if (st != SF_OK) return st;
  int64_t src_a[SF_UNION_BLOCK], src_b[SF_UNION_BLOCK];
  int64_t i = a->begin, j = b->begin, o = out_begin;
  while (i < a->end || j < b->end) {
    /* Elements left but no room for them: the count pass was skipped or lied. */
    SF_FAIL_IF(o >= nse_out, SF_ERR_INVALID_ARGUMENT);
    const int64_t room = nse_out - o < SF_UNION_BLOCK ? nse_out - o : SF_UNION_BLOCK;
    const int64_t m = merge_block(indices_out, nse_out, o, src_a, src_b, a, &i, b, &j,
                                  sparse_dim, room);
    flush_side(a, src_a, o, m);
    flush_side(b, src_b, o, m);
    o += m;
  }
  return SF_OK;
}
