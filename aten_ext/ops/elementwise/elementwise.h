// ops/elementwise/elementwise.h -- the element-wise ops: the fixed parts that
// every op shares, and one kernel body per kind of op, templated on the op's
// traits. tools/codegen writes the traits (generated/elementwise_ops.h: per
// op its name and its formula f, from tools/codegen/elementwise.yaml) and the
// schemas (library.cpp reads them); composite.cpp registers each
// op's instance of these bodies at CompositeImplicitAutograd: every kernel is
// ATen ops on the components, so gradients (any order, forward mode) and
// vmap are ATen's and no backward of ours exists (docs/design.md#composite-elementwise).
//
//   unary / scalar / dense:  values -> f(values), fill -> f(fill); same pattern.
//   binary:  NAME   the union of both patterns; where one operand stores no
//                   element its fill stands in (RFC.md); result fill =
//                   f(fill_a, fill_b). The plan (union_plan, through the
//                   dispatcher: CPU and CUDA kernels) is index data; the
//                   gathers and f are ATen ops.
//            NAME_same    both operands on one pattern: values only, no merge.
//            NAME_dense   a strided operand over the dense part; `reverse` puts it first.
//            NAME_scalar  a number operand, as NAME_dense.
//   ternary: NAME on the union of three patterns (the router turns numbers and
//            dense-part tensors into operands that store nothing).
#pragma once

#include <torch/library.h>

#include <ATen/ScalarOps.h>
#include <ATen/TensorSubclassLikeUtils.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/broadcast_tensors.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/where.h>

#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "ops/common/fill.h"
#include "ops/common/tracking.h"
#include "ops/structure/structure.h"

