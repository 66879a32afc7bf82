// sf_cuda_sort.cu -- the stable sort into buckets that the CSR transpose
// (bucket = column) and slice_plan (bucket = slice) share: CUB's radix sort
// of the keys with their positions, then each bucket's start by binary search.
#include <cub/device/device_radix_sort.cuh>

#include "sf_cuda_internal.cuh"

namespace sf_cuda {
namespace {

__global__ void iota_kernel(int64_t* out, int64_t n) {
  SF_CUDA_FOR(k, n) out[k] = k;
}

// ptr[b] = the first sorted position whose key is >= b. Keys outside
// [0, nbuckets) (callers report those) only shift the pointers.
__global__ void bucket_ptr_kernel(int64_t* ptr, const int64_t* sorted, int64_t nse,
                                  int64_t nbuckets) {
  SF_CUDA_FOR(b, nbuckets + 1) ptr[b] = lower_bound(sorted, nse, b);
}

}  // namespace

sf_status sort_into_buckets(int64_t* perm, int64_t* ptr, const int64_t* keys, int64_t nse,
                            int64_t nbuckets, void* workspace, size_t* workspace_bytes,
                            cudaStream_t s) {
  SF_CUDA_FAIL_IF(workspace_bytes == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse < 0 || nbuckets < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF((size_t)nse > SIZE_MAX / 64, SF_ERR_NO_MEMORY);
  int end_bit = 1;  // the bits that keys in [0, nbuckets) use
  while (end_bit < 63 && ((nbuckets - 1) >> end_bit) > 0) ++end_bit;
  const auto* keys_in = reinterpret_cast<const unsigned long long*>(keys);
  // Pieces: sorted keys, positions in (nse each), then CUB's scratch.
  const size_t piece = aligned_bytes((size_t)nse * sizeof(int64_t));
  size_t sort_bytes = 0;
  SF_CUDA_TRY(checked(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, keys_in, (unsigned long long*)nullptr, (const int64_t*)nullptr,
      (int64_t*)nullptr, nse, 0, end_bit, s)));
  const size_t need = 2 * piece + aligned_bytes(sort_bytes);
  if (workspace == nullptr) {
    *workspace_bytes = need;
    return SF_OK;
  }
  SF_CUDA_FAIL_IF(*workspace_bytes < need, SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(ptr == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse > 0 && (perm == nullptr || keys == nullptr), SF_ERR_NULL_POINTER);
  char* w = static_cast<char*>(workspace);
  auto* keys_sorted = reinterpret_cast<unsigned long long*>(w);
  if (nse > 0) {
    auto* pos_in = reinterpret_cast<int64_t*>(w + piece);
    size_t scratch_bytes = need - 2 * piece;
    iota_kernel<<<blocks_for(nse), kThreads, 0, s>>>(pos_in, nse);
    SF_CUDA_TRY(launched());
    // Radix sort is stable: within a bucket, positions stay increasing, as
    // the CPU's counting sorts leave them.
    SF_CUDA_TRY(checked(cub::DeviceRadixSort::SortPairs(w + 2 * piece, scratch_bytes, keys_in,
                                                        keys_sorted, pos_in, perm, nse, 0,
                                                        end_bit, s)));
    SF_CUDA_TRY(launched());
  }
  bucket_ptr_kernel<<<blocks_for(nbuckets + 1), kThreads, 0, s>>>(
      ptr, reinterpret_cast<const int64_t*>(keys_sorted), nse, nbuckets);
  return launched();
}

}  // namespace sf_cuda
