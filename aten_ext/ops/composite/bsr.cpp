// ops/composite/bsr.cpp -- the BSR product's exact path for non-finite data
// (ops/bsr.h), over ATen and the dispatcher: one function for the CPU and
// CUDA kernels of bsr_spmm, no kernel of its own (no TORCH_LIBRARY_IMPL).
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/zeros.h>

#include "ops/bsr.h"
#include "ops/products.h"
#include "ops/structure.h"

namespace sparsefill {

// Every element of every block becomes a stored element of a CSR operand
// (its pattern sorted by row, then column), which spmm's non-finite path
// takes with the same fill: O(nblocks r c) index work, only on this path.
Tensor bsr_spmm_nonfinite(const Tensor& crow, const Tensor& col, const Tensor& values,
                          const Tensor& fill, const Tensor& b, int64_t ncols) {
  const int64_t nblocks = values.size(0), r = values.size(1), c = values.size(2);
  const int64_t m = (crow.numel() - 1) * r;
  auto idx = crow.options().dtype(at::kLong);
  Tensor brow = call::rows_from_crow(crow);
  Tensor rows = (brow * r).view({nblocks, 1, 1}) + at::arange(r, idx).view({1, r, 1});
  Tensor cols = (col.to(at::kLong) * c).view({nblocks, 1, 1}) + at::arange(c, idx).view({1, 1, c});
  rows = rows.expand({nblocks, r, c}).reshape({-1});
  cols = cols.expand({nblocks, r, c}).reshape({-1});
  Tensor order = std::get<1>(at::sort(rows * ncols + cols, /*stable=*/true, 0, false));
  rows = rows.index_select(0, order);
  Tensor crow_e = at::cat({at::zeros({1}, idx), at::bincount(rows, {}, m).cumsum(0)});
  return spmm_nonfinite(crow_e, cols.index_select(0, order),
                        values.reshape({-1}).index_select(0, order), fill.reshape({}), b, ncols);
}

}  // namespace sparsefill
