// ops/bsr/bsr.h -- BSR @ dense with a fill (RFC.md#through-csr): bsr_spmm
// (its entry in tools/codegen/native.yaml), whose kernels are bsr.cpp (the C
// core, sf_bsr.c, over block-row ranges on torch's threads; sf_cuda_bsr.cu on
// CUDA) with the exact path for non-finite data; the backward in Python
// (torch_sparsefill/ops/bsr.py), written in differentiable ops.
//
// Where the fill and the column sums of B are finite, the kernels compute
// (A - f) @ B + f 1 (1^T B) with A - f zero outside the stored blocks (5.2's
// correction); otherwise the non-finite path, which never forms inf - inf.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "ops/common/args.h"

namespace sparsefill {

// The operand's block structure, from shapes only.
struct BsrShape {
  int64_t nbrows, nbcols, nblocks, r, c;
};

// bsr_spmm's rules that read no data (the CPU and CUDA kernels share them,
// and its fake kernel in torch_sparsefill/ops/bsr.py repeats them): dtypes, the values' block
// shape, a scalar fill, B's shape against ncols.
inline BsrShape bsr_spmm_shape(const Tensor& crow, const Tensor& col, const Tensor& values,
                               const Tensor& fill, const Tensor& b, int64_t ncols) {
  TORCH_CHECK(crow.numel() >= 1, "sparsefill: bsr_spmm: crow_indices must not be empty");
  TORCH_CHECK(values.dim() == 3,
              "sparsefill: bsr_spmm: values must be (nblocks, r, c) (hybrid operands are not "
              "supported by matrix products), got shape ", values.sizes());
  TORCH_CHECK(col.numel() == values.size(0), "sparsefill: bsr_spmm: ", col.numel(),
              " block column indices but ", values.size(0), " blocks of values");
  TORCH_CHECK(values.scalar_type() == b.scalar_type() &&
                  values.scalar_type() == fill.scalar_type(),
              "sparsefill: bsr_spmm: expected values, fill and the dense operand to have the "
              "same dtype, got ", values.scalar_type(), ", ", fill.scalar_type(), " and ",
              b.scalar_type());
  TORCH_CHECK(fill.numel() == 1, "sparsefill: bsr_spmm: the fill must be one element, got a "
              "fill of shape ", fill.sizes());
  const int64_t r = values.size(1), c = values.size(2);
  TORCH_CHECK(r > 0 && c > 0 && ncols >= 0 && ncols % c == 0,
              "sparsefill: bsr_spmm: ncols (", ncols, ") must be a non-negative multiple of "
              "the block's columns, with blocks of at least one element, got blocks ", r, " x ",
              c);
  TORCH_CHECK(b.dim() == 2 && b.size(0) == ncols,
              "sparsefill: bsr_spmm: the dense operand must be 2-D with ", ncols,
              " rows (the sparse operand's columns), got shape ", b.sizes());
  return {crow.numel() - 1, ncols / c, values.size(0), r, c};
}

// A @ B for any data (inf, -inf, nan in the fill, the blocks or B), exact as
// the dense product: the blocks become a CSR operand of their elements and
// spmm's non-finite path (products.h) computes. ATen only, every device.
Tensor bsr_spmm_nonfinite(const Tensor& crow, const Tensor& col, const Tensor& values,
                          const Tensor& fill, const Tensor& b, int64_t ncols);

}  // namespace sparsefill
