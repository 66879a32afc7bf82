// sf_cuda_merge.cu -- pattern merges on the device: the union plan and fill
// substitution, behind the C ABI of sparsefill_cuda.h. No torch headers.
#include <cub/device/device_scan.cuh>

#include "sf_cuda_internal.cuh"

using namespace sf_cuda;

namespace {

// match[i] = 1 when a[i] is also in b; a drop in a (a[i] <= a[i - 1]) goes
// to `bad`. Binary searches read b[0..nb) only, whatever a and b hold.
__global__ void match_kernel(uint64_t* bad, int64_t* match, const int64_t* a,
                             int64_t na, const int64_t* b, int64_t nb) {
  SF_CUDA_FOR(i, na) {
    if (i > 0 && a[i] <= a[i - 1]) note_bad(bad, (uint64_t)i);
    if (match != nullptr) {
      const int64_t p = lower_bound(b, nb, a[i]);
      match[i] = (p < nb && b[p] == a[i]) ? 1 : 0;
    }
  }
}

// Slot of a value v in the union = #a < v + #b < v - #common values < v;
// common[p] = matches among a[0..p) (exclusive scan). Every slot computed
// is in [0, na + nb) even for unsorted inputs (common[i] <= i, common[p] <= p).
__global__ void scatter_a_kernel(int64_t* out, int64_t* src_a, int64_t* src_b, const int64_t* a,
                                 int64_t na, const int64_t* b, int64_t nb, const int64_t* match,
                                 const int64_t* common) {
  SF_CUDA_FOR(i, na) {
    const int64_t p = lower_bound(b, nb, a[i]);
    const int64_t slot = i + p - common[i];
    out[slot] = a[i];
    src_a[slot] = i;
    src_b[slot] = match[i] ? p : -1;
  }
}

__global__ void scatter_b_kernel(int64_t* out, int64_t* src_a, int64_t* src_b, const int64_t* a,
                                 int64_t na, const int64_t* b, int64_t nb, const int64_t* common) {
  SF_CUDA_FOR(j, nb) {
    const int64_t p = lower_bound(a, na, b[j]);
    if (p < na && a[p] == b[j]) continue;  // A's thread wrote this slot
    const int64_t slot = j + p - common[p];
    out[slot] = b[j];
    src_a[slot] = -1;
    src_b[slot] = j;
  }
}

__global__ void union_finish(sf_cuda_report* r, const int64_t* a, int64_t na, const int64_t* b,
                             int64_t nb, const int64_t* common) {
  r->result = na + nb - common[na];
  if (r->first != kNone) {
    set_site(r, SF_ERR_NOT_COALESCED, (int64_t)r->first, 0, a[r->first]);
  } else if (r->second != kNone) {
    set_site(r, SF_ERR_NOT_COALESCED, (int64_t)r->second, 1, b[r->second]);
  }
}

template <typename Word>
__global__ void gather_kernel(sf_cuda_report* r, Word* out, const Word* values, int64_t nse_values,
                              const Word* fill, const int64_t* src, int64_t n, int64_t words) {
  const int64_t total = n * words;
  SF_CUDA_FOR(t, total) {
    const int64_t k = t / words, w = t - k * words;
    const int64_t s = src[k];
    if (s >= nse_values) {
      if (w == 0) note_bad(&r->first, (uint64_t)k);
      continue;
    }
    out[t] = s < 0 ? fill[w] : values[s * words + w];
  }
}

__global__ void src_check_kernel(sf_cuda_report* r, int64_t nse_values, const int64_t* src,
                                 int64_t n) {
  SF_CUDA_FOR(k, n) {
    if (src[k] >= nse_values) note_bad(&r->first, (uint64_t)k);
  }
}

__global__ void gather_finish(sf_cuda_report* r, const int64_t* src) {
  if (r->first == kNone) return;
  set_site(r, SF_ERR_INDEX_OUT_OF_RANGE, (int64_t)r->first, -1, src[r->first]);
}

template <typename Word>
sf_status launch_gather(sf_cuda_report* r, void* out, const void* values, int64_t nse_values,
                        const void* fill, const int64_t* src, int64_t n, size_t row_bytes,
                        cudaStream_t s) {
  const int64_t words = (int64_t)(row_bytes / sizeof(Word));
  gather_kernel<Word><<<blocks_for(n * words), kThreads, 0, s>>>(
      r, static_cast<Word*>(out), static_cast<const Word*>(values), nse_values,
      static_cast<const Word*>(fill), src, n, words);
  return launched();
}

}  // namespace

