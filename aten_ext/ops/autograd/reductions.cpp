// ops/autograd/reductions.cpp -- the backward formulas of the segment ops
// (ops/reductions.h), to values and fill. The forward calls the op below
// autograd; the backward calls ops through the dispatcher and ATen, so it
// serves every device.
#include <torch/library.h>
#include <torch/csrc/autograd/custom_function.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/repeat_interleave.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include "ops/common/grad.h"
#include "ops/reductions.h"
#include "ops/structure.h"

namespace sparsefill {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Row of segment of each stored row: [nse]. On the CPU the structural op
// (seg_ptr is a CSR row pointer); other devices take ATen's
// repeat_interleave, sized up front (no synchronisation).
Tensor row_segments(const Tensor& seg_ptr, int64_t nse) {
  if (!seg_ptr.device().is_cpu()) {
    const int64_t nseg = seg_ptr.numel() - 1;
    Tensor p = seg_ptr.to(at::kLong);
    Tensor counts = p.narrow(0, 1, nseg) - p.narrow(0, 0, nseg);
    return at::repeat_interleave(at::arange(nseg, p.options()), counts, 0, nse);
  }
  return call::rows_from_crow(seg_ptr);
}

Tensor unspecified_counts(const Tensor& seg_ptr, int64_t n) {
  const int64_t nseg = seg_ptr.numel() - 1;
  return n - (seg_ptr.narrow(0, 1, nseg) - seg_ptr.narrow(0, 0, nseg));
}

// The fill's gradient in the fill's own row count (one shared row sums).
Tensor fill_grad_rows(const Tensor& g, const Tensor& fill) {
  return fill.size(0) == 1 && g.size(0) != 1 ? g.sum(0, true) : g;
}

// ---- sum / prod -----------------------------------------------------------------

// sum: each stored row gets its slice's gradient; the fill row gets it u times.
// prod: d/dv_k = prod of the other elements (zeros handled by counting them);
// d/dfill = u fill^(u-1) prod(stored).
class SegReduceFunction : public torch::autograd::Function<SegReduceFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& values, const Tensor& fill,
                        const Tensor& seg_ptr, int64_t n, c10::string_view reduce) {
    at::AutoDispatchBelowADInplaceOrView guard;
    Tensor out = call::seg_reduce(values, fill, seg_ptr, n, reduce);
    ctx->save_for_backward({values, fill, seg_ptr, out});
    ctx->saved_data["n"] = n;
    ctx->saved_data["prod"] = reduce == "prod";
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    const Tensor &values = s[0], &fill = s[1], &seg_ptr = s[2], &out = s[3];
    const int64_t n = ctx->saved_data["n"].toInt();
    const Tensor& g = grads[0];
    if (!g.defined()) return {Tensor(), Tensor(), Tensor(), Tensor(), Tensor()};
    Tensor rows = row_segments(seg_ptr, values.size(0));
    Tensor u = unspecified_counts(seg_ptr, n).unsqueeze(1).to(g.scalar_type());
    Tensor f = fill.expand({out.size(0), fill.size(1)});
    if (!ctx->saved_data["prod"].toBool()) {
      return {g.index_select(0, rows), fill_grad_rows(g * u, fill), Tensor(), Tensor(), Tensor()};
    }
    // prod of the stored values with zeros set aside, and how many zeros
    Tensor zero = values == 0;
    Tensor ones_fill = at::ones({1, values.size(1)}, values.options());
    Tensor nonzero_prod = call::seg_reduce(at::where(zero, at::ones_like(values), values), ones_fill,
                                          seg_ptr, n, "prod");
    Tensor zeros = call::seg_reduce(zero.to(at::kLong), at::zeros({1, values.size(1)},
                                   values.options().dtype(at::kLong)), seg_ptr, n, "sum");
    Tensor stored_prod = at::where(zeros > 0, at::zeros_like(nonzero_prod), nonzero_prod);
    Tensor fill_pow = at::where(u > 0, at::pow(f, u), at::ones_like(f));  // fill^u
    Tensor zr = zeros.index_select(0, rows);
    Tensor others = at::where(zero, at::where(zr == 1, nonzero_prod.index_select(0, rows),
                                              at::zeros_like(values)),
                              at::where(zr == 0, nonzero_prod.index_select(0, rows) / values,
                                        at::zeros_like(values)));
    Tensor g_values = g.index_select(0, rows) * fill_pow.index_select(0, rows) * others;
    Tensor g_fill = at::where(u > 0, g * u * at::pow(f, u - 1) * stored_prod, at::zeros_like(g));
    return {g_values, fill_grad_rows(g_fill, fill), Tensor(), Tensor(), Tensor()};
  }
};

