/* generated/core_entries.h -- the C core's entry points: the contract of each,
 * then its prototype (each typed entry once per element type)
 * (written by tools/codegen/gen_native.py from tools/codegen/native.yaml:
 * edit those). */
#ifndef SPARSEFILL_GENERATED_CORE_ENTRIES_H
#define SPARSEFILL_GENERATED_CORE_ENTRIES_H

/* A static, human-readable name for a status ("index out of range"). */
const char *sf_status_string(sf_status status);

/* ---- sizes -------------------------------------------------------------- */

/* *numel = prod(sizes[0..ndim)). Errors: a negative size, int64 overflow.
 * ndim == 0 gives 1. */
sf_status sf_sizes_numel(int64_t *numel, const int64_t *sizes, int64_t ndim);

/* ---- COO ---------------------------------------------------------------- */

/* Validate COO indices [sparse_dim x nse] against sizes[0..sparse_dim).
 * *is_coalesced (may be NULL) = 1 when the linear indices are strictly
 * increasing, else 0. Errors: SF_ERR_INDEX_NEGATIVE / _OUT_OF_RANGE with the
 * first bad element in *site; SF_ERR_NEGATIVE_SIZE; SF_ERR_OVERFLOW when the
 * product of sizes overflows. sparse_dim may be 0: one position, so nse > 1
 * means duplicates (valid, *is_coalesced = 0). */
sf_status sf_coo_check(sf_site *site, int *is_coalesced, const int64_t *indices, int64_t sparse_dim,
                       int64_t nse, const int64_t *sizes);

/* linear[k] = row-major linear index of element k. Errors: SF_ERR_INDEX_*
 * for an index outside its dimension (checked on the way: an unchecked index
 * would silently address another element), SF_ERR_OVERFLOW for sizes. */
sf_status sf_coo_linearize(int64_t *linear, const int64_t *indices, int64_t sparse_dim, int64_t nse,
                           const int64_t *sizes);

/* Inverse of sf_coo_linearize: indices[d * nse + k] from linear[k].
 * Errors: SF_ERR_INDEX_NEGATIVE / _OUT_OF_RANGE for a linear index outside
 * [0, numel), SF_ERR_OVERFLOW for sizes. */
sf_status sf_coo_delinearize(int64_t *indices, const int64_t *linear, int64_t sparse_dim,
                             int64_t nse, const int64_t *sizes);

/* Coalescing plan for nse linear indices (any order, duplicates allowed).
 * Outputs: unique_linear[0..*nse_out) strictly increasing (buffer of nse);
 * segment[k] = slot in unique_linear of input element k (buffer of nse).
 * The caller sums values with segment (index_add). Stable; O(nse) extra
 * memory; linear time when the input is already sorted. unique_linear or
 * segment may be `linear` itself (in place). Errors: SF_ERR_INDEX_NEGATIVE
 * for a negative linear index, SF_ERR_NO_MEMORY. */
sf_status sf_coalesce_plan(int64_t *unique_linear, int64_t *segment, int64_t *nse_out,
                           const int64_t *linear, int64_t nse);

/* ---- CSR ---------------------------------------------------------------- */

/* Validate CSR: crow [nrows + 1], col [nse]. Rules: crow[0] == 0,
 * non-decreasing, crow[nrows] == nse, 0 <= col < ncols, columns strictly
 * increasing within each row. *site: position = row (crow errors) or
 * element (col errors). */
sf_status sf_csr_check(sf_site *site, const int64_t *crow, const int64_t *col, int64_t nrows,
                       int64_t ncols, int64_t nse);

/* rows[k] = row of element k, for k < crow[nrows] (the inverse of the next). */
sf_status sf_csr_rows_from_crow(int64_t *rows, const int64_t *crow, int64_t nrows);

/* The part of sf_csr_rows_from_crow that rows [row_begin, row_end) own
 * (rows[k] = i for k in [crow[i], crow[i + 1])), rows [nse], so that the
 * caller's threads can write disjoint row ranges. Each row's span is
 * checked (in [0, nse], SF_ERR_INVALID_ARGUMENT; SF_ERR_CROW_DECREASING)
 * before anything is written. */
sf_status sf_csr_rows_from_crow_range(int64_t *rows, const int64_t *crow, int64_t nrows,
                                      int64_t nse, int64_t row_begin, int64_t row_end);

/* slot[i] = the element of row qrow[i] whose column is qcol[i], or -1 where
 * the row stores none, columns increasing within rows, k queries:
 * O(k log(longest row)), 16 searches in lockstep. Errors: SF_ERR_INDEX_*
 * for a query out of range; a queried row's span outside [0, crow[nrows]]
 * (SF_ERR_INVALID_ARGUMENT) or decreasing (SF_ERR_CROW_DECREASING). */
sf_status sf_csr_find(int64_t *slot, const int64_t *crow, const int64_t *col, int64_t nrows,
                      int64_t ncols, const int64_t *qrow, const int64_t *qcol, int64_t k);

/* Rows [row_begin, row_end) of a CSR pattern (crow [nrows + 1], col and
 * values [nse]) of rows of length n whose unspecified elements equal
 * fill[r * fill_stride] (fill_stride 0: one fill; 1: one per row):
 * src[r * k .. r * k + k) = the first k slots of the stable sort of the
 * dense row in torch's order (NaN first descending, last ascending, -0.0
 * == 0.0, ties by element number; stored values equal to the
 * fill interleave with its n - stored copies by position), each the
 * element number of a stored value or -1 for a copy of the fill, and
 * pos[...] its column (the copies take the unspecified columns in
 * increasing order). O(row log k + k), no scratch. Errors:
 * SF_ERR_CROW_DECREASING, SF_ERR_INDEX_OUT_OF_RANGE (a row outside
 * [0, nse), a column >= n), SF_ERR_INDEX_NEGATIVE, SF_ERR_COL_UNSORTED,
 * SF_ERR_INVALID_ARGUMENT (k > n, a bad fill_stride or row range). */
sf_status sf_lane_topk_fill_f64(int64_t *src, int64_t *pos, const int64_t *crow, const int64_t *col,
                                const double *values, const double *fill, int64_t fill_stride,
                                int64_t nrows, int64_t n, int64_t nse, int64_t k, int descending,
                                int64_t row_begin, int64_t row_end);
sf_status sf_lane_topk_fill_f32(int64_t *src, int64_t *pos, const int64_t *crow, const int64_t *col,
                                const float *values, const float *fill, int64_t fill_stride,
                                int64_t nrows, int64_t n, int64_t nse, int64_t k, int descending,
                                int64_t row_begin, int64_t row_end);
sf_status sf_lane_topk_fill_i64(int64_t *src, int64_t *pos, const int64_t *crow, const int64_t *col,
                                const int64_t *values, const int64_t *fill, int64_t fill_stride,
                                int64_t nrows, int64_t n, int64_t nse, int64_t k, int descending,
                                int64_t row_begin, int64_t row_end);

/* Rows [row_begin, row_end) of a CSR pattern (crow [nrows + 1], col and
 * values [nse]) of rows of length n whose unspecified elements equal
 * fill[r * fill_stride] (fill_stride 0: one fill; 1: one per row), sorted
 * as the dense row's stable sort in torch's order (sf_lane_topk_fill's):
 * perm[crow[r] .. crow[r + 1]) = the row's element numbers, best first
 * (ties by element number), slot[...] = each one's slot in the sorted
 * dense row (increasing; stored values equal to the fill interleave with
 * its n - stored copies by position), and, unless indices is NULL,
 * indices[r * n .. r * n + n) = the dense row's sort indices (stored
 * columns at their slots, the copies the unspecified columns in
 * increasing order). O(row log row + n) with indices, no scratch.
 * Errors: SF_ERR_CROW_DECREASING, SF_ERR_INDEX_OUT_OF_RANGE (a row
 * outside [0, nse), a column >= n), SF_ERR_INDEX_NEGATIVE,
 * SF_ERR_COL_UNSORTED, SF_ERR_INVALID_ARGUMENT (a bad fill_stride or
 * row range). */
