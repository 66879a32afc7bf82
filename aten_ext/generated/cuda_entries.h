/* generated/cuda_entries.h -- the CUDA core's entry points: the contract of each,
 * then its prototype (each typed entry once per element type)
 * (written by tools/codegen/gen_native.py from tools/codegen/native.yaml:
 * edit those). */
#ifndef SPARSEFILL_GENERATED_CUDA_ENTRIES_H
#define SPARSEFILL_GENERATED_CUDA_ENTRIES_H

/* ---- COO ---------------------------------------------------------------- */

/* Validate COO indices [sparse_dim x nse] against sizes (host array of
 * sparse_dim) and, when linear != NULL, write linear[k] (nse entries; for
 * elements with a bad index it is left unwritten). report->status:
 * SF_ERR_INDEX_NEGATIVE / _OUT_OF_RANGE with the site of the first bad index
 * in (element, dimension) order, as sf_coo_check; report->result = 1 when
 * the linear indices are strictly increasing (coalesced), else 0.
 * Returns SF_ERR_NEGATIVE_SIZE, SF_ERR_OVERFLOW (product of sizes),
 * SF_ERR_NULL_POINTER, SF_ERR_INVALID_ARGUMENT (sparse_dim >
 * SF_CUDA_MAX_DIMS). */
sf_status sf_cuda_coo_check(sf_cuda_report *report, int64_t *linear, const int64_t *indices,
                            int64_t sparse_dim, int64_t nse, const int64_t *sizes, void *stream);

/* indices[d * nse + k] from linear[k] (the inverse of linearisation); sizes
 * is a host array. report->status: SF_ERR_INDEX_NEGATIVE / _OUT_OF_RANGE for
 * the first linear index outside [0, numel) (site: position k, value). report
 * may be NULL when the caller guarantees every linear index is in range (the
 * indices it made itself); nothing is checked then. linear may be row 0 of
 * indices (in place). */
sf_status sf_cuda_coo_delinearize(sf_cuda_report *report, int64_t *indices, const int64_t *linear,
                                  int64_t sparse_dim, int64_t nse, const int64_t *sizes,
                                  void *stream);

/* Coalescing plan for nse linear indices, each in [0, max_key] (any order,
 * duplicates allowed): unique_linear[0..n) strictly increasing (buffer of
 * nse), segment[k] = slot in unique_linear of element k (buffer of nse),
 * report->result = n. Device radix sort on the bits max_key needs, then a
 * scan of run heads: deterministic. Keys outside [0, max_key] give a wrong
 * plan, never an out-of-bounds access. Inputs may not alias outputs. */
sf_status sf_cuda_coalesce_plan(sf_cuda_report *report, int64_t *unique_linear, int64_t *segment,
                                const int64_t *linear, int64_t nse, int64_t max_key,
                                void *workspace, size_t *workspace_bytes, void *stream);

/* ---- CSR ---------------------------------------------------------------- */

/* Validate crow [nrows + 1] alone: crow[0] == 0 (SF_ERR_CROW_FIRST), non-
 * decreasing (SF_ERR_CROW_DECREASING, position = the row before the drop,
 * value = the smaller entry). report->result = crow[nrows] (the nse it
 * implies). */
sf_status sf_cuda_crow_check(sf_cuda_report *report, const int64_t *crow, int64_t nrows,
                             void *stream);

/* Validate CSR: crow [nrows + 1], col [nse]; the rules and error sites of
 * sf_csr_check, in its order (crow rules first, then the first bad column). */
sf_status sf_cuda_csr_check(sf_cuda_report *report, const int64_t *crow, const int64_t *col,
                            int64_t nrows, int64_t ncols, int64_t nse, void *stream);

/* rows[k] = row of element k for k < nse, from crow [nrows + 1] that
 * sf_cuda_crow_check accepted with result nse. One thread per element, a
 * binary search over crow: balanced however rows are distributed. With a
 * crow that breaks the rules the rows are wrong but every access stays in
 * crow[0..nrows] and rows[0..nse). rows may be NULL only when nse == 0. */
sf_status sf_cuda_csr_rows_from_crow(int64_t *rows, const int64_t *crow, int64_t nrows, int64_t nse,
                                     void *stream);

