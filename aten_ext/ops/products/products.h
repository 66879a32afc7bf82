// ops/products/products.h -- fill-aware matrix products (RFC.md#products).
// What each op computes is its entry in tools/codegen/native.yaml; its
// kernels are spmm.cpp (spmm, sddmm, csr_transpose), attention.cpp and
// spgemm.cpp (the C core, sf_products.c / sf_attention.c, over row ranges on
// torch's threads; cuSPARSE with our fill correction and our kernels on
// CUDA) and composite.cpp (products composed of the others); fake kernels
// and autograd: torch_sparsefill/ops/products.py. This header holds the
// argument rules those kernels share.
//
// A fill of A (m x k) is one of: a single element (a scalar, shape () or
// (1, 1)), per row (m, 1) or per column (1, k). Nothing of size m x k is
// built, forward or backward.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "ops/common/args.h"
#include "ops/generated/calls.h"  // call::<op>: every op through the dispatcher

namespace sparsefill {

// ---- argument rules that the CPU and CUDA kernels share --------------------

enum class FillKind { Scalar, Row, Col };

// How A's fill varies, checked against A's shape (m x k).
inline FillKind fill_kind(const Tensor& fill, int64_t m, int64_t k) {
  if (fill.dim() <= 2 && fill.numel() == 1) return FillKind::Scalar;
  TORCH_CHECK(fill.dim() == 2,
              "sparsefill: a matrix product needs a scalar, per-row (m, 1) or per-column "
              "(1, k) fill, got a fill of shape ", fill.sizes());
  if (fill.size(0) == m && fill.size(1) == 1) return FillKind::Row;
  if (fill.size(0) == 1 && fill.size(1) == k) return FillKind::Col;
  TORCH_CHECK(false, "sparsefill: a matrix product supports a per-row (", m, ", 1) or per-column (1, ",
              k, ") fill of an ", m, " x ", k, " operand, got a fill of shape ", fill.sizes());
}

// The same decision from the fill's own shape, valid once fill_kind has
// accepted it; safe on symbolic shapes (a backward may be traced).
inline FillKind fill_kind_of(const Tensor& fill) {
  if (fill.dim() <= 2 && fill.sym_numel() == 1) return FillKind::Scalar;
  return fill.sym_size(1) == 1 ? FillKind::Row : FillKind::Col;
}

// Rows of a CSR operand from its crow_indices, specialised if symbolic.
inline int64_t rows_of_crow(const Tensor& crow) {
  return crow.sym_size(0).guard_int(__FILE__, __LINE__) - 1;
}

// The fill of A^T, given A's fill (A is m x k).
inline Tensor transposed_fill(const Tensor& fill) { return fill.dim() == 2 ? fill.t() : fill; }

// sddmm's operands: rows from crow, x (rows x n) and y (ncols x n) of one dtype.
inline void check_sddmm_shapes(const Tensor& crow, int64_t ncols, const Tensor& x_in,
                               const Tensor& y_in) {
  TORCH_CHECK(crow.numel() >= 1, "sparsefill: sddmm: crow_indices must not be empty");
  TORCH_CHECK(x_in.dim() == 2 && y_in.dim() == 2 && x_in.size(0) == crow.numel() - 1 &&
                  y_in.size(0) == ncols && x_in.size(1) == y_in.size(1) &&
                  x_in.scalar_type() == y_in.scalar_type(),
              "sparsefill: sddmm: expected x (rows x n) and y (ncols x n) of one dtype for ",
              crow.numel() - 1, " rows and ", ncols, " columns, got ", x_in.sizes(), " and ",
              y_in.sizes());
}

// sparse_attention's operands: crow (m + 1), col (nse); q (m x e), k (ncols x
// e), v (ncols x dv), or a batch of them sharing the pattern: (nb x m x e),
// (nb x ncols x e), (nb x ncols x dv); bias (nse) shared by the batch, or
// (nb x nse) one per batch member; all of one dtype.
struct AttentionDims {
  int64_t nb, m, ncols, nse, e, dv, bias_stride;
};

inline AttentionDims check_attention_shapes(const Tensor& crow, const Tensor& col,
                                            const std::optional<Tensor>& bias, const Tensor& q,
                                            const Tensor& k, const Tensor& v) {
  TORCH_CHECK(crow.numel() >= 1, "sparsefill: sparse_attention: crow_indices must not be empty");
  const int64_t d = q.dim();
  TORCH_CHECK((d == 2 || d == 3) && k.dim() == d && v.dim() == d &&
                  q.size(-2) == crow.numel() - 1 && k.size(-1) == q.size(-1) &&
                  v.size(-2) == k.size(-2) && (d == 2 || (k.size(0) == q.size(0) &&
                                                          v.size(0) == q.size(0))) &&
                  k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "sparsefill: sparse_attention: expected query (rows x e), key (ncols x e) and "
              "value (ncols x dv), or a batch (b x ...) of each, of one dtype for ",
              crow.numel() - 1, " rows, got ", q.sizes(), ", ", k.sizes(), " and ", v.sizes());
  const int64_t nb = d == 3 ? q.size(0) : 1, nse = col.numel();
  TORCH_CHECK(!bias.has_value() ||
                  ((bias->dim() == 1 || (d == 3 && bias->dim() == 2 && bias->size(0) == nb)) &&
                   bias->size(-1) == nse && bias->scalar_type() == q.scalar_type()),
              "sparsefill: sparse_attention: bias must hold one value of query's dtype per "
              "stored element (", nse, "), or one row of them per batch member, got ",
              bias.has_value() ? bias->sizes() : c10::IntArrayRef{});
  const int64_t bias_stride = bias.has_value() && bias->dim() == 2 ? nse : 0;
  return {nb, crow.numel() - 1, k.size(-2), nse, q.size(-1), v.size(-1), bias_stride};
}

// sparse_attention_backward's extra operands: lse ((nb x) m), grad_out ((nb
// x) m x dv) and grad_lse (as lse) if given, of query's dtype.
inline void check_attention_grads(const AttentionDims& d, const Tensor& q, const Tensor& lse,
                                  const Tensor& g, const std::optional<Tensor>& g_lse) {
  std::vector<int64_t> rows{d.m}, out{d.m, d.dv};
  if (q.dim() == 3) {
    rows.insert(rows.begin(), d.nb);
    out.insert(out.begin(), d.nb);
  }
  const auto st = q.scalar_type();
  TORCH_CHECK(lse.sizes() == c10::IntArrayRef(rows) && lse.scalar_type() == st,
              "sparsefill: sparse_attention_backward: lse must have shape ", c10::IntArrayRef(rows),
              " and query's dtype, got ", lse.sizes(), " ", lse.scalar_type());
  TORCH_CHECK(g.sizes() == c10::IntArrayRef(out) && g.scalar_type() == st,
              "sparsefill: sparse_attention_backward: grad_out must have shape ",
              c10::IntArrayRef(out), " and query's dtype, got ", g.sizes(), " ", g.scalar_type());
  TORCH_CHECK(!g_lse.has_value() ||
                  (g_lse->sizes() == c10::IntArrayRef(rows) && g_lse->scalar_type() == st),
              "sparsefill: sparse_attention_backward: grad_lse must have lse's shape ",
              c10::IntArrayRef(rows), " and query's dtype");
}

// What the CPU and CUDA kernels of sparse_attention_backward share before
// their passes: the operands in the compute type `ct`, contiguous (bias and
// grad_lse undefined when absent), and the outputs allocated: dq, dk, dv like
// q, k, v; ds, the stored scores' gradients, and w, their weights, (nb x) nse.
struct AttentionBackwardArgs {
  Tensor q, k, v, lse, g, bias, g_lse;
  Tensor dq, dk, dv, ds, w;
};

inline AttentionBackwardArgs prepare_attention_backward(
    const AttentionDims& d, at::ScalarType ct, const Tensor& q, const Tensor& k, const Tensor& v,
    const Tensor& lse, const Tensor& g, const std::optional<Tensor>& bias,
    const std::optional<Tensor>& g_lse) {
  auto prep = [&](const Tensor& t) { return t.to(ct).contiguous(); };
  AttentionBackwardArgs a;
  a.q = prep(q), a.k = prep(k), a.v = prep(v), a.lse = prep(lse), a.g = prep(g);
  if (bias.has_value()) a.bias = prep(*bias);
  if (g_lse.has_value()) a.g_lse = prep(*g_lse);
  a.dq = at::empty_like(a.q), a.dk = at::empty_like(a.k), a.dv = at::empty_like(a.v);
  a.ds = at::empty(q.dim() == 3 ? std::vector<int64_t>{d.nb, d.nse} : std::vector<int64_t>{d.nse},
                   a.q.options());
  a.w = at::empty_like(a.ds);
  return a;
}

// The row stride to give a kernel for a row-major dense operand B (unit
// column stride, checked by the caller). torch leaves the stride of a size-1
// dim arbitrary (even 0, or below n after .contiguous()); with one row, any
// stride >= n reads the same elements.
inline int64_t dense_row_stride(const Tensor& b) {
  return b.size(0) <= 1 ? std::max<int64_t>(b.size(1), 1) : b.stride(0);
}

// The dtypes of matrix products' floating operands (the device is each
// kernel's own rule).
inline void check_product_dtype(const Tensor& t, const char* name) {
  const auto st = t.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kDouble || st == at::kHalf || st == at::kBFloat16,
              "sparsefill: matrix products support float32, float64, float16 and bfloat16, got ",
              name, " of dtype ", st);
}

