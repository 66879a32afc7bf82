// ops/bsr/bsr.cpp -- bsr_spmm's kernels (the op: tools/codegen/native.yaml; its
// rules: bsr.h): BSR @ dense with a fill. CPU: the C core (sf_bsr.c) over
// block-row ranges on torch's threads. CUDA (CUDA build only): the block pattern
// checked on the device (sf_cuda_csr_operand_check) and read back with the
// finiteness of the fill and of B's column sums in one synchronisation, then
// sf_cuda_bsr.cu. Both take bsr_spmm_nonfinite (below: ATen only, every device)
// where the fill or B is not finite.
#include <torch/library.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/sort.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <tuple>

#include "ops/bsr/bsr.h"
#include "ops/common/dtypes.h"
#include "ops/common/row_ranges.h"
#include "ops/generated/kernels.h"
#include "ops/products/products.h"
#include "ops/structure/structure.h"

namespace sparsefill {

namespace {

// Every element of every block as a stored element of a CSR operand (its
// pattern sorted by row, then column): O(nblocks r c) index work, only for
// the paths that need it.
std::tuple<Tensor, Tensor, Tensor> bsr_elements(const Tensor& crow, const Tensor& col,
                                                const Tensor& values, int64_t ncols) {
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
  return {crow_e, cols.index_select(0, order), values.reshape({-1}).index_select(0, order)};
}

// The rows of C = A @ B that cancellation_limit (ops/products/products.h)
// names for A's element rows (a block row of q blocks: r rows of q c stored
// elements each), summed again as dense does.
Tensor recompute_cancelling(Tensor out, const Tensor& crow, const Tensor& col,
                            const Tensor& values, const Tensor& fill, const Tensor& b,
                            int64_t ncols) {
  const int64_t r = values.size(1), c = values.size(2);
  Tensor crow64 = crow.to(at::kLong);
  Tensor per_row = ((crow64.slice(0, 1) - crow64.slice(0, 0, -1)) * c).repeat_interleave(r);
  Tensor crow_rows = at::cat({at::zeros({1}, crow64.options()), per_row.cumsum(0)});
  Tensor redo = cancelling_rows(crow_rows, fill.reshape({}), b, ncols);
  if (redo.numel() == 0) return out;
  auto [crow_e, col_e, values_e] = bsr_elements(crow, col, values, ncols);
  return recompute_rows(out, redo, crow_e, col_e, values_e, fill.reshape({}), b, ncols);
}

}  // namespace

// spmm's non-finite path over the BSR operand's elements, with the same fill.
Tensor bsr_spmm_nonfinite(const Tensor& crow, const Tensor& col, const Tensor& values,
                          const Tensor& fill, const Tensor& b, int64_t ncols) {
  auto [crow_e, col_e, values_e] = bsr_elements(crow, col, values, ncols);
  return spmm_nonfinite(crow_e, col_e, values_e, fill.reshape({}), b, ncols);
}

namespace {

void check_cpu(const Tensor& t, const char* name) {
  check_product_dtype(t, name);
  TORCH_CHECK(t.device().is_cpu(), "sparsefill: ", name, " must be on the CPU, got ", t.device());
}

}  // namespace

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
    if (!finite) {
      Tensor out = bsr_spmm_nonfinite(crow, col, values, fill_in.to(ct), b, ncols);
      return recompute_cancelling(out, crow, col, values, fill_in.to(ct), b, ncols).to(out_type);
    }
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
    if (fp) c = recompute_cancelling(c, crow, col, values, fill_in.to(ct), b, ncols);
    return c.to(out_type);
  });
}

}  // namespace sparsefill

#ifdef SPARSEFILL_WITH_CUDA
#include <ATen/ops/all.h>
#include <ATen/ops/isfinite.h>

#include "ops/common/cuda.h"

namespace sparsefill {
namespace {

void check_gpu(const Tensor& t, const char* name, const at::Device& device) {
  check_product_dtype(t, name);
  TORCH_CHECK(t.device() == device, "sparsefill: ", name,
              " must be on the GPU for the CUDA kernel (on ", device, ", with the indices), got ",
              t.device());
}

}  // namespace

Tensor bsr_spmm_cuda(const Tensor& crow_in, const Tensor& col_in, const Tensor& values_in,
                     const Tensor& fill_in, const Tensor& b_in, int64_t ncols) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1, kCUDA);
  Tensor col = index_arg(col_in, "col_indices", 1, kCUDA);
  same_device(crow, "crow_indices", col, "col_indices");
  const at::Device device = crow.device();
  check_gpu(values_in, "values", device);
  check_gpu(fill_in, "fill", device);
  check_gpu(b_in, "the dense operand", device);
  const BsrShape s = bsr_spmm_shape(crow, col, values_in, fill_in, b_in, ncols);
  c10::cuda::CUDAGuard guard(device);
  const auto out_type = values_in.scalar_type();
  const auto ct = compute_type(out_type, "bsr_spmm", false);
  Tensor values = values_in.to(ct).contiguous();
  Tensor fill = fill_in.to(ct).reshape({1}).contiguous();
  Tensor b = b_in.to(ct);
  const int64_t n = b.size(1);
  if (b.stride(1) != 1 || dense_row_stride(b) < std::max<int64_t>(n, 1)) b = b.contiguous();
  Tensor colsum = b.sum(0);
  // The block pattern's check and the data's finiteness, read together.
  Reports reports(1, device);
  check_call(sf_cuda_csr_operand_check(reports.at(0), crow.data_ptr<int64_t>(),
                                       col.data_ptr<int64_t>(), s.nbrows, s.nbcols, s.nblocks, 1,
                                       current_stream()),
             "bsr_spmm operands");
  const bool finite = at::isfinite(at::cat({fill, colsum})).all().item<bool>();
  const auto rep = reports.read()[0];
  const auto st = (sf_status)rep.status;
  TORCH_CHECK(st != SF_ERR_CROW_FIRST, "sparsefill: bsr_spmm: crow_indices[0] must be 0, got ",
              rep.value);
  TORCH_CHECK(st != SF_ERR_CROW_LAST, "sparsefill: bsr_spmm: crow_indices[-1] must equal the "
              "number of stored blocks (", s.nblocks, "), got ", rep.value);
  check_status(st, "bsr_spmm operands");
  Tensor c = at::empty({s.nbrows * s.r, n}, values.options());
  if (c.numel() == 0) return c.to(out_type);
  if (!finite) {
    Tensor out = bsr_spmm_nonfinite(crow, col, values, fill, b, ncols);
    return recompute_cancelling(out, crow, col, values, fill, b, ncols).to(out_type);
  }
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    check_call(CudaCore<T>::bsr_spmm(c.data_ptr<T>(), crow.data_ptr<int64_t>(),
                                     col.data_ptr<int64_t>(), values.data_ptr<T>(), s.nbrows,
                                     s.nbcols, s.nblocks, s.r, s.c, b.data_ptr<T>(),
                                     dense_row_stride(b), n, fill.data_ptr<T>(),
                                     colsum.data_ptr<T>(), current_stream()),
               "bsr_spmm");
  });
  return recompute_cancelling(c, crow, col, values, fill, b, ncols).to(out_type);
}

}  // namespace sparsefill
#endif  // SPARSEFILL_WITH_CUDA
