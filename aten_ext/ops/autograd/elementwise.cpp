// ops/autograd/elementwise.cpp -- the backward of every element-wise op: one
// autograd Function body per kind of op (ops/elementwise.h), templated on
// the op's traits, whose derivatives d_<input>(grad, inputs..., result,
// args...) come from tools/codegen/elementwise.yaml; registered at the
// Autograd key for every op of the generated lists.
#include <torch/library.h>
#include <torch/csrc/autograd/custom_function.h>

#include <ATen/ops/scalar_tensor.h>

#include <string>
#include <tuple>
#include <utility>

#include "ops/common/grad.h"
#include "ops/elementwise.h"
#include "ops/generated/elementwise_ops.h"

namespace sparsefill {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <class Op> concept HasDSelf = requires { &Op::d_self; };
template <class Op> concept HasDOther = requires { &Op::d_other; };
template <class Op> concept HasDA = requires { &Op::d_a; };
template <class Op> concept HasDB = requires { &Op::d_b; };
template <class Op> concept HasDC = requires { &Op::d_c; };

// ---- an op's extra arguments in the autograd context --------------------------

// The type an extra argument is kept as (strings own their characters).
template <class T> struct Kept { using type = std::decay_t<T>; };
template <> struct Kept<c10::string_view> { using type = std::string; };
template <> struct Kept<std::optional<c10::string_view>> { using type = std::optional<std::string>; };

template <class... A>
void keep_args(AutogradContext* ctx, const A&... args) {
  [[maybe_unused]] int i = 0;
  ((ctx->saved_data["arg" + std::to_string(i++)] = typename Kept<A>::type(args)), ...);
}

template <class... A, size_t... I>
std::tuple<typename Kept<A>::type...> kept_args(AutogradContext* ctx, std::index_sequence<I...>) {
  return {ctx->saved_data["arg" + std::to_string(I)].template to<typename Kept<A>::type>()...};
}

template <class... A>
std::tuple<typename Kept<A>::type...> kept_args(AutogradContext* ctx) {
  return kept_args<A...>(ctx, std::index_sequence_for<A...>());
}

// A derivative d(tensors..., extra args...) with the kept arguments bound:
// bind_args(&Op::d_self, args)(grad, self, other, result).
template <class D, class Args>
auto bind_args(D d, const Args& args) {
  return [d, &args](const auto&... tensors) {
    return std::apply([&](const auto&... kept) { return d(tensors..., kept...); }, args);
  };
}

// One undefined gradient per extra argument.
template <class... A>
void append_nulls(variable_list& grads) {
  grads.insert(grads.end(), sizeof...(A), Tensor());
}

// An operand's values on the union pattern for a backward formula: those the
// forward gathered (undefined when the formulas do not read them) or, when a
// graph of the backward is recorded (double backward), gathered again from
// the operand through gather_with_fill's autograd, so that the formula's
// own gradient reaches the operand. The union itself is never merged again.
Tensor union_values(const Tensor& gathered, const Tensor& values, const Tensor& fill,
                    const Tensor& src, const Tensor& indices) {
  if (!gathered.defined() || !at::GradMode::is_enabled()) return gathered;
  return on_union(values, fill, src, indices);
}

// ---- unary -----------------------------------------------------------------------

template <class Op, class = typename Extra<Op, 1>::type> struct UnaryFunction;
template <class Op, class... A>
struct UnaryFunction<Op, Pack<A...>>
    : public torch::autograd::Function<UnaryFunction<Op, Pack<A...>>> {
  static variable_list forward(AutogradContext* ctx, const Tensor& values, const Tensor& fill,
                               A... args) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out_values, out_fill] = Unary<Op>::call(values, fill, args...);
    if constexpr (HasDSelf<Op>) {
      ctx->save_for_backward({Op::reads_inputs ? values : Tensor(), fill,
                              Op::reads_result ? out_values : Tensor(),
                              Op::reads_result ? out_fill : Tensor()});
      keep_args(ctx, args...);
    }
    return {out_values, out_fill};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list out(2);
    if constexpr (HasDSelf<Op>) {
      auto saved = ctx->get_saved_variables();
      auto args = kept_args<A...>(ctx);
      auto d_self = bind_args(&Op::d_self, args);
      if (grads[0].defined()) out[0] = d_self(grads[0], saved[0], saved[2]);
      if (grads[1].defined()) out[1] = grad_to(d_self(grads[1], saved[1], saved[3]), saved[1]);
    }
    append_nulls<A...>(out);
    return out;
  }
};

// ---- binary ------------------------------------------------------------------------

