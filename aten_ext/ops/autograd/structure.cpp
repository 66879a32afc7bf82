// ops/autograd/structure.cpp -- the backward formula of the structural op
// that has one (ops/structure.h): from_dense. The
// forward calls the op below autograd, through the dispatcher, so these
// serve every device.
#include <torch/library.h>
#include <torch/csrc/autograd/custom_function.h>

#include <ATen/ExpandUtils.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include "ops/common/fill.h"
#include "ops/structure.h"

namespace sparsefill {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Gradient to `self`: stored positions get their value's gradient; the fill's
// gradient (the sum over unspecified elements) is shared equally among the
// unspecified elements -- the projection documented in RFC.md "Gradients".
class FromDense : public torch::autograd::Function<FromDense> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& self, const Tensor& fill,
                               int64_t sparse_dim) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [indices, values, fill_out] = call::from_dense(self, fill, sparse_dim);
    ctx->save_for_backward({indices});
    ctx->saved_data["self_sizes"] = self.sizes().vec();
    ctx->saved_data["sparse_dim"] = sparse_dim;
    ctx->saved_data["fill_sizes"] = fill_out.sizes().vec();
    ctx->saved_data["per_slice"] = is_per_slice_fill(fill_out, self.dim() - sparse_dim);
    ctx->mark_non_differentiable({indices});
    return {indices, values, fill_out};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Tensor indices = ctx->get_saved_variables()[0];
    auto self_sizes = ctx->saved_data["self_sizes"].toIntVector();
    const int64_t sparse_dim = ctx->saved_data["sparse_dim"].toInt();
    at::IntArrayRef sizes(self_sizes);
    auto sparse_size = sizes.slice(0, sparse_dim);
    auto dense_shape = sizes.slice(sparse_dim);
    int64_t rows = 1, dense_numel = 1;
    for (auto s : sparse_size) rows *= s;
    for (auto s : dense_shape) dense_numel *= s;
    Tensor g_values = grads[1];
    Tensor g_fill = grads[2];
    const int64_t nse = indices.size(1);
    const Tensor linear = nse > 0 ? call::coo_linearize(indices, sparse_size) : Tensor();
    auto opts = g_values.defined() ? g_values.options() : g_fill.options();
    Tensor g_self;
    const int64_t unspecified = rows - nse;
    auto fill_sizes = ctx->saved_data["fill_sizes"].toIntVector();
    if (g_fill.defined() && ctx->saved_data["per_slice"].toBool()) {
      // Per-slice fill: each fill element's gradient is shared among the
      // unspecified elements it covers, counted per element.
      Tensor cover = at::ones(cat_sizes({rows}, dense_shape), opts);
      if (nse > 0) cover.index_fill_(0, linear, 0);
      Tensor count = at::sum_to(cover.view(sizes), fill_sizes).clamp_min(1);
      g_self = (g_fill / count).expand(sizes).contiguous().view(cat_sizes({rows}, dense_shape));
    } else if (g_fill.defined() && unspecified > 0 && dense_numel > 0) {
      const int64_t per_fill_element = unspecified * (dense_numel / std::max<int64_t>(g_fill.numel(), 1));
      g_self = (g_fill / per_fill_element).expand(dense_shape).expand(cat_sizes({rows}, dense_shape)).clone();
    } else {
      g_self = at::zeros(cat_sizes({rows}, dense_shape), opts);
    }
    if (nse > 0) {
      Tensor gv = g_values.defined() ? g_values : at::zeros(cat_sizes({nse}, dense_shape), opts);
      g_self = g_self.index_copy(0, linear, gv);
    }
    return {g_self.view(self_sizes), Tensor(), Tensor()};
  }
};

std::tuple<Tensor, Tensor, Tensor> from_dense_autograd(const Tensor& self, const Tensor& fill,
                                                       int64_t sparse_dim) {
  auto out = FromDense::apply(self, fill, sparse_dim);
  return {out[0], out[1], out[2]};
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {
  m.impl("from_dense", &sparsefill::from_dense_autograd);
}
