// sf_cuda_products.cu -- the matrix products (ops/products/) on the device,
// behind the C ABI of sparsefill_cuda.h. No torch headers.
//
// A (m x k) with fill F is A0 + F, A0 = the stored values minus F at their
// positions (RFC.md#sparse-at-dense). A @ B = A0 @ B + F @ B, and F @ B is rank one:
// rf_i (1^T B) + (cf^T B). The correction is written by one kernel of ours,
// then cuSPARSE's SpMM / SpMV adds A0 @ B on top (beta = 1): C is written
// by the correction and updated once by the library, and nothing of size
// m x k exists. The sampled product (SDDMM) and the transposed pattern are
// plain kernels here; the fill-0 SpGEMM is sf_cuda_spgemm.cu's, the fused
// attention sf_cuda_attention.cu's, the operand check sf_cuda_csr.cu's.
#include "sf_cuda_cusparse.cuh"

#include <climits>

using namespace sf_cuda;

namespace {

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
    c[e] = T(0) + (corr ? v + corr[t] : v);  // from +0, as the CPU twin (templates/products.h)
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

// ---- transpose ----------------------------------------------------------------------

// col_t[q] = the original row of element perm[q] (perm is a permutation of
// [0, nse), so every read is in bounds).
__global__ void transposed_cols_kernel(int64_t* col_t, const int64_t* perm, const int64_t* crow,
                                       int64_t nrows, int64_t nse) {
  SF_CUDA_FOR(q, nse) col_t[q] = row_of(crow, nrows, perm[q]);
}

}  // namespace

// ---- the typed entry points -------------------------------------------------------------
// One template per entry (entry::<name>); generated/sf_cuda_products_entries.inc
// (tools/codegen/native.yaml) defines the C ABI's _f32 / _f64 twins that call them.

namespace entry {

template <class T>
sf_status csr_spmm(int* cusparse_status, T* c, const int64_t* crow, const int64_t* col,
                   const T* values, int64_t nrows, int64_t ncols, int64_t nse, const T* b,
                   int64_t ldb, int64_t n, const T* row_fill, int64_t row_fill_stride,
                   const T* col_fill, const T* colsum, const T* corr, void* cusparse_handle,
                   void* workspace, size_t* workspace_bytes, void* stream) {
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

template <class T>
sf_status csr_sddmm(sf_cuda_report* report, T* out, const int64_t* crow, const int64_t* col,
                    int64_t nrows, int64_t ncols, int64_t nse, const T* x, int64_t ldx, const T* y,
                    int64_t ldy, int64_t n, void* stream) {
  return sddmm_impl<T>(report, out, crow, col, nrows, ncols, nse, x, ldx, y, ldy, n,
                       as_stream(stream));
}

}  // namespace entry

#include "generated/sf_cuda_products_entries.inc"

// ---- the C ABI's untyped entries --------------------------------------------------------

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
