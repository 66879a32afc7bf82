/*
 * sparsefill_cuda.h -- the C ABI of the CUDA half of the kernel core.
 *
 * Same conventions as sparsefill_core.h (status codes, outputs first, linear
 * indices, "sorted" = strictly increasing). Every array pointer is DEVICE
 * memory unless its comment says "host"; `stream` is a cudaStream_t passed as
 * void* so that including this header needs no CUDA headers (NULL: the legacy
 * default stream). Kernels are launched on that stream and never
 * synchronised; nothing here allocates memory.
 *
 * Results the host needs (validation errors, output sizes) go to an
 * sf_cuda_report in device memory, written completely by the call (the caller
 * only allocates it). The caller copies it to the host once, after the
 * stream has run: one synchronisation per op, however many kernels it took.
 *
 * Workspace: a function with `workspace` / `workspace_bytes` arguments, called
 * with workspace == NULL, only stores the bytes it needs in *workspace_bytes
 * and launches nothing; called again with that much device memory (from the
 * caller's allocator, e.g. torch's caching allocator), it runs.
 *
 * Return values say whether the arguments were acceptable and the kernels
 * launched. A launch failure is reported as SF_ERR_INVALID_ARGUMENT (sf_status
 * has no CUDA codes); the CUDA error itself is left in place
 * (cudaPeekAtLastError, not cudaGetLastError), so the caller's own launch
 * check still sees it. Errors of the data are in the report; errors of a
 * kernel's execution surface at the caller's next synchronisation.
 *
 * Inputs that break a contract give a wrong result or an error in the report,
 * never a read or write outside the buffers the contract sizes.
 */
#ifndef SPARSEFILL_CUDA_H
#define SPARSEFILL_CUDA_H

#include "sparsefill_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sparse dimensions a CUDA kernel takes (sizes travel as a kernel argument).
 * More: SF_ERR_INVALID_ARGUMENT. */
#define SF_CUDA_MAX_DIMS 64

/* What a call found, in device memory (8 int64 words; copy it to the host). */
typedef struct sf_cuda_report {
  int64_t status;   /* sf_status of the data checks: SF_OK or an error        */
  int64_t position; /* the site of the first error, as sf_site (-1: none)     */
  int64_t dim;
  int64_t value;
  int64_t result;   /* the op's scalar result (is_coalesced, nse_out, ...)    */
  uint64_t first;   /* internal: smallest bad key seen (atomicMin)            */
  uint64_t second;  /* internal: a second such key                           */
  int64_t unused;
} sf_cuda_report;
/* The state of a SpGEMM through cuSPARSE, in its stages (sf_cuda_spgemm_*):
 * host memory, opaque. */
typedef struct sf_cuda_spgemm sf_cuda_spgemm;

/* Every entry point: its contract, then its prototype (for a typed entry,
 * one per element type). Written from the one list of the native ops and
 * core entries, tools/codegen/native.yaml. */
#include "generated/cuda_entries.h"

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SPARSEFILL_CUDA_H */
