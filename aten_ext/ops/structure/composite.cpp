// ops/structure/composite.cpp -- the structural ops written once over ATen
// and the dispatcher (ops/structure.h), for every device:
// CompositeImplicitAutograd (autograd comes from their parts) and, for
// from_dense, CompositeExplicitAutograd (its backward is
// autograd/structure.cpp's).
#include <torch/library.h>

#include <ATen/ops/_assert_async.h>
#include <ATen/ops/all.h>
#include <ATen/ops/any.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/full.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/ne.h>
#include <ATen/ops/view_as_complex.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/zeros.h>

#include "ops/generated/kernels.h"
#include "ops/common/fill.h"
#include "ops/common/tracking.h"
#include "ops/structure/structure.h"

namespace sparsefill {
// Duplicates summed, through the coalescing plan.
std::tuple<Tensor, Tensor> coo_coalesce_composite(const Tensor& indices, const Tensor& values,
                                                  at::IntArrayRef sparse_size) {
  // Sizes as SymInts throughout: nse is symbolic under a tracer.
  TORCH_CHECK(values.dim() >= 1 && indices.dim() >= 1 &&
                  values.sym_size(0) == indices.sym_size(-1),
              "sparsefill: values must have one row per stored element: indices has ",
              indices.sym_size(-1), " elements, values has shape ", values.sym_sizes());
  auto [new_indices, segment] = call::coalesce_plan(indices, sparse_size);
  c10::SymDimVector shape(values.sym_sizes().begin(), values.sym_sizes().end());
  shape[0] = new_indices.sym_size(1);
  // Summed onto -0.0, the identity of IEEE addition (0.0 is not: 0.0 + -0.0
  // is +0.0): a lone -0.0 stays -0.0, as torch's coalesce keeps it.
  const bool signed_zero = at::isFloatingType(values.scalar_type()) ||
                           at::isComplexType(values.scalar_type());
  Tensor start = signed_zero ? at::full_symint(shape, -0.0, values.options())
                             : at::zeros_symint(shape, values.options());
  if (at::isComplexType(values.scalar_type())) {
    // Summed as (real, imag) pairs: ATen's complex add scales by alpha, and
    // 1 * (inf + b i) has a NaN imaginary part, where torch's coalesce and a
    // dense write keep b (fuzz seed 200180).
    Tensor pairs = at::view_as_real(start).index_add(
        0, segment, at::view_as_real(values.resolve_conj().contiguous()));
    return {new_indices, at::view_as_complex(pairs)};
  }
  if (at::isReducedFloatingType(values.scalar_type())) {
    // Duplicates of a half type summed in float32 and rounded once: a dense
    // index_put(accumulate=True) is never more exact (fuzz seed 420753:
    // 133.0 where it and the float64 sum give 133.5).
    return {new_indices,
            start.to(at::kFloat).index_add(0, segment, values.to(at::kFloat))
                .to(values.scalar_type())};
  }
  Tensor new_values = start.index_add(0, segment, values);
  return {new_indices, new_values};
}

// Rows values[src], the fill's row where src == -1 (common/fill.h): ATen
// ops, so differentiable in values and fill to any order, in forward mode
// and under vmap (docs/design.md#composite-elementwise). src's range is checked without a host sync
// of ours (_assert_async: synchronous on the CPU, traceable).
Tensor gather_with_fill_composite(const Tensor& values, const Tensor& fill, const Tensor& src) {
  TORCH_CHECK(values.dim() >= 1, "sparsefill: values must have a leading nse dimension");
  TORCH_CHECK(src.dim() == 1 && src.scalar_type() == at::kLong, "sparsefill: src must be a "
              "1-D int64 tensor, got dtype ", src.scalar_type(), " and shape ", src.sym_sizes());
  TORCH_CHECK(src.device() == values.device() && fill.device() == values.device(),
              "sparsefill: values, fill and src must be on one device, got ", values.device(),
              ", ", fill.device(), " and ", src.device());
  at::_assert_async(at::logical_and(src >= -1, src < c10::Scalar(values.sym_size(0))).all(),
                    "sparsefill: gather_with_fill: src (positions into values) must lie in "
                    "[-1, nse)");
  return rows_or_fill(values, fill, src);
}

// Dense tensor of `size` holding `fill` everywhere and `values` at `indices`
// (coalesced COO). Autograd from index_copy: each stored element's gradient
// goes to its value, every other element's to the fill. Out of place (one
// copy either way), so that vmap over values, or over a fill, batches it.
Tensor to_dense_composite(const Tensor& indices, const Tensor& values, const Tensor& fill,
                          at::IntArrayRef size) {
  // sym_size: size(0) reads every size of a traced tensor as an int, which
  // would specialize nse.
  const int64_t sparse_dim = indices.sym_size(0).guard_int(__FILE__, __LINE__);
  TORCH_CHECK(sparse_dim <= (int64_t)size.size(), "sparsefill: indices has ", sparse_dim,
              " rows but size has only ", size.size(), " dimensions");
  auto sparse_size = size.slice(0, sparse_dim);
  auto dense_shape = size.slice(sparse_dim);
  Tensor linear = call::coo_linearize(indices, sparse_size);
  int64_t rows = 1;
  for (auto s : sparse_size) rows *= s;
  Tensor background = fill.to(values.scalar_type()).expand(size);
  // Traced (torch.compile, sf.compile): the background materialised first.
  // Inductor lowers index_copy of a stride-0 expand into a write into the
  // fill's own one-element buffer, every stored value landing on it (the
  // whole result then the last one written); eager copies once either way.
  if (reads_no_data(background)) background = background.contiguous();
  // Also with nothing stored: the values stay in the graph (an empty result
  // requires grad as the dense one does).
  return background.reshape(cat_sizes({rows}, dense_shape))
      .index_copy(0, linear, values)
      .view(size);
}

// Stored elements that equal the fill (NaN equals NaN; a hybrid position
// goes when its whole dense part does), dropped. Differentiable w.r.t. values.
std::tuple<Tensor, Tensor> eliminate_fill_composite(const Tensor& indices, const Tensor& values,
                                                    const Tensor& fill) {
  // Sizes as SymInts: nse is symbolic under a tracer.
  TORCH_CHECK(values.dim() >= 1 && indices.dim() == 2 && values.sym_size(0) == indices.sym_size(1),
              "sparsefill: eliminate_fill needs indices (sparse_dim, nse) and values (nse, ...), "
              "got ", indices.sym_sizes(), " and ", values.sym_sizes());
  Tensor v = values.detach();
  Tensor f = fill.detach().to(v.scalar_type());
  // A per-slice fill is compared with each stored row's own fill.
  if (is_per_slice_fill(f, v.dim() - 1)) f = fill_rows_at(f, indices, v.sym_sizes().slice(1));
  Tensor same = at::eq(v, f);
  if (at::isFloatingType(v.scalar_type()) || at::isComplexType(v.scalar_type())) {
    same = at::logical_or(same, at::logical_and(at::isnan(v), at::isnan(f)));
  }
  if (same.dim() > 1) same = same.flatten(1).all(1);
  Tensor keep = at::nonzero(at::logical_not(same)).view({-1});
  return {indices.index_select(1, keep), values.index_select(0, keep)};
}

// Stored = sparse positions where some element of the dense part differs from
// the fill (NaN equals NaN).
std::tuple<Tensor, Tensor, Tensor> from_dense_composite(const Tensor& self, const Tensor& fill_in,
                                                        int64_t sparse_dim) {
  TORCH_CHECK(sparse_dim >= 0 && sparse_dim <= self.dim(), "sparsefill: sparse_dim must be in [0, ",
              self.dim(), "], got ", sparse_dim);
  auto dense_shape = self.sizes().slice(sparse_dim);
  // A dense-part fill, or a per-slice fill of full rank (RFC.md#per-slice-fills): either
  // way `self != fill` broadcasts element by element.
  TORCH_CHECK(broadcasts_to(fill_in.sizes(), dense_shape) ||
                  (sparse_dim > 0 && fill_in.dim() == self.dim() &&
                   broadcasts_to(fill_in.sizes(), self.sizes())),
              "sparsefill: fill_value of shape ", fill_in.sizes(),
              " is not broadcastable to the dense part's shape ", dense_shape,
              " nor a per-slice fill broadcastable to ", self.sizes());
  Tensor fill = fill_in.to(self.scalar_type());
  // x != fill decides alone unless the fill holds a NaN (NaN != NaN is true).
  const bool nan_fill = (at::isFloatingType(self.scalar_type()) ||
                         at::isComplexType(self.scalar_type())) &&
                        at::isnan(fill).any().item<bool>();
  Tensor differs = nan_fill ? at::logical_not(at::logical_or(
                                  at::eq(self, fill), at::logical_and(at::isnan(self), at::isnan(fill))))
                            : at::ne(self, fill);
  int64_t rows = 1, dense_numel = 1;
  for (int64_t d = 0; d < sparse_dim; ++d) rows *= self.size(d);
  for (auto s : dense_shape) dense_numel *= s;
  if (self.dim() > sparse_dim) differs = differs.reshape({rows, dense_numel}).any(1);
  Tensor positions = at::nonzero(differs.reshape({-1})).view({-1});
  Tensor indices = call::coo_delinearize(positions, self.sizes().slice(0, sparse_dim));
  Tensor values = self.reshape(cat_sizes({rows}, dense_shape)).index_select(0, positions);
  return {indices, values.contiguous(), fill.clone()};
}

}  // namespace sparsefill
