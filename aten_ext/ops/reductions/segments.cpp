// ops/reductions/segments.cpp -- the kernels of the segment ops seg_reduce, seg_max,
// seg_softmax and seg_softmax_backward (the ops: tools/codegen/native.yaml; their
// shared rules: reductions.h). CPU: check the components, split segments into
// ranges of equal work over torch's threads and call the C core (sf_reduce.c) per
// range. CUDA (CUDA build only): the same rules and messages, the CUDA core
// (sf_cuda_reduce.cu) on torch's current stream, each op's reports read once;
// the checks that need the data (seg_ptr's ends, coordinates) run on the device
// and are raised after that one synchronisation, in the CPU's order.
#include <torch/library.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/zeros.h>

#include <optional>
#include <tuple>
#include <type_traits>

#include "ops/common/dtypes.h"
#include "ops/common/memory.h"
#include "ops/common/row_ranges.h"
#include "ops/generated/kernels.h"
#include "ops/reductions/reductions.h"

namespace sparsefill {
namespace {

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

}  // namespace

Tensor seg_reduce_cpu(const Tensor& values_in, const Tensor& fill_in, const Tensor& seg_ptr_in,
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

std::tuple<Tensor, Tensor, Tensor> seg_max_cpu(const Tensor& values_in, const Tensor& fill_in,
                                               const Tensor& seg_ptr_in,
                                               const std::optional<Tensor>& coord_in, int64_t n,
                                               bool is_min, bool split_ties) {
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

std::tuple<Tensor, Tensor> seg_softmax_cpu(const Tensor& values_in, const Tensor& fill_in,
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

std::tuple<Tensor, Tensor> seg_softmax_backward_cpu(const Tensor& out_in, const Tensor& out_fill_in,
                                                    const Tensor& g_in, const Tensor& g_fill_in,
                                                    const Tensor& seg_ptr_in, int64_t n, bool log) {
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

}  // namespace sparsefill

#ifdef SPARSEFILL_WITH_CUDA
#include "ops/common/cuda.h"

namespace sparsefill {
namespace {

// ---- shared argument checks ---------------------------------------------------

// The CPU's seg_args, but the check of seg_ptr's ends (which reads it) is
// left to the device: launch_segments_check, then raise_ends after the sync.
Segs device_seg_args(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr_in, int64_t n,
                     const char* op) {
  return seg_shape_args(values, fill, seg_ptr_in, n, op, kCUDA);
}

void launch_segments_check(sf_cuda_report* report, const Segs& a, int64_t n) {
  check_call(sf_cuda_segments_check(report, a.seg_ptr.data_ptr<int64_t>(), a.nseg, n,
                                    current_stream()),
             "segments");
}

// seg_args' last check, with the ends the device read.
void raise_ends(const sf_cuda_report& r, const Segs& a, const char* op) {
  check_seg_ends(r.value, r.result, a, op);
}

// Host-side checks that the CPU kernel makes after seg_ptr's ends: when one
// fails, the ends (already being checked on the device) are read first so
// that the error is the CPU's.
template <class F>
void host_checks_after_ends(Reports& reports, const Segs& a, const char* op, F checks) {
  try {
    checks();
  } catch (const c10::Error&) {
    raise_ends(reports.read()[0], a, op);
    throw;
  }
}

}  // namespace

// ---- sum / prod ---------------------------------------------------------------------

Tensor seg_reduce_cuda(const Tensor& values_in, const Tensor& fill_in, const Tensor& seg_ptr_in,
                       int64_t n, c10::string_view reduce) {
  const bool is_sum = reduce_is_sum(reduce);
  const auto in_type = values_in.scalar_type();
  const auto ct = compute_type(in_type, is_sum ? "sum" : "prod", is_sum);
  Segs a = device_seg_args(values_in.to(ct), fill_in.to(ct), seg_ptr_in, n, "seg_reduce");
  c10::cuda::CUDAGuard guard(a.values.device());
  Tensor out = at::empty({a.nseg, a.w}, a.values.options());
  Reports reports(1, a.values.device());
  launch_segments_check(reports.at(0), a, n);
  const int64_t* sp = a.seg_ptr.data_ptr<int64_t>();
  const int64_t nse = a.values.size(0);
  with_compute_type</*Ints=*/true>(ct, [&](auto zero) {
    using T = decltype(zero);
    T* o = out.data_ptr<T>();
    const T* v = a.values.data_ptr<T>();
    const T* f = a.fill.data_ptr<T>();
    // Integers are summed only (compute_type refuses them for prod).
    if constexpr (std::is_same_v<T, int64_t>) {
      check_call(CudaCore<T>::seg_sum(o, v, f, a.fill_stride, sp, a.nseg, nse, a.w, n,
                                      current_stream()),
                 "segments");
    } else {
      check_call(is_sum ? CudaCore<T>::seg_sum(o, v, f, a.fill_stride, sp, a.nseg, nse, a.w, n,
                                               current_stream())
                        : CudaCore<T>::seg_prod(o, v, f, a.fill_stride, sp, a.nseg, nse, a.w, n,
                                                current_stream()),
                 "segments");
    }
  });
  const auto r = reports.read()[0];
  raise_ends(r, a, "seg_reduce");
  check_status((sf_status)r.status, "segments");
  return at::isFloatingType(in_type) ? out.to(in_type) : out;
}

// ---- max / min -------------------------------------------------------------------

std::tuple<Tensor, Tensor, Tensor> seg_max_cuda(const Tensor& values_in, const Tensor& fill_in,
                                                const Tensor& seg_ptr_in,
                                                const std::optional<Tensor>& coord_in, int64_t n,
                                                bool is_min, bool split_ties) {
  (void)split_ties;  // an autograd-only choice
  const auto in_type = values_in.scalar_type();
  const auto ct = compute_type(in_type, is_min ? "min" : "max", true);
  Segs a = device_seg_args(values_in.to(ct), fill_in.to(ct), seg_ptr_in, n, "seg_max");
  c10::cuda::CUDAGuard guard(a.values.device());
  const int64_t nse = a.values.size(0);
  Reports reports(2, a.values.device());
  launch_segments_check(reports.at(0), a, n);
  Tensor coord;
  host_checks_after_ends(reports, a, "seg_max", [&] {
    TORCH_CHECK(n > 0 || a.nseg == 0, "sparsefill: max/min of an empty slice (a reduced dim of "
                "size 0) has no value; torch refuses it too");
    if (coord_in.has_value() && coord_in->defined()) {
      coord = index_arg(*coord_in, "coord", 1, kCUDA);
      same_device(a.values, "values", coord, "coord");
      TORCH_CHECK(coord.numel() == nse, "sparsefill: coord needs one entry per "
                  "stored row, got ", coord.numel(), " for ", nse);
    }
  });
  const int64_t* sp = a.seg_ptr.data_ptr<int64_t>();
  const int64_t* cp = coord.defined() ? coord.data_ptr<int64_t>() : nullptr;
  if (coord.defined()) {
    check_call(sf_cuda_seg_coord_check(reports.at(1), cp, sp, a.nseg, nse, n, current_stream()),
               "coord");
  }
  auto idx_opts = a.seg_ptr.options();
  Tensor out = at::empty({a.nseg, a.w}, a.values.options());
  Tensor winner = at::empty({a.nseg, a.w}, idx_opts);
  Tensor index = at::zeros({a.nseg, a.w}, idx_opts);
  int64_t* ip = coord.defined() ? index.data_ptr<int64_t>() : nullptr;
  with_compute_type</*Ints=*/true>(ct, [&](auto zero) {
    using T = decltype(zero);
    check_call(CudaCore<T>::seg_max(out.data_ptr<T>(), winner.data_ptr<int64_t>(), ip,
                                    a.values.data_ptr<T>(), a.fill.data_ptr<T>(), a.fill_stride,
                                    cp, sp, a.nseg, nse, a.w, n, (int)is_min, current_stream()),
               "segments");
  });
  const auto r = reports.read();
  raise_ends(r[0], a, "seg_max");
  if (coord.defined() && r[1].status != SF_OK) {
    TORCH_CHECK(false, "sparsefill: coord must increase within each segment and lie in [0, ", n,
                "), got coord[", r[1].position, "] = ", r[1].value);
  }
  check_status((sf_status)r[0].status, "segments");
  return {out.to(in_type), winner, index};
}

// ---- softmax / log_softmax -----------------------------------------------------------

std::tuple<Tensor, Tensor> seg_softmax_cuda(const Tensor& values_in, const Tensor& fill_in,
                                            const Tensor& seg_ptr_in, int64_t n, bool log) {
  const auto in_type = values_in.scalar_type();
  const auto ct = compute_type(in_type, log ? "log_softmax" : "softmax", false);
  Segs a = device_seg_args(values_in.to(ct), fill_in.to(ct), seg_ptr_in, n, "seg_softmax");
  c10::cuda::CUDAGuard guard(a.values.device());
  Tensor out = at::empty_like(a.values);
  Tensor out_fill = at::empty({a.nseg, a.w}, a.values.options());
  Reports reports(1, a.values.device());
  launch_segments_check(reports.at(0), a, n);
  const int64_t* sp = a.seg_ptr.data_ptr<int64_t>();
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    check_call(CudaCore<T>::seg_softmax(out.data_ptr<T>(), out_fill.data_ptr<T>(),
                                        a.values.data_ptr<T>(), a.fill.data_ptr<T>(),
                                        a.fill_stride, sp, a.nseg, a.values.size(0), a.w, n,
                                        (int)log, current_stream()),
               "segments");
  });
  const auto r = reports.read()[0];
  raise_ends(r, a, "seg_softmax");
  check_status((sf_status)r.status, "segments");
  return {out.to(in_type), out_fill.to(in_type)};
}

std::tuple<Tensor, Tensor> seg_softmax_backward_cuda(const Tensor& out_in,
                                                     const Tensor& out_fill_in, const Tensor& g_in,
                                                     const Tensor& g_fill_in,
                                                     const Tensor& seg_ptr_in, int64_t n,
                                                     bool log) {
  const auto in_type = out_in.scalar_type();
  const auto ct = compute_type(in_type, "softmax backward", false);
  Segs a = device_seg_args(out_in.to(ct), out_fill_in.to(ct), seg_ptr_in, n, "seg_softmax_backward");
  c10::cuda::CUDAGuard guard(a.values.device());
  Reports reports(1, a.values.device());
  launch_segments_check(reports.at(0), a, n);
  Tensor g, g_fill;
  host_checks_after_ends(reports, a, "seg_softmax_backward", [&] {
    std::tie(g, g_fill) = softmax_backward_grads(a, g_in, g_fill_in, ct);
  });
  Tensor gv = at::empty_like(g), gf = at::empty_like(g_fill);
  const int64_t* sp = a.seg_ptr.data_ptr<int64_t>();
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    check_call(CudaCore<T>::seg_softmax_backward(gv.data_ptr<T>(), gf.data_ptr<T>(),
                                                 a.values.data_ptr<T>(), a.fill.data_ptr<T>(),
                                                 g.data_ptr<T>(), g_fill.data_ptr<T>(), sp,
                                                 a.nseg, a.values.size(0), a.w, n, (int)log,
                                                 current_stream()),
               "segments");
  });
  const auto r = reports.read()[0];
  raise_ends(r, a, "seg_softmax_backward");
  check_status((sf_status)r.status, "segments");
  return {gv.to(in_type), gf.to(in_type)};
}

}  // namespace sparsefill
#endif  // SPARSEFILL_WITH_CUDA
