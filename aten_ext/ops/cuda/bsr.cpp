// ops/cuda/bsr.cpp -- the CUDA kernel of bsr_spmm (ops/bsr.h): the CPU
// kernel's rules and messages, the block pattern checked on the device
// (sf_cuda_csr_operand_check) and read back with the finiteness of the fill
// and of B's column sums in one synchronisation, then sf_cuda_bsr.cu.
#include <torch/library.h>

#include <ATen/TensorOperators.h>
#include <ATen/ops/all.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/isfinite.h>

#include <tuple>

#include "ops/bsr.h"
#include "ops/common/cuda.h"
#include "ops/common/dtypes.h"
#include "ops/products.h"

namespace sparsefill {
namespace {

void check_gpu(const Tensor& t, const char* name, const at::Device& device) {
  check_product_dtype(t, name);
  TORCH_CHECK(t.device() == device, "sparsefill: ", name,
              " must be on the GPU for the CUDA kernel (on ", device, ", with the indices), got ",
              t.device());
}

Tensor bsr_spmm_cuda(const Tensor& crow_in, const Tensor& col_in, const Tensor& values_in,
                     const Tensor& fill_in, const Tensor& b_in, int64_t ncols) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1, kCUDA);
  Tensor col = index_arg(col_in, "col_indices", 1, kCUDA);
  same_device(crow, "crow_indices", col, "col_indices");
  const at::Device device = crow.device();
  check_gpu(values_in, "values", device);
  check_gpu(fill_in, "fill", device);
  check_gpu(b_in, "the dense operand", device);
  const BsrShape s = bsr_spmm_shape(crow, col, values_in, fill_in, b_in, ncols);
  c10::cuda::CUDAGuard guard(device);
  const auto out_type = values_in.scalar_type();
  const auto ct = compute_type(out_type, "bsr_spmm", false);
  Tensor values = values_in.to(ct).contiguous();
  Tensor fill = fill_in.to(ct).reshape({1}).contiguous();
  Tensor b = b_in.to(ct);
  const int64_t n = b.size(1);
  if (b.stride(1) != 1 || dense_row_stride(b) < std::max<int64_t>(n, 1)) b = b.contiguous();
  Tensor colsum = b.sum(0);
  // The block pattern's check and the data's finiteness, read together.
  Reports reports(1, device);
  check_call(sf_cuda_csr_operand_check(reports.at(0), crow.data_ptr<int64_t>(),
                                       col.data_ptr<int64_t>(), s.nbrows, s.nbcols, s.nblocks, 1,
                                       current_stream()),
             "bsr_spmm operands");
  const bool finite = at::isfinite(at::cat({fill, colsum})).all().item<bool>();
  const auto rep = reports.read()[0];
  const auto st = (sf_status)rep.status;
  TORCH_CHECK(st != SF_ERR_CROW_FIRST, "sparsefill: bsr_spmm: crow_indices[0] must be 0, got ",
              rep.value);
  TORCH_CHECK(st != SF_ERR_CROW_LAST, "sparsefill: bsr_spmm: crow_indices[-1] must equal the "
              "number of stored blocks (", s.nblocks, "), got ", rep.value);
  check_status(st, "bsr_spmm operands");
  Tensor c = at::empty({s.nbrows * s.r, n}, values.options());
  if (c.numel() == 0) return c.to(out_type);
  if (!finite) return bsr_spmm_nonfinite(crow, col, values, fill, b, ncols).to(out_type);
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    check_call(CudaCore<T>::bsr_spmm(c.data_ptr<T>(), crow.data_ptr<int64_t>(),
                                     col.data_ptr<int64_t>(), values.data_ptr<T>(), s.nbrows,
                                     s.nbcols, s.nblocks, s.r, s.c, b.data_ptr<T>(),
                                     dense_row_stride(b), n, fill.data_ptr<T>(),
                                     colsum.data_ptr<T>(), current_stream()),
               "bsr_spmm");
  });
  return c.to(out_type);
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, CUDA, m) { m.impl("bsr_spmm", &sparsefill::bsr_spmm_cuda); }
