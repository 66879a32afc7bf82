// ops/products/composite.cpp -- the products composed of others
// (ops/products.h), written once over ATen and the dispatcher for every
// device, registered at CompositeImplicitAutograd: their gradients come from
// their parts (spmm, spgemm and ATen).
#include <torch/library.h>

#include <ATen/Dispatch.h>

#include <ATen/TensorIndexing.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/any.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/bincount.h>
#include <ATen/ops/ceil.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/exp2.h>
#include <ATen/ops/full.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/index_put.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/log2.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/mv.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "ops/generated/kernels.h"
#include "ops/common/tracking.h"
#include "ops/products/products.h"
#include "ops/structure/structure.h"

namespace sparsefill {
namespace {

// max |x| as a 0-d tensor of x's dtype: 0 for an empty x, NaN if x holds one.
// (abs then amax: ATen's inf-norm reduction is far slower on the CPU.)
Tensor max_abs(const Tensor& x) {
  return x.numel() ? x.abs().amax() : at::zeros({}, x.options());
}

// Whether a bound on a path's intermediates (a 0-d tensor) stays below a
// quarter of its dtype's largest finite value: the quarter absorbs the
// rounding of the bound itself. False for an infinite or NaN bound.
double largest_finite(at::ScalarType t) {
  double largest = 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "largest_finite", [&] {
    largest = static_cast<double>(std::numeric_limits<scalar_t>::max());
  });
  return largest;
}

bool within_range(const Tensor& bound) {
  return (bound < largest_finite(bound.scalar_type()) / 4).item<bool>();
}

}  // namespace

// D @ A = (A^T D^T)^T for a strided D (p x m) and A (m x k): the fill-aware
// SpMM on A's transposed pattern; autograd comes from its parts.
Tensor dense_spmm_composite(const Tensor& d, const Tensor& crow, const Tensor& col,
                            const Tensor& values, const Tensor& fill, int64_t ncols) {
  TORCH_CHECK(d.dim() == 2, "sparsefill: dense_spmm: the dense operand must be 2-D, got shape ",
              d.sizes());
  auto [crow_t, col_t, perm] = call::csr_transpose(crow, col, ncols);
  return call::spmm(crow_t, col_t, values.index_select(0, perm), transposed_fill(fill),
                   d.t().contiguous(), rows_of_crow(crow))
      .t()
      .contiguous();
}

namespace {

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

// Whether the rank-one form below may lose the result to cancellation
// (docs/design.md#cancellation): it subtracts fill terms at stored positions
// (A0 = A - Fa, B0 = B - Fb) and adds them back in its rank-one terms. From
// maxima only (one host sync): the terms that cancel are at most
//   mass = |fa| c_b (Vb + |fb|) + |fb| (r_a Va + k |fa|) + (Va + |fa|)(Vb + |fb|) min(r_a, c_b)
// (r_a: the most stored elements of a row of A, c_b: of a column of B;
// V: max |values|, |f|: max |fill|), and each element's dense scale
// sum_j |A_ij B_jt| is at least min|fa| min|fb| (k - r_a - c_b), the fill
// products over positions neither stores. The form is kept while mass stays
// within kCancellationMargin times that floor (products.h);
// otherwise B is read as strided and spmm's rows take their own rule.
bool composite_may_cancel(const Tensor& crow_a, const Tensor& va, const Tensor& fa,
                          const Tensor& col_b, const Tensor& vb, const Tensor& fb, int64_t k,
                          int64_t n) {
  auto dbl = [](const Tensor& t) { return t.to(at::kDouble); };
  Tensor crow64 = crow_a.to(at::kLong);
  Tensor r_a = crow64.numel() > 1 ? dbl((crow64.slice(0, 1) - crow64.slice(0, 0, -1)).amax())
                                  : at::zeros({}, crow64.options().dtype(at::kDouble));
  Tensor c_b = col_b.numel() ? dbl(at::bincount(col_b.to(at::kLong), {}, n).amax())
                             : at::zeros({}, r_a.options());
  Tensor va_max = dbl(max_abs(va)), vb_max = dbl(max_abs(vb));
  Tensor fa_max = dbl(max_abs(fa)), fb_max = dbl(max_abs(fb));
  // (an empty fill, of an operand with no row or no column, covers nothing)
  auto min_abs = [&](const Tensor& f) {
    return f.numel() ? dbl(f.abs().amin()) : at::zeros({}, r_a.options());
  };
  Tensor fa_min = min_abs(fa), fb_min = min_abs(fb);
  Tensor ua = va_max + fa_max, ub = vb_max + fb_max;
  Tensor mass = fa_max * c_b * ub + fb_max * (r_a * va_max + static_cast<double>(k) * fa_max) +
                ua * ub * at::minimum(r_a, c_b);
  Tensor floor = fa_min * fb_min * (static_cast<double>(k) - r_a - c_b);
  return (mass > floor * kCancellationMargin).item<bool>();
}

}  // namespace

