// ops/cpu/reductions.cpp -- the CPU kernels of the segment ops
// (ops/reductions.h): check the components, split segments into ranges of
// equal work over torch's threads and call the C core (sf_reduce.c) per range.
#include <torch/library.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <type_traits>

#include "ops/common/dtypes.h"
#include "ops/common/memory.h"
#include "ops/common/row_ranges.h"
#include "ops/reductions.h"

namespace sparsefill {
namespace {

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
  const int64_t nse = indices.size(1);
  const KeptDims k = kept_dims(size, indices.size(0), dims);
  auto opts = indices.options();
  if (k.dims.empty()) {  // everything reduced: one slice, even with no element
    return {at::tensor({(int64_t)0, nse}, opts), at::empty({0}, opts),
            compact ? at::zeros({1}, opts) : at::empty({0}, opts)};
  }
  // Linear index of each element's slice: with one kept dim (rows or columns
  // of a matrix) that is its index row itself, read in place; the sort or
  // the crow builder below range-checks it.
  // (No zero-filled buffer first: for one kept dim it would be a write of
  // nse int64 thrown away.)
  Tensor lin;
  if (k.dims.size() == 1) {
    lin = indices.select(0, k.dims[0]).contiguous();
  } else {
    lin = at::empty({nse}, opts);
  }
  if (k.dims.size() > 1 && nse > 0) {
    Tensor kept_idx = indices.index_select(0, at::tensor(k.dims, opts)).contiguous();
    check_status(sf_coo_linearize(lin.data_ptr<int64_t>(), kept_idx.data_ptr<int64_t>(),
                                  (int64_t)k.dims.size(), nse, k.sizes.data()),
                 "indices");
  }
  Tensor seg = lin, kept = at::empty({0}, opts);
  int64_t nseg = k.nslices;
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
  if (k.leading) {
    // Element ranges on torch's threads (as crow_from_rows): each pointer is
    // written by one range; the first failing range names the error.
    const int64_t chunks = merge_chunks(nse);
    auto status = for_chunks(chunks, [&](int64_t c) {
      return sf_crow_from_rows_range(seg_ptr.data_ptr<int64_t>(), seg.data_ptr<int64_t>(), nse,
                                     nseg, chunk_begin(nse, chunks, c),
                                     chunk_begin(nse, chunks, c + 1));
    });
    check_chunks(status, "indices (a reduction needs coalesced indices)");
  } else {
    perm = at::empty({nse}, opts);
    check_status(sf_segment_sort(perm.data_ptr<int64_t>(), seg_ptr.data_ptr<int64_t>(),
                                 seg.data_ptr<int64_t>(), nse, nseg),
                 "indices");
  }
  return {seg_ptr, perm, kept};
}

// ---- the segment ops ------------------------------------------------------------

// The shared rules, then seg_ptr's ends, read here on the host.
Segs seg_args(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr_in, int64_t n,
              const char* op) {
  Segs a = seg_shape_args(values, fill, seg_ptr_in, n, op, c10::DeviceType::CPU);
  const int64_t* p = a.seg_ptr.data_ptr<int64_t>();
  check_seg_ends(p[0], p[a.nseg], a, op);
  return a;
}

// Runs f(seg_begin, seg_end) over the segments on torch's threads;
// `work_per_row`: the work per stored row, in units of one element.
template <class F>
void for_segments(const Segs& a, int64_t work_per_row, F f) {
  for_row_ranges(a.seg_ptr.data_ptr<int64_t>(), a.nseg, work_per_row, "segments", f);
}

Tensor seg_reduce_kernel(const Tensor& values_in, const Tensor& fill_in, const Tensor& seg_ptr_in,
                         int64_t n, c10::string_view reduce) {
  const bool is_sum = reduce_is_sum(reduce);
  const auto in_type = values_in.scalar_type();
  const auto ct = compute_type(in_type, is_sum ? "sum" : "prod", is_sum);
  Segs a = seg_args(values_in.to(ct), fill_in.to(ct), seg_ptr_in, n, "seg_reduce");
  Tensor out = at::empty({a.nseg, a.w}, a.values.options());
  const int64_t* sp = a.seg_ptr.data_ptr<int64_t>();
  with_compute_type</*Ints=*/true>(ct, [&](auto zero) {
    using T = decltype(zero);
    for_segments(a, a.w, [&](int64_t b, int64_t e) {
      T* o = out.data_ptr<T>();
      const T* v = a.values.data_ptr<T>();
      const T* f = a.fill.data_ptr<T>();
      // Integers are summed only (compute_type refuses them for prod).
      if constexpr (std::is_same_v<T, int64_t>) {
        return Core<T>::seg_sum(o, v, f, a.fill_stride, sp, b, e, a.w, n);
      } else {
        return is_sum ? Core<T>::seg_sum(o, v, f, a.fill_stride, sp, b, e, a.w, n)
                      : Core<T>::seg_prod(o, v, f, a.fill_stride, sp, b, e, a.w, n);
      }
    });
  });
  // Floating inputs keep their dtype (half sums in float, rounds back).
  return at::isFloatingType(in_type) ? out.to(in_type) : out;
}

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
  with_compute_type</*Ints=*/true>(ct, [&](auto zero) {
    using T = decltype(zero);
    for_segments(a, a.w, [&](int64_t b, int64_t e) {
      return Core<T>::seg_max(out.data_ptr<T>(), winner.data_ptr<int64_t>(), ip,
                              a.values.data_ptr<T>(), a.fill.data_ptr<T>(), a.fill_stride, cp, sp,
                              b, e, a.w, n, (int)is_min);
    });
  });
  return {out.to(in_type), winner, index};
}

