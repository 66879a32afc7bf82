// ops/autograd/products.cpp -- the Autograd kernels of spmm, sddmm and
// spgemm (ops/products.h). Without a gradient to track they call the op
// below autograd; with one they call its `<op>_autograd` twin, whose kernel
// is the autograd registered from Python (torch_sparsefill/_autograd.py:
// backward in differentiable ops, forward-mode jvp, torch.func's levels).
#include <torch/library.h>

#include <ATen/core/LegacyTypeDispatch.h>

#include "ops/common/dispatch.h"
#include "ops/common/tracking.h"
#include "ops/products.h"

namespace sparsefill {
namespace {

Tensor spmm_autograd(const Tensor& crow, const Tensor& col, const Tensor& values,
                     const Tensor& fill, const Tensor& b, int64_t ncols) {
  if (tracks_gradient({values, fill, b})) {
    static auto op = op_handle<decltype(spmm_autograd)>("sparsefill::spmm_autograd");
    return op.call(crow, col, values, fill, b, ncols);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::spmm(crow, col, values, fill, b, ncols);
}

Tensor sddmm_autograd(const Tensor& crow, const Tensor& col, int64_t ncols, const Tensor& x,
                      const Tensor& y) {
  if (tracks_gradient({x, y})) {
    static auto op = op_handle<decltype(sddmm_autograd)>("sparsefill::sddmm_autograd");
    return op.call(crow, col, ncols, x, y);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::sddmm(crow, col, ncols, x, y);
}

std::tuple<Tensor, Tensor, Tensor> spgemm_autograd(const Tensor& crow_a, const Tensor& col_a,
                                                   const Tensor& va, const Tensor& crow_b,
                                                   const Tensor& col_b, const Tensor& vb,
                                                   int64_t n) {
  if (tracks_gradient({va, vb})) {
    static auto op = op_handle<decltype(spgemm_autograd)>("sparsefill::spgemm_autograd");
    return op.call(crow_a, col_a, va, crow_b, col_b, vb, n);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::spgemm(crow_a, col_a, va, crow_b, col_b, vb, n);
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {
  m.impl("spmm", &sparsefill::spmm_autograd);
  m.impl("spgemm", &sparsefill::spgemm_autograd);
  m.impl("sddmm", &sparsefill::sddmm_autograd);
}