// A (m x k, fill Fa) @ B (k x n, fill Fb), Fa = ra 1^T + 1 ca^T, Fb likewise,
// A0 = A - Fa and B0 = B - Fb on their patterns (fill 0):
//   A @ B = A @ B0 + A @ Fb
//         = A0 @ B0 + Fa @ B0 + (A rb) 1_n^T + (A 1_k) cb^T
//   Fa @ B0 = ra (1^T B0) + 1_m (ca^T B0)
// The first term is the fill-0 SpGEMM, the others are rank-one: column sums
// of B0 and one SpMM of A with at most two columns. With scalar fills this
// is A0 B0 + a 1 (1^T B0) + b (A 1) 1^T, i.e. RFC.md's
// A0 B0 + b (A0 1) 1^T + a 1 (1^T B0) + a b K 1 1^T (A 1 = A0 1 + a K 1).
Tensor sparse_mm_dense_composite(const Tensor& crow_a, const Tensor& col_a, const Tensor& va,
                                 const Tensor& fa, const Tensor& crow_b, const Tensor& col_b,
                                 const Tensor& vb, const Tensor& fb, int64_t k, int64_t n) {
  // Sizes as SymInts: under a tracer they are symbolic.
  TORCH_CHECK(crow_a.dim() == 1 && crow_b.dim() == 1 && crow_b.sym_size(0) == k + 1,
              "sparsefill: sparse_mm_dense: the second operand has ", crow_b.sym_size(0) - 1,
              " rows but the first has ", k, " columns");
  // Every intermediate below (va - fa, vb - fb, the SpGEMM's sums, the
  // rank-one terms) is at most k (max|va| + 2 max|fa|) (max|vb| + 2 max|fb| + 1)
  // in magnitude (the 1: spmm of A with a column of ones). One host sync;
  // none where the data cannot be read (a tracer, a torch.func transform:
  // the exact path, whatever the data).
  // A @ B with B dense (k x n, the result's order of size), through spmm,
  // which chooses its own exact path. (B's row indices sized by col_b, so
  // that a traced nse stays one symbol.)
  auto with_strided_b = [&]() {
    Tensor b_dense = fb.expand({k, n}).clone();
    Tensor crow_b64 = crow_b.to(at::kLong);
    Tensor rows_b = at::repeat_interleave_symint(crow_b64.slice(0, 1) - crow_b64.slice(0, 0, -1),
                                                 std::optional<c10::SymInt>(col_b.sym_size(0)));
    b_dense.index_put_({rows_b, col_b.to(at::kLong)}, vb);
    return call::spmm(crow_a, col_a, va, fa, b_dense, k);
  };
  // Non-finite, or large enough to overflow: shifting values by a fill (or a
  // correction over B0) could compute inf - inf where the dense sum is finite.
  if (reads_no_data(va) || reads_no_data(vb) || reads_no_data(fa) || reads_no_data(fb) ||
      !within_range((max_abs(va) + 2 * max_abs(fa)) * static_cast<double>(k) *
                    (max_abs(vb) + 2 * max_abs(fb) + 1))) {
    return with_strided_b();
  }
  const int64_t m = crow_a.numel() - 1;
  auto [ra, ca] = fill_parts(fa, m, k);
  auto [rb, cb] = fill_parts(fb, k, n);
  const bool a_zero = is_zero_constant(ra) && is_zero_constant(ca);
  const bool b_zero = is_zero_constant(rb) && is_zero_constant(cb);
  if (!(a_zero && b_zero) && composite_may_cancel(crow_a, va, fa, col_b, vb, fb, k, n)) {
    return with_strided_b();
  }
  Tensor rows_a = call::rows_from_crow(crow_a), rows_b = call::rows_from_crow(crow_b);
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
    Tensor ab = call::spmm(crow_a, col_a, va, fa, at::stack(cols, 1), k);
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
  auto [crow_c, col_c, vc] = call::spgemm(crow_a, col_a, va0, crow_b, col_b, vb0, n);
  Tensor linear = call::rows_from_crow(crow_c) * n + col_c;
  out = out.view({m * n}).index_add_(0, linear, vc).view({m, n});
  return out;
}

// ---- non-finite fills and operands -------------------------------------------------

bool spmm_fast_path_exact(const Tensor& values, const Tensor& fill, const Tensor& b) {
  // The three maxima read back together (one host sync), the rule applied
  // in their dtype (ops/products.h).
  Tensor facts = at::stack({max_abs(b), max_abs(values), max_abs(fill)}).cpu();
  bool ok = false;
  AT_DISPATCH_FLOATING_TYPES(facts.scalar_type(), "spmm_fast_path_exact", [&] {
    const scalar_t* f = facts.const_data_ptr<scalar_t>();
    ok = fast_path_bound_ok<scalar_t>(f[0], b.size(0), f[1], f[2]);
  });
  return ok;
}