// spmm's dtype rule: values, fill and the dense operand share one.
inline void check_spmm_dtypes(const Tensor& values, const Tensor& fill, const Tensor& b) {
  TORCH_CHECK(values.scalar_type() == b.scalar_type() &&
                  values.scalar_type() == fill.scalar_type(),
              "sparsefill: spmm: expected values, fill and the dense operand to have the same "
              "dtype, got ", values.scalar_type(), ", ", fill.scalar_type(), " and ",
              b.scalar_type());
}

// spmm's shape rule for the dense operand: ncols rows.
inline void check_spmm_dense(const Tensor& b, int64_t ncols) {
  TORCH_CHECK(ncols >= 0, "sparsefill: spmm: ncols must be non-negative, got ", ncols);
  TORCH_CHECK(b.dim() == 2 && b.size(0) == ncols,
              "sparsefill: spmm: the dense operand must be 2-D with ", ncols,
              " rows (the sparse operand's columns), got shape ", b.sizes());
}

// spgemm's rules that read no data, after the operands' device checks.
inline void check_spgemm_args(const Tensor& values_a, const Tensor& values_b, int64_t n) {
  TORCH_CHECK(values_a.scalar_type() == values_b.scalar_type(),
              "sparsefill: spgemm: expected both operands to have the same dtype, got ",
              values_a.scalar_type(), " and ", values_b.scalar_type());
  TORCH_CHECK(n >= 0, "sparsefill: spgemm: n must be non-negative, got ", n);
}

