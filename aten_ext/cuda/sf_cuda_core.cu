// sf_cuda_core.cu -- CUDA C kernels of the core, behind the C ABI of
// sparsefill_cuda.h. No torch headers: plain nvcc compiles this file.
#include <cuda_runtime.h>

#include "../sparsefill_cuda.h"

namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;  // beyond that, threads stride

// One thread per row (grid-stride): row i writes its index over
// [crow[i], crow[i + 1]).
__global__ void rows_from_crow_kernel(int64_t* __restrict__ rows,
                                      const int64_t* __restrict__ crow, int64_t nrows) {
  const int64_t stride = (int64_t)gridDim.x * blockDim.x;
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < nrows; i += stride) {
    const int64_t end = crow[i + 1];
    for (int64_t k = crow[i]; k < end; ++k) rows[k] = i;
  }
}

}  // namespace

extern "C" sf_status sf_cuda_csr_rows_from_crow(int64_t* rows, const int64_t* crow,
                                                int64_t nrows, void* stream) {
  if (nrows < 0) return SF_ERR_NEGATIVE_SIZE;
  if (crow == nullptr) return SF_ERR_NULL_POINTER;  // crow has nrows + 1 >= 1 entries
  if (nrows == 0) return SF_OK;
  // rows may be NULL only when nse == crow[nrows] == 0 (torch gives empty
  // tensors a NULL data pointer); the host cannot read crow[nrows] without a
  // sync, so it takes NULL as that promise: all rows empty, nothing to write.
  if (rows == nullptr) return SF_OK;
  int64_t blocks = (nrows + kThreads - 1) / kThreads;
  if (blocks > kMaxBlocks) blocks = kMaxBlocks;
  rows_from_crow_kernel<<<(unsigned)blocks, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      rows, crow, nrows);
  // Peek, not Get: the CUDA error stays for the caller's own launch check.
  return cudaPeekAtLastError() == cudaSuccess ? SF_OK : SF_ERR_INVALID_ARGUMENT;
}
