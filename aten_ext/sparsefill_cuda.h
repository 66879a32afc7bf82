/*
 * sparsefill_cuda.h -- the C ABI of the CUDA half of the kernel core.
 *
 * Same conventions as sparsefill_core.h (status codes, outputs first); every
 * pointer is device memory and `stream` is a cudaStream_t passed as void* so
 * that including this header needs no CUDA headers. Kernels are launched on
 * that stream and not synchronised; a launch failure is reported as
 * SF_ERR_INVALID_ARGUMENT (the CUDA error stays readable through
 * cudaGetLastError's sticky state for the caller's own check).
 */
#ifndef SPARSEFILL_CUDA_H
#define SPARSEFILL_CUDA_H

#include "sparsefill_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* rows[k] = row of element k, from crow [nrows + 1] (validated by the
 * caller: crow[0] == 0, non-decreasing, crow[nrows] == nse). One thread per
 * row. The device-side analogue of sf_csr_rows_from_crow. */
sf_status sf_cuda_csr_rows_from_crow(int64_t *rows, const int64_t *crow, int64_t nrows,
                                     void *stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPARSEFILL_CUDA_H */
