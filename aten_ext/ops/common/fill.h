// ops/common/fill.h -- the per-slice fill rules (RFC.md#per-slice-fills), the C++ home of
// them: which fills are per-slice, which slot of the fill covers a sparse
// position, the fill's rows at given positions and their gradient; and
// stored rows or the fill's row, gathered by source position.
#pragma once

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <cstdint>
#include <vector>

#include "ops/common/args.h"

namespace sparsefill {

// A dense-part fill has at most dense_dim dims; a per-slice fill has the
// tensor's full rank (sparse_dim + dense_dim) and size 1 in every dim it does
// not vary along.
//   is_per_slice_fill(fill, values.dim() - 1)
inline bool is_per_slice_fill(const Tensor& fill, int64_t dense_dim) {
  return fill.dim() > dense_dim;
}

// Slot of the per-slice fill's sparse part (flattened, row-major) that covers
// each sparse position in `indices` (sparse_dim, n): dims where the fill has
// size 1 contribute nothing. O(n * sparse_dim); out-of-range slots are caught
// by the index_select / index_add that use them. *nslots: the slot count.
inline Tensor fill_slot(const Tensor& fill, const Tensor& indices, int64_t* nslots = nullptr) {
  const int64_t sd = indices.sym_size(0).guard_int(__FILE__, __LINE__);  // nse stays symbolic
  TORCH_CHECK(fill.dim() >= sd, "sparsefill: a per-slice fill of shape ", fill.sizes(),
              " has fewer dimensions than the ", sd, " sparse dimensions");
  std::vector<int64_t> coef(sd);
  int64_t stride = 1;
  for (int64_t d = sd - 1; d >= 0; --d) {
    coef[d] = fill.size(d) == 1 ? 0 : stride;
    stride *= fill.size(d);
  }
  if (nslots != nullptr) *nslots = stride;
  if (sd == 0) return at::zeros({indices.size(1)}, indices.options().dtype(at::kLong));
  Tensor c = at::tensor(coef, indices.options().dtype(at::kLong)).view({sd, 1});
  return (indices.to(at::kLong) * c).sum(0);
}

// The fill's rows at the sparse positions `indices`: (n, *dense_shape),
// differentiable with respect to `fill`. Works for both kinds of fill.
inline Tensor fill_rows_at(const Tensor& fill, const Tensor& indices,
                           c10::SymIntArrayRef dense_shape) {
  // Sizes as SymInts: nse is symbolic under a tracer.
  const int64_t sd = indices.sym_size(0).guard_int(__FILE__, __LINE__);
  c10::SymDimVector rows_shape{indices.sym_size(1)};
  rows_shape.append(dense_shape.begin(), dense_shape.end());
  if (!is_per_slice_fill(fill, (int64_t)dense_shape.size())) {
    return fill.expand_symint(dense_shape).unsqueeze(0).expand_symint(rows_shape);
  }
  TORCH_CHECK(fill.dim() == sd + (int64_t)dense_shape.size(), "sparsefill: a per-slice fill of "
              "shape ", fill.sizes(), " must have sparse_dim + dense_dim = ",
              sd + (int64_t)dense_shape.size(), " dimensions");
  int64_t nslots = 1;
  Tensor slot = fill_slot(fill, indices, &nslots);
  Tensor rows = fill.reshape(cat_sizes({nslots}, fill.sizes().slice(sd))).index_select(0, slot);
  return rows.expand_symint(rows_shape);
}

// Rows values[src], the (dense-part) fill's row where src == -1: ATen's cat
// and index_select, so differentiable in values and fill to any order, in
// forward mode and under vmap. src's range is the caller's (union_plan's
// output is in range; the op gather_with_fill checks its argument).
inline Tensor rows_or_fill(const Tensor& values, const Tensor& fill, const Tensor& src) {
  Tensor fill_row =
      fill.to(values.scalar_type()).expand_symint(values.sym_sizes().slice(1)).unsqueeze(0);
  return at::cat({fill_row, values}).index_select(0, src + 1);
}

}  // namespace sparsefill
