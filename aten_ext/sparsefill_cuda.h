/*
 * sparsefill_cuda.h -- the C ABI of the CUDA half of the kernel core.
 *
 * Same conventions as sparsefill_core.h (status codes, outputs first); every
 * pointer is device memory and `stream` is a cudaStream_t passed as void* so
 * that including this header needs no CUDA headers (NULL: the legacy default
 * stream). Kernels are launched on that stream and not synchronised. A launch
 * failure is reported as SF_ERR_INVALID_ARGUMENT (sf_status has no CUDA
 * codes); the CUDA error itself is left in place (cudaPeekAtLastError, not
 * cudaGetLastError), so the caller's own launch check still sees it. Errors
 * of the kernel's execution surface at the caller's next synchronisation.
 */
#ifndef SPARSEFILL_CUDA_H
#define SPARSEFILL_CUDA_H

#include "sparsefill_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rows[k] = row of element k, from crow [nrows + 1] (validated by the
 * caller: crow[0] == 0, non-decreasing, crow[nrows] == nse; rows holds nse).
 * One thread per row (grid-stride). The device-side analogue of
 * sf_csr_rows_from_crow. Errors: SF_ERR_NEGATIVE_SIZE (nrows < 0),
 * SF_ERR_NULL_POINTER (crow NULL); rows may be NULL only when nse == 0
 * (nothing is launched then). */
sf_status sf_cuda_csr_rows_from_crow(int64_t *rows, const int64_t *crow, int64_t nrows,
                                     void *stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPARSEFILL_CUDA_H */
