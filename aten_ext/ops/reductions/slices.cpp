// ops/reductions/slices.cpp -- slice_plan's kernels (the op: tools/codegen/native.yaml;
// its rules: reductions.h, kept_dims): the segments of a coalesced COO pattern
// for reducing some of its sparse dims. CPU: the C core (sf_coo.c, sf_csr.c,
// sf_reduce.c). CUDA (CUDA build only): the same steps on the device
// (sparsefill_cuda.h), read back once.
#include <torch/library.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <tuple>

#include "ops/common/row_ranges.h"
#include "ops/generated/kernels.h"
#include "ops/reductions/reductions.h"

namespace sparsefill {

// ---- slice_plan -------------------------------------------------------------

// Segments of a coalesced COO pattern for reducing the sparse dims `dims`.
// compact = false: one segment per slice (every position of the kept dims,
// row-major), so seg_ptr has prod(kept sizes) + 1 entries and `kept` is
// empty. compact = true: segments only for slices that store something;
// `kept` holds their linear index over the kept dims. perm lists the stored
// elements in segment order; it is empty when that is their own order (the
// kept dims lead, as for rows of a matrix).
std::tuple<Tensor, Tensor, Tensor> slice_plan_cpu(const Tensor& indices_in, at::IntArrayRef size_in,
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

}  // namespace sparsefill

#ifdef SPARSEFILL_WITH_CUDA
#include "ops/common/cuda.h"

namespace sparsefill {

// ---- slice_plan -------------------------------------------------------------

// The CPU's slice_plan (above), step by step on the device: linear
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

}  // namespace sparsefill
#endif  // SPARSEFILL_WITH_CUDA
