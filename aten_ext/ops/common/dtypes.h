// ops/common/dtypes.h -- the one way a kernel picks a core's typed entry
// point (_f32, _f64, _i64): compute_type says which dtype the core computes
// in, with_compute_type turns that dtype into a C type T, and Core<T> (the C
// core, below) or CudaCore<T> (the CUDA core, common/cuda.h) names the entry
// for T:
//   const auto ct = compute_type(values.scalar_type(), "spmm", false);
//   with_compute_type(ct, [&](auto t) {
//     using T = decltype(t);
//     for_row_ranges(..., [&](int64_t r0, int64_t r1) { return Core<T>::spmm(...); });
//   });
#pragma once

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdint>

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

// The C core's typed entry points (sparsefill_core.h), by element type.
template <class T> struct Core;

template <> struct Core<float> {
  static constexpr auto spmm = sf_csr_spmm_f32;
  static constexpr auto spmv = sf_csr_spmv_f32;
  static constexpr auto dense_facts = sf_dense_facts_f32;
  static constexpr auto bsr_spmm = sf_bsr_spmm_f32;
  static constexpr auto sddmm = sf_csr_sddmm_f32;
  static constexpr auto attention = sf_csr_attention_f32;
  static constexpr auto attention_backward_rows = sf_csr_attention_backward_rows_f32;
  static constexpr auto attention_backward_cols = sf_csr_attention_backward_cols_f32;
  static constexpr auto spgemm_rows = sf_csr_spgemm_rows_f32;
  static constexpr auto sddmm_sparse = sf_csr_sddmm_sparse_f32;
  static constexpr auto seg_sum = sf_seg_sum_f32;
  static constexpr auto seg_prod = sf_seg_prod_f32;
  static constexpr auto seg_max = sf_seg_max_f32;
  static constexpr auto seg_softmax = sf_seg_softmax_f32;
  static constexpr auto seg_softmax_backward = sf_seg_softmax_backward_f32;
  static constexpr auto slot_partial = sf_slot_partial_f32;
  static constexpr auto slot_runs = sf_slot_runs_f32;
  static constexpr auto slot_finish = sf_slot_finish_f32;
  static constexpr auto slot_softmax_max = sf_slot_softmax_max_f32;
  static constexpr auto slot_softmax_exp = sf_slot_softmax_exp_f32;
  static constexpr auto slot_softmax_norm = sf_slot_softmax_norm_f32;
  static constexpr auto slot_softmax_write = sf_slot_softmax_write_f32;
  static constexpr auto slot_softmax_backward_partial = sf_slot_softmax_backward_partial_f32;
  static constexpr auto slot_softmax_backward_norm = sf_slot_softmax_backward_norm_f32;
  static constexpr auto slot_softmax_backward_write = sf_slot_softmax_backward_write_f32;
};

template <> struct Core<double> {
  static constexpr auto spmm = sf_csr_spmm_f64;
  static constexpr auto spmv = sf_csr_spmv_f64;
  static constexpr auto dense_facts = sf_dense_facts_f64;
  static constexpr auto bsr_spmm = sf_bsr_spmm_f64;
  static constexpr auto sddmm = sf_csr_sddmm_f64;
  static constexpr auto attention = sf_csr_attention_f64;
  static constexpr auto attention_backward_rows = sf_csr_attention_backward_rows_f64;
  static constexpr auto attention_backward_cols = sf_csr_attention_backward_cols_f64;
  static constexpr auto spgemm_rows = sf_csr_spgemm_rows_f64;
  static constexpr auto sddmm_sparse = sf_csr_sddmm_sparse_f64;
  static constexpr auto seg_sum = sf_seg_sum_f64;
  static constexpr auto seg_prod = sf_seg_prod_f64;
  static constexpr auto seg_max = sf_seg_max_f64;
  static constexpr auto seg_softmax = sf_seg_softmax_f64;
  static constexpr auto seg_softmax_backward = sf_seg_softmax_backward_f64;
  static constexpr auto slot_partial = sf_slot_partial_f64;
  static constexpr auto slot_runs = sf_slot_runs_f64;
  static constexpr auto slot_finish = sf_slot_finish_f64;
  static constexpr auto slot_softmax_max = sf_slot_softmax_max_f64;
  static constexpr auto slot_softmax_exp = sf_slot_softmax_exp_f64;
  static constexpr auto slot_softmax_norm = sf_slot_softmax_norm_f64;
  static constexpr auto slot_softmax_write = sf_slot_softmax_write_f64;
  static constexpr auto slot_softmax_backward_partial = sf_slot_softmax_backward_partial_f64;
  static constexpr auto slot_softmax_backward_norm = sf_slot_softmax_backward_norm_f64;
  static constexpr auto slot_softmax_backward_write = sf_slot_softmax_backward_write_f64;
};

template <> struct Core<int64_t> {
  static constexpr auto seg_sum = sf_seg_sum_i64;
  static constexpr auto seg_max = sf_seg_max_i64;
  static constexpr auto slot_partial = sf_slot_partial_i64;
  static constexpr auto slot_runs = sf_slot_runs_i64;
  static constexpr auto slot_finish = sf_slot_finish_i64;
};

}  // namespace sparsefill