sf_status sf_lane_sort_fill_f64(int64_t *perm, int64_t *slot, int64_t *indices, const int64_t *crow,
                                const int64_t *col, const double *values, const double *fill,
                                int64_t fill_stride, int64_t nrows, int64_t n, int64_t nse,
                                int descending, int64_t row_begin, int64_t row_end);
sf_status sf_lane_sort_fill_f32(int64_t *perm, int64_t *slot, int64_t *indices, const int64_t *crow,
                                const int64_t *col, const float *values, const float *fill,
                                int64_t fill_stride, int64_t nrows, int64_t n, int64_t nse,
                                int descending, int64_t row_begin, int64_t row_end);
sf_status sf_lane_sort_fill_i64(int64_t *perm, int64_t *slot, int64_t *indices, const int64_t *crow,
                                const int64_t *col, const int64_t *values, const int64_t *fill,
                                int64_t fill_stride, int64_t nrows, int64_t n, int64_t nse,
                                int descending, int64_t row_begin, int64_t row_end);

/* crow [nrows + 1] from non-decreasing rows[0..nse), each in [0, nrows).
 * Errors: SF_ERR_INDEX_* for a bad row, SF_ERR_NOT_COALESCED if decreasing. */
sf_status sf_crow_from_rows(int64_t *crow, const int64_t *rows, int64_t nse, int64_t nrows);

/* The part of sf_crow_from_rows that elements [k_begin, k_end) decide (the
 * pointers of the rows that start after them, and with k_begin == 0 those
 * before element 0): ranges that cover [0, nse) write every entry once, so
 * the caller's threads can run them apart. Same errors, for those elements
 * and the one after the range. */
sf_status sf_crow_from_rows_range(int64_t *crow, const int64_t *rows, int64_t nse, int64_t nrows,
                                  int64_t k_begin, int64_t k_end);

/* ---- pattern merges ----------------------------------------------------- */

/* *nse_out = |A u B| for strictly increasing linear_a [nse_a], linear_b
 * [nse_b]. Errors: SF_ERR_NOT_COALESCED if an input is not increasing. */
sf_status sf_union_count(int64_t *nse_out, const int64_t *linear_a, int64_t nse_a,
                         const int64_t *linear_b, int64_t nse_b);

/* The union pattern and where each of its elements comes from, in one pass.
 * Output buffers hold nse_a + nse_b (an upper bound; sf_union_count gives the
 * exact size when memory matters more than the extra pass); the first
 * *nse_out entries are written: linear_out strictly increasing; src_a[k] =
 * position of linear_out[k] in A, or -1 where A has no stored element there
 * (the fill of A stands in); src_b likewise. */
sf_status sf_union_plan(int64_t *nse_out, int64_t *linear_out, int64_t *src_a, int64_t *src_b,
                        const int64_t *linear_a, int64_t nse_a, const int64_t *linear_b,
                        int64_t nse_b);

/* Fill substitution, type-generic: out row k (row_bytes bytes) is a copy of
 * values row src[k], or of fill_row where src[k] < 0. Errors:
 * SF_ERR_INDEX_OUT_OF_RANGE if src[k] >= nse_values. */
sf_status sf_gather_rows_with_fill(void *out, const void *values, int64_t nse_values,
                                   const void *fill_row, const int64_t *src, int64_t n,
                                   size_t row_bytes);

/* ---- the union of two COO patterns, in chunks for the caller's threads ----
 *
 * The same merge as sf_union_plan, on COO index columns (compared
 * lexicographically, which is the linear order: no linearisation) and cut
 * into chunks of the output that threads fill independently: sf_union_cuts
 * splits both operands at common keys, sf_union_count_range validates and
 * counts a chunk, the caller's prefix sum of the counts gives each chunk's
 * first output column, sf_union_write_range writes it. The result does not
 * depend on the number of chunks. */

/* One operand. indices [sparse_dim x nse] row-major; [begin, end) the chunk
 * (from sf_union_cuts). For the write pass, optionally: src [nse of the
 * union] receives each union element's position in this operand or -1;
 * values_out [nse of the union rows of row_bytes] receives its values row,
 * or fill_row where it stores none (values: nse rows of row_bytes). */

/* Chunk boundaries: cut_a, cut_b [parts + 1], non-decreasing, from 0 to
 * nse_a and nse_b; chunk t is A[cut_a[t], cut_a[t+1]) with B[cut_b[t],
 * cut_b[t+1]). For coalesced operands no key lies in two chunks and the
 * chunks hold about equal shares of nse_a + nse_b (merge-path split).
 * Any input gives valid cuts (the count pass then finds what is wrong). */
sf_status sf_union_cuts(int64_t *cut_a, int64_t *cut_b, int64_t parts, const int64_t *indices_a,
                        int64_t nse_a, const int64_t *indices_b, int64_t nse_b, int64_t sparse_dim);

/* Validates the chunk's elements of both operands (each index in [0,
 * sizes[d]), each column greater than the one before it, which may lie in the
 * chunk before: the chunks together check everything) and sets *count to the
 * size of the chunk's union. sizes may be NULL (bounds unchecked). Errors:
 * SF_ERR_INDEX_NEGATIVE / _OUT_OF_RANGE / SF_ERR_NOT_COALESCED with *site
 * (position in its operand, dim, value); SF_ERR_INVALID_ARGUMENT for a range
 * outside [0, nse]. */
sf_status sf_union_count_range(int64_t *count, sf_site *site, const sf_union_side *a,
                               const sf_union_side *b, int64_t sparse_dim, const int64_t *sizes);

/* Writes the chunk's union from output column out_begin on: indices_out
 * [sparse_dim x nse_out], and each side's src and values_out where not NULL.
 * The chunk must have passed sf_union_count_range. Errors:
 * SF_ERR_INVALID_ARGUMENT when the chunk's union would run past nse_out. */
sf_status sf_union_write_range(int64_t *indices_out, int64_t nse_out, int64_t out_begin,
                               const sf_union_side *a, const sf_union_side *b, int64_t sparse_dim);

/* ---- index_select along a sparse dim, in chunks (sf_index.c) ------------
 *
 * Coalesced COO indices [sparse_dim x nse] select along sparse dim `dim` the
 * k positions of a 1-D index (any order, repeats allowed: position p gives
 * output coordinate p, so an element whose coordinate appears twice is
 * copied twice). The result comes out coalesced without a global sort:
 * elements sharing their coordinates before `dim` (a group; contiguous in
 * coalesced order) are written together, each group's output ordered within
 * the group. sf_select_positions maps the index once; sf_select_cuts cuts
 * the elements into chunks at group starts, which the caller's threads
 * check and count (sf_select_count_range), place by a prefix sum and write
 * (sf_select_write_range): the result is the same for any number of chunks. */

/* first [size_dim + 1], positions [k]: the positions p with index[p] == c
 * are positions[first[c] .. first[c + 1]), ascending. Errors:
 * SF_ERR_INDEX_NEGATIVE / _OUT_OF_RANGE for an index value outside
 * [0, size_dim) (site: its position, -1, the value). */
sf_status sf_select_positions(int64_t *first, int64_t *positions, sf_site *site,
                              const int64_t *index, int64_t k, int64_t size_dim);

/* cut [parts + 1]: 0, then for each chunk c the first group start at or
 * after c * nse / parts (non-decreasing), then nse. Errors: parts < 1 or dim
 * outside [0, sparse_dim) give SF_ERR_INVALID_ARGUMENT. */
sf_status sf_select_cuts(int64_t *cut, int64_t parts, const int64_t *indices, int64_t sparse_dim,
                         int64_t nse, int64_t dim);

/* *count = the output elements of input elements [begin, end), which are
 * checked: every coordinate within sizes [sparse_dim] (SF_ERR_INDEX_*), each
 * element after the one before it (SF_ERR_NOT_COALESCED; site: the element,
 * the dim or -1 for a duplicate, the value). SF_ERR_OVERFLOW past int64.
 * hits [end - begin] and *hit_count (both or neither may be NULL) receive
 * the elements whose coordinate the index selects, ascending: the write
 * pass then visits only those. */