template <class Op, class = typename Extra<Op, 2>::type> struct BinaryUnionFunction;
template <class Op, class... A>
struct BinaryUnionFunction<Op, Pack<A...>>
    : public torch::autograd::Function<BinaryUnionFunction<Op, Pack<A...>>> {
  // The forward merges the patterns once and keeps the alignment (the union
  // and each operand's source positions) for the backward.
  static variable_list forward(AutogradContext* ctx, const Tensor& ia, const Tensor& va,
                               const Tensor& fa, const Tensor& ib, const Tensor& vb,
                               const Tensor& fb, at::IntArrayRef size, A... args) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto r = Binary<Op>::merge(ia, va, fa, ib, vb, fb, size, args...);
    const Aligned& al = r.al;
    ctx->save_for_backward({va, fa, vb, fb, al.indices, al.src_a, al.src_b,
                            Op::reads_inputs ? al.a : Tensor(), Op::reads_inputs ? al.b : Tensor(),
                            r.values, r.fill});
    keep_args(ctx, args...);
    ctx->mark_non_differentiable({al.indices});
    return {r.values, r.fill, al.indices};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    const Tensor &va = s[0], &fa = s[1], &vb = s[2], &fb = s[3], &indices = s[4], &src_a = s[5],
                 &src_b = s[6], &out_values = s[9], &out_fill = s[10];
    const Tensor a = union_values(s[7], va, fa, src_a, indices);
    const Tensor b = union_values(s[8], vb, fb, src_b, indices);
    auto args = kept_args<A...>(ctx);
    Tensor g_v = defined_or_zeros(grads[0], out_values);
    Tensor g_f = defined_or_zeros(grads[1], out_fill);
    variable_list out(7);
    if constexpr (HasDSelf<Op>) {
      auto d = bind_args(&Op::d_self, args);
      std::tie(out[1], out[2]) = split_union_grad(d(g_v, a, b, out_values), src_a,
                                                  d(g_f, fa, fb, out_fill), fa, indices);
    }
    if constexpr (HasDOther<Op>) {
      auto d = bind_args(&Op::d_other, args);
      std::tie(out[4], out[5]) = split_union_grad(d(g_v, a, b, out_values), src_b,
                                                  d(g_f, fa, fb, out_fill), fb, indices);
    }
    append_nulls<A...>(out);
    return out;
  }
};

template <class Op, class = typename Extra<Op, 2>::type> struct BinarySameFunction;
template <class Op, class... A>
struct BinarySameFunction<Op, Pack<A...>>
    : public torch::autograd::Function<BinarySameFunction<Op, Pack<A...>>> {
  static variable_list forward(AutogradContext* ctx, const Tensor& va, const Tensor& fa,
                               const Tensor& vb, const Tensor& fb, A... args) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out_values, out_fill] = Binary<Op>::same_call(va, fa, vb, fb, args...);
    ctx->save_for_backward({va, fa, vb, fb, out_values, out_fill});
    keep_args(ctx, args...);
    return {out_values, out_fill};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    const Tensor &va = s[0], &fa = s[1], &vb = s[2], &fb = s[3], &out_values = s[4],
                 &out_fill = s[5];
    auto args = kept_args<A...>(ctx);
    Tensor g_v = defined_or_zeros(grads[0], out_values);
    Tensor g_f = defined_or_zeros(grads[1], out_fill);
    variable_list out(4);
    if constexpr (HasDSelf<Op>) {
      auto d = bind_args(&Op::d_self, args);
      out[0] = d(g_v, va, vb, out_values);
      out[1] = grad_to(d(g_f, fa, fb, out_fill), fa);
    }
    if constexpr (HasDOther<Op>) {
      auto d = bind_args(&Op::d_other, args);
      out[2] = d(g_v, va, vb, out_values);
      out[3] = grad_to(d(g_f, fa, fb, out_fill), fb);
    }
    append_nulls<A...>(out);
    return out;
  }
};