/* crow [nrows + 1] from non-decreasing rows[0..nse), each in [0, nrows).
 * report->status: SF_ERR_INDEX_NEGATIVE / _OUT_OF_RANGE / SF_ERR_NOT_COALESCED
 * (decreasing) for the first bad element (site: position, value). */
sf_status sf_cuda_crow_from_rows(sf_cuda_report *report, int64_t *crow, const int64_t *rows,
                                 int64_t nse, int64_t nrows, void *stream);

/* ---- pattern merges ----------------------------------------------------- */

/* The union of strictly increasing linear_a [nse_a] and linear_b [nse_b], as
 * sf_union_plan: output buffers hold nse_a + nse_b; the first n =
 * report->result entries are written: linear_out strictly increasing,
 * src_a[k] = position of linear_out[k] in A or -1 (A's fill stands in),
 * src_b likewise. Each element finds its slot by binary search in the other
 * operand and a scan of the matches (no serial merge). report->status:
 * SF_ERR_NOT_COALESCED (site: position, dim 0 for A / 1 for B, value) when
 * an input is not strictly increasing. */
sf_status sf_cuda_union_plan(sf_cuda_report *report, int64_t *linear_out, int64_t *src_a,
                             int64_t *src_b, const int64_t *linear_a, int64_t nse_a,
                             const int64_t *linear_b, int64_t nse_b, void *workspace,
                             size_t *workspace_bytes, void *stream);

/* Fill substitution, type-generic: out row k (row_bytes bytes) is a copy of
 * values row src[k], or of fill_row (device, row_bytes) where src[k] < 0.
 * report->status: SF_ERR_INDEX_OUT_OF_RANGE for the first src[k] >=
 * nse_values (site: position k, value); such rows are not written. Copies
 * in the widest word (16, 8, 4, 2 or 1 bytes) that the row size and the
 * three pointers' alignment allow. */
sf_status sf_cuda_gather_rows_with_fill(sf_cuda_report *report, void *out, const void *values,
                                        int64_t nse_values, const void *fill_row,
                                        const int64_t *src, int64_t n, size_t row_bytes,
                                        void *stream);

/* ---- matrix products (aten_ext/cuda/sf_cuda_products.cu) ----------------
 *
 * The matrix products (ops/products.h, RFC.md#products) on the device: the
 * sparse @ dense product and the fill-0 SpGEMM through cuSPARSE's generic
 * API, the fill correction, the sampled product and the transposed pattern
 * in kernels of this file. `cusparse_handle` is a cusparseHandle_t as void*
 * (the caller's, e.g. torch's per-stream handle); the functions bind it to
 * `stream` and set host pointer mode. `cusparse_status` (host, may be NULL)
 * receives the first failing cuSPARSE status (CUSPARSE_STATUS_SUCCESS = 0
 * otherwise); such a failure returns SF_ERR_NO_MEMORY (allocation or
 * resources) or SF_ERR_INVALID_ARGUMENT. Values are float32 (_f32) or
 * float64 (_f64), as everywhere in both cores; float16 / bfloat16 are
 * converted by the caller, as on the CPU.
 *
 * cuSPARSE reads index arrays unchecked: the functions that call it
 * (sf_cuda_csr_spmm_*, sf_cuda_spgemm_*) require operands that
 * sf_cuda_csr_operand_check accepted (full = 1), and the caller must read
 * that report before calling them. The kernels of this file alone
 * (operand check, sddmm, transpose) stay in bounds for any input. */

/* Check a CSR operand: crow [nrows + 1], col [nse], in the CPU kernels'
 * order. full = 1: crow[0] == 0 (SF_ERR_CROW_FIRST, value crow[0]) and
 * crow[nrows] == nse (SF_ERR_CROW_LAST, value crow[nrows]), then every row
 * span inside [0, nse] and non-decreasing (SF_ERR_CROW_DECREASING, position
 * = the first bad row, value crow[row + 1]), then every column of
 * col[crow[0] .. crow[nrows]) in [0, ncols) (SF_ERR_INDEX_OUT_OF_RANGE,
 * position, dim 1, value). full = 0: the last two rules only (the row spans
 * the CPU's sddmm reads). Columns may be unsorted or repeated.
 * report->result = crow[nrows]. */
sf_status sf_cuda_csr_operand_check(sf_cuda_report *report, const int64_t *crow, const int64_t *col,
                                    int64_t nrows, int64_t ncols, int64_t nse, int full,
                                    void *stream);