std::tuple<Tensor, Tensor> seg_softmax_kernel(const Tensor& values_in, const Tensor& fill_in,
                                              const Tensor& seg_ptr_in, int64_t n, bool log) {
  const auto in_type = values_in.scalar_type();
  const auto ct = compute_type(in_type, log ? "log_softmax" : "softmax", false);
  Segs a = seg_args(values_in.to(ct), fill_in.to(ct), seg_ptr_in, n, "seg_softmax");
  Tensor out = empty_output(a.values.sizes(), a.values.options());
  Tensor out_fill = at::empty({a.nseg, a.w}, a.values.options());
  const int64_t* sp = a.seg_ptr.data_ptr<int64_t>();
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    for_segments(a, 3 * a.w, [&](int64_t b, int64_t e) {
      return Core<T>::seg_softmax(out.data_ptr<T>(), out_fill.data_ptr<T>(),
                                  a.values.data_ptr<T>(), a.fill.data_ptr<T>(), a.fill_stride, sp,
                                  b, e, a.w, n, (int)log);
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
  Tensor g, g_fill;
  std::tie(g, g_fill) = softmax_backward_grads(a, g_in, g_fill_in, ct);
  Tensor gv = empty_output(g.sizes(), g.options()), gf = at::empty_like(g_fill);
  const int64_t* sp = a.seg_ptr.data_ptr<int64_t>();
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    for_segments(a, 3 * a.w, [&](int64_t b, int64_t e) {
      return Core<T>::seg_softmax_backward(gv.data_ptr<T>(), gf.data_ptr<T>(),
                                           a.values.data_ptr<T>(), a.fill.data_ptr<T>(),
                                           g.data_ptr<T>(), g_fill.data_ptr<T>(), sp, b, e, a.w,
                                           n, (int)log);
    });
  });
  return {gv.to(in_type), gf.to(in_type)};
}

// ---- slot_reduce ------------------------------------------------------------------

// How many partials slot_reduce folds the stored rows into: a function of the
// sizes only, never of the thread count, so the result is the same on any
// number of threads (the sums' rounding follows the partition). At least 64K
// rows per partial, and at least 16 rows per slot: each partial's buffer
// (nslots x w) is cleared and folded in full, which must stay small beside
// the pass over the stored rows.
int64_t slot_parts(int64_t nse, int64_t nslots) {
  constexpr int64_t kMaxParts = 8, kRowsPerPart = int64_t(1) << 16;
  const int64_t by_rows = std::max<int64_t>(1, nse / kRowsPerPart);
  const int64_t by_memory = std::max<int64_t>(1, nse / (16 * std::max<int64_t>(nslots, 1)));
  return std::min({kMaxParts, by_rows, by_memory});
}

