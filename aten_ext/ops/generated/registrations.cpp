// ops/generated/registrations.cpp -- every hand-written kernel of the list at its
// dispatch key; the CUDA ones in the CUDA build only
// (written by tools/codegen/gen_native.py from tools/codegen/native.yaml: edit those).
#include <torch/library.h>

#include "ops/generated/kernels.h"

TORCH_LIBRARY_IMPL(sparsefill, CPU, m) {
  m.impl("coo_check", &sparsefill::coo_check_cpu);
  m.impl("csr_check", &sparsefill::csr_check_cpu);
  m.impl("coo_linearize", &sparsefill::coo_linearize_cpu);
  m.impl("coo_delinearize", &sparsefill::coo_delinearize_cpu);
  m.impl("coalesce_plan", &sparsefill::coalesce_plan_cpu);
  m.impl("rows_from_crow", &sparsefill::rows_from_crow_cpu);
  m.impl("csr_find", &sparsefill::csr_find_cpu);
  m.impl("lane_topk_fill", &sparsefill::lane_topk_fill_cpu);
  m.impl("lane_sort_fill", &sparsefill::lane_sort_fill_cpu);
  m.impl("crow_from_rows", &sparsefill::crow_from_rows_cpu);
  m.impl("union_plan", &sparsefill::union_plan_cpu);
  m.impl("union_values", &sparsefill::union_values_cpu);
  m.impl("union_binop", &sparsefill::union_binop_cpu);
  m.impl("index_select_plan", &sparsefill::index_select_plan_cpu);
  m.impl("spmm", &sparsefill::spmm_cpu);
  m.impl("sddmm", &sparsefill::sddmm_cpu);
  m.impl("sparse_attention", &sparsefill::sparse_attention_cpu);
  m.impl("sparse_attention_backward", &sparsefill::sparse_attention_backward_cpu);
  m.impl("csr_transpose", &sparsefill::csr_transpose_cpu);
  m.impl("spgemm", &sparsefill::spgemm_cpu);
  m.impl("semiring_mv", &sparsefill::semiring_mv_cpu);
  m.impl("semiring_vm", &sparsefill::semiring_vm_cpu);
  m.impl("semiring_masked", &sparsefill::semiring_masked_cpu);
  m.impl("ewise_merge", &sparsefill::ewise_merge_cpu);
  m.impl("bsr_spmm", &sparsefill::bsr_spmm_cpu);
  m.impl("slice_plan", &sparsefill::slice_plan_cpu);
  m.impl("seg_reduce", &sparsefill::seg_reduce_cpu);
  m.impl("seg_max", &sparsefill::seg_max_cpu);
  m.impl("seg_softmax", &sparsefill::seg_softmax_cpu);
  m.impl("seg_softmax_backward", &sparsefill::seg_softmax_backward_cpu);
  m.impl("slot_reduce", &sparsefill::slot_reduce_cpu);
  m.impl("slot_softmax", &sparsefill::slot_softmax_cpu);
  m.impl("slot_softmax_backward", &sparsefill::slot_softmax_backward_cpu);
}

#ifdef SPARSEFILL_WITH_CUDA
TORCH_LIBRARY_IMPL(sparsefill, CUDA, m) {
  m.impl("coo_check", &sparsefill::coo_check_cuda);
  m.impl("csr_check", &sparsefill::csr_check_cuda);
  m.impl("coo_linearize", &sparsefill::coo_linearize_cuda);
  m.impl("coo_delinearize", &sparsefill::coo_delinearize_cuda);
  m.impl("coalesce_plan", &sparsefill::coalesce_plan_cuda);
  m.impl("rows_from_crow", &sparsefill::rows_from_crow_cuda);
  m.impl("crow_from_rows", &sparsefill::crow_from_rows_cuda);
  m.impl("union_plan", &sparsefill::union_plan_cuda);
  m.impl("spmm", &sparsefill::spmm_cuda);
  m.impl("sddmm", &sparsefill::sddmm_cuda);
  m.impl("sparse_attention", &sparsefill::sparse_attention_cuda);
  m.impl("sparse_attention_backward", &sparsefill::sparse_attention_backward_cuda);
  m.impl("csr_transpose", &sparsefill::csr_transpose_cuda);
  m.impl("spgemm", &sparsefill::spgemm_cuda);
  m.impl("semiring_mv", &sparsefill::semiring_mv_cuda);
  m.impl("semiring_vm", &sparsefill::semiring_vm_cuda);
  m.impl("semiring_masked", &sparsefill::semiring_masked_cuda);
  m.impl("bsr_spmm", &sparsefill::bsr_spmm_cuda);
  m.impl("slice_plan", &sparsefill::slice_plan_cuda);
  m.impl("seg_reduce", &sparsefill::seg_reduce_cuda);
  m.impl("seg_max", &sparsefill::seg_max_cuda);
  m.impl("seg_softmax", &sparsefill::seg_softmax_cuda);
  m.impl("seg_softmax_backward", &sparsefill::seg_softmax_backward_cuda);
}
#endif

TORCH_LIBRARY_IMPL(sparsefill, CompositeImplicitAutograd, m) {
  m.impl("coo_coalesce", &sparsefill::coo_coalesce_composite);
  m.impl("gather_with_fill", &sparsefill::gather_with_fill_composite);
  m.impl("to_dense", &sparsefill::to_dense_composite);
  m.impl("eliminate_fill", &sparsefill::eliminate_fill_composite);
  m.impl("dense_spmm", &sparsefill::dense_spmm_composite);
  m.impl("sparse_mm_dense", &sparsefill::sparse_mm_dense_composite);
}

TORCH_LIBRARY_IMPL(sparsefill, CompositeExplicitAutograd, m) {
  m.impl("from_dense", &sparsefill::from_dense_composite);
}
