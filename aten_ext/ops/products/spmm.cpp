// ops/products/spmm.cpp -- the kernels of spmm, sddmm and csr_transpose (the ops:
// tools/codegen/native.yaml; their shared rules: products.h). CPU: check the
// components, split rows into ranges of equal work over torch's threads and call
// the C core (sf_products.c) per range. CUDA (CUDA build only): the same rules
// and messages, then the CUDA core (sf_cuda_products.cu: cuSPARSE with the fill
// correction) on torch's current stream with torch's cuSPARSE handle; each op
// synchronises once to read its report before cuSPARSE reads the indices.
#include <torch/library.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mv.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <cstring>
#include <limits>
#include <vector>

#include "ops/common/dtypes.h"
#include "ops/common/row_ranges.h"
#include "ops/generated/kernels.h"
#include "ops/products/products.h"

namespace sparsefill {

// ---- spmm ----------------------------------------------------------------------

Tensor spmm_or_spmv_cpu(const Tensor& crow_in, const Tensor& col_in, const Tensor& values_in,
                        const Tensor& fill_in, const Tensor& b_in, int64_t ncols) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  check_cpu_float(values_in, "values");
  check_cpu_float(fill_in, "fill");
  check_cpu_float(b_in, "the dense operand");
  check_spmm_dtypes(values_in, fill_in, b_in);
  const int64_t m = csr_operand_rows(crow, col, values_in, "spmm: the sparse operand's");
  const bool vector = b_in.dim() == 1;
  if (vector) {
    TORCH_CHECK(b_in.size(0) == ncols, "sparsefill: spmv: the vector must have ", ncols,
                " elements (the sparse operand's columns), got ", b_in.size(0));
  } else {
    check_spmm_dense(b_in, ncols);
  }
  const FillKind kind = fill_kind(fill_in, m, ncols);
  const auto out_type = values_in.scalar_type();
  // Halves in float64 on the CPU: the fill's correction (fill x colsum) and
  // the shifted values cancel where dense's float32 sum of the elements'
  // products does not (fill 1e4: 2 units of float16 off, fuzz seeds 5690,
  // 419717). float64 holds the cancellation; one rounding at the end.
  const auto ct = at::isReducedFloatingType(out_type) ? at::kDouble
                                                       : compute_type(out_type, "spmm", false);
  Tensor values = values_in.to(ct).contiguous();
  Tensor fill = fill_in.to(ct).contiguous();
  Tensor b = b_in.to(ct);
  const int64_t n = vector ? 1 : b.size(1);
  if (n > 1 && (b.stride(1) != 1 || dense_row_stride(b) < n)) b = b.contiguous();
  Tensor c = vector ? at::empty({m}, values.options()) : at::empty({m, n}, values.options());
  if (m == 0 || n == 0) return c.to(out_type);
  // The correction vectors: 1^T B for a scalar or per-row fill (one column:
  // read with max|B| below), c^T B for a per-column fill (a GEMV over B, O(k n)).
  Tensor colsum = kind == FillKind::Col || n == 1 ? Tensor() : b.sum(0).contiguous();
  Tensor corr = kind == FillKind::Col ? at::mv(b.t(), fill.view({-1})).contiguous() : Tensor();
  const int64_t nse = values.numel();
  bool exact = false;
  std::vector<int64_t> redo;  // rows to sum as dense does (cancellation_limit)
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    const T* rf = kind == FillKind::Col ? nullptr : fill.data_ptr<T>();
    const int64_t rf_stride = kind == FillKind::Row ? 1 : 0;
    const T* cf = kind == FillKind::Col ? fill.data_ptr<T>() : nullptr;
    const int64_t* cr = crow.data_ptr<int64_t>();
    const int64_t* cl = col.data_ptr<int64_t>();
    const T* v = values.data_ptr<T>();
    const T* bp = b.data_ptr<T>();
    T* cp = c.data_ptr<T>();
    const int64_t ldb = n == 1 ? b.stride(0) : dense_row_stride(b);
    // The fast path's range test (ops/products.h) without ATen reductions or
    // a sync: max|B| (and, for one column, sum(B)) in one C read of B, max|f|
    // likewise, max|v| in the product's own pass. Where the test fails (a
    // non-finite operand, or large enough for the shift by the fill to
    // overflow), the pass's result is dropped for the path that never
    // computes inf - inf.
    T b_max = 0, b_sum = 0, f_max = 0;
    check_status(Core<T>::dense_facts(&b_max, n == 1 ? &b_sum : nullptr, bp, ncols, n, ldb),
                 "spmm: the dense operand");
    check_status(Core<T>::dense_facts(&f_max, nullptr, fill.data_ptr<T>(), fill.numel(), 1, 1),
                 "spmm: the fill");
    // max|v| of each row range, combined (a max: the order does not matter).
    std::mutex mu;
    T v_max = 0;
    bool v_nan = false;
    auto note = [&](sf_status st, T range_max) {
      if (st != SF_OK) return st;
      std::lock_guard<std::mutex> lock(mu);
      if (range_max != range_max) v_nan = true;
      else if (range_max > v_max) v_max = range_max;
      return st;
    };
    if (n == 1) {
      const T xsum = kind == FillKind::Col ? T(0) : b_sum;
      const T cor = corr.defined() ? *corr.data_ptr<T>() : T(0);
      for_row_ranges(cr, m, 1, "spmm operands", [&](int64_t r0, int64_t r1) {
        T range_max = 0;
        const sf_status st = Core<T>::spmv(cp, 1, cr, cl, v, m, ncols, nse, bp, ldb, rf,
                                           rf_stride, cf, xsum, cor, r0, r1, &range_max);
        return note(st, range_max);
      });
    } else {
      const T* cs = colsum.defined() ? colsum.data_ptr<T>() : nullptr;
      const T* co = corr.defined() ? corr.data_ptr<T>() : nullptr;
      for_row_ranges(cr, m, n, "spmm operands", [&](int64_t r0, int64_t r1) {
        T range_max = 0;
        const sf_status st = Core<T>::spmm(cp, n, cr, cl, v, m, ncols, nse, bp, ldb, n, rf,
                                           rf_stride, cf, cs, co, r0, r1, &range_max);
        return note(st, range_max);
      });
    }
    exact = fast_path_bound_ok<T>(b_max, ncols, v_nan ? std::numeric_limits<T>::quiet_NaN() : v_max,
                                  f_max);
    // The rows whose correction may cancel (products.h, cancellation_limit):
    // the spread of the fill's products in one C read of B, then the row
    // lengths. A zero fill has no correction.
    if (f_max != T(0)) {
      double spread = 0;
      std::vector<double> col_max(n), col_sum(n);
      check_status(Core<T>::dense_spread(&spread, col_max.data(), col_sum.data(), bp, ncols, n, ldb,
                                         cf),
                   "spmm: the dense operand");
      const double limit = cancellation_limit(spread);
      for (int64_t i = 0; i < m; ++i) {
        const bool fill_here = kind == FillKind::Col || rf[i * rf_stride] != T(0);
        if (fill_here && static_cast<double>(cr[i + 1] - cr[i]) > limit) redo.push_back(i);
      }
    }
  });
  if (!exact) c = spmm_nonfinite(crow, col, values, fill, vector ? b.unsqueeze(1) : b, ncols);
  if (vector && c.dim() == 2) c = c.squeeze(1);
  if (!redo.empty()) {
    Tensor rows = at::tensor(redo, crow.options().dtype(at::kLong));
    c = recompute_rows(c, rows, crow, col, values, fill, b, ncols);
  }
  return c.to(out_type);
}

