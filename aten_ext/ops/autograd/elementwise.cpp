// ops/autograd/elementwise.cpp -- the backward of every element-wise op,
// registered at the Autograd key for every op of the generated lists. The
// derivatives d_<input>(grad, inputs..., result, args...) come from
// tools/codegen/elementwise.yaml through the ops' traits.
//
// One autograd Function per kind of op and list of extra argument types, not
// one per op: each Function class is compiled into a node type of its own
// (about a third of a second each, and there are about two hundred op
// variants). The op a Function runs is a table of plain functions made from
// its traits (UnaryOp, BinaryOp, TernaryOp): the forward receives it, and
// keeps its name in the context, by which the backward finds it again (a
// name, not a pointer: compiled autograd hashes strings into its cache key).
#include <torch/library.h>
#include <torch/csrc/autograd/custom_function.h>

#include <ATen/ops/scalar_tensor.h>

#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "ops/common/grad.h"
#include "ops/elementwise.h"
#include "ops/generated/elementwise_ops.h"

namespace sparsefill {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Pair = std::tuple<Tensor, Tensor>;

// ---- the op tables -------------------------------------------------------------
// Derivative pointers are null where the YAML gives none.

template <class... A>
struct UnaryOp {
  const char* name;
  Pair (*call)(const Tensor& values, const Tensor& fill, A...);
  Tensor (*d_self)(const Tensor& grad, const Tensor& self, const Tensor& result, A...);
  bool reads_inputs, reads_result;
};

template <class... A>
struct BinaryOp {
  using D = Tensor (*)(const Tensor& grad, const Tensor& self, const Tensor& other,
                       const Tensor& result, A...);
  const char* name;
  BinaryMerged (*merge)(const Tensor& ia, const Tensor& va, const Tensor& fa, const Tensor& ib,
                        const Tensor& vb, const Tensor& fb, at::IntArrayRef size, A...);
  Pair (*same_call)(const Tensor& va, const Tensor& fa, const Tensor& vb, const Tensor& fb, A...);
  Pair (*dense_call)(const Tensor& values, const Tensor& fill, const Tensor& other, bool reverse,
                     A...);
  Pair (*scalar_call)(const Tensor& values, const Tensor& fill, const at::Scalar& number,
                      bool reverse, A...);  // null: no NAME_scalar
  D d_self, d_other;
  bool reads_inputs;
};

struct TernaryOp {
  using D = Tensor (*)(const Tensor& grad, const Tensor& a, const Tensor& b, const Tensor& c);
  const char* name;
  TernaryMerged (*merge)(const Tensor& ia, const Tensor& va, const Tensor& fa, const Tensor& ib,
                         const Tensor& vb, const Tensor& fb, const Tensor& ic, const Tensor& vc,
                         const Tensor& fc, at::IntArrayRef size);
  D d[3];
  bool reads_inputs;
};

template <class Op, class... A>
constexpr UnaryOp<A...> unary_op(Pack<A...>) {
  UnaryOp<A...> op{Op::name, &Unary<Op>::call, nullptr, Op::reads_inputs, Op::reads_result};
  if constexpr (requires { &Op::d_self; }) op.d_self = &Op::d_self;
  return op;
}

template <class Op, class... A>
constexpr BinaryOp<A...> binary_op(Pack<A...>) {
  using B = Binary<Op>;
  BinaryOp<A...> op{Op::name, &B::merge, &B::same_call, &B::dense_call, nullptr, nullptr,
                    nullptr, Op::reads_inputs};
  if constexpr (Op::number) op.scalar_call = &B::scalar_call;
  if constexpr (requires { &Op::d_self; }) op.d_self = &Op::d_self;
  if constexpr (requires { &Op::d_other; }) op.d_other = &Op::d_other;
  return op;
}

template <class Op>
constexpr TernaryOp ternary_op() {
  TernaryOp op{Op::name, &Ternary<Op>::merge, {nullptr, nullptr, nullptr}, Op::reads_inputs};
  if constexpr (requires { &Op::d_a; }) op.d[0] = &Op::d_a;
  if constexpr (requires { &Op::d_b; }) op.d[1] = &Op::d_b;
  if constexpr (requires { &Op::d_c; }) op.d[2] = &Op::d_c;
  return op;
}

template <class Op> constexpr auto kUnaryOp = unary_op<Op>(typename Extra<Op, 1>::type());
template <class Op> constexpr auto kBinaryOp = binary_op<Op>(typename Extra<Op, 2>::type());
template <class Op> constexpr TernaryOp kTernaryOp = ternary_op<Op>();

// The tables by name, filled when the kernels are registered.
template <class Table>
std::unordered_map<std::string, const Table*>& tables() {
  static std::unordered_map<std::string, const Table*> by_name;
  return by_name;
}

template <class Table>
void add_table(const Table* op) {
  tables<Table>().emplace(op->name, op);
}

template <class Table>
const Table& kept_op(AutogradContext* ctx) {
  return *tables<Table>().at(ctx->saved_data["op"].toStringRef());
}

// ---- an op's extra arguments in the autograd context --------------------------

// The type an extra argument is kept as (strings own their characters).
template <class T> struct Kept { using type = std::decay_t<T>; };
template <> struct Kept<c10::string_view> { using type = std::string; };
template <> struct Kept<std::optional<c10::string_view>> {
  using type = std::optional<std::string>;
};

// The op and its extra arguments, kept in the context for the backward.
template <class Table, class... A>
void keep(AutogradContext* ctx, const Table* op, const A&... args) {
  ctx->saved_data["op"] = std::string(op->name);
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
// bind_args(op.d_self, args)(grad, self, other, result).
template <class D, class Args>
auto bind_args(D d, const Args& args) {
  return [d, &args](const auto&... tensors) {
    return std::apply([&](const auto&... kept) { return d(tensors..., kept...); }, args);
  };
}

// Whether autograd can call the backward: some input requires grad. When
// none does (inference, evaluation, the bench's per-op overhead) the forward
// keeps nothing; the forward itself runs with grad mode off, so these flags
// are the inputs' own.
template <class... T>
bool backward_possible(const T&... inputs) {
  return (inputs.requires_grad() || ...);
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

template <class... A>
struct UnaryFunction : public torch::autograd::Function<UnaryFunction<A...>> {
  static variable_list forward(AutogradContext* ctx, const UnaryOp<A...>* op,
                               const Tensor& values, const Tensor& fill, A... args) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out_values, out_fill] = op->call(values, fill, args...);
    if (op->d_self != nullptr && backward_possible(values, fill)) {
      ctx->save_for_backward({op->reads_inputs ? values : Tensor(), fill,
                              op->reads_result ? out_values : Tensor(),
                              op->reads_result ? out_fill : Tensor()});
      keep(ctx, op, args...);
    }
    return {out_values, out_fill};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // One gradient per input: the op table, the tensors, the extra args.
    variable_list out(3 + sizeof...(A));
    if (ctx->saved_data.count("op") == 0) return out;  // not differentiable
    const auto& op = kept_op<UnaryOp<A...>>(ctx);
    auto saved = ctx->get_saved_variables();
    auto args = kept_args<A...>(ctx);
    auto d_self = bind_args(op.d_self, args);
    if (grads[0].defined()) out[1] = d_self(grads[0], saved[0], saved[2]);
    if (grads[1].defined()) out[2] = grad_to(d_self(grads[1], saved[1], saved[3]), saved[1]);
    return out;
  }
};

// ---- binary ------------------------------------------------------------------------

template <class... A>
struct BinaryUnionFunction : public torch::autograd::Function<BinaryUnionFunction<A...>> {
  // The forward merges the patterns once and keeps the alignment (the union
  // and each operand's source positions) for the backward.
  static variable_list forward(AutogradContext* ctx, const BinaryOp<A...>* op, const Tensor& ia,
                               const Tensor& va, const Tensor& fa, const Tensor& ib,
                               const Tensor& vb, const Tensor& fb, at::IntArrayRef size,
                               A... args) {
    at::AutoDispatchBelowADInplaceOrView guard;
    BinaryMerged r = op->merge(ia, va, fa, ib, vb, fb, size, args...);
    const Aligned& al = r.al;
    if (backward_possible(va, fa, vb, fb)) {
      const bool inputs = op->reads_inputs;
      ctx->save_for_backward({va, fa, vb, fb, al.indices, al.src_a, al.src_b,
                              inputs ? al.a : Tensor(), inputs ? al.b : Tensor(), r.values,
                              r.fill});
      keep(ctx, op, args...);
    }
    ctx->mark_non_differentiable({al.indices});
    return {r.values, r.fill, al.indices};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& op = kept_op<BinaryOp<A...>>(ctx);
    auto s = ctx->get_saved_variables();
    const Tensor &va = s[0], &fa = s[1], &vb = s[2], &fb = s[3], &indices = s[4], &src_a = s[5],
                 &src_b = s[6], &out_values = s[9], &out_fill = s[10];
    const Tensor a = union_values(s[7], va, fa, src_a, indices);
    const Tensor b = union_values(s[8], vb, fb, src_b, indices);
    auto args = kept_args<A...>(ctx);
    Tensor g_v = defined_or_zeros(grads[0], out_values);
    Tensor g_f = defined_or_zeros(grads[1], out_fill);
    variable_list out(8 + sizeof...(A));
    if (op.d_self != nullptr) {
      auto d = bind_args(op.d_self, args);
      std::tie(out[2], out[3]) = split_union_grad(d(g_v, a, b, out_values), src_a,
                                                  d(g_f, fa, fb, out_fill), fa, indices);
    }
    if (op.d_other != nullptr) {
      auto d = bind_args(op.d_other, args);
      std::tie(out[5], out[6]) = split_union_grad(d(g_v, a, b, out_values), src_b,
                                                  d(g_f, fa, fb, out_fill), fb, indices);
    }
    return out;
  }
};

template <class... A>
struct BinarySameFunction : public torch::autograd::Function<BinarySameFunction<A...>> {
  static variable_list forward(AutogradContext* ctx, const BinaryOp<A...>* op, const Tensor& va,
                               const Tensor& fa, const Tensor& vb, const Tensor& fb, A... args) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out_values, out_fill] = op->same_call(va, fa, vb, fb, args...);
    if (backward_possible(va, fa, vb, fb)) {
      ctx->save_for_backward({va, fa, vb, fb, out_values, out_fill});
      keep(ctx, op, args...);
    }
    return {out_values, out_fill};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& op = kept_op<BinaryOp<A...>>(ctx);
    auto s = ctx->get_saved_variables();
    const Tensor &va = s[0], &fa = s[1], &vb = s[2], &fb = s[3], &out_values = s[4],
                 &out_fill = s[5];
    auto args = kept_args<A...>(ctx);
    Tensor g_v = defined_or_zeros(grads[0], out_values);
    Tensor g_f = defined_or_zeros(grads[1], out_fill);
    variable_list out(5 + sizeof...(A));
    if (op.d_self != nullptr) {
      auto d = bind_args(op.d_self, args);
      out[1] = d(g_v, va, vb, out_values);
      out[2] = grad_to(d(g_f, fa, fb, out_fill), fa);
    }
    if (op.d_other != nullptr) {
      auto d = bind_args(op.d_other, args);
      out[3] = d(g_v, va, vb, out_values);
      out[4] = grad_to(d(g_f, fa, fb, out_fill), fb);
    }
    return out;
  }
};