/* C (nrows x n, row-major, ld n) = A @ B with A = (crow, col, values) of
 * ncols columns and fill F, B (ncols x n) row-major with leading dimension
 * ldb >= n (>= 1). F as in sf_csr_spmm_f32/f64: row_fill[i * row_fill_stride]
 * (stride 0: a scalar; row_fill NULL: none) and col_fill[j] (NULL: none);
 * colsum = 1^T B (n; needed with a row fill) and corr = col_fill^T B (n;
 * with a column fill) come from the caller. One kernel writes the
 * correction rf_i * colsum[t] + corr[t] into C, one the shifted values
 * v_p - rf_i - cf_j into the workspace, then cuSPARSE adds A0 @ B (SpMV
 * when n == 1 and ldb == 1, else SpMM, row-major, default algorithm,
 * 64-bit indices, compute type = the values' type). Query the workspace
 * with workspace == NULL and the same arguments otherwise (the descriptors
 * need them). Requires a checked operand (see above). */
sf_status sf_cuda_csr_spmm_f32(int *cusparse_status, float *c, const int64_t *crow,
                               const int64_t *col, const float *values, int64_t nrows,
                               int64_t ncols, int64_t nse, const float *b, int64_t ldb, int64_t n,
                               const float *row_fill, int64_t row_fill_stride,
                               const float *col_fill, const float *colsum, const float *corr,
                               void *cusparse_handle, void *workspace, size_t *workspace_bytes,
                               void *stream);
sf_status sf_cuda_csr_spmm_f64(int *cusparse_status, double *c, const int64_t *crow,
                               const int64_t *col, const double *values, int64_t nrows,
                               int64_t ncols, int64_t nse, const double *b, int64_t ldb, int64_t n,
                               const double *row_fill, int64_t row_fill_stride,
                               const double *col_fill, const double *colsum, const double *corr,
                               void *cusparse_handle, void *workspace, size_t *workspace_bytes,
                               void *stream);

/* out[p] = dot(x[i_p, :], y[j_p, :]) (n terms) for every stored element p at
 * (i_p, j_p) of the pattern (crow, col), as sf_csr_sddmm_*: x is
 * nrows x n (ld ldx >= n), y ncols x n (ld ldy >= n). One group of up to 32
 * lanes per element (a power of two near n), shuffle reduction. The report
 * gets the checks of sf_cuda_csr_operand_check with full = 0; elements
 * outside every row or with a bad column get 0. No workspace, no cuSPARSE. */
sf_status sf_cuda_csr_sddmm_f32(sf_cuda_report *report, float *out, const int64_t *crow,
                                const int64_t *col, int64_t nrows, int64_t ncols, int64_t nse,
                                const float *x, int64_t ldx, const float *y, int64_t ldy, int64_t n,
                                void *stream);
sf_status sf_cuda_csr_sddmm_f64(sf_cuda_report *report, double *out, const int64_t *crow,
                                const int64_t *col, int64_t nrows, int64_t ncols, int64_t nse,
                                const double *x, int64_t ldx, const double *y, int64_t ldy,
                                int64_t n, void *stream);

/* Fused sparse attention, as sf_csr_attention_* (batches sharing the
 * pattern, bias_stride 0 or nse): out (nbatch * nrows x dv), lse [nbatch *
 * nrows]; q (nbatch * nrows x e), k (nbatch * ncols x e), v (nbatch * ncols
 * x dv), all row-major and dense (ld = e or dv); bias or NULL. One warp per
 * row, online softmax. The report gets the checks of
 * sf_cuda_csr_operand_check with full = 0; bad spans or columns are skipped.
 * No workspace. */
sf_status sf_cuda_csr_attention_f32(sf_cuda_report *report, float *out, float *lse,
                                    const int64_t *crow, const int64_t *col, const float *bias,
                                    int64_t bias_stride, int64_t nrows, int64_t ncols, int64_t nse,
                                    int64_t nbatch, const float *q, const float *k, const float *v,
                                    int64_t e, int64_t dv, float scale, void *stream);
