// ops/products/semiring.cpp -- the kernels of semiring_mv, semiring_vm,
// semiring_masked and ewise_merge (the ops: tools/codegen/native.yaml): the
// graph domain's semiring products and the union of two CSR patterns
// (torch_sparsefill/graph/ routes to them). CPU: check the components, then
// the C core (sf_semiring.c): mv, the masked dots and the merge's two passes
// over row ranges on torch's threads, vm in one push pass. CUDA (CUDA build
// only; ewise_merge stays CPU-only): the same rules and messages, then the
// CUDA core (sf_cuda_semiring.cu), whose out and arg are the CPU's bit for
// bit; each op synchronises once to read its reports.
#include <torch/library.h>

#include <ATen/ops/empty.h>

#include <string>
#include <type_traits>
#include <vector>

#include "ops/common/dtypes.h"
#include "ops/common/memory.h"
#include "ops/common/row_ranges.h"
#include "ops/common/union_rows.h"
#include "ops/generated/kernels.h"
#include "ops/products/products.h"

namespace sparsefill {

namespace {

// Where an argument must be, in a message: the CPU kernels take CPU tensors,
// the CUDA kernels tensors on the indices' GPU.
std::string where(const at::Device& device) {
  return device.is_cpu() ? std::string("the CPU") : device.str() + " (the indices' device)";
}

// The element types with a semiring entry, as they are (no promotion: the
// caller promotes, so that the terms are torch's), 1-D on `device`.
void check_semiring_values(const Tensor& t, const char* op, const char* name,
                           const at::Device& device) {
  const auto st = t.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kDouble || st == at::kLong, "sparsefill: ", op,
              ": ", name, " must be float32, float64 or int64, got ", st);
  TORCH_CHECK(t.device() == device, "sparsefill: ", op, ": ", name, " must be on ",
              where(device), ", got ", t.device());
  TORCH_CHECK(t.dim() == 1, "sparsefill: ", op, ": ", name, " must be 1-D, got shape ",
              t.sizes());
}

// Two value operands, each checked, of one dtype.
void check_value_pair(const Tensor& a, const char* name_a, const Tensor& b, const char* name_b,
                      const char* op, const at::Device& device) {
  check_semiring_values(a, op, name_a, device);
  check_semiring_values(b, op, name_b, device);
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "sparsefill: ", op, ": ", name_a, " and ",
              name_b, " must have one dtype, got ", a.scalar_type(), " and ", b.scalar_type());
}

void check_codes(int64_t monoid, int64_t binop, const char* what) {
  TORCH_CHECK(monoid >= SF_MONOID_PLUS && monoid <= SF_MONOID_ANY, "sparsefill: ", what,
              ": monoid must be a code of sf_monoid (0 to 6), got ", monoid);
  TORCH_CHECK(binop >= SF_OP_PLUS && binop <= SF_OP_GE, "sparsefill: ", what,
              ": binop must be a code of sf_binop (0 to 19), got ", binop);
}

void check_ncols(int64_t ncols, const char* op) {
  TORCH_CHECK(ncols >= 0, "sparsefill: ", op, ": ncols must be non-negative, got ", ncols);
}

// The arguments each op checks before it reads an index, one rule for the
// CPU and CUDA kernels (only `device` differs; the indices are checked by
// each, the CUDA kernels on the device).

// semiring_mv: x_present checked and contiguous, or undefined when not given.
Tensor mv_arguments(const Tensor& values, const Tensor& x,
                    const std::optional<Tensor>& x_present, int64_t monoid, int64_t binop,
                    const at::Device& device) {
  check_value_pair(values, "values", x, "x", "semiring_mv", device);
  check_codes(monoid, binop, "semiring_mv");
  if (!x_present.has_value() || !x_present->defined()) return Tensor();
  const Tensor& present = *x_present;
  const int64_t ncols = x.size(0);
  TORCH_CHECK(present.scalar_type() == at::kBool || present.scalar_type() == at::kByte,
              "sparsefill: semiring_mv: x_present must be bool or uint8, got ",
              present.scalar_type());
  TORCH_CHECK(present.dim() == 1 && present.size(0) == ncols && present.device() == device,
              "sparsefill: semiring_mv: x_present must be a 1-D tensor of ", ncols,
              " elements (x's) on ", where(device), ", got shape ", present.sizes(), " on ",
              present.device());
  return present.contiguous();
}