// Backward of the dense and scalar variants: the sparse operand is `self`
// unless `reverse`. Returns the gradients of values, fill and other (other's
// only when other_grad).
template <class... A>
std::tuple<Tensor, Tensor, Tensor> dense_grads(const BinaryOp<A...>& op,
                                               const variable_list& grads, const Tensor& values,
                                               const Tensor& fill, const Tensor& other,
                                               const Tensor& out_values, const Tensor& out_fill,
                                               bool reverse, bool other_grad,
                                               const std::tuple<typename Kept<A>::type...>& args) {
  Tensor g_v = defined_or_zeros(grads[0], out_values), g_f = defined_or_zeros(grads[1], out_fill);
  Tensor gv, gf, go;
  if (op.d_self != nullptr) {
    auto d_self = bind_args(op.d_self, args);
    if (!reverse) {
      gv = d_self(g_v, values, other, out_values);
      gf = grad_to(d_self(g_f, fill, other, out_fill), fill);
    } else if (other_grad) {
      go = grad_to(d_self(g_v, other, values, out_values), other) +
           grad_to(d_self(g_f, other, fill, out_fill), other);
    }
  }
  if (op.d_other != nullptr) {
    auto d_other = bind_args(op.d_other, args);
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

template <class... A>
struct BinaryDenseFunction : public torch::autograd::Function<BinaryDenseFunction<A...>> {
  static variable_list forward(AutogradContext* ctx, const BinaryOp<A...>* op,
                               const Tensor& values, const Tensor& fill, const Tensor& other,
                               bool reverse, A... args) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out_values, out_fill] = op->dense_call(values, fill, other, reverse, args...);
    if (backward_possible(values, fill, other)) {
      ctx->save_for_backward({values, fill, other, out_values, out_fill});
      ctx->saved_data["reverse"] = reverse;
      ctx->saved_data["other_grad"] = other.requires_grad();
      keep(ctx, op, args...);
    }
    return {out_values, out_fill};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    variable_list out(5 + sizeof...(A));
    std::tie(out[1], out[2], out[3]) =
        dense_grads(kept_op<BinaryOp<A...>>(ctx), grads, s[0], s[1], s[2], s[3], s[4],
                    ctx->saved_data["reverse"].toBool(), ctx->saved_data["other_grad"].toBool(),
                    kept_args<A...>(ctx));
    return out;
  }
};