// A CSR operand's rules that read no index data: crow (m + 1), col (nse),
// values (nse, 1-D); returns m. Each kernel then checks crow's ends where
// the data lives.
inline int64_t csr_operand_shape(const Tensor& crow, const Tensor& col, const Tensor& values,
                                 const char* what) {
  TORCH_CHECK(crow.numel() >= 1, "sparsefill: ", what, " crow_indices must not be empty");
  TORCH_CHECK(values.dim() == 1, "sparsefill: ", what,
              " must have 1-D values (hybrid operands are not supported by matrix products), "
              "got values of shape ", values.sizes());
  TORCH_CHECK(col.numel() == values.numel(), "sparsefill: ", what, " has ", col.numel(),
              " column indices but ", values.numel(), " values");
  return crow.numel() - 1;
}

// ---- the non-finite path (composite.cpp) ----------------------------

// Whether spmm's fast path, sum over stored (v - f) B[j] + f 1^T B, is exact
// for A's values and fill and the dense B (k x n), all in the compute
// dtype: every intermediate (v - f, the correction f 1^T B or B^T c, the
// partial sums) is at most k max|B| (max|v| + 2 max|f|) in magnitude, and
// that bound must be finite and below a quarter of the dtype's largest
// value. Otherwise `values - fill` or the correction could overflow or hold
// inf - inf where the dense sum is finite (docs/design.md#range-check). The rule's
// one home, given the three maxima in the compute dtype T (NaN where an
// operand holds a NaN), evaluated in T as the bound's tensor form was.
template <class T>
bool fast_path_bound_ok(T max_b, int64_t k, T max_v, T max_f) {
  const T bound = (max_b * static_cast<T>(k)) * (max_v + T(2) * max_f);
  return bound < std::numeric_limits<T>::max() / 4;  // false for NaN and inf
}

