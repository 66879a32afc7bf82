// A downstream extension of torch_sparsefill, as a user would write one
// (test/ops/test_op_library.py builds it with torch.utils.cpp_extension.load):
// it includes the C ABI header from sf.get_include(), links the library of
// sf.get_library(), and calls the ops through torch's dispatcher.
#include <torch/extension.h>

#include "sparsefill_core.h"

// The C core directly: row-major linear positions of COO indices.
at::Tensor linear_positions(const at::Tensor& indices, std::vector<int64_t> sizes) {
  auto idx = indices.to(at::kLong).contiguous();
  TORCH_CHECK(idx.dim() == 2 && idx.size(0) == static_cast<int64_t>(sizes.size()),
              "indices must be (sparse_dim, nse)");
  auto out = at::empty({idx.size(1)}, idx.options());
  sf_status st = sf_coo_linearize(out.data_ptr<int64_t>(), idx.data_ptr<int64_t>(),
                                  idx.size(0), idx.size(1), sizes.data());
  TORCH_CHECK(st == SF_OK, "sf_coo_linearize failed with status ", static_cast<int>(st));
  return out;
}

// An op through the dispatcher (differentiable, any device with a kernel):
// exp of the components, then the dense tensor.
at::Tensor dense_exp(const at::Tensor& indices, const at::Tensor& values, const at::Tensor& fill,
                     std::vector<int64_t> size) {
  static auto exp_op = c10::Dispatcher::singleton()
      .findSchemaOrThrow("sparsefill::exp", "")
      .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&)>();
  static auto to_dense_op = c10::Dispatcher::singleton()
      .findSchemaOrThrow("sparsefill::to_dense", "")
      .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                        c10::IntArrayRef)>();
  auto [v, f] = exp_op.call(values, fill);
  return to_dense_op.call(indices, v, f, size);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("linear_positions", &linear_positions);
  m.def("dense_exp", &dense_exp);
}
