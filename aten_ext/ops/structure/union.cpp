// ops/structure/union.cpp -- the kernels of the union of two COO patterns
// (the ops: tools/codegen/native.yaml; their shared rules: structure.h):
// union_plan on the CPU (the C core's chunked merge, sf_union_*, on torch's
// threads) and on CUDA (sf_cuda_union_plan; CUDA build only), and union_values
// (CPU), the union and both operands' values in one pass, and union_binop
// (CPU), the union and a binary op's values of two 2-D operands, by rows.
#include <torch/library.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "ops/common/dtypes.h"
#include "ops/common/memory.h"
#include "ops/common/row_ranges.h"
#include "ops/common/tracking.h"
#include "ops/common/union_rows.h"
#include "ops/generated/kernels.h"
#include "ops/structure/structure.h"

namespace sparsefill {
namespace {

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

}  // namespace

std::tuple<Tensor, Tensor, Tensor> union_plan_cpu(const Tensor& indices_a, const Tensor& indices_b,
                                                  at::IntArrayRef sparse_size) {
  UnionChunks u = union_chunks(indices_a, indices_b, sparse_size);
  const int64_t nse = u.first.back();
  Tensor indices = empty_output({u.sparse_dim, nse}, u.indices_a.options());
  Tensor src_a = empty_output({nse}, u.indices_a.options());
  Tensor src_b = empty_output({nse}, u.indices_a.options());
  for (auto& side : u.a) side.src = src_a.data_ptr<int64_t>();
  for (auto& side : u.b) side.src = src_b.data_ptr<int64_t>();
  write_union(u, indices);
  return {indices, src_a, src_b};
}

namespace {

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

}  // namespace

std::tuple<Tensor, Tensor, Tensor> union_values_cpu(const Tensor& indices_a, const Tensor& values_a,
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
  Tensor indices = empty_output({u.sparse_dim, nse}, u.indices_a.options());
  Tensor out_a = empty_output(cat_sizes({nse}, va.sizes().slice(1)), va.options());
  Tensor out_b = empty_output(cat_sizes({nse}, vb.sizes().slice(1)), vb.options());
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

std::tuple<Tensor, Tensor> union_binop_cpu(const Tensor& indices_a_in, const Tensor& values_a_in,
                                           const Tensor& fill_a, const Tensor& indices_b_in,
                                           const Tensor& values_b_in, const Tensor& fill_b,
                                           at::IntArrayRef size_in, int64_t binop) {
  TORCH_CHECK(!tracks_gradient({values_a_in, fill_a, values_b_in, fill_b}),
              "sparsefill: union_binop has no derivative; with gradients, align the operands "
              "with union_plan and gather_with_fill (the element-wise ops do)");
  auto size = sizes_arg(size_in, "size");
  TORCH_CHECK(size.size() == 2, "sparsefill: union_binop: size must be 2-D, got ", size_in);
  Tensor indices_a = index_arg(indices_a_in, "indices_a", 2);
  Tensor indices_b = index_arg(indices_b_in, "indices_b", 2);
  TORCH_CHECK(indices_a.size(0) == 2 && indices_b.size(0) == 2,
              "sparsefill: union_binop: indices_a and indices_b must have 2 rows, got shapes ",
              indices_a.sizes(), " and ", indices_b.sizes());
  const auto dtype = values_a_in.scalar_type();
  TORCH_CHECK(dtype == at::kFloat || dtype == at::kDouble || dtype == at::kLong,
              "sparsefill: union_binop: values_a must be float32, float64 or int64, got ", dtype);
  const std::array<std::pair<const Tensor*, const char*>, 3> same{
      {{&values_b_in, "values_b"}, {&fill_a, "fill_a"}, {&fill_b, "fill_b"}}};
  for (const auto& [t, name] : same) {
    TORCH_CHECK(t->scalar_type() == dtype && t->device().is_cpu(), "sparsefill: union_binop: ",
                name, " must be a CPU tensor of values_a's dtype ", dtype, ", got ",
                t->scalar_type(), " on ", t->device());
  }
  TORCH_CHECK(values_a_in.device().is_cpu(), "sparsefill: union_binop: values_a must be on the "
              "CPU, got ", values_a_in.device());
  TORCH_CHECK(values_a_in.dim() == 1 && values_a_in.size(0) == indices_a.size(1) &&
                  values_b_in.dim() == 1 && values_b_in.size(0) == indices_b.size(1),
              "sparsefill: union_binop: values_a and values_b must be 1-D, one per stored "
              "element, got shapes ", values_a_in.sizes(), " and ", values_b_in.sizes(),
              " for ", indices_a.size(1), " and ", indices_b.size(1), " elements");
  TORCH_CHECK(fill_a.numel() == 1 && fill_b.numel() == 1, "sparsefill: union_binop: fill_a "
              "and fill_b must be one element each, got shapes ", fill_a.sizes(), " and ",
              fill_b.sizes());
  TORCH_CHECK(binop >= SF_OP_PLUS && binop <= SF_OP_GE, "sparsefill: union_binop: binop must "
              "be a code of sf_binop (0 to 19), got ", binop);
  TORCH_CHECK(dtype != at::kLong || (binop != SF_OP_DIV && binop != SF_OP_RDIV),
              "sparsefill: union_binop: an int64 division gives floats (torch's true "
              "division); binop ", binop, " is refused for int64");
  const int64_t m = size[0], ncols = size[1];
  const int64_t nse_a = indices_a.size(1), nse_b = indices_b.size(1);
  Tensor values_a = values_a_in.contiguous(), values_b = values_b_in.contiguous();
  Tensor fa = fill_a.reshape({}).contiguous(), fb = fill_b.reshape({}).contiguous();
  const int64_t* rows_a = indices_a.const_data_ptr<int64_t>();
  const int64_t* rows_b = indices_b.const_data_ptr<int64_t>();
  // Each operand's rows as pointers (sorted rows checked), so that the merge
  // runs by rows: rows compare once per row, columns once per element.
  auto crow_of = [m](const int64_t* rows, int64_t nse, const char* what) {
    Tensor crow = at::empty({m + 1}, at::TensorOptions().dtype(at::kLong));
    const int64_t chunks = merge_chunks(nse);
    auto status = for_chunks(chunks, [&](int64_t c) {
      return sf_crow_from_rows_range(crow.data_ptr<int64_t>(), rows, nse, m,
                                     chunk_begin(nse, chunks, c), chunk_begin(nse, chunks, c + 1));
    });
    check_chunks(status, what);
    return crow;
  };
  Tensor crow_a = crow_of(rows_a, nse_a, "union_binop: indices_a (rows sorted, in range)");
  Tensor crow_b = crow_of(rows_b, nse_b, "union_binop: indices_b (rows sorted, in range)");
  const int64_t* cra = crow_a.const_data_ptr<int64_t>();
  const int64_t* crb = crow_b.const_data_ptr<int64_t>();
  const int64_t* col_a = rows_a + nse_a;
  const int64_t* col_b = rows_b + nse_b;
  // Pass 1: each row's size, and the columns checked (strictly increasing in
  // a row: coalesced).
  Tensor crow = union_crow(cra, col_a, nse_a, crb, col_b, nse_b, m, ncols,
                           "union_binop operands (they must be coalesced)");
  const int64_t* cr = crow.const_data_ptr<int64_t>();
  const int64_t nse = cr[m];
  Tensor indices = empty_output({2, nse}, indices_a.options());
  Tensor values = empty_output({nse}, values_a.options());
  int64_t* rows_out = indices.data_ptr<int64_t>();
  // Pass 2: columns and values, then the rows' indices, split by the result's work.
  with_compute_type<true>(dtype, [&](auto zero) {
    using T = decltype(zero);
    for_row_ranges(cr, m, 1, "union_binop operands", [&](int64_t r0, int64_t r1) {
      sf_status st = Core<T>::ewise_union(rows_out + nse, values.data_ptr<T>(), cr, nse, cra,
                                          col_a, values_a.const_data_ptr<T>(), nse_a, crb, col_b,
                                          values_b.const_data_ptr<T>(), nse_b, m, (int)binop,
                                          fa.const_data_ptr<T>(), fb.const_data_ptr<T>(), r0, r1);
      return st != SF_OK ? st : sf_csr_rows_from_crow_range(rows_out, cr, m, nse, r0, r1);
    });
  });
  return {indices, values};
}

}  // namespace sparsefill

#ifdef SPARSEFILL_WITH_CUDA
#include "ops/structure/on_cuda.h"

namespace sparsefill {
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

}  // namespace sparsefill
#endif  // SPARSEFILL_WITH_CUDA
