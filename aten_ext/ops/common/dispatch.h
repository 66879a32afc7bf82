// ops/common/dispatch.h -- how C++ calls an op of the library through the
// dispatcher (so that the kernel of the tensors' device, or the fake kernel
// when traced, runs): the family headers wrap each op they expose in a
// function of namespace sparsefill::call built on op_handle.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

namespace sparsefill {

// The typed handle of the op `qualified_name` ("sparsefill::union_plan"):
// look it up once, in a function-local static.
//   static auto op = op_handle<Tensor(const Tensor&)>("sparsefill::rows_from_crow");
template <class Signature>
c10::TypedOperatorHandle<Signature> op_handle(const char* qualified_name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(qualified_name, "").typed<Signature>();
}

}  // namespace sparsefill
