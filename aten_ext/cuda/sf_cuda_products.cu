// sf_cuda_products.cu -- the matrix products (ops/products.h) on the device,
// behind the C ABI of sparsefill_cuda.h. No torch headers.
//
// A (m x k) with fill F is A0 + F, A0 = the stored values minus F at their
// positions (RFC.md 5.2). A @ B = A0 @ B + F @ B, and F @ B is rank one:
// rf_i (1^T B) + (cf^T B). The correction is written by one kernel of ours,
// then cuSPARSE's SpMM / SpMV adds A0 @ B on top (beta = 1): C is written
// by the correction and updated once by the library, and nothing of size
// m x k exists. The fill-0 SpGEMM is cuSPARSE's, staged; the sampled product
// (SDDMM) and the transposed pattern are plain kernels here.
#include "sf_cuda_internal.cuh"

#include <cusparse.h>

#include <climits>
#include <new>

using namespace sf_cuda;

namespace {

// ---- cuSPARSE plumbing ---------------------------------------------------------

template <class T> constexpr cudaDataType real_type();
template <> constexpr cudaDataType real_type<float>() { return CUDA_R_32F; }
template <> constexpr cudaDataType real_type<double>() { return CUDA_R_64F; }

// The first failing cuSPARSE status goes to *out; an sf_status for the caller.
inline sf_status from_cusparse(cusparseStatus_t st, int* out) {
  if (st == CUSPARSE_STATUS_SUCCESS) return SF_OK;
  if (out != nullptr) *out = (int)st;
  return (st == CUSPARSE_STATUS_ALLOC_FAILED || st == CUSPARSE_STATUS_INSUFFICIENT_RESOURCES)
             ? SF_ERR_NO_MEMORY
             : SF_ERR_INVALID_ARGUMENT;
}

#define SF_CUSPARSE_TRY(expr, out)                          \
  do {                                                      \
    const sf_status s_ = from_cusparse((expr), (out));      \
    if (s_ != SF_OK) return s_;                             \
  } while (0)

// The caller's handle on our stream, with host scalars (alpha, beta).
inline sf_status bind_handle(cusparseHandle_t h, cudaStream_t s, int* out) {
  SF_CUSPARSE_TRY(cusparseSetStream(h, s), out);
  SF_CUSPARSE_TRY(cusparseSetPointerMode(h, CUSPARSE_POINTER_MODE_HOST), out);
  return SF_OK;
}

// Descriptors of one SpMM / SpMV call, destroyed on every return path.
struct Descriptors {
  cusparseConstSpMatDescr_t a = nullptr;
  cusparseConstDnMatDescr_t b = nullptr;
  cusparseDnMatDescr_t c = nullptr;
  cusparseConstDnVecDescr_t x = nullptr;
  cusparseDnVecDescr_t y = nullptr;
  ~Descriptors() {
    if (a) cusparseDestroySpMat(a);
    if (b) cusparseDestroyDnMat(b);
    if (c) cusparseDestroyDnMat(c);
    if (x) cusparseDestroyDnVec(x);
    if (y) cusparseDestroyDnVec(y);
  }
};

// ---- operand checks --------------------------------------------------------------

// Row i's span [crow[i], crow[i + 1]) must lie in [0, nse], non-decreasing
// (sf_row_span's rule); the first bad row goes to r->first.
__global__ void operand_rows_kernel(sf_cuda_report* r, const int64_t* crow, int64_t nrows,
                                    int64_t nse) {
  SF_CUDA_FOR(i, nrows) {
    const int64_t lo = crow[i], hi = crow[i + 1];
    if (lo < 0 || hi < lo || hi > nse) note_bad(&r->first, (uint64_t)i);
  }
}

// Columns of the elements the rows cover, [crow[0], crow[nrows]) clamped to
// [0, nse); the first bad one goes to r->second.
__global__ void operand_cols_kernel(sf_cuda_report* r, const int64_t* crow, const int64_t* col,
                                    int64_t nrows, int64_t ncols, int64_t nse) {
  const int64_t lo = crow[0] < 0 ? 0 : crow[0];
  const int64_t hi = crow[nrows] > nse ? nse : crow[nrows];
  SF_CUDA_FOR(p, nse) {
    if (p < lo || p >= hi) continue;
    const int64_t c = col[p];
    if (c < 0 || c >= ncols) note_bad(&r->second, (uint64_t)p);
  }
}

// In the CPU kernels' order: first entry, last entry (full only), row spans,
// columns.
__global__ void operand_finish(sf_cuda_report* r, const int64_t* crow, const int64_t* col,
                               int64_t nrows, int64_t nse, int full) {
  r->result = crow[nrows];
  if (full && crow[0] != 0) {
    set_site(r, SF_ERR_CROW_FIRST, 0, -1, crow[0]);
  } else if (full && crow[nrows] != nse) {
    set_site(r, SF_ERR_CROW_LAST, nrows, -1, crow[nrows]);
  } else if (r->first != kNone) {
    const int64_t i = (int64_t)r->first;
    set_site(r, SF_ERR_CROW_DECREASING, i, -1, crow[i + 1]);
  } else if (r->second != kNone) {
    const int64_t p = (int64_t)r->second;
    set_site(r, SF_ERR_INDEX_OUT_OF_RANGE, p, 1, col[p]);
  }
}

sf_status operand_scan(sf_cuda_report* report, const int64_t* crow, const int64_t* col,
                       int64_t nrows, int64_t ncols, int64_t nse, int full, cudaStream_t s) {
  SF_CUDA_FAIL_IF(report == nullptr || crow == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nrows < 0 || ncols < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(col == nullptr && nse > 0, SF_ERR_NULL_POINTER);
  SF_CUDA_TRY(report_init(report, 0, s));
  if (nrows > 0) {
    operand_rows_kernel<<<blocks_for(nrows), kThreads, 0, s>>>(report, crow, nrows, nse);
    SF_CUDA_TRY(launched());
  }
  if (nse > 0) {
    operand_cols_kernel<<<blocks_for(nse), kThreads, 0, s>>>(report, crow, col, nrows, ncols, nse);
    SF_CUDA_TRY(launched());
  }
  operand_finish<<<1, 1, 0, s>>>(report, crow, col, nrows, nse, full);
  return launched();
}

// Row of element p: the number of crow[1..nrows] entries <= p (in [0, nrows];
// nrows when p lies after every row). Reads stay in crow[1..nrows].
__device__ inline int64_t row_of(const int64_t* crow, int64_t nrows, int64_t p) {
  return upper_bound(crow + 1, nrows, p);
}

// ---- sparse @ dense ---------------------------------------------------------------

// C[i, t] = rf_i * colsum[t] + corr[t]: F @ B, written into every row (the
// CPU kernel's correction row, same operation order).
template <class T>
__global__ void correction_kernel(T* c, int64_t nrows, int64_t n, const T* row_fill,
                                  int64_t row_fill_stride, const T* colsum, const T* corr) {
  SF_CUDA_FOR(e, nrows * n) {
    const int64_t i = e / n, t = e - i * n;
    const T rf = row_fill ? row_fill[i * row_fill_stride] : T(0);
    const T v = colsum ? rf * colsum[t] : T(0);
    c[e] = corr ? v + corr[t] : v;
  }
}

// A0's values: v_p - rf_i - cf_j (the CPU kernel's order of operations).
// Rows by binary search (only for a per-row fill), so every element costs
// the same whatever the row lengths. nrows >= 1 (the caller returns early
// for nrows == 0).
template <class T>
__global__ void shifted_values_kernel(T* out, const T* values, const int64_t* crow,
                                      const int64_t* col, int64_t nrows, int64_t ncols,
                                      int64_t nse, const T* row_fill, int64_t row_fill_stride,
                                      const T* col_fill) {
  SF_CUDA_FOR(p, nse) {
    T v = values[p];
    if (row_fill) {
      int64_t i = 0;
      if (row_fill_stride != 0) {
        i = row_of(crow, nrows, p);
        if (i >= nrows) i = nrows - 1;  // only for unchecked input: stay in bounds
      }
      v = v - row_fill[i * row_fill_stride];
    }
    if (col_fill) {
      const int64_t j = col[p];
      if (j >= 0 && j < ncols) v = v - col_fill[j];
    }
    out[p] = v;
  }
}

template <class T>
sf_status spmm_impl(int* cs, T* c, const int64_t* crow, const int64_t* col, const T* values,
                    int64_t nrows, int64_t ncols, int64_t nse, const T* b, int64_t ldb, int64_t n,
                    const T* row_fill, int64_t row_fill_stride, const T* col_fill, const T* colsum,
                    const T* corr, cusparseHandle_t h, void* workspace, size_t* workspace_bytes,
                    cudaStream_t s) {
  const bool shift = row_fill != nullptr || col_fill != nullptr;
  // The library part: only when some stored element meets some column.
  const bool product = nrows > 0 && n > 0 && nse > 0;
  const bool as_vector = n == 1 && ldb == 1;
  const size_t piece = shift ? aligned_bytes((size_t)nse * sizeof(T)) : 0;
  const cudaDataType dt = real_type<T>();
  const T one = T(1);
  size_t lib_bytes = 0;
  Descriptors d;
  if (product) {
    SF_CUDA_TRY(bind_handle(h, s, cs));
    // A0's values live in the workspace; in the size query A's own values
    // stand in (same type and length: the size does not depend on them).
    const T* a_values = (shift && workspace != nullptr) ? static_cast<const T*>(workspace) : values;
    SF_CUSPARSE_TRY(cusparseCreateConstCsr(&d.a, nrows, ncols, nse, crow, col, a_values,
                                           CUSPARSE_INDEX_64I, CUSPARSE_INDEX_64I,
                                           CUSPARSE_INDEX_BASE_ZERO, dt),
                    cs);
    if (as_vector) {
      SF_CUSPARSE_TRY(cusparseCreateConstDnVec(&d.x, ncols, b, dt), cs);
      SF_CUSPARSE_TRY(cusparseCreateDnVec(&d.y, nrows, c, dt), cs);
      SF_CUSPARSE_TRY(cusparseSpMV_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, d.a, d.x,
                                              &one, d.y, dt, CUSPARSE_SPMV_ALG_DEFAULT,
                                              &lib_bytes),
                      cs);
    } else {
      // Row-major B and C (torch's layout): no transposes, ld = row stride.
      SF_CUSPARSE_TRY(cusparseCreateConstDnMat(&d.b, ncols, n, ldb, b, dt, CUSPARSE_ORDER_ROW),
                      cs);
      SF_CUSPARSE_TRY(cusparseCreateDnMat(&d.c, nrows, n, n, c, dt, CUSPARSE_ORDER_ROW), cs);
      SF_CUSPARSE_TRY(cusparseSpMM_bufferSize(h, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                              CUSPARSE_OPERATION_NON_TRANSPOSE, &one, d.a, d.b,
                                              &one, d.c, dt, CUSPARSE_SPMM_ALG_DEFAULT,
                                              &lib_bytes),
                      cs);
    }
  }
  const size_t need = piece + aligned_bytes(lib_bytes);
  if (workspace == nullptr) {
    *workspace_bytes = need;
    return SF_OK;
  }
  SF_CUDA_FAIL_IF(*workspace_bytes < need, SF_ERR_INVALID_ARGUMENT);
  if (nrows == 0 || n == 0) return SF_OK;
  correction_kernel<T><<<blocks_for(nrows * n), kThreads, 0, s>>>(c, nrows, n, row_fill,
                                                                  row_fill_stride, colsum, corr);
  SF_CUDA_TRY(launched());
  if (!product) return SF_OK;
  if (shift) {
    shifted_values_kernel<T><<<blocks_for(nse), kThreads, 0, s>>>(
        static_cast<T*>(workspace), values, crow, col, nrows, ncols, nse, row_fill,
        row_fill_stride, col_fill);
    SF_CUDA_TRY(launched());
  }
  void* lib_ws = lib_bytes > 0 ? static_cast<char*>(workspace) + piece : nullptr;
  if (as_vector) {
    SF_CUSPARSE_TRY(cusparseSpMV(h, CUSPARSE_OPERATION_NON_TRANSPOSE, &one, d.a, d.x, &one, d.y,
                                 dt, CUSPARSE_SPMV_ALG_DEFAULT, lib_ws),
                    cs);
  } else {
    SF_CUSPARSE_TRY(cusparseSpMM(h, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                 CUSPARSE_OPERATION_NON_TRANSPOSE, &one, d.a, d.b, &one, d.c, dt,
                                 CUSPARSE_SPMM_ALG_DEFAULT, lib_ws),
                    cs);
  }
  return launched();
}

// ---- SDDMM -------------------------------------------------------------------------

// One group of `group` lanes (a power of two <= 32) per stored element; a
// warp takes 32 / group consecutive elements per step. The loop bound
// depends on the warp only, so every lane of a warp takes part in each
// shuffle (full mask), including lanes past the end.
template <class T>
__global__ void sddmm_kernel(T* out, const int64_t* crow, const int64_t* col, int64_t nrows,
                             int64_t ncols, int64_t nse, const T* x, int64_t ldx, const T* y,
                             int64_t ldy, int64_t n, int group) {
  const int lane = threadIdx.x & 31;
  const int per_warp = 32 / group;
  const int sub = lane / group, glane = lane % group;
  const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t base = warp * per_warp; base < nse; base += warps * per_warp) {
    const int64_t p = base + sub;
    T acc = T(0);
    bool ok = false;
    if (p < nse) {
      const int64_t i = row_of(crow, nrows, p);
      const int64_t j = col[p];
      ok = i < nrows && p >= crow[i] && j >= 0 && j < ncols;
      if (ok) {
        const T* xi = x + i * ldx;
        const T* yj = y + j * ldy;
        for (int64_t t = glane; t < n; t += group) acc += xi[t] * yj[t];
      }
    }
    for (int off = group / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off, group);
    if (p < nse && glane == 0) out[p] = ok ? acc : T(0);
  }
}