// C = A @ B for A = (crow, col, values, fill) of ncols columns, B strided 2-D.
Tensor spmm_cpu(const Tensor& crow, const Tensor& col, const Tensor& values, const Tensor& fill,
                const Tensor& b, int64_t ncols) {
  check_spmm_dense(b, ncols);
  return spmm_or_spmv_cpu(crow, col, values, fill, b, ncols);
}

namespace {

// ---- sddmm, csr_transpose -------------------------------------------------------

}  // namespace

// out[p] = dot(X[i_p, :], Y[j_p, :]) on the pattern (crow, col).
Tensor sddmm_cpu(const Tensor& crow_in, const Tensor& col_in, int64_t ncols, const Tensor& x_in,
                 const Tensor& y_in) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  check_cpu_float(x_in, "x");
  check_cpu_float(y_in, "y");
  check_sddmm_shapes(crow, ncols, x_in, y_in);
  const auto out_type = x_in.scalar_type();
  const auto ct = compute_type(out_type, "sddmm", false);
  Tensor x = x_in.to(ct).contiguous(), y = y_in.to(ct).contiguous();
  const int64_t m = crow.numel() - 1, nse = col.numel(), n = x.size(1);
  Tensor out = at::empty({nse}, x.options());
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    const int64_t* cr = crow.data_ptr<int64_t>();
    for_row_ranges(cr, m, n, "sddmm operands", [&](int64_t r0, int64_t r1) {
      return Core<T>::sddmm(out.data_ptr<T>(), cr, col.data_ptr<int64_t>(), m, ncols, nse,
                            x.data_ptr<T>(), n, y.data_ptr<T>(), n, n, r0, r1);
    });
  });
  return out.to(out_type);
}

