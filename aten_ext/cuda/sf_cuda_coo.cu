// sf_cuda_coo.cu -- COO validation, (de)linearisation and the coalescing plan
// on the device, behind the C ABI of sparsefill_cuda.h. No torch headers.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "sf_cuda_internal.cuh"

using namespace sf_cuda;

namespace {

// One thread per element k: bounds of each index (the first bad one in
// (element, dimension) order goes to r->first as k * sparse_dim + d), the
// linear index, and whether it exceeds its predecessor's (recomputed from
// the indices: one pass, no neighbour exchange).
__global__ void coo_scan_kernel(sf_cuda_report* r, int64_t* linear, const int64_t* indices,
                                int64_t sparse_dim, int64_t nse, Dims sizes) {
  SF_CUDA_FOR(k, nse) {
    int64_t lin = 0;
    uint64_t prev = 0;  // unsigned: the predecessor may hold bad indices
    bool ok = true;
    for (int64_t d = 0; d < sparse_dim; ++d) {
      const int64_t i = indices[d * nse + k];
      if (i < 0 || i >= sizes.v[d]) {
        note_bad(&r->first, (uint64_t)(k * sparse_dim + d));
        ok = false;
        break;
      }
      lin = lin * sizes.v[d] + i;  // < numel: no overflow
      if (k > 0) prev = prev * (uint64_t)sizes.v[d] + (uint64_t)indices[d * nse + k - 1];
    }
    if (!ok) continue;
    if (linear != nullptr) linear[k] = lin;
    // All writers store 0: a benign race. With sparse_dim == 0 every
    // element sits at the one position, so nse > 1 is not coalesced.
    if (k > 0 && (uint64_t)lin <= prev) r->result = 0;
  }
}

__global__ void coo_scan_finish(sf_cuda_report* r, const int64_t* indices, int64_t sparse_dim,
                                int64_t nse) {
  if (r->first == kNone) return;
  const int64_t k = (int64_t)(r->first / (uint64_t)sparse_dim);
  const int64_t d = (int64_t)(r->first % (uint64_t)sparse_dim);
  const int64_t v = indices[d * nse + k];
  set_site(r, v < 0 ? SF_ERR_INDEX_NEGATIVE : SF_ERR_INDEX_OUT_OF_RANGE, k, d, v);
  r->result = 0;
}

__global__ void delinearize_kernel(sf_cuda_report* r, int64_t* indices, const int64_t* linear,
                                   int64_t sparse_dim, int64_t nse, Dims sizes, int64_t numel) {
  SF_CUDA_FOR(k, nse) {
    int64_t rest = linear[k];  // read before row 0 (which may be `linear`) is written
    if (rest < 0 || rest >= numel) {
      if (r != nullptr) note_bad(&r->first, (uint64_t)k);
      continue;
    }
    for (int64_t d = sparse_dim - 1; d >= 1; --d) {  // the last dimension varies fastest
      const int64_t q = rest / sizes.v[d];
      indices[d * nse + k] = rest - q * sizes.v[d];
      rest = q;
    }
    if (sparse_dim > 0) indices[k] = rest;
  }
}

__global__ void delinearize_finish(sf_cuda_report* r, const int64_t* linear) {
  if (r->first == kNone) return;
  const int64_t k = (int64_t)r->first;
  // linear[k] was out of range, so it was never overwritten in place.
  set_site(r, linear[k] < 0 ? SF_ERR_INDEX_NEGATIVE : SF_ERR_INDEX_OUT_OF_RANGE, k, -1,
           linear[k]);
}

__global__ void iota_kernel(int64_t* out, int64_t n) {
  SF_CUDA_FOR(k, n) out[k] = k;
}

// head[k] = 1 where a run of equal sorted keys starts.
__global__ void run_heads_kernel(int64_t* head, const unsigned long long* key, int64_t n) {
  SF_CUDA_FOR(k, n) head[k] = (k == 0 || key[k] != key[k - 1]) ? 1 : 0;
}

// run[k] = inclusive count of heads = 1 + slot of sorted element k.
__global__ void plan_scatter_kernel(sf_cuda_report* r, int64_t* unique_linear, int64_t* segment,
                                    const unsigned long long* key, const int64_t* pos,
                                    const int64_t* head, const int64_t* run, int64_t n) {
  SF_CUDA_FOR(k, n) {
    const int64_t slot = run[k] - 1;
    segment[pos[k]] = slot;
    if (head[k]) unique_linear[slot] = (int64_t)key[k];
    if (k == n - 1) r->result = slot + 1;
  }
}

}  // namespace

extern "C" sf_status sf_cuda_coo_check(sf_cuda_report* report, int64_t* linear,
                                       const int64_t* indices, int64_t sparse_dim, int64_t nse,
                                       const int64_t* sizes, void* stream) {
  SF_CUDA_FAIL_IF(report == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse < 0, SF_ERR_NEGATIVE_SIZE);
  Dims dims;
  int64_t numel = 0;
  SF_CUDA_TRY(make_dims(&dims, &numel, sizes, sparse_dim));
  SF_CUDA_FAIL_IF(indices == nullptr && sparse_dim > 0 && nse > 0, SF_ERR_NULL_POINTER);
  const cudaStream_t s = as_stream(stream);
  SF_CUDA_TRY(report_init(report, 1, s));
  if (nse == 0) return SF_OK;
  coo_scan_kernel<<<blocks_for(nse), kThreads, 0, s>>>(report, linear, indices, sparse_dim, nse,
                                                        dims);
  SF_CUDA_TRY(launched());
  if (sparse_dim == 0) return SF_OK;  // nothing can be out of range
  coo_scan_finish<<<1, 1, 0, s>>>(report, indices, sparse_dim, nse);
  return launched();
}

