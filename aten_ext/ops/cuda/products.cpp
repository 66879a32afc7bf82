// ops/cuda/products.cpp -- the CUDA kernels of the matrix products
// (ops/products.h): unpack and check component tensors with the CPU kernels'
// messages, then call the CUDA core (sf_cuda_products.cu) on torch's current
// stream, with torch's cuSPARSE handle for that stream and workspace from
// torch's caching allocator.
//
// Each op synchronises once to read its report (the operand checks) before
// cuSPARSE may read the index arrays; spgemm's cuSPARSE stages synchronise
// themselves to learn the result's size. The backward formulas
// (autograd/products.cpp) call these ops through the dispatcher, so the
// gradients run on CUDA too.
#include <torch/library.h>

// CUDAContextLight.h declares getCurrentCUDASparseHandle (it includes
// cusparse.h, which setup.py finds in the toolkit or torch's nvidia wheel).
#include <ATen/cuda/CUDAContextLight.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mv.h>
#include <ATen/ops/zeros.h>

#include <climits>
#include <memory>
#include <tuple>
#include <vector>

#include "ops/common/cuda.h"
#include "ops/common/dtypes.h"
#include "ops/products.h"

namespace sparsefill {
namespace {

// torch's handle, already bound to the current stream (the core binds it
// again to the stream it is given: the same one).
void* sparse_handle() { return at::cuda::getCurrentCUDASparseHandle(); }

// A core call that may have failed inside cuSPARSE: name the library's error.
void check_library_call(sf_status st, int cusparse_status, const char* what) {
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  TORCH_CHECK(st == SF_OK || cusparse_status == (int)CUSPARSE_STATUS_SUCCESS,
              "sparsefill: ", what, ": cuSPARSE failed: ",
              cusparseGetErrorString((cusparseStatus_t)cusparse_status));
  check_status(st, what);
}

// ---- the CPU kernels' argument rules, on CUDA -------------------------------------

void check_float(const Tensor& t, const char* name, const at::Device& device) {
  check_product_dtype(t, name);
  TORCH_CHECK(t.device() == device, "sparsefill: ", name,
              " must be on the GPU for the CUDA kernel (on ", device, ", with the indices), got ",
              t.device());
}

// The first and last row pointers, with the CPU's messages.
void check_operand_ends(const sf_cuda_report& r, const char* what, int64_t nse) {
  const auto st = (sf_status)r.status;
  TORCH_CHECK(st != SF_ERR_CROW_FIRST, "sparsefill: ", what, " crow_indices[0] must be 0, got ",
              r.value);
  TORCH_CHECK(st != SF_ERR_CROW_LAST, "sparsefill: ", what,
              " crow_indices[-1] must equal the number of stored elements (", nse, "), got ",
              r.value);
}

// One CSR operand's index tensors, int64 on one GPU.
std::pair<Tensor, Tensor> csr_index_args(const Tensor& crow_in, const Tensor& col_in) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1, kCUDA);
  Tensor col = index_arg(col_in, "col_indices", 1, kCUDA);
  same_device(crow, "crow_indices", col, "col_indices");
  return {crow, col};
}

// ---- spmm -------------------------------------------------------------------------