void vm_arguments(const Tensor& values, const Tensor& keys, const Tensor& u_values,
                  int64_t ncols, int64_t monoid, int64_t binop, const at::Device& device) {
  check_value_pair(values, "values", u_values, "u_values", "semiring_vm", device);
  TORCH_CHECK(keys.numel() == u_values.numel(), "sparsefill: semiring_vm: u has ", keys.numel(),
              " keys but ", u_values.numel(), " values");
  check_ncols(ncols, "semiring_vm");
  check_codes(monoid, binop, "semiring_vm");
}

void masked_arguments(const Tensor& values_a, const Tensor& values_b, int64_t ncols,
                      int64_t monoid, int64_t binop, const at::Device& device) {
  check_value_pair(values_a, "values_a", values_b, "values_b", "semiring_masked", device);
  check_ncols(ncols, "semiring_masked");
  check_codes(monoid, binop, "semiring_masked");
}

// semiring_masked, once A's and B's rows are known.
void masked_shapes(int64_t m, int64_t rows_b, int64_t ncols, bool by_dots,
                   const Tensor& crow_m) {
  TORCH_CHECK(!by_dots || rows_b == ncols, "sparsefill: semiring_masked: B^T must have ", ncols,
              " rows (ncols), got ", rows_b);
  TORCH_CHECK(crow_m.numel() == m + 1, "sparsefill: semiring_masked: the mask must have ", m,
              " rows (A's), got crow_m of ", crow_m.numel(), " elements");
}

// out in ACC: double for both floats, int64 for int64.
at::ScalarType accumulator_type(at::ScalarType t) {
  return t == at::kLong ? at::kLong : at::kDouble;
}

}  // namespace

std::tuple<Tensor, Tensor> semiring_mv_cpu(const Tensor& crow_in, const Tensor& col_in,
                                           const Tensor& values_in, const Tensor& x_in,
                                           const std::optional<Tensor>& x_present_in,
                                           int64_t monoid, int64_t binop) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  Tensor present = mv_arguments(values_in, x_in, x_present_in, monoid, binop, at::kCPU);
  const int64_t m = csr_operand_rows(crow, col, values_in, "semiring_mv: A's");
  const int64_t ncols = x_in.size(0), nse = col.numel();
  Tensor values = values_in.contiguous(), x = x_in.contiguous();
  const auto acc = accumulator_type(values.scalar_type());
  Tensor out = at::empty({m}, values.options().dtype(acc));
  Tensor arg = at::empty({m}, values.options().dtype(at::kLong));
  const uint8_t* pr = present.defined() ? static_cast<const uint8_t*>(present.const_data_ptr())
                                        : nullptr;
  with_compute_type<true>(values.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    using A = std::conditional_t<std::is_same_v<T, int64_t>, int64_t, double>;
    const int64_t* cr = crow.const_data_ptr<int64_t>();
    for_row_ranges(cr, m, 1, "semiring_mv operands", [&](int64_t r0, int64_t r1) {
      return Core<T>::semiring_mv(out.data_ptr<A>(), arg.data_ptr<int64_t>(), cr,
                                  col.const_data_ptr<int64_t>(), values.const_data_ptr<T>(), m,
                                  ncols, nse, x.const_data_ptr<T>(), pr, (int)monoid, (int)binop,
                                  r0, r1);
    });
  });
  return {out, arg};
}