// The rule for operands on any device, maxima by ATen (one host sync): the
// CUDA kernels' test; the CPU kernel reads the maxima in its own passes.
bool spmm_fast_path_exact(const Tensor& values, const Tensor& fill, const Tensor& b);

// A @ B for a CSR A with any fill and a strided B holding anything (inf,
// -inf, nan anywhere), without inf - inf: the stored terms as the dense sum
// has them, and the unspecified terms of each output element from counts of
// the classes of their products (RFC.md#products). O(nse n + k n + m n);
// every device (ATen). Called by the spmm kernels below autograd.
Tensor spmm_nonfinite(const Tensor& crow, const Tensor& col, const Tensor& values,
                      const Tensor& fill, const Tensor& b, int64_t ncols);

// The cancellation rule (docs/design.md#cancellation): both spmm paths
// subtract the fill's products over a row's stored positions from their sum
// over the whole column, so a row whose stored positions hold most of that
// sum keeps only the rounding of the sum. With S the stored part and U the
// unspecified part of sum_j |f_j B[j, t]|, the result's rounding stays within
// (2 K + 1) units of the dense sum's own scale (at least U) while S <= K U.
// S is at most nse_i max_j |f_j B[j, t]|, so row i is safe while
// nse_i (K + 1) <= K spread, spread = min_t sum_j / max_j (sf_dense_spread).
// K = 4: at most 9 units, and a row of a 1% matrix is never near the limit.
constexpr double kCancellationMargin = 4.0;
inline double cancellation_limit(double spread) {
  return spread * kCancellationMargin / (kCancellationMargin + 1.0);
}

// Rows of C = A @ B beyond cancellation_limit whose fill is not zero, as an
// int64 index tensor on crow's device (ATen, any device: the CUDA kernel's
// test; the CPU kernel reads the spread in one C pass, sf_dense_spread).
Tensor cancelling_rows(const Tensor& crow, const Tensor& fill, const Tensor& b, int64_t ncols);

// C[rows] = A[rows] @ B with the rows of A materialised (fill and stored
// values, k each): the dense sum itself, for the rows cancelling_rows names.
// b: k x n, or k for a vector (C then 1-D). Returns C, updated in place.
Tensor recompute_rows(Tensor c, const Tensor& rows, const Tensor& crow, const Tensor& col,
                      const Tensor& values, const Tensor& fill, const Tensor& b, int64_t ncols);

// ---- C++ API of the CPU kernels that are not ops ---------------------------

// A @ b for a CSR A (crow, col, values, fill; ncols columns) and a strided b
// with ncols rows: 2-D (spmm's CPU kernel, which calls this) or 1-D (a
// vector; the result is 1-D, as mv's). CPU tensors only: the hot path's
// A @ x and A @ B (hot/module.cpp), with no reshape around the op.
Tensor spmm_or_spmv_cpu(const Tensor& crow, const Tensor& col, const Tensor& values,
                        const Tensor& fill, const Tensor& b, int64_t ncols);

// out[p] = sum_t X[i, t] S[j, t] for the element p at (i, j) of the pattern
// P (crow_p, col_p; ncols_p columns), with X and S CSR of n columns. CPU
// tensors only: spgemm's backward on the CPU (spgemm.cpp).
Tensor sddmm_sparse_cpu(const Tensor& crow_p, const Tensor& col_p, int64_t ncols_p,
                        const Tensor& crow_x, const Tensor& col_x, const Tensor& val_x,
                        const Tensor& crow_s, const Tensor& col_s, const Tensor& val_s,
                        int64_t n);

// ---- the CPU kernels' operand rules (spmm.cpp, attention.cpp, spgemm.cpp) ------

// A product's float operand on the CPU.
inline void check_cpu_float(const Tensor& t, const char* name) {
  check_product_dtype(t, name);
  TORCH_CHECK(t.device().is_cpu(), "sparsefill: ", name, " must be on the CPU, got ", t.device());
}

// Checked CSR components on the CPU: crow (m + 1), col (nse), values (nse);
// returns m.
inline int64_t csr_operand_rows(const Tensor& crow, const Tensor& col, const Tensor& values,
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

}  // namespace sparsefill
