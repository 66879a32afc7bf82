// sf_cuda_bsr.cu -- fill-aware BSR @ dense on the device (sparsefill_cuda.h,
// "BSR products"), the counterpart of ../cpu/sf_bsr.c. No torch headers.
//
// One thread per output element (I r + u, t): the correction f colsum[t],
// then the stored blocks of block row I in their order, each (V - f) times
// the B column -- the sum in one fixed order (deterministic), consecutive
// threads reading consecutive columns of B (coalesced). Blocks are small
// (r x c), so a thread's work is c times the blocks of its block row.
#include "sf_cuda_internal.cuh"

using namespace sf_cuda;

namespace {

template <class T>
__global__ void bsr_spmm_kernel(T* c, const int64_t* crow, const int64_t* col, const T* values,
                                int64_t nbrows, int64_t nbcols, int64_t nblocks, int64_t r,
                                int64_t bc, const T* b, int64_t ldb, int64_t n, const T* fill,
                                const T* colsum) {
  const T f = fill ? *fill : T(0);
  SF_CUDA_FOR(e, nbrows * r * n) {
    const int64_t i = e / n, t = e % n;
    const int64_t blk = i / r, u = i % r;
    T acc = colsum ? T(0) + f * colsum[t] : T(0);  // from +0, as the CPU twin
    // Stays in bounds on any input; a checked operand (the contract) has
    // every span and column valid, so nothing is skipped there.
    const int64_t lo = crow[blk], hi = crow[blk + 1];
    if (lo >= 0 && hi <= nblocks) {
      for (int64_t p = lo; p < hi; ++p) {
        const int64_t j = col[p];
        if (j < 0 || j >= nbcols) continue;
        const T* vp = values + (p * r + u) * bc;
        const T* bp = b + j * bc * ldb + t;
        for (int64_t v = 0; v < bc; ++v) acc += (vp[v] - f) * bp[v * ldb];
      }
    }
    c[e] = acc;
  }
}

}  // namespace

// ---- the typed entry point --------------------------------------------------------------
// generated/sf_cuda_bsr_entries.inc (tools/codegen/native.yaml) defines the C
// ABI's _f32 / _f64 twins that call it.

namespace entry {

template <class T>
sf_status bsr_spmm(T* c, const int64_t* crow, const int64_t* col, const T* values, int64_t nbrows,
                   int64_t nbcols, int64_t nblocks, int64_t r, int64_t bc, const T* b, int64_t ldb,
                   int64_t n, const T* fill, const T* colsum, void* stream) {
  SF_CUDA_FAIL_IF(nbrows < 0 || nbcols < 0 || nblocks < 0 || r < 0 || bc < 0 || n < 0,
                  SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(ldb < n, SF_ERR_INVALID_ARGUMENT);
  int64_t outputs = 0;
  SF_CUDA_FAIL_IF(__builtin_mul_overflow(nbrows, r, &outputs) ||
                      __builtin_mul_overflow(outputs, n, &outputs),
                  SF_ERR_OVERFLOW);
  if (outputs == 0) return SF_OK;
  SF_CUDA_FAIL_IF(c == nullptr || crow == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nblocks > 0 && (col == nullptr || values == nullptr), SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nbcols > 0 && bc > 0 && b == nullptr, SF_ERR_NULL_POINTER);
  bsr_spmm_kernel<T><<<blocks_for(outputs), kThreads, 0, as_stream(stream)>>>(
      c, crow, col, values, nbrows, nbcols, nblocks, r, bc, b, ldb, n, fill, colsum);
  return launched();
}

}  // namespace entry

#include "generated/sf_cuda_bsr_entries.inc"