template <class... A>
struct BinaryScalarFunction : public torch::autograd::Function<BinaryScalarFunction<A...>> {
  static variable_list forward(AutogradContext* ctx, const BinaryOp<A...>* op,
                               const Tensor& values, const Tensor& fill, const at::Scalar& number,
                               bool reverse, A... args) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out_values, out_fill] = op->scalar_call(values, fill, number, reverse, args...);
    if (backward_possible(values, fill)) {
      ctx->save_for_backward({values, fill, out_values, out_fill});
      ctx->saved_data["reverse"] = reverse;
      ctx->saved_data["number"] = number;
      keep(ctx, op, args...);
    }
    return {out_values, out_fill};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    const Tensor& values = s[0];
    // A plain 0-d tensor here (not a wrapped number): traced backward graphs
    // would turn a wrapped number into a Python scalar that ops like log reject.
    // An integral number with floating values takes their dtype: as an int64
    // tensor, log(other) (pow's derivative) would be computed in float32.
    const at::Scalar number = ctx->saved_data["number"].toScalar();
    const bool widen = at::isFloatingType(values.scalar_type()) &&
                       (number.isIntegral(/*includeBool=*/true));
    const Tensor other = at::scalar_tensor(
        number, values.options().dtype(widen ? values.scalar_type() : number.type()));
    variable_list out(5 + sizeof...(A));
    std::tie(out[1], out[2], std::ignore) =
        dense_grads(kept_op<BinaryOp<A...>>(ctx), grads, values, s[1], other, s[2], s[3],
                    ctx->saved_data["reverse"].toBool(), /*other_grad=*/false,
                    kept_args<A...>(ctx));
    return out;
  }
};

