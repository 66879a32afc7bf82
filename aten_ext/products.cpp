// products.cpp -- fill-aware matrix products (RFC.md section 5): schemas,
// CPU kernels that split row ranges over threads and call the C core
// (sf_products.c), and explicit backward formulas at the Autograd key.
//
//   spmm             SparseFill (CSR components) @ strided, any fill
//   dense_spmm       strided @ SparseFill, through (A^T D^T)^T
//   spgemm           fill-0 CSR @ fill-0 CSR -> CSR (two-pass SpGEMM)
//   sparse_mm_dense  SparseFill @ SparseFill with fills -> strided
//   csr_transpose    the transposed pattern and the values' permutation
//   sddmm            (X Y^T) sampled on a pattern (the values' gradient)
//
// A fill of A (m x k) is one of: a single element (a scalar, shape () or
// (1, 1)), per row (m, 1) or per column (1, k). Nothing of size m x k is
// built, forward or backward.
#include "sf_glue.h"

#include <torch/autograd.h>

#include <algorithm>
#include <vector>

namespace sparsefill {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

// ---- arguments ---------------------------------------------------------------

// The same decision from the fill's own shape, valid once fill_kind has
// accepted it; safe on symbolic shapes (the backward may be traced).
FillKind fill_kind_of(const Tensor& fill) {
  if (fill.dim() <= 2 && fill.sym_numel() == 1) return FillKind::Scalar;
  return fill.sym_size(1) == 1 ? FillKind::Row : FillKind::Col;
}

// rows of a CSR operand from its crow_indices, specialised if symbolic.
int64_t rows_of_crow(const Tensor& crow) {
  return crow.sym_size(0).guard_int(__FILE__, __LINE__) - 1;
}

void check_float(const Tensor& t, const char* name) {
  check_product_dtype(t, name);
  TORCH_CHECK(t.device().is_cpu(), "sparsefill: ", name, " must be on the CPU, got ", t.device());
}

// Checked CSR components: crow (m + 1), col (nse), values (nse); returns m.
int64_t csr_operand_rows(const Tensor& crow, const Tensor& col, const Tensor& values,
                         const char* what) {
  const int64_t m = csr_operand_shape(crow, col, values, what);
  const int64_t first = crow[0].item<int64_t>(), last = crow[m].item<int64_t>();
  TORCH_CHECK(first == 0, "sparsefill: ", what, " crow_indices[0] must be 0, got ", first);
  TORCH_CHECK(last == col.numel(), "sparsefill: ", what,
              " crow_indices[-1] must equal the number of stored elements (", col.numel(),
              "), got ", last);
  return m;
}

template <class T> struct Core;
template <> struct Core<float> {
  static constexpr auto spmm = sf_csr_spmm_f32;
  static constexpr auto spmv = sf_csr_spmv_f32;
  static constexpr auto sddmm = sf_csr_sddmm_f32;
  static constexpr auto spgemm = sf_csr_spgemm_f32;
  static constexpr auto sddmm_sparse = sf_csr_sddmm_sparse_f32;
};
template <> struct Core<double> {
  static constexpr auto spmm = sf_csr_spmm_f64;
  static constexpr auto spmv = sf_csr_spmv_f64;
  static constexpr auto sddmm = sf_csr_sddmm_f64;
  static constexpr auto spgemm = sf_csr_spgemm_f64;
  static constexpr auto sddmm_sparse = sf_csr_sddmm_sparse_f64;
};

#define SF_DISPATCH_FLOAT(st, NAME, ...)                      \
  [&] {                                                       \
    if ((st) == at::kDouble) {                                \
      using scalar_t = double;                                \
      return __VA_ARGS__();                                   \
    }                                                         \
    TORCH_CHECK((st) == at::kFloat, "sparsefill: ", NAME,     \
                ": unsupported compute dtype ", (st));        \
    using scalar_t = float;                                   \
    return __VA_ARGS__();                                     \
  }()

// ---- spmm ----------------------------------------------------------------------

// C = A @ B for A = (crow, col, values, fill) of ncols columns, B strided.
Tensor spmm_cpu(const Tensor& crow_in, const Tensor& col_in, const Tensor& values_in,
                const Tensor& fill_in, const Tensor& b_in, int64_t ncols) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  check_float(values_in, "values");
  check_float(fill_in, "fill");
  check_float(b_in, "the dense operand");
  TORCH_CHECK(values_in.scalar_type() == b_in.scalar_type() &&
                  values_in.scalar_type() == fill_in.scalar_type(),
              "sparsefill: spmm: expected values, fill and the dense operand to have the same "
              "dtype, got ", values_in.scalar_type(), ", ", fill_in.scalar_type(), " and ",
              b_in.scalar_type());
  const int64_t m = csr_operand_rows(crow, col, values_in, "spmm: the sparse operand's");
  TORCH_CHECK(ncols >= 0, "sparsefill: spmm: ncols must be non-negative, got ", ncols);
  TORCH_CHECK(b_in.dim() == 2 && b_in.size(0) == ncols,
              "sparsefill: spmm: the dense operand must be 2-D with ", ncols,
              " rows (the sparse operand's columns), got shape ", b_in.sizes());
  const FillKind kind = fill_kind(fill_in, m, ncols);
  const auto out_type = values_in.scalar_type();
  const auto ct = compute_type(out_type);
  Tensor values = values_in.to(ct).contiguous();
  Tensor fill = fill_in.to(ct).contiguous();
  Tensor b = b_in.to(ct);
  const int64_t n = b.size(1);
  if (n > 1 && (b.stride(1) != 1 || dense_row_stride(b) < n)) b = b.contiguous();
  Tensor c = at::empty({m, n}, values.options());
  if (m == 0 || n == 0) return c.to(out_type);
  // The correction vectors: 1^T B for a scalar or per-row fill, c^T B for a
  // per-column fill (a GEMV over B, O(k n)).
  Tensor colsum = kind == FillKind::Col ? Tensor() : b.sum(0).contiguous();
  Tensor corr = kind == FillKind::Col ? at::mv(b.t(), fill.view({-1})).contiguous() : Tensor();
  const int64_t nse = values.numel();
  SF_DISPATCH_FLOAT(ct, "spmm", [&] {
    const scalar_t* rf = kind == FillKind::Col ? nullptr : fill.data_ptr<scalar_t>();
    const int64_t rf_stride = kind == FillKind::Row ? 1 : 0;
    const scalar_t* cf = kind == FillKind::Col ? fill.data_ptr<scalar_t>() : nullptr;
    const int64_t* cr = crow.data_ptr<int64_t>();
    const int64_t* cl = col.data_ptr<int64_t>();
    const scalar_t* v = values.data_ptr<scalar_t>();
    const scalar_t* bp = b.data_ptr<scalar_t>();
    scalar_t* cp = c.data_ptr<scalar_t>();
    if (n == 1) {
      const scalar_t xsum = colsum.defined() ? colsum.item<scalar_t>() : scalar_t(0);
      const scalar_t cor = corr.defined() ? corr.item<scalar_t>() : scalar_t(0);
      const int64_t incx = b.stride(0);
      for_row_ranges(cr, m, 1, "spmm operands", [&](int64_t r0, int64_t r1) {
        return Core<scalar_t>::spmv(cp, 1, cr, cl, v, m, ncols, nse, bp, incx, rf, rf_stride, cf,
                                    xsum, cor, r0, r1);
      });
    } else {
      const scalar_t* cs = colsum.defined() ? colsum.data_ptr<scalar_t>() : nullptr;
      const scalar_t* co = corr.defined() ? corr.data_ptr<scalar_t>() : nullptr;
      const int64_t ldb = dense_row_stride(b);
      for_row_ranges(cr, m, n, "spmm operands", [&](int64_t r0, int64_t r1) {
        return Core<scalar_t>::spmm(cp, n, cr, cl, v, m, ncols, nse, bp, ldb, n, rf, rf_stride,
                                    cf, cs, co, r0, r1);
      });
    }
  });
  return c.to(out_type);
}