std::tuple<Tensor, Tensor> semiring_vm_cpu(const Tensor& crow_in, const Tensor& col_in,
                                           const Tensor& values_in, const Tensor& u_keys_in,
                                           const Tensor& u_values_in, int64_t ncols,
                                           int64_t monoid, int64_t binop) {
  Tensor crow = index_arg(crow_in, "crow_indices", 1);
  Tensor col = index_arg(col_in, "col_indices", 1);
  Tensor keys = index_arg(u_keys_in, "u_keys", 1);
  vm_arguments(values_in, keys, u_values_in, ncols, monoid, binop, at::kCPU);
  const int64_t m = csr_operand_rows(crow, col, values_in, "semiring_vm: A's");
  Tensor values = values_in.contiguous(), u_values = u_values_in.contiguous();
  const auto acc = accumulator_type(values.scalar_type());
  Tensor out = at::empty({ncols}, values.options().dtype(acc));
  Tensor arg = at::empty({ncols}, values.options().dtype(at::kLong));
  with_compute_type<true>(values.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    using A = std::conditional_t<std::is_same_v<T, int64_t>, int64_t, double>;
    check_status(Core<T>::semiring_vm(out.data_ptr<A>(), arg.data_ptr<int64_t>(),
                                      crow.const_data_ptr<int64_t>(),
                                      col.const_data_ptr<int64_t>(), values.const_data_ptr<T>(),
                                      m, ncols, col.numel(), keys.const_data_ptr<int64_t>(),
                                      u_values.const_data_ptr<T>(), keys.numel(), (int)monoid,
                                      (int)binop),
                 "semiring_vm operands");
  });
  return {out, arg};
}

std::tuple<Tensor, Tensor, Tensor> ewise_merge_cpu(const Tensor& crow_a_in, const Tensor& col_a_in,
                                                   const Tensor& values_a_in,
                                                   const Tensor& crow_b_in, const Tensor& col_b_in,
                                                   const Tensor& values_b_in, int64_t ncols,
                                                   int64_t binop,
                                                   const std::optional<Tensor>& a_default_in,
                                                   const std::optional<Tensor>& b_default_in) {
  Tensor crow_a = index_arg(crow_a_in, "crow_a", 1), col_a = index_arg(col_a_in, "col_a", 1);
  Tensor crow_b = index_arg(crow_b_in, "crow_b", 1), col_b = index_arg(col_b_in, "col_b", 1);
  check_value_pair(values_a_in, "values_a", values_b_in, "values_b", "ewise_merge", at::kCPU);
  check_ncols(ncols, "ewise_merge");
  check_codes(SF_MONOID_PLUS, binop, "ewise_merge");
  const int64_t m = csr_operand_rows(crow_a, col_a, values_a_in, "ewise_merge: A's");
  const int64_t mb = csr_operand_rows(crow_b, col_b, values_b_in, "ewise_merge: B's");
  TORCH_CHECK(m == mb, "sparsefill: ewise_merge: A has ", m, " rows but B has ", mb);
  const bool defaults = a_default_in.has_value() && a_default_in->defined();
  TORCH_CHECK(defaults == (b_default_in.has_value() && b_default_in->defined()),
              "sparsefill: ewise_merge: give both a_default and b_default (ewise_union) or "
              "neither (ewise_add)");
  const auto dtype = values_a_in.scalar_type();
  Tensor a_default, b_default;
  if (defaults) {
    for (auto* d : {&*a_default_in, &*b_default_in}) {
      TORCH_CHECK(d->numel() == 1 && d->device().is_cpu(),
                  "sparsefill: ewise_merge: a_default and b_default must be one-element CPU "
                  "tensors, got shape ", d->sizes(), " on ", d->device());
    }
    a_default = a_default_in->reshape({}).to(dtype).contiguous();
    b_default = b_default_in->reshape({}).to(dtype).contiguous();
  }
  Tensor values_a = values_a_in.contiguous(), values_b = values_b_in.contiguous();
  const int64_t nse_a = col_a.numel(), nse_b = col_b.numel();
  const int64_t* cra = crow_a.const_data_ptr<int64_t>();
  const int64_t* crb = crow_b.const_data_ptr<int64_t>();
  // Pass 1: each row's size, the operands checked.
  Tensor crow = union_crow(cra, col_a.const_data_ptr<int64_t>(), nse_a, crb,
                           col_b.const_data_ptr<int64_t>(), nse_b, m, ncols,
                           "ewise_merge operands");
  const int64_t* cr = crow.const_data_ptr<int64_t>();
  const int64_t nse = cr[m];
  Tensor col = empty_output({nse}, crow_a.options());
  Tensor values = empty_output({nse}, values_a.options());
  // Pass 2: rows split by the result's work.
  with_compute_type<true>(dtype, [&](auto zero) {
    using T = decltype(zero);
    const T* da = defaults ? a_default.const_data_ptr<T>() : nullptr;
    const T* db = defaults ? b_default.const_data_ptr<T>() : nullptr;
    for_row_ranges(cr, m, 1, "ewise_merge operands", [&](int64_t r0, int64_t r1) {
      return Core<T>::ewise_union(col.data_ptr<int64_t>(), values.data_ptr<T>(), cr, nse, cra,
                                  col_a.const_data_ptr<int64_t>(), values_a.const_data_ptr<T>(),
                                  nse_a, crb, col_b.const_data_ptr<int64_t>(),
                                  values_b.const_data_ptr<T>(), nse_b, m, (int)binop, da, db, r0,
                                  r1);
    });
  });
  return {crow, col, values};
}

