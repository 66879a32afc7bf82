// ops/reductions/reductions.h -- softmax, log_softmax and reductions with a
// fill (RFC.md#reductions-and-softmax), over segments or output slots. What each op computes is
// its entry in tools/codegen/native.yaml; its kernels are slices.cpp
// (slice_plan), segments.cpp (seg_*: CPU, the C core sf_reduce.c with
// segments split over torch's threads, and CUDA) and slots.cpp (slot_*: CPU,
// sf_slot.c); fake kernels and autograd (to values and fill: never ATen's
// masked sparse formulas, which drop the fill's gradient):
// torch_sparsefill/ops/reductions.py. The Python routes turn a
// SparseFillTensor and a list of dims into segments: the stored rows of each
// slice, in slice order, plus the slice's fill row and its length n.
// `values` is [nse, w], `fill` [nseg, w] or [1, w] (one row for every slice).
// This header holds the argument rules the kernels share.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "ops/common/args.h"
#include "ops/generated/calls.h"  // call::<op>: every op through the dispatcher

namespace sparsefill {

// ---- slice_plan's rules, shared by the CPU and CUDA kernels ----------------

// The dims a slice plan keeps: every sparse dim not in `dims` (which must be
// distinct sparse dims), their sizes, whether they lead (0..k-1: the stored
// elements are then already in slice order) and the number of slices.
struct KeptDims {
  std::vector<int64_t> dims, sizes;
  bool leading = true;
  int64_t nslices = 1;
};

inline KeptDims kept_dims(const std::vector<int64_t>& size, int64_t sd, at::IntArrayRef dims) {
  TORCH_CHECK(sd == (int64_t)size.size(), "sparsefill: indices has ", sd,
              " rows but size has ", size.size(), " sparse dimensions");
  std::vector<bool> reduced(sd, false);
  for (auto d : dims) {
    TORCH_CHECK(d >= 0 && d < sd && !reduced[d], "sparsefill: dims must be distinct sparse "
                "dimensions in [0, ", sd, "), got ", dims);
    reduced[d] = true;
  }
  KeptDims k;
  for (int64_t d = 0; d < sd; ++d) {
    if (reduced[d]) continue;
    if (d != (int64_t)k.dims.size()) k.leading = false;
    k.dims.push_back(d);
    k.sizes.push_back(size[d]);
  }
  check_status(sf_sizes_numel(&k.nslices, k.sizes.data(), (int64_t)k.sizes.size()), "size");
  return k;
}

// ---- the segment ops' argument rules, shared by the CPU and CUDA kernels ----

struct Segs {
  Tensor values, fill, seg_ptr;
  int64_t nseg, w, fill_stride;
};

// The rules that read no data: shapes, devices (`device`: the kernel's),
// fill rows. seg_ptr's ends are checked by each kernel where seg_ptr lives
// (check_seg_ends).
inline Segs seg_shape_args(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr_in,
                           int64_t n, const char* op, c10::DeviceType device) {
  TORCH_CHECK(values.dim() == 2, "sparsefill: ", op, ": values must be 2-D [nse, w], got shape ",
              values.sizes());
  TORCH_CHECK(fill.dim() == 2 && fill.size(1) == values.size(1),
              "sparsefill: ", op, ": fill must be [nseg or 1, ", values.size(1), "], got shape ",
              fill.sizes());
  const bool cpu = device == c10::DeviceType::CPU;
  TORCH_CHECK(values.device().type() == device && fill.device().type() == device, "sparsefill: ",
              op, cpu ? ": the CPU kernel needs CPU tensors" : ": the CUDA kernel needs CUDA tensors");
  same_device(values, "values", fill, "fill");
  TORCH_CHECK(n >= 0, "sparsefill: ", op, ": the slice length n must be non-negative, got ", n);
  Tensor seg_ptr = index_arg(seg_ptr_in, "seg_ptr", 1, device);
  same_device(values, "values", seg_ptr, "seg_ptr");
  TORCH_CHECK(seg_ptr.numel() >= 1, "sparsefill: ", op, ": seg_ptr must not be empty");
  const int64_t nseg = seg_ptr.numel() - 1;
  TORCH_CHECK(fill.size(0) == nseg || fill.size(0) == 1, "sparsefill: ", op, ": fill has ",
              fill.size(0), " rows for ", nseg, " segments (needs ", nseg, " or 1)");
  const int64_t w = values.size(1);
  return {values.contiguous(), fill.to(values.scalar_type()).contiguous(), seg_ptr, nseg, w,
          fill.size(0) == 1 ? 0 : w};
}

// seg_ptr's ends, as read by the kernel.
inline void check_seg_ends(int64_t first, int64_t last, const Segs& a, const char* op) {
  TORCH_CHECK(first == 0 && last == a.values.size(0), "sparsefill: ", op,
              ": seg_ptr must run from 0 to the number of stored rows ", a.values.size(0),
              ", got ", first, " .. ", last);
}

// seg_softmax_backward's gradients of the outputs `a` (out, out_fill): on
// their device, grad of out's shape, grad_fill one row per segment (or one
// for a single segment); returned in the compute type ct, contiguous.
inline std::pair<Tensor, Tensor> softmax_backward_grads(const Segs& a, const Tensor& g_in,
                                                        const Tensor& g_fill_in,
                                                        at::ScalarType ct) {
  TORCH_CHECK(a.fill_stride == a.w || a.nseg == 1,
              "sparsefill: softmax backward needs one fill row per segment");
  same_device(a.values, "out", g_in, "grad");
  same_device(a.values, "out", g_fill_in, "grad_fill");
  Tensor g = g_in.to(ct).contiguous();
  Tensor g_fill = g_fill_in.to(ct).expand_as(a.fill).contiguous();
  TORCH_CHECK(g.sizes() == a.values.sizes(), "sparsefill: softmax backward: gradient shape ",
              g.sizes(), " != ", a.values.sizes());
  return {g, g_fill};
}

// seg_reduce's `reduce`: true for sum, false for prod.
inline bool reduce_is_sum(c10::string_view reduce) {
  TORCH_CHECK(reduce == "sum" || reduce == "prod", "sparsefill: seg_reduce: reduce must be "
              "'sum' or 'prod', got '", std::string(reduce), "'");
  return reduce == "sum";
}

// slot_reduce's `reduce`, as the C core's sf_slot_op.
inline int slot_op(c10::string_view reduce) {
  if (reduce == "sum") return SF_SLOT_SUM;
  if (reduce == "prod") return SF_SLOT_PROD;
  if (reduce == "amax") return SF_SLOT_MAX;
  TORCH_CHECK(reduce == "amin", "sparsefill: slot_reduce: reduce must be 'sum', 'prod', 'amax' "
              "or 'amin', got '", std::string(reduce), "'");
  return SF_SLOT_MIN;
}

// slot_reduce's rules that read no data: values [nse, w], slot [nse] (int64,
// on values' device), fill [1, w] or [w], nslots >= 0, n >= 0.
inline void check_slot_args(const Tensor& values, const Tensor& slot, const Tensor& fill,
                            int64_t nslots, int64_t n, c10::DeviceType device) {
  TORCH_CHECK(values.dim() == 2, "sparsefill: slot_reduce: values must be 2-D [nse, w], got "
              "shape ", values.sizes());
  TORCH_CHECK(slot.dim() == 1 && slot.numel() == values.size(0), "sparsefill: slot_reduce: "
              "slot must be 1-D with one entry per stored row (", values.size(0), "), got shape ",
              slot.sizes());
  TORCH_CHECK(fill.numel() == values.size(1) && (fill.dim() == 1 || (fill.dim() == 2 &&
              fill.size(0) == 1)), "sparsefill: slot_reduce: fill must be [1, ", values.size(1),
              "] (one fill for every slot), got shape ", fill.sizes());
  TORCH_CHECK(values.device().type() == device, "sparsefill: slot_reduce: the ",
              device == c10::DeviceType::CPU ? "CPU kernel needs CPU" : "CUDA kernel needs CUDA",
              " tensors");
  same_device(values, "values", slot, "slot");
  same_device(values, "values", fill, "fill");
  TORCH_CHECK(nslots >= 0 && n >= 0, "sparsefill: slot_reduce: nslots and n must be "
              "non-negative, got ", nslots, " and ", n);
}

// slot_softmax's rules that read no data (op: the op's name): values [nse, w],
// slot [nse] (int64, on values' device), fill [nslots or 1, w], nslots >= 0,
// n >= 0, CPU tensors (the only kernel).
inline void check_slot_softmax_args(const Tensor& values, const Tensor& slot, const Tensor& fill,
                                    int64_t nslots, int64_t n, const char* op) {
  TORCH_CHECK(values.dim() == 2, "sparsefill: ", op, ": values must be 2-D [nse, w], got shape ",
              values.sizes());
  TORCH_CHECK(slot.dim() == 1 && slot.numel() == values.size(0), "sparsefill: ", op,
              ": slot must be 1-D with one entry per stored row (", values.size(0),
              "), got shape ", slot.sizes());
  TORCH_CHECK(nslots >= 0 && n >= 0, "sparsefill: ", op, ": nslots and n must be "
              "non-negative, got ", nslots, " and ", n);
  TORCH_CHECK(fill.dim() == 2 && fill.size(1) == values.size(1) &&
                  (fill.size(0) == nslots || fill.size(0) == 1),
              "sparsefill: ", op, ": fill must be [", nslots, " or 1, ", values.size(1),
              "] (one row per slot, or one for all), got shape ", fill.sizes());
  TORCH_CHECK(values.device().type() == c10::DeviceType::CPU, "sparsefill: ", op,
              ": the CPU kernel needs CPU tensors (CUDA takes seg_softmax)");
  same_device(values, "values", slot, "slot");
  same_device(values, "values", fill, "fill");
}

}  // namespace sparsefill
