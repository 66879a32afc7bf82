// ops/structure/union.cpp -- the kernels of the union of two COO patterns
// (the ops: tools/codegen/native.yaml; their shared rules: structure.h):
// union_plan on the CPU (the C core's chunked merge, sf_union_*, on torch's
// threads) and on CUDA (sf_cuda_union_plan; CUDA build only), and union_values
// (CPU), the union and both operands' values in one pass.
#include <torch/library.h>

#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "ops/common/row_ranges.h"
#include "ops/common/tracking.h"
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
  Tensor indices = at::empty({u.sparse_dim, nse}, u.indices_a.options());
  Tensor src_a = at::empty({nse}, u.indices_a.options());
  Tensor src_b = at::empty({nse}, u.indices_a.options());
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