std::tuple<Tensor, Tensor, Tensor> semiring_masked_cpu(
    const Tensor& crow_m_in, const Tensor& col_m_in, const Tensor& crow_a_in,
    const Tensor& col_a_in, const Tensor& values_a_in, const Tensor& crow_b_in,
    const Tensor& col_b_in, const Tensor& values_b_in, int64_t ncols, int64_t monoid,
    int64_t binop, bool by_dots) {
  Tensor crow_m = index_arg(crow_m_in, "crow_m", 1), col_m = index_arg(col_m_in, "col_m", 1);
  Tensor crow_a = index_arg(crow_a_in, "crow_a", 1), col_a = index_arg(col_a_in, "col_a", 1);
  Tensor crow_b = index_arg(crow_b_in, "crow_b", 1), col_b = index_arg(col_b_in, "col_b", 1);
  masked_arguments(values_a_in, values_b_in, ncols, monoid, binop, at::kCPU);
  const int64_t m = csr_operand_rows(crow_a, col_a, values_a_in, "semiring_masked: A's");
  const int64_t rows_b = csr_operand_rows(crow_b, col_b, values_b_in, "semiring_masked: B's");
  masked_shapes(m, rows_b, ncols, by_dots, crow_m);
  const int64_t nse_m = col_m.numel();
  const int64_t* crm = crow_m.const_data_ptr<int64_t>();
  TORCH_CHECK(crm[0] == 0 && crm[m] == nse_m, "sparsefill: semiring_masked: crow_m must run "
              "from 0 to the mask's ", nse_m, " elements, got ", crm[0], " to ", crm[m]);
  Tensor values_a = values_a_in.contiguous(), values_b = values_b_in.contiguous();
  const auto acc = accumulator_type(values_a.scalar_type());
  Tensor out = at::empty({nse_m}, values_a.options().dtype(acc));
  Tensor arg = at::empty({nse_m}, values_a.options().dtype(at::kLong));
  Tensor crow = at::empty({m + 1}, crow_m.options());
  Tensor col, values;
  with_compute_type<true>(values_a.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    using A = std::conditional_t<std::is_same_v<T, int64_t>, int64_t, double>;
    const int64_t* cra = crow_a.const_data_ptr<int64_t>();
    const int64_t* clm = col_m.const_data_ptr<int64_t>();
    const int64_t* cla = col_a.const_data_ptr<int64_t>();
    const int64_t* crb = crow_b.const_data_ptr<int64_t>();
    const int64_t* clb = col_b.const_data_ptr<int64_t>();
    const T* va = values_a.const_data_ptr<T>();
    const T* vb = values_b.const_data_ptr<T>();
    A* o = out.data_ptr<A>();
    int64_t* g = arg.data_ptr<int64_t>();
    // Rows split by the mask's elements plus A's row: about either method's work.
    auto work = [crm, cra](int64_t r) { return crm[r] + cra[r]; };
    for_ranges_by(work, m, 1, "semiring_masked operands", [&](int64_t r0, int64_t r1) {
      if (by_dots)
        return Core<T>::semiring_masked(o, g, crm, clm, nse_m, cra, cla, va, col_a.numel(), crb,
                                        clb, vb, col_b.numel(), m, ncols, (int)monoid,
                                        (int)binop, r0, r1);
      std::vector<int64_t> mark(ncols, -1);  // this range's scratch
      return Core<T>::semiring_masked_rows(o, g, mark.data(), crm, clm, nse_m, cra, cla, va,
                                           col_a.numel(), crb, clb, vb, col_b.numel(), m,
                                           rows_b, ncols, (int)monoid, (int)binop, r0, r1);
    });
    // The present mask elements, compacted in order: the result's CSR.
    int64_t* cr = crow.data_ptr<int64_t>();
    int64_t nse = 0;
    for (int64_t q = 0; q < nse_m; ++q) nse += g[q] >= 0;
    col = at::empty({nse}, col_m.options());
    values = at::empty({nse}, out.options());
    int64_t* cc = col.data_ptr<int64_t>();
    A* vv = values.data_ptr<A>();
    int64_t w = 0;
    cr[0] = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t q = crm[i]; q < crm[i + 1]; ++q) {
        if (g[q] < 0) continue;
        cc[w] = clm[q];
        vv[w++] = o[q];
      }
      cr[i + 1] = w;
    }
  });
  return {crow, col, values};
}

}  // namespace sparsefill