std::tuple<Tensor, Tensor, Tensor> csr_transpose_cpu(const Tensor& crow_in, const Tensor& col_in,
                                                     int64_t ncols) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  TORCH_CHECK(crow.numel() >= 1, "sparsefill: csr_transpose: crow_indices must not be empty");
  TORCH_CHECK(ncols >= 0, "sparsefill: csr_transpose: ncols must be non-negative, got ", ncols);
  const int64_t nse = col.numel();
  Tensor crow_t = at::empty({ncols + 1}, crow.options());
  Tensor col_t = at::empty({nse}, crow.options());
  Tensor perm = at::empty({nse}, crow.options());
  check_status(sf_csr_transpose(crow_t.data_ptr<int64_t>(), col_t.data_ptr<int64_t>(),
                                perm.data_ptr<int64_t>(), crow.data_ptr<int64_t>(),
                                col.data_ptr<int64_t>(), crow.numel() - 1, ncols, nse),
               "crow_indices/col_indices of the operand to transpose");
  return {crow_t, col_t, perm};
}

}  // namespace sparsefill

#ifdef SPARSEFILL_WITH_CUDA
#include "ops/products/on_cuda.h"

namespace sparsefill {
namespace {

// ---- spmm -------------------------------------------------------------------------

}  // namespace

Tensor spmm_cuda(const Tensor& crow_in, const Tensor& col_in, const Tensor& values_in,
                 const Tensor& fill_in, const Tensor& b_in, int64_t ncols) {
  Tensor crow, col;
  std::tie(crow, col) = csr_index_args(crow_in, col_in);
  const at::Device device = crow.device();
  check_cuda_float(values_in, "values", device);
  check_cuda_float(fill_in, "fill", device);
  check_cuda_float(b_in, "the dense operand", device);
  check_spmm_dtypes(values_in, fill_in, b_in);
  const char* what = "spmm: the sparse operand's";
  const int64_t m = csr_operand_shape(crow, col, values_in, what);
  check_spmm_dense(b_in, ncols);
  const FillKind kind = fill_kind(fill_in, m, ncols);
  c10::cuda::CUDAGuard guard(device);
  const int64_t nse = col.numel();
  Reports reports(1, device);
  check_call(sf_cuda_csr_operand_check(reports.at(0), crow.data_ptr<int64_t>(),
                                       col.data_ptr<int64_t>(), m, ncols, nse, 1,
                                       current_stream()),
             "spmm operands");
  const auto r = reports.read()[0];  // before cuSPARSE reads the indices
  check_operand_ends(r, what, nse);
  // As on the CPU, an empty product reads no index beyond crow's ends.
  if (b_in.size(1) > 0) check_status((sf_status)r.status, "spmm operands");

  const auto out_type = values_in.scalar_type();
  const auto ct = compute_type(out_type, "spmm", false);
  Tensor values = values_in.to(ct).contiguous();
  Tensor fill = fill_in.to(ct).contiguous();
  Tensor b = b_in.to(ct);
  const int64_t n = b.size(1);
  // Row-major with unit column stride and a row stride >= max(n, 1), as
  // cuSPARSE's row-major dense descriptor needs.
  if (b.stride(1) != 1 || dense_row_stride(b) < std::max<int64_t>(n, 1)) b = b.contiguous();
  Tensor c = at::empty({m, n}, values.options());
  if (m == 0 || n == 0) return c.to(out_type);
  // Non-finite operands, or large enough for the shift by the fill to
  // overflow: the path that never computes inf - inf.
  // The rows whose correction may cancel (products.h): summed as dense does,
  // after either path.
  Tensor redo = cancelling_rows(crow, fill, b, ncols);
  if (!spmm_fast_path_exact(values, fill, b)) {
    Tensor out = spmm_nonfinite(crow, col, values, fill, b, ncols);
    return recompute_rows(out, redo, crow, col, values, fill, b, ncols).to(out_type);
  }
  // The correction vectors, as on the CPU: 1^T B for a scalar or per-row
  // fill, c^T B for a per-column fill.
  Tensor colsum = kind == FillKind::Col ? Tensor() : b.sum(0).contiguous();
  Tensor corr = kind == FillKind::Col ? at::mv(b.t(), fill.view({-1})).contiguous() : Tensor();
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    const T* rf = kind == FillKind::Col ? nullptr : fill.data_ptr<T>();
    const int64_t rf_stride = kind == FillKind::Row ? 1 : 0;
    const T* cf = kind == FillKind::Col ? fill.data_ptr<T>() : nullptr;
    size_t bytes = 0;
    int cs = 0;
    auto run = [&](void* ws) {
      return CudaCore<T>::spmm(&cs, c.data_ptr<T>(), crow.data_ptr<int64_t>(),
                               col.data_ptr<int64_t>(), values.data_ptr<T>(), m, ncols, nse,
                               b.data_ptr<T>(), dense_row_stride(b), n, rf, rf_stride, cf,
                               colsum.defined() ? colsum.data_ptr<T>() : nullptr,
                               corr.defined() ? corr.data_ptr<T>() : nullptr, sparse_handle(), ws,
                               &bytes, current_stream());
    };
    check_library_call(run(nullptr), cs, "spmm");
    Tensor ws = workspace(bytes, values);
    check_library_call(run(ws.data_ptr()), cs, "spmm");
  });
  return recompute_rows(c, redo, crow, col, values, fill, b, ncols).to(out_type);
}

