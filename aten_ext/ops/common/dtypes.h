// ops/common/dtypes.h -- the one way a kernel picks a core's typed entry
// point (_f32, _f64, _i64): compute_type says which dtype the core computes
// in, with_compute_type turns that dtype into a C type T, and Core<T> (the C
// core, ops/generated/core.h) or CudaCore<T> (the CUDA core,
// ops/generated/cuda_core.h), both written from the one list
// tools/codegen/native.yaml, names the entry for T:
//   const auto ct = compute_type(values.scalar_type(), "spmm", false);
//   with_compute_type(ct, [&](auto t) {
//     using T = decltype(t);
//     for_row_ranges(..., [&](int64_t r0, int64_t r1) { return Core<T>::spmm(...); });
//   });
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdint>

#include "ops/generated/core.h"  // Core<T>, from tools/codegen/native.yaml
#include "sparsefill_core.h"

namespace sparsefill {

// The dtype a core computes in for inputs of dtype t: float32 and float64 as
// they are, float16 and bfloat16 in float32, integers and bool in int64 where
// the op takes them (`ints`). Any other dtype is refused, naming `op`.
inline at::ScalarType compute_type(at::ScalarType t, const char* op, bool ints) {
  if (t == at::kDouble || t == at::kFloat) return t;
  if (t == at::kHalf || t == at::kBFloat16) return at::kFloat;
  TORCH_CHECK(ints && (at::isIntegralType(t, /*includeBool=*/true)), "sparsefill: ", op,
              " does not support dtype ", t);
  return at::kLong;
}

// Calls body(T()) for the C type T of a compute dtype (compute_type's
// result): float, double, and int64_t only when Ints (the ops whose core has
// an _i64 entry), so that no other body is instantiated for int64_t.
template <bool Ints = false, class F>
decltype(auto) with_compute_type(at::ScalarType ct, F&& body) {
  if constexpr (Ints) {
    if (ct == at::kLong) return body(int64_t());
  }
  if (ct == at::kDouble) return body(double());
  TORCH_INTERNAL_ASSERT(ct == at::kFloat, "sparsefill: no core entry for compute dtype ", ct);
  return body(float());
}

}  // namespace sparsefill