sf_status sf_cuda_csr_attention_f64(sf_cuda_report *report, double *out, double *lse,
                                    const int64_t *crow, const int64_t *col, const double *bias,
                                    int64_t bias_stride, int64_t nrows, int64_t ncols, int64_t nse,
                                    int64_t nbatch, const double *q, const double *k,
                                    const double *v, int64_t e, int64_t dv, double scale,
                                    void *stream);

/* Its backward, as sf_csr_attention_backward_rows_* then _cols_* (dense
 * operands as above, g like out, lse and g_lse [nbatch * nrows], g_lse may
 * be NULL; ds and w [nbatch * nse] are written): a warp per row, then a warp
 * per column of the transposed pattern (crow_t, row_t, perm from
 * sf_cuda_csr_transpose), so every output has one writer: deterministic.
 * Report and skipping as the forward. No workspace. */
sf_status sf_cuda_csr_attention_backward_f32(sf_cuda_report *report, float *dq, float *dk,
                                             float *dv_out, float *ds, float *w,
                                             const int64_t *crow, const int64_t *col,
                                             const float *bias, int64_t bias_stride,
                                             const int64_t *crow_t, const int64_t *row_t,
                                             const int64_t *perm, int64_t nrows, int64_t ncols,
                                             int64_t nse, int64_t nbatch, const float *q,
                                             const float *k, const float *v, const float *lse,
                                             const float *g, const float *g_lse, int64_t e,
                                             int64_t dv, float scale, void *stream);
sf_status sf_cuda_csr_attention_backward_f64(sf_cuda_report *report, double *dq, double *dk,
                                             double *dv_out, double *ds, double *w,
                                             const int64_t *crow, const int64_t *col,
                                             const double *bias, int64_t bias_stride,
                                             const int64_t *crow_t, const int64_t *row_t,
                                             const int64_t *perm, int64_t nrows, int64_t ncols,
                                             int64_t nse, int64_t nbatch, const double *q,
                                             const double *k, const double *v, const double *lse,
                                             const double *g, const double *g_lse, int64_t e,
                                             int64_t dv, double scale, void *stream);

/* The transposed pattern, as sf_csr_transpose: crow_t [ncols + 1], col_t
 * [nse] (the original row of each element), perm [nse] (its position in A).
 * A stable radix sort of the positions by column, then binary searches:
 * deterministic, equal to the CPU's counting sort. The report gets the
 * checks of sf_cuda_csr_operand_check with full = 1; with bad input the
 * outputs are wrong but every access stays in bounds. Workspace: query with
 * workspace == NULL. */
sf_status sf_cuda_csr_transpose(sf_cuda_report *report, int64_t *crow_t, int64_t *col_t,
                                int64_t *perm, const int64_t *crow, const int64_t *col,
                                int64_t nrows, int64_t ncols, int64_t nse, void *workspace,
                                size_t *workspace_bytes, void *stream);

/* The fill-0 SpGEMM C = A @ B (A m x k, B k x n, CSR) through cuSPARSE
 * SpGEMM, in its stages. cuSPARSE SpGEMM takes 32-bit indices only: the
 * index arrays here are int32 (the caller converts), and m, k, n, nse_a,
 * nse_b and the result's nse must be <= INT32_MAX (SF_ERR_OVERFLOW
 * otherwise; nothing is truncated). nse_a, nse_b, m and n must be > 0 (an
 * empty product is the caller's, with no library call). The state holds the
 * cuSPARSE descriptors (host memory, the only allocation of this header;
 * release it with sf_cuda_spgemm_destroy, also after an error). Each stage's
 * workspace is queried with workspace == NULL and must stay allocated, in
 * stream order, until sf_cuda_spgemm_copy_* has been called: the later stages
 * read the earlier ones' buffers. The result's columns are sorted within
 * each row (cuSPARSE's SpGEMM gives them sorted) and its pattern is
 * structural, as the CPU's. Operands must be checked (see above) and, as
 * everywhere in this project, have distinct columns within a row. */

/* The state, for values of one type: the result's values are copied out by
 * the sf_cuda_spgemm_copy_* of that type (SF_ERR_INVALID_ARGUMENT otherwise). */
sf_status sf_cuda_spgemm_create_f32(sf_cuda_spgemm **state, int *cusparse_status,
                                    void *cusparse_handle, int64_t m, int64_t k, int64_t n,
                                    const int32_t *crow_a, const int32_t *col_a, const float *val_a,
                                    int64_t nse_a, const int32_t *crow_b, const int32_t *col_b,
                                    const float *val_b, int64_t nse_b, void *stream);