// Backward of the dense and scalar variants: the sparse operand is `self`
// unless `reverse`. Returns the gradients of values, fill and other (other's
// only when other_grad).
template <class Op, class Args>
std::tuple<Tensor, Tensor, Tensor> dense_grads(const variable_list& grads, const Tensor& values,
                                               const Tensor& fill, const Tensor& other,
                                               const Tensor& out_values, const Tensor& out_fill,
                                               bool reverse, bool other_grad, const Args& args) {
  Tensor g_v = defined_or_zeros(grads[0], out_values), g_f = defined_or_zeros(grads[1], out_fill);
  Tensor gv, gf, go;
  if constexpr (HasDSelf<Op>) {
    auto d_self = bind_args(&Op::d_self, args);
    if (!reverse) {
      gv = d_self(g_v, values, other, out_values);
      gf = grad_to(d_self(g_f, fill, other, out_fill), fill);
    } else if (other_grad) {
      go = grad_to(d_self(g_v, other, values, out_values), other) +
           grad_to(d_self(g_f, other, fill, out_fill), other);
    }
  }
  if constexpr (HasDOther<Op>) {
    auto d_other = bind_args(&Op::d_other, args);
    if (reverse) {
      gv = d_other(g_v, other, values, out_values);
      gf = grad_to(d_other(g_f, other, fill, out_fill), fill);
    } else if (other_grad) {
      go = grad_to(d_other(g_v, values, other, out_values), other) +
           grad_to(d_other(g_f, fill, other, out_fill), other);
    }
  }
  return {gv, gf, go};
}

template <class Op, class = typename Extra<Op, 2>::type> struct BinaryDenseFunction;
template <class Op, class... A>
struct BinaryDenseFunction<Op, Pack<A...>>
    : public torch::autograd::Function<BinaryDenseFunction<Op, Pack<A...>>> {
  static variable_list forward(AutogradContext* ctx, const Tensor& values, const Tensor& fill,
                               const Tensor& other, bool reverse, A... args) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out_values, out_fill] = Binary<Op>::dense_call(values, fill, other, reverse, args...);
    ctx->save_for_backward({values, fill, other, out_values, out_fill});
    ctx->saved_data["reverse"] = reverse;
    ctx->saved_data["other_grad"] = other.requires_grad();
    keep_args(ctx, args...);
    return {out_values, out_fill};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    auto [gv, gf, go] = dense_grads<Op>(grads, s[0], s[1], s[2], s[3], s[4],
                                        ctx->saved_data["reverse"].toBool(),
                                        ctx->saved_data["other_grad"].toBool(),
                                        kept_args<A...>(ctx));
    variable_list out = {gv, gf, go, Tensor()};
    append_nulls<A...>(out);
    return out;
  }
};

template <class Op, class = typename Extra<Op, 2>::type> struct BinaryScalarFunction;
template <class Op, class... A>
struct BinaryScalarFunction<Op, Pack<A...>>
    : public torch::autograd::Function<BinaryScalarFunction<Op, Pack<A...>>> {
  static variable_list forward(AutogradContext* ctx, const Tensor& values, const Tensor& fill,
                               const at::Scalar& number, bool reverse, A... args) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out_values, out_fill] = Binary<Op>::scalar_call(values, fill, number, reverse, args...);
    ctx->save_for_backward({values, fill, out_values, out_fill});
    ctx->saved_data["reverse"] = reverse;
    ctx->saved_data["number"] = number;
    keep_args(ctx, args...);
    return {out_values, out_fill};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    const Tensor& values = s[0];
    // A plain 0-d tensor here (not a wrapped number): traced backward graphs
    // would turn a wrapped number into a Python scalar that ops like log reject.
    const at::Scalar number = ctx->saved_data["number"].toScalar();
    const Tensor other = at::scalar_tensor(number, values.options().dtype(number.type()));
    auto [gv, gf, go] = dense_grads<Op>(grads, values, s[1], other, s[2], s[3],
                                        ctx->saved_data["reverse"].toBool(),
                                        /*other_grad=*/false, kept_args<A...>(ctx));
    variable_list out = {gv, gf, Tensor(), Tensor()};
    append_nulls<A...>(out);
    return out;
  }
};

// ---- ternary -----------------------------------------------------------------------

