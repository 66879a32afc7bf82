// sf_cuda_spgemm.cu -- the fill-0 SpGEMM C = A @ B through cuSPARSE SpGEMM, in
// its stages (sparsefill_cuda.h: 32-bit indices, sizes over INT32_MAX refused),
// behind the C ABI. No torch headers.
#include "sf_cuda_cusparse.cuh"

#include <climits>
#include <new>

using namespace sf_cuda;

// ---- the SpGEMM state -----------------------------------------------------------------

struct sf_cuda_spgemm {
  cusparseHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  cudaDataType dt = CUDA_R_32F;
  cusparseConstSpMatDescr_t a = nullptr, b = nullptr;
  cusparseSpMatDescr_t c = nullptr;
  cusparseSpGEMMDescr_t op = nullptr;
  float one_f = 1.f, zero_f = 0.f;
  double one_d = 1.0, zero_d = 0.0;
  const void* alpha() const { return dt == CUDA_R_64F ? (const void*)&one_d : (const void*)&one_f; }
  const void* beta() const { return dt == CUDA_R_64F ? (const void*)&zero_d : (const void*)&zero_f; }
  ~sf_cuda_spgemm() {
    if (op) cusparseSpGEMM_destroyDescr(op);
    if (a) cusparseDestroySpMat(a);
    if (b) cusparseDestroySpMat(b);
    if (c) cusparseDestroySpMat(c);
  }
};

// ---- the typed entry points -------------------------------------------------------------
// One template per entry; generated/sf_cuda_spgemm_entries.inc
// (tools/codegen/native.yaml) defines the C ABI's _f32 / _f64 twins.