sf_status sf_cuda_spgemm_create_f64(sf_cuda_spgemm **state, int *cusparse_status,
                                    void *cusparse_handle, int64_t m, int64_t k, int64_t n,
                                    const int32_t *crow_a, const int32_t *col_a,
                                    const double *val_a, int64_t nse_a, const int32_t *crow_b,
                                    const int32_t *col_b, const double *val_b, int64_t nse_b,
                                    void *stream);

/* Stage 1 (cusparseSpGEMM_workEstimation). */
sf_status sf_cuda_spgemm_estimate(sf_cuda_spgemm *state, int *cusparse_status, void *workspace,
                                  size_t *workspace_bytes);

/* Stage 2 (cusparseSpGEMM_compute); on the real call, *nse_c (host) = the
 * result's stored elements (cuSPARSE synchronises to learn it). */
sf_status sf_cuda_spgemm_compute(sf_cuda_spgemm *state, int *cusparse_status, void *workspace,
                                 size_t *workspace_bytes, int64_t *nse_c);

/* Stage 3 (cusparseSpGEMM_copy): crow_c [m + 1], col_c / val_c [nse_c]. */
sf_status sf_cuda_spgemm_copy_f32(sf_cuda_spgemm *state, int *cusparse_status, int32_t *crow_c,
                                  int32_t *col_c, float *val_c);
sf_status sf_cuda_spgemm_copy_f64(sf_cuda_spgemm *state, int *cusparse_status, int32_t *crow_c,
                                  int32_t *col_c, double *val_c);

void sf_cuda_spgemm_destroy(sf_cuda_spgemm *state);

/* ---- softmax and reductions (cuda/sf_cuda_reduce.cu) --------------------
 *
 * The device twins of sf_reduce.c's functions (see sparsefill_core.h for the
 * segment model: segment s holds the stored rows values[seg_ptr[s] ..
 * seg_ptr[s+1]), each w wide, plus u_s = n - (seg_ptr[s+1] - seg_ptr[s])
 * unspecified elements equal to fill[s * fill_stride .. + w)). They take all
 * nseg segments at once (seg_ptr has nseg + 1 entries, values nse rows) and
 * compute the same formulas in the same order of terms; sums and products
 * over more than one row are taken in tree order, so they agree with the
 * CPU's to rounding (float sums accumulate in double, as on the CPU).
 *
 * The segment functions do not report: the caller runs
 * sf_cuda_segments_check on the same stream and raises what it finds. With
 * a seg_ptr it rejects, outputs are unspecified, but every access stays in
 * seg_ptr[0..nseg], values[0..nse) and the outputs' sizes (a segment that
 * breaks the contract is skipped). */

/* Counting-sort twin of sf_segment_sort: perm [nse] lists the elements
 * segment by segment, stably (the same perm as the CPU), seg_ptr [nseg + 1].
 * A stable device radix sort on the bits nseg - 1 needs, and a binary search
 * per segment. report->status: SF_ERR_INDEX_OUT_OF_RANGE for the first id
 * outside [0, nseg) (site: position k, value); perm and seg_ptr are then
 * unspecified. Workspace as sf_cuda_coalesce_plan. */
sf_status sf_cuda_segment_sort(sf_cuda_report *report, int64_t *perm, int64_t *seg_ptr,
                               const int64_t *segment, int64_t nse, int64_t nseg, void *workspace,
                               size_t *workspace_bytes, void *stream);

/* The checks of sf_reduce.c's check_segments, plus the ends: report->value =
 * seg_ptr[0] and report->result = seg_ptr[nseg] (the caller compares them
 * with 0 and nse); report->status = SF_ERR_NOT_COALESCED (the count
 * decreases) or SF_ERR_INVALID_ARGUMENT (more than n stored rows) for the
 * first bad segment (position = s). */
sf_status sf_cuda_segments_check(sf_cuda_report *report, const int64_t *seg_ptr, int64_t nseg,
                                 int64_t n, void *stream);

/* seg_max's coordinates: within each segment coord [nse] must increase and
 * lie in [0, n). report->status = SF_ERR_INVALID_ARGUMENT for the first bad
 * element (site: position k, value coord[k]). Meaningful for a seg_ptr that
 * sf_cuda_segments_check accepts. */
