// sf_cuda_cusparse.cuh -- the cuSPARSE plumbing that sf_cuda_products.cu
// (SpMM / SpMV) and sf_cuda_spgemm.cu (SpGEMM) share (not installed).
#pragma once

#include <cusparse.h>

#include "sf_cuda_internal.cuh"

namespace sf_cuda {

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

}  // namespace sf_cuda
