// ops/generated/calls.h -- call::<op>: each op of the list through the dispatcher,
// so that the kernel of the tensors' device (or the fake kernel, traced) runs
// (written by tools/codegen/gen_native.py from tools/codegen/native.yaml:
// edit those).
//   auto [indices, src_a, src_b] = call::union_plan(indices_a, indices_b, size);
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <optional>
#include <tuple>

#include "ops/common/dispatch.h"

namespace sparsefill {
using at::Tensor;
namespace call {

inline Tensor coo_check(const Tensor& indices, at::IntArrayRef size) {
  static auto op = op_handle<decltype(coo_check)>("sparsefill::coo_check");
  return op.call(indices, size);
}

inline void csr_check(const Tensor& crow_indices, const Tensor& col_indices, at::IntArrayRef size) {
  static auto op = op_handle<decltype(csr_check)>("sparsefill::csr_check");
  return op.call(crow_indices, col_indices, size);
}

inline Tensor coo_linearize(const Tensor& indices, at::IntArrayRef size) {
  static auto op = op_handle<decltype(coo_linearize)>("sparsefill::coo_linearize");
  return op.call(indices, size);
}

inline Tensor coo_delinearize(const Tensor& linear, at::IntArrayRef size) {
  static auto op = op_handle<decltype(coo_delinearize)>("sparsefill::coo_delinearize");
  return op.call(linear, size);
}

inline std::tuple<Tensor, Tensor> coalesce_plan(const Tensor& indices, at::IntArrayRef size) {
  static auto op = op_handle<decltype(coalesce_plan)>("sparsefill::coalesce_plan");
  return op.call(indices, size);
}

inline std::tuple<Tensor, Tensor> coo_coalesce(const Tensor& indices, const Tensor& values,
                                               at::IntArrayRef size) {
  static auto op = op_handle<decltype(coo_coalesce)>("sparsefill::coo_coalesce");
  return op.call(indices, values, size);
}

inline Tensor rows_from_crow(const Tensor& crow_indices) {
  static auto op = op_handle<decltype(rows_from_crow)>("sparsefill::rows_from_crow");
  return op.call(crow_indices);
}

inline Tensor csr_find(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& rows,
                       const Tensor& cols, int64_t ncols) {
  static auto op = op_handle<decltype(csr_find)>("sparsefill::csr_find");
  return op.call(crow_indices, col_indices, rows, cols, ncols);
}

inline std::tuple<Tensor, Tensor> lane_topk_fill(const Tensor& crow_indices,
                                                 const Tensor& col_indices, const Tensor& values,
                                                 const Tensor& fill, int64_t n, int64_t k,
                                                 bool descending) {
  static auto op = op_handle<decltype(lane_topk_fill)>("sparsefill::lane_topk_fill");
  return op.call(crow_indices, col_indices, values, fill, n, k, descending);
}

inline std::tuple<Tensor, Tensor, Tensor> lane_sort_fill(const Tensor& crow_indices,
                                                         const Tensor& col_indices,
                                                         const Tensor& values, const Tensor& fill,
                                                         int64_t n, bool descending,
                                                         bool with_indices) {
  static auto op = op_handle<decltype(lane_sort_fill)>("sparsefill::lane_sort_fill");
  return op.call(crow_indices, col_indices, values, fill, n, descending, with_indices);
}

inline Tensor crow_from_rows(const Tensor& rows, int64_t nrows) {
  static auto op = op_handle<decltype(crow_from_rows)>("sparsefill::crow_from_rows");
  return op.call(rows, nrows);
}

inline std::tuple<Tensor, Tensor, Tensor> union_plan(const Tensor& indices_a,
                                                     const Tensor& indices_b,
                                                     at::IntArrayRef size) {
  static auto op = op_handle<decltype(union_plan)>("sparsefill::union_plan");
  return op.call(indices_a, indices_b, size);
}

inline std::tuple<Tensor, Tensor, Tensor> union_values(const Tensor& indices_a,
                                                       const Tensor& values_a, const Tensor& fill_a,
                                                       const Tensor& indices_b,
                                                       const Tensor& values_b, const Tensor& fill_b,
                                                       at::IntArrayRef size) {
  static auto op = op_handle<decltype(union_values)>("sparsefill::union_values");
  return op.call(indices_a, values_a, fill_a, indices_b, values_b, fill_b, size);
}

inline std::tuple<Tensor, Tensor> union_binop(const Tensor& indices_a, const Tensor& values_a,
                                              const Tensor& fill_a, const Tensor& indices_b,
                                              const Tensor& values_b, const Tensor& fill_b,
                                              at::IntArrayRef size, int64_t binop) {
  static auto op = op_handle<decltype(union_binop)>("sparsefill::union_binop");
  return op.call(indices_a, values_a, fill_a, indices_b, values_b, fill_b, size, binop);
}

inline std::tuple<Tensor, Tensor> index_select_plan(const Tensor& indices, const Tensor& index,
                                                    int64_t dim, at::IntArrayRef size) {
  static auto op = op_handle<decltype(index_select_plan)>("sparsefill::index_select_plan");
  return op.call(indices, index, dim, size);
}

inline Tensor gather_with_fill(const Tensor& values, const Tensor& fill, const Tensor& src) {
  static auto op = op_handle<decltype(gather_with_fill)>("sparsefill::gather_with_fill");
  return op.call(values, fill, src);
}

inline Tensor to_dense(const Tensor& indices, const Tensor& values, const Tensor& fill,
                       at::IntArrayRef size) {
  static auto op = op_handle<decltype(to_dense)>("sparsefill::to_dense");
  return op.call(indices, values, fill, size);
}

inline std::tuple<Tensor, Tensor, Tensor> from_dense(const Tensor& self, const Tensor& fill,
                                                     int64_t sparse_dim) {
  static auto op = op_handle<decltype(from_dense)>("sparsefill::from_dense");
  return op.call(self, fill, sparse_dim);
}

inline std::tuple<Tensor, Tensor> eliminate_fill(const Tensor& indices, const Tensor& values,
                                                 const Tensor& fill) {
  static auto op = op_handle<decltype(eliminate_fill)>("sparsefill::eliminate_fill");
  return op.call(indices, values, fill);
}

inline Tensor spmm(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                   const Tensor& fill, const Tensor& other, int64_t ncols) {
  static auto op = op_handle<decltype(spmm)>("sparsefill::spmm");
  return op.call(crow_indices, col_indices, values, fill, other, ncols);
}

inline Tensor dense_spmm(const Tensor& other, const Tensor& crow_indices, const Tensor& col_indices,
                         const Tensor& values, const Tensor& fill, int64_t ncols) {
  static auto op = op_handle<decltype(dense_spmm)>("sparsefill::dense_spmm");
  return op.call(other, crow_indices, col_indices, values, fill, ncols);
}

inline Tensor sddmm(const Tensor& crow_indices, const Tensor& col_indices, int64_t ncols,
                    const Tensor& x, const Tensor& y) {
  static auto op = op_handle<decltype(sddmm)>("sparsefill::sddmm");
  return op.call(crow_indices, col_indices, ncols, x, y);
}

inline std::tuple<Tensor, Tensor> sparse_attention(const Tensor& crow_indices,
                                                   const Tensor& col_indices,
                                                   const std::optional<Tensor>& bias,
                                                   const Tensor& query, const Tensor& key,
                                                   const Tensor& value, double scale) {
  static auto op = op_handle<decltype(sparse_attention)>("sparsefill::sparse_attention");
  return op.call(crow_indices, col_indices, bias, query, key, value, scale);
}

inline std::tuple<Tensor, Tensor, Tensor, Tensor> sparse_attention_backward(
    const Tensor& crow_indices, const Tensor& col_indices, const std::optional<Tensor>& bias,
    const Tensor& query, const Tensor& key, const Tensor& value, const Tensor& lse,
    const Tensor& grad_out, const std::optional<Tensor>& grad_lse, double scale) {
  static auto op = op_handle<decltype(sparse_attention_backward)>("sparsefill::sparse_attention_backward");
  return op.call(crow_indices, col_indices, bias, query, key, value, lse, grad_out, grad_lse,
                 scale);
}

inline std::tuple<Tensor, Tensor, Tensor> csr_transpose(const Tensor& crow_indices,
                                                        const Tensor& col_indices, int64_t ncols) {
  static auto op = op_handle<decltype(csr_transpose)>("sparsefill::csr_transpose");
  return op.call(crow_indices, col_indices, ncols);
}

inline std::tuple<Tensor, Tensor, Tensor> spgemm(const Tensor& crow_a, const Tensor& col_a,
                                                 const Tensor& values_a, const Tensor& crow_b,
                                                 const Tensor& col_b, const Tensor& values_b,
                                                 int64_t n) {
  static auto op = op_handle<decltype(spgemm)>("sparsefill::spgemm");
  return op.call(crow_a, col_a, values_a, crow_b, col_b, values_b, n);
}

inline Tensor sparse_mm_dense(const Tensor& crow_a, const Tensor& col_a, const Tensor& values_a,
                              const Tensor& fill_a, const Tensor& crow_b, const Tensor& col_b,
                              const Tensor& values_b, const Tensor& fill_b, int64_t k, int64_t n) {
  static auto op = op_handle<decltype(sparse_mm_dense)>("sparsefill::sparse_mm_dense");
  return op.call(crow_a, col_a, values_a, fill_a, crow_b, col_b, values_b, fill_b, k, n);
}

inline std::tuple<Tensor, Tensor> semiring_mv(const Tensor& crow_indices, const Tensor& col_indices,
                                              const Tensor& values, const Tensor& x,
                                              const std::optional<Tensor>& x_present,
                                              int64_t monoid, int64_t binop) {
  static auto op = op_handle<decltype(semiring_mv)>("sparsefill::semiring_mv");
  return op.call(crow_indices, col_indices, values, x, x_present, monoid, binop);
}

inline std::tuple<Tensor, Tensor> semiring_vm(const Tensor& crow_indices, const Tensor& col_indices,
                                              const Tensor& values, const Tensor& u_keys,
                                              const Tensor& u_values, int64_t ncols, int64_t monoid,
                                              int64_t binop) {
  static auto op = op_handle<decltype(semiring_vm)>("sparsefill::semiring_vm");
  return op.call(crow_indices, col_indices, values, u_keys, u_values, ncols, monoid, binop);
}

inline std::tuple<Tensor, Tensor, Tensor> semiring_masked(const Tensor& crow_m, const Tensor& col_m,
                                                          const Tensor& crow_a, const Tensor& col_a,
                                                          const Tensor& values_a,
                                                          const Tensor& crow_b, const Tensor& col_b,
                                                          const Tensor& values_b, int64_t ncols,
                                                          int64_t monoid, int64_t binop,
                                                          bool by_dots) {
  static auto op = op_handle<decltype(semiring_masked)>("sparsefill::semiring_masked");
  return op.call(crow_m, col_m, crow_a, col_a, values_a, crow_b, col_b, values_b, ncols, monoid,
                 binop, by_dots);
}

inline std::tuple<Tensor, Tensor, Tensor> ewise_merge(const Tensor& crow_a, const Tensor& col_a,
                                                      const Tensor& values_a, const Tensor& crow_b,
                                                      const Tensor& col_b, const Tensor& values_b,
                                                      int64_t ncols, int64_t binop,
                                                      const std::optional<Tensor>& a_default,
                                                      const std::optional<Tensor>& b_default) {
  static auto op = op_handle<decltype(ewise_merge)>("sparsefill::ewise_merge");
  return op.call(crow_a, col_a, values_a, crow_b, col_b, values_b, ncols, binop, a_default,
                 b_default);
}

inline Tensor bsr_spmm(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                       const Tensor& fill, const Tensor& other, int64_t ncols) {
  static auto op = op_handle<decltype(bsr_spmm)>("sparsefill::bsr_spmm");
  return op.call(crow_indices, col_indices, values, fill, other, ncols);
}

inline std::tuple<Tensor, Tensor, Tensor> slice_plan(const Tensor& indices, at::IntArrayRef size,
                                                     at::IntArrayRef dims, bool compact) {
  static auto op = op_handle<decltype(slice_plan)>("sparsefill::slice_plan");
  return op.call(indices, size, dims, compact);
}

inline Tensor seg_reduce(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr, int64_t n,
                         c10::string_view reduce) {
  static auto op = op_handle<decltype(seg_reduce)>("sparsefill::seg_reduce");
  return op.call(values, fill, seg_ptr, n, reduce);
}

inline std::tuple<Tensor, Tensor, Tensor> seg_max(const Tensor& values, const Tensor& fill,
                                                  const Tensor& seg_ptr,
                                                  const std::optional<Tensor>& coord, int64_t n,
                                                  bool is_min, bool split_ties) {
  static auto op = op_handle<decltype(seg_max)>("sparsefill::seg_max");
  return op.call(values, fill, seg_ptr, coord, n, is_min, split_ties);
}

inline std::tuple<Tensor, Tensor> seg_softmax(const Tensor& values, const Tensor& fill,
                                              const Tensor& seg_ptr, int64_t n, bool log) {
  static auto op = op_handle<decltype(seg_softmax)>("sparsefill::seg_softmax");
  return op.call(values, fill, seg_ptr, n, log);
}

inline std::tuple<Tensor, Tensor> seg_softmax_backward(const Tensor& out, const Tensor& out_fill,
                                                       const Tensor& grad, const Tensor& grad_fill,
                                                       const Tensor& seg_ptr, int64_t n, bool log) {
  static auto op = op_handle<decltype(seg_softmax_backward)>("sparsefill::seg_softmax_backward");
  return op.call(out, out_fill, grad, grad_fill, seg_ptr, n, log);
}

inline std::tuple<Tensor, Tensor> slot_reduce(const Tensor& values, const Tensor& slot,
                                              const Tensor& fill, int64_t nslots, int64_t n,
                                              c10::string_view reduce) {
  static auto op = op_handle<decltype(slot_reduce)>("sparsefill::slot_reduce");
  return op.call(values, slot, fill, nslots, n, reduce);
}

inline std::tuple<Tensor, Tensor> slot_softmax(const Tensor& values, const Tensor& slot,
                                               const Tensor& fill, int64_t nslots, int64_t n,
                                               bool log) {
  static auto op = op_handle<decltype(slot_softmax)>("sparsefill::slot_softmax");
  return op.call(values, slot, fill, nslots, n, log);
}

inline std::tuple<Tensor, Tensor> slot_softmax_backward(const Tensor& out, const Tensor& out_fill,
                                                        const Tensor& grad, const Tensor& grad_fill,
                                                        const Tensor& slot, int64_t n, bool log) {
  static auto op = op_handle<decltype(slot_softmax_backward)>("sparsefill::slot_softmax_backward");
  return op.call(out, out_fill, grad, grad_fill, slot, n, log);
}

}  // namespace call
}  // namespace sparsefill
