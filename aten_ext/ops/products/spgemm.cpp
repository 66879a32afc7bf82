// ops/products/spgemm.cpp -- spgemm's kernels (the op: tools/codegen/native.yaml;
// its shared rules: products.h): the fill-0 CSR @ CSR product, on the CPU in one
// pass over the products (sf_products.c, rows on torch's threads; plus
// sddmm_sparse_cpu, its backward's sampled product) and on CUDA through cuSPARSE
// SpGEMM (sf_cuda_spgemm.cu, 32-bit indices; CUDA build only).
#include <torch/library.h>

#include <ATen/ops/cumsum.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <climits>
#include <cstring>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "ops/common/dtypes.h"
#include "ops/common/row_ranges.h"
#include "ops/generated/kernels.h"
#include "ops/products/products.h"

namespace sparsefill {
namespace {

// ---- spgemm (fill 0) -------------------------------------------------------------

}  // namespace

std::tuple<Tensor, Tensor, Tensor> spgemm_cpu(const Tensor& crow_a_in, const Tensor& col_a_in,
                                              const Tensor& values_a, const Tensor& crow_b_in,
                                              const Tensor& col_b_in, const Tensor& values_b,
                                              int64_t n) {
  Tensor crow_a = index_arg(crow_a_in, "crow_indices of the first operand", 1);
  Tensor col_a = index_arg(col_a_in, "col_indices of the first operand", 1);
  Tensor crow_b = index_arg(crow_b_in, "crow_indices of the second operand", 1);
  Tensor col_b = index_arg(col_b_in, "col_indices of the second operand", 1);
  check_cpu_float(values_a, "values of the first operand");
  check_cpu_float(values_b, "values of the second operand");
  check_spgemm_args(values_a, values_b, n);
  const int64_t m = csr_operand_rows(crow_a, col_a, values_a, "spgemm: the first operand's");
  const int64_t k = csr_operand_rows(crow_b, col_b, values_b, "spgemm: the second operand's");
  const auto out_type = values_a.scalar_type();
  const auto ct = compute_type(out_type, "spgemm", false);
  Tensor va = values_a.to(ct).contiguous(), vb = values_b.to(ct).contiguous();
  const int64_t* ca = crow_a.data_ptr<int64_t>();
  const int64_t* cb = crow_b.data_ptr<int64_t>();
  const int64_t* cla = col_a.data_ptr<int64_t>();
  const int64_t* clb = col_b.data_ptr<int64_t>();
  const int64_t nse_a = va.numel(), nse_b = vb.numel();
  // One pass over the products, no symbolic count (it was 30% of the op):
  // each row's bound (its products' count) first, a cheap read of A's
  // columns; then each chunk of rows, cut by that estimated work (not by
  // rows), appends its rows to a buffer of its own, grown when a row's bound
  // does not fit; the buffers are the output, copied into place when there
  // are several. Rows are computed whole, so 1 and 2 threads give the same bits.
  Tensor row_bound = at::empty({m}, crow_a.options());
  int64_t* rb = row_bound.data_ptr<int64_t>();
  // (one thread: O(nse_a) reads, less than a parallel region's start on a busy machine)
  check_status(sf_csr_spgemm_bounds(rb, ca, cla, m, k, nse_a, cb, nse_b, 0, m), "spgemm operands");
  std::vector<int64_t> work(m + 1, 0);
  for (int64_t i = 0; i < m; ++i) {
    TORCH_CHECK(!__builtin_add_overflow(work[i], rb[i], &work[i + 1]),
                "sparsefill: spgemm: the number of products overflows int64");
  }
  const int64_t total = work[m];
  const int64_t threads = at::get_num_threads();
  const int64_t chunks = threads <= 1 || total + m < 32768 || m < 2 ? 1 : std::min(threads, m);
  const std::vector<int64_t> bounds =
      range_bounds([&work](int64_t r) { return work[r]; }, m, chunks);
  Tensor row_nse = at::empty({m}, crow_a.options());
  struct Part {
    Tensor col, val;
    int64_t used = 0;
  };
  std::vector<Part> parts(chunks);
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    auto status = for_chunks(chunks, [&](int64_t c) -> sf_status {
      const int64_t r0 = bounds[c], r1 = bounds[c + 1];
      const int64_t need = work[r1] - work[r0];
      // A first size: the rows' bound, but at most their share of four
      // times the operands' stored elements (a product whose rows collide
      // much has far fewer elements than products; the buffer then grows).
      const double share = total > 0 ? static_cast<double>(need) / total : 0.0;
      int64_t cap = std::min<int64_t>(
          need, std::max<int64_t>(1024, static_cast<int64_t>(4.0 * (nse_a + nse_b) * share)));
      Part& part = parts[c];
      part.col = at::empty({cap}, crow_a.options());
      part.val = at::empty({cap}, va.options());
      std::vector<T> acc(n);
      std::vector<uint64_t> bits((n + 63) / 64);
      for (int64_t next = r0;;) {
        int64_t stop = next;
        const sf_status st = Core<T>::spgemm_rows(
            part.col.template data_ptr<int64_t>(), part.val.template data_ptr<T>(), cap,
            &part.used, row_nse.data_ptr<int64_t>(), &stop, rb, ca, cla, va.data_ptr<T>(), m, k,
            nse_a, cb, clb, vb.data_ptr<T>(), n, nse_b, acc.data(), bits.data(), next, r1);
        if (st != SF_OK || stop == r1) return st;
        cap = std::max(2 * cap, part.used + rb[stop]);
        Tensor col = at::empty({cap}, crow_a.options()), val = at::empty({cap}, va.options());
        std::memcpy(col.data_ptr<int64_t>(), part.col.template data_ptr<int64_t>(),
                    sizeof(int64_t) * part.used);
        std::memcpy(val.data_ptr<T>(), part.val.template data_ptr<T>(), sizeof(T) * part.used);
        part.col = std::move(col);
        part.val = std::move(val);
        next = stop;
      }
    });
    check_chunks(status, "spgemm operands");
  });
  Tensor crow_c = at::zeros({m + 1}, crow_a.options());
  if (m > 0) {
    Tensor tail = crow_c.narrow(0, 1, m);
    at::cumsum_out(tail, row_nse, 0);
  }
  std::vector<int64_t> offset(chunks + 1, 0);
  for (int64_t c = 0; c < chunks; ++c) offset[c + 1] = offset[c] + parts[c].used;
  const int64_t nse_c = offset[chunks];
  Tensor col_c, val_c;
  if (chunks == 1 && 2 * nse_c >= parts[0].col.numel()) {
    // one buffer, at least half used: it is the output (no copy)
    col_c = parts[0].col.narrow(0, 0, nse_c);
    val_c = parts[0].val.narrow(0, 0, nse_c);
  } else {
    col_c = at::empty({nse_c}, crow_a.options());
    val_c = at::empty({nse_c}, va.options());
    const size_t elem = va.element_size();
    auto* col_out = col_c.data_ptr<int64_t>();
    auto* val_out = static_cast<char*>(val_c.data_ptr());
    check_chunks(for_chunks(chunks, [&](int64_t c) {
                   const Part& part = parts[c];
                   std::memcpy(col_out + offset[c], part.col.data_ptr<int64_t>(),
                               sizeof(int64_t) * part.used);
                   std::memcpy(val_out + elem * offset[c], part.val.data_ptr(), elem * part.used);
                   return SF_OK;
                 }),
                 "spgemm operands");
  }
  return {crow_c, col_c, val_c.to(out_type)};
}