sf_status sf_select_count_range(int64_t *count, int64_t *hits, int64_t *hit_count, sf_site *site,
                                const int64_t *indices, int64_t sparse_dim, int64_t nse,
                                const int64_t *sizes, int64_t dim, const int64_t *first,
                                int64_t begin, int64_t end);

/* Writes the output of elements [begin, end) (a chunk from sf_select_cuts
 * that passed sf_select_count_range; first and positions [k] from
 * sf_select_positions; hits [hit_count] from the count pass, or NULL: every
 * element) into columns [out_begin, out_end) (out_end - out_begin: its
 * count; nothing outside is written): indices_out [sparse_dim x nse_out],
 * row `dim` holding the index positions, and src [nse_out], the input
 * element of each output element (values are gathered by the caller).
 * Errors: SF_ERR_INVALID_ARGUMENT when the chunk's output does not fill
 * exactly those columns. */
sf_status sf_select_write_range(int64_t *indices_out, int64_t *src, int64_t nse_out,
                                int64_t out_begin, int64_t out_end, const int64_t *indices,
                                int64_t sparse_dim, int64_t nse, int64_t dim, const int64_t *first,
                                const int64_t *positions, int64_t k, const int64_t *hits,
                                int64_t hit_count, int64_t begin, int64_t end);

/* ---- products (sf_products.c, sf_attention.c) --------------------------- */

/* A (nrows x ncols, CSR: crow [nrows + 1], col/values [nse]) has a fill F
 * that is the sum of a row part and a column part: F[i, j] = rf_i + cf_j,
 * with rf_i = row_fill[i * row_fill_stride] (stride 0: one scalar; NULL: 0)
 * and cf_j = col_fill[j] (NULL: 0). A scalar fill is rf with stride 0, a
 * per-row fill rf with stride 1, a per-column fill cf.
 *
 * Every function below handles rows [row_begin, row_end) only, so the caller
 * can run disjoint ranges on different threads. Index data is checked as it
 * is read: a row pointer outside [0, nse] or decreasing gives
 * SF_ERR_CROW_DECREASING, a column outside [0, ncols) SF_ERR_INDEX_OUT_OF_RANGE. */

/* Fill-aware SpMM, C = A @ B for a dense row-major B (ncols x n, row stride
 * ldb) into C (nrows x n, row stride ldc):
 *   C[i, t] = sum_{p in row i} (values[p] - rf_i - cf_{col[p]}) B[col[p], t]
 *             + rf_i colsum[t] + corr[t]
 * The caller passes colsum = 1^T B and corr = cf^T B (either may be NULL for
 * 0). The correction row is written first and the sparse part accumulated on
 * top: one pass over C. values_absmax: NULL, or where the largest |values[p]|
 * of the range's stored elements goes (NaN if one is NaN, 0 for none): a
 * fact of the fast path's range test (sf_dense_facts), read in this pass (0 when
 * n = 0: nothing is read). */
sf_status sf_csr_spmm_f32(float *c, int64_t ldc, const int64_t *crow, const int64_t *col,
                          const float *values, int64_t nrows, int64_t ncols, int64_t nse,
                          const float *b, int64_t ldb, int64_t n, const float *row_fill,
                          int64_t row_fill_stride, const float *col_fill, const float *colsum,
                          const float *corr, int64_t row_begin, int64_t row_end,
                          float *values_absmax);
sf_status sf_csr_spmm_f64(double *c, int64_t ldc, const int64_t *crow, const int64_t *col,
                          const double *values, int64_t nrows, int64_t ncols, int64_t nse,
                          const double *b, int64_t ldb, int64_t n, const double *row_fill,
                          int64_t row_fill_stride, const double *col_fill, const double *colsum,
                          const double *corr, int64_t row_begin, int64_t row_end,
                          double *values_absmax);

/* Fill-aware SpMV, y = A @ x with strides incx, incy; xsum = sum(x) and
 * corr = cf^T x are the scalar counterparts of colsum and corr above;
 * values_absmax as above. */
sf_status sf_csr_spmv_f32(float *y, int64_t incy, const int64_t *crow, const int64_t *col,
                          const float *values, int64_t nrows, int64_t ncols, int64_t nse,
                          const float *x, int64_t incx, const float *row_fill,
                          int64_t row_fill_stride, const float *col_fill, float xsum, float corr,
                          int64_t row_begin, int64_t row_end, float *values_absmax);
sf_status sf_csr_spmv_f64(double *y, int64_t incy, const int64_t *crow, const int64_t *col,
                          const double *values, int64_t nrows, int64_t ncols, int64_t nse,
                          const double *x, int64_t incx, const double *row_fill,
                          int64_t row_fill_stride, const double *col_fill, double xsum, double corr,
                          int64_t row_begin, int64_t row_end, double *values_absmax);

/* The range facts of a dense block x (rows x cols, row stride ld; cols = 1:
 * a vector at stride ld) in one read: *absmax = max |x| (NaN if x holds a
 * NaN, 0 when empty) and, if sum is not NULL, *sum = the sum of its
 * elements (in double lanes, in a fixed order). The products' fast path is
 * exact when k max|B| (max|v| + 2 max|f|) stays below a quarter of the
 * dtype's largest value (docs/design.md#range-check); the caller takes max|B| and
 * max|f| from here, max|v| from the product's own pass. */
sf_status sf_dense_facts_f32(float *absmax, float *sum, const float *x, int64_t rows, int64_t cols,
                             int64_t ld);
sf_status sf_dense_facts_f64(double *absmax, double *sum, const double *x, int64_t rows,
                             int64_t cols, int64_t ld);

/* The cancellation fact of a product's correction: for a dense block x
 * (rows x cols, row stride ld; cols = 1: a vector at stride ld) and an
 * optional per-row scale s (NULL: 1), the products p_jt = |s_j x_jt| in
 * double, and *spread = the smallest, over the columns t with a non-zero
 * finite product, of sum_j p_jt / max_j p_jt (finite products only; +inf
 * when no column has one). col_max and col_sum (cols doubles each, the
 * caller's) receive each column's maximum and scaled sum. A row of A with
 * r stored elements has at most r max_j p_jt of the fill's products on its
 * stored positions, the part a product's correction subtracts again
 * (docs/design.md#cancellation). */
sf_status sf_dense_spread_f32(double *spread, double *col_max, double *col_sum, const float *x,
                              int64_t rows, int64_t cols, int64_t ld, const float *row_scale);
sf_status sf_dense_spread_f64(double *spread, double *col_max, double *col_sum, const double *x,
                              int64_t rows, int64_t cols, int64_t ld, const double *row_scale);

/* SDDMM on A's pattern: out[p] = dot(X[i, :], Y[col[p], :]) for the stored
 * element p of row i; X (nrows x n, row stride ldx), Y (ncols x n, ldy).
 * With X = dL/dC and Y = B this is the values' gradient of A @ B. */
sf_status sf_csr_sddmm_f32(float *out, const int64_t *crow, const int64_t *col, int64_t nrows,
                           int64_t ncols, int64_t nse, const float *x, int64_t ldx, const float *y,
                           int64_t ldy, int64_t n, int64_t row_begin, int64_t row_end);
sf_status sf_csr_sddmm_f64(double *out, const int64_t *crow, const int64_t *col, int64_t nrows,
                           int64_t ncols, int64_t nse, const double *x, int64_t ldx,
                           const double *y, int64_t ldy, int64_t n, int64_t row_begin,
                           int64_t row_end);

/* SpGEMM of two fill-0 CSR operands, A (m x k) and B (k x n), in one pass
 * over the products. Bounds: row_bound[i] = the number of products of row
 * i (the lengths of B's rows that A's row i names), at least the stored
 * elements of row i of A @ B; checks A's rows and columns and B's row
 * pointers. */
