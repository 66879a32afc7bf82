// ops/cuda/reductions.cpp -- the CUDA kernels of the segment ops
// (ops/reductions.h): unpack and check component tensors as the CPU kernels
// do, call the CUDA core (cuda/sf_cuda_reduce.cu, sparsefill_cuda.h) on
// torch's current stream with workspace from torch's caching allocator,
// check every launch, and read each op's reports once. Error messages are
// the CPU kernels' own: checks that need the data (seg_ptr's ends, segment
// counts, coordinates) run on the device and are raised after that one
// synchronisation, in the CPU's order.
#include <torch/library.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <optional>
#include <tuple>
#include <type_traits>

#include "ops/common/cuda.h"
#include "ops/common/dtypes.h"
#include "ops/reductions.h"

namespace sparsefill {
namespace {

// ---- slice_plan -------------------------------------------------------------

// The CPU's slice_plan (cpu/reductions.cpp), step by step on the device: linear
// slice index (checked), the coalescing plan when compact, then segment
// pointers (sorted slices) or a stable sort (otherwise). One sync at the end:
// in the compact case the number of segments is not known before it, so the
// pointer arrays are sized for nse segments and cut after.
std::tuple<Tensor, Tensor, Tensor> slice_plan_cuda(const Tensor& indices_in,
                                                   at::IntArrayRef size_in, at::IntArrayRef dims,
                                                   bool compact) {
  auto size = sizes_arg(size_in, "size");
  Tensor indices = index_arg(indices_in, "indices", 2, kCUDA);
  const int64_t nse = indices.size(1);
  const KeptDims k = kept_dims(size, indices.size(0), dims);
  auto opts = indices.options();
  c10::cuda::CUDAGuard guard(indices.device());
  if (k.dims.empty()) {
    return {at::tensor({(int64_t)0, nse}, opts.device(at::kCPU)).to(indices.device()),
            at::empty({0}, opts), compact ? at::zeros({1}, opts) : at::empty({0}, opts)};
  }
  TORCH_CHECK((int64_t)k.dims.size() <= SF_CUDA_MAX_DIMS,
              "sparsefill: the CUDA kernels take at most ", SF_CUDA_MAX_DIMS,
              " sparse dimensions, got ", k.dims.size());
  // Reports: 0 the linear index's range check, 1 the coalescing plan, 2 the
  // segment pointers; `used` says which a call initialised.
  Reports reports(3, indices.device());
  bool used[3] = {false, false, false};
  Tensor lin = at::empty({0}, opts);
  if (k.dims.size() == 1) {
    lin = indices.select(0, k.dims[0]).contiguous();
    // The CPU's coalescing plan refuses negative keys; the device plan sorts
    // the bits of keys in [0, nslices) only, so it needs them all in range.
    if (compact && nse > 0) {
      check_call(sf_cuda_coo_check(reports.at(0), nullptr, lin.data_ptr<int64_t>(), 1, nse,
                                   k.sizes.data(), current_stream()),
                 "indices");
      used[0] = true;
    }
  } else if (nse > 0) {
    Tensor kept_idx =
        indices.index_select(0, at::tensor(k.dims, opts.device(at::kCPU)).to(indices.device()))
            .contiguous();
    lin = at::empty({nse}, opts);
    check_call(sf_cuda_coo_check(reports.at(0), lin.data_ptr<int64_t>(),
                                 kept_idx.data_ptr<int64_t>(), (int64_t)k.dims.size(), nse,
                                 k.sizes.data(), current_stream()),
               "indices");
    used[0] = true;
  }
  Tensor seg = lin, unique;
  int64_t nseg = k.nslices;  // compact: a bound (nse), cut after the sync
  if (compact) {
    unique = at::empty({nse}, opts);
    Tensor segment = at::empty({nse}, opts);
    const int64_t max_key = std::max<int64_t>(k.nslices - 1, 0);
    size_t bytes = 0;
    check_call(sf_cuda_coalesce_plan(nullptr, nullptr, nullptr, nullptr, nse, max_key, nullptr,
                                     &bytes, current_stream()),
               "indices");
    Tensor ws = workspace(bytes, indices);
    check_call(sf_cuda_coalesce_plan(reports.at(1), unique.data_ptr<int64_t>(),
                                     segment.data_ptr<int64_t>(), lin.data_ptr<int64_t>(), nse,
                                     max_key, ws.data_ptr(), &bytes, current_stream()),
               "indices");
    used[1] = true;
    seg = segment;
    nseg = nse;
  }
  Tensor seg_ptr = at::empty({nseg + 1}, opts);
  Tensor perm = at::empty({0}, opts);
  if (k.leading) {
    check_call(sf_cuda_crow_from_rows(reports.at(2), seg_ptr.data_ptr<int64_t>(),
                                      seg.data_ptr<int64_t>(), nse, nseg, current_stream()),
               "indices (a reduction needs coalesced indices)");
  } else {
    perm = at::empty({nse}, opts);
    size_t bytes = 0;
    check_call(sf_cuda_segment_sort(nullptr, nullptr, nullptr, nullptr, nse, nseg, nullptr,
                                    &bytes, current_stream()),
               "indices");
    Tensor ws = workspace(bytes, indices);
    check_call(sf_cuda_segment_sort(reports.at(2), perm.data_ptr<int64_t>(),
                                    seg_ptr.data_ptr<int64_t>(), seg.data_ptr<int64_t>(), nse,
                                    nseg, ws.data_ptr(), &bytes, current_stream()),
               "indices");
  }
  used[2] = true;
  const auto r = reports.read();
  if (used[0]) check_status((sf_status)r[0].status, "indices");
  if (used[1]) check_status((sf_status)r[1].status, "indices");
  check_status((sf_status)r[2].status,
               k.leading ? "indices (a reduction needs coalesced indices)" : "indices");
  Tensor kept = at::empty({0}, opts);
  if (compact) {
    const int64_t nu = r[1].result;
    kept = unique.narrow(0, 0, nu).clone();
    seg_ptr = seg_ptr.narrow(0, 0, nu + 1).clone();
  }
  return {seg_ptr, perm, kept};
}

// ---- shared argument checks ---------------------------------------------------

// The CPU's seg_args, but the check of seg_ptr's ends (which reads it) is
// left to the device: launch_segments_check, then raise_ends after the sync.
Segs seg_args(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr_in, int64_t n,
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

// ---- sum / prod ---------------------------------------------------------------------

Tensor seg_reduce_cuda(const Tensor& values_in, const Tensor& fill_in, const Tensor& seg_ptr_in,
                       int64_t n, c10::string_view reduce) {
  const bool is_sum = reduce_is_sum(reduce);
  const auto in_type = values_in.scalar_type();
  const auto ct = compute_type(in_type, is_sum ? "sum" : "prod", is_sum);
  Segs a = seg_args(values_in.to(ct), fill_in.to(ct), seg_ptr_in, n, "seg_reduce");
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
  Segs a = seg_args(values_in.to(ct), fill_in.to(ct), seg_ptr_in, n, "seg_max");
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
  Segs a = seg_args(values_in.to(ct), fill_in.to(ct), seg_ptr_in, n, "seg_softmax");
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
                                                     const Tensor& out_fill_in,
                                                     const Tensor& g_in, const Tensor& g_fill_in,
                                                     const Tensor& seg_ptr_in, int64_t n,
                                                     bool log) {
  const auto in_type = out_in.scalar_type();
  const auto ct = compute_type(in_type, "softmax backward", false);
  Segs a = seg_args(out_in.to(ct), out_fill_in.to(ct), seg_ptr_in, n, "seg_softmax_backward");
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

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, CUDA, m) {
  m.impl("slice_plan", &sparsefill::slice_plan_cuda);
  m.impl("seg_reduce", &sparsefill::seg_reduce_cuda);
  m.impl("seg_max", &sparsefill::seg_max_cuda);
  m.impl("seg_softmax", &sparsefill::seg_softmax_cuda);
  m.impl("seg_softmax_backward", &sparsefill::seg_softmax_backward_cuda);
}