template <class T>
sf_status sddmm_impl(sf_cuda_report* report, T* out, const int64_t* crow, const int64_t* col,
                     int64_t nrows, int64_t ncols, int64_t nse, const T* x, int64_t ldx,
                     const T* y, int64_t ldy, int64_t n, cudaStream_t s) {
  SF_CUDA_FAIL_IF(n < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(ldx < n || ldy < n, SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(nse > 0 && out == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(n > 0 && ((x == nullptr && nrows > 0) || (y == nullptr && ncols > 0)),
                  SF_ERR_NULL_POINTER);
  SF_CUDA_TRY(operand_scan(report, crow, col, nrows, ncols, nse, 0, s));
  if (nse == 0) return SF_OK;
  int group = 1;
  while (group < 32 && group < n) group <<= 1;
  const int64_t threads = nse * group;  // nse < 2^58: no overflow
  sddmm_kernel<T><<<blocks_for(threads), kThreads, 0, s>>>(out, crow, col, nrows, ncols, nse, x,
                                                           ldx, y, ldy, n, group);
  return launched();
}

// ---- fused attention ----------------------------------------------------------------

__device__ inline double att_exp(double x) { return exp(x); }
__device__ inline float att_exp(float x) { return expf(x); }
__device__ inline double att_log(double x) { return log(x); }
__device__ inline float att_log(float x) { return logf(x); }

// The dot product of x and y (n terms) over a warp: every lane returns it.
template <class T>
__device__ inline T warp_dot(const T* x, const T* y, int64_t n, int lane) {
  T d = T(0);
  for (int64_t t = lane; t < n; t += 32) d += x[t] * y[t];
  for (int off = 16; off > 0; off >>= 1) d += __shfl_xor_sync(0xffffffffu, d, off);
  return d;
}

// One warp per row (r = b * nrows + i over the batch): the lanes share each
// score's dot product (a shuffle reduction, so every lane holds the same
// score and the loop stays warp-uniform) and own the output columns lane,
// lane + 32, ... The online softmax of sf_csr_attention (sf_products.c). A
// bad row span or column (reported by the scan) is skipped, so reads stay
// in bounds.
template <class T>
__global__ void attention_kernel(T* out, T* lse, const int64_t* crow, const int64_t* col,
                                 const T* bias, int64_t bias_stride, int64_t nrows, int64_t ncols,
                                 int64_t nse, int64_t total, const T* q, const T* k, const T* v,
                                 int64_t e, int64_t dv, T scale) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t r = warp; r < total; r += warps) {
    const int64_t b = r / nrows, i = r - b * nrows;
    const T* kb = k + b * ncols * e;
    const T* vb = v + b * ncols * dv;
    const T* bb = bias ? bias + b * bias_stride : nullptr;
    T* o = out + r * dv;
    for (int64_t t = lane; t < dv; t += 32) o[t] = T(0);
    int64_t lo = crow[i], hi = crow[i + 1];
    if (lo < 0 || hi < lo || hi > nse) lo = hi = 0;
    T m = -INFINITY, l = T(0);
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t j = col[p];
      if (j < 0 || j >= ncols) continue;
      const T s = scale * warp_dot(q + r * e, kb + j * e, e, lane) + (bb ? bb[p] : T(0));
      if (s == -INFINITY) continue;
      const T* vj = vb + j * dv;
      if (s > m) {
        const T c = att_exp(m - s);
        l = l * c + T(1);
        for (int64_t t = lane; t < dv; t += 32) o[t] = o[t] * c + vj[t];
        m = s;
      } else {
        const T w = att_exp(s - m);
        l += w;
        for (int64_t t = lane; t < dv; t += 32) o[t] += w * vj[t];
      }
    }
    if (l == T(0)) {
      if (lane == 0) lse[r] = -INFINITY;
    } else if (m == INFINITY) {
      for (int64_t t = lane; t < dv; t += 32) o[t] = NAN;
      if (lane == 0) lse[r] = NAN;
    } else {
      const T inv = T(1) / l;
      for (int64_t t = lane; t < dv; t += 32) o[t] *= inv;
      if (lane == 0) lse[r] = m + att_log(l);
    }
  }
}

