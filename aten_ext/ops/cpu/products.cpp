// ops/cpu/products.cpp -- the CPU kernels of the matrix products
// (ops/products.h): check the components, split rows into ranges of equal
// work over torch's threads and call the C core (sf_products.c) per range.
#include <torch/library.h>

#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/mv.h>
#include <ATen/ops/zeros.h>

#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "ops/common/dtypes.h"
#include "ops/common/row_ranges.h"
#include "ops/products.h"

namespace sparsefill {
namespace {

void check_float(const Tensor& t, const char* name) {
  check_product_dtype(t, name);
  TORCH_CHECK(t.device().is_cpu(), "sparsefill: ", name, " must be on the CPU, got ", t.device());
}

// Checked CSR components: crow (m + 1), col (nse), values (nse); returns m.
int64_t csr_operand_rows(const Tensor& crow, const Tensor& col, const Tensor& values,
                         const char* what) {
  const int64_t m = csr_operand_shape(crow, col, values, what);
  // index_arg gave a contiguous int64 CPU tensor: its ends read directly.
  const int64_t* ends = crow.const_data_ptr<int64_t>();
  const int64_t first = ends[0], last = ends[m];
  TORCH_CHECK(first == 0, "sparsefill: ", what, " crow_indices[0] must be 0, got ", first);
  TORCH_CHECK(last == col.numel(), "sparsefill: ", what,
              " crow_indices[-1] must equal the number of stored elements (", col.numel(),
              "), got ", last);
  return m;
}

// ---- spmm ----------------------------------------------------------------------

}  // namespace

Tensor spmm_or_spmv_cpu(const Tensor& crow_in, const Tensor& col_in, const Tensor& values_in,
                        const Tensor& fill_in, const Tensor& b_in, int64_t ncols) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  check_float(values_in, "values");
  check_float(fill_in, "fill");
  check_float(b_in, "the dense operand");
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
  const auto ct = compute_type(out_type, "spmm", false);
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
  });
  if (!exact) {
    if (vector) return spmm_nonfinite(crow, col, values, fill, b.unsqueeze(1), ncols).squeeze(1).to(out_type);
    return spmm_nonfinite(crow, col, values, fill, b, ncols).to(out_type);
  }
  return c.to(out_type);
}