Tensor sddmm_sparse_cpu(const Tensor& crow_p, const Tensor& col_p, int64_t ncols_p,
                        const Tensor& crow_x, const Tensor& col_x, const Tensor& val_x_in,
                        const Tensor& crow_s, const Tensor& col_s, const Tensor& val_s_in,
                        int64_t n) {
  const auto out_type = val_x_in.scalar_type();
  const auto ct = compute_type(out_type, "sddmm_sparse", false);
  Tensor val_x = val_x_in.to(ct).contiguous(), val_s = val_s_in.to(ct).contiguous();
  const int64_t m = crow_p.numel() - 1, nse_p = col_p.numel();
  TORCH_CHECK(crow_x.numel() == m + 1 && crow_s.numel() == ncols_p + 1,
              "sparsefill: sddmm_sparse: operand shapes disagree");
  Tensor out = at::empty({nse_p}, val_x.options());
  with_compute_type(ct, [&](auto zero) {
    using T = decltype(zero);
    const int64_t* cp = crow_p.data_ptr<int64_t>();
    for_row_ranges(cp, m, 4, "sddmm operands", [&](int64_t r0, int64_t r1) {
      std::vector<T> acc(n);
      return Core<T>::sddmm_sparse(
          out.data_ptr<T>(), cp, col_p.data_ptr<int64_t>(), m, ncols_p, nse_p,
          crow_x.data_ptr<int64_t>(), col_x.data_ptr<int64_t>(), val_x.data_ptr<T>(),
          val_x.numel(), crow_s.data_ptr<int64_t>(), col_s.data_ptr<int64_t>(),
          val_s.data_ptr<T>(), val_s.numel(), n, acc.data(), r0, r1);
    });
  });
  return out.to(out_type);
}

}  // namespace sparsefill

