// ops/generated/kernels.h -- the hand-written kernel of each op at each key of its
// `kernels` in the list, named <op>_<cpu|cuda|composite> (defined in
// ops/<family>/; the CUDA ones in the CUDA build only)
// (written by tools/codegen/gen_native.py from tools/codegen/native.yaml: edit those).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <optional>
#include <tuple>

namespace sparsefill {
using at::Tensor;

// ---- structure (ops/structure/)
Tensor coo_check_cpu(const Tensor& indices, at::IntArrayRef size);
Tensor coo_check_cuda(const Tensor& indices, at::IntArrayRef size);
void csr_check_cpu(const Tensor& crow_indices, const Tensor& col_indices, at::IntArrayRef size);
void csr_check_cuda(const Tensor& crow_indices, const Tensor& col_indices, at::IntArrayRef size);
Tensor coo_linearize_cpu(const Tensor& indices, at::IntArrayRef size);
Tensor coo_linearize_cuda(const Tensor& indices, at::IntArrayRef size);
Tensor coo_delinearize_cpu(const Tensor& linear, at::IntArrayRef size);
Tensor coo_delinearize_cuda(const Tensor& linear, at::IntArrayRef size);
std::tuple<Tensor, Tensor> coalesce_plan_cpu(const Tensor& indices, at::IntArrayRef size);
std::tuple<Tensor, Tensor> coalesce_plan_cuda(const Tensor& indices, at::IntArrayRef size);
std::tuple<Tensor, Tensor> coo_coalesce_composite(const Tensor& indices, const Tensor& values,
                                                  at::IntArrayRef size);
Tensor rows_from_crow_cpu(const Tensor& crow_indices);
Tensor rows_from_crow_cuda(const Tensor& crow_indices);
Tensor csr_find_cpu(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& rows,
                    const Tensor& cols, int64_t ncols);
std::tuple<Tensor, Tensor> lane_topk_fill_cpu(const Tensor& crow_indices, const Tensor& col_indices,
                                              const Tensor& values, const Tensor& fill, int64_t n,
                                              int64_t k, bool descending);
std::tuple<Tensor, Tensor, Tensor> lane_sort_fill_cpu(const Tensor& crow_indices,
                                                      const Tensor& col_indices,
                                                      const Tensor& values, const Tensor& fill,
                                                      int64_t n, bool descending,
                                                      bool with_indices);
Tensor crow_from_rows_cpu(const Tensor& rows, int64_t nrows);
Tensor crow_from_rows_cuda(const Tensor& rows, int64_t nrows);
std::tuple<Tensor, Tensor, Tensor> union_plan_cpu(const Tensor& indices_a, const Tensor& indices_b,
                                                  at::IntArrayRef size);
std::tuple<Tensor, Tensor, Tensor> union_plan_cuda(const Tensor& indices_a, const Tensor& indices_b,
                                                   at::IntArrayRef size);
std::tuple<Tensor, Tensor, Tensor> union_values_cpu(const Tensor& indices_a, const Tensor& values_a,
                                                    const Tensor& fill_a, const Tensor& indices_b,
                                                    const Tensor& values_b, const Tensor& fill_b,
                                                    at::IntArrayRef size);
std::tuple<Tensor, Tensor> union_binop_cpu(const Tensor& indices_a, const Tensor& values_a,
                                           const Tensor& fill_a, const Tensor& indices_b,
                                           const Tensor& values_b, const Tensor& fill_b,
                                           at::IntArrayRef size, int64_t binop);
std::tuple<Tensor, Tensor> index_select_plan_cpu(const Tensor& indices, const Tensor& index,
                                                 int64_t dim, at::IntArrayRef size);
Tensor gather_with_fill_composite(const Tensor& values, const Tensor& fill, const Tensor& src);
Tensor to_dense_composite(const Tensor& indices, const Tensor& values, const Tensor& fill,
                          at::IntArrayRef size);
std::tuple<Tensor, Tensor, Tensor> from_dense_composite(const Tensor& self, const Tensor& fill,
                                                        int64_t sparse_dim);
std::tuple<Tensor, Tensor> eliminate_fill_composite(const Tensor& indices, const Tensor& values,
                                                    const Tensor& fill);

// ---- products (ops/products/)
Tensor spmm_cpu(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                const Tensor& fill, const Tensor& other, int64_t ncols);
Tensor spmm_cuda(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                 const Tensor& fill, const Tensor& other, int64_t ncols);
Tensor dense_spmm_composite(const Tensor& other, const Tensor& crow_indices,
                            const Tensor& col_indices, const Tensor& values, const Tensor& fill,
                            int64_t ncols);
Tensor sddmm_cpu(const Tensor& crow_indices, const Tensor& col_indices, int64_t ncols,
                 const Tensor& x, const Tensor& y);
Tensor sddmm_cuda(const Tensor& crow_indices, const Tensor& col_indices, int64_t ncols,
                  const Tensor& x, const Tensor& y);
std::tuple<Tensor, Tensor> sparse_attention_cpu(const Tensor& crow_indices,
                                                const Tensor& col_indices,
                                                const std::optional<Tensor>& bias,
                                                const Tensor& query, const Tensor& key,
                                                const Tensor& value, double scale);
std::tuple<Tensor, Tensor> sparse_attention_cuda(const Tensor& crow_indices,
                                                 const Tensor& col_indices,
                                                 const std::optional<Tensor>& bias,
                                                 const Tensor& query, const Tensor& key,
                                                 const Tensor& value, double scale);
std::tuple<Tensor, Tensor, Tensor, Tensor> sparse_attention_backward_cpu(
    const Tensor& crow_indices, const Tensor& col_indices, const std::optional<Tensor>& bias,
    const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& lse,
    const Tensor& grad_out, const std::optional<Tensor>& grad_lse, double scale);
std::tuple<Tensor, Tensor, Tensor, Tensor> sparse_attention_backward_cuda(
    const Tensor& crow_indices, const Tensor& col_indices, const std::optional<Tensor>& bias,
    const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& lse,
    const Tensor& grad_out, const std::optional<Tensor>& grad_lse, double scale);
std::tuple<Tensor, Tensor, Tensor> csr_transpose_cpu(const Tensor& crow_indices,
                                                     const Tensor& col_indices, int64_t ncols);
std::tuple<Tensor, Tensor, Tensor> csr_transpose_cuda(const Tensor& crow_indices,
                                                      const Tensor& col_indices, int64_t ncols);
std::tuple<Tensor, Tensor, Tensor> spgemm_cpu(const Tensor& crow_a, const Tensor& col_a,
                                              const Tensor& values_a, const Tensor& crow_b,
                                              const Tensor& col_b, const Tensor& values_b,
                                              int64_t n);
std::tuple<Tensor, Tensor, Tensor> spgemm_cuda(const Tensor& crow_a, const Tensor& col_a,
                                               const Tensor& values_a, const Tensor& crow_b,
                                               const Tensor& col_b, const Tensor& values_b,
                                               int64_t n);
Tensor sparse_mm_dense_composite(const Tensor& crow_a, const Tensor& col_a, const Tensor& values_a,
                                 const Tensor& fill_a, const Tensor& crow_b, const Tensor& col_b,
                                 const Tensor& values_b, const Tensor& fill_b, int64_t k,
                                 int64_t n);
std::tuple<Tensor, Tensor> semiring_mv_cpu(const Tensor& crow_indices, const Tensor& col_indices,
                                           const Tensor& values, const Tensor& x,
                                           const std::optional<Tensor>& x_present, int64_t monoid,
                                           int64_t binop);
std::tuple<Tensor, Tensor> semiring_mv_cuda(const Tensor& crow_indices, const Tensor& col_indices,
                                            const Tensor& values, const Tensor& x,
                                            const std::optional<Tensor>& x_present, int64_t monoid,
                                            int64_t binop);
std::tuple<Tensor, Tensor> semiring_vm_cpu(const Tensor& crow_indices, const Tensor& col_indices,
                                           const Tensor& values, const Tensor& u_keys,
                                           const Tensor& u_values, int64_t ncols, int64_t monoid,
                                           int64_t binop);
std::tuple<Tensor, Tensor> semiring_vm_cuda(const Tensor& crow_indices, const Tensor& col_indices,
                                            const Tensor& values, const Tensor& u_keys,
                                            const Tensor& u_values, int64_t ncols, int64_t monoid,
                                            int64_t binop);
std::tuple<Tensor, Tensor, Tensor> semiring_masked_cpu(const Tensor& crow_m, const Tensor& col_m,
                                                       const Tensor& crow_a, const Tensor& col_a,
                                                       const Tensor& values_a, const Tensor& crow_b,
                                                       const Tensor& col_b, const Tensor& values_b,
                                                       int64_t ncols, int64_t monoid, int64_t binop,
                                                       bool by_dots);
std::tuple<Tensor, Tensor, Tensor> semiring_masked_cuda(const Tensor& crow_m, const Tensor& col_m,
                                                        const Tensor& crow_a, const Tensor& col_a,
                                                        const Tensor& values_a,
                                                        const Tensor& crow_b, const Tensor& col_b,
                                                        const Tensor& values_b, int64_t ncols,
                                                        int64_t monoid, int64_t binop,
                                                        bool by_dots);
std::tuple<Tensor, Tensor, Tensor> ewise_merge_cpu(const Tensor& crow_a, const Tensor& col_a,
                                                   const Tensor& values_a, const Tensor& crow_b,
                                                   const Tensor& col_b, const Tensor& values_b,
                                                   int64_t ncols, int64_t binop,
                                                   const std::optional<Tensor>& a_default,
                                                   const std::optional<Tensor>& b_default);

// ---- bsr (ops/bsr/)
Tensor bsr_spmm_cpu(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                    const Tensor& fill, const Tensor& other, int64_t ncols);
Tensor bsr_spmm_cuda(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                     const Tensor& fill, const Tensor& other, int64_t ncols);

// ---- reductions (ops/reductions/)
std::tuple<Tensor, Tensor, Tensor> slice_plan_cpu(const Tensor& indices, at::IntArrayRef size,
                                                  at::IntArrayRef dims, bool compact);
std::tuple<Tensor, Tensor, Tensor> slice_plan_cuda(const Tensor& indices, at::IntArrayRef size,
                                                   at::IntArrayRef dims, bool compact);
Tensor seg_reduce_cpu(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr, int64_t n,
                      c10::string_view reduce);
Tensor seg_reduce_cuda(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr, int64_t n,
                       c10::string_view reduce);
std::tuple<Tensor, Tensor, Tensor> seg_max_cpu(const Tensor& values, const Tensor& fill,
                                               const Tensor& seg_ptr,
                                               const std::optional<Tensor>& coord, int64_t n,
                                               bool is_min, bool split_ties);
std::tuple<Tensor, Tensor, Tensor> seg_max_cuda(const Tensor& values, const Tensor& fill,
                                                const Tensor& seg_ptr,
                                                const std::optional<Tensor>& coord, int64_t n,
                                                bool is_min, bool split_ties);
std::tuple<Tensor, Tensor> seg_softmax_cpu(const Tensor& values, const Tensor& fill,
                                           const Tensor& seg_ptr, int64_t n, bool log);
std::tuple<Tensor, Tensor> seg_softmax_cuda(const Tensor& values, const Tensor& fill,
                                            const Tensor& seg_ptr, int64_t n, bool log);
std::tuple<Tensor, Tensor> seg_softmax_backward_cpu(const Tensor& out, const Tensor& out_fill,
                                                    const Tensor& grad, const Tensor& grad_fill,
                                                    const Tensor& seg_ptr, int64_t n, bool log);
std::tuple<Tensor, Tensor> seg_softmax_backward_cuda(const Tensor& out, const Tensor& out_fill,
                                                     const Tensor& grad, const Tensor& grad_fill,
                                                     const Tensor& seg_ptr, int64_t n, bool log);
std::tuple<Tensor, Tensor> slot_reduce_cpu(const Tensor& values, const Tensor& slot,
                                           const Tensor& fill, int64_t nslots, int64_t n,
                                           c10::string_view reduce);
std::tuple<Tensor, Tensor> slot_softmax_cpu(const Tensor& values, const Tensor& slot,
                                            const Tensor& fill, int64_t nslots, int64_t n,
                                            bool log);
std::tuple<Tensor, Tensor> slot_softmax_backward_cpu(const Tensor& out, const Tensor& out_fill,
                                                     const Tensor& grad, const Tensor& grad_fill,
                                                     const Tensor& slot, int64_t n, bool log);

}  // namespace sparsefill