sf_status sf_cuda_seg_coord_check(sf_cuda_report *report, const int64_t *coord,
                                  const int64_t *seg_ptr, int64_t nseg, int64_t nse, int64_t n,
                                  void *stream);

/* out [nseg x w] = sum over each slice, the fill counted u_s times (not at
 * all when u_s == 0), as sf_seg_sum_*. */
sf_status sf_cuda_seg_sum_f64(double *out, const double *values, const double *fill,
                              int64_t fill_stride, const int64_t *seg_ptr, int64_t nseg,
                              int64_t nse, int64_t w, int64_t n, void *stream);
sf_status sf_cuda_seg_sum_f32(float *out, const float *values, const float *fill,
                              int64_t fill_stride, const int64_t *seg_ptr, int64_t nseg,
                              int64_t nse, int64_t w, int64_t n, void *stream);
sf_status sf_cuda_seg_sum_i64(int64_t *out, const int64_t *values, const int64_t *fill,
                              int64_t fill_stride, const int64_t *seg_ptr, int64_t nseg,
                              int64_t nse, int64_t w, int64_t n, void *stream);

/* out [nseg x w] = fill^u_s * prod(values), as sf_seg_prod_*. */
sf_status sf_cuda_seg_prod_f64(double *out, const double *values, const double *fill,
                               int64_t fill_stride, const int64_t *seg_ptr, int64_t nseg,
                               int64_t nse, int64_t w, int64_t n, void *stream);
sf_status sf_cuda_seg_prod_f32(float *out, const float *values, const float *fill,
                               int64_t fill_stride, const int64_t *seg_ptr, int64_t nseg,
                               int64_t nse, int64_t w, int64_t n, void *stream);

/* Max / min with winner and index, as sf_seg_max_* (NaN wins, ties to the
 * first occurrence, unspecified positions included when coord is given):
 * the same winners exactly. winner and index may be NULL; coord may be NULL
 * when index is NULL. */
sf_status sf_cuda_seg_max_f64(double *out, int64_t *winner, int64_t *index, const double *values,
                              const double *fill, int64_t fill_stride, const int64_t *coord,
                              const int64_t *seg_ptr, int64_t nseg, int64_t nse, int64_t w,
                              int64_t n, int is_min, void *stream);
sf_status sf_cuda_seg_max_f32(float *out, int64_t *winner, int64_t *index, const float *values,
                              const float *fill, int64_t fill_stride, const int64_t *coord,
                              const int64_t *seg_ptr, int64_t nseg, int64_t nse, int64_t w,
                              int64_t n, int is_min, void *stream);
sf_status sf_cuda_seg_max_i64(int64_t *out, int64_t *winner, int64_t *index, const int64_t *values,
                              const int64_t *fill, int64_t fill_stride, const int64_t *coord,
                              const int64_t *seg_ptr, int64_t nseg, int64_t nse, int64_t w,
                              int64_t n, int is_min, void *stream);

/* Softmax / log_softmax along each slice, as sf_seg_softmax_*: out_values
 * [nse x w], out_fill [nseg x w] (0 where u_s == 0). */
sf_status sf_cuda_seg_softmax_f64(double *out_values, double *out_fill, const double *values,
                                  const double *fill, int64_t fill_stride, const int64_t *seg_ptr,
                                  int64_t nseg, int64_t nse, int64_t w, int64_t n, int log_softmax,
                                  void *stream);
sf_status sf_cuda_seg_softmax_f32(float *out_values, float *out_fill, const float *values,
                                  const float *fill, int64_t fill_stride, const int64_t *seg_ptr,
                                  int64_t nseg, int64_t nse, int64_t w, int64_t n, int log_softmax,
                                  void *stream);

/* Its backward, as sf_seg_softmax_backward_*: out_fill, g_fill and grad_fill
 * have one row per segment ([nseg x w]). */
sf_status sf_cuda_seg_softmax_backward_f64(double *grad_values, double *grad_fill,
                                           const double *out_values, const double *out_fill,
                                           const double *g_values, const double *g_fill,
                                           const int64_t *seg_ptr, int64_t nseg, int64_t nse,
                                           int64_t w, int64_t n, int log_softmax, void *stream);
