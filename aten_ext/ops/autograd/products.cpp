// ops/autograd/products.cpp -- the backward formulas of spmm, sddmm and
// spgemm (ops/products.h). The forward calls the op below autograd; the
// backward calls ops through the dispatcher (and ATen), so it serves every
// device, can be traced and, where create_graph asks, be differentiated
// again; spgemm's first-order backward on the CPU uses the CPU's
// sparse-sparse SDDMM directly (sddmm_sparse_cpu, not an op).
#include <torch/library.h>
#include <torch/csrc/autograd/custom_function.h>

#include <ATen/core/grad_mode.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/clamp_max.h>
#include <ATen/ops/dot.h>
#include <ATen/ops/mv.h>
#include <ATen/ops/searchsorted.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <optional>

#include "ops/products.h"
#include "ops/structure.h"

namespace sparsefill {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// With g = dL/dC (m x n):
//   g_values = (g B^T) on A's pattern                          (SDDMM)
//   g_fill   = sum of g B^T over the unspecified elements, per fill element:
//              scalar: dot(g.sum(0), B.sum(0)) - sum(g_values)
//              row i:  (g B.sum(0))[i] - sum of g_values in row i
//              col j:  (B g.sum(0))[j] - sum of g_values in column j
//   g_B      = A^T g, the same fill-aware SpMM on the transposed pattern.
class SpmmFunction : public torch::autograd::Function<SpmmFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& crow, const Tensor& col,
                        const Tensor& values, const Tensor& fill, const Tensor& b,
                        int64_t ncols) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({crow, col, values, fill, b});
    ctx->saved_data["ncols"] = ncols;
    return call::spmm(crow, col, values, fill, b, ncols);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const Tensor &crow = saved[0], &col = saved[1], &values = saved[2], &fill = saved[3],
                 &b = saved[4];
    const int64_t k = ctx->saved_data["ncols"].toInt();
    const Tensor& g = grads[0];
    Tensor g_values, g_fill, g_b;
    const bool need_v = ctx->needs_input_grad(2), need_f = ctx->needs_input_grad(3),
               need_b = ctx->needs_input_grad(4);
    if (!g.defined()) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    // Only dispatcher ops and ATen below, so the backward can be traced.
    if (need_v || need_f) g_values = call::sddmm(crow, col, k, g, b);
    if (need_f) {
      Tensor gf;
      switch (fill_kind_of(fill)) {
        case FillKind::Scalar:
          gf = at::dot(g.sum(0), b.sum(0)) - g_values.sum();
          break;
        case FillKind::Row: {
          Tensor per_row = at::zeros({rows_of_crow(crow)}, g_values.options())
                               .index_add(0, call::rows_from_crow(crow), g_values);
          gf = (at::mv(g, b.sum(0)) - per_row).unsqueeze(1);
          break;
        }
        case FillKind::Col: {
          Tensor per_col = at::zeros({k}, g_values.options()).index_add(0, col, g_values);
          gf = (at::mv(b, g.sum(0)) - per_col).unsqueeze(0);
          break;
        }
      }
      g_fill = gf.reshape_symint(fill.sym_sizes()).to(fill.scalar_type());
    }
    if (need_b) {
      auto [crow_t, col_t, perm] = call::csr_transpose(crow, col, k);
      g_b = call::spmm(crow_t, col_t, values.index_select(0, perm), transposed_fill(fill),
                      g.contiguous(), rows_of_crow(crow));
    }
    return {Tensor(), Tensor(), need_v ? g_values : Tensor(), g_fill, g_b, Tensor()};
  }
};

Tensor spmm_autograd(const Tensor& crow, const Tensor& col, const Tensor& values,
                     const Tensor& fill, const Tensor& b, int64_t ncols) {
  return SpmmFunction::apply(crow, col, values, fill, b, ncols);
}

// out = (X Y^T) sampled on the pattern (crow, col): with S the fill-0 CSR
// matrix of gradient gs on that pattern,
//   g_x = S Y,   g_y = S^T X,
// both fill-aware SpMMs (differentiable themselves), so spmm's backward,
// which calls sddmm, has an exact double backward.
class SddmmFunction : public torch::autograd::Function<SddmmFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& crow, const Tensor& col, int64_t ncols,
                        const Tensor& x, const Tensor& y) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({crow, col, x, y});
    ctx->saved_data["ncols"] = ncols;
    return call::sddmm(crow, col, ncols, x, y);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const Tensor &crow = saved[0], &col = saved[1], &x = saved[2], &y = saved[3];
    const int64_t ncols = ctx->saved_data["ncols"].toInt();
    const Tensor& gs = grads[0];
    Tensor g_x, g_y;
    if (!gs.defined()) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    Tensor zero = at::zeros({}, gs.options());
    // needs_input_grad counts tensor inputs only: crow, col, x, y.
    if (ctx->needs_input_grad(2)) g_x = call::spmm(crow, col, gs, zero, y.contiguous(), ncols);
    if (ctx->needs_input_grad(3)) {
      auto [crow_t, col_t, perm] = call::csr_transpose(crow, col, ncols);
      g_y = call::spmm(crow_t, col_t, gs.index_select(0, perm), zero, x.contiguous(),
                       rows_of_crow(crow));
    }
    return {Tensor(), Tensor(), Tensor(), g_x, g_y};
  }
};

Tensor sddmm_autograd(const Tensor& crow, const Tensor& col, int64_t ncols, const Tensor& x,
                      const Tensor& y) {
  return SddmmFunction::apply(crow, col, ncols, x, y);
}

