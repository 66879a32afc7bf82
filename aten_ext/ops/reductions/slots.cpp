// ops/reductions/slots.cpp -- the CPU kernels of the reductions and softmax by
// output slot: slot_reduce, slot_softmax, slot_softmax_backward (the ops:
// tools/codegen/native.yaml; their rules: reductions.h), in stored order with no
// reordering, the phases of the C core's sf_slot_* (sf_slot.c) threaded over
// parts, slot ranges and row ranges. (CUDA takes the segment ops instead.)
#include <torch/library.h>

#include <ATen/ops/empty.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <type_traits>

#include "ops/common/dtypes.h"
#include "ops/common/memory.h"
#include "ops/common/row_ranges.h"
#include "ops/generated/kernels.h"
#include "ops/reductions/reductions.h"

namespace sparsefill {
namespace {

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

}  // namespace

std::tuple<Tensor, Tensor> slot_reduce_cpu(const Tensor& values_in, const Tensor& slot_in,
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
std::tuple<Tensor, Tensor> slot_softmax_cpu(const Tensor& values_in, const Tensor& slot_in,
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

std::tuple<Tensor, Tensor> slot_softmax_backward_cpu(const Tensor& out_in,
                                                     const Tensor& out_fill_in, const Tensor& g_in,
                                                     const Tensor& g_fill_in, const Tensor& slot_in,
                                                     int64_t n, bool log) {
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

}  // namespace sparsefill
