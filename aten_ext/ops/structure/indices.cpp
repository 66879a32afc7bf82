// ops/structure/indices.cpp -- the kernels of the structural ops on one index set
// (the ops: tools/codegen/native.yaml; their shared rules: structure.h):
// coo_check, coo_linearize, coo_delinearize, coalesce_plan, csr_check,
// rows_from_crow, crow_from_rows on the CPU (the C core, sparsefill_core.h) and
// on CUDA (the CUDA core, sparsefill_cuda.h; CUDA build only), and
// index_select_plan, csr_find, lane_topk_fill and lane_sort_fill (CPU only).
// Each unpacks and checks the component tensors, then the core does the
// structural work.
#include <torch/library.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <algorithm>
#include <vector>

#include "ops/common/dtypes.h"
#include "ops/common/row_ranges.h"
#include "ops/generated/kernels.h"
#include "ops/structure/structure.h"

namespace sparsefill {
// Validates COO indices against the sparse sizes; returns whether coalesced
// (a 0-d bool tensor).
Tensor coo_check_cpu(const Tensor& indices_in, at::IntArrayRef sparse_size) {
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

void csr_check_cpu(const Tensor& crow_in, const Tensor& col_in, at::IntArrayRef size_in) {
  CsrArgs a = csr_args(crow_in, col_in, size_in, c10::DeviceType::CPU);
  sf_site site{-1, -1, -1};
  sf_status st = sf_csr_check(&site, a.crow.data_ptr<int64_t>(), a.col.data_ptr<int64_t>(),
                              a.size[0], a.size[1], a.col.numel());
  check_csr_status(st, site, a);
}

Tensor coo_linearize_cpu(const Tensor& indices_in, at::IntArrayRef sparse_size) {
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

Tensor coo_delinearize_cpu(const Tensor& linear_in, at::IntArrayRef sparse_size) {
  auto size = sizes_arg(sparse_size, "size");
  Tensor linear = index_arg(linear_in, "linear", 1);
  Tensor indices = at::empty({(int64_t)size.size(), linear.numel()}, linear.options());
  check_status(sf_coo_delinearize(indices.data_ptr<int64_t>(), linear.data_ptr<int64_t>(),
                                  (int64_t)size.size(), linear.numel(), size.data()),
               "linear indices");
  return indices;
}

std::tuple<Tensor, Tensor> coalesce_plan_cpu(const Tensor& indices_in,
                                             at::IntArrayRef sparse_size) {
  Tensor linear = coo_linearize_cpu(indices_in, sparse_size);
  const int64_t nse = linear.numel();
  Tensor unique_linear = at::empty({nse}, linear.options());
  Tensor segment = at::empty({nse}, linear.options());
  int64_t nse_out = 0;
  check_status(sf_coalesce_plan(unique_linear.data_ptr<int64_t>(), segment.data_ptr<int64_t>(),
                                &nse_out, linear.data_ptr<int64_t>(), nse),
               "indices");
  return {coo_delinearize_cpu(unique_linear.narrow(0, 0, nse_out), sparse_size), segment};
}

Tensor csr_find_cpu(const Tensor& crow_in, const Tensor& col_in, const Tensor& rows_in,
                    const Tensor& cols_in, int64_t ncols) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  Tensor rows = index_arg(rows_in, "rows", 1);
  Tensor cols = index_arg(cols_in, "cols", 1);
  TORCH_CHECK(crow.numel() >= 1, "sparsefill: crow_indices must not be empty");
  TORCH_CHECK(rows.numel() == cols.numel(), "sparsefill: csr_find: rows has ", rows.numel(),
              " elements and cols ", cols.numel());
  const int64_t nrows = crow.numel() - 1;
  TORCH_CHECK(crow[nrows].item<int64_t>() == col.numel(), "sparsefill: crow_indices[-1] (",
              crow[nrows].item<int64_t>(), ") != the number of col_indices (", col.numel(), ")");
  const int64_t k = rows.numel();
  Tensor slot = at::empty({k}, rows.options());
  // the queries are independent: ranges of them on torch's threads
  const int64_t chunks = k < 16384 ? 1 : merge_chunks(2 * k);
  int64_t* out = slot.data_ptr<int64_t>();
  const int64_t *cr = crow.const_data_ptr<int64_t>(), *cl = col.const_data_ptr<int64_t>();
  const int64_t *qr = rows.const_data_ptr<int64_t>(), *qc = cols.const_data_ptr<int64_t>();
  check_chunks(for_chunks(chunks, [&](int64_t c) {
                 const int64_t b = chunk_begin(k, chunks, c), e = chunk_begin(k, chunks, c + 1);
                 return sf_csr_find(out + b, cr, cl, nrows, ncols, qr + b, qc + b, e - b);
               }),
               "rows/cols");
  return slot;
}

namespace {

// The operands of the per-row order kernels (lane_topk_fill, lane_sort_fill),
// checked with one set of messages and widened for the core.
struct LaneOperands {
  Tensor crow, col, values, fill;
  at::ScalarType compute;
  int64_t nrows, nse, fill_stride;
};

LaneOperands lane_operands(const Tensor& crow_in, const Tensor& col_in, const Tensor& values_in,
                           const Tensor& fill_in, int64_t n, const char* op) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  TORCH_CHECK(crow.numel() >= 1, "sparsefill: ", op, ": crow_indices must not be empty");
  TORCH_CHECK(n >= 0, "sparsefill: ", op, ": n must be non-negative, got ", n);
  TORCH_CHECK(values_in.dim() == 1, "sparsefill: ", op, ": values must be 1-d, got ",
              values_in.dim(), " dims");
  TORCH_CHECK(values_in.device().is_cpu() && fill_in.device().is_cpu(), "sparsefill: ", op,
              ": values and fill must be on the CPU");
  const auto t = values_in.scalar_type();
  TORCH_CHECK(t != at::kBool && t != at::kUInt64 && !at::isComplexType(t) &&
                  (at::isFloatingType(t) || at::isIntegralType(t, /*includeBool=*/false)),
              "sparsefill: ", op, ": values: dtype ", t, " is not supported");
  TORCH_CHECK(fill_in.scalar_type() == t, "sparsefill: ", op, ": fill has dtype ",
              fill_in.scalar_type(), " but values ", t);
  const int64_t nrows = crow.numel() - 1;
  const int64_t nse = values_in.numel();
  TORCH_CHECK(col.numel() == nse, "sparsefill: ", op, ": col_indices has ", col.numel(),
              " elements and values ", nse);
  TORCH_CHECK(fill_in.numel() == 1 || (fill_in.dim() == 1 && fill_in.numel() == nrows),
              "sparsefill: ", op, ": fill must hold one value or one per row (", nrows,
              "), got shape ", fill_in.sizes());
  TORCH_CHECK(crow[0].item<int64_t>() == 0 && crow[nrows].item<int64_t>() == nse,
              "sparsefill: ", op, ": crow_indices must run from 0 to the number of values (",
              nse, ")");
  // float16/bfloat16 widen to float32 and integers to int64 exactly: the order is kept
  const auto ct = compute_type(t, op, true);
  Tensor fill = fill_in.reshape(-1).to(ct).contiguous();
  const int64_t fill_stride = fill.numel() == 1 ? 0 : 1;
  return {crow, col, values_in.to(ct).contiguous(), fill, ct, nrows, nse, fill_stride};
}

}  // namespace

// The first k slots of each dense row's stable sort (stored picks merged with
// the fill's block in the core): topk of a CSR matrix along its rows with no
// COO indices and no sort in Python (functions/order/).
std::tuple<Tensor, Tensor> lane_topk_fill_cpu(const Tensor& crow_in, const Tensor& col_in,
                                              const Tensor& values_in, const Tensor& fill_in,
                                              int64_t n, int64_t k, bool descending) {
  TORCH_CHECK(k >= 0 && (n < 0 || k <= n), "sparsefill: lane_topk_fill: k must be in [0, n] (n = ",
              n, "), got ", k);
  const LaneOperands a = lane_operands(crow_in, col_in, values_in, fill_in, n, "lane_topk_fill");
  const int64_t nrows = a.nrows;
  Tensor src = at::empty({nrows, k}, a.crow.options());
  Tensor pos = at::empty({nrows, k}, a.crow.options());
  with_compute_type<true>(a.compute, [&](auto zero) {
    using T = decltype(zero);
    const int64_t* cp = a.crow.const_data_ptr<int64_t>();
    const int64_t* colp = a.col.const_data_ptr<int64_t>();
    const T* vp = a.values.const_data_ptr<T>();
    const T* fp = a.fill.const_data_ptr<T>();
    int64_t* sp = src.data_ptr<int64_t>();
    int64_t* pp = pos.data_ptr<int64_t>();
    for_row_ranges(cp, nrows, 2, "lane_topk_fill crow_indices/col_indices",
                   [&](int64_t r0, int64_t r1) {
                     return Core<T>::lane_topk_fill(sp, pp, cp, colp, vp, fp, a.fill_stride,
                                                    nrows, n, a.nse, k, descending ? 1 : 0, r0,
                                                    r1);
                   });
  });
  return {src, pos};
}

// The stable sort of each dense row (stored values sorted in the core, the
// fill's block placed there): sort of a CSR matrix along its rows, and msort
// on the transposed pattern, with no COO indices and no sort in Python
// (functions/order/sort.py). The dense sort indices are written in the core
// too: each row's n slots once, no cumsum or scatter over them.
std::tuple<Tensor, Tensor, Tensor> lane_sort_fill_cpu(const Tensor& crow_in, const Tensor& col_in,
                                                      const Tensor& values_in,
                                                      const Tensor& fill_in, int64_t n,
                                                      bool descending, bool with_indices) {
  const LaneOperands a = lane_operands(crow_in, col_in, values_in, fill_in, n, "lane_sort_fill");
  const int64_t nrows = a.nrows;
  Tensor perm = at::empty({a.nse}, a.crow.options());
  Tensor slot = at::empty({a.nse}, a.crow.options());
  Tensor indices = at::empty({nrows, with_indices ? n : 0}, a.crow.options());
  with_compute_type<true>(a.compute, [&](auto zero) {
    using T = decltype(zero);
    const int64_t* cp = a.crow.const_data_ptr<int64_t>();
    const int64_t* colp = a.col.const_data_ptr<int64_t>();
    const T* vp = a.values.const_data_ptr<T>();
    const T* fp = a.fill.const_data_ptr<T>();
    int64_t* pp = perm.data_ptr<int64_t>();
    int64_t* sp = slot.data_ptr<int64_t>();
    int64_t* ip = with_indices ? indices.data_ptr<int64_t>() : nullptr;
    // a row's work: its stored values sorted (~8 units each) and, with the
    // indices, its n slots written
    const int64_t row_n = with_indices ? n : 0;
    for_ranges_by([cp, row_n](int64_t r) { return cp[r] * 8 + r * row_n; }, nrows, 1,
                  "lane_sort_fill crow_indices/col_indices", [&](int64_t r0, int64_t r1) {
                    return Core<T>::lane_sort_fill(pp, sp, ip, cp, colp, vp, fp, a.fill_stride,
                                                   nrows, n, a.nse, descending ? 1 : 0, r0, r1);
                  });
  });
  return {perm, slot, indices};
}

Tensor rows_from_crow_cpu(const Tensor& crow_in) {
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

Tensor crow_from_rows_cpu(const Tensor& rows_in, int64_t nrows) {
  Tensor rows = index_arg(rows_in, "rows", 1);
  TORCH_CHECK(nrows >= 0, "sparsefill: nrows must be non-negative, got ", nrows);
  Tensor crow = at::empty({nrows + 1}, rows.options());
  // Element ranges on torch's threads: each pointer is written by one range.
  const int64_t nse = rows.numel(), chunks = merge_chunks(nse);
  auto status = for_chunks(chunks, [&](int64_t c) {
    return sf_crow_from_rows_range(crow.data_ptr<int64_t>(), rows.data_ptr<int64_t>(), nse,
                                   nrows, chunk_begin(nse, chunks, c),
                                   chunk_begin(nse, chunks, c + 1));
  });
  check_chunks(status, "row indices (they must be sorted and in range)");
  return crow;
}

// index_select along sparse dim `dim` of coalesced indices (sparsefill_core.h,
// sf_select_*): the index mapped once, the elements cut at group starts into
// one chunk per thread, counted, placed by a prefix sum and written into
// outputs of the exact size; the same result for any number of threads.
std::tuple<Tensor, Tensor> index_select_plan_cpu(const Tensor& indices_in, const Tensor& index_in,
                                                 int64_t dim, at::IntArrayRef sparse_size) {
  auto size = sizes_arg(sparse_size, "size");
  Tensor indices = index_arg(indices_in, "indices", 2);
  Tensor index = index_arg(index_in, "index", 1);
  const int64_t sparse_dim = (int64_t)size.size(), nse = indices.size(1), k = index.numel();
  TORCH_CHECK(indices.size(0) == sparse_dim, "sparsefill: index_select_plan: indices has ",
              indices.size(0), " rows but size ", sparse_size, " has ", sparse_dim,
              " sparse dimensions");
  TORCH_CHECK(dim >= 0 && dim < sparse_dim, "sparsefill: index_select_plan: dim ", dim,
              " is not a sparse dimension of size ", sparse_size);
  const int64_t* ind = indices.data_ptr<int64_t>();
  std::vector<int64_t> first(size[dim] + 1), positions(k);
  sf_site site{-1, -1, -1};
  sf_status st = sf_select_positions(first.data(), positions.data(), &site,
                                     index.data_ptr<int64_t>(), k, size[dim]);
  TORCH_CHECK_INDEX(st != SF_ERR_INDEX_NEGATIVE && st != SF_ERR_INDEX_OUT_OF_RANGE,
                    "index_select(): index[", site.position, "] = ", site.value,
                    " is out of bounds for dimension ", dim, " of size ", size[dim]);
  check_status(st, "index");
  const int64_t chunks = merge_chunks(nse);
  std::vector<int64_t> cut(chunks + 1), count(chunks, 0);
  check_status(sf_select_cuts(cut.data(), chunks, ind, sparse_dim, nse, dim), "indices");
  std::vector<sf_site> sites(chunks, sf_site{-1, -1, -1});
  // The elements each chunk selects, so that the write pass visits only
  // those (uninitialised: only the pages written are touched).
  std::unique_ptr<int64_t[]> hits(new int64_t[std::max<int64_t>(nse, 1)]);
  std::vector<int64_t> hit_count(chunks, 0);
  auto status = for_chunks(chunks, [&](int64_t c) {
    return sf_select_count_range(&count[c], hits.get() + cut[c], &hit_count[c], &sites[c], ind,
                                 sparse_dim, nse, size.data(), dim, first.data(), cut[c],
                                 cut[c + 1]);
  });
  std::vector<int64_t> out_begin(chunks + 1, 0);
  for (int64_t c = 0; c < chunks; ++c) {
    if (status[c] == SF_ERR_INDEX_NEGATIVE || status[c] == SF_ERR_INDEX_OUT_OF_RANGE) {
      check_coo_status(status[c], sites[c], size);
    }
    check_status(status[c], "indices (they must be coalesced)", &sites[c]);
    TORCH_CHECK(out_begin[c] <= INT64_MAX - count[c], "sparsefill: index_select_plan: the "
                "result has more than 2^63 elements");
    out_begin[c + 1] = out_begin[c] + count[c];
  }
  const int64_t nse_out = out_begin[chunks];
  Tensor indices_out = at::empty({sparse_dim, nse_out}, indices.options());
  Tensor src = at::empty({nse_out}, indices.options());
  status = for_chunks(chunks, [&](int64_t c) {
    return sf_select_write_range(indices_out.data_ptr<int64_t>(), src.data_ptr<int64_t>(),
                                 nse_out, out_begin[c], out_begin[c + 1], ind, sparse_dim, nse,
                                 dim, first.data(), positions.data(), k, hits.get() + cut[c],
                                 hit_count[c], cut[c], cut[c + 1]);
  });
  for (auto s : status) check_status(s, "index_select plan");
  return {indices_out, src};
}

}  // namespace sparsefill

#ifdef SPARSEFILL_WITH_CUDA
#include "ops/structure/on_cuda.h"

namespace sparsefill {

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

}  // namespace sparsefill
#endif  // SPARSEFILL_WITH_CUDA
