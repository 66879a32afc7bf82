// ops/cpu/structure.cpp -- the CPU kernels of the structural ops
// (ops/structure.h): unpack and check component tensors, call the C core
// (sparsefill_core.h), which does the structural work.
#include <torch/library.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "ops/common/row_ranges.h"
#include "ops/common/tracking.h"
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

// The union of two coalesced COO patterns, cut into chunks of the output
// for torch's threads (sparsefill_core.h, sf_union_*): the first pass checks
// and counts each chunk, a prefix sum places it, the second pass writes it
// into outputs of the exact size. Index columns are compared as they are
// (no linearisation), and the result is the same for any number of threads.
struct UnionChunks {
  int64_t sparse_dim = 0;
  std::vector<sf_union_side> a, b;  // per chunk, the operands' ranges
  std::vector<int64_t> first;       // per chunk, its first output column; back(): nse
  Tensor indices_a, indices_b;      // checked int64 (keep the sides' pointers alive)
};

UnionChunks union_chunks(const Tensor& indices_a_in, const Tensor& indices_b_in,
                         at::IntArrayRef sparse_size) {
  auto size = sizes_arg(sparse_size, "size");
  UnionChunks u;
  u.indices_a = index_arg(indices_a_in, "indices_a", 2);
  u.indices_b = index_arg(indices_b_in, "indices_b", 2);
  u.sparse_dim = (int64_t)size.size();
  TORCH_CHECK(u.indices_a.size(0) == u.sparse_dim && u.indices_b.size(0) == u.sparse_dim,
              "sparsefill: indices_a and indices_b must have one row per sparse dimension (",
              u.sparse_dim, "), got shapes ", u.indices_a.sizes(), " and ",
              u.indices_b.sizes());
  const int64_t na = u.indices_a.size(1), nb = u.indices_b.size(1);
  const int64_t chunks = merge_chunks(na + nb);
  std::vector<int64_t> cut_a(chunks + 1), cut_b(chunks + 1);
  const int64_t* ia = u.indices_a.data_ptr<int64_t>();
  const int64_t* ib = u.indices_b.data_ptr<int64_t>();
  check_status(sf_union_cuts(cut_a.data(), cut_b.data(), chunks, ia, na, ib, nb, u.sparse_dim),
               "indices of a binary op's operands");
  for (int64_t c = 0; c < chunks; ++c) {
    u.a.push_back(sf_union_side{ia, na, cut_a[c], cut_a[c + 1], nullptr, nullptr, nullptr,
                                nullptr, 0});
    u.b.push_back(sf_union_side{ib, nb, cut_b[c], cut_b[c + 1], nullptr, nullptr, nullptr,
                                nullptr, 0});
  }
  std::vector<int64_t> count(chunks, 0);
  std::vector<sf_site> site(chunks, sf_site{-1, -1, -1});
  auto status = for_chunks(chunks, [&](int64_t c) {
    return sf_union_count_range(&count[c], &site[c], &u.a[c], &u.b[c], u.sparse_dim,
                                size.data());
  });
  for (int64_t c = 0; c < chunks; ++c) {
    check_status(status[c], "indices of a binary op's operands (they must be coalesced)",
                 &site[c]);
  }
  u.first.assign(chunks + 1, 0);
  for (int64_t c = 0; c < chunks; ++c) u.first[c + 1] = u.first[c] + count[c];
  return u;
}

// The second pass: indices (sparse_dim, nse) of the union, and whatever the
// sides' output pointers ask for.
void write_union(const UnionChunks& u, const Tensor& indices) {
  const int64_t nse = u.first.back();
  auto status = for_chunks((int64_t)u.a.size(), [&](int64_t c) {
    return sf_union_write_range(indices.data_ptr<int64_t>(), nse, u.first[c], &u.a[c], &u.b[c],
                                u.sparse_dim);
  });
  check_chunks(status, "union of two patterns");
}