sf_status sf_csr_spgemm_bounds(int64_t *row_bound, const int64_t *crow_a, const int64_t *col_a,
                               int64_t m, int64_t k, int64_t nse_a, const int64_t *crow_b,
                               int64_t nse_b, int64_t row_begin, int64_t row_end);

/* Rows: appends rows row_begin, row_begin + 1, ... of A @ B (the pattern's
 * elements, numerically cancelling ones kept; columns sorted within each
 * row) to col_out / val_out (capacity elements) from *used on, sets
 * row_nse[i] and advances *used, while a row's bound fits in what is left;
 * stops before the first row that does not (*next_row = it; row_end when
 * all are done: the caller grows the buffer and goes on from there). A row
 * with more elements than its bound gives SF_ERR_INVALID_ARGUMENT (never a
 * write past the buffer). acc (n values) and bits ((n + 63) / 64 words) are
 * per-thread scratch. */
sf_status sf_csr_spgemm_rows_f32(int64_t *col_out, float *val_out, int64_t capacity, int64_t *used,
                                 int64_t *row_nse, int64_t *next_row, const int64_t *row_bound,
                                 const int64_t *crow_a, const int64_t *col_a, const float *val_a,
                                 int64_t m, int64_t k, int64_t nse_a, const int64_t *crow_b,
                                 const int64_t *col_b, const float *val_b, int64_t n, int64_t nse_b,
                                 float *acc, uint64_t *bits, int64_t row_begin, int64_t row_end);
sf_status sf_csr_spgemm_rows_f64(int64_t *col_out, double *val_out, int64_t capacity, int64_t *used,
                                 int64_t *row_nse, int64_t *next_row, const int64_t *row_bound,
                                 const int64_t *crow_a, const int64_t *col_a, const double *val_a,
                                 int64_t m, int64_t k, int64_t nse_a, const int64_t *crow_b,
                                 const int64_t *col_b, const double *val_b, int64_t n,
                                 int64_t nse_b, double *acc, uint64_t *bits, int64_t row_begin,
                                 int64_t row_end);

/* SDDMM with two sparse factors, for the SpGEMM backward: for the stored
 * element p at (i, j) of pattern P (nrows x ncols),
 *   out[p] = sum_t X[i, t] S[j, t],
 * X (nrows x n) and S (ncols x n) both CSR (X may hold duplicates: they add).
 * acc: n values of per-thread scratch. */
sf_status sf_csr_sddmm_sparse_f32(float *out, const int64_t *crow_p, const int64_t *col_p,
                                  int64_t nrows, int64_t ncols, int64_t nse_p,
                                  const int64_t *crow_x, const int64_t *col_x, const float *val_x,
                                  int64_t nse_x, const int64_t *crow_s, const int64_t *col_s,
                                  const float *val_s, int64_t nse_s, int64_t n, float *acc,
                                  int64_t row_begin, int64_t row_end);
sf_status sf_csr_sddmm_sparse_f64(double *out, const int64_t *crow_p, const int64_t *col_p,
                                  int64_t nrows, int64_t ncols, int64_t nse_p,
                                  const int64_t *crow_x, const int64_t *col_x, const double *val_x,
                                  int64_t nse_x, const int64_t *crow_s, const int64_t *col_s,
                                  const double *val_s, int64_t nse_s, int64_t n, double *acc,
                                  int64_t row_begin, int64_t row_end);

/* Fused sparse attention on the pattern (crow, col) of nrows x ncols, shared
 * by `nbatch` batches (heads): batch b's query rows are the rows b * nrows ..
 * of q, its key and value rows b * ncols .. of k and v. For the stored
 * element p of row i of batch b the score is
 *     s_p = scale * dot(Q_b[i, :], K_b[col[p], :]) + (bias ? bias[b * bias_stride + p] : 0)
 * (bias_stride 0: one bias for every batch, nse: one per batch) and, with
 * the softmax over the row's stored scores,
 *     out[r, :] = sum_p softmax(s)_p V_b[col[p], :],  lse[r] = log sum_p exp(s_p)
 * for r = b * nrows + i. Rows [row_begin, row_end) of the nbatch * nrows.
 * A row with nothing stored, or only -inf scores, gets out = 0 and lse = -inf
 * (torch's SDPA gives such a row weights 0); a nan or +inf score makes the
 * row nan, as the dense softmax does.
 * q (nbatch * nrows x e, ldq), k (nbatch * ncols x e, ldk), v (nbatch *
 * ncols x dv, ldv), out (nbatch * nrows x dv, ldo), lse [nbatch * nrows].
 * One pass per row with an online softmax: O(nse (e + dv)) time per batch,
 * no scratch, no score stored. */
sf_status sf_csr_attention_f32(float *out, int64_t ldo, float *lse, const int64_t *crow,
                               const int64_t *col, const float *bias, int64_t bias_stride,
                               int64_t nrows, int64_t ncols, int64_t nse, int64_t nbatch,
                               const float *q, int64_t ldq, const float *k, int64_t ldk,
                               const float *v, int64_t ldv, int64_t e, int64_t dv, float scale,
                               int64_t row_begin, int64_t row_end);
sf_status sf_csr_attention_f64(double *out, int64_t ldo, double *lse, const int64_t *crow,
                               const int64_t *col, const double *bias, int64_t bias_stride,
                               int64_t nrows, int64_t ncols, int64_t nse, int64_t nbatch,
                               const double *q, int64_t ldq, const double *k, int64_t ldk,
                               const double *v, int64_t ldv, int64_t e, int64_t dv, double scale,
                               int64_t row_begin, int64_t row_end);

/* The backward of sf_csr_attention (same operands and batches), given the
 * forward's lse, the output gradient g (nbatch * nrows x dv, ldg) and
 * optionally lse's gradient g_lse [nbatch * nrows], in two passes:
 *
 * Rows (rows [row_begin, row_end) of nbatch * nrows, as the forward): with
 * the weights w_p = exp(s_p - lse[r]) (0 when lse[r] = -inf: a row of
 * weights 0), dw_p = dot(g[r, :], V_b[col[p], :]) and D_r = sum_p w_p dw_p,
 *     ds[b * nse + p] = w_p (dw_p - D_r + g_lse[r]),   w[b * nse + p] = w_p,
 *     dq[r, :] = scale * sum_p ds_p K_b[col[p], :]   (dq: ldq_out).
 * ds is the gradient of the scores, i.e. of the bias.
 *
 * Columns (columns [col_begin, col_end) of nbatch * ncols), on the
 * transposed pattern (crow_t [ncols + 1], row_t, perm: sf_csr_transpose) and
 * the rows pass's ds and w: for column j of batch b, c = b * ncols + j,
 *     dk[c, :] = scale * sum_t ds[b * nse + perm[t]] Q_b[row_t[t], :],
 *     dv[c, :] = sum_t w[b * nse + perm[t]] g[b * nrows + row_t[t], :].
 *
 * Every output row is written by one call, its sum in a fixed order: the
 * result does not depend on how the ranges are split over threads. O(nse
 * (e + dv)) time per batch, no scratch beyond ds and w. */
sf_status sf_csr_attention_backward_rows_f32(float *dq, int64_t lddq, float *ds, float *w,
                                             const int64_t *crow, const int64_t *col,
                                             const float *bias, int64_t bias_stride, int64_t nrows,
                                             int64_t ncols, int64_t nse, int64_t nbatch,
                                             const float *q, int64_t ldq, const float *k,
                                             int64_t ldk, const float *v, int64_t ldv,
                                             const float *lse, const float *g, int64_t ldg,
                                             const float *g_lse, int64_t e, int64_t dv, float scale,
                                             int64_t row_begin, int64_t row_end);
sf_status sf_csr_attention_backward_rows_f64(double *dq, int64_t lddq, double *ds, double *w,
                                             const int64_t *crow, const int64_t *col,
                                             const double *bias, int64_t bias_stride, int64_t nrows,
                                             int64_t ncols, int64_t nse, int64_t nbatch,
                                             const double *q, int64_t ldq, const double *k,
                                             int64_t ldk, const double *v, int64_t ldv,
                                             const double *lse, const double *g, int64_t ldg,
                                             const double *g_lse, int64_t e, int64_t dv,
                                             double scale, int64_t row_begin, int64_t row_end);