namespace {

// C = A @ B for A = (crow, col, values, fill) of ncols columns, B strided 2-D.
Tensor spmm_cpu(const Tensor& crow, const Tensor& col, const Tensor& values, const Tensor& fill,
                const Tensor& b, int64_t ncols) {
  check_spmm_dense(b, ncols);
  return spmm_or_spmv_cpu(crow, col, values, fill, b, ncols);
}

// ---- sddmm, csr_transpose -------------------------------------------------------

// out[p] = dot(X[i_p, :], Y[j_p, :]) on the pattern (crow, col).
Tensor sddmm_cpu(const Tensor& crow_in, const Tensor& col_in, int64_t ncols, const Tensor& x_in,
                 const Tensor& y_in) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  check_float(x_in, "x");
  check_float(y_in, "y");
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

// Fused sparse attention (sparsefill_core.h, sf_csr_attention): per row of
// the pattern and batch member, softmax of scale * Q K^T + bias over the
// stored elements, times V.
std::tuple<Tensor, Tensor> sparse_attention_cpu(const Tensor& crow_in, const Tensor& col_in,
                                                const std::optional<Tensor>& bias_in,
                                                const Tensor& q_in, const Tensor& k_in,
                                                const Tensor& v_in, double scale) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  check_float(q_in, "query");
  check_float(k_in, "key");
  check_float(v_in, "value");
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
  check_float(q_in, "query");
  check_float(k_in, "key");
  check_float(v_in, "value");
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
  check_spgemm_args(values_a, values_b, n);
  const int64_t m = csr_operand_rows(crow_a, col_a, values_a, "spgemm: the first operand's");
  const int64_t k = csr_operand_rows(crow_b, col_b, values_b, "spgemm: the second operand's");
  const auto out_type = values_a.scalar_type();
  const auto ct = compute_type(out_type, "spgemm", false);
  Tensor va = values_a.to(ct).contiguous(), vb = values_b.to(ct).contiguous();
  const int64_t* ca = crow_a.data_ptr<int64_t>();
  const int64_t* cb = crow_b.data_ptr<int64_t>();
  const int64_t* cla = col_a.data_ptr<int64_t>();
  const int64_t* clb = col_b.data_ptr<int64_t>();
  const int64_t nse_a = va.numel(), nse_b = vb.numel();
  // One pass over the products, no symbolic count (it was 30% of the op):
  // each row's bound (its products' count) first, a cheap read of A's
  // columns; then each chunk of rows, cut by that estimated work (not by
  // rows), appends its rows to a buffer of its own, grown when a row's bound
  // does not fit; the buffers are the output, copied into place when there
  // are several. Rows are computed whole, so 1 and 2 threads give the same bits.
  Tensor row_bound = at::empty({m}, crow_a.options());
  int64_t* rb = row_bound.data_ptr<int64_t>();
  // (one thread: O(nse_a) reads, less than a parallel region's start on a busy machine)
  check_status(sf_csr_spgemm_bounds(rb, ca, cla, m, k, nse_a, cb, nse_b, 0, m), "spgemm operands");
  std::vector<int64_t> work(m + 1, 0);
  for (int64_t i = 0; i < m; ++i) {
    TORCH_CHECK(!__builtin_add_overflow(work[i], rb[i], &work[i + 1]),
                "sparsefill: spgemm: the number of products overflows int64");
  }
  const int64_t total = work[m];
  const int64_t threads = at::get_num_threads();
  const int64_t chunks = threads <= 1 || total + m < 32768 || m < 2 ? 1 : std::min(threads, m);
  const std::vector<int64_t> bounds =
      range_bounds([&work](int64_t r) { return work[r]; }, m, chunks);
  Tensor row_nse = at::empty({m}, crow_a.options());
  struct Part {
    Tensor col, val;
    int64_t used = 0;
  };
  std::vector<Part> parts(chunks);
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    auto status = for_chunks(chunks, [&](int64_t c) -> sf_status {
      const int64_t r0 = bounds[c], r1 = bounds[c + 1];
      const int64_t need = work[r1] - work[r0];
      // A first size: the rows' bound, but at most their share of four
      // times the operands' stored elements (a product whose rows collide
      // much has far fewer elements than products; the buffer then grows).
      const double share = total > 0 ? static_cast<double>(need) / total : 0.0;
      int64_t cap = std::min<int64_t>(
          need, std::max<int64_t>(1024, static_cast<int64_t>(4.0 * (nse_a + nse_b) * share)));
      Part& part = parts[c];
      part.col = at::empty({cap}, crow_a.options());
      part.val = at::empty({cap}, va.options());
      std::vector<T> acc(n);
      std::vector<uint64_t> bits((n + 63) / 64);
      for (int64_t next = r0;;) {
        int64_t stop = next;
        const sf_status st = Core<T>::spgemm_rows(
            part.col.template data_ptr<int64_t>(), part.val.template data_ptr<T>(), cap,
            &part.used, row_nse.data_ptr<int64_t>(), &stop, rb, ca, cla, va.data_ptr<T>(), m, k,
            nse_a, cb, clb, vb.data_ptr<T>(), n, nse_b, acc.data(), bits.data(), next, r1);
        if (st != SF_OK || stop == r1) return st;
        cap = std::max(2 * cap, part.used + rb[stop]);
        Tensor col = at::empty({cap}, crow_a.options()), val = at::empty({cap}, va.options());
        std::memcpy(col.data_ptr<int64_t>(), part.col.template data_ptr<int64_t>(),
                    sizeof(int64_t) * part.used);
        std::memcpy(val.data_ptr<T>(), part.val.template data_ptr<T>(), sizeof(T) * part.used);
        part.col = std::move(col);
        part.val = std::move(val);
        next = stop;
      }
    });
    check_chunks(status, "spgemm operands");
  });
  Tensor crow_c = at::zeros({m + 1}, crow_a.options());
  if (m > 0) {
    Tensor tail = crow_c.narrow(0, 1, m);
    at::cumsum_out(tail, row_nse, 0);
  }
  std::vector<int64_t> offset(chunks + 1, 0);
  for (int64_t c = 0; c < chunks; ++c) offset[c + 1] = offset[c] + parts[c].used;
  const int64_t nse_c = offset[chunks];
  Tensor col_c, val_c;
  if (chunks == 1 && 2 * nse_c >= parts[0].col.numel()) {
    // one buffer, at least half used: it is the output (no copy)
    col_c = parts[0].col.narrow(0, 0, nse_c);
    val_c = parts[0].val.narrow(0, 0, nse_c);
  } else {
    col_c = at::empty({nse_c}, crow_a.options());
    val_c = at::empty({nse_c}, va.options());
    const size_t elem = va.element_size();
    auto* col_out = col_c.data_ptr<int64_t>();
    auto* val_out = static_cast<char*>(val_c.data_ptr());
    check_chunks(for_chunks(chunks, [&](int64_t c) {
                   const Part& part = parts[c];
                   std::memcpy(col_out + offset[c], part.col.data_ptr<int64_t>(),
                               sizeof(int64_t) * part.used);
                   std::memcpy(val_out + elem * offset[c], part.val.data_ptr(), elem * part.used);
                   return SF_OK;
                 }),
                 "spgemm operands");
  }
  return {crow_c, col_c, val_c.to(out_type)};
}

}  // namespace

