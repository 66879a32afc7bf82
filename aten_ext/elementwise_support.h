// elementwise_support.h -- the fixed parts of every element-wise op, shared by
// the kernels and autograd functions that tools/codegen writes into
// generated/elementwise.cpp. An op's own formula arrives as a callable.
//
//   unary / scalar:  values -> f(values), fill -> f(fill); same pattern.
//   binary:          the union of both patterns; where one operand stores no
//                    element its fill stands in (gather_with_fill);
//                    result fill = f(fill_a, fill_b). Same pattern: <name>_same,
//                    values only, no merge.
#pragma once

#include "sf_glue.h"

#include <ATen/ScalarOps.h>
#include <torch/autograd.h>

#include <optional>
#include <string>

namespace sparsefill {

inline std::tuple<Tensor, Tensor, Tensor> call_union_plan(const Tensor& a, const Tensor& b,
                                                          at::IntArrayRef sparse_size) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::union_plan", "")
                       .typed<std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&,
                                                                 at::IntArrayRef)>();
  return op.call(a, b, sparse_size);
}

inline Tensor call_gather_with_fill(const Tensor& values, const Tensor& fill, const Tensor& src) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::gather_with_fill", "")
                       .typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
  return op.call(values, fill, src);
}

// A fill broadcasts to the dense part, or is a per-slice fill (RFC.md 1.5)
// whose trailing dims do: per-value math then broadcasts it unchanged.
inline void check_unary_args(const Tensor& values, const Tensor& fill) {
  TORCH_CHECK(values.dim() >= 1, "sparsefill: values must have a leading nse dimension, got shape ",
              values.sizes());
  auto dense = values.sym_sizes().slice(1);
  const bool ok = broadcasts_to(fill.sym_sizes(), dense) ||
                  (fill.dim() > (int64_t)dense.size() &&
                   broadcasts_to(fill.sym_sizes().slice(fill.dim() - dense.size()), dense));
  TORCH_CHECK(ok, "sparsefill: fill of shape ", fill.sym_sizes(),
              " is neither broadcastable to the dense part ", dense,
              " nor a per-slice fill whose trailing dims are");
  TORCH_CHECK(fill.device() == values.device(), "sparsefill: fill is on ", fill.device(),
              " but values are on ", values.device());
}

// One operand's elements on the union pattern `indices`: its stored rows
// where src >= 0, its fill elsewhere. A dense-part fill is one row (the C
// core's gather); a per-slice fill is read at each position (RFC.md 1.5).
inline Tensor on_union(const Tensor& values, const Tensor& fill, const Tensor& src,
                       const Tensor& indices) {
  if (!is_per_slice_fill(fill, values)) return call_gather_with_fill(values, fill, src);
  Tensor out = fill_rows_at(fill.to(values.scalar_type()), indices, values.sizes().slice(1))
                   .contiguous();
  Tensor stored = at::nonzero(src >= 0).view(-1);
  return out.index_copy(0, stored, values.index_select(0, src.index_select(0, stored)));
}

// Operands of a binary op, aligned on one pattern.
struct Aligned {
  Tensor indices;  // the result pattern
  Tensor a, b;     // values of each operand on that pattern
  Tensor src_a, src_b;  // where each union element comes from (-1: the fill)
};

