// ops/generated/schemas.h -- every schema of torch.ops.sparsefill but the
// element-wise ones (elementwise_schemas.h), then each `<op>_autograd` twin: the
// op's schema under the twin's name, which ops/library.cpp defines
// (written by tools/codegen/gen_native.py from tools/codegen/native.yaml:
// edit those).
#pragma once

namespace sparsefill {

inline constexpr const char* kNativeSchemas[] = {
    "coo_check(Tensor indices, int[] size) -> Tensor",
    "csr_check(Tensor crow_indices, Tensor col_indices, int[] size) -> ()",
    "coo_linearize(Tensor indices, int[] size) -> Tensor",
    "coo_delinearize(Tensor linear, int[] size) -> Tensor",
    "coalesce_plan(Tensor indices, int[] size) -> (Tensor indices, Tensor segment)",
    "coo_coalesce(Tensor indices, Tensor values, int[] size) -> (Tensor indices, Tensor values)",
    "rows_from_crow(Tensor crow_indices) -> Tensor",
    "csr_find(Tensor crow_indices, Tensor col_indices, Tensor rows, Tensor cols, int ncols) -> Tensor",
    "lane_topk_fill(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor fill, int n, int k, bool descending) -> (Tensor, Tensor)",
    "lane_sort_fill(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor fill, int n, bool descending, bool with_indices) -> (Tensor, Tensor, Tensor)",
    "crow_from_rows(Tensor rows, int nrows) -> Tensor",
    "union_plan(Tensor indices_a, Tensor indices_b, int[] size) -> (Tensor indices, Tensor src_a, Tensor src_b)",
    "union_values(Tensor indices_a, Tensor values_a, Tensor fill_a, Tensor indices_b, Tensor values_b, Tensor fill_b, int[] size) -> (Tensor indices, Tensor a, Tensor b)",
    "union_binop(Tensor indices_a, Tensor values_a, Tensor fill_a, Tensor indices_b, Tensor values_b, Tensor fill_b, int[] size, int binop) -> (Tensor indices, Tensor values)",
    "index_select_plan(Tensor indices, Tensor index, int dim, int[] size) -> (Tensor indices, Tensor src)",
    "gather_with_fill(Tensor values, Tensor fill, Tensor src) -> Tensor",
    "to_dense(Tensor indices, Tensor values, Tensor fill, int[] size) -> Tensor",
    "from_dense(Tensor self, Tensor fill, int sparse_dim) -> (Tensor indices, Tensor values, Tensor fill)",
    "eliminate_fill(Tensor indices, Tensor values, Tensor fill) -> (Tensor indices, Tensor values)",
    "spmm(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor fill, Tensor other, int ncols) -> Tensor",
    "dense_spmm(Tensor other, Tensor crow_indices, Tensor col_indices, Tensor values, Tensor fill, int ncols) -> Tensor",
    "sddmm(Tensor crow_indices, Tensor col_indices, int ncols, Tensor x, Tensor y) -> Tensor",
    "sparse_attention(Tensor crow_indices, Tensor col_indices, Tensor? bias, Tensor query, Tensor key, Tensor value, float scale) -> (Tensor out, Tensor lse)",
    "sparse_attention_backward(Tensor crow_indices, Tensor col_indices, Tensor? bias, Tensor query, Tensor key, Tensor value, Tensor lse, Tensor grad_out, Tensor? grad_lse, float scale) -> (Tensor grad_query, Tensor grad_key, Tensor grad_value, Tensor grad_scores)",
    "csr_transpose(Tensor crow_indices, Tensor col_indices, int ncols) -> (Tensor crow_indices, Tensor col_indices, Tensor perm)",
    "spgemm(Tensor crow_a, Tensor col_a, Tensor values_a, Tensor crow_b, Tensor col_b, Tensor values_b, int n) -> (Tensor crow_indices, Tensor col_indices, Tensor values)",
    "sparse_mm_dense(Tensor crow_a, Tensor col_a, Tensor values_a, Tensor fill_a, Tensor crow_b, Tensor col_b, Tensor values_b, Tensor fill_b, int k, int n) -> Tensor",
    "semiring_mv(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor x, Tensor? x_present, int monoid, int binop) -> (Tensor out, Tensor arg)",
    "semiring_vm(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor u_keys, Tensor u_values, int ncols, int monoid, int binop) -> (Tensor out, Tensor arg)",
    "semiring_masked(Tensor crow_m, Tensor col_m, Tensor crow_a, Tensor col_a, Tensor values_a, Tensor crow_b, Tensor col_b, Tensor values_b, int ncols, int monoid, int binop, bool by_dots) -> (Tensor crow_indices, Tensor col_indices, Tensor values)",
    "ewise_merge(Tensor crow_a, Tensor col_a, Tensor values_a, Tensor crow_b, Tensor col_b, Tensor values_b, int ncols, int binop, Tensor? a_default, Tensor? b_default) -> (Tensor crow_indices, Tensor col_indices, Tensor values)",
    "bsr_spmm(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor fill, Tensor other, int ncols) -> Tensor",
    "slice_plan(Tensor indices, int[] size, int[] dims, bool compact) -> (Tensor seg_ptr, Tensor perm, Tensor kept)",
    "seg_reduce(Tensor values, Tensor fill, Tensor seg_ptr, int n, str reduce) -> Tensor",
    "seg_max(Tensor values, Tensor fill, Tensor seg_ptr, Tensor? coord, int n, bool is_min, bool split_ties) -> (Tensor out, Tensor winner, Tensor index)",
    "seg_softmax(Tensor values, Tensor fill, Tensor seg_ptr, int n, bool log) -> (Tensor values, Tensor fill)",
    "seg_softmax_backward(Tensor out, Tensor out_fill, Tensor grad, Tensor grad_fill, Tensor seg_ptr, int n, bool log) -> (Tensor grad_values, Tensor grad_fill)",
    "slot_reduce(Tensor values, Tensor slot, Tensor fill, int nslots, int n, str reduce) -> (Tensor out, Tensor count)",
    "slot_softmax(Tensor values, Tensor slot, Tensor fill, int nslots, int n, bool log) -> (Tensor values, Tensor fill)",
    "slot_softmax_backward(Tensor out, Tensor out_fill, Tensor grad, Tensor grad_fill, Tensor slot, int n, bool log) -> (Tensor grad_values, Tensor grad_fill)",
    "from_dense_autograd(Tensor self, Tensor fill, int sparse_dim) -> (Tensor indices, Tensor values, Tensor fill)",
    "spmm_autograd(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor fill, Tensor other, int ncols) -> Tensor",
    "sddmm_autograd(Tensor crow_indices, Tensor col_indices, int ncols, Tensor x, Tensor y) -> Tensor",
    "spgemm_autograd(Tensor crow_a, Tensor col_a, Tensor values_a, Tensor crow_b, Tensor col_b, Tensor values_b, int n) -> (Tensor crow_indices, Tensor col_indices, Tensor values)",
    "seg_reduce_autograd(Tensor values, Tensor fill, Tensor seg_ptr, int n, str reduce) -> Tensor",
    "seg_max_autograd(Tensor values, Tensor fill, Tensor seg_ptr, Tensor? coord, int n, bool is_min, bool split_ties) -> (Tensor out, Tensor winner, Tensor index)",
    "seg_softmax_autograd(Tensor values, Tensor fill, Tensor seg_ptr, int n, bool log) -> (Tensor values, Tensor fill)",
    "slot_reduce_autograd(Tensor values, Tensor slot, Tensor fill, int nslots, int n, str reduce) -> (Tensor out, Tensor count)",
    "slot_softmax_autograd(Tensor values, Tensor slot, Tensor fill, int nslots, int n, bool log) -> (Tensor values, Tensor fill)",
};

}  // namespace sparsefill
