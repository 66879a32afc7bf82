// ops/common/tracking.h -- when an op's Autograd kernel (ops/autograd/) must
// record, and when a composite may read data: the rules those kernels share.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <functional>
#include <initializer_list>

namespace sparsefill {

using at::Tensor;

// Whether a call with these differentiable inputs needs its autograd: a
// gradient is recorded (grad mode on, an input requires grad), an input
// carries a forward-mode tangent, or a torch.func transform is active (its
// levels are handled by the autograd registered from Python). Otherwise the
// Autograd kernels of ops/autograd/ call the op below autograd, in C++.
//   if (!tracks_gradient({values, fill, other})) { /* below autograd */ }
inline bool tracks_gradient(std::initializer_list<std::reference_wrapper<const Tensor>> inputs) {
  // A transform's layer puts functorch's back-mode key in the thread's
  // included set (ATen/functorch/DynamicLayer.h, whose header needs more
  // than torch installs).
  if (c10::impl::tls_is_dispatch_key_included(c10::DispatchKey::FuncTorchDynamicLayerBackMode)) {
    return true;
  }
  const bool recording = at::GradMode::is_enabled();
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    if ((recording && t.requires_grad()) || t._fw_grad(/*level=*/0).defined()) return true;
  }
  return false;
}

// Whether a composite runs on tensors without data it may read (a tracer's
// fakes: torch.export, torch.compile, opcheck; functionalization; a
// torch.func transform's wrappers): a branch on data (`.item()`) is then
// refused or syncs per batch, so the composite takes its path that needs
// none. The key sets of `t` and of the thread tell.
//   if (reads_no_data(values) || !within_range(bound)) { /* exact path */ }
inline bool reads_no_data(const Tensor& t) {
  using c10::DispatchKey;
  const auto keys = t.key_set();
  for (auto k : {DispatchKey::Python, DispatchKey::Functionalize, DispatchKey::FuncTorchBatched,
                 DispatchKey::FuncTorchGradWrapper}) {
    if (keys.has(k) || c10::impl::tls_is_dispatch_key_included(k)) return true;
  }
  return c10::impl::tls_is_dispatch_key_included(DispatchKey::FuncTorchDynamicLayerBackMode);
}

}  // namespace sparsefill
