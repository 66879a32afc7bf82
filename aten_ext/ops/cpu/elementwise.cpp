// ops/cpu/elementwise.cpp -- the CPU kernels of the element-wise ops that
// merge patterns (binary and ternary; ops/elementwise.h), registered for
// the CPU (the C core).
#include <torch/library.h>

#include "ops/elementwise.h"
#include "ops/generated/elementwise_ops.h"

TORCH_LIBRARY_IMPL(sparsefill, CPU, m) {
  sparsefill::impl_union_kernels(m, sparsefill::BinaryOps(), sparsefill::TernaryOps());
}
