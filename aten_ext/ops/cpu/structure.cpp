// ops/cpu/structure.cpp -- the CPU kernels of the structural ops
// (ops/structure.h): unpack and check component tensors, call the C core
// (sparsefill_core.h), which does the structural work.
#include <torch/library.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include "ops/structure.h"

namespace sparsefill {
namespace {

// Validates COO indices against the sparse sizes; returns whether coalesced
// (a 0-d bool tensor).
Tensor coo_check(const Tensor& indices_in, at::IntArrayRef sparse_size) {
  auto size = sizes_arg(sparse_size, "size");
  Tensor indices = index_arg(indices_in, "indices", 2);
  TORCH_CHECK(indices.size(0) == (int64_t)size.size(), "sparsefill: indices has ",
              indices.size(0), " rows but the tensor has ", size.size(),
              " sparse dimensions (size ", sparse_size, ")");
  sf_site site{-1, -1, -1};
  int coalesced = 0;
  sf_status st = sf_coo_check(&site, &coalesced, indices.data_ptr<int64_t>(),
                              indices.size(0), indices.size(1), size.data());
  check_coo_status(st, site, size);
  return at::full({}, coalesced != 0, indices.options().dtype(at::kBool));
}

void csr_check(const Tensor& crow_in, const Tensor& col_in, at::IntArrayRef size_in) {
  CsrArgs a = csr_args(crow_in, col_in, size_in, c10::DeviceType::CPU);
  sf_site site{-1, -1, -1};
  sf_status st = sf_csr_check(&site, a.crow.data_ptr<int64_t>(), a.col.data_ptr<int64_t>(),
                              a.size[0], a.size[1], a.col.numel());
  check_csr_status(st, site, a);
}

Tensor coo_linearize(const Tensor& indices_in, at::IntArrayRef sparse_size) {
  auto size = sizes_arg(sparse_size, "size");
  Tensor indices = index_arg(indices_in, "indices", 2);
  TORCH_CHECK(indices.size(0) == (int64_t)size.size(), "sparsefill: indices rows (",
              indices.size(0), ") != sparse dimensions (", size.size(), ")");
  Tensor linear = at::empty({indices.size(1)}, indices.options());
  check_status(sf_coo_linearize(linear.data_ptr<int64_t>(), indices.data_ptr<int64_t>(),
                                indices.size(0), indices.size(1), size.data()),
               "indices");
  return linear;
}

Tensor coo_delinearize(const Tensor& linear_in, at::IntArrayRef sparse_size) {
  auto size = sizes_arg(sparse_size, "size");
  Tensor linear = index_arg(linear_in, "linear", 1);
  Tensor indices = at::empty({(int64_t)size.size(), linear.numel()}, linear.options());
  check_status(sf_coo_delinearize(indices.data_ptr<int64_t>(), linear.data_ptr<int64_t>(),
                                  (int64_t)size.size(), linear.numel(), size.data()),
               "linear indices");
  return indices;
}

std::tuple<Tensor, Tensor> coalesce_plan(const Tensor& indices_in, at::IntArrayRef sparse_size) {
  Tensor linear = coo_linearize(indices_in, sparse_size);
  const int64_t nse = linear.numel();
  Tensor unique_linear = at::empty({nse}, linear.options());
  Tensor segment = at::empty({nse}, linear.options());
  int64_t nse_out = 0;
  check_status(sf_coalesce_plan(unique_linear.data_ptr<int64_t>(), segment.data_ptr<int64_t>(),
                                &nse_out, linear.data_ptr<int64_t>(), nse),
               "indices");
  return {coo_delinearize(unique_linear.narrow(0, 0, nse_out), sparse_size), segment};
}

Tensor rows_from_crow(const Tensor& crow_in) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  TORCH_CHECK(crow.numel() >= 1, "sparsefill: crow_indices must not be empty");
  const int64_t nrows = crow.numel() - 1;
  const int64_t nse = crow[nrows].item<int64_t>();
  TORCH_CHECK(nse >= 0, "sparsefill: crow_indices[-1] must be non-negative, got ", nse);
  Tensor rows = at::empty({nse}, crow.options());
  check_status(sf_csr_rows_from_crow(rows.data_ptr<int64_t>(), crow.data_ptr<int64_t>(), nrows),
               "crow_indices");
  return rows;
}

Tensor crow_from_rows(const Tensor& rows_in, int64_t nrows) {
  Tensor rows = index_arg(rows_in, "rows", 1);
  TORCH_CHECK(nrows >= 0, "sparsefill: nrows must be non-negative, got ", nrows);
  Tensor crow = at::empty({nrows + 1}, rows.options());
  check_status(sf_crow_from_rows(crow.data_ptr<int64_t>(), rows.data_ptr<int64_t>(),
                                 rows.numel(), nrows),
               "row indices (they must be sorted and in range)");
  return crow;
}

// Linear indices of checked COO indices. One sparse dim: the indices row
// itself (checked, not copied).
Tensor linear_view(const Tensor& indices_in, at::IntArrayRef sparse_size) {
  if (sparse_size.size() != 1) return coo_linearize(indices_in, sparse_size);
  Tensor indices = index_arg(indices_in, "indices", 2);
  TORCH_CHECK(indices.size(0) == 1, "sparsefill: indices rows (", indices.size(0),
              ") != sparse dimensions (1)");
  sf_site site{-1, -1, -1};
  check_status(sf_coo_check(&site, nullptr, indices.data_ptr<int64_t>(), 1, indices.size(1),
                            sparse_size.data()),
               "indices", &site);
  return indices.select(0, 0);
}

std::tuple<Tensor, Tensor, Tensor> union_plan(const Tensor& indices_a, const Tensor& indices_b,
                                              at::IntArrayRef sparse_size) {
  Tensor la = linear_view(indices_a, sparse_size);
  Tensor lb = linear_view(indices_b, sparse_size);
  // One pass into buffers of the upper bound nse_a + nse_b, then narrowed.
  const int64_t bound = la.numel() + lb.numel();
  Tensor lout = at::empty({bound}, la.options());
  Tensor src_a = at::empty({bound}, la.options());
  Tensor src_b = at::empty({bound}, la.options());
  int64_t n = 0;
  check_status(sf_union_plan(&n, lout.data_ptr<int64_t>(), src_a.data_ptr<int64_t>(),
                             src_b.data_ptr<int64_t>(), la.data_ptr<int64_t>(), la.numel(),
                             lb.data_ptr<int64_t>(), lb.numel()),
               "indices of a binary op's operands (they must be coalesced)");
  // The result keeps these indices: an exact-size copy, not a view of the bound.
  Tensor indices = sparse_size.size() == 1 ? lout.narrow(0, 0, n).clone().view({1, n})
                                           : coo_delinearize(lout.narrow(0, 0, n), sparse_size);
  return {indices, src_a.narrow(0, 0, n), src_b.narrow(0, 0, n)};
}

}  // namespace
}  // namespace sparsefill

TORCH_LIBRARY_IMPL(sparsefill, CPU, m) {
  m.impl("coo_check", &sparsefill::coo_check);
  m.impl("csr_check", &sparsefill::csr_check);
  m.impl("coo_linearize", &sparsefill::coo_linearize);
  m.impl("coo_delinearize", &sparsefill::coo_delinearize);
  m.impl("coalesce_plan", &sparsefill::coalesce_plan);
  m.impl("rows_from_crow", &sparsefill::rows_from_crow);
  m.impl("crow_from_rows", &sparsefill::crow_from_rows);
  m.impl("union_plan", &sparsefill::union_plan);
}
