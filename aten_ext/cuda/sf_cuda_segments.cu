// sf_cuda_segments.cu -- the segments of the device reductions (the twins of
// ../cpu/sf_reduce.c's checks and slice plan), behind the C ABI of
// sparsefill_cuda.h: seg_ptr's checks (sf_cuda_segments_check), seg_max's
// coordinates (sf_cuda_seg_coord_check) and the stable sort of elements into
// segments (sf_cuda_segment_sort). The reductions are sf_cuda_reduce.cu's.
#include "sf_cuda_internal.cuh"

using namespace sf_cuda;

namespace {

// ---- checks ----------------------------------------------------------------------

__global__ void segments_check_kernel(sf_cuda_report* r, const int64_t* p, int64_t nseg,
                                      int64_t n) {
  SF_CUDA_FOR(s, nseg) {
    const int64_t cnt = p[s + 1] - p[s];
    if (cnt < 0 || cnt > n) note_bad(&r->first, (uint64_t)s);
  }
}

__global__ void segments_check_finish(sf_cuda_report* r, const int64_t* p, int64_t nseg,
                                      int64_t n) {
  r->value = p[0];
  r->result = p[nseg];
  if (r->first == kNone) return;
  const int64_t s = (int64_t)r->first;
  const int64_t cnt = p[s + 1] - p[s];
  // check_segments' codes: a decrease, or more stored rows than the slice holds
  r->status = cnt < 0 ? SF_ERR_NOT_COALESCED : SF_ERR_INVALID_ARGUMENT;
  r->position = s;
  r->dim = -1;
  (void)n;
}

// Element k's segment: the last s with p[s] <= k (reads stay in p[0..nseg]).
__global__ void coord_check_kernel(sf_cuda_report* r, const int64_t* coord, const int64_t* p,
                                   int64_t nseg, int64_t nse, int64_t n) {
  SF_CUDA_FOR(k, nse) {
    int64_t s = upper_bound(p, nseg + 1, k) - 1;
    s = s < 0 ? 0 : (s > nseg - 1 ? nseg - 1 : s);
    const int64_t lo = p[s], hi = p[s + 1], ck = coord[k];
    // As the CPU: a malformed segment is left to the segments check.
    if (lo < 0 || lo > hi || hi > nse || k < lo || k >= hi) continue;
    if (ck < 0 || ck >= n || (k > lo && ck <= coord[k - 1])) {
      note_bad(&r->first, (uint64_t)k);
    }
  }
}

__global__ void coord_check_finish(sf_cuda_report* r, const int64_t* coord) {
  if (r->first == kNone) return;
  const int64_t k = (int64_t)r->first;
  set_site(r, SF_ERR_INVALID_ARGUMENT, k, -1, coord[k]);
}

// ---- segment sort ------------------------------------------------------------------

__global__ void segment_range_kernel(sf_cuda_report* r, const int64_t* segment, int64_t nse,
                                     int64_t nseg) {
  SF_CUDA_FOR(k, nse) {
    if (segment[k] < 0 || segment[k] >= nseg) note_bad(&r->first, (uint64_t)k);
  }
}

__global__ void segment_range_finish(sf_cuda_report* r, const int64_t* segment) {
  if (r->first == kNone) return;
  const int64_t k = (int64_t)r->first;
  set_site(r, SF_ERR_INDEX_OUT_OF_RANGE, k, -1, segment[k]);
}

}  // namespace

// ---- the C ABI --------------------------------------------------------------------

extern "C" sf_status sf_cuda_segment_sort(sf_cuda_report* report, int64_t* perm, int64_t* seg_ptr,
                                          const int64_t* segment, int64_t nse, int64_t nseg,
                                          void* workspace, size_t* workspace_bytes,
                                          void* stream) {
  SF_CUDA_FAIL_IF(workspace_bytes == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse < 0 || nseg < 0, SF_ERR_NEGATIVE_SIZE);
  const cudaStream_t s = as_stream(stream);
  if (workspace == nullptr) {
    return sort_into_buckets(nullptr, nullptr, segment, nse, nseg, nullptr, workspace_bytes, s);
  }
  SF_CUDA_FAIL_IF(report == nullptr || seg_ptr == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse > 0 && (perm == nullptr || segment == nullptr), SF_ERR_NULL_POINTER);
  SF_CUDA_TRY(report_init(report, 0, s));
  if (nse > 0) {
    segment_range_kernel<<<blocks_for(nse), kThreads, 0, s>>>(report, segment, nse, nseg);
    SF_CUDA_TRY(launched());
    segment_range_finish<<<1, 1, 0, s>>>(report, segment);
    SF_CUDA_TRY(launched());
  }
  // Stable: within a segment, elements keep their order (the CPU's counting
  // sort gives the same perm).
  return sort_into_buckets(perm, seg_ptr, segment, nse, nseg, workspace, workspace_bytes, s);
}

extern "C" sf_status sf_cuda_segments_check(sf_cuda_report* report, const int64_t* seg_ptr,
                                            int64_t nseg, int64_t n, void* stream) {
  SF_CUDA_FAIL_IF(report == nullptr || seg_ptr == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nseg < 0 || n < 0, SF_ERR_NEGATIVE_SIZE);
  const cudaStream_t s = as_stream(stream);
  SF_CUDA_TRY(report_init(report, 0, s));
  if (nseg > 0) {
    segments_check_kernel<<<blocks_for(nseg), kThreads, 0, s>>>(report, seg_ptr, nseg, n);
    SF_CUDA_TRY(launched());
  }
  segments_check_finish<<<1, 1, 0, s>>>(report, seg_ptr, nseg, n);
  return launched();
}

extern "C" sf_status sf_cuda_seg_coord_check(sf_cuda_report* report, const int64_t* coord,
                                             const int64_t* seg_ptr, int64_t nseg, int64_t nse,
                                             int64_t n, void* stream) {
  SF_CUDA_FAIL_IF(report == nullptr || seg_ptr == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nseg < 0 || nse < 0 || n < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(coord == nullptr && nse > 0, SF_ERR_NULL_POINTER);
  const cudaStream_t s = as_stream(stream);
  SF_CUDA_TRY(report_init(report, 0, s));
  if (nse == 0 || nseg == 0) return SF_OK;  // no element, or seg_ptr's check fails
  coord_check_kernel<<<blocks_for(nse), kThreads, 0, s>>>(report, coord, seg_ptr, nseg, nse, n);
  SF_CUDA_TRY(launched());
  coord_check_finish<<<1, 1, 0, s>>>(report, coord);
  return launched();
}
