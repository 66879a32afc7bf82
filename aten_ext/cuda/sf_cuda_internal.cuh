// sf_cuda_internal.cuh -- helpers shared by the CUDA core's files (not installed).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../sparsefill_cuda.h"

namespace sf_cuda {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t(1) << 20;  // beyond that, threads stride
constexpr uint64_t kNone = ~uint64_t(0);          // "no bad element" in a report key

inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  if (b > kMaxBlocks) b = kMaxBlocks;
  return (unsigned)(b < 1 ? 1 : b);
}

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// After every launch. Peek, not Get: the CUDA error stays for the caller's own check.
inline sf_status launched() {
  return cudaPeekAtLastError() == cudaSuccess ? SF_OK : SF_ERR_INVALID_ARGUMENT;
}
inline sf_status checked(cudaError_t e) { return e == cudaSuccess ? SF_OK : SF_ERR_INVALID_ARGUMENT; }

#define SF_CUDA_TRY(expr)               \
  do {                                  \
    const sf_status s_ = (expr);        \
    if (s_ != SF_OK) return s_;         \
  } while (0)

#define SF_CUDA_FAIL_IF(cond, status) \
  do {                                \
    if (cond) return (status);        \
  } while (0)

// Grid-stride loop over [0, n).
#define SF_CUDA_FOR(i, n)                                                          \
  for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);         \
       i += (int64_t)gridDim.x * blockDim.x)

// Sizes travel by value, as a kernel argument.
struct Dims {
  int64_t v[SF_CUDA_MAX_DIMS];
};

// Host side: sizes (host array) into Dims, with the checks of sf_sizes_numel.
inline sf_status make_dims(Dims* out, int64_t* numel, const int64_t* sizes, int64_t ndim) {
  SF_CUDA_FAIL_IF(ndim < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(ndim > SF_CUDA_MAX_DIMS, SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(sizes == nullptr && ndim > 0, SF_ERR_NULL_POINTER);
  int64_t n = 1;
  for (int64_t d = 0; d < ndim; ++d) {
    SF_CUDA_FAIL_IF(sizes[d] < 0, SF_ERR_NEGATIVE_SIZE);
    SF_CUDA_FAIL_IF(__builtin_mul_overflow(n, sizes[d], &n), SF_ERR_OVERFLOW);
    out->v[d] = sizes[d];
  }
  *numel = n;
  return SF_OK;
}

// Record a bad element: the report keeps the smallest key (the first in order).
__device__ inline void note_bad(uint64_t* key_slot, uint64_t key) {
  atomicMin(reinterpret_cast<unsigned long long*>(key_slot), (unsigned long long)key);
}

__device__ inline void set_site(sf_cuda_report* r, sf_status st, int64_t position, int64_t dim,
                                int64_t value) {
  r->status = st;
  r->position = position;
  r->dim = dim;
  r->value = value;
}

// First index in a[0..n) with a[index] >= x (n when none).
__device__ inline int64_t lower_bound(const int64_t* a, int64_t n, int64_t x) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (a[mid] < x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// First index in a[0..n) with a[index] > x (n when none).
__device__ inline int64_t upper_bound(const int64_t* a, int64_t n, int64_t x) {
  int64_t lo = 0, hi = n;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (a[mid] <= x) lo = mid + 1; else hi = mid;
  }
  return lo;
}

// Every report starts here: no error, no bad key, the op's initial result.
// static: each file has its own copy (no relocatable device code needed).
static __global__ void report_init_kernel(sf_cuda_report* r, int64_t result) {
  r->status = SF_OK;
  r->position = r->dim = r->value = -1;
  r->result = result;
  r->first = r->second = kNone;
  r->unused = 0;
}

inline sf_status report_init(sf_cuda_report* r, int64_t result, cudaStream_t stream) {
  report_init_kernel<<<1, 1, 0, stream>>>(r, result);
  return launched();
}

// Workspace carving: each piece starts on a 256-byte boundary.
inline size_t aligned_bytes(size_t n) { return (n + 255) & ~size_t(255); }

// Stable sort of nse int64 keys in [0, nbuckets) into buckets
// (sf_cuda_sort.cu): perm[nse], the positions in key order (ties in position
// order), and ptr[nbuckets + 1], each bucket's first sorted position. Keys
// outside the range sort somewhere and are the caller's to report.
// Workspace as the C ABI's: workspace == NULL only stores the bytes needed.
sf_status sort_into_buckets(int64_t* perm, int64_t* ptr, const int64_t* keys, int64_t nse,
                            int64_t nbuckets, void* workspace, size_t* workspace_bytes,
                            cudaStream_t s);

// Row of element p: the number of crow[1..nrows] entries <= p (in [0, nrows];
// nrows when p lies after every row). Reads stay in crow[1..nrows].
__device__ inline int64_t row_of(const int64_t* crow, int64_t nrows, int64_t p) {
  return upper_bound(crow + 1, nrows, p);
}

// A CSR operand's checks, in the CPU kernels' order (sf_cuda_csr_operand_check's
// contract, sparsefill_cuda.h), into `report`; sf_cuda_csr.cu.
sf_status operand_scan(sf_cuda_report* report, const int64_t* crow, const int64_t* col,
                       int64_t nrows, int64_t ncols, int64_t nse, int full, cudaStream_t s);

}  // namespace sf_cuda