extern "C" sf_status sf_cuda_union_plan(sf_cuda_report* report, int64_t* linear_out,
                                        int64_t* src_a, int64_t* src_b, const int64_t* linear_a,
                                        int64_t nse_a, const int64_t* linear_b, int64_t nse_b,
                                        void* workspace, size_t* workspace_bytes, void* stream) {
  SF_CUDA_FAIL_IF(workspace_bytes == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse_a < 0 || nse_b < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF((size_t)nse_a >= SIZE_MAX / 32, SF_ERR_NO_MEMORY);
  const cudaStream_t s = as_stream(stream);
  // Pieces: match, common (nse_a + 1 each), then CUB's scan scratch.
  const int64_t n1 = nse_a + 1;
  const size_t piece = aligned_bytes((size_t)n1 * sizeof(int64_t));
  size_t scan_bytes = 0;
  SF_CUDA_TRY(checked(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, (const int64_t*)nullptr,
                                                    (int64_t*)nullptr, n1, s)));
  const size_t need = 2 * piece + aligned_bytes(scan_bytes);
  if (workspace == nullptr) {
    *workspace_bytes = need;
    return SF_OK;
  }
  SF_CUDA_FAIL_IF(*workspace_bytes < need, SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(report == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF((linear_a == nullptr && nse_a > 0) || (linear_b == nullptr && nse_b > 0),
                  SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF((nse_a > 0 || nse_b > 0) &&
                      (linear_out == nullptr || src_a == nullptr || src_b == nullptr),
                  SF_ERR_NULL_POINTER);
  char* w = static_cast<char*>(workspace);
  auto* match = reinterpret_cast<int64_t*>(w);
  auto* common = reinterpret_cast<int64_t*>(w + piece);
  size_t scratch_bytes = need - 2 * piece;

  SF_CUDA_TRY(report_init(report, 0, s));
  SF_CUDA_TRY(checked(cudaMemsetAsync(match, 0, (size_t)n1 * sizeof(int64_t), s)));
  if (nse_a > 0) {
    match_kernel<<<blocks_for(nse_a), kThreads, 0, s>>>(&report->first, match, linear_a,
                                                         nse_a, linear_b, nse_b);
    SF_CUDA_TRY(launched());
  }
  if (nse_b > 0) {  // only B's order: A's threads found the matches
    match_kernel<<<blocks_for(nse_b), kThreads, 0, s>>>(&report->second, nullptr,
                                                         linear_b, nse_b, linear_a, nse_a);
    SF_CUDA_TRY(launched());
  }
  SF_CUDA_TRY(checked(
      cub::DeviceScan::ExclusiveSum(w + 2 * piece, scratch_bytes, match, common, n1, s)));
  SF_CUDA_TRY(launched());
  if (nse_a > 0) {
    scatter_a_kernel<<<blocks_for(nse_a), kThreads, 0, s>>>(linear_out, src_a, src_b, linear_a,
                                                             nse_a, linear_b, nse_b, match, common);
    SF_CUDA_TRY(launched());
  }
  if (nse_b > 0) {
    scatter_b_kernel<<<blocks_for(nse_b), kThreads, 0, s>>>(linear_out, src_a, src_b, linear_a,
                                                             nse_a, linear_b, nse_b, common);
    SF_CUDA_TRY(launched());
  }
  union_finish<<<1, 1, 0, s>>>(report, linear_a, nse_a, linear_b, nse_b, common);
  return launched();
}

extern "C" sf_status sf_cuda_gather_rows_with_fill(sf_cuda_report* report, void* out,
                                                   const void* values, int64_t nse_values,
                                                   const void* fill_row, const int64_t* src,
                                                   int64_t n, size_t row_bytes, void* stream) {
  SF_CUDA_FAIL_IF(report == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(n < 0 || nse_values < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(src == nullptr && n > 0, SF_ERR_NULL_POINTER);
  const cudaStream_t s = as_stream(stream);
  SF_CUDA_TRY(report_init(report, 0, s));
  if (n == 0) return SF_OK;
  if (row_bytes == 0) {  // nothing to copy, but src is still checked
    src_check_kernel<<<blocks_for(n), kThreads, 0, s>>>(report, nse_values, src, n);
  } else {
    SF_CUDA_FAIL_IF(out == nullptr || fill_row == nullptr, SF_ERR_NULL_POINTER);
    SF_CUDA_FAIL_IF(values == nullptr && nse_values > 0, SF_ERR_NULL_POINTER);
    SF_CUDA_FAIL_IF((size_t)n > SIZE_MAX / row_bytes, SF_ERR_OVERFLOW);
    // The widest word that divides the row and every pointer's address.
    const uintptr_t a = (uintptr_t)out | (uintptr_t)values | (uintptr_t)fill_row | row_bytes;
    sf_status st;
    if (a % 16 == 0) st = launch_gather<uint4>(report, out, values, nse_values, fill_row, src, n, row_bytes, s);
    else if (a % 8 == 0) st = launch_gather<uint64_t>(report, out, values, nse_values, fill_row, src, n, row_bytes, s);
    else if (a % 4 == 0) st = launch_gather<uint32_t>(report, out, values, nse_values, fill_row, src, n, row_bytes, s);
    else if (a % 2 == 0) st = launch_gather<uint16_t>(report, out, values, nse_values, fill_row, src, n, row_bytes, s);
    else st = launch_gather<uint8_t>(report, out, values, nse_values, fill_row, src, n, row_bytes, s);
    SF_CUDA_TRY(st);
  }
  SF_CUDA_TRY(launched());
  gather_finish<<<1, 1, 0, s>>>(report, src);
  return launched();
}
