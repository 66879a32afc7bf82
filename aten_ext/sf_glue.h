// sf_glue.h -- what every torch-facing C++ file shares: turning C-core status
// codes into TORCH_CHECK errors that name the argument, argument checks on
// component tensors, and small autograd helpers. Header-only so that the
// project keeps only two translation units that include torch.
#pragma once

#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>

#include <cstdint>
#include <string>
#include <vector>

#include "sparsefill_core.h"

namespace sparsefill {

using at::Tensor;

// Raise a Python RuntimeError (via TORCH_CHECK) for a failed core call.
// `what` names the argument(s) the core was validating.
inline void check_status(sf_status status, const char* what,
                         const sf_site* site = nullptr) {
  if (status == SF_OK) return;
  std::string where;
  if (site != nullptr && site->position >= 0) {
    where = " (at position " + std::to_string(site->position);
    if (site->dim >= 0) where += ", dimension " + std::to_string(site->dim);
    where += ", value " + std::to_string(site->value) + ")";
  }
  TORCH_CHECK(status != SF_ERR_NO_MEMORY, "sparsefill: out of memory while processing ", what);
  TORCH_CHECK(false, "sparsefill: invalid ", what, ": ",
              sf_status_string(status), where);
}

// An index tensor the C core can read: int64, contiguous, on the CPU.
inline Tensor index_arg(const Tensor& t, const char* name, int64_t dim) {
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
  TORCH_CHECK(t.device().is_cpu(), "sparsefill: ", name,
              " must be on the CPU for the CPU kernel, got ", t.device());
  return t.to(at::kLong).contiguous();
}

inline std::vector<int64_t> sizes_arg(at::IntArrayRef size, const char* name) {
  for (size_t d = 0; d < size.size(); ++d) {
    TORCH_CHECK(size[d] >= 0, "sparsefill: ", name, " must be non-negative, got ",
                size, " (dimension ", d, ")");
  }
  int64_t numel = 0;
  check_status(sf_sizes_numel(&numel, size.data(), (int64_t)size.size()), name);
  return size.vec();
}

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

// Gradient `g` of something broadcast from `like`'s shape: reduce it back to
// that shape (expanding first when g is the smaller one, e.g. a scalar grad).
inline Tensor grad_to(const Tensor& g, const Tensor& like) {
  if (!g.defined()) return g;
  auto shape = like.sym_sizes();
  if (g.sym_sizes().equals(shape)) return g;
  auto full = at::infer_size_symint(g.sym_sizes(), shape);
  return at::sum_to(g.expand_symint(full), shape);
}

}  // namespace sparsefill