std::tuple<Tensor, Tensor, Tensor> union_plan(const Tensor& indices_a, const Tensor& indices_b,
                                              at::IntArrayRef sparse_size) {
  UnionChunks u = union_chunks(indices_a, indices_b, sparse_size);
  const int64_t nse = u.first.back();
  Tensor indices = at::empty({u.sparse_dim, nse}, u.indices_a.options());
  Tensor src_a = at::empty({nse}, u.indices_a.options());
  Tensor src_b = at::empty({nse}, u.indices_a.options());
  for (auto& side : u.a) side.src = src_a.data_ptr<int64_t>();
  for (auto& side : u.b) side.src = src_b.data_ptr<int64_t>();
  write_union(u, indices);
  return {indices, src_a, src_b};
}

// values (nse, *dense) contiguous and fill's dense-part row, in values' dtype.
std::pair<Tensor, Tensor> values_and_fill_row(const Tensor& values, const Tensor& fill,
                                              const char* name) {
  TORCH_CHECK(values.dim() >= 1 && values.device().is_cpu() && fill.device().is_cpu(),
              "sparsefill: union_values: ", name, " must be CPU tensors with a leading nse "
              "dimension, got values of shape ", values.sizes(), " on ", values.device());
  auto dense = values.sizes().slice(1);
  TORCH_CHECK(broadcasts_to(fill.sizes(), dense), "sparsefill: union_values: the fill of ", name,
              " (shape ", fill.sizes(), ") must broadcast to its dense part ", dense,
              " (a per-slice fill goes through union_plan and gather_with_fill)");
  return {values.contiguous(), fill.to(values.scalar_type()).expand(dense).contiguous()};
}

std::tuple<Tensor, Tensor, Tensor> union_values(const Tensor& indices_a, const Tensor& values_a,
                                                const Tensor& fill_a, const Tensor& indices_b,
                                                const Tensor& values_b, const Tensor& fill_b,
                                                at::IntArrayRef sparse_size) {
  // No derivative of its own: the element-wise ops call it only when nothing
  // is differentiated; a direct call that asks for one is refused.
  TORCH_CHECK(!tracks_gradient({values_a, fill_a, values_b, fill_b}),
              "sparsefill: union_values has no derivative; with gradients, align the operands "
              "with union_plan and gather_with_fill (the element-wise ops do)");
  auto [va, fa] = values_and_fill_row(values_a, fill_a, "operand a");
  auto [vb, fb] = values_and_fill_row(values_b, fill_b, "operand b");
  TORCH_CHECK(va.size(0) == indices_a.size(-1) && vb.size(0) == indices_b.size(-1),
              "sparsefill: union_values: values must have one row per stored element, got ",
              va.size(0), " and ", vb.size(0), " rows for ", indices_a.size(-1), " and ",
              indices_b.size(-1), " elements");
  UnionChunks u = union_chunks(indices_a, indices_b, sparse_size);
  const int64_t nse = u.first.back();
  Tensor indices = at::empty({u.sparse_dim, nse}, u.indices_a.options());
  Tensor out_a = at::empty(cat_sizes({nse}, va.sizes().slice(1)), va.options());
  Tensor out_b = at::empty(cat_sizes({nse}, vb.sizes().slice(1)), vb.options());
  auto outputs = [](std::vector<sf_union_side>& sides, const Tensor& v, const Tensor& f,
                    const Tensor& out) {
    const size_t row_bytes = (size_t)f.numel() * f.element_size();
    for (auto& side : sides) {
      side.values = v.data_ptr();
      side.fill_row = f.data_ptr();
      side.values_out = out.data_ptr();
      side.row_bytes = row_bytes;
    }
  };
  outputs(u.a, va, fa, out_a);
  outputs(u.b, vb, fb, out_b);
  write_union(u, indices);
  return {indices, out_a, out_b};
}

// index_select along sparse dim `dim` of coalesced indices (sparsefill_core.h,
// sf_select_*): the index mapped once, the elements cut at group starts into
// one chunk per thread, counted, placed by a prefix sum and written into
// outputs of the exact size; the same result for any number of threads.
std::tuple<Tensor, Tensor> index_select_plan(const Tensor& indices_in, const Tensor& index_in,
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
  m.impl("union_values", &sparsefill::union_values);
  m.impl("index_select_plan", &sparsefill::index_select_plan);
}