namespace entry {

template <class T>
sf_status spgemm_create(sf_cuda_spgemm** state, int* cusparse_status, void* cusparse_handle,
                        int64_t m, int64_t k, int64_t n, const int32_t* crow_a,
                        const int32_t* col_a, const T* val_a, int64_t nse_a, const int32_t* crow_b,
                        const int32_t* col_b, const T* val_b, int64_t nse_b, void* stream) {
  if (cusparse_status != nullptr) *cusparse_status = (int)CUSPARSE_STATUS_SUCCESS;
  SF_CUDA_FAIL_IF(state == nullptr, SF_ERR_NULL_POINTER);
  *state = nullptr;
  SF_CUDA_FAIL_IF(m < 0 || k < 0 || n < 0 || nse_a < 0 || nse_b < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(m > INT32_MAX || k > INT32_MAX || n > INT32_MAX || nse_a > INT32_MAX ||
                      nse_b > INT32_MAX,
                  SF_ERR_OVERFLOW);
  SF_CUDA_FAIL_IF(m == 0 || n == 0 || nse_a == 0 || nse_b == 0, SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(cusparse_handle == nullptr || crow_a == nullptr || col_a == nullptr ||
                      val_a == nullptr || crow_b == nullptr || col_b == nullptr ||
                      val_b == nullptr,
                  SF_ERR_NULL_POINTER);
  auto* st = new (std::nothrow) sf_cuda_spgemm;
  SF_CUDA_FAIL_IF(st == nullptr, SF_ERR_NO_MEMORY);
  *state = st;  // the caller destroys it, also after an error below
  st->handle = static_cast<cusparseHandle_t>(cusparse_handle);
  st->stream = as_stream(stream);
  st->dt = real_type<T>();
  SF_CUDA_TRY(bind_handle(st->handle, st->stream, cusparse_status));
  SF_CUSPARSE_TRY(cusparseCreateConstCsr(&st->a, m, k, nse_a, crow_a, col_a, val_a,
                                         CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                         CUSPARSE_INDEX_BASE_ZERO, st->dt),
                  cusparse_status);
  SF_CUSPARSE_TRY(cusparseCreateConstCsr(&st->b, k, n, nse_b, crow_b, col_b, val_b,
                                         CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                         CUSPARSE_INDEX_BASE_ZERO, st->dt),
                  cusparse_status);
  SF_CUSPARSE_TRY(cusparseCreateCsr(&st->c, m, n, 0, nullptr, nullptr, nullptr,
                                    CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                    CUSPARSE_INDEX_BASE_ZERO, st->dt),
                  cusparse_status);
  SF_CUSPARSE_TRY(cusparseSpGEMM_createDescr(&st->op), cusparse_status);
  return SF_OK;
}

template <class T>
sf_status spgemm_copy(sf_cuda_spgemm* st, int* cusparse_status, int32_t* crow_c, int32_t* col_c,
                      T* val_c) {
  if (cusparse_status != nullptr) *cusparse_status = (int)CUSPARSE_STATUS_SUCCESS;
  SF_CUDA_FAIL_IF(st == nullptr || st->op == nullptr || crow_c == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(st->dt != real_type<T>(), SF_ERR_INVALID_ARGUMENT);  // the state's own type
  SF_CUDA_TRY(bind_handle(st->handle, st->stream, cusparse_status));
  SF_CUSPARSE_TRY(cusparseCsrSetPointers(st->c, crow_c, col_c, val_c), cusparse_status);
  SF_CUSPARSE_TRY(cusparseSpGEMM_copy(st->handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                      CUSPARSE_OPERATION_NON_TRANSPOSE, st->alpha(), st->a, st->b,
                                      st->beta(), st->c, st->dt, CUSPARSE_SPGEMM_DEFAULT, st->op),
                  cusparse_status);
  return SF_OK;
}

}  // namespace entry

#include "generated/sf_cuda_spgemm_entries.inc"

// ---- the C ABI's untyped entries --------------------------------------------------------

extern "C" sf_status sf_cuda_spgemm_estimate(sf_cuda_spgemm* st, int* cusparse_status,
                                             void* workspace, size_t* workspace_bytes) {
  if (cusparse_status != nullptr) *cusparse_status = (int)CUSPARSE_STATUS_SUCCESS;
  SF_CUDA_FAIL_IF(st == nullptr || st->op == nullptr || workspace_bytes == nullptr,
                  SF_ERR_NULL_POINTER);
  SF_CUDA_TRY(bind_handle(st->handle, st->stream, cusparse_status));
  // cuSPARSE's own protocol: a NULL buffer asks for the size.
  if (workspace == nullptr) *workspace_bytes = 0;
  SF_CUSPARSE_TRY(cusparseSpGEMM_workEstimation(
                      st->handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                      CUSPARSE_OPERATION_NON_TRANSPOSE, st->alpha(), st->a, st->b, st->beta(),
                      st->c, st->dt, CUSPARSE_SPGEMM_DEFAULT, st->op, workspace_bytes, workspace),
                  cusparse_status);
  return SF_OK;
}

extern "C" sf_status sf_cuda_spgemm_compute(sf_cuda_spgemm* st, int* cusparse_status,
                                            void* workspace, size_t* workspace_bytes,
                                            int64_t* nse_c) {
  if (cusparse_status != nullptr) *cusparse_status = (int)CUSPARSE_STATUS_SUCCESS;
  SF_CUDA_FAIL_IF(st == nullptr || st->op == nullptr || workspace_bytes == nullptr,
                  SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(workspace != nullptr && nse_c == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_TRY(bind_handle(st->handle, st->stream, cusparse_status));
  if (workspace == nullptr) *workspace_bytes = 0;
  SF_CUSPARSE_TRY(cusparseSpGEMM_compute(st->handle, CUSPARSE_OPERATION_NON_TRANSPOSE,
                                         CUSPARSE_OPERATION_NON_TRANSPOSE, st->alpha(), st->a,
                                         st->b, st->beta(), st->c, st->dt,
                                         CUSPARSE_SPGEMM_DEFAULT, st->op, workspace_bytes,
                                         workspace),
                  cusparse_status);
  if (workspace == nullptr) return SF_OK;
  int64_t rows = 0, cols = 0, nnz = 0;
  SF_CUSPARSE_TRY(cusparseSpMatGetSize(st->c, &rows, &cols, &nnz), cusparse_status);
  SF_CUDA_FAIL_IF(nnz < 0, SF_ERR_INVALID_ARGUMENT);
  *nse_c = nnz;
  // 32-bit column indices cannot address more: refuse, never truncate.
  SF_CUDA_FAIL_IF(nnz > INT32_MAX, SF_ERR_OVERFLOW);
  return SF_OK;
}

extern "C" void sf_cuda_spgemm_destroy(sf_cuda_spgemm* st) { delete st; }
