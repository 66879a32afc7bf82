// ops/structure.h -- the structural ops: validation, coalescing, conversions,
// pattern merges, on component tensors. Schemas in library.cpp; kernels in
// cpu/structure.cpp and cuda/structure.cpp (each calls its core, which does
// all structural work), composites in composite/structure.cpp, backward
// formulas in autograd/structure.cpp. Fake kernels of the data-dependent ops:
// torch_sparsefill/_fake.py.
//
// The ops (indices: int64 (sparse_dim, nse), row-major; `size`: the sparse sizes):
//   coo_check(indices, size) -> coalesced      validates; a 0-d bool tensor, true when
//                                              coalesced (a tensor: a fake kernel can
//                                              give one, a traced program carries it)
//   csr_check(crow, col, size) -> ()           validates a CSR pattern
//   coo_linearize(indices, size) -> linear     row-major position of each element
//   coo_delinearize(linear, size) -> indices   its inverse
//   coalesce_plan(indices, size) -> (indices, segment)  sorted unique indices and,
//                                              per input element, its output position
//   coo_coalesce(indices, values, size)        duplicates summed (composite)
//   rows_from_crow(crow) / crow_from_rows(rows, nrows)  CSR row pointers <-> row indices
//   union_plan(indices_a, indices_b, size) -> (indices, src_a, src_b)  the union of two
//                                              coalesced patterns; src_*: each union
//                                              element's position in that operand, -1
//                                              where it stores none
//   union_values(indices_a, values_a, fill_a, indices_b, values_b, fill_b, size)
//     -> (indices, a, b)                       the same union and each operand's values on
//                                              it (its dense-part fill where it stores
//                                              none), merged in one threaded pass (CPU;
//                                              no autograd: the element-wise ops call it
//                                              when nothing is differentiated or traced)
//   index_select_plan(indices, index, dim, size) -> (indices, src)  index_select of
//                                              coalesced indices along sparse dim `dim`:
//                                              the result's indices (coalesced, no global
//                                              sort; threaded, CPU) and each element's
//                                              source, whose values the caller gathers
//   gather_with_fill(values, fill, src)        rows values[src], the fill where src == -1
//                                              (composite: cat + index_select)
//   to_dense(indices, values, fill, size)      the strided tensor (composite)
//   from_dense(self, fill, sparse_dim) -> (indices, values, fill)  positions whose dense
//                                              part differs from the fill (NaN equals NaN)
//   eliminate_fill(indices, values, fill)      stored elements equal to the fill dropped
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "ops/common/args.h"
#include "ops/common/dispatch.h"

