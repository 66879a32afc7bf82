// ops/composite/elementwise.cpp -- the element-wise kernels that work on
// values and fills only (ops/elementwise.h): unary ops and the binary ops'
// same-pattern, dense and scalar variants. Registered at
// CompositeExplicitAutograd: one kernel for CPU, CUDA and Meta; their
// backward is autograd/elementwise.cpp's.
#include <torch/library.h>

#include "ops/elementwise.h"
#include "ops/generated/elementwise_ops.h"

TORCH_LIBRARY_IMPL(sparsefill, CompositeExplicitAutograd, m) {
  using namespace sparsefill;
  for_each_op(UnaryOps(), [&](auto op) {
    using Op = typename decltype(op)::type;
    m.impl(Op::name, &Unary<Op>::kernel);
  });
  for_each_op(BinaryOps(), [&](auto op) {
    using Op = typename decltype(op)::type;
    const std::string name = Op::name;
    m.impl((name + "_same").c_str(), &Binary<Op>::same_kernel);
    m.impl((name + "_dense").c_str(), &Binary<Op>::dense_kernel);
    if constexpr (Op::number) m.impl((name + "_scalar").c_str(), &Binary<Op>::scalar_kernel);
  });
}