// ---- ternary -----------------------------------------------------------------------

struct TernaryFunction : public torch::autograd::Function<TernaryFunction> {
  // As the binary union: the patterns are merged once, in the forward.
  static variable_list forward(AutogradContext* ctx, const TernaryOp* op, const Tensor& ia,
                               const Tensor& va, const Tensor& fa, const Tensor& ib,
                               const Tensor& vb, const Tensor& fb, const Tensor& ic,
                               const Tensor& vc, const Tensor& fc, at::IntArrayRef size) {
    at::AutoDispatchBelowADInplaceOrView guard;
    TernaryMerged r = op->merge(ia, va, fa, ib, vb, fb, ic, vc, fc, size);
    if (backward_possible(va, fa, vb, fb, vc, fc)) {
      auto gathered = [&](int i) { return op->reads_inputs ? r.on_union[i] : Tensor(); };
      ctx->save_for_backward({va, fa, vb, fb, vc, fc, r.indices, r.src[0], r.src[1], r.src[2],
                              gathered(0), gathered(1), gathered(2), r.values, r.fill});
      keep(ctx, op);
    }
    ctx->mark_non_differentiable({r.indices});
    return {r.values, r.fill, r.indices};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto& op = kept_op<TernaryOp>(ctx);
    auto s = ctx->get_saved_variables();
    const Tensor& indices = s[6];
    const Tensor v[3] = {s[0], s[2], s[4]}, f[3] = {s[1], s[3], s[5]}, src[3] = {s[7], s[8], s[9]};
    Tensor x[3];
    for (int i = 0; i < 3; ++i) x[i] = union_values(s[10 + i], v[i], f[i], src[i], indices);
    Tensor g_v = defined_or_zeros(grads[0], s[13]);
    Tensor g_f = defined_or_zeros(grads[1], s[14]);
    variable_list out(11);
    // Operand i's gradient: its formula on the union and on the fills, split.
    for (int i = 0; i < 3; ++i) {
      if (op.d[i] == nullptr) continue;
      std::tie(out[3 * i + 2], out[3 * i + 3]) =
          split_union_grad(op.d[i](g_v, x[0], x[1], x[2]), src[i], op.d[i](g_f, f[0], f[1], f[2]),
                           f[i], indices);
    }
    return out;
  }
};