Tensor seg_reduce_autograd(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr,
                           int64_t n, c10::string_view reduce) {
  return SegReduceFunction::apply(values, fill, seg_ptr, n, reduce);
}

// ---- max / min ----------------------------------------------------------------

// split_ties (amax, amin, max/min of everything): the gradient is shared
// evenly by every element equal to the result, unspecified ones included, as
// torch does. Otherwise (max/min along a dim) it goes to the one element the
// returned index names.
class SegMaxFunction : public torch::autograd::Function<SegMaxFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& values, const Tensor& fill,
                               const Tensor& seg_ptr, const std::optional<Tensor>& coord,
                               int64_t n, bool is_min, bool split_ties) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, winner, index] = call::seg_max(values, fill, seg_ptr, coord, n, is_min, split_ties);
    ctx->save_for_backward({values, fill, seg_ptr, out, winner});
    ctx->saved_data["n"] = n;
    ctx->saved_data["split_ties"] = split_ties;
    ctx->mark_non_differentiable({winner, index});
    return {out, winner, index};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    const Tensor &values = s[0], &fill = s[1], &seg_ptr = s[2], &out = s[3], &winner = s[4];
    const int64_t n = ctx->saved_data["n"].toInt();
    const Tensor& g = grads[0];
    const variable_list none = {Tensor(), Tensor(), Tensor(), Tensor(), Tensor(), Tensor(),
                                Tensor()};
    if (!g.defined()) return none;
    Tensor rows = row_segments(seg_ptr, values.size(0));
    Tensor u = unspecified_counts(seg_ptr, n).unsqueeze(1);
    Tensor f = fill.expand({out.size(0), fill.size(1)});
    Tensor g_values, g_fill;
    if (ctx->saved_data["split_ties"].toBool()) {
      auto equal = [](const Tensor& x, const Tensor& y) {
        return at::logical_or(x == y, at::logical_and(at::isnan(x), at::isnan(y)));
      };
      Tensor tie_v = equal(values, out.index_select(0, rows));
      Tensor tie_f = at::logical_and(equal(f, out), u > 0);
      Tensor count = at::zeros_like(out).index_add(0, rows, tie_v.to(out.scalar_type())) +
                     tie_f.to(out.scalar_type()) * u.to(out.scalar_type());
      Tensor share = g / count;
      g_values = at::where(tie_v, share.index_select(0, rows), at::zeros_like(values));
      g_fill = at::where(tie_f, share * u.to(g.scalar_type()), at::zeros_like(g));
    } else {
      Tensor from_fill = winner < 0;
      g_fill = at::where(from_fill, g, at::zeros_like(g));
      // scatter g to the winning stored row of each (segment, column); with
      // nothing stored the fill won everywhere (and row 0 does not exist).
      g_values = at::zeros_like(values);
      if (values.size(0) > 0) {
        g_values = g_values.scatter_add(0, winner.clamp_min(0),
                                        at::where(from_fill, at::zeros_like(g), g));
      }
    }
    return {g_values, fill_grad_rows(g_fill, fill), Tensor(), Tensor(), Tensor(), Tensor(),
            Tensor()};
  }
};

