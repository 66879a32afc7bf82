// sf_cuda_core.cu -- CUDA C kernels of the core, behind the C ABI of
// sparsefill_cuda.h. No torch headers: plain nvcc compiles this file.
#include <cuda_runtime.h>

#include "../sparsefill_cuda.h"

namespace {

__global__ void rows_from_crow_kernel(int64_t* rows, const int64_t* crow, int64_t nrows) {
  const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nrows) return;
  for (int64_t k = crow[i]; k < crow[i + 1]; ++k) rows[k] = i;
}

}  // namespace

extern "C" sf_status sf_cuda_csr_rows_from_crow(int64_t* rows, const int64_t* crow,
                                                int64_t nrows, void* stream) {
  if (nrows < 0) return SF_ERR_NEGATIVE_SIZE;
  if (nrows == 0) return SF_OK;
  if (crow == nullptr || rows == nullptr) return SF_ERR_NULL_POINTER;
  const int threads = 256;
  const int64_t blocks = (nrows + threads - 1) / threads;
  rows_from_crow_kernel<<<(unsigned)blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
      rows, crow, nrows);
  return cudaPeekAtLastError() == cudaSuccess ? SF_OK : SF_ERR_INVALID_ARGUMENT;
}