std::tuple<Tensor, Tensor> slot_reduce_kernel(const Tensor& values_in, const Tensor& slot_in,
                                              const Tensor& fill_in, int64_t nslots, int64_t n,
                                              c10::string_view reduce) {
  const int op = slot_op(reduce);
  check_slot_args(values_in, slot_in, fill_in, nslots, n, c10::DeviceType::CPU);
  const auto in_type = values_in.scalar_type();
  const auto ct = compute_type(in_type, std::string(reduce).c_str(), op != SF_SLOT_PROD);
  Tensor values = values_in.to(ct).contiguous();
  Tensor fill = fill_in.to(ct).contiguous();
  Tensor slot = index_arg(slot_in, "slot", 1);
  const int64_t nse = values.size(0), w = values.size(1);
  const int64_t nparts = slot_parts(nse, nslots);
  Tensor out = at::empty({nslots, w}, values.options());
  Tensor count = at::empty({nslots}, slot.options());
  const int64_t* sp = slot.data_ptr<int64_t>();
  with_compute_type</*Ints=*/true>(ct, [&](auto zero) {
    using T = decltype(zero);
    constexpr bool ints = std::is_same_v<T, int64_t>;
    using Acc = std::conditional_t<ints, int64_t, double>;
    // Sorted slots (the kept dims lead): whole runs in one pass, cut anywhere
    // (the same bits for any number of threads). Any failure -- slots out of
    // order most often -- leaves it to the partials, which accept any order
    // and name a real error.
    {
      const int64_t chunks = merge_chunks(nse);
      auto status = for_chunks(chunks, [&](int64_t c) {
        return Core<T>::slot_runs(out.data_ptr<T>(), count.data_ptr<int64_t>(),
                                  values.data_ptr<T>(), sp, fill.data_ptr<T>(), nse,
                                  chunk_begin(nse, chunks, c), chunk_begin(nse, chunks, c + 1),
                                  nslots, w, n, op);
      });
      if (std::all_of(status.begin(), status.end(), [](sf_status st) { return st == SF_OK; })) {
        return;
      }
    }
    // per part and slot: w accumulators, then the slot's stored row count
    Tensor acc = at::empty({nparts, nslots, w + 1},
                           values.options().dtype(ints ? at::kLong : at::kDouble));
    Acc* ap = acc.data_ptr<Acc>();
    const T* vp = values.data_ptr<T>();
    check_chunks(for_chunks(nparts, [&](int64_t p) {
                   return Core<T>::slot_partial(ap + p * nslots * (w + 1), vp, sp,
                                                chunk_begin(nse, nparts, p),
                                                chunk_begin(nse, nparts, p + 1), nslots, w, op);
                 }),
                 "slot");
    // Each slot folds the partials in part order: any split of the slots
    // gives the same result.
    const int64_t chunks = merge_chunks(nslots * nparts * (w + 1));
    check_chunks(for_chunks(chunks, [&](int64_t c) {
                   return Core<T>::slot_finish(out.data_ptr<T>(), count.data_ptr<int64_t>(), ap,
                                               nparts, fill.data_ptr<T>(),
                                               chunk_begin(nslots, chunks, c),
                                               chunk_begin(nslots, chunks, c + 1), nslots, w, n,
                                               op);
                 }),
                 "slot (a reduction needs coalesced indices)");
  });
  return {at::isFloatingType(in_type) ? out.to(in_type) : out, count};
}

// ---- slot_softmax --------------------------------------------------------------------