// Always merges: the same-pattern case has its own op (<name>_same), chosen by
// the caller, so nothing here looks at index data (the backward may be traced).
inline Aligned align_binary(const Tensor& indices_a, const Tensor& values_a, const Tensor& fill_a,
                            const Tensor& indices_b, const Tensor& values_b, const Tensor& fill_b,
                            at::IntArrayRef size) {
  check_unary_args(values_a, fill_a);
  check_unary_args(values_b, fill_b);
  TORCH_CHECK(indices_a.dim() == 2 && indices_b.dim() == 2 && indices_a.size(0) == indices_b.size(0),
              "sparsefill: operands must have the same number of sparse dimensions, got indices of shape ",
              indices_a.sizes(), " and ", indices_b.sizes());
  const int64_t sparse_dim = indices_a.size(0);
  TORCH_CHECK(sparse_dim <= (int64_t)size.size(), "sparsefill: size ", size,
              " has fewer dimensions than the operands' ", sparse_dim, " sparse dimensions");
  TORCH_CHECK(broadcasts_to(size.slice(sparse_dim), values_a.sym_sizes().slice(1)) &&
                  values_a.dim() == values_b.dim() &&
                  values_a.sym_sizes().slice(1).equals(values_b.sym_sizes().slice(1)),
              "sparsefill: operands' dense parts ", values_a.sym_sizes().slice(1), " and ",
              values_b.sym_sizes().slice(1), " must both equal ", size.slice(sparse_dim));
  auto [indices, src_a, src_b] = call_union_plan(indices_a, indices_b, size.slice(0, sparse_dim));
  return {indices, on_union(values_a, fill_a, src_a, indices),
          on_union(values_b, fill_b, src_b, indices), src_a, src_b};
}

// Three patterns on their union: the union's indices and, per operand, where
// each union element comes from (-1: its fill stands in).
inline std::tuple<Tensor, Tensor, Tensor, Tensor> align_ternary(const Tensor& ia, const Tensor& ib,
                                                                const Tensor& ic,
                                                                at::IntArrayRef size) {
  TORCH_CHECK(ia.dim() == 2 && ib.dim() == 2 && ic.dim() == 2 && ia.size(0) == ib.size(0) &&
                  ia.size(0) == ic.size(0),
              "sparsefill: operands must have the same number of sparse dimensions, got indices "
              "of shape ", ia.sizes(), ", ", ib.sizes(), " and ", ic.sizes());
  auto sparse_size = size.slice(0, ia.size(0));
  auto [iab, sa, sb] = call_union_plan(ia, ib, sparse_size);
  auto [indices, sab, sc] = call_union_plan(iab, ic, sparse_size);
  // Compose: union position -> position in (a u b) -> position in a (or b).
  // A -1 put in front of src makes sab == -1 land on it, with no size checks
  // (which a traced backward could not make).
  auto through = [&](const Tensor& src) {
    return at::cat({at::full({1}, -1, src.options()), src}).index_select(0, sab + 1);
  };
  return {indices, through(sa), through(sb), sc};
}

// Gradient on the union pattern `g_union` of one operand, split back onto
// that operand: its stored elements get their rows; rows where its fill stood
// in add to the fill's gradient (the union-pattern term of RFC.md).
// A per-slice fill takes each row's gradient at that row's slot (`indices`:
// the union pattern).
inline std::pair<Tensor, Tensor> split_union_grad(const Tensor& g_union, const Tensor& src,
                                                  const Tensor& g_fill_from_fill,
                                                  const Tensor& fill, const Tensor& indices) {
  Tensor stored = at::nonzero(src >= 0).view(-1);
  Tensor from_fill = at::nonzero(src < 0).view(-1);
  Tensor g_values = g_union.index_select(0, stored);
  Tensor g_rows = g_union.index_select(0, from_fill);
  Tensor g_subst = fill.dim() > g_union.dim() - 1
                       ? fill_rows_grad(g_rows, fill, indices.index_select(1, from_fill))
                       : grad_to(g_rows.sum(0), fill);
  Tensor g_fill = grad_to(g_fill_from_fill, fill) + g_subst;
  return {g_values, g_fill};
}

// Where clamp(self, min, max) passes self through (its gradient is 1 there).
inline Tensor clamp_mask(const Tensor& self, const std::optional<at::Scalar>& min,
                         const std::optional<at::Scalar>& max) {
  Tensor mask = at::ones_like(self, self.options().dtype(at::kBool));
  if (min.has_value()) mask = mask & (self >= *min);
  if (max.has_value()) mask = mask & (self <= *max);
  return mask;
}

inline Tensor defined_or_zeros(const Tensor& g, const Tensor& like) {
  return g.defined() ? g : at::zeros_like(like);
}

}  // namespace sparsefill