// out[p] = dot(X[i_p, :], Y[j_p, :]) on the pattern (crow, col).
Tensor sddmm_cpu(const Tensor& crow_in, const Tensor& col_in, int64_t ncols, const Tensor& x_in,
                 const Tensor& y_in) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  check_float(x_in, "x");
  check_float(y_in, "y");
  check_sddmm_shapes(crow, ncols, x_in, y_in);
  const auto out_type = x_in.scalar_type();
  const auto ct = compute_type(out_type);
  Tensor x = x_in.to(ct).contiguous(), y = y_in.to(ct).contiguous();
  const int64_t m = crow.numel() - 1, nse = col.numel(), n = x.size(1);
  Tensor out = at::empty({nse}, x.options());
  SF_DISPATCH_FLOAT(ct, "sddmm", [&] {
    const int64_t* cr = crow.data_ptr<int64_t>();
    for_row_ranges(cr, m, n, "sddmm operands", [&](int64_t r0, int64_t r1) {
      return Core<scalar_t>::sddmm(out.data_ptr<scalar_t>(), cr, col.data_ptr<int64_t>(), m,
                                   ncols, nse, x.data_ptr<scalar_t>(), n, y.data_ptr<scalar_t>(),
                                   n, n, r0, r1);
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

// The fill of A^T, given A's fill (A is m x k).
Tensor transposed_fill(const Tensor& fill) { return fill.dim() == 2 ? fill.t() : fill; }

Tensor call_spmm(const Tensor& crow, const Tensor& col, const Tensor& values, const Tensor& fill,
                 const Tensor& b, int64_t ncols) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::spmm", "")
                       .typed<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                     const Tensor&, int64_t)>();
  return op.call(crow, col, values, fill, b, ncols);
}

std::tuple<Tensor, Tensor, Tensor> call_transpose(const Tensor& crow, const Tensor& col,
                                                  int64_t ncols) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::csr_transpose", "")
                       .typed<std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&,
                                                                 int64_t)>();
  return op.call(crow, col, ncols);
}