std::tuple<Tensor, Tensor, Tensor> seg_max_autograd(const Tensor& values, const Tensor& fill,
                                                    const Tensor& seg_ptr,
                                                    const std::optional<Tensor>& coord, int64_t n,
                                                    bool is_min, bool split_ties) {
  auto out = SegMaxFunction::apply(values, fill, seg_ptr, coord, n, is_min, split_ties);
  return {out[0], out[1], out[2]};
}

// ---- softmax / log_softmax ------------------------------------------------------

// Softmax backward from differentiable ops (segment sums and gathers), used
// when a graph of the backward is being recorded (double backward). Softmax:
// dot = sum over the slice of g*y, g_x = y (g - dot), and the fill (standing
// for u elements, g_fill their summed gradient) gets y_f (g_fill - u dot).
// log_softmax: S = sum of g, g_x = g - exp(y) S, fill: g_fill - u exp(y_f) S.
std::tuple<Tensor, Tensor> seg_softmax_backward_composite(const Tensor& out,
                                                          const Tensor& out_fill,
                                                          const Tensor& g, const Tensor& g_fill,
                                                          const Tensor& seg_ptr, int64_t n,
                                                          bool log) {
  Tensor rows = row_segments(seg_ptr, out.size(0));
  Tensor u = unspecified_counts(seg_ptr, n).unsqueeze(1).to(g.scalar_type());
  Tensor has = u > 0;
  Tensor per = at::where(has, u, at::ones_like(u));  // the fill row stands for u elements
  Tensor elem = log ? g : g * out;
  Tensor fill_elem = at::where(has, (log ? g_fill : g_fill * out_fill) / per,
                               at::zeros_like(g_fill));
  Tensor acc = call::seg_reduce(elem, fill_elem, seg_ptr, n, "sum");
  Tensor acc_rows = acc.index_select(0, rows);
  Tensor gv = log ? g - at::exp(out) * acc_rows : out * (g - acc_rows);
  Tensor gf = log ? g_fill - u * at::exp(out_fill) * acc : out_fill * (g_fill - u * acc);
  return {gv, at::where(has, gf, at::zeros_like(gf))};
}

// The backward runs in the C core; when a graph of it is wanted
// (create_graph, double backward) the composite above runs instead.
class SegSoftmaxFunction : public torch::autograd::Function<SegSoftmaxFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& values, const Tensor& fill,
                               const Tensor& seg_ptr, int64_t n, bool log) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [out, out_fill] = call::seg_softmax(values, fill, seg_ptr, n, log);
    ctx->save_for_backward({fill, seg_ptr, out, out_fill});
    ctx->saved_data["n"] = n;
    ctx->saved_data["log"] = log;
    return {out, out_fill};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    const Tensor &fill = s[0], &seg_ptr = s[1], &out = s[2], &out_fill = s[3];
    Tensor g = defined_or_zeros(grads[0], out), g_fill = defined_or_zeros(grads[1], out_fill);
    const int64_t n = ctx->saved_data["n"].toInt();
    const bool log = ctx->saved_data["log"].toBool();
    if (at::GradMode::is_enabled()) {
      auto [gv, gf] = seg_softmax_backward_composite(out, out_fill, g, g_fill, seg_ptr, n, log);
      return {gv, fill_grad_rows(gf, fill), Tensor(), Tensor(), Tensor()};
    }
    auto [gv, gf] = call::seg_softmax_backward(out, out_fill, g, g_fill, seg_ptr, n, log);
    return {gv, fill_grad_rows(gf, fill), Tensor(), Tensor(), Tensor()};
  }
};

std::tuple<Tensor, Tensor> seg_softmax_autograd(const Tensor& values, const Tensor& fill,
                                                const Tensor& seg_ptr, int64_t n, bool log) {
  auto out = SegSoftmaxFunction::apply(values, fill, seg_ptr, n, log);
  return {out[0], out[1]};
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {
  m.impl("seg_reduce", &sparsefill::seg_reduce_autograd);
  m.impl("seg_max", &sparsefill::seg_max_autograd);
  m.impl("seg_softmax", &sparsefill::seg_softmax_autograd);
}