namespace {

// For a k x n tensor x: per output element (i, t), the sum of x[j, t] over
// the positions j that row i of the pattern leaves unspecified (all rows of
// x minus the stored ones). Counts come as int64, sums in x's dtype.
Tensor over_unspecified(const Tensor& x, const Tensor& rows, const Tensor& col, int64_t m) {
  Tensor total = x.sum(0, /*keepdim=*/true);
  Tensor stored = at::zeros({m, x.size(1)}, total.options()).index_add_(0, rows, x.index_select(0, col));
  return total - stored;
}

Tensor count_over_unspecified(const Tensor& mask, const Tensor& rows, const Tensor& col,
                              int64_t m) {
  return over_unspecified(mask.to(at::kLong), rows, col, m);
}

// over_unspecified of a finite x as (sum, scale): the sums are sum * scale.
// total - stored could leave the dtype's range where the sum over the
// unspecified positions does not (their total is 2 max, their part 1 max),
// so x is first scaled by a power of two, 1/scale, that brings k max|x|
// below 2^(max exponent - 3): exact (up to underflow of values far below
// max|x|), and scale = 1 unless k max|x| needs it. No host sync.
std::pair<Tensor, Tensor> scaled_over_unspecified(const Tensor& x, const Tensor& rows,
                                                  const Tensor& col, int64_t m) {
  const int64_t k = x.size(0);
  if (x.numel() == 0) return {over_unspecified(x, rows, col, m), at::ones({}, x.options())};
  const double headroom = std::floor(std::log2(largest_finite(x.scalar_type()))) - 3;
  Tensor top = at::log2(max_abs(x)) + std::log2(static_cast<double>(k));  // -inf for 0
  Tensor exponent = at::clamp_min(at::ceil(top) - headroom, 0);
  return {over_unspecified(x * at::exp2(-exponent), rows, col, m), at::exp2(exponent)};
}

}  // namespace

// Output element (i, t) is S[i, t] + U[i, t]: S the stored terms (their
// products summed as dense sums them, so inf, -inf and nan there behave as
// in the dense sum), U the unspecified terms f * B[j, t]. U never subtracts:
// from the counts over the unspecified positions of the products' classes
// (+inf, -inf, nan; one count per class, O(nse n + k n)), U is nan if a
// product is nan or +inf and -inf both occur, else +-inf if one occurs, else
// the sum of the finite products (the finite entries' sum times f), summed
// in a scaled form that cannot overflow where the dense sum does not.
Tensor spmm_nonfinite(const Tensor& crow, const Tensor& col, const Tensor& values,
                      const Tensor& fill, const Tensor& b, int64_t ncols) {
  const int64_t m = crow.numel() - 1, n = b.size(1);
  Tensor rows = call::rows_from_crow(crow);
  Tensor col_l = col.to(at::kLong);
  Tensor stored = at::zeros({m, n}, b.options())
                      .index_add_(0, rows, values.unsqueeze(1) * b.index_select(0, col_l));
  const double inf = std::numeric_limits<double>::infinity();
  auto count = [&](const Tensor& mask) { return count_over_unspecified(mask, rows, col_l, m); };
  Tensor finite_sum, has_pinf, has_ninf, has_nan;
  if (fill_kind(fill, m, ncols) != FillKind::Row) {
    // The products f B[j, t] or c_j B[j, t] themselves, k x n: their finite
    // ones summed as the dense sum has them (f times a sum of B's entries
    // could overflow where those products do not).
    Tensor p = fill.reshape({-1, 1}) * b;
    auto [sum, scale] = scaled_over_unspecified(
        at::where(at::isfinite(p), p, at::zeros({}, p.options())), rows, col_l, m);
    finite_sum = sum * scale;
    has_pinf = count(p == inf) > 0;
    has_ninf = count(p == -inf) > 0;
    has_nan = count(at::isnan(p)) > 0;
  } else {
    // f_i B[j, t] from the classes of B's entries and of f_i (the m x k
    // products are never formed; f_i times the finite entries' sum).
    Tensor f = fill.reshape({-1, 1});  // (1, 1) or (m, 1)
    Tensor b_finite = at::isfinite(b);
    auto [sum, scale] = scaled_over_unspecified(
        at::where(b_finite, b, at::zeros({}, b.options())), rows, col_l, m);
    Tensor pos = count((b > 0)) > 0, neg = count((b < 0)) > 0;  // infinities included
    Tensor pinf = count(b == inf) > 0, ninf = count(b == -inf) > 0;
    Tensor zero = count(b == 0) > 0, nan_b = count(at::isnan(b)) > 0;
    Tensor any = at::full({m, 1}, ncols, rows.options()) -
                     at::zeros({m}, rows.options()).index_add_(0, rows, at::ones_like(rows))
                         .unsqueeze(1) > 0;
    Tensor f_pinf = f == inf, f_ninf = f == -inf, f_nan = at::isnan(f);
    Tensor f_finite = at::isfinite(f), f_pos = f_finite & (f > 0), f_neg = f_finite & (f < 0);
    has_pinf = (f_pinf & pos) | (f_ninf & neg) | (f_pos & pinf) | (f_neg & ninf);
    has_ninf = (f_pinf & neg) | (f_ninf & pos) | (f_pos & ninf) | (f_neg & pinf);
    has_nan = nan_b | (f_nan & any) | ((f_pinf | f_ninf) & zero) | ((f == 0) & (pinf | ninf));
    // f_i times the scaled sum first: the sum itself may leave the range
    // where f_i times it does not.
    finite_sum = at::where(f_finite, (f * sum) * scale, at::zeros({}, b.options()));
  }
  Tensor nan_t = at::full({}, std::numeric_limits<double>::quiet_NaN(), b.options());
  Tensor unspecified = at::where(
      has_nan | (has_pinf & has_ninf), nan_t,
      at::where(has_pinf, at::full({}, inf, b.options()),
                at::where(has_ninf, at::full({}, -inf, b.options()), finite_sum)));
  return stored + unspecified;
}