Tensor call_sddmm(const Tensor& crow, const Tensor& col, int64_t ncols, const Tensor& x,
                  const Tensor& y) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::sddmm", "")
                       .typed<Tensor(const Tensor&, const Tensor&, int64_t, const Tensor&,
                                     const Tensor&)>();
  return op.call(crow, col, ncols, x, y);
}

Tensor rows_of(const Tensor& crow) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::rows_from_crow", "")
                       .typed<Tensor(const Tensor&)>();
  return op.call(crow);
}

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
    return call_spmm(crow, col, values, fill, b, ncols);
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
    if (need_v || need_f) g_values = call_sddmm(crow, col, k, g, b);
    if (need_f) {
      Tensor gf;
      switch (fill_kind_of(fill)) {
        case FillKind::Scalar:
          gf = at::dot(g.sum(0), b.sum(0)) - g_values.sum();
          break;
        case FillKind::Row: {
          Tensor per_row = at::zeros({rows_of_crow(crow)}, g_values.options())
                               .index_add(0, rows_of(crow), g_values);
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
      auto [crow_t, col_t, perm] = call_transpose(crow, col, k);
      g_b = call_spmm(crow_t, col_t, values.index_select(0, perm), transposed_fill(fill),
                      g.contiguous(), rows_of_crow(crow));
    }
    return {Tensor(), Tensor(), need_v ? g_values : Tensor(), g_fill, g_b, Tensor()};
  }
};

Tensor spmm_autograd(const Tensor& crow, const Tensor& col, const Tensor& values,
                     const Tensor& fill, const Tensor& b, int64_t ncols) {
  return SpmmFunction::apply(crow, col, values, fill, b, ncols);
}

// D @ A = (A^T D^T)^T for a strided D (p x m) and A (m x k): the fill-aware
// SpMM on A's transposed pattern; autograd comes from its parts.
Tensor dense_spmm(const Tensor& d, const Tensor& crow, const Tensor& col, const Tensor& values,
                  const Tensor& fill, int64_t ncols) {
  TORCH_CHECK(d.dim() == 2, "sparsefill: dense_spmm: the dense operand must be 2-D, got shape ",
              d.sizes());
  auto [crow_t, col_t, perm] = call_transpose(crow, col, ncols);
  return call_spmm(crow_t, col_t, values.index_select(0, perm), transposed_fill(fill),
                   d.t().contiguous(), rows_of_crow(crow))
      .t()
      .contiguous();
}

