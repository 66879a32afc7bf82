// ops/elementwise/composite.cpp -- every element-wise kernel (elementwise.h),
// registered at CompositeImplicitAutograd: one kernel for CPU, CUDA and
// Meta, made of ATen ops on the components (and, for the ops that merge
// patterns, the index-only union_plan), so autograd, double backward, forward
// AD, vmap and tracing see ATen ops and use ATen's derivatives (docs/design.md#composite-elementwise).
#include <torch/library.h>

#include "ops/elementwise/elementwise.h"
#include "ops/generated/elementwise_ops.h"

TORCH_LIBRARY_IMPL(sparsefill, CompositeImplicitAutograd, m) {
  using namespace sparsefill;
  for_each_op(UnaryOps(), [&](auto op) {
    using Op = typename decltype(op)::type;
    m.impl(Op::name, &Unary<Op>::kernel);
  });
  for_each_op(BinaryOps(), [&](auto op) {
    using Op = typename decltype(op)::type;
    const std::string name = Op::name;
    m.impl(Op::name, &Binary<Op>::union_kernel);
    m.impl((name + "_same").c_str(), &Binary<Op>::same_kernel);
    m.impl((name + "_dense").c_str(), &Binary<Op>::dense_kernel);
    if constexpr (Op::number) m.impl((name + "_scalar").c_str(), &Binary<Op>::scalar_kernel);
  });
  for_each_op(TernaryOps(), [&](auto op) {
    using Op = typename decltype(op)::type;
    m.impl(Op::name, &Ternary<Op>::kernel);
  });
}
