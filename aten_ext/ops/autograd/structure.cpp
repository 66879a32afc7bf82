// ops/autograd/structure.cpp -- the Autograd kernel of from_dense
// (ops/structure.h). Without a gradient to track it calls the op below
// autograd; with one it calls from_dense_autograd, whose kernel is the
// autograd registered from Python (torch_sparsefill/_autograd.py).
#include <torch/library.h>

#include <ATen/core/LegacyTypeDispatch.h>

#include "ops/common/dispatch.h"
#include "ops/common/tracking.h"
#include "ops/structure.h"

namespace sparsefill {
namespace {

std::tuple<Tensor, Tensor, Tensor> from_dense_autograd(const Tensor& self, const Tensor& fill,
                                                       int64_t sparse_dim) {
  if (tracks_gradient({self})) {
    static auto op = op_handle<decltype(from_dense_autograd)>("sparsefill::from_dense_autograd");
    return op.call(self, fill, sparse_dim);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::from_dense(self, fill, sparse_dim);
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {
  m.impl("from_dense", &sparsefill::from_dense_autograd);
}