#ifdef SPARSEFILL_WITH_CUDA
#include <ATen/ops/zeros.h>

#include <limits>

#include "ops/products/on_cuda.h"

namespace sparsefill {

namespace {

Tensor cuda_index(const Tensor& t, const char* name, const Tensor& like, const char* like_name) {
  Tensor out = index_arg(t, name, 1, kCUDA);
  same_device(out, name, like, like_name);
  return out;
}

// The transposed pattern of a checked-on-the-way CSR operand (nrows x ncols)
// into `report` (sf_cuda_csr_transpose: full operand check): crow_t, row_t, perm.
std::tuple<Tensor, Tensor, Tensor> transposed(sf_cuda_report* report, const Tensor& crow,
                                              const Tensor& col, int64_t ncols, const char* what) {
  const int64_t nse = col.numel(), m = crow.numel() - 1;
  Tensor crow_t = at::empty({ncols + 1}, crow.options());
  Tensor row_t = at::empty({nse}, crow.options());
  Tensor perm = at::empty({nse}, crow.options());
  size_t bytes = 0;
  auto call = [&](sf_cuda_report* r, void* ws) {
    return sf_cuda_csr_transpose(r, crow_t.data_ptr<int64_t>(), row_t.data_ptr<int64_t>(),
                                 perm.data_ptr<int64_t>(), crow.data_ptr<int64_t>(),
                                 col.data_ptr<int64_t>(), m, ncols, nse, ws, &bytes,
                                 current_stream());
  };
  check_call(call(nullptr, nullptr), what);
  Tensor ws = workspace(bytes, crow);
  check_call(call(report, ws.data_ptr()), what);
  return {crow_t, row_t, perm};
}

}  // namespace

std::tuple<Tensor, Tensor> semiring_mv_cuda(const Tensor& crow_in, const Tensor& col_in,
                                            const Tensor& values_in, const Tensor& x_in,
                                            const std::optional<Tensor>& x_present_in,
                                            int64_t monoid, int64_t binop) {
  Tensor crow, col;
  std::tie(crow, col) = csr_index_args(crow_in, col_in);
  const at::Device device = crow.device();
  Tensor present = mv_arguments(values_in, x_in, x_present_in, monoid, binop, device);
  const char* what = "semiring_mv: A's";
  const int64_t m = csr_operand_shape(crow, col, values_in, what);
  const int64_t ncols = x_in.size(0), nse = col.numel();
  c10::cuda::CUDAGuard guard(device);
  Tensor values = values_in.contiguous(), x = x_in.contiguous();
  const auto acc = accumulator_type(values.scalar_type());
  Tensor out = at::empty({m}, values.options().dtype(acc));
  Tensor arg = at::empty({m}, values.options().dtype(at::kLong));
  const uint8_t* pr = present.defined() ? static_cast<const uint8_t*>(present.const_data_ptr())
                                        : nullptr;
  Reports reports(1, device);
  with_compute_type<true>(values.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    using A = std::conditional_t<std::is_same_v<T, int64_t>, int64_t, double>;
    check_call(CudaCore<T>::semiring_mv(reports.at(0), out.data_ptr<A>(),
                                        arg.data_ptr<int64_t>(), crow.const_data_ptr<int64_t>(),
                                        col.const_data_ptr<int64_t>(), values.const_data_ptr<T>(),
                                        m, ncols, nse, x.const_data_ptr<T>(), pr, (int)monoid,
                                        (int)binop, current_stream()),
               "semiring_mv operands");
  });
  const auto r = reports.read()[0];
  check_operand_ends(r, what, nse);
  check_status((sf_status)r.status, "semiring_mv operands");  // as the CPU: no site
  return {out, arg};
}

