// ops/cuda/elementwise.cpp -- the CUDA kernels of the element-wise ops that
// merge patterns (binary and ternary; ops/elementwise.h), registered for
// CUDA (the CUDA core).
#include <torch/library.h>

#include "ops/elementwise.h"
#include "ops/generated/elementwise_ops.h"

TORCH_LIBRARY_IMPL(sparsefill, CUDA, m) {
  sparsefill::impl_union_kernels(m, sparsefill::BinaryOps(), sparsefill::TernaryOps());
}