Tensor sddmm_sparse_cpu(const Tensor& crow_p, const Tensor& col_p, int64_t ncols_p,
                        const Tensor& crow_x, const Tensor& col_x, const Tensor& val_x_in,
                        const Tensor& crow_s, const Tensor& col_s, const Tensor& val_s_in,
                        int64_t n) {
  const auto out_type = val_x_in.scalar_type();
  const auto ct = compute_type(out_type, "sddmm_sparse", false);
  Tensor val_x = val_x_in.to(ct).contiguous(), val_s = val_s_in.to(ct).contiguous();
  const int64_t m = crow_p.numel() - 1, nse_p = col_p.numel();
  TORCH_CHECK(crow_x.numel() == m + 1 && crow_s.numel() == ncols_p + 1,
              "sparsefill: sddmm_sparse: operand shapes disagree");
  Tensor out = at::empty({nse_p}, val_x.options());
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    const int64_t* cp = crow_p.data_ptr<int64_t>();
    for_row_ranges(cp, m, 4, "sddmm operands", [&](int64_t r0, int64_t r1) {
      std::vector<T> acc(n);
      return Core<T>::sddmm_sparse(
          out.data_ptr<T>(), cp, col_p.data_ptr<int64_t>(), m, ncols_p, nse_p,
          crow_x.data_ptr<int64_t>(), col_x.data_ptr<int64_t>(), val_x.data_ptr<T>(),
          val_x.numel(), crow_s.data_ptr<int64_t>(), col_s.data_ptr<int64_t>(),
          val_s.data_ptr<T>(), val_s.numel(), n, acc.data(), r0, r1);
    });
  });
  return out.to(out_type);
}

}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, CPU, m) {
  m.impl("spmm", &sparsefill::spmm_cpu);
  m.impl("csr_transpose", &sparsefill::csr_transpose_cpu);
  m.impl("sddmm", &sparsefill::sddmm_cpu);
  m.impl("sparse_attention", &sparsefill::sparse_attention_cpu);
  m.impl("sparse_attention_backward", &sparsefill::sparse_attention_backward_cpu);
  m.impl("spgemm", &sparsefill::spgemm_cpu);
}