// ---- spgemm (fill 0) -------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> spgemm_cpu(const Tensor& crow_a_in, const Tensor& col_a_in,
                                              const Tensor& values_a, const Tensor& crow_b_in,
                                              const Tensor& col_b_in, const Tensor& values_b,
                                              int64_t n) {
  Tensor crow_a = index_arg(crow_a_in, "crow_indices of the first operand", 1);
  Tensor col_a = index_arg(col_a_in, "col_indices of the first operand", 1);
  Tensor crow_b = index_arg(crow_b_in, "crow_indices of the second operand", 1);
  Tensor col_b = index_arg(col_b_in, "col_indices of the second operand", 1);
  check_float(values_a, "values of the first operand");
  check_float(values_b, "values of the second operand");
  TORCH_CHECK(values_a.scalar_type() == values_b.scalar_type(),
              "sparsefill: spgemm: expected both operands to have the same dtype, got ",
              values_a.scalar_type(), " and ", values_b.scalar_type());
  TORCH_CHECK(n >= 0, "sparsefill: spgemm: n must be non-negative, got ", n);
  const int64_t m = csr_operand_rows(crow_a, col_a, values_a, "spgemm: the first operand's");
  const int64_t k = csr_operand_rows(crow_b, col_b, values_b, "spgemm: the second operand's");
  const auto out_type = values_a.scalar_type();
  const auto ct = compute_type(out_type);
  Tensor va = values_a.to(ct).contiguous(), vb = values_b.to(ct).contiguous();
  const int64_t* ca = crow_a.data_ptr<int64_t>();
  const int64_t* cb = crow_b.data_ptr<int64_t>();
  const int64_t nse_a = va.numel(), nse_b = vb.numel();
  Tensor row_nse = at::empty({m}, crow_a.options());
  for_row_ranges(ca, m, 4, "spgemm operands", [&](int64_t r0, int64_t r1) {
    std::vector<uint64_t> bits((n + 63) / 64);
    return sf_csr_spgemm_count(row_nse.data_ptr<int64_t>(), ca, col_a.data_ptr<int64_t>(), m, k,
                               nse_a, cb, col_b.data_ptr<int64_t>(), n, nse_b, bits.data(), r0,
                               r1);
  });
  Tensor crow_c = at::zeros({m + 1}, crow_a.options());
  if (m > 0) {
    Tensor tail = crow_c.narrow(0, 1, m);
    at::cumsum_out(tail, row_nse, 0);
  }
  const int64_t nse_c = crow_c[m].item<int64_t>();
  Tensor col_c = at::empty({nse_c}, crow_a.options());
  Tensor val_c = at::empty({nse_c}, va.options());
  SF_DISPATCH_FLOAT(ct, "spgemm", [&] {
    for_row_ranges(ca, m, 4, "spgemm operands", [&](int64_t r0, int64_t r1) {
      std::vector<scalar_t> acc(n);
      std::vector<uint64_t> bits((n + 63) / 64);
      return Core<scalar_t>::spgemm(col_c.data_ptr<int64_t>(), val_c.data_ptr<scalar_t>(),
                                    crow_c.data_ptr<int64_t>(), ca, col_a.data_ptr<int64_t>(),
                                    va.data_ptr<scalar_t>(), m, k, nse_a, cb,
                                    col_b.data_ptr<int64_t>(), vb.data_ptr<scalar_t>(), n, nse_b,
                                    acc.data(), bits.data(), r0, r1);
    });
  });
  return {crow_c, col_c, val_c.to(out_type)};
}