template <class T>
sf_status attention_impl(sf_cuda_report* report, T* out, T* lse, const int64_t* crow,
                         const int64_t* col, const T* bias, int64_t bias_stride, int64_t nrows,
                         int64_t ncols, int64_t nse, int64_t nbatch, const T* q, const T* k,
                         const T* v, int64_t e, int64_t dv, T scale, cudaStream_t s) {
  SF_CUDA_FAIL_IF(e < 0 || dv < 0 || nbatch < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(bias_stride != 0 && bias_stride != nse, SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(nrows > 0 && nbatch > INT64_MAX / 32 / nrows, SF_ERR_INVALID_ARGUMENT);
  const int64_t total = nbatch * nrows;
  SF_CUDA_FAIL_IF(total > 0 && (lse == nullptr || (dv > 0 && out == nullptr)),
                  SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF((e > 0 && ((q == nullptr && total > 0) || (k == nullptr && ncols > 0))) ||
                      (dv > 0 && v == nullptr && ncols > 0),
                  SF_ERR_NULL_POINTER);
  SF_CUDA_TRY(operand_scan(report, crow, col, nrows, ncols, nse, 0, s));
  if (total == 0) return SF_OK;
  attention_kernel<T><<<blocks_for(total * 32), kThreads, 0, s>>>(
      out, lse, crow, col, bias, bias_stride, nrows, ncols, nse, total, q, k, v, e, dv, scale);
  return launched();
}

// The backward's rows pass (sf_csr_attention_backward_rows): a warp per row;
// lane 0 writes each element's w and (first) dw, then, after the warp's
// writes are visible, ds; the lanes own dq's columns.
template <class T>
__global__ void attention_rows_kernel(T* dq, T* ds, T* w, const int64_t* crow, const int64_t* col,
                                      const T* bias, int64_t bias_stride, int64_t nrows,
                                      int64_t ncols, int64_t nse, int64_t total, const T* q,
                                      const T* k, const T* v, const T* lse, const T* g,
                                      const T* g_lse, int64_t e, int64_t dv, T scale) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t r = warp; r < total; r += warps) {
    const int64_t b = r / nrows, i = r - b * nrows;
    const T* kb = k + b * ncols * e;
    const T* vb = v + b * ncols * dv;
    const T* bb = bias ? bias + b * bias_stride : nullptr;
    T* dsb = ds + b * nse;
    T* wb = w + b * nse;
    T* dqi = dq + r * e;
    const T top = lse[r], gl = g_lse ? g_lse[r] : T(0);
    int64_t lo = crow[i], hi = crow[i + 1];
    if (lo < 0 || hi < lo || hi > nse) lo = hi = 0;
    T dot = T(0);
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t j = col[p];
      if (j < 0 || j >= ncols) continue;
      const T s = scale * warp_dot(q + r * e, kb + j * e, e, lane) + (bb ? bb[p] : T(0));
      const T wp = top == -INFINITY ? T(0) : att_exp(s - top);
      const T dwp = warp_dot(g + r * dv, vb + j * dv, dv, lane);
      if (lane == 0) {
        wb[p] = wp;
        dsb[p] = dwp;
      }
      dot += wp * dwp;
    }
    __syncwarp();
    for (int64_t t = lane; t < e; t += 32) dqi[t] = T(0);
    for (int64_t p = lo; p < hi; ++p) {
      const int64_t j = col[p];
      if (j < 0 || j >= ncols) continue;
      const T d = wb[p] * (dsb[p] - dot + gl);
      __syncwarp();  // every lane has read dsb[p] before lane 0 overwrites it
      if (lane == 0) dsb[p] = d;
      const T* kj = kb + j * e;
      for (int64_t t = lane; t < e; t += 32) dqi[t] += d * kj[t];
    }
    for (int64_t t = lane; t < e; t += 32) dqi[t] *= scale;
  }
}