Tensor spmm_cuda(const Tensor& crow_in, const Tensor& col_in, const Tensor& values_in,
                 const Tensor& fill_in, const Tensor& b_in, int64_t ncols) {
  Tensor crow, col;
  std::tie(crow, col) = csr_index_args(crow_in, col_in);
  const at::Device device = crow.device();
  check_float(values_in, "values", device);
  check_float(fill_in, "fill", device);
  check_float(b_in, "the dense operand", device);
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
  if (!spmm_fast_path_exact(values, fill, b)) {
    return spmm_nonfinite(crow, col, values, fill, b, ncols).to(out_type);
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
  return c.to(out_type);
}

// ---- sddmm ------------------------------------------------------------------------

Tensor sddmm_cuda(const Tensor& crow_in, const Tensor& col_in, int64_t ncols, const Tensor& x_in,
                  const Tensor& y_in) {
  Tensor crow, col;
  std::tie(crow, col) = csr_index_args(crow_in, col_in);
  const at::Device device = crow.device();
  check_float(x_in, "x", device);
  check_float(y_in, "y", device);
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

// ---- sparse_attention -------------------------------------------------------------

std::tuple<Tensor, Tensor> sparse_attention_cuda(const Tensor& crow_in, const Tensor& col_in,
                                                 const std::optional<Tensor>& bias_in,
                                                 const Tensor& q_in, const Tensor& k_in,
                                                 const Tensor& v_in, double scale) {
  Tensor crow, col;
  std::tie(crow, col) = csr_index_args(crow_in, col_in);
  const at::Device device = crow.device();
  check_float(q_in, "query", device);
  check_float(k_in, "key", device);
  check_float(v_in, "value", device);
  if (bias_in.has_value()) check_float(*bias_in, "bias", device);
  const AttentionDims d = check_attention_shapes(crow, col, bias_in, q_in, k_in, v_in);
  c10::cuda::CUDAGuard guard(device);
  const auto out_type = q_in.scalar_type();
  const auto ct = compute_type(out_type, "sparse_attention", false);
  Tensor q = q_in.to(ct).contiguous(), k = k_in.to(ct).contiguous(), v = v_in.to(ct).contiguous();
  Tensor bias = bias_in.has_value() ? bias_in->to(ct).contiguous() : Tensor();
  auto lead = q.sizes().vec();
  lead.pop_back();  // (nb,) m
  auto out_shape = lead;
  out_shape.push_back(d.dv);
  Tensor out = at::empty(out_shape, q.options());
  Tensor lse = at::empty(lead, q.options());
  Reports reports(1, device);
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    check_call(CudaCore<T>::attention(reports.at(0), out.data_ptr<T>(), lse.data_ptr<T>(),
                                      crow.data_ptr<int64_t>(), col.data_ptr<int64_t>(),
                                      bias.defined() ? bias.data_ptr<T>() : nullptr,
                                      d.bias_stride, d.m, d.ncols, d.nse, d.nb, q.data_ptr<T>(),
                                      k.data_ptr<T>(), v.data_ptr<T>(), d.e, d.dv, (T)scale,
                                      current_stream()),
               "sparse_attention operands");
  });
  const auto r = reports.read()[0];
  check_status((sf_status)r.status, "sparse_attention operands");
  return {out.to(out_type), lse.to(out_type)};
}

// sparse_attention's gradients, as the CPU kernel: the transposed pattern
// (csr_transpose's CUDA kernel), then the rows and columns passes.
std::tuple<Tensor, Tensor, Tensor, Tensor> sparse_attention_backward_cuda(
    const Tensor& crow_in, const Tensor& col_in, const std::optional<Tensor>& bias_in,
    const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& lse_in,
    const Tensor& g_in, const std::optional<Tensor>& g_lse_in, double scale) {
  Tensor crow, col;
  std::tie(crow, col) = csr_index_args(crow_in, col_in);
  const at::Device device = crow.device();
  check_float(q_in, "query", device);
  check_float(k_in, "key", device);
  check_float(v_in, "value", device);
  check_float(lse_in, "lse", device);
  check_float(g_in, "grad_out", device);
  if (bias_in.has_value()) check_float(*bias_in, "bias", device);
  if (g_lse_in.has_value()) check_float(*g_lse_in, "grad_lse", device);
  const AttentionDims d = check_attention_shapes(crow, col, bias_in, q_in, k_in, v_in);
  check_attention_grads(d, q_in, lse_in, g_in, g_lse_in);
  c10::cuda::CUDAGuard guard(device);
  const auto out_type = q_in.scalar_type();
  const auto ct = compute_type(out_type, "sparse_attention_backward", false);
  auto [q, k, v, lse, g, bias, g_lse, dq, dk, dv, ds, w] =
      prepare_attention_backward(d, ct, q_in, k_in, v_in, lse_in, g_in, bias_in, g_lse_in);
  Tensor crow_t, row_t, perm;
  std::tie(crow_t, row_t, perm) = call::csr_transpose(crow, col, d.ncols);
  Reports reports(1, device);
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    check_call(CudaCore<T>::attention_backward(
                   reports.at(0), dq.data_ptr<T>(), dk.data_ptr<T>(), dv.data_ptr<T>(),
                   ds.data_ptr<T>(), w.data_ptr<T>(), crow.data_ptr<int64_t>(),
                   col.data_ptr<int64_t>(), bias.defined() ? bias.data_ptr<T>() : nullptr,
                   d.bias_stride, crow_t.data_ptr<int64_t>(), row_t.data_ptr<int64_t>(),
                   perm.data_ptr<int64_t>(), d.m, d.ncols, d.nse, d.nb, q.data_ptr<T>(),
                   k.data_ptr<T>(), v.data_ptr<T>(), lse.data_ptr<T>(), g.data_ptr<T>(),
                   g_lse.defined() ? g_lse.data_ptr<T>() : nullptr, d.e, d.dv, (T)scale,
                   current_stream()),
               "sparse_attention_backward operands");
  });
  const auto r = reports.read()[0];
  check_status((sf_status)r.status, "sparse_attention_backward operands");
  return {dq.to(out_type), dk.to(out_type), dv.to(out_type), ds.to(out_type)};
}

