// structure.cpp -- the sparsefill operator library: schemas of the structural
// ops (validation, coalescing, conversions, pattern merges) and their kernels.
// Kernels unpack component tensors, check them and call the C core
// (sparsefill_core.h); they never do structural work themselves.
//
// Dispatch keys used here (fake/meta kernels of the data-dependent ops are in
// torch_sparsefill/_fake.py, which can allocate symbolic sizes):
//   CPU                        index ops that call the C core
//   CompositeImplicitAutograd  ops composed of the above and ATen ops; autograd
//                              comes from their parts
//   Autograd                   explicit backward for gather_with_fill, from_dense
// Element-wise ops live in generated/elementwise.cpp (tools/codegen).
#include <Python.h>

#include "sf_glue.h"

#include <torch/autograd.h>

// `import torch_sparsefill._C` loads this library, which registers the ops as
// a side effect; the Python module itself is empty.
extern "C" PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}

namespace sparsefill {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// ---- index ops (C core) --------------------------------------------------

// Validates COO indices against the sparse sizes; returns whether coalesced.
static bool coo_check(const Tensor& indices_in, at::IntArrayRef sparse_size) {
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
  return coalesced != 0;
}

static void csr_check(const Tensor& crow_in, const Tensor& col_in,
                      at::IntArrayRef size_in) {
  CsrArgs a = csr_args(crow_in, col_in, size_in, c10::DeviceType::CPU);
  sf_site site{-1, -1, -1};
  sf_status st = sf_csr_check(&site, a.crow.data_ptr<int64_t>(), a.col.data_ptr<int64_t>(),
                              a.size[0], a.size[1], a.col.numel());
  check_csr_status(st, site, a);
}

static Tensor coo_linearize(const Tensor& indices_in, at::IntArrayRef sparse_size) {
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

static Tensor coo_delinearize(const Tensor& linear_in, at::IntArrayRef sparse_size) {
  auto size = sizes_arg(sparse_size, "size");
  Tensor linear = index_arg(linear_in, "linear", 1);
  Tensor indices = at::empty({(int64_t)size.size(), linear.numel()}, linear.options());
  check_status(sf_coo_delinearize(indices.data_ptr<int64_t>(), linear.data_ptr<int64_t>(),
                                  (int64_t)size.size(), linear.numel(), size.data()),
               "linear indices");
  return indices;
}

static std::tuple<Tensor, Tensor> coalesce_plan(const Tensor& indices_in,
                                                at::IntArrayRef sparse_size) {
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

static Tensor rows_from_crow(const Tensor& crow_in) {
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

static Tensor crow_from_rows(const Tensor& rows_in, int64_t nrows) {
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
static Tensor linear_view(const Tensor& indices_in, at::IntArrayRef sparse_size) {
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

static std::tuple<Tensor, Tensor, Tensor> union_plan(const Tensor& indices_a,
                                                     const Tensor& indices_b,
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

// Through the dispatcher, for composites that run on any device.
static Tensor linearize_call(const Tensor& indices, at::IntArrayRef sparse_size) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::coo_linearize", "")
                       .typed<Tensor(const Tensor&, at::IntArrayRef)>();
  return op.call(indices, sparse_size);
}

static Tensor delinearize_call(const Tensor& linear, at::IntArrayRef sparse_size) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::coo_delinearize", "")
                       .typed<Tensor(const Tensor&, at::IntArrayRef)>();
  return op.call(linear, sparse_size);
}

// ---- gather_with_fill: fill substitution, differentiable -----------------

static Tensor gather_with_fill_cpu(const Tensor& values_in, const Tensor& fill,
                                   const Tensor& src_in) {
  TORCH_CHECK(values_in.dim() >= 1, "sparsefill: values must have a leading nse dimension");
  Tensor src = index_arg(src_in, "src", 1);
  auto dense_shape = values_in.sizes().slice(1);
  Tensor values = values_in.contiguous();
  Tensor fill_row = fill.to(values.scalar_type()).expand(dense_shape).contiguous();
  auto out_shape = cat_sizes({src.numel()}, dense_shape);
  Tensor out = at::empty(out_shape, values.options());
  const size_t row_bytes = (size_t)fill_row.numel() * values.element_size();
  check_status(sf_gather_rows_with_fill(out.data_ptr(), values.data_ptr(), values.size(0),
                                        fill_row.data_ptr(), src.data_ptr<int64_t>(),
                                        src.numel(), row_bytes),
               "src (positions into values)");
  return out;
}

static Tensor gather_with_fill_call(const Tensor& values, const Tensor& fill, const Tensor& src) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::gather_with_fill", "")
                       .typed<Tensor(const Tensor&, const Tensor&, const Tensor&)>();
  return op.call(values, fill, src);
}

// d out[k] / d values[src[k]] = 1; rows taken from the fill add to its gradient.
class GatherWithFill : public torch::autograd::Function<GatherWithFill> {
 public:
  static Tensor forward(AutogradContext* ctx, const Tensor& values, const Tensor& fill,
                        const Tensor& src) {
    at::AutoDispatchBelowADInplaceOrView guard;
    ctx->save_for_backward({values, fill, src});
    return gather_with_fill_call(values, fill, src);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const Tensor &values = saved[0], &fill = saved[1], &src = saved[2];
    const Tensor& g = grads[0];
    Tensor stored = at::nonzero(src >= 0).view(-1);
    Tensor from_fill = at::nonzero(src < 0).view(-1);
    Tensor g_values = at::zeros_like(values, g.options())
                          .index_add(0, src.index_select(0, stored), g.index_select(0, stored));
    Tensor g_fill = grad_to(g.index_select(0, from_fill).sum(0), fill);
    return {g_values, g_fill, Tensor()};
  }
};

static Tensor gather_with_fill_autograd(const Tensor& values, const Tensor& fill,
                                        const Tensor& src) {
  return GatherWithFill::apply(values, fill, src);
}

// ---- composites -----------------------------------------------------------

static std::tuple<Tensor, Tensor> coo_coalesce(const Tensor& indices, const Tensor& values,
                                               at::IntArrayRef sparse_size) {
  TORCH_CHECK(values.dim() >= 1 && values.size(0) == indices.size(-1),
              "sparsefill: values must have one row per stored element: indices has ",
              indices.size(-1), " elements, values has shape ", values.sizes());
  static auto plan = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("sparsefill::coalesce_plan", "")
                         .typed<std::tuple<Tensor, Tensor>(const Tensor&, at::IntArrayRef)>();
  auto [new_indices, segment] = plan.call(indices, sparse_size);
  auto shape = cat_sizes({new_indices.size(1)}, values.sizes().slice(1));
  Tensor new_values = at::zeros(shape, values.options()).index_add(0, segment, values);
  return {new_indices, new_values};
}

// Dense tensor of `size` holding `fill` everywhere and `values` at `indices`
// (coalesced COO). Autograd from index_copy: each stored element's gradient
// goes to its value, every other element's to the fill.
static Tensor to_dense(const Tensor& indices, const Tensor& values, const Tensor& fill,
                       at::IntArrayRef size) {
  const int64_t sparse_dim = indices.size(0);
  TORCH_CHECK(sparse_dim <= (int64_t)size.size(), "sparsefill: indices has ", sparse_dim,
              " rows but size has only ", size.size(), " dimensions");
  auto sparse_size = size.slice(0, sparse_dim);
  auto dense_shape = size.slice(sparse_dim);
  Tensor linear = linearize_call(indices, sparse_size);
  int64_t rows = 1;
  for (auto s : sparse_size) rows *= s;
  Tensor out = fill.to(values.scalar_type()).expand(size).clone(at::MemoryFormat::Contiguous);
  if (values.size(0) > 0) {
    out.view(cat_sizes({rows}, dense_shape)).index_copy_(0, linear, values);
  }
  return out;
}

// Stored elements that equal the fill (NaN equals NaN; a hybrid position
// goes when its whole dense part does), dropped. Differentiable w.r.t. values.
static std::tuple<Tensor, Tensor> eliminate_fill(const Tensor& indices, const Tensor& values,
                                                 const Tensor& fill) {
  TORCH_CHECK(values.dim() >= 1 && indices.dim() == 2 && values.size(0) == indices.size(1),
              "sparsefill: eliminate_fill needs indices (sparse_dim, nse) and values (nse, ...), "
              "got ", indices.sizes(), " and ", values.sizes());
  Tensor v = values.detach();
  Tensor f = fill.detach().to(v.scalar_type());
  // A per-slice fill is compared with each stored row's own fill.
  if (is_per_slice_fill(f, v)) f = fill_rows_at(f, indices, v.sizes().slice(1));
  Tensor same = at::eq(v, f);
  if (at::isFloatingType(v.scalar_type()) || at::isComplexType(v.scalar_type())) {
    same = at::logical_or(same, at::logical_and(at::isnan(v), at::isnan(f)));
  }
  same = same.reshape({v.size(0), -1}).all(1);
  if (v.size(0) == 0) same = at::zeros({0}, v.options().dtype(at::kBool));
  Tensor keep = at::nonzero(at::logical_not(same)).view({-1});
  return {indices.index_select(1, keep), values.index_select(0, keep)};
}

// ---- from_dense: strided -> (indices, values, fill) ------------------------

// Stored = sparse positions where some element of the dense part differs from
// the fill (NaN equals NaN).
static std::tuple<Tensor, Tensor, Tensor> from_dense_kernel(const Tensor& self,
                                                            const Tensor& fill_in,
                                                            int64_t sparse_dim) {
  TORCH_CHECK(sparse_dim >= 0 && sparse_dim <= self.dim(), "sparsefill: sparse_dim must be in [0, ",
              self.dim(), "], got ", sparse_dim);
  auto dense_shape = self.sizes().slice(sparse_dim);
  // A dense-part fill, or a per-slice fill of full rank (RFC.md 1.5): either
  // way `self != fill` broadcasts element by element.
  TORCH_CHECK(broadcasts_to(fill_in.sizes(), dense_shape) ||
                  (sparse_dim > 0 && fill_in.dim() == self.dim() &&
                   broadcasts_to(fill_in.sizes(), self.sizes())),
              "sparsefill: fill_value of shape ", fill_in.sizes(),
              " is not broadcastable to the dense part's shape ", dense_shape,
              " nor a per-slice fill broadcastable to ", self.sizes());
  Tensor fill = fill_in.to(self.scalar_type());
  // x != fill decides alone unless the fill holds a NaN (NaN != NaN is true).
  const bool nan_fill = (at::isFloatingType(self.scalar_type()) ||
                         at::isComplexType(self.scalar_type())) &&
                        at::isnan(fill).any().item<bool>();
  Tensor differs = nan_fill ? at::logical_not(at::logical_or(
                                  at::eq(self, fill), at::logical_and(at::isnan(self), at::isnan(fill))))
                            : at::ne(self, fill);
  int64_t rows = 1, dense_numel = 1;
  for (int64_t d = 0; d < sparse_dim; ++d) rows *= self.size(d);
  for (auto s : dense_shape) dense_numel *= s;
  if (self.dim() > sparse_dim) differs = differs.reshape({rows, dense_numel}).any(1);
  Tensor positions = at::nonzero(differs.reshape({-1})).view({-1});
  Tensor indices = delinearize_call(positions, self.sizes().slice(0, sparse_dim));
  Tensor values = self.reshape(cat_sizes({rows}, dense_shape)).index_select(0, positions);
  return {indices, values.contiguous(), fill.clone()};
}

static std::tuple<Tensor, Tensor, Tensor> from_dense_call(const Tensor& self, const Tensor& fill,
                                                          int64_t sparse_dim) {
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("sparsefill::from_dense", "")
                       .typed<std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, int64_t)>();
  return op.call(self, fill, sparse_dim);
}

// Gradient to `self`: stored positions get their value's gradient; the fill's
// gradient (the sum over unspecified elements) is shared equally among the
// unspecified elements -- the projection documented in RFC.md "Gradients".
class FromDense : public torch::autograd::Function<FromDense> {
 public:
  static variable_list forward(AutogradContext* ctx, const Tensor& self, const Tensor& fill,
                               int64_t sparse_dim) {
    at::AutoDispatchBelowADInplaceOrView guard;
    auto [indices, values, fill_out] = from_dense_call(self, fill, sparse_dim);
    ctx->save_for_backward({indices});
    ctx->saved_data["self_sizes"] = self.sizes().vec();
    ctx->saved_data["sparse_dim"] = sparse_dim;
    ctx->saved_data["fill_sizes"] = fill_out.sizes().vec();
    ctx->mark_non_differentiable({indices});
    return {indices, values, fill_out};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Tensor indices = ctx->get_saved_variables()[0];
    auto self_sizes = ctx->saved_data["self_sizes"].toIntVector();
    const int64_t sparse_dim = ctx->saved_data["sparse_dim"].toInt();
    at::IntArrayRef sizes(self_sizes);
    auto sparse_size = sizes.slice(0, sparse_dim);
    auto dense_shape = sizes.slice(sparse_dim);
    int64_t rows = 1, dense_numel = 1;
    for (auto s : sparse_size) rows *= s;
    for (auto s : dense_shape) dense_numel *= s;
    Tensor g_values = grads[1];
    Tensor g_fill = grads[2];
    const int64_t nse = indices.size(1);
    auto opts = g_values.defined() ? g_values.options() : g_fill.options();
    Tensor g_self;
    const int64_t unspecified = rows - nse;
    auto fill_sizes = ctx->saved_data["fill_sizes"].toIntVector();
    if (g_fill.defined() && (int64_t)fill_sizes.size() > (int64_t)dense_shape.size()) {
      // Per-slice fill: each fill element's gradient is shared among the
      // unspecified elements it covers, counted per element.
      Tensor cover = at::ones(cat_sizes({rows}, dense_shape), opts);
      if (nse > 0) cover.index_fill_(0, coo_linearize(indices, sparse_size), 0);
      Tensor count = at::sum_to(cover.view(sizes), fill_sizes).clamp_min(1);
      g_self = (g_fill / count).expand(sizes).contiguous().view(cat_sizes({rows}, dense_shape));
    } else if (g_fill.defined() && unspecified > 0 && dense_numel > 0) {
      const int64_t per_fill_element = unspecified * (dense_numel / std::max<int64_t>(g_fill.numel(), 1));
      g_self = (g_fill / per_fill_element).expand(dense_shape).expand(cat_sizes({rows}, dense_shape)).clone();
    } else {
      g_self = at::zeros(cat_sizes({rows}, dense_shape), opts);
    }
    if (nse > 0) {
      Tensor linear = linearize_call(indices, sparse_size);
      Tensor gv = g_values.defined() ? g_values : at::zeros(cat_sizes({nse}, dense_shape), opts);
      g_self = g_self.index_copy(0, linear, gv);
    }
    return {g_self.view(self_sizes), Tensor(), Tensor()};
  }
};

static std::tuple<Tensor, Tensor, Tensor> from_dense_autograd(const Tensor& self,
                                                              const Tensor& fill,
                                                              int64_t sparse_dim) {
  auto out = FromDense::apply(self, fill, sparse_dim);
  return {out[0], out[1], out[2]};
}

}  // namespace sparsefill

TORCH_LIBRARY(sparsefill, m) {
  m.def("coo_check(Tensor indices, int[] size) -> bool");
  m.def("csr_check(Tensor crow_indices, Tensor col_indices, int[] size) -> ()");
  m.def("coo_linearize(Tensor indices, int[] size) -> Tensor");
  m.def("coo_delinearize(Tensor linear, int[] size) -> Tensor");
  m.def("coalesce_plan(Tensor indices, int[] size) -> (Tensor indices, Tensor segment)");
  m.def("coo_coalesce(Tensor indices, Tensor values, int[] size) -> (Tensor indices, Tensor values)");
  m.def("rows_from_crow(Tensor crow_indices) -> Tensor");
  m.def("crow_from_rows(Tensor rows, int nrows) -> Tensor");
  m.def("union_plan(Tensor indices_a, Tensor indices_b, int[] size) -> (Tensor indices, Tensor src_a, Tensor src_b)");
  m.def("gather_with_fill(Tensor values, Tensor fill, Tensor src) -> Tensor");
  m.def("to_dense(Tensor indices, Tensor values, Tensor fill, int[] size) -> Tensor");
  m.def("from_dense(Tensor self, Tensor fill, int sparse_dim) -> (Tensor indices, Tensor values, Tensor fill)");
  m.def("eliminate_fill(Tensor indices, Tensor values, Tensor fill) -> (Tensor indices, Tensor values)");
}

TORCH_LIBRARY_IMPL(sparsefill, CPU, m) {
  m.impl("coo_check", &sparsefill::coo_check);
  m.impl("csr_check", &sparsefill::csr_check);
  m.impl("coo_linearize", &sparsefill::coo_linearize);
  m.impl("coo_delinearize", &sparsefill::coo_delinearize);
  m.impl("coalesce_plan", &sparsefill::coalesce_plan);
  m.impl("rows_from_crow", &sparsefill::rows_from_crow);
  m.impl("crow_from_rows", &sparsefill::crow_from_rows);
  m.impl("union_plan", &sparsefill::union_plan);
  m.impl("gather_with_fill", &sparsefill::gather_with_fill_cpu);
}

TORCH_LIBRARY_IMPL(sparsefill, CompositeExplicitAutograd, m) {
  m.impl("from_dense", &sparsefill::from_dense_kernel);
}

TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {
  m.impl("gather_with_fill", &sparsefill::gather_with_fill_autograd);
  m.impl("from_dense", &sparsefill::from_dense_autograd);
}

TORCH_LIBRARY_IMPL(sparsefill, CompositeImplicitAutograd, m) {
  m.impl("coo_coalesce", &sparsefill::coo_coalesce);
  m.impl("to_dense", &sparsefill::to_dense);
  m.impl("eliminate_fill", &sparsefill::eliminate_fill);
}