extern "C" sf_status sf_cuda_coo_delinearize(sf_cuda_report* report, int64_t* indices,
                                             const int64_t* linear, int64_t sparse_dim,
                                             int64_t nse, const int64_t* sizes, void* stream) {
  SF_CUDA_FAIL_IF(nse < 0, SF_ERR_NEGATIVE_SIZE);
  Dims dims;
  int64_t numel = 0;
  SF_CUDA_TRY(make_dims(&dims, &numel, sizes, sparse_dim));
  SF_CUDA_FAIL_IF(linear == nullptr && nse > 0, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(indices == nullptr && sparse_dim > 0 && nse > 0, SF_ERR_NULL_POINTER);
  const cudaStream_t s = as_stream(stream);
  if (report != nullptr) SF_CUDA_TRY(report_init(report, 0, s));
  if (nse == 0) return SF_OK;
  delinearize_kernel<<<blocks_for(nse), kThreads, 0, s>>>(report, indices, linear, sparse_dim,
                                                           nse, dims, numel);
  SF_CUDA_TRY(launched());
  if (report == nullptr) return SF_OK;
  delinearize_finish<<<1, 1, 0, s>>>(report, linear);
  return launched();
}

extern "C" sf_status sf_cuda_coalesce_plan(sf_cuda_report* report, int64_t* unique_linear,
                                           int64_t* segment, const int64_t* linear, int64_t nse,
                                           int64_t max_key, void* workspace,
                                           size_t* workspace_bytes, void* stream) {
  SF_CUDA_FAIL_IF(workspace_bytes == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse < 0 || max_key < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF((size_t)nse > SIZE_MAX / 64, SF_ERR_NO_MEMORY);
  const cudaStream_t s = as_stream(stream);
  // Only the bits that max_key uses are sorted on.
  int end_bit = 1;
  while (end_bit < 63 && (max_key >> end_bit) != 0) ++end_bit;
  const auto* keys_in = reinterpret_cast<const unsigned long long*>(linear);
  // Pieces: sorted keys, positions in, sorted positions, run heads, run
  // counts (nse each), then CUB's scratch (the larger of sort and scan).
  const size_t piece = aligned_bytes((size_t)nse * sizeof(int64_t));
  size_t sort_bytes = 0, scan_bytes = 0;
  SF_CUDA_TRY(checked(cub::DeviceRadixSort::SortPairs(
      nullptr, sort_bytes, keys_in, (unsigned long long*)nullptr, (const int64_t*)nullptr,
      (int64_t*)nullptr, nse, 0, end_bit, s)));
  SF_CUDA_TRY(checked(cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, (const int64_t*)nullptr,
                                                    (int64_t*)nullptr, nse, s)));
  const size_t need = 5 * piece + aligned_bytes(sort_bytes > scan_bytes ? sort_bytes : scan_bytes);
  if (workspace == nullptr) {
    *workspace_bytes = need;
    return SF_OK;
  }
  SF_CUDA_FAIL_IF(*workspace_bytes < need, SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(report == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse > 0 && (linear == nullptr || unique_linear == nullptr || segment == nullptr),
                  SF_ERR_NULL_POINTER);
  SF_CUDA_TRY(report_init(report, 0, s));
  if (nse == 0) return SF_OK;
  char* w = static_cast<char*>(workspace);
  auto* keys_sorted = reinterpret_cast<unsigned long long*>(w);
  auto* pos_in = reinterpret_cast<int64_t*>(w + piece);
  auto* pos_sorted = reinterpret_cast<int64_t*>(w + 2 * piece);
  auto* head = reinterpret_cast<int64_t*>(w + 3 * piece);
  auto* run = reinterpret_cast<int64_t*>(w + 4 * piece);
  void* scratch = w + 5 * piece;
  size_t scratch_bytes = need - 5 * piece;

  iota_kernel<<<blocks_for(nse), kThreads, 0, s>>>(pos_in, nse);
  SF_CUDA_TRY(launched());
  SF_CUDA_TRY(checked(cub::DeviceRadixSort::SortPairs(scratch, scratch_bytes, keys_in, keys_sorted,
                                                      pos_in, pos_sorted, nse, 0, end_bit, s)));
  SF_CUDA_TRY(launched());
  run_heads_kernel<<<blocks_for(nse), kThreads, 0, s>>>(head, keys_sorted, nse);
  SF_CUDA_TRY(launched());
  scratch_bytes = need - 5 * piece;
  SF_CUDA_TRY(checked(cub::DeviceScan::InclusiveSum(scratch, scratch_bytes, head, run, nse, s)));
  SF_CUDA_TRY(launched());
  plan_scatter_kernel<<<blocks_for(nse), kThreads, 0, s>>>(report, unique_linear, segment,
                                                            keys_sorted, pos_sorted, head, run, nse);
  return launched();
}