// ---- csr_transpose ------------------------------------------------------------------

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

// ---- spgemm (fill 0) ------------------------------------------------------------------

// cuSPARSE SpGEMM takes 32-bit indices only. We convert int64 indices when
// every size and count fits and refuse otherwise, never truncating.
void check_int32(int64_t v, const char* name) {
  TORCH_CHECK(v <= INT32_MAX, "sparsefill: spgemm on CUDA uses cuSPARSE SpGEMM, which takes "
              "32-bit indices: ", name, " must be at most 2147483647 (INT32_MAX), got ", v);
}

std::tuple<Tensor, Tensor, Tensor> spgemm_cuda(const Tensor& crow_a_in, const Tensor& col_a_in,
                                               const Tensor& values_a, const Tensor& crow_b_in,
                                               const Tensor& col_b_in, const Tensor& values_b,
                                               int64_t n) {
  Tensor crow_a = index_arg(crow_a_in, "crow_indices of the first operand", 1, kCUDA);
  Tensor col_a = index_arg(col_a_in, "col_indices of the first operand", 1, kCUDA);
  Tensor crow_b = index_arg(crow_b_in, "crow_indices of the second operand", 1, kCUDA);
  Tensor col_b = index_arg(col_b_in, "col_indices of the second operand", 1, kCUDA);
  const at::Device device = crow_a.device();
  for (const Tensor* t : {&col_a, &crow_b, &col_b}) {
    TORCH_CHECK(t->device() == device, "sparsefill: spgemm: every index tensor must be on ",
                device, ", got one on ", t->device());
  }
  check_float(values_a, "values of the first operand", device);
  check_float(values_b, "values of the second operand", device);
  check_spgemm_args(values_a, values_b, n);
  const char* what_a = "spgemm: the first operand's";
  const char* what_b = "spgemm: the second operand's";
  const int64_t m = csr_operand_shape(crow_a, col_a, values_a, what_a);
  const int64_t k = csr_operand_shape(crow_b, col_b, values_b, what_b);
  const int64_t nse_a = col_a.numel(), nse_b = col_b.numel();
  c10::cuda::CUDAGuard guard(device);
  Reports reports(2, device);
  check_call(sf_cuda_csr_operand_check(reports.at(0), crow_a.data_ptr<int64_t>(),
                                       col_a.data_ptr<int64_t>(), m, k, nse_a, 1,
                                       current_stream()),
             "spgemm operands");
  check_call(sf_cuda_csr_operand_check(reports.at(1), crow_b.data_ptr<int64_t>(),
                                       col_b.data_ptr<int64_t>(), k, n, nse_b, 1,
                                       current_stream()),
             "spgemm operands");
  const auto r = reports.read();  // before cuSPARSE reads the indices
  check_operand_ends(r[0], what_a, nse_a);
  check_operand_ends(r[1], what_b, nse_b);
  check_status((sf_status)r[0].status, "spgemm operands");
  check_status((sf_status)r[1].status, "spgemm operands");

  const auto out_type = values_a.scalar_type();
  const auto ct = compute_type(out_type, "spgemm", false);
  const auto index_opts = crow_a.options();
  if (m == 0 || n == 0 || nse_a == 0 || nse_b == 0) {  // no stored product: no library call
    return {at::zeros({m + 1}, index_opts), at::empty({0}, index_opts),
            at::empty({0}, values_a.options())};
  }
  check_int32(m, "the first operand's rows");
  check_int32(k, "the inner size");
  check_int32(n, "the second operand's columns");
  check_int32(nse_a, "the first operand's stored elements");
  check_int32(nse_b, "the second operand's stored elements");
  Tensor va = values_a.to(ct).contiguous(), vb = values_b.to(ct).contiguous();
  // Checked above: every entry lies in [0, INT32_MAX].
  Tensor crow_a32 = crow_a.to(at::kInt), col_a32 = col_a.to(at::kInt);
  Tensor crow_b32 = crow_b.to(at::kInt), col_b32 = col_b.to(at::kInt);
  return with_compute_type(ct, [&](auto zero) -> std::tuple<Tensor, Tensor, Tensor> {
    using T = decltype(zero);
    int cs = 0;
    sf_cuda_spgemm* raw = nullptr;
    const sf_status created = CudaCore<T>::spgemm_create(
        &raw, &cs, sparse_handle(), m, k, n, crow_a32.data_ptr<int32_t>(),
        col_a32.data_ptr<int32_t>(), va.data_ptr<T>(), nse_a, crow_b32.data_ptr<int32_t>(),
        col_b32.data_ptr<int32_t>(), vb.data_ptr<T>(), nse_b, current_stream());
    std::unique_ptr<sf_cuda_spgemm, void (*)(sf_cuda_spgemm*)> state(raw, sf_cuda_spgemm_destroy);
    check_library_call(created, cs, "spgemm");
    // Each stage's buffer stays alive (stream-ordered) until the copy.
    size_t bytes1 = 0, bytes2 = 0;
    check_library_call(sf_cuda_spgemm_estimate(state.get(), &cs, nullptr, &bytes1), cs,
                       "spgemm");
    Tensor ws1 = workspace(bytes1, va);
    check_library_call(sf_cuda_spgemm_estimate(state.get(), &cs, ws1.data_ptr(), &bytes1), cs,
                       "spgemm");
    int64_t nse_c = 0;
    check_library_call(sf_cuda_spgemm_compute(state.get(), &cs, nullptr, &bytes2, nullptr), cs,
                       "spgemm");
    Tensor ws2 = workspace(bytes2, va);
    const sf_status computed = sf_cuda_spgemm_compute(state.get(), &cs, ws2.data_ptr(), &bytes2,
                                                      &nse_c);
    if (computed == SF_ERR_OVERFLOW) check_int32(nse_c, "the product's stored elements");
    check_library_call(computed, cs, "spgemm");
    if (nse_c == 0) {
      return {at::zeros({m + 1}, index_opts), at::empty({0}, index_opts),
              at::empty({0}, values_a.options())};
    }
    Tensor crow_c32 = at::empty({m + 1}, crow_a32.options());
    Tensor col_c32 = at::empty({nse_c}, crow_a32.options());
    Tensor val_c = at::empty({nse_c}, va.options());
    check_library_call(CudaCore<T>::spgemm_copy(state.get(), &cs, crow_c32.data_ptr<int32_t>(),
                                                col_c32.data_ptr<int32_t>(), val_c.data_ptr<T>()),
                       cs, "spgemm");
    return {crow_c32.to(at::kLong), col_c32.to(at::kLong), val_c.to(out_type)};
  });
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, CUDA, m) {
  m.impl("spmm", &sparsefill::spmm_cuda);
  m.impl("csr_transpose", &sparsefill::csr_transpose_cuda);
  m.impl("sddmm", &sparsefill::sddmm_cuda);
  m.impl("sparse_attention", &sparsefill::sparse_attention_cuda);
  m.impl("sparse_attention_backward", &sparsefill::sparse_attention_backward_cuda);
  m.impl("spgemm", &sparsefill::spgemm_cuda);
}