template <class Op>
struct TernaryFunction : public torch::autograd::Function<TernaryFunction<Op>> {
  // As the binary union: the patterns are merged once, in the forward.
  static variable_list forward(AutogradContext* ctx, const Tensor& ia, const Tensor& va,
                               const Tensor& fa, const Tensor& ib, const Tensor& vb,
                               const Tensor& fb, const Tensor& ic, const Tensor& vc,
                               const Tensor& fc, at::IntArrayRef size) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto r = Ternary<Op>::merge(ia, va, fa, ib, vb, fb, ic, vc, fc, size);
    auto gathered = [&](int i) { return Op::reads_inputs ? r.on_union[i] : Tensor(); };
    ctx->save_for_backward({va, fa, vb, fb, vc, fc, r.indices, r.src[0], r.src[1], r.src[2],
                            gathered(0), gathered(1), gathered(2), r.values, r.fill});
    ctx->mark_non_differentiable({r.indices});
    return {r.values, r.fill, r.indices};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    const Tensor& indices = s[6];
    const Tensor v[3] = {s[0], s[2], s[4]}, f[3] = {s[1], s[3], s[5]}, src[3] = {s[7], s[8], s[9]};
    Tensor x[3];
    for (int i = 0; i < 3; ++i) x[i] = union_values(s[10 + i], v[i], f[i], src[i], indices);
    Tensor g_v = defined_or_zeros(grads[0], s[13]);
    Tensor g_f = defined_or_zeros(grads[1], s[14]);
    variable_list out(10);
    // Operand i's gradient: its formula on the union and on the fills, split.
    auto grad_of = [&](int i, auto d) {
      std::tie(out[3 * i + 1], out[3 * i + 2]) = split_union_grad(
          d(g_v, x[0], x[1], x[2]), src[i], d(g_f, f[0], f[1], f[2]), f[i], indices);
    };
    if constexpr (HasDA<Op>) grad_of(0, &Op::d_a);
    if constexpr (HasDB<Op>) grad_of(1, &Op::d_b);
    if constexpr (HasDC<Op>) grad_of(2, &Op::d_c);
    return out;
  }
};

// ---- the autograd kernels ----------------------------------------------------------

template <class Op, class = typename Extra<Op, 1>::type> struct UnaryAutograd;
template <class Op, class... A>
struct UnaryAutograd<Op, Pack<A...>> {
  static std::tuple<Tensor, Tensor> kernel(const Tensor& values, const Tensor& fill, A... args) {
    auto out = UnaryFunction<Op>::apply(values, fill, args...);
    return {out[0], out[1]};
  }
};

template <class Op, class = typename Extra<Op, 2>::type> struct BinaryAutograd;
template <class Op, class... A>
struct BinaryAutograd<Op, Pack<A...>> {
  using Pair = std::tuple<Tensor, Tensor>;
  static std::tuple<Tensor, Tensor, Tensor> union_kernel(const Tensor& ia, const Tensor& va,
                                                         const Tensor& fa, const Tensor& ib,
                                                         const Tensor& vb, const Tensor& fb,
                                                         at::IntArrayRef size, A... args) {
    auto out = BinaryUnionFunction<Op>::apply(ia, va, fa, ib, vb, fb, size, args...);
    return {out[0], out[1], out[2]};
  }
  static Pair same_kernel(const Tensor& va, const Tensor& fa, const Tensor& vb, const Tensor& fb,
                          A... args) {
    auto out = BinarySameFunction<Op>::apply(va, fa, vb, fb, args...);
    return {out[0], out[1]};
  }
  static Pair dense_kernel(const Tensor& values, const Tensor& fill, const Tensor& other,
                           bool reverse, A... args) {
    auto out = BinaryDenseFunction<Op>::apply(values, fill, other, reverse, args...);
    return {out[0], out[1]};
  }
  static Pair scalar_kernel(const Tensor& values, const Tensor& fill, const at::Scalar& number,
                            bool reverse, A... args) {
    auto out = BinaryScalarFunction<Op>::apply(values, fill, number, reverse, args...);
    return {out[0], out[1]};
  }
};

template <class Op>
std::tuple<Tensor, Tensor, Tensor> ternary_autograd(const Tensor& ia, const Tensor& va,
                                                    const Tensor& fa, const Tensor& ib,
                                                    const Tensor& vb, const Tensor& fb,
                                                    const Tensor& ic, const Tensor& vc,
                                                    const Tensor& fc, at::IntArrayRef size) {
  auto out = TernaryFunction<Op>::apply(ia, va, fa, ib, vb, fb, ic, vc, fc, size);
  return {out[0], out[1], out[2]};
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {
  using namespace sparsefill;
  for_each_op(UnaryOps(), [&](auto op) {
    using Op = typename decltype(op)::type;
    m.impl(Op::name, &UnaryAutograd<Op>::kernel);
  });
  for_each_op(BinaryOps(), [&](auto op) {
    using Op = typename decltype(op)::type;
    const std::string name = Op::name;
    m.impl(Op::name, &BinaryAutograd<Op>::union_kernel);
    m.impl((name + "_same").c_str(), &BinaryAutograd<Op>::same_kernel);
    m.impl((name + "_dense").c_str(), &BinaryAutograd<Op>::dense_kernel);
    if constexpr (Op::number) m.impl((name + "_scalar").c_str(), &BinaryAutograd<Op>::scalar_kernel);
  });
  for_each_op(TernaryOps(), [&](auto op) {
    using Op = typename decltype(op)::type;
    m.impl(Op::name, &ternary_autograd<Op>);
  });
}
