// ops/common/tracking.h -- when an op's Autograd kernel (ops/autograd/) must
// record: the rule those kernels share.
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

}  // namespace sparsefill
