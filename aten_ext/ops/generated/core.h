// ops/generated/core.h -- Core<T>: the C core's typed entry points by element type
// (common/dtypes.h says how a kernel picks T)
// (written by tools/codegen/gen_native.py from tools/codegen/native.yaml:
// edit those).
#pragma once

#include <cstdint>

#include "sparsefill_core.h"

namespace sparsefill {

template <class T> struct Core;

template <> struct Core<float> {
  static constexpr auto lane_topk_fill = sf_lane_topk_fill_f32;
  static constexpr auto lane_sort_fill = sf_lane_sort_fill_f32;
  static constexpr auto spmm = sf_csr_spmm_f32;
  static constexpr auto spmv = sf_csr_spmv_f32;
  static constexpr auto dense_facts = sf_dense_facts_f32;
  static constexpr auto dense_spread = sf_dense_spread_f32;
  static constexpr auto sddmm = sf_csr_sddmm_f32;
  static constexpr auto spgemm_rows = sf_csr_spgemm_rows_f32;
  static constexpr auto sddmm_sparse = sf_csr_sddmm_sparse_f32;
  static constexpr auto attention = sf_csr_attention_f32;
  static constexpr auto attention_backward_rows = sf_csr_attention_backward_rows_f32;
  static constexpr auto attention_backward_cols = sf_csr_attention_backward_cols_f32;
  static constexpr auto semiring_mv = sf_csr_semiring_mv_f32;
  static constexpr auto semiring_vm = sf_csr_semiring_vm_f32;
  static constexpr auto semiring_masked = sf_csr_semiring_masked_f32;
  static constexpr auto semiring_masked_rows = sf_csr_semiring_masked_rows_f32;
  static constexpr auto ewise_union = sf_csr_ewise_union_f32;
  static constexpr auto bsr_spmm = sf_bsr_spmm_f32;
  static constexpr auto seg_sum = sf_seg_sum_f32;
  static constexpr auto seg_prod = sf_seg_prod_f32;
  static constexpr auto seg_max = sf_seg_max_f32;
  static constexpr auto seg_softmax = sf_seg_softmax_f32;
  static constexpr auto seg_softmax_backward = sf_seg_softmax_backward_f32;
  static constexpr auto slot_partial = sf_slot_partial_f32;
  static constexpr auto slot_finish = sf_slot_finish_f32;
  static constexpr auto slot_runs = sf_slot_runs_f32;
  static constexpr auto slot_softmax_max = sf_slot_softmax_max_f32;
  static constexpr auto slot_softmax_exp = sf_slot_softmax_exp_f32;
  static constexpr auto slot_softmax_norm = sf_slot_softmax_norm_f32;
  static constexpr auto slot_softmax_write = sf_slot_softmax_write_f32;
  static constexpr auto slot_softmax_backward_partial = sf_slot_softmax_backward_partial_f32;
  static constexpr auto slot_softmax_backward_norm = sf_slot_softmax_backward_norm_f32;
  static constexpr auto slot_softmax_backward_write = sf_slot_softmax_backward_write_f32;
};

template <> struct Core<double> {
  static constexpr auto lane_topk_fill = sf_lane_topk_fill_f64;
  static constexpr auto lane_sort_fill = sf_lane_sort_fill_f64;
  static constexpr auto spmm = sf_csr_spmm_f64;
  static constexpr auto spmv = sf_csr_spmv_f64;
  static constexpr auto dense_facts = sf_dense_facts_f64;
  static constexpr auto dense_spread = sf_dense_spread_f64;
  static constexpr auto sddmm = sf_csr_sddmm_f64;
  static constexpr auto spgemm_rows = sf_csr_spgemm_rows_f64;
  static constexpr auto sddmm_sparse = sf_csr_sddmm_sparse_f64;
  static constexpr auto attention = sf_csr_attention_f64;
  static constexpr auto attention_backward_rows = sf_csr_attention_backward_rows_f64;
  static constexpr auto attention_backward_cols = sf_csr_attention_backward_cols_f64;
  static constexpr auto semiring_mv = sf_csr_semiring_mv_f64;
  static constexpr auto semiring_vm = sf_csr_semiring_vm_f64;
  static constexpr auto semiring_masked = sf_csr_semiring_masked_f64;
  static constexpr auto semiring_masked_rows = sf_csr_semiring_masked_rows_f64;
  static constexpr auto ewise_union = sf_csr_ewise_union_f64;
  static constexpr auto bsr_spmm = sf_bsr_spmm_f64;
  static constexpr auto seg_sum = sf_seg_sum_f64;
  static constexpr auto seg_prod = sf_seg_prod_f64;
  static constexpr auto seg_max = sf_seg_max_f64;
  static constexpr auto seg_softmax = sf_seg_softmax_f64;
  static constexpr auto seg_softmax_backward = sf_seg_softmax_backward_f64;
  static constexpr auto slot_partial = sf_slot_partial_f64;
  static constexpr auto slot_finish = sf_slot_finish_f64;
  static constexpr auto slot_runs = sf_slot_runs_f64;
  static constexpr auto slot_softmax_max = sf_slot_softmax_max_f64;
  static constexpr auto slot_softmax_exp = sf_slot_softmax_exp_f64;
  static constexpr auto slot_softmax_norm = sf_slot_softmax_norm_f64;
  static constexpr auto slot_softmax_write = sf_slot_softmax_write_f64;
  static constexpr auto slot_softmax_backward_partial = sf_slot_softmax_backward_partial_f64;
  static constexpr auto slot_softmax_backward_norm = sf_slot_softmax_backward_norm_f64;
  static constexpr auto slot_softmax_backward_write = sf_slot_softmax_backward_write_f64;
};

template <> struct Core<int64_t> {
  static constexpr auto lane_topk_fill = sf_lane_topk_fill_i64;
  static constexpr auto lane_sort_fill = sf_lane_sort_fill_i64;
  static constexpr auto semiring_mv = sf_csr_semiring_mv_i64;
  static constexpr auto semiring_vm = sf_csr_semiring_vm_i64;
  static constexpr auto semiring_masked = sf_csr_semiring_masked_i64;
  static constexpr auto semiring_masked_rows = sf_csr_semiring_masked_rows_i64;
  static constexpr auto ewise_union = sf_csr_ewise_union_i64;
  static constexpr auto seg_sum = sf_seg_sum_i64;
  static constexpr auto seg_max = sf_seg_max_i64;
  static constexpr auto slot_partial = sf_slot_partial_i64;
  static constexpr auto slot_finish = sf_slot_finish_i64;
  static constexpr auto slot_runs = sf_slot_runs_i64;
};

}  // namespace sparsefill
