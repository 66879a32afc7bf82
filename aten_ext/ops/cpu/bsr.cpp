// ops/cpu/bsr.cpp -- the CPU kernel of bsr_spmm (ops/bsr.h): check the
// components, split block rows into ranges of equal work over torch's
// threads and call the C core (sf_bsr.c) per range.
#include <torch/library.h>

#include <ATen/ops/empty.h>

#include <cmath>

#include "ops/bsr.h"
#include "ops/common/dtypes.h"
#include "ops/common/row_ranges.h"
#include "ops/products.h"

namespace sparsefill {
namespace {

void check_cpu(const Tensor& t, const char* name) {
  check_product_dtype(t, name);
  TORCH_CHECK(t.device().is_cpu(), "sparsefill: ", name, " must be on the CPU, got ", t.device());
}

// C = A @ B for the BSR operand A = (crow, col, values, fill) of ncols columns.
Tensor bsr_spmm_cpu(const Tensor& crow_in, const Tensor& col_in, const Tensor& values_in,
                    const Tensor& fill_in, const Tensor& b_in, int64_t ncols) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  check_cpu(values_in, "values");
  check_cpu(fill_in, "fill");
  check_cpu(b_in, "the dense operand");
  const BsrShape s = bsr_spmm_shape(crow, col, values_in, fill_in, b_in, ncols);
  const int64_t* cr = crow.data_ptr<int64_t>();
  TORCH_CHECK(cr[0] == 0, "sparsefill: bsr_spmm: crow_indices[0] must be 0, got ", cr[0]);
  TORCH_CHECK(cr[s.nbrows] == s.nblocks, "sparsefill: bsr_spmm: crow_indices[-1] must equal "
              "the number of stored blocks (", s.nblocks, "), got ", cr[s.nbrows]);
  const auto out_type = values_in.scalar_type();
  const auto ct = compute_type(out_type, "bsr_spmm", false);
  Tensor values = values_in.to(ct).contiguous();
  Tensor b = b_in.to(ct);
  const int64_t n = b.size(1);
  if (n > 1 && (b.stride(1) != 1 || dense_row_stride(b) < n)) b = b.contiguous();
  Tensor c = at::empty({s.nbrows * s.r, n}, values.options());
  if (c.numel() == 0) return c.to(out_type);
  Tensor colsum = b.sum(0);
  return with_compute_type(ct, [&](auto zero) -> Tensor {
    using T = decltype(zero);
    const T f = fill_in.to(ct).item<T>();
    const T* cs = colsum.data_ptr<T>();
    // Non-finite fill or B (a column sum is finite only if its column is):
    // the path that never computes inf - inf.
    bool finite = std::isfinite(f);
    for (int64_t t = 0; t < n && finite; ++t) finite = std::isfinite(cs[t]);
    if (!finite) return bsr_spmm_nonfinite(crow, col, values, fill_in.to(ct), b, ncols).to(out_type);
    const T* v = values.data_ptr<T>();
    const T* bp = b.data_ptr<T>();
    const int64_t* cl = col.data_ptr<int64_t>();
    const int64_t ldb = dense_row_stride(b);
    T* cp = c.data_ptr<T>();
    // Zero fill: no correction and nothing subtracted (the same sums).
    const T* fp = f == T(0) ? nullptr : &f;
    for_row_ranges(cr, s.nbrows, s.r * s.c * n, "bsr_spmm operands", [&](int64_t r0, int64_t r1) {
      return Core<T>::bsr_spmm(cp, n, cr, cl, v, s.nbrows, s.nbcols, s.nblocks, s.r, s.c, bp, ldb,
                               n, fp, fp ? cs : nullptr, r0, r1);
    });
    return c.to(out_type);
  });
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, CPU, m) { m.impl("bsr_spmm", &sparsefill::bsr_spmm_cpu); }