sf_status sf_csr_attention_backward_cols_f32(float *dk, int64_t lddk, float *dv_out, int64_t lddv,
                                             const int64_t *crow_t, const int64_t *row_t,
                                             const int64_t *perm, int64_t nrows, int64_t ncols,
                                             int64_t nse, int64_t nbatch, const float *ds,
                                             const float *w, const float *q, int64_t ldq,
                                             const float *g, int64_t ldg, int64_t e, int64_t dv,
                                             float scale, int64_t col_begin, int64_t col_end);
sf_status sf_csr_attention_backward_cols_f64(double *dk, int64_t lddk, double *dv_out, int64_t lddv,
                                             const int64_t *crow_t, const int64_t *row_t,
                                             const int64_t *perm, int64_t nrows, int64_t ncols,
                                             int64_t nse, int64_t nbatch, const double *ds,
                                             const double *w, const double *q, int64_t ldq,
                                             const double *g, int64_t ldg, int64_t e, int64_t dv,
                                             double scale, int64_t col_begin, int64_t col_end);

/* Transpose of a CSR pattern (nrows x ncols) into crow_t [ncols + 1] and
 * col_t [nse]; perm[q] = position in the input of the transposed element q
 * (values_t = values[perm]). Stable counting sort: O(nse + ncols),
 * single-threaded; the result's columns are increasing within each row. */
sf_status sf_csr_transpose(int64_t *crow_t, int64_t *col_t, int64_t *perm, const int64_t *crow,
                           const int64_t *col, int64_t nrows, int64_t ncols, int64_t nse);

/* ---- semiring products of indefinite operands (sf_semiring.c) ----------- */

/* The graph domain (RFC.md#indefinite-fill): an absent element makes no
 * term; `monoid` (sf_monoid) folds the present terms op(l, r) (sf_binop)
 * only, in ACC (integers wrap as torch's do); an output with no term has
 * arg -1 (absent) and out 0, except in the masked products (unspecified; their
 * ops compact it away). min and max propagate NaN; arg
 * is the position in A's values of the output's first present term (the
 * smallest k, the one any takes): presence, not an argmin (min and max run
 * in lanes of selects, which keep no position).
 * SF_ERR_INVALID_ARGUMENT for an unknown code, or div/rdiv on i64. */

/* Rows [row_begin, row_end) of A (op) x (pull): out[i] = monoid over p in
 * row i with x[col[p]] present (x_present NULL: every element) of
 * op(values[p], x[col[p]]). Index data checked as read
 * (SF_ERR_CROW_DECREASING, SF_ERR_INDEX_OUT_OF_RANGE). */
sf_status sf_csr_semiring_mv_f32(double *out, int64_t *arg, const int64_t *crow, const int64_t *col,
                                 const float *values, int64_t nrows, int64_t ncols, int64_t nse,
                                 const float *x, const uint8_t *x_present, int monoid, int op,
                                 int64_t row_begin, int64_t row_end);
sf_status sf_csr_semiring_mv_f64(double *out, int64_t *arg, const int64_t *crow, const int64_t *col,
                                 const double *values, int64_t nrows, int64_t ncols, int64_t nse,
                                 const double *x, const uint8_t *x_present, int monoid, int op,
                                 int64_t row_begin, int64_t row_end);
sf_status sf_csr_semiring_mv_i64(int64_t *out, int64_t *arg, const int64_t *crow,
                                 const int64_t *col, const int64_t *values, int64_t nrows,
                                 int64_t ncols, int64_t nse, const int64_t *x,
                                 const uint8_t *x_present, int monoid, int op, int64_t row_begin,
                                 int64_t row_end);

/* u (op) A (push): out[j] = monoid over the stored u[k] (u_keys strictly
 * increasing: SF_ERR_NOT_COALESCED otherwise; below nrows) and p in row k
 * with col[p] = j of op(u[k], values[p]); arg [ncols] is set to -1 first.
 * Single-threaded, O(ncols + the terms). */
sf_status sf_csr_semiring_vm_f32(double *out, int64_t *arg, const int64_t *crow, const int64_t *col,
                                 const float *values, int64_t nrows, int64_t ncols, int64_t nse,
                                 const int64_t *u_keys, const float *u_values, int64_t u_nse,
                                 int monoid, int op);
sf_status sf_csr_semiring_vm_f64(double *out, int64_t *arg, const int64_t *crow, const int64_t *col,
                                 const double *values, int64_t nrows, int64_t ncols, int64_t nse,
                                 const int64_t *u_keys, const double *u_values, int64_t u_nse,
                                 int monoid, int op);
sf_status sf_csr_semiring_vm_i64(int64_t *out, int64_t *arg, const int64_t *crow,
                                 const int64_t *col, const int64_t *values, int64_t nrows,
                                 int64_t ncols, int64_t nse, const int64_t *u_keys,
                                 const int64_t *u_values, int64_t u_nse, int monoid, int op);

/* The masked product by dots, mask rows [row_begin, row_end): for the
 * stored q = (i, j) of the mask M (m x n, CSR), out[q] = monoid over the k
 * in both row i of A and row j of B^T (columns sorted within rows; B^T is
 * n rows of CSR) of op(val_a, val_bt); arg[q] = A's position of the
 * first common k, -1 when none is. Rows are walked together, or a
 * much shorter one's columns looked up by binary search. Checks row spans
 * and the mask's columns (below n); A's and B^T's columns are only
 * compared with each other, never read through. */
sf_status sf_csr_semiring_masked_f32(double *out, int64_t *arg, const int64_t *crow_m,
                                     const int64_t *col_m, int64_t nse_m, const int64_t *crow_a,
                                     const int64_t *col_a, const float *val_a, int64_t nse_a,
                                     const int64_t *crow_bt, const int64_t *col_bt,
                                     const float *val_bt, int64_t nse_bt, int64_t m, int64_t n,
                                     int monoid, int op, int64_t row_begin, int64_t row_end);
sf_status sf_csr_semiring_masked_f64(double *out, int64_t *arg, const int64_t *crow_m,
                                     const int64_t *col_m, int64_t nse_m, const int64_t *crow_a,
                                     const int64_t *col_a, const double *val_a, int64_t nse_a,
                                     const int64_t *crow_bt, const int64_t *col_bt,
                                     const double *val_bt, int64_t nse_bt, int64_t m, int64_t n,
                                     int monoid, int op, int64_t row_begin, int64_t row_end);
sf_status sf_csr_semiring_masked_i64(int64_t *out, int64_t *arg, const int64_t *crow_m,
                                     const int64_t *col_m, int64_t nse_m, const int64_t *crow_a,
                                     const int64_t *col_a, const int64_t *val_a, int64_t nse_a,
                                     const int64_t *crow_bt, const int64_t *col_bt,
                                     const int64_t *val_bt, int64_t nse_bt, int64_t m, int64_t n,
                                     int monoid, int op, int64_t row_begin, int64_t row_end);

/* The same product by rows (Gustavson): out and arg per mask element as
 * sf_csr_semiring_masked_* gives them, with B (k x n, CSR) itself: row
 * i's mask elements are marked in mark (n entries, all -1 on entry and
 * again on return: per-thread scratch), then every A[i, k] meets row k of
 * B and a term lands where its column is marked. O(the terms of the
 * masked rows); checks spans and columns (A's below k, B's and M's below
 * n). */
sf_status sf_csr_semiring_masked_rows_f32(double *out, int64_t *arg, int64_t *mark,
                                          const int64_t *crow_m, const int64_t *col_m,
                                          int64_t nse_m, const int64_t *crow_a,
                                          const int64_t *col_a, const float *val_a, int64_t nse_a,
                                          const int64_t *crow_b, const int64_t *col_b,
                                          const float *val_b, int64_t nse_b, int64_t m, int64_t k,
                                          int64_t n, int monoid, int op, int64_t row_begin,
                                          int64_t row_end);
