// ops/products/on_cuda.h -- what the products' CUDA kernels share (spmm.cpp,
// attention.cpp, spgemm.cpp; CUDA build only): torch's cuSPARSE handle, a core
// call's cuSPARSE error, and the CPU kernels' argument rules on CUDA tensors.
#pragma once

// CUDAContextLight.h declares getCurrentCUDASparseHandle (it includes
// cusparse.h, which setup.py finds in the toolkit or torch's nvidia wheel).
#include <ATen/cuda/CUDAContextLight.h>

#include <utility>

#include "ops/common/cuda.h"
#include "ops/products/products.h"

namespace sparsefill {

// torch's handle, already bound to the current stream (the core binds it
// again to the stream it is given: the same one).
inline void* sparse_handle() { return at::cuda::getCurrentCUDASparseHandle(); }

// A core call that may have failed inside cuSPARSE: name the library's error.
inline void check_library_call(sf_status st, int cusparse_status, const char* what) {
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  TORCH_CHECK(st == SF_OK || cusparse_status == (int)CUSPARSE_STATUS_SUCCESS,
              "sparsefill: ", what, ": cuSPARSE failed: ",
              cusparseGetErrorString((cusparseStatus_t)cusparse_status));
  check_status(st, what);
}

// ---- the CPU kernels' argument rules, on CUDA -------------------------------------

inline void check_cuda_float(const Tensor& t, const char* name, const at::Device& device) {
  check_product_dtype(t, name);
  TORCH_CHECK(t.device() == device, "sparsefill: ", name,
              " must be on the GPU for the CUDA kernel (on ", device, ", with the indices), got ",
              t.device());
}

// The first and last row pointers, with the CPU's messages.
inline void check_operand_ends(const sf_cuda_report& r, const char* what, int64_t nse) {
  const auto st = (sf_status)r.status;
  TORCH_CHECK(st != SF_ERR_CROW_FIRST, "sparsefill: ", what, " crow_indices[0] must be 0, got ",
              r.value);
  TORCH_CHECK(st != SF_ERR_CROW_LAST, "sparsefill: ", what,
              " crow_indices[-1] must equal the number of stored elements (", nse, "), got ",
              r.value);
}

// One CSR operand's index tensors, int64 on one GPU.
inline std::pair<Tensor, Tensor> csr_index_args(const Tensor& crow_in, const Tensor& col_in) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1, kCUDA);
  Tensor col = index_arg(col_in, "col_indices", 1, kCUDA);
  same_device(crow, "crow_indices", col, "col_indices");
  return {crow, col};
}

}  // namespace sparsefill