// Softmax of slices the stored order does not group, in stored order (the
// phases of sf_slot_softmax_* in sparsefill_core.h): the stored rows cut into
// slot_parts parts (a function of the sizes only: the same bits on any number
// of threads), the slots' maximum and sums of exponentials per part, folded in
// part order per slot range, then one threaded pass writing the outputs.
std::tuple<Tensor, Tensor> slot_softmax_kernel(const Tensor& values_in, const Tensor& slot_in,
                                               const Tensor& fill_in, int64_t nslots, int64_t n,
                                               bool log) {
  check_slot_softmax_args(values_in, slot_in, fill_in, nslots, n, "slot_softmax");
  const auto in_type = values_in.scalar_type();
  const auto ct = compute_type(in_type, log ? "log_softmax" : "softmax", false);
  Tensor values = values_in.to(ct).contiguous();
  Tensor fill = fill_in.to(ct).contiguous();
  Tensor slot = index_arg(slot_in, "slot", 1);
  const int64_t nse = values.size(0), w = values.size(1);
  const int64_t fill_stride = fill.size(0) == 1 ? 0 : w;
  const int64_t nparts = slot_parts(nse, nslots);
  auto opts = values.options();
  Tensor out = empty_output(values.sizes(), opts);
  Tensor out_fill = at::empty({nslots, w}, opts);
  Tensor m = at::empty({nslots, w}, opts), scale = at::empty({nslots, w}, opts);
  Tensor count = at::empty({nslots}, slot.options());
  // per part: the maximum partials (w and a row count per slot), then the sums
  Tensor acc = at::empty({nparts, nslots, w + 1}, opts.dtype(at::kDouble));
  Tensor zsum = at::empty({nparts, nslots, w}, opts.dtype(at::kDouble));
  const int64_t* sp = slot.data_ptr<int64_t>();
  double* ap = acc.data_ptr<double>();
  double* zp = zsum.data_ptr<double>();
  const int64_t slot_chunks = merge_chunks(nslots * nparts * (w + 1));
  const int64_t row_chunks = merge_chunks(nse * std::max<int64_t>(w, 1));
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    const T* vp = values.data_ptr<T>();
    const T* fp = fill.data_ptr<T>();
    T *op = out.data_ptr<T>(), *mp = m.data_ptr<T>(), *scp = scale.data_ptr<T>();
    check_chunks(for_chunks(nparts, [&](int64_t p) {
                   return Core<T>::slot_partial(ap + p * nslots * (w + 1), vp, sp,
                                                chunk_begin(nse, nparts, p),
                                                chunk_begin(nse, nparts, p + 1), nslots, w,
                                                SF_SLOT_MAX);
                 }),
                 "slot");
    check_chunks(for_chunks(slot_chunks, [&](int64_t c) {
                   return Core<T>::slot_softmax_max(mp, count.data_ptr<int64_t>(), ap, nparts, fp,
                                                    fill_stride, chunk_begin(nslots, slot_chunks, c),
                                                    chunk_begin(nslots, slot_chunks, c + 1),
                                                    nslots, w, n);
                 }),
                 "slot (softmax needs coalesced indices)");
    check_chunks(for_chunks(nparts, [&](int64_t p) {
                   return Core<T>::slot_softmax_exp(op, zp + p * nslots * w, vp, sp, mp,
                                                    chunk_begin(nse, nparts, p),
                                                    chunk_begin(nse, nparts, p + 1), nslots, w,
                                                    (int)log);
                 }),
                 "slot");
    check_chunks(for_chunks(slot_chunks, [&](int64_t c) {
                   return Core<T>::slot_softmax_norm(
                       out_fill.data_ptr<T>(), scp, zp, nparts, count.data_ptr<int64_t>(), mp, fp,
                       fill_stride, chunk_begin(nslots, slot_chunks, c),
                       chunk_begin(nslots, slot_chunks, c + 1), nslots, w, n, (int)log);
                 }),
                 "slot");
    check_chunks(for_chunks(row_chunks, [&](int64_t c) {
                   return Core<T>::slot_softmax_write(op, vp, sp, mp, scp,
                                                      chunk_begin(nse, row_chunks, c),
                                                      chunk_begin(nse, row_chunks, c + 1), nslots,
                                                      w, (int)log);
                 }),
                 "slot");
  });
  return {out.to(in_type), out_fill.to(in_type)};
}