// ---- the autograd kernels ----------------------------------------------------------

template <class Op, class = typename Extra<Op, 1>::type> struct UnaryAutograd;
template <class Op, class... A>
struct UnaryAutograd<Op, Pack<A...>> {
  static Pair kernel(const Tensor& values, const Tensor& fill, A... args) {
    auto out = UnaryFunction<A...>::apply(&kUnaryOp<Op>, values, fill, args...);
    return {out[0], out[1]};
  }
};

template <class Op, class = typename Extra<Op, 2>::type> struct BinaryAutograd;
template <class Op, class... A>
struct BinaryAutograd<Op, Pack<A...>> {
  static std::tuple<Tensor, Tensor, Tensor> union_kernel(const Tensor& ia, const Tensor& va,
                                                         const Tensor& fa, const Tensor& ib,
                                                         const Tensor& vb, const Tensor& fb,
                                                         at::IntArrayRef size, A... args) {
    auto out = BinaryUnionFunction<A...>::apply(&kBinaryOp<Op>, ia, va, fa, ib, vb, fb, size,
                                                args...);
    return {out[0], out[1], out[2]};
  }
  static Pair same_kernel(const Tensor& va, const Tensor& fa, const Tensor& vb, const Tensor& fb,
                          A... args) {
    auto out = BinarySameFunction<A...>::apply(&kBinaryOp<Op>, va, fa, vb, fb, args...);
    return {out[0], out[1]};
  }
  static Pair dense_kernel(const Tensor& values, const Tensor& fill, const Tensor& other,
                           bool reverse, A... args) {
    auto out = BinaryDenseFunction<A...>::apply(&kBinaryOp<Op>, values, fill, other, reverse,
                                                args...);
    return {out[0], out[1]};
  }
  static Pair scalar_kernel(const Tensor& values, const Tensor& fill, const at::Scalar& number,
                            bool reverse, A... args) {
    auto out = BinaryScalarFunction<A...>::apply(&kBinaryOp<Op>, values, fill, number, reverse,
                                                 args...);
    return {out[0], out[1]};
  }
};

template <class Op>
std::tuple<Tensor, Tensor, Tensor> ternary_autograd(const Tensor& ia, const Tensor& va,
                                                    const Tensor& fa, const Tensor& ib,
                                                    const Tensor& vb, const Tensor& fb,
                                                    const Tensor& ic, const Tensor& vc,
                                                    const Tensor& fc, at::IntArrayRef size) {
  auto out = TernaryFunction::apply(&kTernaryOp<Op>, ia, va, fa, ib, vb, fb, ic, vc, fc, size);
  return {out[0], out[1], out[2]};
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {
  using namespace sparsefill;
  for_each_op(UnaryOps(), [&](auto op) {
    using Op = typename decltype(op)::type;
    add_table(&kUnaryOp<Op>);
    m.impl(Op::name, &UnaryAutograd<Op>::kernel);
  });
  for_each_op(BinaryOps(), [&](auto op) {
    using Op = typename decltype(op)::type;
    add_table(&kBinaryOp<Op>);
    const std::string name = Op::name;
    m.impl(Op::name, &BinaryAutograd<Op>::union_kernel);
    m.impl((name + "_same").c_str(), &BinaryAutograd<Op>::same_kernel);
    m.impl((name + "_dense").c_str(), &BinaryAutograd<Op>::dense_kernel);
    if constexpr (Op::number) {
      m.impl((name + "_scalar").c_str(), &BinaryAutograd<Op>::scalar_kernel);
    }
  });
  for_each_op(TernaryOps(), [&](auto op) {
    using Op = typename decltype(op)::type;
    add_table(&kTernaryOp<Op>);
    m.impl(Op::name, &ternary_autograd<Op>);
  });
}
