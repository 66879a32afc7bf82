// ops/common/grad.h -- small rules the backward formulas of every family share.
#pragma once

#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/zeros_like.h>

namespace sparsefill {

using at::Tensor;

// Gradient `g` of something broadcast from `like`'s shape: reduce it back to
// that shape (expanding first when g is the smaller one, e.g. a scalar grad).
//   grad_to(g_of_fill_times_values, fill)
inline Tensor grad_to(const Tensor& g, const Tensor& like) {
  if (!g.defined()) return g;
  auto shape = like.sym_sizes();
  if (g.sym_sizes().equals(shape)) return g;
  auto full = at::infer_size_symint(g.sym_sizes(), shape);
  return at::sum_to(g.expand_symint(full), shape);
}

// An output's gradient, or zeros when autograd passes none (that output was
// not used): formulas that combine both outputs' gradients need both.
inline Tensor defined_or_zeros(const Tensor& g, const Tensor& like) {
  return g.defined() ? g : at::zeros_like(like);
}

}  // namespace sparsefill