std::tuple<Tensor, Tensor> slot_softmax_backward_kernel(const Tensor& out_in,
                                                        const Tensor& out_fill_in,
                                                        const Tensor& g_in,
                                                        const Tensor& g_fill_in,
                                                        const Tensor& slot_in, int64_t n,
                                                        bool log) {
  TORCH_CHECK(out_fill_in.dim() == 2, "sparsefill: slot_softmax_backward: out_fill must be 2-D "
              "[nslots, w], got shape ", out_fill_in.sizes());
  const int64_t nslots = out_fill_in.size(0);
  check_slot_softmax_args(out_in, slot_in, out_fill_in, nslots, n, "slot_softmax_backward");
  same_device(out_in, "out", g_in, "grad");
  same_device(out_in, "out", g_fill_in, "grad_fill");
  const auto in_type = out_in.scalar_type();
  const auto ct = compute_type(in_type, "softmax backward", false);
  Tensor out = out_in.to(ct).contiguous(), out_fill = out_fill_in.to(ct).contiguous();
  Tensor g = g_in.to(ct).contiguous();
  TORCH_CHECK(g.sizes() == out.sizes(), "sparsefill: slot_softmax_backward: gradient shape ",
              g.sizes(), " != ", out.sizes());
  Tensor g_fill = g_fill_in.to(ct).expand_as(out_fill).contiguous();
  Tensor slot = index_arg(slot_in, "slot", 1);
  const int64_t nse = out.size(0), w = out.size(1);
  const int64_t nparts = slot_parts(nse, nslots);
  auto opts = out.options();
  Tensor gv = empty_output(out.sizes(), opts), gf = at::empty({nslots, w}, opts);
  Tensor dot = at::empty({nslots, w}, opts);
  Tensor acc = at::empty({nparts, nslots, w + 1}, opts.dtype(at::kDouble));
  const int64_t* sp = slot.data_ptr<int64_t>();
  double* ap = acc.data_ptr<double>();
  const int64_t slot_chunks = merge_chunks(nslots * nparts * (w + 1));
  const int64_t row_chunks = merge_chunks(nse * std::max<int64_t>(w, 1));
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    const T *yp = out.data_ptr<T>(), *gp = g.data_ptr<T>();
    T* dp = dot.data_ptr<T>();
    check_chunks(for_chunks(nparts, [&](int64_t p) {
                   return Core<T>::slot_softmax_backward_partial(
                       ap + p * nslots * (w + 1), yp, gp, sp, chunk_begin(nse, nparts, p),
                       chunk_begin(nse, nparts, p + 1), nslots, w, (int)log);
                 }),
                 "slot");
    check_chunks(for_chunks(slot_chunks, [&](int64_t c) {
                   return Core<T>::slot_softmax_backward_norm(
                       gf.data_ptr<T>(), dp, ap, nparts, out_fill.data_ptr<T>(),
                       g_fill.data_ptr<T>(), chunk_begin(nslots, slot_chunks, c),
                       chunk_begin(nslots, slot_chunks, c + 1), nslots, w, n, (int)log);
                 }),
                 "slot (softmax needs coalesced indices)");
    check_chunks(for_chunks(row_chunks, [&](int64_t c) {
                   return Core<T>::slot_softmax_backward_write(
                       gv.data_ptr<T>(), yp, gp, sp, dp, chunk_begin(nse, row_chunks, c),
                       chunk_begin(nse, row_chunks, c + 1), nslots, w, (int)log);
                 }),
                 "slot");
  });
  return {gv.to(in_type), gf.to(in_type)};
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, CPU, m) {
  m.impl("slot_softmax", &sparsefill::slot_softmax_kernel);
  m.impl("slot_softmax_backward", &sparsefill::slot_softmax_backward_kernel);
  m.impl("slice_plan", &sparsefill::slice_plan);
  m.impl("seg_reduce", &sparsefill::seg_reduce_kernel);
  m.impl("seg_max", &sparsefill::seg_max_kernel);
  m.impl("seg_softmax", &sparsefill::seg_softmax_kernel);
  m.impl("seg_softmax_backward", &sparsefill::seg_softmax_backward_kernel);
  m.impl("slot_reduce", &sparsefill::slot_reduce_kernel);
}