sf_status sf_csr_semiring_masked_rows_f64(double *out, int64_t *arg, int64_t *mark,
                                          const int64_t *crow_m, const int64_t *col_m,
                                          int64_t nse_m, const int64_t *crow_a,
                                          const int64_t *col_a, const double *val_a, int64_t nse_a,
                                          const int64_t *crow_b, const int64_t *col_b,
                                          const double *val_b, int64_t nse_b, int64_t m, int64_t k,
                                          int64_t n, int monoid, int op, int64_t row_begin,
                                          int64_t row_end);
sf_status sf_csr_semiring_masked_rows_i64(int64_t *out, int64_t *arg, int64_t *mark,
                                          const int64_t *crow_m, const int64_t *col_m,
                                          int64_t nse_m, const int64_t *crow_a,
                                          const int64_t *col_a, const int64_t *val_a, int64_t nse_a,
                                          const int64_t *crow_b, const int64_t *col_b,
                                          const int64_t *val_b, int64_t nse_b, int64_t m, int64_t k,
                                          int64_t n, int monoid, int op, int64_t row_begin,
                                          int64_t row_end);

/* The union of two CSR patterns of one shape (nrows x ncols), first pass:
 * row_nse[i] = the union's elements in row i, for rows [row_begin,
 * row_end); checks both operands' row spans (SF_ERR_CROW_DECREASING) and
 * columns (SF_ERR_INDEX_OUT_OF_RANGE; SF_ERR_COL_UNSORTED unless strictly
 * increasing within a row), which the write pass relies on. marks: NULL
 * (each row by a merge) or ceil(ncols / 64) words, all zero on entry and
 * again on return, errors included (per-thread scratch: each row by
 * marking A's columns and looking B's up, faster where ncols is small). */
sf_status sf_csr_union_row_nse(int64_t *row_nse, uint64_t *marks, const int64_t *crow_a,
                               const int64_t *col_a, int64_t nse_a, const int64_t *crow_b,
                               const int64_t *col_b, int64_t nse_b, int64_t nrows, int64_t ncols,
                               int64_t row_begin, int64_t row_end);

/* The union's second pass, rows [row_begin, row_end), into crow_out (the
 * running sum of sf_csr_union_row_nse's counts; nse_out elements):
 * columns in order, and values op(a, b) (sf_binop) where both are present;
 * where one is, its value (a_default = b_default = NULL: GraphBLAS's
 * ewise_add) or op with the other's default (ewise_union). A row of
 * crow_out that disagrees with the operands gives SF_ERR_INVALID_ARGUMENT
 * (never a write outside it). */
sf_status sf_csr_ewise_union_f32(int64_t *col_out, float *val_out, const int64_t *crow_out,
                                 int64_t nse_out, const int64_t *crow_a, const int64_t *col_a,
                                 const float *val_a, int64_t nse_a, const int64_t *crow_b,
                                 const int64_t *col_b, const float *val_b, int64_t nse_b,
                                 int64_t nrows, int op, const float *a_default,
                                 const float *b_default, int64_t row_begin, int64_t row_end);
sf_status sf_csr_ewise_union_f64(int64_t *col_out, double *val_out, const int64_t *crow_out,
                                 int64_t nse_out, const int64_t *crow_a, const int64_t *col_a,
                                 const double *val_a, int64_t nse_a, const int64_t *crow_b,
                                 const int64_t *col_b, const double *val_b, int64_t nse_b,
                                 int64_t nrows, int op, const double *a_default,
                                 const double *b_default, int64_t row_begin, int64_t row_end);
sf_status sf_csr_ewise_union_i64(int64_t *col_out, int64_t *val_out, const int64_t *crow_out,
                                 int64_t nse_out, const int64_t *crow_a, const int64_t *col_a,
                                 const int64_t *val_a, int64_t nse_a, const int64_t *crow_b,
                                 const int64_t *col_b, const int64_t *val_b, int64_t nse_b,
                                 int64_t nrows, int op, const int64_t *a_default,
                                 const int64_t *b_default, int64_t row_begin, int64_t row_end);

/* ---- BSR products (sf_bsr.c) -------------------------------------------- */

/* Fill-aware BSR SpMM, C = A @ B. A is (nbrows r) x (nbcols bc) in blocks of
 * r x bc: crow [nbrows + 1] and col [nblocks] the block pattern (columns in
 * [0, nbcols), any order within a block row), values [nblocks x r x bc]
 * row-major, every element of a stored block specified; a scalar fill
 * *fill (NULL: 0) everywhere else. B (nbcols bc x n, row stride ldb), C
 * (nbrows r x n, row stride ldc):
 *   C[I r + u, t] = f colsum[t] + sum_{p in block row I} sum_v
 *                   (values[p, u, v] - f) B[col[p] bc + v, t]
 * where the caller passes colsum = 1^T B (NULL: 0). Exact only where f and
 * colsum are finite (otherwise inf - inf may arise where the dense product
 * has none: the caller takes another route). Handles block rows
 * [brow_begin, brow_end) only (the caller's threads split them); each
 * output element is summed in one fixed order whatever the split. Errors:
 * SF_ERR_NEGATIVE_SIZE; SF_ERR_INVALID_ARGUMENT for a bad range or ld*;
 * SF_ERR_CROW_DECREASING for a block row span outside [0, nblocks] or
 * decreasing; SF_ERR_INDEX_OUT_OF_RANGE for a block column outside
 * [0, nbcols). */
sf_status sf_bsr_spmm_f32(float *c, int64_t ldc, const int64_t *crow, const int64_t *col,
                          const float *values, int64_t nbrows, int64_t nbcols, int64_t nblocks,
                          int64_t r, int64_t bc, const float *b, int64_t ldb, int64_t n,
                          const float *fill, const float *colsum, int64_t brow_begin,
                          int64_t brow_end);
sf_status sf_bsr_spmm_f64(double *c, int64_t ldc, const int64_t *crow, const int64_t *col,
                          const double *values, int64_t nbrows, int64_t nbcols, int64_t nblocks,
                          int64_t r, int64_t bc, const double *b, int64_t ldb, int64_t n,
                          const double *fill, const double *colsum, int64_t brow_begin,
                          int64_t brow_end);

/* ---- softmax and reductions (sf_reduce.c, sf_slot.c) -------------------- */

/* Segments for a reduction (RFC.md#reductions-and-softmax). A segment s is one slice: the stored
 * rows values[seg_ptr[s] .. seg_ptr[s+1]) -- each row `w` wide (the flattened
 * dense part, row-major [nse x w]) -- plus u_s = n - (seg_ptr[s+1] -
 * seg_ptr[s]) unspecified elements equal to the segment's fill row
 * fill[s * fill_stride .. + w) (fill_stride 0: one fill row for all, w: one
 * per segment). n is the slice length, the same for every segment.
 * Each function handles segments [seg_begin, seg_end) and writes only their
 * outputs (rows s * w of per-segment outputs, their own stored rows of
 * per-element outputs), so the caller may split segment ranges across
 * threads. Errors: SF_ERR_NULL_POINTER, SF_ERR_NEGATIVE_SIZE,
 * SF_ERR_NOT_COALESCED if seg_ptr decreases, SF_ERR_INVALID_ARGUMENT if a
 * segment stores more than n rows. Deterministic. */

/* Counting sort of segment ids: perm [nse] lists the elements segment by
 * segment (stable: original order within a segment); seg_ptr [nseg + 1].
 * Errors: SF_ERR_INDEX_OUT_OF_RANGE for an id outside [0, nseg). */
sf_status sf_segment_sort(int64_t *perm, int64_t *seg_ptr, const int64_t *segment, int64_t nse,
                          int64_t nseg);