namespace sparsefill {

// ---- argument rules that the CPU and CUDA kernels share --------------------

// The error of a failed COO index check (sf_coo_check and its CUDA twin),
// naming the bad index and its dimension.
inline void check_coo_status(sf_status st, const sf_site& site, const std::vector<int64_t>& size) {
  if (st == SF_ERR_INDEX_NEGATIVE || st == SF_ERR_INDEX_OUT_OF_RANGE) {
    TORCH_CHECK(false, "sparsefill: indices[", site.dim, ", ", site.position,
                "] = ", site.value,
                st == SF_ERR_INDEX_NEGATIVE ? " is negative"
                                            : " is out of range for size ",
                st == SF_ERR_INDEX_NEGATIVE ? std::string()
                                            : std::to_string(size[site.dim]),
                " of dimension ", site.dim);
  }
  check_status(st, "indices", &site);
}

// Checked CSR components: sizes, and crow/col as int64 on `device`.
struct CsrArgs {
  std::vector<int64_t> size;
  Tensor crow, col;
};

inline CsrArgs csr_args(const Tensor& crow_in, const Tensor& col_in, at::IntArrayRef size_in,
                        c10::DeviceType device) {
  auto size = sizes_arg(size_in, "size");
  TORCH_CHECK(size.size() >= 2, "sparsefill: a CSR tensor needs 2 sparse dimensions, got size ",
              size_in);
  Tensor crow = index_arg(crow_in, "crow_indices", 1, device);
  Tensor col = index_arg(col_in, "col_indices", 1, device);
  TORCH_CHECK(crow_in.scalar_type() == col_in.scalar_type(),
              "sparsefill: crow_indices and col_indices must have the same dtype, got ",
              crow_in.scalar_type(), " and ", col_in.scalar_type());
  same_device(crow, "crow_indices", col, "col_indices");
  TORCH_CHECK(crow.numel() == size[0] + 1, "sparsefill: crow_indices must have length rows + 1 = ",
              size[0] + 1, ", got ", crow.numel());
  return {size, crow, col};
}

// The error of a failed CSR check (sf_csr_check and its CUDA twin).
inline void check_csr_status(sf_status st, const sf_site& site, const CsrArgs& a) {
  switch (st) {
    case SF_OK: return;
    case SF_ERR_CROW_FIRST:
      TORCH_CHECK(false, "sparsefill: crow_indices[0] must be 0, got ", site.value);
    case SF_ERR_CROW_DECREASING:
      TORCH_CHECK(false, "sparsefill: crow_indices must be non-decreasing, but crow_indices[",
                  site.position + 1, "] = ", site.value, " is smaller than the entry before it");
    case SF_ERR_CROW_LAST:
      TORCH_CHECK(false, "sparsefill: crow_indices[-1] must equal the number of stored elements (",
                  a.col.numel(), " = len(col_indices)), got ", site.value);
    case SF_ERR_INDEX_NEGATIVE:
    case SF_ERR_INDEX_OUT_OF_RANGE:
      TORCH_CHECK(false, "sparsefill: col_indices[", site.position, "] = ", site.value,
                  " is out of range for ", a.size[1], " columns");
    case SF_ERR_COL_UNSORTED:
      TORCH_CHECK(false, "sparsefill: col_indices must be strictly increasing within each row, "
                  "but col_indices[", site.position, "] = ", site.value,
                  " is not (unsorted or duplicate column)");
    default:
      check_status(st, "crow_indices/col_indices", &site);
  }
}

// ---- the ops, through the dispatcher (any device, traceable) ----------------

namespace call {

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

inline Tensor rows_from_crow(const Tensor& crow) {
  static auto op = op_handle<decltype(rows_from_crow)>("sparsefill::rows_from_crow");
  return op.call(crow);
}

inline std::tuple<Tensor, Tensor, Tensor> union_plan(const Tensor& indices_a,
                                                     const Tensor& indices_b,
                                                     at::IntArrayRef size) {
  static auto op = op_handle<decltype(union_plan)>("sparsefill::union_plan");
  return op.call(indices_a, indices_b, size);
}

inline std::tuple<Tensor, Tensor, Tensor> union_values(const Tensor& indices_a,
                                                       const Tensor& values_a,
                                                       const Tensor& fill_a,
                                                       const Tensor& indices_b,
                                                       const Tensor& values_b,
                                                       const Tensor& fill_b,
                                                       at::IntArrayRef size) {
  static auto op = op_handle<decltype(union_values)>("sparsefill::union_values");
  return op.call(indices_a, values_a, fill_a, indices_b, values_b, fill_b, size);
}

inline Tensor gather_with_fill(const Tensor& values, const Tensor& fill, const Tensor& src) {
  static auto op = op_handle<decltype(gather_with_fill)>("sparsefill::gather_with_fill");
  return op.call(values, fill, src);
}

inline std::tuple<Tensor, Tensor, Tensor> from_dense(const Tensor& self, const Tensor& fill,
                                                     int64_t sparse_dim) {
  static auto op = op_handle<decltype(from_dense)>("sparsefill::from_dense");
  return op.call(self, fill, sparse_dim);
}

}  // namespace call
}  // namespace sparsefill