namespace {

// ---- sddmm ------------------------------------------------------------------------

}  // namespace

Tensor sddmm_cuda(const Tensor& crow_in, const Tensor& col_in, int64_t ncols, const Tensor& x_in,
                  const Tensor& y_in) {
  Tensor crow, col;
  std::tie(crow, col) = csr_index_args(crow_in, col_in);
  const at::Device device = crow.device();
  check_cuda_float(x_in, "x", device);
  check_cuda_float(y_in, "y", device);
  check_sddmm_shapes(crow, ncols, x_in, y_in);
  c10::cuda::CUDAGuard guard(device);
  const auto out_type = x_in.scalar_type();
  const auto ct = compute_type(out_type, "sddmm", false);
  Tensor x = x_in.to(ct).contiguous(), y = y_in.to(ct).contiguous();
  const int64_t m = crow.numel() - 1, nse = col.numel(), n = x.size(1);
  Tensor out = at::empty({nse}, x.options());
  Reports reports(1, device);
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    check_call(CudaCore<T>::sddmm(reports.at(0), out.data_ptr<T>(), crow.data_ptr<int64_t>(),
                                  col.data_ptr<int64_t>(), m, ncols, nse, x.data_ptr<T>(), n,
                                  y.data_ptr<T>(), n, n, current_stream()),
               "sddmm operands");
  });
  const auto r = reports.read()[0];
  check_status((sf_status)r.status, "sddmm operands");
  return out.to(out_type);
}

namespace {

// ---- csr_transpose ------------------------------------------------------------------

}  // namespace

std::tuple<Tensor, Tensor, Tensor> csr_transpose_cuda(const Tensor& crow_in, const Tensor& col_in,
                                                      int64_t ncols) {
  Tensor crow, col;
  std::tie(crow, col) = csr_index_args(crow_in, col_in);
  TORCH_CHECK(crow.numel() >= 1, "sparsefill: csr_transpose: crow_indices must not be empty");
  TORCH_CHECK(ncols >= 0, "sparsefill: csr_transpose: ncols must be non-negative, got ", ncols);
  c10::cuda::CUDAGuard guard(crow.device());
  const int64_t nse = col.numel(), m = crow.numel() - 1;
  Tensor crow_t = at::empty({ncols + 1}, crow.options());
  Tensor col_t = at::empty({nse}, crow.options());
  Tensor perm = at::empty({nse}, crow.options());
  Reports reports(1, crow.device());
  const char* what = "crow_indices/col_indices of the operand to transpose";
  size_t bytes = 0;
  auto call = [&](sf_cuda_report* report, void* ws) {
    return sf_cuda_csr_transpose(report, crow_t.data_ptr<int64_t>(), col_t.data_ptr<int64_t>(),
                                 perm.data_ptr<int64_t>(), crow.data_ptr<int64_t>(),
                                 col.data_ptr<int64_t>(), m, ncols, nse, ws, &bytes,
                                 current_stream());
  };
  check_call(call(nullptr, nullptr), what);
  Tensor ws = workspace(bytes, crow);
  check_call(call(reports.at(0), ws.data_ptr()), what);
  const auto r = reports.read()[0];
  check_status((sf_status)r.status, what);  // as the CPU kernel: no site
  return {crow_t, col_t, perm};
}

}  // namespace sparsefill
#endif  // SPARSEFILL_WITH_CUDA
