// ops/common/cuda.h -- what the CUDA kernels (the SPARSEFILL_WITH_CUDA half
// of each family's files) share: torch's current stream, the
// launch-then-status check of a core call, device memory for the core's
// reports (read back together: one synchronisation per op), workspace from
// torch's caching allocator, and the CUDA core's typed entry points,
// CudaCore<T> (generated). Only those halves include it: it needs torch's
// CUDA headers, which only the CUDA build has.
#pragma once

#include <ATen/ops/empty.h>

// c10's CUDA headers only: ATen/cuda/CUDAContext.h would pull in cuSPARSE and
// cuBLAS headers, which most of these kernels do not use.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/common/args.h"
#include "ops/generated/cuda_core.h"  // CudaCore<T>, from tools/codegen/native.yaml
#include "sparsefill_cuda.h"

namespace sparsefill {

constexpr auto kCUDA = c10::DeviceType::CUDA;

static_assert(sizeof(sf_cuda_report) == 8 * sizeof(int64_t), "a report is 8 int64 words");

inline void* current_stream() { return c10::cuda::getCurrentCUDAStream().stream(); }

// A core call's return value: first the CUDA launch check (the core leaves
// a launch error in place for it), then the argument status.
inline void check_call(sf_status st, const char* what) {
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  check_status(st, what);
}

// Device memory for `n` reports, read back together: one sync per op. Only
// reports that a core call initialised may be read.
class Reports {
 public:
  Reports(int n, const at::Device& device)
      : dev_(at::empty({n * 8}, at::TensorOptions().dtype(at::kLong).device(device))) {}
  sf_cuda_report* at(int i) {
    return reinterpret_cast<sf_cuda_report*>(dev_.data_ptr<int64_t>()) + i;
  }
  // Copies to the host (waits for the current stream).
  std::vector<sf_cuda_report> read() const {
    Tensor host = dev_.cpu();
    std::vector<sf_cuda_report> out(dev_.numel() / 8);
    std::memcpy(out.data(), host.data_ptr<int64_t>(), out.size() * sizeof(sf_cuda_report));
    return out;
  }

 private:
  Tensor dev_;
};

inline sf_site site_of(const sf_cuda_report& r) { return {r.position, r.dim, r.value}; }

// Bytes from torch's caching allocator, on the tensor's device.
inline Tensor workspace(size_t bytes, const Tensor& like) {
  return at::empty({(int64_t)std::max<size_t>(bytes, 1)}, like.options().dtype(at::kByte));
}

}  // namespace sparsefill
