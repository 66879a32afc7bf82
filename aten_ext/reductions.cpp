// reductions.cpp -- softmax, log_softmax and reductions with a fill (RFC.md 6):
// schemas, CPU kernels over the C core's segments (sf_reduce.c) and their
// autograd. Python (torch_sparsefill/_reductions.py) turns a SparseFillTensor
// and a list of dims into segments: the stored rows of each slice, in slice
// order, plus the slice's fill row and its length n.
//
// Ops (all on component tensors):
//   slice_plan(indices, size, dims, compact)  -> (seg_ptr, perm, kept)
//   seg_sum / seg_prod(values, fill, seg_ptr, n) -> out [nseg, w]
//   seg_max(values, fill, seg_ptr, coord, n, is_min, split_ties) -> (out, winner, index)
//   seg_softmax(values, fill, seg_ptr, n, log) -> (values, fill)
// `values` is [nse, w], `fill` [nseg, w] or [1, w] (one row for every slice).
//
// Dispatch keys: CPU (kernels; segments split across threads with
// at::parallel_for), Autograd (explicit backward to values and fill: never
// ATen's masked sparse formulas, which drop the fill's gradient).
#include "sf_glue.h"

#include <torch/autograd.h>


namespace sparsefill {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---- slice_plan -------------------------------------------------------------

// Segments of a coalesced COO pattern for reducing the sparse dims `dims`.
// compact = false: one segment per slice (every position of the kept dims,
// row-major), so seg_ptr has prod(kept sizes) + 1 entries and `kept` is
// empty. compact = true: segments only for slices that store something;
// `kept` holds their linear index over the kept dims. perm lists the stored
// elements in segment order; it is empty when that is their own order (the
// kept dims lead, as for rows of a matrix).
std::tuple<Tensor, Tensor, Tensor> slice_plan(const Tensor& indices_in, at::IntArrayRef size_in,
                                              at::IntArrayRef dims, bool compact) {
  auto size = sizes_arg(size_in, "size");
  Tensor indices = index_arg(indices_in, "indices", 2);
  const int64_t sd = indices.size(0), nse = indices.size(1);
  TORCH_CHECK(sd == (int64_t)size.size(), "sparsefill: indices has ", sd,
              " rows but size has ", size.size(), " sparse dimensions");
  std::vector<bool> reduced(sd, false);
  for (auto d : dims) {
    TORCH_CHECK(d >= 0 && d < sd && !reduced[d], "sparsefill: dims must be distinct sparse "
                "dimensions in [0, ", sd, "), got ", dims);
    reduced[d] = true;
  }
  std::vector<int64_t> kept_dims, kept_sizes;
  bool leading = true;  // kept dims are 0..k-1: elements already in slice order
  for (int64_t d = 0; d < sd; ++d) {
    if (reduced[d]) continue;
    if (d != (int64_t)kept_dims.size()) leading = false;
    kept_dims.push_back(d);
    kept_sizes.push_back(size[d]);
  }
  auto opts = indices.options();
  int64_t nslices = 1;
  check_status(sf_sizes_numel(&nslices, kept_sizes.data(), (int64_t)kept_sizes.size()), "size");
  if (kept_dims.empty()) {  // everything reduced: one slice, even with no element
    return {at::tensor({(int64_t)0, nse}, opts), at::empty({0}, opts),
            compact ? at::zeros({1}, opts) : at::empty({0}, opts)};
  }
  // Linear index of each element's slice: with one kept dim (rows or columns
  // of a matrix) that is its index row itself, read in place; the sort or
  // the crow builder below range-checks it.
  Tensor lin = at::zeros({nse}, opts);
  if (kept_dims.size() == 1) {
    lin = indices.select(0, kept_dims[0]).contiguous();
  } else if (nse > 0) {
    Tensor kept_idx = indices.index_select(0, at::tensor(kept_dims, opts)).contiguous();
    check_status(sf_coo_linearize(lin.data_ptr<int64_t>(), kept_idx.data_ptr<int64_t>(),
                                  (int64_t)kept_dims.size(), nse, kept_sizes.data()),
                 "indices");
  }
  Tensor seg = lin, kept = at::empty({0}, opts);
  int64_t nseg = nslices;
  if (compact) {
    Tensor unique = at::empty({nse}, opts), segment = at::empty({nse}, opts);
    int64_t nu = 0;
    check_status(sf_coalesce_plan(unique.data_ptr<int64_t>(), segment.data_ptr<int64_t>(), &nu,
                                  lin.data_ptr<int64_t>(), nse),
                 "indices");
    kept = unique.narrow(0, 0, nu).clone();
    seg = segment;
    nseg = nu;
  }
  Tensor seg_ptr = at::empty({nseg + 1}, opts);
  Tensor perm = at::empty({0}, opts);
  if (leading) {
    check_status(sf_crow_from_rows(seg_ptr.data_ptr<int64_t>(), seg.data_ptr<int64_t>(), nse, nseg),
                 "indices (a reduction needs coalesced indices)");
  } else {
    perm = at::empty({nse}, opts);
    check_status(sf_segment_sort(perm.data_ptr<int64_t>(), seg_ptr.data_ptr<int64_t>(),
                                 seg.data_ptr<int64_t>(), nse, nseg),
                 "indices");
  }
  return {seg_ptr, perm, kept};
}

// ---- C core entry points by type (overloads for AT_DISPATCH bodies) ---------------

#define SF_OVERLOAD(NAME, T, SUFFIX)                                              \
  template <typename... Args>                                                     \
  sf_status NAME(T* out, Args... args) { return sf_##NAME##_##SUFFIX(out, args...); }
SF_OVERLOAD(seg_sum, double, f64)
SF_OVERLOAD(seg_sum, float, f32)
SF_OVERLOAD(seg_prod, double, f64)
SF_OVERLOAD(seg_prod, float, f32)
SF_OVERLOAD(seg_max, double, f64)
SF_OVERLOAD(seg_max, float, f32)
SF_OVERLOAD(seg_softmax, double, f64)
SF_OVERLOAD(seg_softmax, float, f32)
SF_OVERLOAD(seg_softmax_backward, double, f64)
SF_OVERLOAD(seg_softmax_backward, float, f32)
#undef SF_OVERLOAD

// ---- shared argument checks ----------------------------------------------------

Segs seg_args(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr_in, int64_t n,
              const char* op) {
  Segs a = seg_shape_args(values, fill, seg_ptr_in, n, op, c10::DeviceType::CPU);
  const int64_t* p = a.seg_ptr.data_ptr<int64_t>();
  check_seg_ends(p[0], p[a.nseg], a, op);
  return a;
}

// Row of segment of each stored row: [nse]. Backward formulas call it on
// every device: the C core reads CPU memory only, so other devices take
// ATen's repeat_interleave, sized up front (no synchronisation).
Tensor row_segments(const Tensor& seg_ptr, int64_t nse) {
  if (!seg_ptr.device().is_cpu()) {
    const int64_t nseg = seg_ptr.numel() - 1;
    Tensor p = seg_ptr.to(at::kLong);
    Tensor counts = p.narrow(0, 1, nseg) - p.narrow(0, 0, nseg);
    return at::repeat_interleave(at::arange(nseg, p.options()), counts, 0, nse);
  }
  Tensor rows = at::empty({nse}, seg_ptr.options());
  check_status(sf_csr_rows_from_crow(rows.data_ptr<int64_t>(), seg_ptr.data_ptr<int64_t>(),
                                     seg_ptr.numel() - 1),
               "seg_ptr");
  return rows;
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

Tensor seg_reduce_kernel(const Tensor& values_in, const Tensor& fill_in, const Tensor& seg_ptr_in,
                         int64_t n, c10::string_view reduce) {
  const bool is_sum = reduce == "sum";
  TORCH_CHECK(is_sum || reduce == "prod", "sparsefill: seg_reduce: reduce must be 'sum' or "
              "'prod', got '", std::string(reduce), "'");
  const auto in_type = values_in.scalar_type();
  const auto ct = compute_type(in_type, is_sum ? "sum" : "prod", is_sum);
  Segs a = seg_args(values_in.to(ct), fill_in.to(ct), seg_ptr_in, n, "seg_reduce");
  Tensor out = at::empty({a.nseg, a.w}, a.values.options());
  const int64_t* sp = a.seg_ptr.data_ptr<int64_t>();
  if (ct == at::kLong) {
    for_row_ranges(a.seg_ptr.data_ptr<int64_t>(), a.nseg, a.w, "segments", [&](int64_t b, int64_t e) {
      return sf_seg_sum_i64(out.data_ptr<int64_t>(), a.values.data_ptr<int64_t>(),
                            a.fill.data_ptr<int64_t>(), a.fill_stride, sp, b, e, a.w, n);
    });
    return out;
  }
  AT_DISPATCH_FLOATING_TYPES(ct, "seg_reduce", [&] {
    for_row_ranges(a.seg_ptr.data_ptr<int64_t>(), a.nseg, a.w, "segments", [&](int64_t b, int64_t e) {
      scalar_t* o = out.data_ptr<scalar_t>();
      const scalar_t* v = a.values.data_ptr<scalar_t>();
      const scalar_t* f = a.fill.data_ptr<scalar_t>();
      return is_sum ? seg_sum(o, v, f, a.fill_stride, sp, b, e, a.w, n)
                    : seg_prod(o, v, f, a.fill_stride, sp, b, e, a.w, n);
    });
  });
  // Floating inputs keep their dtype (half sums in float, rounds back).
  return at::isFloatingType(in_type) ? out.to(in_type) : out;
}

Tensor seg_reduce_call(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr, int64_t n,
                       c10::string_view reduce) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::seg_reduce", "")
                       .typed<decltype(seg_reduce_kernel)>();
  return op.call(values, fill, seg_ptr, n, reduce);
}

// sum: each stored row gets its slice's gradient; the fill row gets it u times.
// prod: d/dv_k = prod of the other elements (zeros handled by counting them);
// d/dfill = u fill^(u-1) prod(stored).
class SegReduceFunction : public torch::autograd::Function<SegReduceFunction> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& values, const Tensor& fill,
                        const Tensor& seg_ptr, int64_t n, c10::string_view reduce) {
    at::AutoDispatchBelowADInplaceOrView guard;
    Tensor out = seg_reduce_call(values, fill, seg_ptr, n, reduce);
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
    Tensor nonzero_prod = seg_reduce_call(at::where(zero, at::ones_like(values), values), ones_fill,
                                          seg_ptr, n, "prod");
    Tensor zeros = seg_reduce_call(zero.to(at::kLong), at::zeros({1, values.size(1)},
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

std::tuple<Tensor, Tensor, Tensor> seg_max_kernel(const Tensor& values_in, const Tensor& fill_in,
                                                  const Tensor& seg_ptr_in,
                                                  const std::optional<Tensor>& coord_in,
                                                  int64_t n, bool is_min, bool split_ties) {
  (void)split_ties;  // an autograd-only choice
  const auto in_type = values_in.scalar_type();
  const auto ct = compute_type(in_type, is_min ? "min" : "max", true);
  Segs a = seg_args(values_in.to(ct), fill_in.to(ct), seg_ptr_in, n, "seg_max");
  TORCH_CHECK(n > 0 || a.nseg == 0, "sparsefill: max/min of an empty slice (a reduced dim of "
              "size 0) has no value; torch refuses it too");
  Tensor coord;
  if (coord_in.has_value() && coord_in->defined()) {
    coord = index_arg(*coord_in, "coord", 1);
    TORCH_CHECK(coord.numel() == a.values.size(0), "sparsefill: coord needs one entry per "
                "stored row, got ", coord.numel(), " for ", a.values.size(0));
    // Within a segment coordinates must increase and lie in [0, n).
    const int64_t* c = coord.data_ptr<int64_t>();
    const int64_t* sp = a.seg_ptr.data_ptr<int64_t>();
    for (int64_t s = 0; s < a.nseg; ++s) {
      // A segment outside [0, nse) is check_segments' error (raised by the
      // C core below); reading its coordinates would leave the buffer.
      if (sp[s] < 0 || sp[s] > sp[s + 1] || sp[s + 1] > a.values.size(0)) continue;
      for (int64_t k = sp[s]; k < sp[s + 1]; ++k) {
        TORCH_CHECK(c[k] >= 0 && c[k] < n && (k == sp[s] || c[k] > c[k - 1]),
                    "sparsefill: coord must increase within each segment and lie in [0, ", n,
                    "), got coord[", k, "] = ", c[k]);
      }
    }
  }
  auto idx_opts = a.seg_ptr.options();
  Tensor out = at::empty({a.nseg, a.w}, a.values.options());
  Tensor winner = at::empty({a.nseg, a.w}, idx_opts);
  Tensor index = at::zeros({a.nseg, a.w}, idx_opts);
  const int64_t* sp = a.seg_ptr.data_ptr<int64_t>();
  const int64_t* cp = coord.defined() ? coord.data_ptr<int64_t>() : nullptr;
  int64_t* ip = coord.defined() ? index.data_ptr<int64_t>() : nullptr;
  if (ct == at::kLong) {
    for_row_ranges(a.seg_ptr.data_ptr<int64_t>(), a.nseg, a.w, "segments", [&](int64_t b, int64_t e) {
      return sf_seg_max_i64(out.data_ptr<int64_t>(), winner.data_ptr<int64_t>(), ip,
                            a.values.data_ptr<int64_t>(), a.fill.data_ptr<int64_t>(),
                            a.fill_stride, cp, sp, b, e, a.w, n, is_min);
    });
  } else {
    AT_DISPATCH_FLOATING_TYPES(ct, "seg_max", [&] {
      for_row_ranges(a.seg_ptr.data_ptr<int64_t>(), a.nseg, a.w, "segments", [&](int64_t b, int64_t e) {
        scalar_t* o = out.data_ptr<scalar_t>();
        const scalar_t* v = a.values.data_ptr<scalar_t>();
        const scalar_t* f = a.fill.data_ptr<scalar_t>();
        return seg_max(o, winner.data_ptr<int64_t>(), ip, v, f, a.fill_stride, cp, sp, b, e,
                       a.w, n, (int)is_min);
      });
    });
  }
  return {out.to(in_type), winner, index};
}

std::tuple<Tensor, Tensor, Tensor> seg_max_call(const Tensor& values, const Tensor& fill,
                                                const Tensor& seg_ptr,
                                                const std::optional<Tensor>& coord, int64_t n,
                                                bool is_min, bool split_ties) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::seg_max", "")
                       .typed<decltype(seg_max_kernel)>();
  return op.call(values, fill, seg_ptr, coord, n, is_min, split_ties);
}

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
    auto [out, winner, index] = seg_max_call(values, fill, seg_ptr, coord, n, is_min, split_ties);
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

std::tuple<Tensor, Tensor> seg_softmax_kernel(const Tensor& values_in, const Tensor& fill_in,
                                              const Tensor& seg_ptr_in, int64_t n, bool log) {
  const auto in_type = values_in.scalar_type();
  const auto ct = compute_type(in_type, log ? "log_softmax" : "softmax", false);
  Segs a = seg_args(values_in.to(ct), fill_in.to(ct), seg_ptr_in, n, "seg_softmax");
  Tensor out = at::empty_like(a.values);
  Tensor out_fill = at::empty({a.nseg, a.w}, a.values.options());
  const int64_t* sp = a.seg_ptr.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(ct, "seg_softmax", [&] {
    for_row_ranges(a.seg_ptr.data_ptr<int64_t>(), a.nseg, 3 * a.w, "segments", [&](int64_t b, int64_t e) {
      scalar_t* o = out.data_ptr<scalar_t>();
      scalar_t* of = out_fill.data_ptr<scalar_t>();
      const scalar_t* v = a.values.data_ptr<scalar_t>();
      const scalar_t* f = a.fill.data_ptr<scalar_t>();
      return seg_softmax(o, of, v, f, a.fill_stride, sp, b, e, a.w, n, (int)log);
    });
  });
  return {out.to(in_type), out_fill.to(in_type)};
}

std::tuple<Tensor, Tensor> seg_softmax_backward_kernel(const Tensor& out_in,
                                                       const Tensor& out_fill_in,
                                                       const Tensor& g_in, const Tensor& g_fill_in,
                                                       const Tensor& seg_ptr_in, int64_t n,
                                                       bool log) {
  const auto in_type = out_in.scalar_type();
  const auto ct = compute_type(in_type, "softmax backward", false);
  Segs a = seg_args(out_in.to(ct), out_fill_in.to(ct), seg_ptr_in, n, "seg_softmax_backward");
  TORCH_CHECK(a.fill_stride == a.w || a.nseg == 1, "sparsefill: softmax backward needs one fill row per segment");
  Tensor g = g_in.to(ct).contiguous(), g_fill = g_fill_in.to(ct).expand_as(a.fill).contiguous();
  TORCH_CHECK(g.sizes() == a.values.sizes(), "sparsefill: softmax backward: gradient shape ",
              g.sizes(), " != ", a.values.sizes());
  Tensor gv = at::empty_like(g), gf = at::empty_like(g_fill);
  const int64_t* sp = a.seg_ptr.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(ct, "seg_softmax_backward", [&] {
    for_row_ranges(a.seg_ptr.data_ptr<int64_t>(), a.nseg, 3 * a.w, "segments",
                 [&](int64_t b, int64_t e) {
      return seg_softmax_backward(gv.data_ptr<scalar_t>(), gf.data_ptr<scalar_t>(),
                                  (const scalar_t*)a.values.data_ptr<scalar_t>(),
                                  (const scalar_t*)a.fill.data_ptr<scalar_t>(),
                                  (const scalar_t*)g.data_ptr<scalar_t>(),
                                  (const scalar_t*)g_fill.data_ptr<scalar_t>(), sp, b, e, a.w, n,
                                  (int)log);
    });
  });
  return {gv.to(in_type), gf.to(in_type)};
}

std::tuple<Tensor, Tensor> seg_softmax_call(const Tensor& values, const Tensor& fill,
                                            const Tensor& seg_ptr, int64_t n, bool log) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::seg_softmax", "")
                       .typed<decltype(seg_softmax_kernel)>();
  return op.call(values, fill, seg_ptr, n, log);
}

std::tuple<Tensor, Tensor> seg_softmax_backward_call(const Tensor& out, const Tensor& out_fill,
                                                     const Tensor& g, const Tensor& g_fill,
                                                     const Tensor& seg_ptr, int64_t n, bool log) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::seg_softmax_backward", "")
                       .typed<decltype(seg_softmax_backward_kernel)>();
  return op.call(out, out_fill, g, g_fill, seg_ptr, n, log);
}

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
  Tensor acc = seg_reduce_call(elem, fill_elem, seg_ptr, n, "sum");
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
    auto [out, out_fill] = seg_softmax_call(values, fill, seg_ptr, n, log);
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
    auto [gv, gf] = seg_softmax_backward_call(out, out_fill, g, g_fill, seg_ptr, n, log);
    return {gv, fill_grad_rows(gf, fill), Tensor(), Tensor(), Tensor()};
  }

 private:
  static Tensor defined_or_zeros(const Tensor& g, const Tensor& like) {
    return g.defined() ? g : at::zeros_like(like);
  }
};

