// sf_cuda_attention.cu -- fused sparse attention on a CSR pattern and its
// backward on the device (the twins of ../cpu/sf_attention.c), behind the C ABI
// of sparsefill_cuda.h: a warp per row with an online softmax, heads sharing
// the pattern; the backward a warp per row, then per column of the transposed
// pattern, so every output has one writer (deterministic). No torch headers,
// no cuSPARSE.
#include "sf_cuda_internal.cuh"

#include <climits>

using namespace sf_cuda;

namespace {

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

}  // namespace

// ---- the typed entry points -------------------------------------------------------------
// One template per entry; generated/sf_cuda_attention_entries.inc
// (tools/codegen/native.yaml) defines the C ABI's _f32 / _f64 twins.

namespace entry {

template <class T>
sf_status csr_attention(sf_cuda_report* report, T* out, T* lse, const int64_t* crow,
                        const int64_t* col, const T* bias, int64_t bias_stride, int64_t nrows,
                        int64_t ncols, int64_t nse, int64_t nbatch, const T* q, const T* k,
                        const T* v, int64_t e, int64_t dv, T scale, void* stream) {
  return attention_impl<T>(report, out, lse, crow, col, bias, bias_stride, nrows, ncols, nse,
                           nbatch, q, k, v, e, dv, scale, as_stream(stream));
}

template <class T>
sf_status csr_attention_backward(sf_cuda_report* report, T* dq, T* dk, T* dv_out, T* ds, T* w,
                                 const int64_t* crow, const int64_t* col, const T* bias,
                                 int64_t bias_stride, const int64_t* crow_t, const int64_t* row_t,
                                 const int64_t* perm, int64_t nrows, int64_t ncols, int64_t nse,
                                 int64_t nbatch, const T* q, const T* k, const T* v, const T* lse,
                                 const T* g, const T* g_lse, int64_t e, int64_t dv, T scale,
                                 void* stream) {
  return attention_backward_impl<T>(report, dq, dk, dv_out, ds, w, crow, col, bias, bias_stride,
                                    crow_t, row_t, perm, nrows, ncols, nse, nbatch, q, k, v, lse,
                                    g, g_lse, e, dv, scale, as_stream(stream));
}

}  // namespace entry

#include "generated/sf_cuda_attention_entries.inc"