/* out [nseg x w] (overwritten, rows seg_begin..seg_end) = sum over the slice,
 * the fill counted u_s times (not at all when u_s == 0, so a fully stored
 * slice never sees an infinite fill). Floats accumulate in double. */
sf_status sf_seg_sum_f64(double *out, const double *values, const double *fill, int64_t fill_stride,
                         const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end, int64_t w,
                         int64_t n);
sf_status sf_seg_sum_f32(float *out, const float *values, const float *fill, int64_t fill_stride,
                         const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end, int64_t w,
                         int64_t n);
sf_status sf_seg_sum_i64(int64_t *out, const int64_t *values, const int64_t *fill,
                         int64_t fill_stride, const int64_t *seg_ptr, int64_t seg_begin,
                         int64_t seg_end, int64_t w, int64_t n);

/* out [nseg x w] = product over the slice: prod(values) * fill^u_s. */
sf_status sf_seg_prod_f64(double *out, const double *values, const double *fill,
                          int64_t fill_stride, const int64_t *seg_ptr, int64_t seg_begin,
                          int64_t seg_end, int64_t w, int64_t n);
sf_status sf_seg_prod_f32(float *out, const float *values, const float *fill, int64_t fill_stride,
                          const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end, int64_t w,
                          int64_t n);

/* Max (is_min = 0) or min over the slice, NaN propagating as in torch.
 * out [nseg x w] the value; winner [nseg x w] (may be NULL) the stored row
 * that gives it, or -1 when an unspecified element does; index [nseg x w]
 * (may be NULL) its coordinate along the reduced dim. `coord` [nse] (may be
 * NULL when index is NULL) gives each stored row's coordinate along that
 * dim, strictly increasing within a segment; ties go to the first
 * occurrence, unspecified positions included (the first coordinate missing
 * from the segment). Without coord, a tie between stored and fill goes to
 * the stored row. A slice with n == 0 yields winner -1 and an undefined
 * value (the caller refuses empty slices, as torch does). */
sf_status sf_seg_max_f64(double *out, int64_t *winner, int64_t *index, const double *values,
                         const double *fill, int64_t fill_stride, const int64_t *coord,
                         const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end, int64_t w,
                         int64_t n, int is_min);
sf_status sf_seg_max_f32(float *out, int64_t *winner, int64_t *index, const float *values,
                         const float *fill, int64_t fill_stride, const int64_t *coord,
                         const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end, int64_t w,
                         int64_t n, int is_min);
sf_status sf_seg_max_i64(int64_t *out, int64_t *winner, int64_t *index, const int64_t *values,
                         const int64_t *fill, int64_t fill_stride, const int64_t *coord,
                         const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end, int64_t w,
                         int64_t n, int is_min);

/* Softmax (log_softmax = 0) or log_softmax along each slice, per column:
 * m = max(values, fill if u_s > 0), z = sum(exp(values - m)) + u_s exp(fill - m).
 * out_values [nse x w] for the stored rows; out_fill [nseg x w] the value of
 * the slice's unspecified elements, 0 when u_s == 0 (it covers nothing).
 * An all -inf slice gives NaN, as the dense softmax does. */
sf_status sf_seg_softmax_f64(double *out_values, double *out_fill, const double *values,
                             const double *fill, int64_t fill_stride, const int64_t *seg_ptr,
                             int64_t seg_begin, int64_t seg_end, int64_t w, int64_t n,
                             int log_softmax);
sf_status sf_seg_softmax_f32(float *out_values, float *out_fill, const float *values,
                             const float *fill, int64_t fill_stride, const int64_t *seg_ptr,
                             int64_t seg_begin, int64_t seg_end, int64_t w, int64_t n,
                             int log_softmax);

/* Backward of sf_seg_softmax_*: from its outputs (out_values, out_fill) and
 * their gradients (g_values [nse x w]; g_fill [nseg x w], the summed gradient
 * of the u_s unspecified outputs), grad_values [nse x w] and grad_fill
 * [nseg x w] (the summed gradient of the u_s unspecified inputs; 0 when
 * u_s == 0). */
sf_status sf_seg_softmax_backward_f64(double *grad_values, double *grad_fill,
                                      const double *out_values, const double *out_fill,
                                      const double *g_values, const double *g_fill,
                                      const int64_t *seg_ptr, int64_t seg_begin, int64_t seg_end,
                                      int64_t w, int64_t n, int log_softmax);
sf_status sf_seg_softmax_backward_f32(float *grad_values, float *grad_fill, const float *out_values,
                                      const float *out_fill, const float *g_values,
                                      const float *g_fill, const int64_t *seg_ptr,
                                      int64_t seg_begin, int64_t seg_end, int64_t w, int64_t n,
                                      int log_softmax);

/* Reductions by output slot (RFC.md#reductions-and-softmax): for reducing dims that the stored
 * order does not group (sum along dim 0 of a matrix), no reordering of the
 * stored elements. Stored row k (values[k*w .. k*w+w)) belongs to slot
 * slot[k] in [0, nslots); a slot is one slice of n elements, the ones not
 * stored equal to the fill row `fill` [w] (one fill for every slot).
 * Two phases, so that a caller may thread them without changing the result:
 *  - sf_slot_partial_*: one partial of the stored rows [k_begin, k_end):
 *    acc [nslots x (w + 1)] (overwritten) in the accumulator type -- double
 *    for f64/f32, int64 for i64 --, per slot w accumulators and then its
 *    stored row count;
 *  - sf_slot_finish_*: for slots [s_begin, s_end), folds the nparts
 *    partials (part p at acc + p*nslots*(w + 1)) in part order, then the
 *    u = n - count unspecified elements' fill, only where u > 0 (an infinite
 *    or NaN fill never leaks into a full slice: no inf - inf, no 0 * inf);
 *    out [nslots x w], total [nslots] = stored rows per slot.
 * The result depends on the partition into partials only, never on which
 * thread ran which. op: SF_SLOT_SUM, SF_SLOT_PROD (the fill enters as
 * fill^u), SF_SLOT_MAX, SF_SLOT_MIN (NaN wins, as torch's amax); i64 has no
 * prod. Errors: SF_ERR_NULL_POINTER, SF_ERR_NEGATIVE_SIZE,
 * SF_ERR_INDEX_OUT_OF_RANGE (a slot outside [0, nslots)),
 * SF_ERR_NOT_COALESCED (a slot holds more than n rows: duplicates),
 * SF_ERR_INVALID_ARGUMENT (an unknown op, s_end > nslots). */

sf_status sf_slot_partial_f64(double *acc, const double *values, const int64_t *slot,
                              int64_t k_begin, int64_t k_end, int64_t nslots, int64_t w, int op);
sf_status sf_slot_partial_f32(double *acc, const float *values, const int64_t *slot,
                              int64_t k_begin, int64_t k_end, int64_t nslots, int64_t w, int op);
sf_status sf_slot_partial_i64(int64_t *acc, const int64_t *values, const int64_t *slot,
                              int64_t k_begin, int64_t k_end, int64_t nslots, int64_t w, int op);

sf_status sf_slot_finish_f64(double *out, int64_t *total, const double *acc, int64_t nparts,
                             const double *fill, int64_t s_begin, int64_t s_end, int64_t nslots,
                             int64_t w, int64_t n, int op);
sf_status sf_slot_finish_f32(float *out, int64_t *total, const double *acc, int64_t nparts,
                             const float *fill, int64_t s_begin, int64_t s_end, int64_t nslots,
                             int64_t w, int64_t n, int op);
sf_status sf_slot_finish_i64(int64_t *out, int64_t *total, const int64_t *acc, int64_t nparts,
                             const int64_t *fill, int64_t s_begin, int64_t s_end, int64_t nslots,
                             int64_t w, int64_t n, int op);