sf_status sf_cuda_seg_softmax_backward_f32(float *grad_values, float *grad_fill,
                                           const float *out_values, const float *out_fill,
                                           const float *g_values, const float *g_fill,
                                           const int64_t *seg_ptr, int64_t nseg, int64_t nse,
                                           int64_t w, int64_t n, int log_softmax, void *stream);

/* ---- semiring products (aten_ext/cuda/sf_cuda_semiring.cu) --------------
 *
 * The graph domain's semiring products (cuSPARSE has no semirings): the
 * twins of sf_csr_semiring_mv_*, sf_csr_semiring_vm_* and
 * sf_csr_semiring_masked_* (sparsefill_core.h), with their monoid and
 * binop codes (sf_monoid, sf_binop), element types (float32, float64,
 * int64; out in ACC: double for both floats, int64), outputs and arg
 * (the position of an output's first present term, -1: absent). One
 * thread per output walks that output's terms in the CPU's order with
 * the CPU's arithmetic (IEEE-rounded operations, never contracted into
 * an FMA): out and arg equal the CPU's bit for bit, for every monoid
 * (plus and times included: one fixed order of terms). No cuSPARSE, no
 * workspace. Bad codes, or a division op on int64, give
 * SF_ERR_INVALID_ARGUMENT before any launch. On operands that the
 * checks named below reject, outputs are unspecified but every access
 * stays in the sizes given. */

/* out, arg [nrows] = A (op) x as sf_csr_semiring_mv_* over every row: x
 * [ncols], x_present [ncols] (nonzero: present) or NULL (all present).
 * A thread per row. The report gets the checks of
 * sf_cuda_csr_operand_check with full = 1. */
sf_status sf_cuda_csr_semiring_mv_f32(sf_cuda_report *report, double *out, int64_t *arg,
                                      const int64_t *crow, const int64_t *col, const float *values,
                                      int64_t nrows, int64_t ncols, int64_t nse, const float *x,
                                      const uint8_t *x_present, int monoid, int op, void *stream);
sf_status sf_cuda_csr_semiring_mv_f64(sf_cuda_report *report, double *out, int64_t *arg,
                                      const int64_t *crow, const int64_t *col, const double *values,
                                      int64_t nrows, int64_t ncols, int64_t nse, const double *x,
                                      const uint8_t *x_present, int monoid, int op, void *stream);
sf_status sf_cuda_csr_semiring_mv_i64(sf_cuda_report *report, int64_t *out, int64_t *arg,
                                      const int64_t *crow, const int64_t *col,
                                      const int64_t *values, int64_t nrows, int64_t ncols,
                                      int64_t nse, const int64_t *x, const uint8_t *x_present,
                                      int monoid, int op, void *stream);

/* out, arg [ncols] = u (op) A as sf_csr_semiring_vm_*, A (nrows x ncols,
 * values [nse] in A's order) given by its transposed pattern crow_t
 * [ncols + 1], row_t [nse], perm [nse] from sf_cuda_csr_transpose (whose
 * report checks A): a thread per column j walks A's elements of column j
 * in A's order (rows ascending), looking each row up in u's keys, so its
 * terms come in the CPU's push order. The report checks u's keys as the
 * CPU does: SF_ERR_NOT_COALESCED where a key does not exceed the one
 * before it (or is negative), SF_ERR_INDEX_OUT_OF_RANGE where it is >=
 * nrows; the first bad key (site: position q, dim 0, value). */
sf_status sf_cuda_csr_semiring_vm_f32(sf_cuda_report *report, double *out, int64_t *arg,
                                      const int64_t *crow_t, const int64_t *row_t,
                                      const int64_t *perm, const float *values, int64_t nrows,
                                      int64_t ncols, int64_t nse, const int64_t *u_keys,
                                      const float *u_values, int64_t u_nse, int monoid, int op,
                                      void *stream);
sf_status sf_cuda_csr_semiring_vm_f64(sf_cuda_report *report, double *out, int64_t *arg,
                                      const int64_t *crow_t, const int64_t *row_t,
                                      const int64_t *perm, const double *values, int64_t nrows,
                                      int64_t ncols, int64_t nse, const int64_t *u_keys,
                                      const double *u_values, int64_t u_nse, int monoid, int op,
                                      void *stream);