#ifdef SPARSEFILL_WITH_CUDA
#include "ops/products/on_cuda.h"

namespace sparsefill {
namespace {

// ---- spgemm (fill 0) ------------------------------------------------------------------

// cuSPARSE SpGEMM takes 32-bit indices only. We convert int64 indices when
// every size and count fits and refuse otherwise, never truncating.
void check_int32(int64_t v, const char* name) {
  TORCH_CHECK(v <= INT32_MAX, "sparsefill: spgemm on CUDA uses cuSPARSE SpGEMM, which takes "
              "32-bit indices: ", name, " must be at most 2147483647 (INT32_MAX), got ", v);
}

}  // namespace

std::tuple<Tensor, Tensor, Tensor> spgemm_cuda(const Tensor& crow_a_in, const Tensor& col_a_in,
                                               const Tensor& values_a, const Tensor& crow_b_in,
                                               const Tensor& col_b_in, const Tensor& values_b,
                                               int64_t n) {
  Tensor crow_a = index_arg(crow_a_in, "crow_indices of the first operand", 1, kCUDA);
  Tensor col_a = index_arg(col_a_in, "col_indices of the first operand", 1, kCUDA);
  Tensor crow_b = index_arg(crow_b_in, "crow_indices of the second operand", 1, kCUDA);
  Tensor col_b = index_arg(col_b_in, "col_indices of the second operand", 1, kCUDA);
  const at::Device device = crow_a.device();
  for (const Tensor* t : {&col_a, &crow_b, &col_b}) {
    TORCH_CHECK(t->device() == device, "sparsefill: spgemm: every index tensor must be on ",
                device, ", got one on ", t->device());
  }
  check_cuda_float(values_a, "values of the first operand", device);
  check_cuda_float(values_b, "values of the second operand", device);
  check_spgemm_args(values_a, values_b, n);
  const char* what_a = "spgemm: the first operand's";
  const char* what_b = "spgemm: the second operand's";
  const int64_t m = csr_operand_shape(crow_a, col_a, values_a, what_a);
  const int64_t k = csr_operand_shape(crow_b, col_b, values_b, what_b);
  const int64_t nse_a = col_a.numel(), nse_b = col_b.numel();
  c10::cuda::CUDAGuard guard(device);
  Reports reports(2, device);
  check_call(sf_cuda_csr_operand_check(reports.at(0), crow_a.data_ptr<int64_t>(),
                                       col_a.data_ptr<int64_t>(), m, k, nse_a, 1,
                                       current_stream()),
             "spgemm operands");
  check_call(sf_cuda_csr_operand_check(reports.at(1), crow_b.data_ptr<int64_t>(),
                                       col_b.data_ptr<int64_t>(), k, n, nse_b, 1,
                                       current_stream()),
             "spgemm operands");
  const auto r = reports.read();  // before cuSPARSE reads the indices
  check_operand_ends(r[0], what_a, nse_a);
  check_operand_ends(r[1], what_b, nse_b);
  check_status((sf_status)r[0].status, "spgemm operands");
  check_status((sf_status)r[1].status, "spgemm operands");

  const auto out_type = values_a.scalar_type();
  const auto ct = compute_type(out_type, "spgemm", false);
  const auto index_opts = crow_a.options();
  if (m == 0 || n == 0 || nse_a == 0 || nse_b == 0) {  // no stored product: no library call
    return {at::zeros({m + 1}, index_opts), at::empty({0}, index_opts),
            at::empty({0}, values_a.options())};
  }
  check_int32(m, "the first operand's rows");
  check_int32(k, "the inner size");
  check_int32(n, "the second operand's columns");
  check_int32(nse_a, "the first operand's stored elements");
  check_int32(nse_b, "the second operand's stored elements");
  Tensor va = values_a.to(ct).contiguous(), vb = values_b.to(ct).contiguous();
  // Checked above: every entry lies in [0, INT32_MAX].
  Tensor crow_a32 = crow_a.to(at::kInt), col_a32 = col_a.to(at::kInt);
  Tensor crow_b32 = crow_b.to(at::kInt), col_b32 = col_b.to(at::kInt);
  return with_compute_type(ct, [&](auto zero) -> std::tuple<Tensor, Tensor, Tensor> {
    using T = decltype(zero);
    int cs = 0;
    sf_cuda_spgemm* raw = nullptr;
    const sf_status created = CudaCore<T>::spgemm_create(
        &raw, &cs, sparse_handle(), m, k, n, crow_a32.data_ptr<int32_t>(),
        col_a32.data_ptr<int32_t>(), va.data_ptr<T>(), nse_a, crow_b32.data_ptr<int32_t>(),
        col_b32.data_ptr<int32_t>(), vb.data_ptr<T>(), nse_b, current_stream());
    std::unique_ptr<sf_cuda_spgemm, void (*)(sf_cuda_spgemm*)> state(raw, sf_cuda_spgemm_destroy);
    check_library_call(created, cs, "spgemm");
    // Each stage's buffer stays alive (stream-ordered) until the copy.
    size_t bytes1 = 0, bytes2 = 0;
    check_library_call(sf_cuda_spgemm_estimate(state.get(), &cs, nullptr, &bytes1), cs,
                       "spgemm");
    Tensor ws1 = workspace(bytes1, va);
    check_library_call(sf_cuda_spgemm_estimate(state.get(), &cs, ws1.data_ptr(), &bytes1), cs,
                       "spgemm");
    int64_t nse_c = 0;
    check_library_call(sf_cuda_spgemm_compute(state.get(), &cs, nullptr, &bytes2, nullptr), cs,
                       "spgemm");
    Tensor ws2 = workspace(bytes2, va);
    const sf_status computed = sf_cuda_spgemm_compute(state.get(), &cs, ws2.data_ptr(), &bytes2,
                                                      &nse_c);
    if (computed == SF_ERR_OVERFLOW) check_int32(nse_c, "the product's stored elements");
    check_library_call(computed, cs, "spgemm");
    if (nse_c == 0) {
      return {at::zeros({m + 1}, index_opts), at::empty({0}, index_opts),
              at::empty({0}, values_a.options())};
    }
    Tensor crow_c32 = at::empty({m + 1}, crow_a32.options());
    Tensor col_c32 = at::empty({nse_c}, crow_a32.options());
    Tensor val_c = at::empty({nse_c}, va.options());
    check_library_call(CudaCore<T>::spgemm_copy(state.get(), &cs, crow_c32.data_ptr<int32_t>(),
                                                col_c32.data_ptr<int32_t>(), val_c.data_ptr<T>()),
                       cs, "spgemm");
    return {crow_c32.to(at::kLong), col_c32.to(at::kLong), val_c.to(out_type)};
  });
}

}  // namespace sparsefill
#endif  // SPARSEFILL_WITH_CUDA