// The columns pass (sf_csr_attention_backward_cols): a warp per column of
// the transposed pattern; bad spans or entries are skipped.
template <class T>
__global__ void attention_cols_kernel(T* dk, T* dv_out, const int64_t* crow_t,
                                      const int64_t* row_t, const int64_t* perm, int64_t nrows,
                                      int64_t ncols, int64_t nse, int64_t total, const T* ds,
                                      const T* w, const T* q, const T* g, int64_t e, int64_t dv,
                                      T scale) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
  for (int64_t c = warp; c < total; c += warps) {
    const int64_t b = c / ncols, j = c - b * ncols;
    const T* qb = q + b * nrows * e;
    const T* gb = g + b * nrows * dv;
    const T* dsb = ds + b * nse;
    const T* wb = w + b * nse;
    T* dkc = dk + c * e;
    T* dvc = dv_out + c * dv;
    for (int64_t t = lane; t < e; t += 32) dkc[t] = T(0);
    for (int64_t t = lane; t < dv; t += 32) dvc[t] = T(0);
    int64_t lo = crow_t[j], hi = crow_t[j + 1];
    if (lo < 0 || hi < lo || hi > nse) lo = hi = 0;
    for (int64_t a = lo; a < hi; ++a) {
      const int64_t i = row_t[a], p = perm[a];
      if (i < 0 || i >= nrows || p < 0 || p >= nse) continue;
      const T d = dsb[p], wp = wb[p];
      for (int64_t t = lane; t < e; t += 32) dkc[t] += d * qb[i * e + t];
      for (int64_t t = lane; t < dv; t += 32) dvc[t] += wp * gb[i * dv + t];
    }
    for (int64_t t = lane; t < e; t += 32) dkc[t] *= scale;
  }
}