namespace sparsefill {

// ---- the fixed parts ---------------------------------------------------------

// A fill broadcasts to the dense part, or is a per-slice fill (RFC.md#per-slice-fills)
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

// One operand's elements on the union pattern `indices`: its stored row
// where src >= 0, its fill's row elsewhere (a per-slice fill's at each
// position, RFC.md#per-slice-fills). ATen's cat and index_select only, so the result is
// differentiable in values and fill, to any order, in forward mode and
// under vmap; the plan `src` is index data, computed without gradients.
inline Tensor on_union(const Tensor& values, const Tensor& fill, const Tensor& src,
                       const Tensor& indices) {
  auto dense = values.sym_sizes().slice(1);
  Tensor f = fill.to(values.scalar_type());
  if (!is_per_slice_fill(fill, values.dim() - 1)) return rows_or_fill(values, f, src);
  // Rows 0..nse-1 are the stored rows, row nse + k union position k's fill.
  Tensor rows = at::cat({values, fill_rows_at(f, indices, dense)});
  // Sizes as SymInts: a traced nse stays symbolic (size(0) would read every size as an int).
  Tensor own = at::arange(c10::Scalar(values.sym_size(0)),
                          c10::Scalar(values.sym_size(0) + src.sym_size(0)), src.options());
  return rows.index_select(0, at::where(src >= 0, src, own));
}

// Whether a binary op may align its operands with the fused CPU merge
// (union_values, no autograd of its own) instead of union_plan and ATen
// gathers: every tensor on the CPU, dense-part fills, no gradient recorded or
// tangent carried, no torch.func transform, no tensor subclass or dispatch
// mode (fake tensors and functionalisation while tracing see the
// composite's parts). Both paths give the same values bit for bit.
inline bool fused_union_applies(const Tensor& ia, const Tensor& va, const Tensor& fa,
                                const Tensor& ib, const Tensor& vb, const Tensor& fb) {
  const std::array<Tensor, 6> all{ia, va, fa, ib, vb, fb};
  for (const Tensor& t : all) {
    if (!t.device().is_cpu()) return false;
  }
  return !is_per_slice_fill(fa, va.dim() - 1) && !is_per_slice_fill(fb, vb.dim() - 1) &&
         !tracks_gradient({va, fa, vb, fb}) && !at::areAnyTensorSubclassLike(all);
}

// Operands of a binary op, aligned on the union of their patterns.
struct Aligned {
  Tensor indices;  // the union pattern
  Tensor a, b;     // values of each operand on that pattern
};

// Always merges: the same-pattern case has its own op (<name>_same), chosen
// by the caller, so nothing here looks at index data.
inline Aligned align_binary(const Tensor& indices_a, const Tensor& values_a, const Tensor& fill_a,
                            const Tensor& indices_b, const Tensor& values_b, const Tensor& fill_b,
                            at::IntArrayRef size) {
  check_unary_args(values_a, fill_a);
  check_unary_args(values_b, fill_b);
  TORCH_CHECK(indices_a.dim() == 2 && indices_b.dim() == 2 &&
                  indices_a.sym_size(0) == indices_b.sym_size(0),
              "sparsefill: operands must have the same number of sparse dimensions, got indices of shape ",
              indices_a.sizes(), " and ", indices_b.sizes());
  const int64_t sparse_dim = indices_a.sym_size(0).guard_int(__FILE__, __LINE__);
  TORCH_CHECK(sparse_dim <= (int64_t)size.size(), "sparsefill: size ", size,
              " has fewer dimensions than the operands' ", sparse_dim, " sparse dimensions");
  TORCH_CHECK(broadcasts_to(size.slice(sparse_dim), values_a.sym_sizes().slice(1)) &&
                  values_a.dim() == values_b.dim() &&
                  values_a.sym_sizes().slice(1).equals(values_b.sym_sizes().slice(1)),
              "sparsefill: operands' dense parts ", values_a.sym_sizes().slice(1), " and ",
              values_b.sym_sizes().slice(1), " must both equal ", size.slice(sparse_dim));
  if (fused_union_applies(indices_a, values_a, fill_a, indices_b, values_b, fill_b)) {
    auto [indices, a, b] = call::union_values(indices_a, values_a, fill_a, indices_b, values_b,
                                              fill_b, size.slice(0, sparse_dim));
    return {indices, a, b};
  }
  auto [indices, src_a, src_b] = call::union_plan(indices_a, indices_b, size.slice(0, sparse_dim));
  return {indices, on_union(values_a, fill_a, src_a, indices),
          on_union(values_b, fill_b, src_b, indices)};
}

// Three patterns on their union: the union's indices and, per operand, where
// each union element comes from (-1: its fill stands in).
inline std::tuple<Tensor, Tensor, Tensor, Tensor> align_ternary(const Tensor& ia, const Tensor& ib,
                                                                const Tensor& ic,
                                                                at::IntArrayRef size) {
  TORCH_CHECK(ia.dim() == 2 && ib.dim() == 2 && ic.dim() == 2 &&
                  ia.sym_size(0) == ib.sym_size(0) && ia.sym_size(0) == ic.sym_size(0),
              "sparsefill: operands must have the same number of sparse dimensions, got indices "
              "of shape ", ia.sizes(), ", ", ib.sizes(), " and ", ic.sizes());
  auto sparse_size = size.slice(0, ia.sym_size(0).guard_int(__FILE__, __LINE__));
  auto [iab, sa, sb] = call::union_plan(ia, ib, sparse_size);
  auto [indices, sab, sc] = call::union_plan(iab, ic, sparse_size);
  // Compose: union position -> position in (a u b) -> position in a (or b).
  // A -1 put in front of src makes sab == -1 land on it, with no size checks.
  auto through = [&](const Tensor& src) {
    return at::cat({at::full({1}, -1, src.options()), src}).index_select(0, sab + 1);
  };
  return {indices, through(sa), through(sb), sc};
}

// ---- the op lists (generated/elementwise_ops.h fills them) -------------------

template <class... Ops> struct OpList {};

// Calls f(std::type_identity<Op>()) for every Op of the list.
template <class... Ops, class F>
void for_each_op(OpList<Ops...>, F&& f) {
  (f(std::type_identity<Ops>()), ...);
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
};

// ---- binary ----------------------------------------------------------------------

template <class Op, class = typename Extra<Op, 2>::type> struct Binary;
template <class Op, class... A>
struct Binary<Op, Pack<A...>> {
  using Pair = std::tuple<Tensor, Tensor>;

  static std::tuple<Tensor, Tensor, Tensor> union_kernel(const Tensor& ia, const Tensor& va,
                                                         const Tensor& fa, const Tensor& ib,
                                                         const Tensor& vb, const Tensor& fb,
                                                         at::IntArrayRef size, A... args) {
    Aligned al = align_binary(ia, va, fa, ib, vb, fb, size);
    auto [ca, cb] = common_fills(va, fa, vb, fb);
    return {Op::f(al.a, al.b, args...), Op::f(ca, cb, args...), al.indices};
  }