// out[p] = sum_t X[i, t] S[j, t] for the element p at (i, j) of pattern P, with
// X and S CSR of n columns.
Tensor sddmm_sparse_cpu(const Tensor& crow_p, const Tensor& col_p, int64_t ncols_p,
                        const Tensor& crow_x, const Tensor& col_x, const Tensor& val_x_in,
                        const Tensor& crow_s, const Tensor& col_s, const Tensor& val_s_in,
                        int64_t n) {
  const auto out_type = val_x_in.scalar_type();
  const auto ct = compute_type(out_type);
  Tensor val_x = val_x_in.to(ct).contiguous(), val_s = val_s_in.to(ct).contiguous();
  const int64_t m = crow_p.numel() - 1, nse_p = col_p.numel();
  TORCH_CHECK(crow_x.numel() == m + 1 && crow_s.numel() == ncols_p + 1,
              "sparsefill: sddmm_sparse: operand shapes disagree");
  Tensor out = at::empty({nse_p}, val_x.options());
  SF_DISPATCH_FLOAT(ct, "sddmm_sparse", [&] {
    const int64_t* cp = crow_p.data_ptr<int64_t>();
    for_row_ranges(cp, m, 4, "sddmm operands", [&](int64_t r0, int64_t r1) {
      std::vector<scalar_t> acc(n);
      return Core<scalar_t>::sddmm_sparse(
          out.data_ptr<scalar_t>(), cp, col_p.data_ptr<int64_t>(), m, ncols_p, nse_p,
          crow_x.data_ptr<int64_t>(), col_x.data_ptr<int64_t>(), val_x.data_ptr<scalar_t>(),
          val_x.numel(), crow_s.data_ptr<int64_t>(), col_s.data_ptr<int64_t>(),
          val_s.data_ptr<scalar_t>(), val_s.numel(), n, acc.data(), r0, r1);
    });
  });
  return out.to(out_type);
}

std::tuple<Tensor, Tensor, Tensor> call_spgemm(const Tensor& crow_a, const Tensor& col_a,
                                               const Tensor& va, const Tensor& crow_b,
                                               const Tensor& col_b, const Tensor& vb, int64_t n) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::spgemm", "")
                       .typed<std::tuple<Tensor, Tensor, Tensor>(
                           const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&, int64_t)>();
  return op.call(crow_a, col_a, va, crow_b, col_b, vb, n);
}