std::tuple<Tensor, Tensor> semiring_vm_cuda(const Tensor& crow_in, const Tensor& col_in,
                                            const Tensor& values_in, const Tensor& u_keys_in,
                                            const Tensor& u_values_in, int64_t ncols,
                                            int64_t monoid, int64_t binop) {
  Tensor crow, col;
  std::tie(crow, col) = csr_index_args(crow_in, col_in);
  const at::Device device = crow.device();
  Tensor keys = cuda_index(u_keys_in, "u_keys", crow, "crow_indices");
  vm_arguments(values_in, keys, u_values_in, ncols, monoid, binop, device);
  const char* what = "semiring_vm: A's";
  const int64_t m = csr_operand_shape(crow, col, values_in, what);
  const int64_t nse = col.numel();
  c10::cuda::CUDAGuard guard(device);
  Tensor values = values_in.contiguous(), u_values = u_values_in.contiguous();
  const auto acc = accumulator_type(values.scalar_type());
  Tensor out = at::empty({ncols}, values.options().dtype(acc));
  Tensor arg = at::empty({ncols}, values.options().dtype(at::kLong));
  // Report 0: A's checks (the transpose's); 1: u's keys.
  Reports reports(2, device);
  // By columns of A^T rather than atomics: each output has one writer, its
  // terms in the CPU's push order.
  Tensor crow_t, row_t, perm;
  std::tie(crow_t, row_t, perm) = transposed(reports.at(0), crow, col, ncols,
                                             "semiring_vm operands");
  with_compute_type<true>(values.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    using A = std::conditional_t<std::is_same_v<T, int64_t>, int64_t, double>;
    check_call(CudaCore<T>::semiring_vm(
                   reports.at(1), out.data_ptr<A>(), arg.data_ptr<int64_t>(),
                   crow_t.const_data_ptr<int64_t>(), row_t.const_data_ptr<int64_t>(),
                   perm.const_data_ptr<int64_t>(), values.const_data_ptr<T>(), m, ncols, nse,
                   keys.const_data_ptr<int64_t>(), u_values.const_data_ptr<T>(), keys.numel(),
                   (int)monoid, (int)binop, current_stream()),
               "semiring_vm operands");
  });
  const auto r = reports.read();
  check_operand_ends(r[0], what, nse);
  check_status((sf_status)r[0].status, "semiring_vm operands");
  check_status((sf_status)r[1].status, "semiring_vm operands");
  return {out, arg};
}

