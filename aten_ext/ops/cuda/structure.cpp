// ops/cuda/structure.cpp -- the CUDA kernels of the structural ops
// (ops/structure.h): unpack and check component tensors, call the CUDA core
// (sparsefill_cuda.h) on torch's current stream with workspace from torch's
// caching allocator, check every launch, read each op's report once.
#include <torch/library.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include "ops/common/cuda.h"
#include "ops/structure.h"

namespace sparsefill {
namespace {

Tensor coo_indices_arg(const Tensor& indices_in, const std::vector<int64_t>& size,
                       at::IntArrayRef sparse_size) {
  Tensor indices = index_arg(indices_in, "indices", 2, kCUDA);
  TORCH_CHECK(indices.size(0) == (int64_t)size.size(), "sparsefill: indices has ",
              indices.size(0), " rows but the tensor has ", size.size(),
              " sparse dimensions (size ", sparse_size, ")");
  TORCH_CHECK((int64_t)size.size() <= SF_CUDA_MAX_DIMS, "sparsefill: the CUDA kernels take at most ",
              SF_CUDA_MAX_DIMS, " sparse dimensions, got ", size.size());
  return indices;
}

// Launch the checked scan (linear may be undefined: check only).
void launch_coo_scan(sf_cuda_report* report, const Tensor& linear, const Tensor& indices,
                     const std::vector<int64_t>& size) {
  check_call(sf_cuda_coo_check(report, linear.defined() ? linear.data_ptr<int64_t>() : nullptr,
                               indices.data_ptr<int64_t>(), indices.size(0), indices.size(1),
                               size.data(), current_stream()),
             "indices");
}

// ---- kernels ----------------------------------------------------------------

Tensor coo_check_cuda(const Tensor& indices_in, at::IntArrayRef sparse_size) {
  auto size = sizes_arg(sparse_size, "size");
  Tensor indices = coo_indices_arg(indices_in, size, sparse_size);
  c10::cuda::CUDAGuard guard(indices.device());
  Reports reports(1, indices.device());
  launch_coo_scan(reports.at(0), Tensor(), indices, size);
  const auto r = reports.read()[0];
  check_coo_status((sf_status)r.status, site_of(r), size);
  return at::full({}, r.result != 0, indices.options().dtype(at::kBool));
}

// Linear indices, checked; the error is raised after the one sync.
Tensor coo_linearize_cuda(const Tensor& indices_in, at::IntArrayRef sparse_size) {
  auto size = sizes_arg(sparse_size, "size");
  Tensor indices = coo_indices_arg(indices_in, size, sparse_size);
  c10::cuda::CUDAGuard guard(indices.device());
  Tensor linear = at::empty({indices.size(1)}, indices.options());
  Reports reports(1, indices.device());
  launch_coo_scan(reports.at(0), linear, indices, size);
  const auto r = reports.read()[0];
  check_status((sf_status)r.status, "indices");  // as the CPU kernel: no site
  return linear;
}

// report == nullptr: the linear indices are known to be in range.
Tensor delinearize(sf_cuda_report* report, const Tensor& linear, const std::vector<int64_t>& size) {
  TORCH_CHECK((int64_t)size.size() <= SF_CUDA_MAX_DIMS, "sparsefill: the CUDA kernels take at most ",
              SF_CUDA_MAX_DIMS, " sparse dimensions, got ", size.size());
  Tensor indices = at::empty({(int64_t)size.size(), linear.numel()}, linear.options());
  check_call(sf_cuda_coo_delinearize(report, indices.data_ptr<int64_t>(),
                                     linear.data_ptr<int64_t>(), (int64_t)size.size(),
                                     linear.numel(), size.data(), current_stream()),
             "linear indices");
  return indices;
}

Tensor coo_delinearize_cuda(const Tensor& linear_in, at::IntArrayRef sparse_size) {
  auto size = sizes_arg(sparse_size, "size");
  Tensor linear = index_arg(linear_in, "linear", 1, kCUDA);
  c10::cuda::CUDAGuard guard(linear.device());
  Reports reports(1, linear.device());
  Tensor indices = delinearize(reports.at(0), linear, size);
  const auto r = reports.read()[0];
  check_status((sf_status)r.status, "linear indices");
  return indices;
}

std::tuple<Tensor, Tensor> coalesce_plan_cuda(const Tensor& indices_in,
                                              at::IntArrayRef sparse_size) {
  auto size = sizes_arg(sparse_size, "size");
  Tensor indices = coo_indices_arg(indices_in, size, sparse_size);
  c10::cuda::CUDAGuard guard(indices.device());
  const int64_t nse = indices.size(1);
  int64_t numel = 1;
  for (auto s : size) numel *= s;  // sizes_arg checked the product
  Tensor linear = at::empty({nse}, indices.options());
  Tensor unique_linear = at::empty({nse}, indices.options());
  Tensor segment = at::empty({nse}, indices.options());
  Reports reports(2, indices.device());
  launch_coo_scan(reports.at(0), linear, indices, size);
  size_t bytes = 0;
  const int64_t max_key = std::max<int64_t>(numel - 1, 0);
  check_call(sf_cuda_coalesce_plan(nullptr, nullptr, nullptr, nullptr, nse, max_key, nullptr,
                                   &bytes, current_stream()),
             "indices");
  Tensor ws = workspace(bytes, indices);
  check_call(sf_cuda_coalesce_plan(reports.at(1), unique_linear.data_ptr<int64_t>(),
                                   segment.data_ptr<int64_t>(), linear.data_ptr<int64_t>(), nse,
                                   max_key, ws.data_ptr(), &bytes, current_stream()),
             "indices");
  const auto r = reports.read();
  check_status((sf_status)r[0].status, "indices");
  return {delinearize(nullptr, unique_linear.narrow(0, 0, r[1].result), size), segment};
}

void csr_check_cuda(const Tensor& crow_in, const Tensor& col_in, at::IntArrayRef size_in) {
  CsrArgs a = csr_args(crow_in, col_in, size_in, kCUDA);
  c10::cuda::CUDAGuard guard(a.crow.device());
  Reports reports(1, a.crow.device());
  check_call(sf_cuda_csr_check(reports.at(0), a.crow.data_ptr<int64_t>(),
                               a.col.data_ptr<int64_t>(), a.size[0], a.size[1], a.col.numel(),
                               current_stream()),
             "crow_indices/col_indices");
  const auto r = reports.read()[0];
  check_csr_status((sf_status)r.status, site_of(r), a);
}

Tensor rows_from_crow_cuda(const Tensor& crow_in) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1, kCUDA);
  TORCH_CHECK(crow.numel() >= 1, "sparsefill: crow_indices must not be empty");
  c10::cuda::CUDAGuard guard(crow.device());
  const int64_t nrows = crow.numel() - 1;
  Reports reports(1, crow.device());
  check_call(sf_cuda_crow_check(reports.at(0), crow.data_ptr<int64_t>(), nrows, current_stream()),
             "crow_indices");
  const auto r = reports.read()[0];
  const int64_t nse = r.result;  // crow[nrows], read with the report
  TORCH_CHECK(nse >= 0, "sparsefill: crow_indices[-1] must be non-negative, got ", nse);
  check_status((sf_status)r.status, "crow_indices");
  Tensor rows = at::empty({nse}, crow.options());
  check_call(sf_cuda_csr_rows_from_crow(rows.data_ptr<int64_t>(), crow.data_ptr<int64_t>(), nrows,
                                        nse, current_stream()),
             "crow_indices");
  return rows;
}