// The values of the CSR matrix P (crow_p, col_p, vals_p; ncols columns) at
// the positions of the pattern (crow, col): P's value where P stores one, else
// 0. Both patterns have sorted columns within rows, so their linear indices
// increase: one searchsorted, device-agnostic ATen.
Tensor sample_csr(const Tensor& crow_p, const Tensor& col_p, const Tensor& vals_p,
                  const Tensor& crow, const Tensor& col, int64_t ncols) {
  const int64_t nse = col.numel();
  if (col_p.numel() == 0 || nse == 0) return at::zeros({nse}, vals_p.options());
  Tensor lin_p = rows_of(crow_p) * ncols + col_p;
  Tensor lin = rows_of(crow) * ncols + col;
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
    auto [crow_c, col_c, vc] = call_spgemm(crow_a, col_a, va, crow_b, col_b, vb, n);
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
    if (!crow_a.is_cpu()) {
      // Other devices: the sampled products through ops with a kernel there
      // (sddmm_sparse_cpu reads host memory). Each is a fill-0 SpGEMM read
      // at the operand's pattern: gC B^T for A, A^T gC for B. Costlier than
      // the CPU's scratch-row kernel (the product's pattern may be larger
      // than the operand's) but device-agnostic.
      at::AutoDispatchBelowADInplaceOrView guard;
      if (ctx->needs_input_grad(2)) {
        auto [crow_bt, col_bt, perm_b] = call_transpose(crow_b, col_b, n);
        auto [crow_p, col_p, vp] =
            call_spgemm(crow_c, col_c, g, crow_bt, col_bt, vb.index_select(0, perm_b), k);
        g_a = sample_csr(crow_p, col_p, vp, crow_a, col_a, k);
      }
      if (ctx->needs_input_grad(5)) {
        auto [crow_at, col_at, perm_a] = call_transpose(crow_a, col_a, k);
        auto [crow_q, col_q, vq] =
            call_spgemm(crow_at, col_at, va.index_select(0, perm_a), crow_c, col_c, g, n);
        g_b = sample_csr(crow_q, col_q, vq, crow_b, col_b, n);
      }
      return {Tensor(), Tensor(), g_a, Tensor(), Tensor(), g_b, Tensor()};
    }
    if (ctx->needs_input_grad(2)) {
      g_a = sddmm_sparse_cpu(crow_a, col_a, k, crow_c, col_c, g, crow_b, col_b, vb, n);
    }
    if (ctx->needs_input_grad(5)) {
      auto [crow_at, col_at, perm_a] = csr_transpose_cpu(crow_a, col_a, k);
      auto [crow_ct, col_ct, perm_c] = csr_transpose_cpu(crow_c, col_c, n);
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

// ---- SparseFill @ SparseFill with fills: a strided result ----------------------

// Fill F of an m x k operand as (row part, column part): F[i, j] = r_i + c_j.
// Either may be undefined (zero). A scalar fill is a 0-d row part.
std::pair<Tensor, Tensor> fill_parts(const Tensor& fill, int64_t m, int64_t k) {
  switch (fill_kind(fill, m, k)) {
    case FillKind::Scalar: return {fill.reshape({}), Tensor()};
    case FillKind::Row: return {fill.reshape({m}), Tensor()};
    default: return {Tensor(), fill.reshape({k})};
  }
}

// A fill that is exactly zero and takes no gradient contributes nothing.
bool is_zero_constant(const Tensor& t) {
  return !t.defined() || (!t.requires_grad() && !at::any(t != 0).item<bool>());
}

// values - F at each stored element.
Tensor shifted_values(const Tensor& values, const Tensor& r, const Tensor& c, const Tensor& rows,
                      const Tensor& col) {
  Tensor out = values;
  if (r.defined()) out = out - (r.dim() == 0 ? r : r.index_select(0, rows));
  if (c.defined()) out = out - c.index_select(0, col);
  return out;
}

// A (m x k, fill Fa) @ B (k x n, fill Fb), Fa = ra 1^T + 1 ca^T, Fb likewise,
// A0 = A - Fa and B0 = B - Fb on their patterns (fill 0):
//   A @ B = A @ B0 + A @ Fb
//         = A0 @ B0 + Fa @ B0 + (A rb) 1_n^T + (A 1_k) cb^T
//   Fa @ B0 = ra (1^T B0) + 1_m (ca^T B0)
// The first term is the fill-0 SpGEMM, the others are rank-one: column sums
// of B0 and one SpMM of A with at most two columns. With scalar fills this
// is A0 B0 + a 1 (1^T B0) + b (A 1) 1^T, i.e. RFC.md's
// A0 B0 + b (A0 1) 1^T + a 1 (1^T B0) + a b K 1 1^T (A 1 = A0 1 + a K 1).
Tensor sparse_mm_dense(const Tensor& crow_a, const Tensor& col_a, const Tensor& va,
                       const Tensor& fa, const Tensor& crow_b, const Tensor& col_b,
                       const Tensor& vb, const Tensor& fb, int64_t k, int64_t n) {
  const int64_t m = crow_a.numel() - 1;
  TORCH_CHECK(crow_b.numel() == k + 1, "sparsefill: sparse_mm_dense: the second operand has ",
              crow_b.numel() - 1, " rows but the first has ", k, " columns");
  auto [ra, ca] = fill_parts(fa, m, k);
  auto [rb, cb] = fill_parts(fb, k, n);
  const bool a_zero = is_zero_constant(ra) && is_zero_constant(ca);
  const bool b_zero = is_zero_constant(rb) && is_zero_constant(cb);
  Tensor rows_a = rows_of(crow_a), rows_b = rows_of(crow_b);
  Tensor va0 = a_zero ? va : shifted_values(va, ra, ca, rows_a, col_a);
  Tensor vb0 = b_zero ? vb : shifted_values(vb, rb, cb, rows_b, col_b);
  // The rank-one terms first, as a column vector, a row vector and outer
  // products: the m x n result is written once by the broadcast sum and
  // updated in place (no temporary of its size), then the SpGEMM's stored
  // products are added at their positions.
  Tensor colvec, rowvec;  // (m), (n); undefined = 0
  std::vector<std::pair<Tensor, Tensor>> outers;
  auto add_to = [](Tensor& acc, const Tensor& t) { acc = acc.defined() ? acc + t : t; };
  if (!a_zero) {
    if (ra.defined()) {
      Tensor colsum_b0 = at::zeros({n}, vb0.options()).index_add(0, col_b, vb0);
      if (ra.dim() == 0) add_to(rowvec, ra * colsum_b0);
      else outers.emplace_back(ra, colsum_b0);
    }
    if (ca.defined()) {
      add_to(rowvec, at::zeros({n}, vb0.options()).index_add(0, col_b, vb0 * ca.index_select(0, rows_b)));
    }
  }
  if (!b_zero) {
    // One SpMM of A with the columns it needs: rb (or ones for a scalar
    // fill, scaled after) and ones for cb.
    std::vector<Tensor> cols;
    if (rb.defined()) cols.push_back(rb.dim() == 0 ? at::ones({k}, va.options()) : rb);
    if (cb.defined()) cols.push_back(at::ones({k}, va.options()));
    Tensor ab = call_spmm(crow_a, col_a, va, fa, at::stack(cols, 1), k);
    int64_t c = 0;
    if (rb.defined()) {
      Tensor col0 = ab.select(1, c++);
      add_to(colvec, rb.dim() == 0 ? col0 * rb : col0);
    }
    if (cb.defined()) outers.emplace_back(ab.select(1, c), cb);
  }
  Tensor out;
  const auto opts = va0.options();
  if (colvec.defined() || rowvec.defined()) {
    Tensor cv = colvec.defined() ? colvec.unsqueeze(1) : at::zeros({m, 1}, opts);
    Tensor rv = rowvec.defined() ? rowvec.unsqueeze(0) : at::zeros({1, n}, opts);
    out = cv + rv;
  } else {
    out = at::zeros({m, n}, opts);
  }
  for (auto& [u, v] : outers) out.addcmul_(u.unsqueeze(1), v.unsqueeze(0));
  auto [crow_c, col_c, vc] = call_spgemm(crow_a, col_a, va0, crow_b, col_b, vb0, n);
  Tensor linear = rows_of(crow_c) * n + col_c;
  out = out.view({m * n}).index_add_(0, linear, vc).view({m, n});
  return out;
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_FRAGMENT(sparsefill, m) {
  m.def("spmm(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor fill, Tensor other, "
        "int ncols) -> Tensor");
  m.def("dense_spmm(Tensor other, Tensor crow_indices, Tensor col_indices, Tensor values, "
        "Tensor fill, int ncols) -> Tensor");
  m.def("sddmm(Tensor crow_indices, Tensor col_indices, int ncols, Tensor x, Tensor y) -> Tensor");
  m.def("csr_transpose(Tensor crow_indices, Tensor col_indices, int ncols) -> "
        "(Tensor crow_indices, Tensor col_indices, Tensor perm)");
  m.def("spgemm(Tensor crow_a, Tensor col_a, Tensor values_a, Tensor crow_b, Tensor col_b, "
        "Tensor values_b, int n) -> (Tensor crow_indices, Tensor col_indices, Tensor values)");
  m.def("sparse_mm_dense(Tensor crow_a, Tensor col_a, Tensor values_a, Tensor fill_a, "
        "Tensor crow_b, Tensor col_b, Tensor values_b, Tensor fill_b, int k, int n) -> Tensor");
}

TORCH_LIBRARY_IMPL(sparsefill, CPU, m) {
  m.impl("spmm", &sparsefill::spmm_cpu);
  m.impl("csr_transpose", &sparsefill::csr_transpose_cpu);
  m.impl("sddmm", &sparsefill::sddmm_cpu);
  m.impl("spgemm", &sparsefill::spgemm_cpu);
}

TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {
  m.impl("spmm", &sparsefill::spmm_autograd);
  m.impl("spgemm", &sparsefill::spgemm_autograd);
}

TORCH_LIBRARY_IMPL(sparsefill, CompositeImplicitAutograd, m) {
  m.impl("dense_spmm", &sparsefill::dense_spmm);
  m.impl("sparse_mm_dense", &sparsefill::sparse_mm_dense);
}
