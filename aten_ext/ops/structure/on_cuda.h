// ops/structure/on_cuda.h -- what the structural ops' CUDA kernels share
// (indices.cpp, union.cpp; CUDA build only): COO indices checked for the
// device, the CUDA core's COO scan and delinearisation.
#pragma once

#include <ATen/ops/empty.h>

#include <vector>

#include "ops/common/cuda.h"
#include "ops/structure/structure.h"

namespace sparsefill {

inline Tensor coo_indices_arg(const Tensor& indices_in, const std::vector<int64_t>& size,
                       at::IntArrayRef sparse_size) {
  Tensor indices = index_arg(indices_in, "indices", 2, kCUDA);
  TORCH_CHECK(indices.size(0) == (int64_t)size.size(), "sparsefill: indices has ",
              indices.size(0), " rows but the tensor has ", size.size(),
              " sparse dimensions (size ", sparse_size, ")");
  TORCH_CHECK((int64_t)size.size() <= SF_CUDA_MAX_DIMS, "sparsefill: the CUDA kernels take at most ",
              SF_CUDA_MAX_DIMS, " sparse dimensions, got ", size.size());
  return indices;
}

// Launch the checked scan (linear may be undefined: check only).
inline void launch_coo_scan(sf_cuda_report* report, const Tensor& linear, const Tensor& indices,
                     const std::vector<int64_t>& size) {
  check_call(sf_cuda_coo_check(report, linear.defined() ? linear.data_ptr<int64_t>() : nullptr,
                               indices.data_ptr<int64_t>(), indices.size(0), indices.size(1),
                               size.data(), current_stream()),
             "indices");
}

// report == nullptr: the linear indices are known to be in range.
inline Tensor delinearize(sf_cuda_report* report, const Tensor& linear, const std::vector<int64_t>& size) {
  TORCH_CHECK((int64_t)size.size() <= SF_CUDA_MAX_DIMS, "sparsefill: the CUDA kernels take at most ",
              SF_CUDA_MAX_DIMS, " sparse dimensions, got ", size.size());
  Tensor indices = at::empty({(int64_t)size.size(), linear.numel()}, linear.options());
  check_call(sf_cuda_coo_delinearize(report, indices.data_ptr<int64_t>(),
                                     linear.data_ptr<int64_t>(), (int64_t)size.size(),
                                     linear.numel(), size.data(), current_stream()),
             "linear indices");
  return indices;
}

}  // namespace sparsefill