// The values of the CSR matrix P (crow_p, col_p, vals_p; ncols columns) at
// the positions of the pattern (crow, col): P's value where P stores one, else
// 0. Both patterns have sorted columns within rows, so their linear indices
// increase: one searchsorted, device-agnostic ATen.
Tensor sample_csr(const Tensor& crow_p, const Tensor& col_p, const Tensor& vals_p,
                  const Tensor& crow, const Tensor& col, int64_t ncols) {
  const int64_t nse = col.numel();
  if (col_p.numel() == 0 || nse == 0) return at::zeros({nse}, vals_p.options());
  Tensor lin_p = call::rows_from_crow(crow_p) * ncols + col_p;
  Tensor lin = call::rows_from_crow(crow) * ncols + col;
  Tensor pos = at::searchsorted(lin_p, lin).clamp_max(lin_p.numel() - 1);
  Tensor hit = lin_p.index_select(0, pos) == lin;
  return at::where(hit, vals_p.index_select(0, pos), at::zeros({}, vals_p.options()));
}

// C = A B (fill 0 both), gC = dL/d(C's values) on C's pattern:
//   g_values_a[p at (i, j)] = sum_t gC[i, t] B[j, t]
//   g_values_b[q at (j, t)] = sum_i A[i, j] gC[i, t] = sum_i A^T[j, i] gC^T[t, i]
// both sampled products of two sparse factors (the dense gradient is zero
// off C's pattern only through C's values, which is all a fill-0 C has).
class SpgemmFunction : public torch::autograd::Function<SpgemmFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& crow_a, const Tensor& col_a,
                               const Tensor& va, const Tensor& crow_b, const Tensor& col_b,
                               const Tensor& vb, int64_t n) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [crow_c, col_c, vc] = call::spgemm(crow_a, col_a, va, crow_b, col_b, vb, n);
    ctx->save_for_backward({crow_a, col_a, va, crow_b, col_b, vb, crow_c, col_c});
    ctx->saved_data["n"] = n;
    ctx->mark_non_differentiable({crow_c, col_c});
    return {crow_c, col_c, vc};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    Tensor crow_a = s[0].to(at::kLong).contiguous(), col_a = s[1].to(at::kLong).contiguous();
    const Tensor& va = s[2];
    Tensor crow_b = s[3].to(at::kLong).contiguous(), col_b = s[4].to(at::kLong).contiguous();
    const Tensor& vb = s[5];
    const Tensor &crow_c = s[6], &col_c = s[7];
    const int64_t n = ctx->saved_data["n"].toInt();
    const int64_t m = crow_a.numel() - 1, k = crow_b.numel() - 1;
    Tensor g = grads[2];
    Tensor g_a, g_b;
    if (!g.defined()) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    g = g.contiguous();
    // A backward that is itself differentiated (create_graph) takes the
    // path through ops with autograd; the CPU's scratch-row kernel is not one.
    const bool differentiable = at::GradMode::is_enabled();
    if (!crow_a.is_cpu() || differentiable) {
      // Other devices: the sampled products through ops with a kernel there
      // (sddmm_sparse_cpu reads host memory). Each is a fill-0 SpGEMM read
      // at the operand's pattern: gC B^T for A, A^T gC for B. Costlier than
      // the CPU's scratch-row kernel (the product's pattern may be larger
      // than the operand's) but device-agnostic.
      std::optional<at::AutoDispatchBelowADInplaceOrView> guard;
      if (!differentiable) guard.emplace();
      if (ctx->needs_input_grad(2)) {
        auto [crow_bt, col_bt, perm_b] = call::csr_transpose(crow_b, col_b, n);
        auto [crow_p, col_p, vp] =
            call::spgemm(crow_c, col_c, g, crow_bt, col_bt, vb.index_select(0, perm_b), k);
        g_a = sample_csr(crow_p, col_p, vp, crow_a, col_a, k);
      }
      if (ctx->needs_input_grad(5)) {
        auto [crow_at, col_at, perm_a] = call::csr_transpose(crow_a, col_a, k);
        auto [crow_q, col_q, vq] =
            call::spgemm(crow_at, col_at, va.index_select(0, perm_a), crow_c, col_c, g, n);
        g_b = sample_csr(crow_q, col_q, vq, crow_b, col_b, n);
      }
      return {Tensor(), Tensor(), g_a, Tensor(), Tensor(), g_b, Tensor()};
    }
    if (ctx->needs_input_grad(2)) {
      g_a = sddmm_sparse_cpu(crow_a, col_a, k, crow_c, col_c, g, crow_b, col_b, vb, n);
    }
    if (ctx->needs_input_grad(5)) {
      auto [crow_at, col_at, perm_a] = call::csr_transpose(crow_a, col_a, k);
      auto [crow_ct, col_ct, perm_c] = call::csr_transpose(crow_c, col_c, n);
      g_b = sddmm_sparse_cpu(crow_b, col_b, n, crow_at, col_at, va.index_select(0, perm_a),
                             crow_ct, col_ct, g.index_select(0, perm_c), m);
    }
    return {Tensor(), Tensor(), g_a, Tensor(), Tensor(), g_b, Tensor()};
  }
};

std::tuple<Tensor, Tensor, Tensor> spgemm_autograd(const Tensor& crow_a, const Tensor& col_a,
                                                   const Tensor& va, const Tensor& crow_b,
                                                   const Tensor& col_b, const Tensor& vb,
                                                   int64_t n) {
  auto out = SpgemmFunction::apply(crow_a, col_a, va, crow_b, col_b, vb, n);
  return {out[0], out[1], out[2]};
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {
  m.impl("spmm", &sparsefill::spmm_autograd);
  m.impl("spgemm", &sparsefill::spgemm_autograd);
  m.impl("sddmm", &sparsefill::sddmm_autograd);
}