sf_status sf_cuda_csr_semiring_vm_i64(sf_cuda_report *report, int64_t *out, int64_t *arg,
                                      const int64_t *crow_t, const int64_t *row_t,
                                      const int64_t *perm, const int64_t *values, int64_t nrows,
                                      int64_t ncols, int64_t nse, const int64_t *u_keys,
                                      const int64_t *u_values, int64_t u_nse, int monoid, int op,
                                      void *stream);

/* out, arg [nse_m] = the masked product by dots, as
 * sf_csr_semiring_masked_* over every row: a thread per stored element
 * (i, j) of the mask (m x n) intersects row i of A (m rows) with row j of
 * B^T (n rows), both sorted, by the CPU's merge (binary search where one
 * row is over 16 times the other). No report: the caller checks the
 * three operands with sf_cuda_csr_operand_check (full = 1) first or on
 * the same stream; a mask element outside every row, or with a column
 * outside [0, n), gets arg -1. */
sf_status sf_cuda_csr_semiring_masked_f32(double *out, int64_t *arg, const int64_t *crow_m,
                                          const int64_t *col_m, int64_t nse_m,
                                          const int64_t *crow_a, const int64_t *col_a,
                                          const float *val_a, int64_t nse_a, const int64_t *crow_bt,
                                          const int64_t *col_bt, const float *val_bt,
                                          int64_t nse_bt, int64_t m, int64_t n, int monoid, int op,
                                          void *stream);
sf_status sf_cuda_csr_semiring_masked_f64(double *out, int64_t *arg, const int64_t *crow_m,
                                          const int64_t *col_m, int64_t nse_m,
                                          const int64_t *crow_a, const int64_t *col_a,
                                          const double *val_a, int64_t nse_a,
                                          const int64_t *crow_bt, const int64_t *col_bt,
                                          const double *val_bt, int64_t nse_bt, int64_t m,
                                          int64_t n, int monoid, int op, void *stream);
sf_status sf_cuda_csr_semiring_masked_i64(int64_t *out, int64_t *arg, const int64_t *crow_m,
                                          const int64_t *col_m, int64_t nse_m,
                                          const int64_t *crow_a, const int64_t *col_a,
                                          const int64_t *val_a, int64_t nse_a,
                                          const int64_t *crow_bt, const int64_t *col_bt,
                                          const int64_t *val_bt, int64_t nse_bt, int64_t m,
                                          int64_t n, int monoid, int op, void *stream);

/* ---- BSR products (aten_ext/cuda/sf_cuda_bsr.cu) ------------------------
 *
 * C (nbrows r x n, row-major, ld n) = A @ B for the BSR operand of
 * sf_bsr_spmm_f32/f64 (sparsefill_core.h): block pattern crow [nbrows + 1],
 * col [nblocks], values [nblocks x r x bc], a scalar fill *fill (device
 * pointer; NULL: 0) and colsum = 1^T B (device, n; NULL: 0) from the
 * caller; B (nbcols bc x n) with row stride ldb >= n. One plain kernel, no
 * cuSPARSE, no workspace; each output summed in one fixed order. Requires
 * the block pattern accepted by sf_cuda_csr_operand_check (full = 1, with
 * nrows = nbrows, ncols = nbcols, nse = nblocks); on other input it stays
 * in bounds (bad spans and columns are skipped). Errors:
 * SF_ERR_NEGATIVE_SIZE, SF_ERR_OVERFLOW (nbrows r n), SF_ERR_NULL_POINTER,
 * SF_ERR_INVALID_ARGUMENT (ldb < n, or the launch failed). */

sf_status sf_cuda_bsr_spmm_f32(float *c, const int64_t *crow, const int64_t *col,
                               const float *values, int64_t nbrows, int64_t nbcols, int64_t nblocks,
                               int64_t r, int64_t bc, const float *b, int64_t ldb, int64_t n,
                               const float *fill, const float *colsum, void *stream);
sf_status sf_cuda_bsr_spmm_f64(double *c, const int64_t *crow, const int64_t *col,
                               const double *values, int64_t nbrows, int64_t nbcols,
                               int64_t nblocks, int64_t r, int64_t bc, const double *b, int64_t ldb,
                               int64_t n, const double *fill, const double *colsum, void *stream);

#endif /* SPARSEFILL_GENERATED_CUDA_ENTRIES_H */