/* The same reduction when the slots are sorted (non-decreasing: the kept
 * dims lead), in one phase: every run of equal slots reduced whole, so the
 * result is the same for any cut into ranges. Handles the runs that start in
 * [k_begin, k_end) (a run may go on past k_end, up to nse) and the empty
 * slots before each; the range with k_end == nse also the empty slots after
 * the last run. Writes out [nslots x w] and total [nslots] as
 * sf_slot_finish_* would (an empty slot: the reduction of n fills).
 * Errors as sf_slot_partial_*; SF_ERR_NOT_COALESCED also for a slot below
 * the one before it (not sorted: the caller takes the two phases, which
 * accept any order), SF_ERR_INVALID_ARGUMENT for k_end > nse. */
sf_status sf_slot_runs_f64(double *out, int64_t *total, const double *values, const int64_t *slot,
                           const double *fill, int64_t nse, int64_t k_begin, int64_t k_end,
                           int64_t nslots, int64_t w, int64_t n, int op);
sf_status sf_slot_runs_f32(float *out, int64_t *total, const float *values, const int64_t *slot,
                           const float *fill, int64_t nse, int64_t k_begin, int64_t k_end,
                           int64_t nslots, int64_t w, int64_t n, int op);
sf_status sf_slot_runs_i64(int64_t *out, int64_t *total, const int64_t *values, const int64_t *slot,
                           const int64_t *fill, int64_t nse, int64_t k_begin, int64_t k_end,
                           int64_t nslots, int64_t w, int64_t n, int op);

/* Softmax (log_softmax = 0) or log_softmax along slices that the stored
 * order does not group (softmax along COO dim 0; RFC.md#softmax, docs/design.md#softmax-kernel), in stored
 * order: no sort, no gather, no scatter. Stored row k belongs to slot slot[k]
 * in [0, nslots); slot s is a slice of n elements, the u = n - count[s]
 * unspecified ones equal to fill[s * fill_stride .. + w) (fill_stride 0: one
 * fill row for all, w: one per slot). The same formulas as sf_seg_softmax_*.
 * A caller cuts the stored rows into parts (a function of the sizes only,
 * never of the thread count: the result is the same on any number of
 * threads) and runs, each phase threaded over parts, slot ranges or row
 * ranges:
 *  1. sf_slot_partial_*(SF_SLOT_MAX) per part: acc [nparts x nslots x (w + 1)];
 *  2. sf_slot_softmax_max_*: slots [s_begin, s_end): m [nslots x w] = the
 *     parts' maximum, then the fill where u > 0 (NaN wins); count [nslots];
 *  3. sf_slot_softmax_exp_*: the part's rows [k_begin, k_end): zsum
 *     [nslots x w] (its own, overwritten) = the sums of exp(x - m), and
 *     out_values = those exponentials (for log_softmax too: its scratch);
 *  4. sf_slot_softmax_norm_*: slots: z = the nparts zsum (part p at zsum + p
 *     nslots w) folded in part order + u exp(f - m) where u > 0; out_fill
 *     [nslots x w] as sf_seg_softmax_* writes it (0 where u == 0); scale
 *     [nslots x w] = 1 / z (softmax) or log z (log_softmax);
 *  5. sf_slot_softmax_write_*: rows [k_begin, k_end): out_values = exp(x - m)
 *     / z, or x - m - log z (values read for log_softmax only).
 * Backward, from the outputs (out_values, out_fill) and their gradients
 * (g_values; g_fill [nslots x w], the summed gradient of the u unspecified
 * outputs), as sf_seg_softmax_backward_*:
 *  6. sf_slot_softmax_backward_partial_*: per part acc [nslots x (w + 1)]:
 *     the sums of g y (softmax) or g (log_softmax), then the stored row count;
 *  7. sf_slot_softmax_backward_norm_*: slots: dot [nslots x w] = the parts
 *     folded in part order + the fill's term where u > 0; grad_fill
 *     [nslots x w] (0 where u == 0);
 *  8. sf_slot_softmax_backward_write_*: rows: grad_values.
 * Errors: SF_ERR_NULL_POINTER, SF_ERR_NEGATIVE_SIZE, SF_ERR_INDEX_OUT_OF_RANGE
 * (a slot outside [0, nslots)), SF_ERR_NOT_COALESCED (a slot holds more than
 * n rows), SF_ERR_INVALID_ARGUMENT (s_end > nslots, fill_stride not 0 or w). */
sf_status sf_slot_softmax_max_f64(double *m, int64_t *count, const double *acc, int64_t nparts,
                                  const double *fill, int64_t fill_stride, int64_t s_begin,
                                  int64_t s_end, int64_t nslots, int64_t w, int64_t n);
sf_status sf_slot_softmax_max_f32(float *m, int64_t *count, const double *acc, int64_t nparts,
                                  const float *fill, int64_t fill_stride, int64_t s_begin,
                                  int64_t s_end, int64_t nslots, int64_t w, int64_t n);

sf_status sf_slot_softmax_exp_f64(double *out_values, double *zsum, const double *values,
                                  const int64_t *slot, const double *m, int64_t k_begin,
                                  int64_t k_end, int64_t nslots, int64_t w, int log_softmax);
sf_status sf_slot_softmax_exp_f32(float *out_values, double *zsum, const float *values,
                                  const int64_t *slot, const float *m, int64_t k_begin,
                                  int64_t k_end, int64_t nslots, int64_t w, int log_softmax);

sf_status sf_slot_softmax_norm_f64(double *out_fill, double *scale, const double *zsum,
                                   int64_t nparts, const int64_t *count, const double *m,
                                   const double *fill, int64_t fill_stride, int64_t s_begin,
                                   int64_t s_end, int64_t nslots, int64_t w, int64_t n,
                                   int log_softmax);
sf_status sf_slot_softmax_norm_f32(float *out_fill, float *scale, const double *zsum,
                                   int64_t nparts, const int64_t *count, const float *m,
                                   const float *fill, int64_t fill_stride, int64_t s_begin,
                                   int64_t s_end, int64_t nslots, int64_t w, int64_t n,
                                   int log_softmax);

sf_status sf_slot_softmax_write_f64(double *out_values, const double *values, const int64_t *slot,
                                    const double *m, const double *scale, int64_t k_begin,
                                    int64_t k_end, int64_t nslots, int64_t w, int log_softmax);
sf_status sf_slot_softmax_write_f32(float *out_values, const float *values, const int64_t *slot,
                                    const float *m, const float *scale, int64_t k_begin,
                                    int64_t k_end, int64_t nslots, int64_t w, int log_softmax);

sf_status sf_slot_softmax_backward_partial_f64(double *acc, const double *out_values,
                                               const double *g_values, const int64_t *slot,
                                               int64_t k_begin, int64_t k_end, int64_t nslots,
                                               int64_t w, int log_softmax);
sf_status sf_slot_softmax_backward_partial_f32(double *acc, const float *out_values,
                                               const float *g_values, const int64_t *slot,
                                               int64_t k_begin, int64_t k_end, int64_t nslots,
                                               int64_t w, int log_softmax);

sf_status sf_slot_softmax_backward_norm_f64(double *grad_fill, double *dot, const double *acc,
                                            int64_t nparts, const double *out_fill,
                                            const double *g_fill, int64_t s_begin, int64_t s_end,
                                            int64_t nslots, int64_t w, int64_t n, int log_softmax);
sf_status sf_slot_softmax_backward_norm_f32(float *grad_fill, float *dot, const double *acc,
                                            int64_t nparts, const float *out_fill,
                                            const float *g_fill, int64_t s_begin, int64_t s_end,
                                            int64_t nslots, int64_t w, int64_t n, int log_softmax);

sf_status sf_slot_softmax_backward_write_f64(double *grad_values, const double *out_values,
                                             const double *g_values, const int64_t *slot,
                                             const double *dot, int64_t k_begin, int64_t k_end,
                                             int64_t nslots, int64_t w, int log_softmax);
sf_status sf_slot_softmax_backward_write_f32(float *grad_values, const float *out_values,
                                             const float *g_values, const int64_t *slot,
                                             const float *dot, int64_t k_begin, int64_t k_end,
                                             int64_t nslots, int64_t w, int log_softmax);

#endif /* SPARSEFILL_GENERATED_CORE_ENTRIES_H */
