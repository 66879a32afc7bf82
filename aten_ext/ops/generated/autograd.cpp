// ops/generated/autograd.cpp -- the Autograd kernel of each op with a derivative
// (`derivative` in the list): with no gradient to track (tracks_gradient, over the
// inputs the list names) the op below autograd, in C++; otherwise its
// `<op>_autograd` twin, whose one kernel is the autograd registered from Python
// (backward in differentiable ops, forward-mode jvp, torch.func's levels).
// (Written by tools/codegen/gen_native.py from tools/codegen/native.yaml:
// edit those.)
#include <torch/library.h>

#include <ATen/core/LegacyTypeDispatch.h>

#include "ops/common/tracking.h"
#include "ops/generated/calls.h"

namespace sparsefill {
namespace {

std::tuple<Tensor, Tensor, Tensor> from_dense_autograd(const Tensor& self, const Tensor& fill,
                                                       int64_t sparse_dim) {
  if (tracks_gradient({self})) {
    static auto op =
        op_handle<decltype(call::from_dense)>("sparsefill::from_dense_autograd");
    return op.call(self, fill, sparse_dim);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::from_dense(self, fill, sparse_dim);
}

Tensor spmm_autograd(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                     const Tensor& fill, const Tensor& other, int64_t ncols) {
  if (tracks_gradient({values, fill, other})) {
    static auto op =
        op_handle<decltype(call::spmm)>("sparsefill::spmm_autograd");
    return op.call(crow_indices, col_indices, values, fill, other, ncols);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::spmm(crow_indices, col_indices, values, fill, other, ncols);
}

Tensor sddmm_autograd(const Tensor& crow_indices, const Tensor& col_indices, int64_t ncols,
                      const Tensor& x, const Tensor& y) {
  if (tracks_gradient({x, y})) {
    static auto op =
        op_handle<decltype(call::sddmm)>("sparsefill::sddmm_autograd");
    return op.call(crow_indices, col_indices, ncols, x, y);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::sddmm(crow_indices, col_indices, ncols, x, y);
}

std::tuple<Tensor, Tensor, Tensor> spgemm_autograd(const Tensor& crow_a, const Tensor& col_a,
                                                   const Tensor& values_a, const Tensor& crow_b,
                                                   const Tensor& col_b, const Tensor& values_b,
                                                   int64_t n) {
  if (tracks_gradient({values_a, values_b})) {
    static auto op =
        op_handle<decltype(call::spgemm)>("sparsefill::spgemm_autograd");
    return op.call(crow_a, col_a, values_a, crow_b, col_b, values_b, n);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::spgemm(crow_a, col_a, values_a, crow_b, col_b, values_b, n);
}

Tensor seg_reduce_autograd(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr,
                           int64_t n, c10::string_view reduce) {
  if (tracks_gradient({values, fill})) {
    static auto op =
        op_handle<decltype(call::seg_reduce)>("sparsefill::seg_reduce_autograd");
    return op.call(values, fill, seg_ptr, n, reduce);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::seg_reduce(values, fill, seg_ptr, n, reduce);
}

std::tuple<Tensor, Tensor, Tensor> seg_max_autograd(const Tensor& values, const Tensor& fill,
                                                    const Tensor& seg_ptr,
                                                    const std::optional<Tensor>& coord, int64_t n,
                                                    bool is_min, bool split_ties) {
  if (tracks_gradient({values, fill})) {
    static auto op =
        op_handle<decltype(call::seg_max)>("sparsefill::seg_max_autograd");
    return op.call(values, fill, seg_ptr, coord, n, is_min, split_ties);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::seg_max(values, fill, seg_ptr, coord, n, is_min, split_ties);
}

std::tuple<Tensor, Tensor> seg_softmax_autograd(const Tensor& values, const Tensor& fill,
                                                const Tensor& seg_ptr, int64_t n, bool log) {
  if (tracks_gradient({values, fill})) {
    static auto op =
        op_handle<decltype(call::seg_softmax)>("sparsefill::seg_softmax_autograd");
    return op.call(values, fill, seg_ptr, n, log);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::seg_softmax(values, fill, seg_ptr, n, log);
}

std::tuple<Tensor, Tensor> slot_reduce_autograd(const Tensor& values, const Tensor& slot,
                                                const Tensor& fill, int64_t nslots, int64_t n,
                                                c10::string_view reduce) {
  if (tracks_gradient({values, fill})) {
    static auto op =
        op_handle<decltype(call::slot_reduce)>("sparsefill::slot_reduce_autograd");
    return op.call(values, slot, fill, nslots, n, reduce);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::slot_reduce(values, slot, fill, nslots, n, reduce);
}

std::tuple<Tensor, Tensor> slot_softmax_autograd(const Tensor& values, const Tensor& slot,
                                                 const Tensor& fill, int64_t nslots, int64_t n,
                                                 bool log) {
  if (tracks_gradient({values, fill})) {
    static auto op =
        op_handle<decltype(call::slot_softmax)>("sparsefill::slot_softmax_autograd");
    return op.call(values, slot, fill, nslots, n, log);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::slot_softmax(values, slot, fill, nslots, n, log);
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {
  m.impl("from_dense", &sparsefill::from_dense_autograd);
  m.impl("spmm", &sparsefill::spmm_autograd);
  m.impl("sddmm", &sparsefill::sddmm_autograd);
  m.impl("spgemm", &sparsefill::spgemm_autograd);
  m.impl("seg_reduce", &sparsefill::seg_reduce_autograd);
  m.impl("seg_max", &sparsefill::seg_max_autograd);
  m.impl("seg_softmax", &sparsefill::seg_softmax_autograd);
  m.impl("slot_reduce", &sparsefill::slot_reduce_autograd);
  m.impl("slot_softmax", &sparsefill::slot_softmax_autograd);
}
