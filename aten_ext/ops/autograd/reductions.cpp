// ops/autograd/reductions.cpp -- the Autograd kernels of the segment ops
// seg_reduce, seg_max, seg_softmax, slot_reduce and slot_softmax
// (ops/reductions.h). Without a gradient to track they call the op below
// autograd; with one they call its `<op>_autograd` twin, whose kernel is the
// autograd registered from Python (torch_sparsefill/_autograd.py).
#include <torch/library.h>

#include <ATen/core/LegacyTypeDispatch.h>

#include "ops/common/dispatch.h"
#include "ops/common/tracking.h"
#include "ops/reductions.h"

namespace sparsefill {
namespace {

Tensor seg_reduce_autograd(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr,
                           int64_t n, c10::string_view reduce) {
  if (tracks_gradient({values, fill})) {
    static auto op = op_handle<decltype(seg_reduce_autograd)>("sparsefill::seg_reduce_autograd");
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
    static auto op = op_handle<decltype(seg_max_autograd)>("sparsefill::seg_max_autograd");
    return op.call(values, fill, seg_ptr, coord, n, is_min, split_ties);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::seg_max(values, fill, seg_ptr, coord, n, is_min, split_ties);
}

std::tuple<Tensor, Tensor> seg_softmax_autograd(const Tensor& values, const Tensor& fill,
                                                const Tensor& seg_ptr, int64_t n, bool log) {
  if (tracks_gradient({values, fill})) {
    static auto op =
        op_handle<decltype(seg_softmax_autograd)>("sparsefill::seg_softmax_autograd");
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
        op_handle<decltype(slot_reduce_autograd)>("sparsefill::slot_reduce_autograd");
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
        op_handle<decltype(slot_softmax_autograd)>("sparsefill::slot_softmax_autograd");
    return op.call(values, slot, fill, nslots, n, log);
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return call::slot_softmax(values, slot, fill, nslots, n, log);
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {
  m.impl("seg_reduce", &sparsefill::seg_reduce_autograd);
  m.impl("seg_max", &sparsefill::seg_max_autograd);
  m.impl("seg_softmax", &sparsefill::seg_softmax_autograd);
  m.impl("slot_reduce", &sparsefill::slot_reduce_autograd);
  m.impl("slot_softmax", &sparsefill::slot_softmax_autograd);
}
