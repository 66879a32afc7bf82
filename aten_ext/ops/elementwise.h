// ops/elementwise.h -- the element-wise ops: the fixed parts that every op
// shares, and one kernel body per kind of op, templated on the op's traits.
// tools/codegen writes the traits (generated/elementwise_ops.h: per op its
// name, its formula f and its derivatives d_<input>, from
// tools/codegen/elementwise.yaml) and the schemas (library.cpp reads them);
// the per-key files register each op's instance of these bodies.
//
//   unary / scalar / dense:  values -> f(values), fill -> f(fill); same pattern
//                            (CompositeExplicitAutograd: one kernel for every device).
//   binary:  NAME   the union of both patterns; where one operand stores no
//                   element its fill stands in (RFC.md); result fill =
//                   f(fill_a, fill_b). Kernel at CPU and CUDA (it reaches
//                   union_plan and gather_with_fill through the dispatcher).
//            NAME_same    both operands on one pattern: values only, no merge.
//            NAME_dense   a strided operand over the dense part; `reverse` puts it first.
//            NAME_scalar  a number operand, as NAME_dense.
//   ternary: NAME on the union of three patterns (the router turns numbers and
//            dense-part tensors into operands that store nothing).
// Backward bodies: autograd/elementwise.cpp.
#pragma once

#include <torch/library.h>

#include <ATen/ScalarOps.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/ones_like.h>

#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "ops/common/fill.h"
#include "ops/structure.h"