std::tuple<Tensor, Tensor, Tensor> semiring_masked_cuda(
    const Tensor& crow_m_in, const Tensor& col_m_in, const Tensor& crow_a_in,
    const Tensor& col_a_in, const Tensor& values_a_in, const Tensor& crow_b_in,
    const Tensor& col_b_in, const Tensor& values_b_in, int64_t ncols, int64_t monoid,
    int64_t binop, bool by_dots) {
  Tensor crow_a = index_arg(crow_a_in, "crow_a", 1, kCUDA);  // the CPU kernel's names
  const at::Device device = crow_a.device();
  Tensor col_a = cuda_index(col_a_in, "col_a", crow_a, "crow_a");
  Tensor crow_m = cuda_index(crow_m_in, "crow_m", crow_a, "crow_a");
  Tensor col_m = cuda_index(col_m_in, "col_m", crow_a, "crow_a");
  Tensor crow_b = cuda_index(crow_b_in, "crow_b", crow_a, "crow_a");
  Tensor col_b = cuda_index(col_b_in, "col_b", crow_a, "crow_a");
  masked_arguments(values_a_in, values_b_in, ncols, monoid, binop, device);
  const char* what_a = "semiring_masked: A's";
  const char* what_b = "semiring_masked: B's";
  const int64_t m = csr_operand_shape(crow_a, col_a, values_a_in, what_a);
  const int64_t rows_b = csr_operand_shape(crow_b, col_b, values_b_in, what_b);
  masked_shapes(m, rows_b, ncols, by_dots, crow_m);
  c10::cuda::CUDAGuard guard(device);
  const int64_t nse_m = col_m.numel(), nse_a = col_a.numel(), nse_b = col_b.numel();
  constexpr int64_t kAny = std::numeric_limits<int64_t>::max();  // a column count not given
  Tensor values_a = values_a_in.contiguous(), values_b = values_b_in.contiguous();
  // Reports: 0 A, 1 B (or its transpose), 2 the mask. By dots, A's columns
  // meet B^T's only by equality, unbounded as on the CPU; by rows they are
  // B's rows.
  Reports reports(3, device);
  const char* what = "semiring_masked operands";
  check_call(sf_cuda_csr_operand_check(reports.at(0), crow_a.data_ptr<int64_t>(),
                                       col_a.data_ptr<int64_t>(), m, by_dots ? kAny : rows_b,
                                       nse_a, 1, current_stream()),
             what);
  // The dots need B^T: by rows, B is transposed here (the results agree:
  // both fold the terms of an output in A's order).
  Tensor crow_bt = crow_b, col_bt = col_b, values_bt = values_b;
  if (by_dots) {
    check_call(sf_cuda_csr_operand_check(reports.at(1), crow_b.data_ptr<int64_t>(),
                                         col_b.data_ptr<int64_t>(), rows_b, kAny, nse_b, 1,
                                         current_stream()),
               what);
  } else {
    Tensor perm;
    std::tie(crow_bt, col_bt, perm) = transposed(reports.at(1), crow_b, col_b, ncols, what);
    values_bt = values_b.index_select(0, perm);  // perm is a permutation, even of bad input
  }
  check_call(sf_cuda_csr_operand_check(reports.at(2), crow_m.data_ptr<int64_t>(),
                                       col_m.data_ptr<int64_t>(), m, ncols, nse_m, 1,
                                       current_stream()),
             what);
  const auto acc = accumulator_type(values_a.scalar_type());
  Tensor out = at::empty({nse_m}, values_a.options().dtype(acc));
  Tensor arg = at::empty({nse_m}, values_a.options().dtype(at::kLong));
  with_compute_type<true>(values_a.scalar_type(), [&](auto zero) {
    using T = decltype(zero);
    using A = std::conditional_t<std::is_same_v<T, int64_t>, int64_t, double>;
    check_call(CudaCore<T>::semiring_masked(
                   out.data_ptr<A>(), arg.data_ptr<int64_t>(), crow_m.const_data_ptr<int64_t>(),
                   col_m.const_data_ptr<int64_t>(), nse_m, crow_a.const_data_ptr<int64_t>(),
                   col_a.const_data_ptr<int64_t>(), values_a.const_data_ptr<T>(), nse_a,
                   crow_bt.const_data_ptr<int64_t>(), col_bt.const_data_ptr<int64_t>(),
                   values_bt.const_data_ptr<T>(), col_bt.numel(), m, ncols, (int)monoid,
                   (int)binop, current_stream()),
               what);
  });
  const auto r = reports.read();
  check_operand_ends(r[0], what_a, nse_a);
  check_operand_ends(r[1], what_b, nse_b);
  // The mask's ends as the CPU names them: crow_m[0] is the report's value
  // only where it is not 0; crow_m[m] is its result.
  const int64_t first = (sf_status)r[2].status == SF_ERR_CROW_FIRST ? r[2].value : 0;
  TORCH_CHECK(first == 0 && r[2].result == nse_m, "sparsefill: semiring_masked: crow_m must run "
              "from 0 to the mask's ", nse_m, " elements, got ", first, " to ", r[2].result);
  for (const auto& ri : r) check_status((sf_status)ri.status, what);
  // The present mask elements, compacted in order: the result's CSR.
  Tensor keep = arg.ge(0);
  Tensor col = col_m.masked_select(keep);
  Tensor values = out.masked_select(keep);
  Tensor kept = at::zeros({nse_m + 1}, crow_m.options());
  kept.narrow(0, 1, nse_m).copy_(keep.to(at::kLong).cumsum(0));
  return {kept.index_select(0, crow_m), col, values};
}

}  // namespace sparsefill
#endif  // SPARSEFILL_WITH_CUDA