std::tuple<Tensor, Tensor> seg_softmax_autograd(const Tensor& values, const Tensor& fill,
                                                const Tensor& seg_ptr, int64_t n, bool log) {
  auto out = SegSoftmaxFunction::apply(values, fill, seg_ptr, n, log);
  return {out[0], out[1]};
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_FRAGMENT(sparsefill, m) {
  m.def("slice_plan(Tensor indices, int[] size, int[] dims, bool compact) -> (Tensor seg_ptr, Tensor perm, Tensor kept)");
  m.def("seg_reduce(Tensor values, Tensor fill, Tensor seg_ptr, int n, str reduce) -> Tensor");
  m.def("seg_max(Tensor values, Tensor fill, Tensor seg_ptr, Tensor? coord, int n, bool is_min, bool split_ties) -> (Tensor out, Tensor winner, Tensor index)");
  m.def("seg_softmax(Tensor values, Tensor fill, Tensor seg_ptr, int n, bool log) -> (Tensor values, Tensor fill)");
  m.def("seg_softmax_backward(Tensor out, Tensor out_fill, Tensor grad, Tensor grad_fill, Tensor seg_ptr, int n, bool log) -> (Tensor grad_values, Tensor grad_fill)");
}

TORCH_LIBRARY_IMPL(sparsefill, CPU, m) {
  m.impl("slice_plan", &sparsefill::slice_plan);
  m.impl("seg_reduce", &sparsefill::seg_reduce_kernel);
  m.impl("seg_max", &sparsefill::seg_max_kernel);
  m.impl("seg_softmax", &sparsefill::seg_softmax_kernel);
  m.impl("seg_softmax_backward", &sparsefill::seg_softmax_backward_kernel);
}

TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {
  m.impl("seg_reduce", &sparsefill::seg_reduce_autograd);
  m.impl("seg_max", &sparsefill::seg_max_autograd);
  m.impl("seg_softmax", &sparsefill::seg_softmax_autograd);
}