namespace sparsefill {

// ---- the fixed parts ---------------------------------------------------------

// A fill broadcasts to the dense part, or is a per-slice fill (RFC.md 1.5)
// whose trailing dims do: per-value math then broadcasts it unchanged.
inline void check_unary_args(const Tensor& values, const Tensor& fill) {
  TORCH_CHECK(values.dim() >= 1, "sparsefill: values must have a leading nse dimension, got shape ",
              values.sizes());
  auto dense = values.sym_sizes().slice(1);
  const bool ok = broadcasts_to(fill.sym_sizes(), dense) ||
                  (is_per_slice_fill(fill, (int64_t)dense.size()) &&
                   broadcasts_to(fill.sym_sizes().slice(fill.dim() - dense.size()), dense));
  TORCH_CHECK(ok, "sparsefill: fill of shape ", fill.sym_sizes(),
              " is neither broadcastable to the dense part ", dense,
              " nor a per-slice fill whose trailing dims are");
  TORCH_CHECK(fill.device() == values.device(), "sparsefill: fill is on ", fill.device(),
              " but values are on ", values.device());
}

// One operand's elements on the union pattern `indices`: its stored rows
// where src >= 0, its fill elsewhere. A dense-part fill is one row (the
// core's gather); a per-slice fill is read at each position (RFC.md 1.5).
inline Tensor on_union(const Tensor& values, const Tensor& fill, const Tensor& src,
                       const Tensor& indices) {
  if (!is_per_slice_fill(fill, values.dim() - 1)) return call::gather_with_fill(values, fill, src);
  Tensor out = fill_rows_at(fill.to(values.scalar_type()), indices, values.sizes().slice(1))
                   .contiguous();
  Tensor stored = at::nonzero(src >= 0).view(-1);
  return out.index_copy(0, stored, values.index_select(0, src.index_select(0, stored)));
}

// Operands of a binary op, aligned on the union of their patterns.
struct Aligned {
  Tensor indices;       // the union pattern
  Tensor a, b;          // values of each operand on that pattern
  Tensor src_a, src_b;  // where each union element comes from (-1: the fill)
};

// Always merges: the same-pattern case has its own op (<name>_same), chosen
// by the caller, so nothing here looks at index data.
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
  auto [indices, src_a, src_b] = call::union_plan(indices_a, indices_b, size.slice(0, sparse_dim));
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
  auto [iab, sa, sb] = call::union_plan(ia, ib, sparse_size);
  auto [indices, sab, sc] = call::union_plan(iab, ic, sparse_size);
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
// in add to the fill's gradient (the union-pattern term of RFC.md), a
// per-slice fill's at each row's slot (`indices`: the union pattern).
inline std::pair<Tensor, Tensor> split_union_grad(const Tensor& g_union, const Tensor& src,
                                                  const Tensor& g_fill_from_fill,
                                                  const Tensor& fill, const Tensor& indices) {
  Tensor stored = at::nonzero(src >= 0).view(-1);
  Tensor from_fill = at::nonzero(src < 0).view(-1);
  Tensor g_values = g_union.index_select(0, stored);
  Tensor g_subst = fill_rows_grad(g_union.index_select(0, from_fill), fill, indices, from_fill);
  Tensor g_fill = grad_to(g_fill_from_fill, fill) + g_subst;
  return {g_values, g_fill};
}

// Where clamp(self, min, max) passes self through (its gradient is 1 there);
// YAML derivatives use it.
inline Tensor clamp_mask(const Tensor& self, const std::optional<at::Scalar>& min,
                         const std::optional<at::Scalar>& max) {
  Tensor mask = at::ones_like(self, self.options().dtype(at::kBool));
  if (min.has_value()) mask = mask & (self >= *min);
  if (max.has_value()) mask = mask & (self <= *max);
  return mask;
}

// The work of a union op, with what its backward reuses (the alignment).
struct BinaryMerged {
  Aligned al;
  Tensor values, fill;
};
struct TernaryMerged {
  Tensor indices, src[3], on_union[3], values, fill;
};

// ---- the op lists (generated/elementwise_ops.h fills them) -------------------

template <class... Ops> struct OpList {};

// Calls f(std::type_identity<Op>()) for every Op of the list.
template <class... Ops, class F>
void for_each_op(OpList<Ops...>, F&& f) {
  (f(std::type_identity<Ops>()), ...);
}

// The op `name` + `suffix`, looked up once per instantiation.
template <class Signature>
c10::TypedOperatorHandle<Signature> variant_handle(const char* name, const char* suffix) {
  return op_handle<Signature>(("sparsefill::" + std::string(name) + suffix).c_str());
}

// An op's extra arguments (those after its tensors), as a pack: the kind
// bodies below are specialised on it. Extra<Op, n>::type is Pack<A...> for
// the formula Op::f(n tensors, A...).
template <class... A> struct Pack {};
template <class Op, int kTensors, class F = decltype(&Op::f)> struct Extra;
template <class Op, class... A>
struct Extra<Op, 1, Tensor (*)(const Tensor&, A...)> { using type = Pack<A...>; };
template <class Op, class... A>
struct Extra<Op, 2, Tensor (*)(const Tensor&, const Tensor&, A...)> { using type = Pack<A...>; };

// ---- unary ---------------------------------------------------------------------

template <class Op, class = typename Extra<Op, 1>::type> struct Unary;
template <class Op, class... A>
struct Unary<Op, Pack<A...>> {
  static std::tuple<Tensor, Tensor> kernel(const Tensor& values, const Tensor& fill, A... args) {
    check_unary_args(values, fill);
    return {Op::f(values, args...), Op::f(fill, args...)};
  }
  static std::tuple<Tensor, Tensor> call(const Tensor& values, const Tensor& fill, A... args) {
    static auto op = variant_handle<decltype(kernel)>(Op::name, "");
    return op.call(values, fill, args...);
  }
};

// ---- binary ----------------------------------------------------------------------

template <class Op, class = typename Extra<Op, 2>::type> struct Binary;
template <class Op, class... A>
struct Binary<Op, Pack<A...>> {
  using Pair = std::tuple<Tensor, Tensor>;

  // The union op's work; its kernel returns part of it, its backward reuses the rest.
  static BinaryMerged merge(const Tensor& ia, const Tensor& va, const Tensor& fa,
                            const Tensor& ib, const Tensor& vb, const Tensor& fb,
                            at::IntArrayRef size, A... args) {
    Aligned al = align_binary(ia, va, fa, ib, vb, fb, size);
    Tensor values = Op::f(al.a, al.b, args...);
    return {std::move(al), std::move(values), Op::f(fa, fb, args...)};
  }

  static std::tuple<Tensor, Tensor, Tensor> union_kernel(const Tensor& ia, const Tensor& va,
                                                         const Tensor& fa, const Tensor& ib,
                                                         const Tensor& vb, const Tensor& fb,
                                                         at::IntArrayRef size, A... args) {
    BinaryMerged r = merge(ia, va, fa, ib, vb, fb, size, args...);
    return {r.values, r.fill, r.al.indices};
  }

