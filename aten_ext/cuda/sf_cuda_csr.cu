// sf_cuda_csr.cu -- CSR validation and row pointer <-> row index conversions
// on the device, behind the C ABI of sparsefill_cuda.h. No torch headers.
#include "sf_cuda_internal.cuh"

using namespace sf_cuda;

namespace {

// The first row i whose pointer drops (crow[i + 1] < crow[i]) goes to r->first.
__global__ void crow_scan_kernel(sf_cuda_report* r, const int64_t* crow, int64_t nrows) {
  SF_CUDA_FOR(i, nrows) {
    if (crow[i + 1] < crow[i]) note_bad(&r->first, (uint64_t)i);
  }
}

// Row of element k under crow: the number of crow[1..nrows] entries <= k.
// Reads stay in crow[1..nrows] whatever crow holds.
__device__ inline int64_t row_of(const int64_t* crow, int64_t nrows, int64_t k) {
  return upper_bound(crow + 1, nrows, k);
}

// Column rules per element: the first bad element goes to r->second. Which
// row an element is in comes from crow; only meaningful once crow passed,
// which the finish kernel checks first.
__global__ void col_scan_kernel(sf_cuda_report* r, const int64_t* crow, const int64_t* col,
                                int64_t nrows, int64_t ncols, int64_t nse) {
  SF_CUDA_FOR(k, nse) {
    const int64_t c = col[k];
    bool bad = c < 0 || c >= ncols;
    if (!bad && k > 0) {
      const int64_t row = row_of(crow, nrows, k);
      bad = row < nrows && k > crow[row] && c <= col[k - 1];
    }
    if (bad) note_bad(&r->second, (uint64_t)k);
  }
}

// In sf_csr_check's order: first entry, drops, last entry, then columns.
// nse < 0: crow alone (no last-entry or column rules).
__global__ void csr_finish(sf_cuda_report* r, const int64_t* crow, const int64_t* col,
                           int64_t nrows, int64_t ncols, int64_t nse) {
  r->result = crow[nrows];
  if (crow[0] != 0) {
    set_site(r, SF_ERR_CROW_FIRST, 0, -1, crow[0]);
  } else if (r->first != kNone) {
    const int64_t i = (int64_t)r->first;
    set_site(r, SF_ERR_CROW_DECREASING, i, -1, crow[i + 1]);
  } else if (nse >= 0 && crow[nrows] != nse) {
    set_site(r, SF_ERR_CROW_LAST, nrows, -1, crow[nrows]);
  } else if (nse >= 0 && r->second != kNone) {
    const int64_t k = (int64_t)r->second;
    const int64_t c = col[k];
    set_site(r, c < 0 ? SF_ERR_INDEX_NEGATIVE
                      : c >= ncols ? SF_ERR_INDEX_OUT_OF_RANGE : SF_ERR_COL_UNSORTED,
             k, 1, c);
  }
}

__global__ void rows_from_crow_kernel(int64_t* rows, const int64_t* crow, int64_t nrows,
                                      int64_t nse) {
  SF_CUDA_FOR(k, nse) rows[k] = row_of(crow, nrows, k);
}

__global__ void rows_scan_kernel(sf_cuda_report* r, const int64_t* rows, int64_t nse,
                                 int64_t nrows) {
  SF_CUDA_FOR(k, nse) {
    const int64_t row = rows[k];
    if (row < 0 || row >= nrows || (k > 0 && row < rows[k - 1])) note_bad(&r->first, (uint64_t)k);
  }
}

// crow[i] = first element whose row is >= i. Reads stay in rows[0..nse).
__global__ void crow_kernel(int64_t* crow, const int64_t* rows, int64_t nse, int64_t nrows) {
  SF_CUDA_FOR(i, nrows + 1) crow[i] = lower_bound(rows, nse, i);
}

__global__ void rows_finish(sf_cuda_report* r, const int64_t* rows, int64_t nrows) {
  if (r->first == kNone) return;
  const int64_t k = (int64_t)r->first;
  const int64_t row = rows[k];
  set_site(r, row < 0 ? SF_ERR_INDEX_NEGATIVE
                      : row >= nrows ? SF_ERR_INDEX_OUT_OF_RANGE : SF_ERR_NOT_COALESCED,
           k, -1, row);
}

sf_status csr_scan(sf_cuda_report* report, const int64_t* crow, const int64_t* col, int64_t nrows,
                   int64_t ncols, int64_t nse, void* stream) {
  SF_CUDA_FAIL_IF(report == nullptr || crow == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nrows < 0 || ncols < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(col == nullptr && nse > 0, SF_ERR_NULL_POINTER);
  const cudaStream_t s = as_stream(stream);
  SF_CUDA_TRY(report_init(report, 0, s));
  if (nrows > 0) {
    crow_scan_kernel<<<blocks_for(nrows), kThreads, 0, s>>>(report, crow, nrows);
    SF_CUDA_TRY(launched());
  }
  if (nse > 0) {
    col_scan_kernel<<<blocks_for(nse), kThreads, 0, s>>>(report, crow, col, nrows, ncols, nse);
    SF_CUDA_TRY(launched());
  }
  csr_finish<<<1, 1, 0, s>>>(report, crow, col, nrows, ncols, nse);
  return launched();
}

// ---- operand checks --------------------------------------------------------------

// Row i's span [crow[i], crow[i + 1]) must lie in [0, nse], non-decreasing
// (sf_row_span's rule); the first bad row goes to r->first.
__global__ void operand_rows_kernel(sf_cuda_report* r, const int64_t* crow, int64_t nrows,
                                    int64_t nse) {
  SF_CUDA_FOR(i, nrows) {
    const int64_t lo = crow[i], hi = crow[i + 1];
    if (lo < 0 || hi < lo || hi > nse) note_bad(&r->first, (uint64_t)i);
  }
}

// Columns of the elements the rows cover, [crow[0], crow[nrows]) clamped to
// [0, nse); the first bad one goes to r->second.
__global__ void operand_cols_kernel(sf_cuda_report* r, const int64_t* crow, const int64_t* col,
                                    int64_t nrows, int64_t ncols, int64_t nse) {
  const int64_t lo = crow[0] < 0 ? 0 : crow[0];
  const int64_t hi = crow[nrows] > nse ? nse : crow[nrows];
  SF_CUDA_FOR(p, nse) {
    if (p < lo || p >= hi) continue;
    const int64_t c = col[p];
    if (c < 0 || c >= ncols) note_bad(&r->second, (uint64_t)p);
  }
}

// In the CPU kernels' order: first entry, last entry (full only), row spans,
// columns.
__global__ void operand_finish(sf_cuda_report* r, const int64_t* crow, const int64_t* col,
                               int64_t nrows, int64_t nse, int full) {
  r->result = crow[nrows];
  if (full && crow[0] != 0) {
    set_site(r, SF_ERR_CROW_FIRST, 0, -1, crow[0]);
  } else if (full && crow[nrows] != nse) {
    set_site(r, SF_ERR_CROW_LAST, nrows, -1, crow[nrows]);
  } else if (r->first != kNone) {
    const int64_t i = (int64_t)r->first;
    set_site(r, SF_ERR_CROW_DECREASING, i, -1, crow[i + 1]);
  } else if (r->second != kNone) {
    const int64_t p = (int64_t)r->second;
    set_site(r, SF_ERR_INDEX_OUT_OF_RANGE, p, 1, col[p]);
  }
}

}  // namespace

namespace sf_cuda {

sf_status operand_scan(sf_cuda_report* report, const int64_t* crow, const int64_t* col,
                       int64_t nrows, int64_t ncols, int64_t nse, int full, cudaStream_t s) {
  SF_CUDA_FAIL_IF(report == nullptr || crow == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nrows < 0 || ncols < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(col == nullptr && nse > 0, SF_ERR_NULL_POINTER);
  SF_CUDA_TRY(report_init(report, 0, s));
  if (nrows > 0) {
    operand_rows_kernel<<<blocks_for(nrows), kThreads, 0, s>>>(report, crow, nrows, nse);
    SF_CUDA_TRY(launched());
  }
  if (nse > 0) {
    operand_cols_kernel<<<blocks_for(nse), kThreads, 0, s>>>(report, crow, col, nrows, ncols, nse);
    SF_CUDA_TRY(launched());
  }
  operand_finish<<<1, 1, 0, s>>>(report, crow, col, nrows, nse, full);
  return launched();
}

}  // namespace sf_cuda

namespace {

}  // namespace

extern "C" sf_status sf_cuda_crow_check(sf_cuda_report* report, const int64_t* crow,
                                        int64_t nrows, void* stream) {
  return csr_scan(report, crow, nullptr, nrows, 0, -1, stream);
}

extern "C" sf_status sf_cuda_csr_check(sf_cuda_report* report, const int64_t* crow,
                                       const int64_t* col, int64_t nrows, int64_t ncols,
                                       int64_t nse, void* stream) {
  SF_CUDA_FAIL_IF(nse < 0, SF_ERR_NEGATIVE_SIZE);
  return csr_scan(report, crow, col, nrows, ncols, nse, stream);
}

extern "C" sf_status sf_cuda_csr_rows_from_crow(int64_t* rows, const int64_t* crow,
                                                int64_t nrows, int64_t nse, void* stream) {
  SF_CUDA_FAIL_IF(nrows < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(crow == nullptr, SF_ERR_NULL_POINTER);  // crow has nrows + 1 >= 1 entries
  SF_CUDA_FAIL_IF(rows == nullptr && nse > 0, SF_ERR_NULL_POINTER);
  if (nse == 0) return SF_OK;
  rows_from_crow_kernel<<<blocks_for(nse), kThreads, 0, as_stream(stream)>>>(rows, crow, nrows,
                                                                            nse);
  return launched();
}

extern "C" sf_status sf_cuda_crow_from_rows(sf_cuda_report* report, int64_t* crow,
                                            const int64_t* rows, int64_t nse, int64_t nrows,
                                            void* stream) {
  SF_CUDA_FAIL_IF(nse < 0 || nrows < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(report == nullptr || crow == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(rows == nullptr && nse > 0, SF_ERR_NULL_POINTER);
  const cudaStream_t s = as_stream(stream);
  SF_CUDA_TRY(report_init(report, 0, s));
  if (nse > 0) {
    rows_scan_kernel<<<blocks_for(nse), kThreads, 0, s>>>(report, rows, nse, nrows);
    SF_CUDA_TRY(launched());
  }
  crow_kernel<<<blocks_for(nrows + 1), kThreads, 0, s>>>(crow, rows, nse, nrows);
  SF_CUDA_TRY(launched());
  if (nse == 0) return SF_OK;
  rows_finish<<<1, 1, 0, s>>>(report, rows, nrows);
  return launched();
}

extern "C" sf_status sf_cuda_csr_operand_check(sf_cuda_report* report, const int64_t* crow,
                                               const int64_t* col, int64_t nrows, int64_t ncols,
                                               int64_t nse, int full, void* stream) {
  return operand_scan(report, crow, col, nrows, ncols, nse, full, as_stream(stream));
}