Tensor cancelling_rows(const Tensor& crow, const Tensor& fill, const Tensor& b, int64_t ncols) {
  const int64_t m = crow.numel() - 1;
  Tensor none = at::empty({0}, crow.options().dtype(at::kLong));
  if (m <= 0 || ncols == 0 || b.numel() == 0) return none;
  const FillKind kind = fill_kind(fill, m, ncols);
  // sf_dense_spread's quantities in ATen: the finite |f_j B[j, t]| (or |B|)
  // in double, each column's sum over its maximum, the smallest of those.
  Tensor x = b.reshape({ncols, -1}).to(at::kDouble);
  Tensor p = (kind == FillKind::Col ? fill.reshape({ncols, 1}).to(at::kDouble) * x : x).abs();
  p = at::where(at::isfinite(p), p, at::zeros({}, p.options()));
  Tensor top = p.amax(0);
  Tensor ratio = (p / at::clamp_min(top, std::numeric_limits<double>::min())).sum(0);
  Tensor spread = at::where(top > 0, ratio, std::numeric_limits<double>::infinity()).amin();
  Tensor crow64 = crow.to(at::kLong);
  Tensor nse_row = (crow64.slice(0, 1) - crow64.slice(0, 0, -1)).to(at::kDouble);
  Tensor over = nse_row > spread * cancellation_limit(1.0);  // the rule is linear in spread
  // A zero fill has no correction: nothing cancels.
  if (kind == FillKind::Scalar) over = over & (fill.reshape({}) != 0);
  if (kind == FillKind::Row) over = over & (fill.reshape({m}) != 0);
  return over.nonzero().squeeze(1);
}

Tensor recompute_rows(Tensor c, const Tensor& rows, const Tensor& crow, const Tensor& col,
                      const Tensor& values, const Tensor& fill, const Tensor& b, int64_t ncols) {
  const int64_t m = crow.numel() - 1, r = rows.numel();
  if (r == 0) return c;
  Tensor base;
  switch (fill_kind(fill, m, ncols)) {
    case FillKind::Scalar: base = fill.reshape({1, 1}); break;
    case FillKind::Row: base = fill.reshape({m, 1}).index_select(0, rows); break;
    default: base = fill.reshape({1, ncols});
  }
  // A fresh tensor: expand + contiguous of a (1, k) fill would be the fill
  // itself, and the stored values are written into it.
  Tensor dense = base.to(c.scalar_type()).expand({r, ncols}).clone(at::MemoryFormat::Contiguous);
  // Each stored element of a recomputed row to its place: the row's slot
  // in `rows`, or -1.
  Tensor slot = at::full({m}, -1, rows.options());
  slot.index_put_({rows}, at::arange(r, rows.options()));
  Tensor at_row = slot.index_select(0, call::rows_from_crow(crow));
  Tensor keep = at_row >= 0;
  dense.index_put_({at_row.masked_select(keep), col.to(at::kLong).masked_select(keep)},
                   values.to(c.scalar_type()).masked_select(keep));
  Tensor bb = b.to(c.scalar_type());
  if (c.dim() == 1) return c.index_copy_(0, rows, at::mv(dense, bb));
  return c.index_copy_(0, rows, at::mm(dense, bb));
}

}  // namespace sparsefill