  static Pair same_kernel(const Tensor& va, const Tensor& fa, const Tensor& vb, const Tensor& fb,
                          A... args) {
    check_unary_args(va, fa);
    check_unary_args(vb, fb);
    TORCH_CHECK(va.sym_sizes().equals(vb.sym_sizes()), "sparsefill: ", Op::name,
                "_same needs values of one shape, got ", va.sym_sizes(), " and ", vb.sym_sizes());
    return {Op::f(va, vb, args...), Op::f(fa, fb, args...)};
  }

  static Pair dense_kernel(const Tensor& values, const Tensor& fill, const Tensor& other,
                           bool reverse, A... args) {
    check_unary_args(values, fill);
    TORCH_CHECK(broadcasts_to(other.sym_sizes(), values.sym_sizes().slice(1)), "sparsefill: ",
                Op::name, ": a strided operand of shape ", other.sym_sizes(),
                " must broadcast over the dense part ", values.sym_sizes().slice(1));
    if (reverse) return {Op::f(other, values, args...), Op::f(other, fill, args...)};
    return {Op::f(values, other, args...), Op::f(fill, other, args...)};
  }

  // The number becomes a wrapped scalar tensor inside the kernel (so type
  // promotion is torch's for a Python number) and never reaches the graph.
  static Pair scalar_kernel(const Tensor& values, const Tensor& fill, const at::Scalar& number,
                            bool reverse, A... args) {
    return dense_kernel(values, fill, at::native::wrapped_scalar_tensor(number), reverse,
                        args...);
  }

  static Pair same_call(const Tensor& va, const Tensor& fa, const Tensor& vb, const Tensor& fb,
                        A... args) {
    static auto op = variant_handle<decltype(same_kernel)>(Op::name, "_same");
    return op.call(va, fa, vb, fb, args...);
  }
  static Pair dense_call(const Tensor& values, const Tensor& fill, const Tensor& other,
                         bool reverse, A... args) {
    static auto op = variant_handle<decltype(dense_kernel)>(Op::name, "_dense");
    return op.call(values, fill, other, reverse, args...);
  }
  static Pair scalar_call(const Tensor& values, const Tensor& fill, const at::Scalar& number,
                          bool reverse, A... args) {
    static auto op = variant_handle<decltype(scalar_kernel)>(Op::name, "_scalar");
    return op.call(values, fill, number, reverse, args...);
  }
};

// ---- ternary ---------------------------------------------------------------------

template <class Op>
struct Ternary {
  // The op's work; its kernel returns part of it, its backward reuses the rest.
  static TernaryMerged merge(const Tensor& ia, const Tensor& va, const Tensor& fa,
                             const Tensor& ib, const Tensor& vb, const Tensor& fb,
                             const Tensor& ic, const Tensor& vc, const Tensor& fc,
                             at::IntArrayRef size) {
    auto [indices, sa, sb, sc] = align_ternary(ia, ib, ic, size);
    Tensor a = on_union(va, fa, sa, indices), b = on_union(vb, fb, sb, indices),
           c = on_union(vc, fc, sc, indices);
    Tensor values = Op::f(a, b, c);
    return {indices, {sa, sb, sc}, {a, b, c}, std::move(values), Op::f(fa, fb, fc)};
  }

  static std::tuple<Tensor, Tensor, Tensor> kernel(const Tensor& ia, const Tensor& va,
                                                   const Tensor& fa, const Tensor& ib,
                                                   const Tensor& vb, const Tensor& fb,
                                                   const Tensor& ic, const Tensor& vc,
                                                   const Tensor& fc, at::IntArrayRef size) {
    TernaryMerged r = merge(ia, va, fa, ib, vb, fb, ic, vc, fc, size);
    return {r.values, r.fill, r.indices};
  }
};

// ---- registration ----------------------------------------------------------------

// The kernels of the ops that merge patterns (the binary and ternary lists)
// at a backend's key: one body, which reaches the structural ops through the
// dispatcher, registered at each backend that has structural kernels.
template <class BinaryList, class TernaryList>
void impl_union_kernels(torch::Library& m, BinaryList binary, TernaryList ternary) {
  for_each_op(binary, [&](auto op) {
    using Op = typename decltype(op)::type;
    m.impl(Op::name, &Binary<Op>::union_kernel);
  });
  for_each_op(ternary, [&](auto op) {
    using Op = typename decltype(op)::type;
    m.impl(Op::name, &Ternary<Op>::kernel);
  });
}

}  // namespace sparsefill
