// ops/generated/cuda_core.h -- CudaCore<T>: the CUDA core's typed entry points by element
// type, the twin of Core<T>; only CUDA kernels include it (common/cuda.h)
// (written by tools/codegen/gen_native.py from tools/codegen/native.yaml:
// edit those).
#pragma once

#include <cstdint>

#include "sparsefill_cuda.h"

namespace sparsefill {

template <class T> struct CudaCore;

template <> struct CudaCore<float> {
  static constexpr auto spmm = sf_cuda_csr_spmm_f32;
  static constexpr auto sddmm = sf_cuda_csr_sddmm_f32;
  static constexpr auto attention = sf_cuda_csr_attention_f32;
  static constexpr auto attention_backward = sf_cuda_csr_attention_backward_f32;
  static constexpr auto spgemm_create = sf_cuda_spgemm_create_f32;
  static constexpr auto spgemm_copy = sf_cuda_spgemm_copy_f32;
  static constexpr auto seg_sum = sf_cuda_seg_sum_f32;
  static constexpr auto seg_prod = sf_cuda_seg_prod_f32;
  static constexpr auto seg_max = sf_cuda_seg_max_f32;
  static constexpr auto seg_softmax = sf_cuda_seg_softmax_f32;
  static constexpr auto seg_softmax_backward = sf_cuda_seg_softmax_backward_f32;
  static constexpr auto semiring_mv = sf_cuda_csr_semiring_mv_f32;
  static constexpr auto semiring_vm = sf_cuda_csr_semiring_vm_f32;
  static constexpr auto semiring_masked = sf_cuda_csr_semiring_masked_f32;
  static constexpr auto bsr_spmm = sf_cuda_bsr_spmm_f32;
};

template <> struct CudaCore<double> {
  static constexpr auto spmm = sf_cuda_csr_spmm_f64;
  static constexpr auto sddmm = sf_cuda_csr_sddmm_f64;
  static constexpr auto attention = sf_cuda_csr_attention_f64;
  static constexpr auto attention_backward = sf_cuda_csr_attention_backward_f64;
  static constexpr auto spgemm_create = sf_cuda_spgemm_create_f64;
  static constexpr auto spgemm_copy = sf_cuda_spgemm_copy_f64;
  static constexpr auto seg_sum = sf_cuda_seg_sum_f64;
  static constexpr auto seg_prod = sf_cuda_seg_prod_f64;
  static constexpr auto seg_max = sf_cuda_seg_max_f64;
  static constexpr auto seg_softmax = sf_cuda_seg_softmax_f64;
  static constexpr auto seg_softmax_backward = sf_cuda_seg_softmax_backward_f64;
  static constexpr auto semiring_mv = sf_cuda_csr_semiring_mv_f64;
  static constexpr auto semiring_vm = sf_cuda_csr_semiring_vm_f64;
  static constexpr auto semiring_masked = sf_cuda_csr_semiring_masked_f64;
  static constexpr auto bsr_spmm = sf_cuda_bsr_spmm_f64;
};

template <> struct CudaCore<int64_t> {
  static constexpr auto seg_sum = sf_cuda_seg_sum_i64;
  static constexpr auto seg_max = sf_cuda_seg_max_i64;
  static constexpr auto semiring_mv = sf_cuda_csr_semiring_mv_i64;
  static constexpr auto semiring_vm = sf_cuda_csr_semiring_vm_i64;
  static constexpr auto semiring_masked = sf_cuda_csr_semiring_masked_i64;
};

}  // namespace sparsefill
