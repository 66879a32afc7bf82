// ops/common/args.h -- checks that every family makes on component tensors
// and sizes before a core reads them; each error names the argument.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>
#include <vector>

#include "ops/common/status.h"

namespace sparsefill {

using at::Tensor;

// Two components of one op must share a device (several GPUs).
inline void same_device(const Tensor& a, const char* name_a, const Tensor& b, const char* name_b) {
  TORCH_CHECK(a.device() == b.device(), "sparsefill: ", name_a, " is on ", a.device(), " but ",
              name_b, " is on ", b.device());
}

// An index tensor a core can read: int64, contiguous, `dim`-D, on the
// kernel's device type (CPU for the C core, CUDA for the CUDA core).
//   Tensor crow = index_arg(crow_in, "crow_indices", 1);
inline Tensor index_arg(const Tensor& t, const char* name, int64_t dim,
                        c10::DeviceType device = c10::DeviceType::CPU) {
  TORCH_CHECK(t.defined(), "sparsefill: ", name, " must be a tensor");
  TORCH_CHECK(t.layout() == at::kStrided, "sparsefill: ", name,
              " must be a strided tensor, got layout ", t.layout());
  TORCH_CHECK(!at::isFloatingType(t.scalar_type()) &&
                  !at::isComplexType(t.scalar_type()) &&
                  t.scalar_type() != at::kBool,
              "sparsefill: ", name, " must be an integer tensor, got dtype ",
              t.scalar_type());
  TORCH_CHECK(t.dim() == dim, "sparsefill: ", name, " must be ", dim,
              "-D, got shape ", t.sizes());
  TORCH_CHECK(t.device().type() == device, "sparsefill: ", name, " must be on the ",
              device == c10::DeviceType::CPU ? "CPU for the CPU" : "GPU for the CUDA",
              " kernel, got ", t.device());
  return t.to(at::kLong).contiguous();
}

// Sizes that are non-negative and whose product fits int64.
inline std::vector<int64_t> sizes_arg(at::IntArrayRef size, const char* name) {
  for (size_t d = 0; d < size.size(); ++d) {
    TORCH_CHECK(size[d] >= 0, "sparsefill: ", name, " must be non-negative, got ",
                size, " (dimension ", d, ")");
  }
  int64_t numel = 0;
  check_status(sf_sizes_numel(&numel, size.data(), (int64_t)size.size()), name);
  return size.vec();
}

// a ++ b, e.g. the shape (nse, *dense_shape) of a values tensor.
inline std::vector<int64_t> cat_sizes(at::IntArrayRef a, at::IntArrayRef b) {
  std::vector<int64_t> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Can a tensor of shape `from` be expanded to `to` (numpy broadcasting)?
// Templated on int64_t / SymInt sizes so that kernels traced with symbolic
// shapes (torch.compile, opcheck) can use it too.
template <typename From, typename To>
inline bool broadcasts_to(c10::ArrayRef<From> from, c10::ArrayRef<To> to) {
  if (from.size() > to.size()) return false;
  const size_t offset = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] != 1 && from[d] != to[offset + d]) return false;
  }
  return true;
}

}  // namespace sparsefill