  // The fills promoted as the values are: ATen promotes a 0-d tensor against
  // a dimensioned one (a per-slice fill) as a scalar, so a bfloat16 (m, 1)
  // fill with a float16 0-d fill stayed bfloat16 while the values (both 1-D)
  // became float32 (fuzz seed 1319). A 0-d fill against a dimensioned one is
  // viewed with as many size-1 dims, which broadcasts the same and promotes
  // as its values do, whatever the op's own rule (masked_fill's bool mask).
  static Pair common_fills(const Tensor& va, const Tensor& fa, const Tensor& vb,
                           const Tensor& fb) {
    if (va.scalar_type() == vb.scalar_type() || (fa.dim() == 0) == (fb.dim() == 0)) {
      return {fa, fb};
    }
    const auto ones = [](const Tensor& f, int64_t rank) {
      return f.dim() ? f : f.reshape(std::vector<int64_t>(rank, 1));
    };
    return {ones(fa, fb.dim()), ones(fb, fa.dim())};
  }

  static Pair same_kernel(const Tensor& va, const Tensor& fa, const Tensor& vb, const Tensor& fb,
                          A... args) {
    check_unary_args(va, fa);
    check_unary_args(vb, fb);
    TORCH_CHECK(va.sym_sizes().equals(vb.sym_sizes()), "sparsefill: ", Op::name,
                "_same needs values of one shape, got ", va.sym_sizes(), " and ", vb.sym_sizes());
    auto [ca, cb] = common_fills(va, fa, vb, fb);
    return {Op::f(va, vb, args...), Op::f(ca, cb, args...)};
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

  // `A op number`: the ATen overload that takes the number as a Scalar
  // (Op::f_mixed) where there is one, as torch calls for a Python number:
  // its type promotion and its derivatives (pow(x, 0.0)'s double backward is
  // 0, the Tensor overload's nan at 0). Otherwise, and for `number op A`
  // (some Scalar-first overloads have no derivative, e.g. remainder's), a
  // 0-d tensor of the dtype torch computes `values op number` in
  // (result_type), which then promotes as the Python number would; not a
  // wrapped number, which traced and re-dispatched calls turn back into a
  // Python number that the Tensor overloads refuse.
  static Pair scalar_kernel(const Tensor& values, const Tensor& fill, const at::Scalar& number,
                            bool reverse, A... args) {
    check_unary_args(values, fill);
    if constexpr (Op::number_as_tensor) {
      if (!reverse) {
        // add, sub, mul, div: Python passes the number as a wrapped number
        // tensor to the Tensor overload, so their type promotion and
        // derivatives are that overload's (div.Tensor's backward keeps a
        // ZeroTensor gradient zero where div.Scalar's makes 0 / 0 of it:
        // fuzz seed 1014734, sgn then sqrt at 0).
        Tensor other = at::native::wrapped_scalar_tensor(number);
        return {Op::f(values, other, args...), Op::f(fill, other, args...)};
      }
    }
    if constexpr (requires { Op::f_mixed(values, number, args...); }) {
      if (!reverse) {
        return {Op::f_mixed(values, number, args...), Op::f_mixed(fill, number, args...)};
      }
    }
    Tensor other =
        at::scalar_tensor(number, values.options().dtype(at::result_type(values, number)));
    return dense_kernel(values, fill, other, reverse, args...);
  }
};

// ---- ternary ---------------------------------------------------------------------

template <class Op>
struct Ternary {
  static std::tuple<Tensor, Tensor, Tensor> kernel(const Tensor& ia, const Tensor& va,
                                                   const Tensor& fa, const Tensor& ib,
                                                   const Tensor& vb, const Tensor& fb,
                                                   const Tensor& ic, const Tensor& vc,
                                                   const Tensor& fc, at::IntArrayRef size) {
    auto [indices, sa, sb, sc] = align_ternary(ia, ib, ic, size);
    Tensor values = Op::f(on_union(va, fa, sa, indices), on_union(vb, fb, sb, indices),
                          on_union(vc, fc, sc, indices));
    // the fills broadcast first: torch's clamp backward cannot reduce into a
    // 0-d input whose bounds are larger (fuzz seed 673867)
    auto fills = at::broadcast_tensors({fa, fb, fc});
    return {values, Op::f(fills[0], fills[1], fills[2]), indices};
  }
};

}  // namespace sparsefill
