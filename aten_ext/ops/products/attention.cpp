// ops/products/attention.cpp -- the kernels of sparse_attention and
// sparse_attention_backward (the ops: tools/codegen/native.yaml; their shared
// rules: products.h): fused attention on a CSR pattern shared by a batch of
// heads, on the CPU (the C core, sf_attention.c, over row ranges on torch's
// threads) and on CUDA (sf_cuda_attention.cu; CUDA build only).
#include <torch/library.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <optional>
#include <tuple>

#include "ops/common/dtypes.h"
#include "ops/common/row_ranges.h"
#include "ops/generated/kernels.h"
#include "ops/products/products.h"

namespace sparsefill {
// Fused sparse attention (sparsefill_core.h, sf_csr_attention): per row of
// the pattern and batch member, softmax of scale * Q K^T + bias over the
// stored elements, times V.
std::tuple<Tensor, Tensor> sparse_attention_cpu(const Tensor& crow_in, const Tensor& col_in,
                                                const std::optional<Tensor>& bias_in,
                                                const Tensor& q_in, const Tensor& k_in,
                                                const Tensor& v_in, double scale) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  check_cpu_float(q_in, "query");
  check_cpu_float(k_in, "key");
  check_cpu_float(v_in, "value");
  const AttentionDims d = check_attention_shapes(crow, col, bias_in, q_in, k_in, v_in);
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
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    const int64_t* cr = crow.data_ptr<int64_t>();
    const T* b = bias.defined() ? bias.data_ptr<T>() : nullptr;
    for_batched_row_ranges(cr, d.m, d.nb, d.e + d.dv, "sparse_attention operands",
                           [&](int64_t r0, int64_t r1) {
      return Core<T>::attention(out.data_ptr<T>(), d.dv, lse.data_ptr<T>(), cr,
                                col.data_ptr<int64_t>(), b, d.bias_stride, d.m, d.ncols, d.nse,
                                d.nb, q.data_ptr<T>(), d.e, k.data_ptr<T>(), d.e,
                                v.data_ptr<T>(), d.dv, d.e, d.dv, (T)scale, r0, r1);
    });
  });
  return {out.to(out_type), lse.to(out_type)};
}

// sparse_attention's gradients (sf_csr_attention_backward_rows/_cols): the
// weights from the saved lse, dq by rows, dk and dv by the columns of the
// transposed pattern; grad_scores is the gradient of every stored score
// ((nb x) nse, per batch member), which is the bias's.
std::tuple<Tensor, Tensor, Tensor, Tensor> sparse_attention_backward_cpu(
    const Tensor& crow_in, const Tensor& col_in, const std::optional<Tensor>& bias_in,
    const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& lse_in,
    const Tensor& g_in, const std::optional<Tensor>& g_lse_in, double scale) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  check_cpu_float(q_in, "query");
  check_cpu_float(k_in, "key");
  check_cpu_float(v_in, "value");
  const AttentionDims d = check_attention_shapes(crow, col, bias_in, q_in, k_in, v_in);
  check_attention_grads(d, q_in, lse_in, g_in, g_lse_in);
  const auto out_type = q_in.scalar_type();
  const auto ct = compute_type(out_type, "sparse_attention_backward", false);
  auto [q, k, v, lse, g, bias, g_lse, dq, dk, dv, ds, w] =
      prepare_attention_backward(d, ct, q_in, k_in, v_in, lse_in, g_in, bias_in, g_lse_in);
  Tensor crow_t = at::empty({d.ncols + 1}, crow.options());
  Tensor row_t = at::empty({d.nse}, crow.options());
  Tensor perm = at::empty({d.nse}, crow.options());
  check_status(sf_csr_transpose(crow_t.data_ptr<int64_t>(), row_t.data_ptr<int64_t>(),
                                perm.data_ptr<int64_t>(), crow.data_ptr<int64_t>(),
                                col.data_ptr<int64_t>(), d.m, d.ncols, d.nse),
               "sparse_attention_backward operands");
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    const int64_t* cr = crow.data_ptr<int64_t>();
    const T* b = bias.defined() ? bias.data_ptr<T>() : nullptr;
    const T* gl = g_lse.defined() ? g_lse.data_ptr<T>() : nullptr;
    for_batched_row_ranges(cr, d.m, d.nb, d.e + d.dv, "sparse_attention_backward operands",
                           [&](int64_t r0, int64_t r1) {
      return Core<T>::attention_backward_rows(
          dq.data_ptr<T>(), d.e, ds.data_ptr<T>(), w.data_ptr<T>(), cr, col.data_ptr<int64_t>(),
          b, d.bias_stride, d.m, d.ncols, d.nse, d.nb, q.data_ptr<T>(), d.e, k.data_ptr<T>(),
          d.e, v.data_ptr<T>(), d.dv, lse.data_ptr<T>(), g.data_ptr<T>(), d.dv, gl, d.e, d.dv,
          (T)scale, r0, r1);
    });
    for_batched_row_ranges(crow_t.data_ptr<int64_t>(), d.ncols, d.nb, d.e + d.dv,
                           "sparse_attention_backward operands", [&](int64_t c0, int64_t c1) {
      return Core<T>::attention_backward_cols(
          dk.data_ptr<T>(), d.e, dv.data_ptr<T>(), d.dv, crow_t.data_ptr<int64_t>(),
          row_t.data_ptr<int64_t>(), perm.data_ptr<int64_t>(), d.m, d.ncols, d.nse, d.nb,
          ds.data_ptr<T>(), w.data_ptr<T>(), q.data_ptr<T>(), d.e, g.data_ptr<T>(), d.dv, d.e,
          d.dv, (T)scale, c0, c1);
    });
  });
  return {dq.to(out_type), dk.to(out_type), dv.to(out_type), ds.to(out_type)};
}

}  // namespace sparsefill

#ifdef SPARSEFILL_WITH_CUDA
#include "ops/products/on_cuda.h"

namespace sparsefill {
namespace {

// ---- sparse_attention -------------------------------------------------------------

}  // namespace

std::tuple<Tensor, Tensor> sparse_attention_cuda(const Tensor& crow_in, const Tensor& col_in,
                                                 const std::optional<Tensor>& bias_in,
                                                 const Tensor& q_in, const Tensor& k_in,
                                                 const Tensor& v_in, double scale) {
  Tensor crow, col;
  std::tie(crow, col) = csr_index_args(crow_in, col_in);
  const at::Device device = crow.device();
  check_cuda_float(q_in, "query", device);
  check_cuda_float(k_in, "key", device);
  check_cuda_float(v_in, "value", device);
  if (bias_in.has_value()) check_cuda_float(*bias_in, "bias", device);
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
  check_cuda_float(q_in, "query", device);
  check_cuda_float(k_in, "key", device);
  check_cuda_float(v_in, "value", device);
  check_cuda_float(lse_in, "lse", device);
  check_cuda_float(g_in, "grad_out", device);
  if (bias_in.has_value()) check_cuda_float(*bias_in, "bias", device);
  if (g_lse_in.has_value()) check_cuda_float(*g_lse_in, "grad_lse", device);
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

}  // namespace sparsefill
#endif  // SPARSEFILL_WITH_CUDA
