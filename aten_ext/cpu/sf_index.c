/* sf_index.c -- index_select along one sparse dim of coalesced COO indices,
 * in chunks for the caller's threads, the result coalesced without a global
 * sort (contracts in sparsefill_core.h). */
#include "sf_internal.h"

sf_status sf_select_positions(int64_t *first, int64_t *positions, sf_site *site,
                              const int64_t *index, int64_t k, int64_t size_dim) {
  SF_FAIL_IF(first == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(k < 0 || size_dim < 0, SF_ERR_NEGATIVE_SIZE);
  SF_NEED(positions, k);
  SF_NEED(index, k);
  for (int64_t c = 0; c <= size_dim; ++c) first[c] = 0;
  for (int64_t p = 0; p < k; ++p) {
    const int64_t c = index[p];
    if (c < 0 || c >= size_dim) {
      sf_set_site(site, p, -1, c);
      return c < 0 ? SF_ERR_INDEX_NEGATIVE : SF_ERR_INDEX_OUT_OF_RANGE;
    }
    ++first[c + 1];
  }
  for (int64_t c = 0; c < size_dim; ++c) first[c + 1] += first[c];
  /* first[c] serves as c's cursor, ending at the next value's start; shifted
   * back afterwards (no scratch). Positions of one value stay ascending. */
  for (int64_t p = 0; p < k; ++p) positions[first[index[p]]++] = p;
  for (int64_t c = size_dim; c > 0; --c) first[c] = first[c - 1];
  first[0] = 0;
  return SF_OK;
}

/* Whether elements a and b share their coordinates before dim. */
static int same_group(const int64_t *indices, int64_t nse, int64_t dim, int64_t a, int64_t b) {
  for (int64_t d = 0; d < dim; ++d) {
    if (indices[d * nse + a] != indices[d * nse + b]) return 0;
  }
  return 1;
}

sf_status sf_select_cuts(int64_t *cut, int64_t parts, const int64_t *indices,
                         int64_t sparse_dim, int64_t nse, int64_t dim) {
  SF_FAIL_IF(cut == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(nse < 0 || sparse_dim < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(parts < 1 || dim < 0 || dim >= sparse_dim, SF_ERR_INVALID_ARGUMENT);
  SF_NEED2(indices, sparse_dim, nse);
  cut[0] = 0;
  for (int64_t c = 1; c < parts; ++c) {
    /* nse / parts * c + ...: c * nse could overflow */
    int64_t t = nse / parts * c + nse % parts * c / parts;
    if (t < cut[c - 1]) t = cut[c - 1];
    while (t > 0 && t < nse && same_group(indices, nse, dim, t - 1, t)) ++t;
    cut[c] = t;
  }
  cut[parts] = nse;
  return SF_OK;
}

/* The matrix case's order check is cloned for AVX2 and the baseline with
 * GCC on x86-64 Linux (as sf_products.c; the loader picks one): its
 * 64-bit compares vectorize there. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define SF_INDEX_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SF_INDEX_CLONES
#endif

/* Whether elements [begin, end) (begin < end) of a matrix's indices are in
 * range and each after the one before it: no early exit, so the compares
 * vectorize. Rows are non-decreasing from element begin on, so begin's row
 * alone is checked against 0. */
SF_INDEX_CLONES static int matrix_coalesced(const int64_t *rows, const int64_t *cols,
                                            int64_t begin, int64_t end, int64_t nrows,
                                            int64_t ncols) {
  int bad = (rows[begin] < 0) | (rows[begin] >= nrows) | (cols[begin] < 0) |
            (cols[begin] >= ncols);
  if (begin > 0) {
    bad |= (rows[begin] < rows[begin - 1]) |
           ((rows[begin] == rows[begin - 1]) & (cols[begin] <= cols[begin - 1]));
  }
  for (int64_t e = begin + 1; e < end; ++e) {
    const int64_t r = rows[e], c = cols[e], rp = rows[e - 1], cp = cols[e - 1];
    bad |= (r < rp) | ((r == rp) & (c <= cp)) | (r >= nrows) | (c < 0) | (c >= ncols);
  }
  return !bad;
}

/* Columns of a matrix (sparse_dim 2, dim 1), the common case: the check
 * above (a failing chunk is searched again by the general loop for its
 * site), then the count (a gather from the index map) and the hits (stored
 * always, kept when selected) without branches. Returns 0 when the general
 * loop must run. */
static int count_matrix_cols(int64_t *count, int64_t *hits, int64_t *hit_count,
                             const int64_t *indices, int64_t nse, const int64_t *sizes,
                             const int64_t *first, int64_t begin, int64_t end) {
  const int64_t *rows = indices, *cols = indices + nse;
  const int64_t k = first[sizes[1]];
  /* the sum stays below (end - begin) * k: no overflow check per element */
  if (k > 0 && end - begin > INT64_MAX / k) return 0;
  if (begin < end && !matrix_coalesced(rows, cols, begin, end, sizes[0], sizes[1])) return 0;
  int64_t n = 0, m = 0;
  if (hits != NULL) {
    for (int64_t e = begin; e < end; ++e) {
      const int64_t copies = first[cols[e] + 1] - first[cols[e]];
      n += copies;
      hits[m] = e;
      m += copies > 0;
    }
    *hit_count = m;
  } else {
    for (int64_t e = begin; e < end; ++e) n += first[cols[e] + 1] - first[cols[e]];
  }
  *count = n;
  return 1;
}

sf_status sf_select_count_range(int64_t *count, int64_t *hits, int64_t *hit_count,
                                sf_site *site, const int64_t *indices, int64_t sparse_dim,
                                int64_t nse, const int64_t *sizes, int64_t dim,
                                const int64_t *first, int64_t begin, int64_t end) {
  SF_FAIL_IF(count == NULL || sizes == NULL || first == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF((hits == NULL) != (hit_count == NULL), SF_ERR_NULL_POINTER);
  SF_FAIL_IF(nse < 0 || sparse_dim < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(dim < 0 || dim >= sparse_dim || begin < 0 || begin > end || end > nse,
             SF_ERR_INVALID_ARGUMENT);
  SF_NEED2(indices, sparse_dim, nse);
  if (sparse_dim == 2 && dim == 1 &&
      count_matrix_cols(count, hits, hit_count, indices, nse, sizes, first, begin, end)) {
    return SF_OK;
  }
  int64_t n = 0, m = 0;
  for (int64_t e = begin; e < end; ++e) {
    /* in range, and after the previous element (from the one before the
     * range on: the chunks' checks cover every pair) */
    int order = e == 0 ? 1 : 0; /* 1: greater, 0: equal so far */
    for (int64_t d = 0; d < sparse_dim; ++d) {
      const int64_t v = indices[d * nse + e];
      if (v < 0 || v >= sizes[d]) {
        sf_set_site(site, e, d, v);
        return v < 0 ? SF_ERR_INDEX_NEGATIVE : SF_ERR_INDEX_OUT_OF_RANGE;
      }
      if (order == 0) {
        const int64_t u = indices[d * nse + e - 1];
        if (v < u) {
          sf_set_site(site, e, d, v);
          return SF_ERR_NOT_COALESCED;
        }
        order = v > u;
      }
    }
    if (order == 0) {
      sf_set_site(site, e, -1, -1);
      return SF_ERR_NOT_COALESCED;
    }
    const int64_t c = indices[dim * nse + e];
    const int64_t copies = first[c + 1] - first[c];
    SF_FAIL_IF(n > INT64_MAX - copies, SF_ERR_OVERFLOW);
    n += copies;
    if (hits != NULL && copies > 0) hits[m++] = e;
  }
  *count = n;
  if (hit_count != NULL) *hit_count = m;
  return SF_OK;
}

/* Sorts a group's pairs (key[i], src[i], len[i]) by their unique keys, in
 * place (len may be NULL). Keys come out ascending already for an ascending
 * index: checked first. Small groups by insertion, others by heap sort (no
 * scratch; with unique keys the result is the same either way). */
static void swap_pair(int64_t *key, int64_t *src, int64_t *len, int64_t a, int64_t b) {
  int64_t t = key[a];
  key[a] = key[b];
  key[b] = t;
  t = src[a];
  src[a] = src[b];
  src[b] = t;
  if (len != NULL) {
    t = len[a];
    len[a] = len[b];
    len[b] = t;
  }
}

static void sift_down(int64_t *key, int64_t *src, int64_t *len, int64_t root, int64_t n) {
  for (;;) {
    int64_t child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && key[child + 1] > key[child]) ++child;
    if (key[root] >= key[child]) return;
    swap_pair(key, src, len, root, child);
    root = child;
  }
}

static void sort_pairs(int64_t *key, int64_t *src, int64_t *len, int64_t n) {
  int64_t i = 1;
  while (i < n && key[i] > key[i - 1]) ++i;
  if (i >= n) return;
  if (n <= 24) {
    for (; i < n; ++i) {
      for (int64_t j = i; j > 0 && key[j - 1] > key[j]; --j) swap_pair(key, src, len, j - 1, j);
    }
    return;
  }
  for (int64_t r = n / 2 - 1; r >= 0; --r) sift_down(key, src, len, r, n);
  for (int64_t m = n - 1; m > 0; --m) {
    swap_pair(key, src, len, 0, m);
    sift_down(key, src, len, 0, m);
  }
}

/* sort_pairs without run lengths, by insertion only (a matrix row's pairs
 * are few for the index sizes that take this path; a long row costs
 * O(pairs^2) moves at worst, bounded by the heap sort above 24). */
static void sort_key_src(int64_t *key, int64_t *src, int64_t n) {
  int64_t i = 1;
  while (i < n && key[i] > key[i - 1]) ++i;
  if (i >= n) return;
  if (n > 24) {
    sort_pairs(key, src, NULL, n);
    return;
  }
  for (; i < n; ++i) {
    const int64_t kk = key[i], ss = src[i];
    int64_t j = i;
    for (; j > 0 && key[j - 1] > kk; --j) {
      key[j] = key[j - 1];
      src[j] = src[j - 1];
    }
    key[j] = kk;
    src[j] = ss;
  }
}

/* The write pass for columns of a matrix (sparse_dim 2, dim 1) over the
 * elements `item(i)`, i in [0, items): runs are single elements, so each
 * pair is written at its final column. */
static sf_status write_matrix_cols(int64_t *indices_out, int64_t *src, int64_t nse_out,
                                   int64_t out_begin, int64_t out_end, const int64_t *indices,
                                   int64_t nse, const int64_t *first, const int64_t *positions,
                                   const int64_t *hits, int64_t begin, int64_t items) {
  const int64_t *rows = indices, *cols = indices + nse;
  int64_t *row_out = indices_out, *key = indices_out + nse_out;
  int64_t group = out_begin, o = out_begin;
  int64_t current = -1;
  for (int64_t i = 0; i < items; ++i) {
    const int64_t e = hits != NULL ? hits[i] : begin + i;
    const int64_t r = rows[e];
    if (r != current) {
      sort_key_src(key + group, src + group, o - group);
      for (int64_t t = group; t < o; ++t) row_out[t] = current;
      group = o;
      current = r;
    }
    const int64_t c = cols[e], f = first[c], n = first[c + 1] - f;
    SF_FAIL_IF(n > out_end - o, SF_ERR_INVALID_ARGUMENT);
    for (int64_t q = f; q < f + n; ++q, ++o) {
      key[o] = positions[q];
      src[o] = e;
    }
  }
  sort_key_src(key + group, src + group, o - group);
  for (int64_t t = group; t < o; ++t) row_out[t] = current;
  SF_FAIL_IF(o != out_end, SF_ERR_INVALID_ARGUMENT);
  return SF_OK;
}

sf_status sf_select_write_range(int64_t *indices_out, int64_t *src, int64_t nse_out,
                                int64_t out_begin, int64_t out_end, const int64_t *indices,
                                int64_t sparse_dim, int64_t nse, int64_t dim,
                                const int64_t *first, const int64_t *positions, int64_t k,
                                const int64_t *hits, int64_t hit_count, int64_t begin,
                                int64_t end) {
  SF_FAIL_IF(first == NULL, SF_ERR_NULL_POINTER);
  SF_FAIL_IF(nse < 0 || nse_out < 0 || sparse_dim < 0 || k < 0, SF_ERR_NEGATIVE_SIZE);
  SF_FAIL_IF(dim < 0 || dim >= sparse_dim || begin < 0 || begin > end || end > nse ||
                 out_begin < 0 || out_begin > out_end || out_end > nse_out ||
                 (hits != NULL && (hit_count < 0 || hit_count > end - begin)),
             SF_ERR_INVALID_ARGUMENT);
  SF_NEED2(indices, sparse_dim, nse);
  SF_NEED2(indices_out, sparse_dim, nse_out);
  SF_NEED(src, nse_out);
  SF_NEED(positions, k);
  /* the items visited: the hits (each in [begin, end)), else every element */
  const int64_t items = hits != NULL ? hit_count : end - begin;
  if (hits != NULL) {
    for (int64_t i = 0; i < items; ++i) {
      SF_FAIL_IF(hits[i] < begin || hits[i] >= end || (i > 0 && hits[i] <= hits[i - 1]),
                 SF_ERR_INVALID_ARGUMENT);
    }
  }
  if (sparse_dim == 2 && dim == 1) {
    return write_matrix_cols(indices_out, src, nse_out, out_begin, out_end, indices, nse, first,
                             positions, hits, begin, items);
  }
  /* A group's pairs (position in the index, first element of the run of its
   * coordinate, run length) are gathered at the group's output columns: the
   * key in row dim, the run's start in src, its length in the last row (runs
   * are single elements when dim is the last sparse dim). Sorted by key,
   * they are expanded from the back (a pair's columns never lie before it),
   * then the other coordinates are copied from the sources. A run's elements
   * are consecutive items (all selected or none). */
  int64_t *key_row = indices_out + dim * nse_out;
  int64_t *len_row = dim + 1 < sparse_dim ? indices_out + (sparse_dim - 1) * nse_out : NULL;
  const int64_t *coord = indices + dim * nse;
#define SF_ITEM(i) (hits != NULL ? hits[i] : begin + (i))
  int64_t out = out_begin;
  for (int64_t g = 0; g < items;) {
    int64_t ge = g + 1;
    while (ge < items && same_group(indices, nse, dim, SF_ITEM(ge - 1), SF_ITEM(ge))) ++ge;
    int64_t pairs = 0, total = 0;
    for (int64_t r = g; r < ge;) {
      const int64_t e = SF_ITEM(r), c = coord[e];
      int64_t re = r + 1;
      while (re < ge && coord[SF_ITEM(re)] == c) ++re;
      const int64_t n = first[c + 1] - first[c];
      /* room for the run's copies (pairs <= total: a pair has >= 1 column) */
      SF_FAIL_IF(n > 0 && re - r > (out_end - out - total) / n, SF_ERR_INVALID_ARGUMENT);
      for (int64_t q = first[c]; q < first[c + 1]; ++q) {
        key_row[out + pairs] = positions[q];
        src[out + pairs] = e;
        if (len_row != NULL) len_row[out + pairs] = re - r;
        ++pairs;
      }
      total += n * (re - r);
      r = re;
    }
    sort_pairs(key_row + out, src + out, len_row != NULL ? len_row + out : NULL, pairs);
    if (len_row != NULL) {
      int64_t at = out + total;
      for (int64_t i = pairs - 1; i >= 0; --i) {
        const int64_t kk = key_row[out + i], s = src[out + i], l = len_row[out + i];
        at -= l;
        for (int64_t t = l - 1; t >= 0; --t) {
          key_row[at + t] = kk;
          src[at + t] = s + t;
        }
      }
    }
    for (int64_t d = 0; d < sparse_dim; ++d) {
      if (d == dim) continue;
      const int64_t *from = indices + d * nse;
      int64_t *to = indices_out + d * nse_out;
      for (int64_t o = out; o < out + total; ++o) to[o] = from[src[o]];
    }
    out += total;
    g = ge;
  }
#undef SF_ITEM
  SF_FAIL_IF(out != out_end, SF_ERR_INVALID_ARGUMENT);
  return SF_OK;
}
