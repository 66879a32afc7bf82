// ops/structure/structure.h -- the structural ops: validation, coalescing,
// conversions, pattern merges, on component tensors (indices: int64
// (sparse_dim, nse), row-major; `size`: the sparse sizes). What each op
// computes is its entry in tools/codegen/native.yaml; its kernels are
// indices.cpp and union.cpp (each calls its core, which does all structural
// work; CPU, and CUDA in the CUDA build) and composite.cpp; its fake kernel
// and autograd are the Python package's (torch_sparsefill/ops/structure.py).
// This header holds the argument rules those kernels share.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "ops/common/args.h"
#include "ops/generated/calls.h"  // call::<op>: every op through the dispatcher

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

}  // namespace sparsefill