Tensor crow_from_rows_cuda(const Tensor& rows_in, int64_t nrows) {
  Tensor rows = index_arg(rows_in, "rows", 1, kCUDA);
  TORCH_CHECK(nrows >= 0, "sparsefill: nrows must be non-negative, got ", nrows);
  c10::cuda::CUDAGuard guard(rows.device());
  Tensor crow = at::empty({nrows + 1}, rows.options());
  Reports reports(1, rows.device());
  check_call(sf_cuda_crow_from_rows(reports.at(0), crow.data_ptr<int64_t>(),
                                    rows.data_ptr<int64_t>(), rows.numel(), nrows,
                                    current_stream()),
             "row indices");
  const auto r = reports.read()[0];
  check_status((sf_status)r.status, "row indices (they must be sorted and in range)");
  return crow;
}

std::tuple<Tensor, Tensor, Tensor> union_plan_cuda(const Tensor& indices_a_in,
                                                   const Tensor& indices_b_in,
                                                   at::IntArrayRef sparse_size) {
  auto size = sizes_arg(sparse_size, "size");
  Tensor ia = coo_indices_arg(indices_a_in, size, sparse_size);
  Tensor ib = coo_indices_arg(indices_b_in, size, sparse_size);
  same_device(ia, "indices_a", ib, "indices_b");
  c10::cuda::CUDAGuard guard(ia.device());
  Reports reports(3, ia.device());
  // One sparse dim: the indices row is the linear index (checked, not copied).
  const bool one_dim = size.size() == 1;
  Tensor la = one_dim ? ia.select(0, 0) : at::empty({ia.size(1)}, ia.options());
  Tensor lb = one_dim ? ib.select(0, 0) : at::empty({ib.size(1)}, ib.options());
  launch_coo_scan(reports.at(0), one_dim ? Tensor() : la, ia, size);
  launch_coo_scan(reports.at(1), one_dim ? Tensor() : lb, ib, size);
  const int64_t bound = la.numel() + lb.numel();
  Tensor lout = at::empty({bound}, ia.options());
  Tensor src_a = at::empty({bound}, ia.options());
  Tensor src_b = at::empty({bound}, ia.options());
  size_t bytes = 0;
  check_call(sf_cuda_union_plan(nullptr, nullptr, nullptr, nullptr, nullptr, la.numel(), nullptr,
                                lb.numel(), nullptr, &bytes, current_stream()),
             "indices");
  Tensor ws = workspace(bytes, ia);
  check_call(sf_cuda_union_plan(reports.at(2), lout.data_ptr<int64_t>(), src_a.data_ptr<int64_t>(),
                                src_b.data_ptr<int64_t>(), la.data_ptr<int64_t>(), la.numel(),
                                lb.data_ptr<int64_t>(), lb.numel(), ws.data_ptr(), &bytes,
                                current_stream()),
             "indices");
  const auto r = reports.read();
  for (int i = 0; i < 2; ++i) {  // the CPU kernel names the site for one sparse dim only
    const sf_site site = site_of(r[i]);
    check_status((sf_status)r[i].status, "indices", one_dim ? &site : nullptr);
  }
  check_status((sf_status)r[2].status,
               "indices of a binary op's operands (they must be coalesced)");
  const int64_t n = r[2].result;
  Tensor indices = one_dim ? lout.narrow(0, 0, n).clone().view({1, n})
                           : delinearize(nullptr, lout.narrow(0, 0, n), size);
  return {indices, src_a.narrow(0, 0, n), src_b.narrow(0, 0, n)};
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, CUDA, m) {
  m.impl("coo_check", &sparsefill::coo_check_cuda);
  m.impl("csr_check", &sparsefill::csr_check_cuda);
  m.impl("coo_linearize", &sparsefill::coo_linearize_cuda);
  m.impl("coo_delinearize", &sparsefill::coo_delinearize_cuda);
  m.impl("coalesce_plan", &sparsefill::coalesce_plan_cuda);
  m.impl("rows_from_crow", &sparsefill::rows_from_crow_cuda);
  m.impl("crow_from_rows", &sparsefill::crow_from_rows_cuda);
  m.impl("union_plan", &sparsefill::union_plan_cuda);
}