template <class T>
sf_status attention_backward_impl(sf_cuda_report* report, T* dq, T* dk, T* dv_out, T* ds, T* w,
                                  const int64_t* crow, const int64_t* col, const T* bias,
                                  int64_t bias_stride, const int64_t* crow_t,
                                  const int64_t* row_t, const int64_t* perm, int64_t nrows,
                                  int64_t ncols, int64_t nse, int64_t nbatch, const T* q,
                                  const T* k, const T* v, const T* lse, const T* g,
                                  const T* g_lse, int64_t e, int64_t dv, T scale,
                                  cudaStream_t s) {
  SF_CUDA_FAIL_IF(e < 0 || dv < 0 || nbatch < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(bias_stride != 0 && bias_stride != nse, SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(nrows > 0 && nbatch > INT64_MAX / 32 / nrows, SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(ncols > 0 && nbatch > INT64_MAX / 32 / ncols, SF_ERR_INVALID_ARGUMENT);
  const int64_t rows = nbatch * nrows, cols = nbatch * ncols;
  SF_CUDA_FAIL_IF(rows > 0 && (lse == nullptr || q == nullptr || g == nullptr ||
                               (e > 0 && dq == nullptr)),
                  SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(cols > 0 && (k == nullptr || v == nullptr || crow_t == nullptr ||
                               (e > 0 && dk == nullptr) || (dv > 0 && dv_out == nullptr)),
                  SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nbatch > 0 && nse > 0 && (ds == nullptr || w == nullptr || row_t == nullptr ||
                                            perm == nullptr),
                  SF_ERR_NULL_POINTER);
  SF_CUDA_TRY(operand_scan(report, crow, col, nrows, ncols, nse, 0, s));
  if (rows > 0) {
    attention_rows_kernel<T><<<blocks_for(rows * 32), kThreads, 0, s>>>(
        dq, ds, w, crow, col, bias, bias_stride, nrows, ncols, nse, rows, q, k, v, lse, g, g_lse,
        e, dv, scale);
    SF_CUDA_TRY(launched());
  }
  if (cols > 0) {
    attention_cols_kernel<T><<<blocks_for(cols * 32), kThreads, 0, s>>>(
        dk, dv_out, crow_t, row_t, perm, nrows, ncols, nse, cols, ds, w, q, g, e, dv, scale);
    SF_CUDA_TRY(launched());
  }
  return SF_OK;
}

// ---- transpose ----------------------------------------------------------------------

// col_t[q] = the original row of element perm[q] (perm is a permutation of
// [0, nse), so every read is in bounds).
__global__ void transposed_cols_kernel(int64_t* col_t, const int64_t* perm, const int64_t* crow,
                                       int64_t nrows, int64_t nse) {
  SF_CUDA_FOR(q, nse) col_t[q] = row_of(crow, nrows, perm[q]);
}

}  // namespace

// ---- the SpGEMM state -----------------------------------------------------------------

struct sf_cuda_spgemm {
  cusparseHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  cudaDataType dt = CUDA_R_32F;
  cusparseConstSpMatDescr_t a = nullptr, b = nullptr;
  cusparseSpMatDescr_t c = nullptr;
  cusparseSpGEMMDescr_t op = nullptr;
  float one_f = 1.f, zero_f = 0.f;
  double one_d = 1.0, zero_d = 0.0;
  const void* alpha() const { return dt == CUDA_R_64F ? (const void*)&one_d : (const void*)&one_f; }
  const void* beta() const { return dt == CUDA_R_64F ? (const void*)&zero_d : (const void*)&zero_f; }
  ~sf_cuda_spgemm() {
    if (op) cusparseSpGEMM_destroyDescr(op);
    if (a) cusparseDestroySpMat(a);
    if (b) cusparseDestroySpMat(b);
    if (c) cusparseDestroySpMat(c);
  }
};

// ---- C ABI ------------------------------------------------------------------------------

extern "C" sf_status sf_cuda_csr_operand_check(sf_cuda_report* report, const int64_t* crow,
                                               const int64_t* col, int64_t nrows, int64_t ncols,
                                               int64_t nse, int full, void* stream) {
  return operand_scan(report, crow, col, nrows, ncols, nse, full, as_stream(stream));
}

// The typed entry points below share one body per function, templated on
// the value type.
template <class T>
static sf_status spmm_entry(int* cusparse_status, T* c, const int64_t* crow,
                            const int64_t* col, const T* values, int64_t nrows, int64_t ncols,
                            int64_t nse, const T* b, int64_t ldb, int64_t n, const T* row_fill,
                            int64_t row_fill_stride, const T* col_fill, const T* colsum,
                            const T* corr, void* cusparse_handle, void* workspace,
                            size_t* workspace_bytes, void* stream) {
  if (cusparse_status != nullptr) *cusparse_status = (int)CUSPARSE_STATUS_SUCCESS;
  SF_CUDA_FAIL_IF(workspace_bytes == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nrows < 0 || ncols < 0 || nse < 0 || n < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(ldb < n || ldb < 1 || row_fill_stride < 0, SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(crow == nullptr, SF_ERR_NULL_POINTER);
  if (nrows > 0 && n > 0) {
    SF_CUDA_FAIL_IF(c == nullptr, SF_ERR_NULL_POINTER);
    SF_CUDA_FAIL_IF(row_fill != nullptr && colsum == nullptr, SF_ERR_NULL_POINTER);
    SF_CUDA_FAIL_IF(col_fill != nullptr && corr == nullptr, SF_ERR_NULL_POINTER);
    if (nse > 0) {
      SF_CUDA_FAIL_IF(col == nullptr || values == nullptr || b == nullptr, SF_ERR_NULL_POINTER);
      SF_CUDA_FAIL_IF(cusparse_handle == nullptr, SF_ERR_NULL_POINTER);
    }
  }
  return spmm_impl<T>(cusparse_status, c, crow, col, values, nrows, ncols, nse, b, ldb, n,
                      row_fill, row_fill_stride, col_fill, colsum, corr,
                      static_cast<cusparseHandle_t>(cusparse_handle), workspace, workspace_bytes,
                      as_stream(stream));
}

extern "C" sf_status sf_cuda_csr_spmm_f32(int* cusparse_status, float* c, const int64_t* crow,
                                          const int64_t* col, const float* values, int64_t nrows,
                                          int64_t ncols, int64_t nse, const float* b, int64_t ldb,
                                          int64_t n, const float* row_fill,
                                          int64_t row_fill_stride, const float* col_fill,
                                          const float* colsum, const float* corr,
                                          void* cusparse_handle, void* workspace,
                                          size_t* workspace_bytes, void* stream) {
  return spmm_entry<float>(cusparse_status, c, crow, col, values, nrows, ncols, nse, b, ldb, n,
                           row_fill, row_fill_stride, col_fill, colsum, corr, cusparse_handle,
                           workspace, workspace_bytes, stream);
}

extern "C" sf_status sf_cuda_csr_spmm_f64(int* cusparse_status, double* c, const int64_t* crow,
                                          const int64_t* col, const double* values, int64_t nrows,
                                          int64_t ncols, int64_t nse, const double* b, int64_t ldb,
                                          int64_t n, const double* row_fill,
                                          int64_t row_fill_stride, const double* col_fill,
                                          const double* colsum, const double* corr,
                                          void* cusparse_handle, void* workspace,
                                          size_t* workspace_bytes, void* stream) {
  return spmm_entry<double>(cusparse_status, c, crow, col, values, nrows, ncols, nse, b, ldb, n,
                            row_fill, row_fill_stride, col_fill, colsum, corr, cusparse_handle,
                            workspace, workspace_bytes, stream);
}

extern "C" sf_status sf_cuda_csr_sddmm_f32(sf_cuda_report* report, float* out, const int64_t* crow,
                                           const int64_t* col, int64_t nrows, int64_t ncols,
                                           int64_t nse, const float* x, int64_t ldx, const float* y,
                                           int64_t ldy, int64_t n, void* stream) {
  return sddmm_impl<float>(report, out, crow, col, nrows, ncols, nse, x, ldx, y, ldy, n,
                           as_stream(stream));
}

extern "C" sf_status sf_cuda_csr_sddmm_f64(sf_cuda_report* report, double* out,
                                           const int64_t* crow, const int64_t* col, int64_t nrows,
                                           int64_t ncols, int64_t nse, const double* x,
                                           int64_t ldx, const double* y, int64_t ldy, int64_t n,
                                           void* stream) {
  return sddmm_impl<double>(report, out, crow, col, nrows, ncols, nse, x, ldx, y, ldy, n,
                            as_stream(stream));
}

extern "C" sf_status sf_cuda_csr_attention_f32(sf_cuda_report* report, float* out, float* lse,
                                               const int64_t* crow, const int64_t* col,
                                               const float* bias, int64_t bias_stride,
                                               int64_t nrows, int64_t ncols, int64_t nse,
                                               int64_t nbatch, const float* q, const float* k,
                                               const float* v, int64_t e, int64_t dv, float scale,
                                               void* stream) {
  return attention_impl<float>(report, out, lse, crow, col, bias, bias_stride, nrows, ncols, nse,
                              nbatch, q, k, v, e, dv, scale, as_stream(stream));
}

extern "C" sf_status sf_cuda_csr_attention_backward_f32(
    sf_cuda_report* report, float* dq, float* dk, float* dv_out, float* ds, float* w, const int64_t* crow,
    const int64_t* col, const float* bias, int64_t bias_stride, const int64_t* crow_t,
    const int64_t* row_t, const int64_t* perm, int64_t nrows, int64_t ncols, int64_t nse,
    int64_t nbatch, const float* q, const float* k, const float* v, const float* lse, const float* g,
    const float* g_lse, int64_t e, int64_t dv, float scale, void* stream) {
  return attention_backward_impl<float>(report, dq, dk, dv_out, ds, w, crow, col, bias, bias_stride,
                                       crow_t, row_t, perm, nrows, ncols, nse, nbatch, q, k, v,
                                       lse, g, g_lse, e, dv, scale, as_stream(stream));
}

extern "C" sf_status sf_cuda_csr_attention_f64(sf_cuda_report* report, double* out, double* lse,
                                               const int64_t* crow, const int64_t* col,
                                               const double* bias, int64_t bias_stride,
                                               int64_t nrows, int64_t ncols, int64_t nse,
                                               int64_t nbatch, const double* q, const double* k,
                                               const double* v, int64_t e, int64_t dv, double scale,
                                               void* stream) {
  return attention_impl<double>(report, out, lse, crow, col, bias, bias_stride, nrows, ncols, nse,
                              nbatch, q, k, v, e, dv, scale, as_stream(stream));
}

extern "C" sf_status sf_cuda_csr_attention_backward_f64(
    sf_cuda_report* report, double* dq, double* dk, double* dv_out, double* ds, double* w, const int64_t* crow,
    const int64_t* col, const double* bias, int64_t bias_stride, const int64_t* crow_t,
    const int64_t* row_t, const int64_t* perm, int64_t nrows, int64_t ncols, int64_t nse,
    int64_t nbatch, const double* q, const double* k, const double* v, const double* lse, const double* g,
    const double* g_lse, int64_t e, int64_t dv, double scale, void* stream) {
  return attention_backward_impl<double>(report, dq, dk, dv_out, ds, w, crow, col, bias, bias_stride,
                                       crow_t, row_t, perm, nrows, ncols, nse, nbatch, q, k, v,
                                       lse, g, g_lse, e, dv, scale, as_stream(stream));
}

extern "C" sf_status sf_cuda_csr_transpose(sf_cuda_report* report, int64_t* crow_t,
                                           int64_t* col_t, int64_t* perm, const int64_t* crow,
                                           const int64_t* col, int64_t nrows, int64_t ncols,
                                           int64_t nse, void* workspace, size_t* workspace_bytes,
                                           void* stream) {
  SF_CUDA_FAIL_IF(workspace_bytes == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nrows < 0 || ncols < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  const cudaStream_t s = as_stream(stream);
  if (workspace == nullptr) {
    return sort_into_buckets(nullptr, nullptr, col, nse, ncols, nullptr, workspace_bytes, s);
  }
  SF_CUDA_FAIL_IF(crow_t == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse > 0 && (col_t == nullptr || perm == nullptr), SF_ERR_NULL_POINTER);
  SF_CUDA_TRY(operand_scan(report, crow, col, nrows, ncols, nse, 1, s));
  // Bucket = column, stable: within a column the rows stay increasing, as
  // the CPU's counting sort leaves them. A bad (negative or too large)
  // column sorts anywhere but is never used as an address.
  SF_CUDA_TRY(sort_into_buckets(perm, crow_t, col, nse, ncols, workspace, workspace_bytes, s));
  if (nse > 0) {
    transposed_cols_kernel<<<blocks_for(nse), kThreads, 0, s>>>(col_t, perm, crow, nrows, nse);
    SF_CUDA_TRY(launched());
  }
  return SF_OK;
}

template <class T>
static sf_status spgemm_create(sf_cuda_spgemm** state, int* cusparse_status,
                               void* cusparse_handle, int64_t m, int64_t k, int64_t n,
                               const int32_t* crow_a, const int32_t* col_a, const T* val_a,
                               int64_t nse_a, const int32_t* crow_b, const int32_t* col_b,
                               const T* val_b, int64_t nse_b, void* stream) {
  if (cusparse_status != nullptr) *cusparse_status = (int)CUSPARSE_STATUS_SUCCESS;
  SF_CUDA_FAIL_IF(state == nullptr, SF_ERR_NULL_POINTER);
  *state = nullptr;
  SF_CUDA_FAIL_IF(m < 0 || k < 0 || n < 0 || nse_a < 0 || nse_b < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(m > INT32_MAX || k > INT32_MAX || n > INT32_MAX || nse_a > INT32_MAX ||
                      nse_b > INT32_MAX,
                  SF_ERR_OVERFLOW);
  SF_CUDA_FAIL_IF(m == 0 || n == 0 || nse_a == 0 || nse_b == 0, SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(cusparse_handle == nullptr || crow_a == nullptr || col_a == nullptr ||
                      val_a == nullptr || crow_b == nullptr || col_b == nullptr ||
                      val_b == nullptr,
                  SF_ERR_NULL_POINTER);
  auto* st = new (std::nothrow) sf_cuda_spgemm;
  SF_CUDA_FAIL_IF(st == nullptr, SF_ERR_NO_MEMORY);
  *state = st;  // the caller destroys it, also after an error below
  st->handle = static_cast<cusparseHandle_t>(cusparse_handle);
  st->stream = as_stream(stream);
  st->dt = real_type<T>();
  SF_CUDA_TRY(bind_handle(st->handle, st->stream, cusparse_status));
  SF_CUSPARSE_TRY(cusparseCreateConstCsr(&st->a, m, k, nse_a, crow_a, col_a, val_a,
                                         CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                         CUSPARSE_INDEX_BASE_ZERO, st->dt),
                  cusparse_status);
  SF_CUSPARSE_TRY(cusparseCreateConstCsr(&st->b, k, n, nse_b, crow_b, col_b, val_b,
                                         CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                         CUSPARSE_INDEX_BASE_ZERO, st->dt),
                  cusparse_status);
  SF_CUSPARSE_TRY(cusparseCreateCsr(&st->c, m, n, 0, nullptr, nullptr, nullptr,
                                    CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                    CUSPARSE_INDEX_BASE_ZERO, st->dt),
                  cusparse_status);
  SF_CUSPARSE_TRY(cusparseSpGEMM_createDescr(&st->op), cusparse_status);
  return SF_OK;
}

extern "C" sf_status sf_cuda_spgemm_create_f32(sf_cuda_spgemm** state, int* cusparse_status,
                                               void* cusparse_handle, int64_t m, int64_t k,
                                               int64_t n, const int32_t* crow_a,
                                               const int32_t* col_a, const float* val_a,
                                               int64_t nse_a, const int32_t* crow_b,
                                               const int32_t* col_b, const float* val_b,
                                               int64_t nse_b, void* stream) {
  return spgemm_create<float>(state, cusparse_status, cusparse_handle, m, k, n, crow_a, col_a,
                              val_a, nse_a, crow_b, col_b, val_b, nse_b, stream);
}

extern "C" sf_status sf_cuda_spgemm_create_f64(sf_cuda_spgemm** state, int* cusparse_status,
                                               void* cusparse_handle, int64_t m, int64_t k,
                                               int64_t n, const int32_t* crow_a,
                                               const int32_t* col_a, const double* val_a,
                                               int64_t nse_a, const int32_t* crow_b,
                                               const int32_t* col_b, const double* val_b,
                                               int64_t nse_b, void* stream) {
  return spgemm_create<double>(state, cusparse_status, cusparse_handle, m, k, n, crow_a, col_a,
                               val_a, nse_a, crow_b, col_b, val_b, nse_b, stream);
}

extern "C" sf_status sf_cuda_spgemm_estimate(sf_cuda_spgemm* st, int* cusparse_status,
                                             void* workspace, size_t* workspace_bytes) {
  if (cusparse_status != nullptr) *cusparse_status = (int)CUSPARSE_STATUS_SUCCESS;
  SF_CUDA_FAIL_IF(st == nullptr || st->op == nullptr || workspace_bytes == nullptr,
                  SF_ERR_NULL_POINTER);
  SF_CUDA_TRY(bind_handle(st->handle, st->stream, cusparse_status));
  // cuSPARSE's own protocol: a NULL buffer asks for the size.
  if (workspace == nullptr) *workspace_bytes = 0;
  SF_CUSPARSE_TRY(cusparseSpGEMM_workEstimation(
                      st->handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                      CUSPARSE_OPERATION_NON_TRANSPOSE, st->alpha(), st->a, st->b, st->beta(),
                      st->c, st->dt, CUSPARSE_SPGEMM_DEFAULT, st->op, workspace_bytes, workspace),
                  cusparse_status);
  return SF_OK;
}

extern "C" sf_status sf_cuda_spgemm_compute(sf_cuda_spgemm* st, int* cusparse_status,
                                            void* workspace, size_t* workspace_bytes,
                                            int64_t* nse_c) {
  if (cusparse_status != nullptr) *cusparse_status = (int)CUSPARSE_STATUS_SUCCESS;
  SF_CUDA_FAIL_IF(st == nullptr || st->op == nullptr || workspace_bytes == nullptr,
                  SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(workspace != nullptr && nse_c == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_TRY(bind_handle(st->handle, st->stream, cusparse_status));
  if (workspace == nullptr) *workspace_bytes = 0;
  SF_CUSPARSE_TRY(cusparseSpGEMM_compute(st->handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                         CUSPARSE_OPERATION_NON_TRANSPOSE, st->alpha(), st->a,
                                         st->b, st->beta(), st->c, st->dt,
                                         CUSPARSE_SPGEMM_DEFAULT, st->op, workspace_bytes,
                                         workspace),
                  cusparse_status);
  if (workspace == nullptr) return SF_OK;
  int64_t rows = 0, cols = 0, nnz = 0;
  SF_CUSPARSE_TRY(cusparseSpMatGetSize(st->c, &rows, &cols, &nnz), cusparse_status);
  SF_CUDA_FAIL_IF(nnz < 0, SF_ERR_INVALID_ARGUMENT);
  *nse_c = nnz;
  // 32-bit column indices cannot address more: refuse, never truncate.
  SF_CUDA_FAIL_IF(nnz > INT32_MAX, SF_ERR_OVERFLOW);
  return SF_OK;
}

template <class T>
static sf_status spgemm_copy(sf_cuda_spgemm* st, int* cusparse_status, int32_t* crow_c,
                             int32_t* col_c, T* val_c) {
  if (cusparse_status != nullptr) *cusparse_status = (int)CUSPARSE_STATUS_SUCCESS;
  SF_CUDA_FAIL_IF(st == nullptr || st->op == nullptr || crow_c == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(st->dt != real_type<T>(), SF_ERR_INVALID_ARGUMENT);  // the state's own type
  SF_CUDA_TRY(bind_handle(st->handle, st->stream, cusparse_status));
  SF_CUSPARSE_TRY(cusparseCsrSetPointers(st->c, crow_c, col_c, val_c), cusparse_status);
  SF_CUSPARSE_TRY(cusparseSpGEMM_copy(st->handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                      CUSPARSE_OPERATION_NON_TRANSPOSE, st->alpha(), st->a, st->b,
                                      st->beta(), st->c, st->dt, CUSPARSE_SPGEMM_DEFAULT, st->op),
                  cusparse_status);
  return SF_OK;
}

extern "C" sf_status sf_cuda_spgemm_copy_f32(sf_cuda_spgemm* st, int* cusparse_status,
                                             int32_t* crow_c, int32_t* col_c, float* val_c) {
  return spgemm_copy<float>(st, cusparse_status, crow_c, col_c, val_c);
}

extern "C" sf_status sf_cuda_spgemm_copy_f64(sf_cuda_spgemm* st, int* cusparse_status,
                                             int32_t* crow_c, int32_t* col_c, double* val_c) {
  return spgemm_copy<double>(st, cusparse_status, crow_c, col_c, val_c);
}

extern "C" void sf_cuda_spgemm_destroy(sf_cuda_spgemm* st) { delete st; }
