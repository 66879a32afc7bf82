// ops/hot/module.cpp -- the module torch_sparsefill._C's functions (its init is
// ops/library.cpp): the hot path's table (docs/design.md#hot-path), with the sum of a plain
// tensor and one row of a CSR tensor in one C call each, and the fast handler
// of A @ x / A @ B for a plain CSR matrix and a strided operand (spmm's CPU
// kernel, no reshape) before its Python fallback. The element-wise functions
// are hot/elementwise.cpp's.
#include <ATen/ops/add.h>
#include <ATen/ops/sum.h>

#include "ops/generated/kernels.h"
#include "ops/hot/hot.h"
#include "ops/products/products.h"

namespace sparsefill {
namespace hot {
namespace {

// _C.hot_sum(values, fill, size) -> values.sum() + count * fill (in float32
// for float16/bfloat16, cast back), count the
// number of unspecified elements (prod(size) - nse): the sum of a plain
// tensor (given the components of a coalesced COO or a CSR one), or None (also for values that are not floating: their sum's
// dtype has its own rules, which the route keeps). The same two ATen calls
// as _reductions._fast_sum, in one C call below autograd.
PyObject* hot_sum(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 3 || !PyTuple_CheckExact(args[2]) || !ordinary_thread() || !all_plain(args, 2))
    Py_RETURN_NONE;
  const Tensor& values = T(args[0]);
  // What makes the tensor plain beyond its layout and coalescing (the
  // caller checks those): 1-d values, a 0-d fill (gradients: all_plain).
  if (!at::isFloatingType(values.scalar_type()) || values.dim() != 1 || T(args[1]).dim() != 0)
    Py_RETURN_NONE;
  int64_t numel = 1;
  for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(args[2]); ++d) {
    PyObject* item = PyTuple_GET_ITEM(args[2], d);
    at::Scalar extent;
    if (!PyLong_CheckExact(item) || !to_scalar(item, extent)) Py_RETURN_NONE;
    if (__builtin_mul_overflow(numel, extent.toLong(), &numel)) Py_RETURN_NONE;
  }
  const int64_t count = numel - values.size(0);
  Tensor total;
  try {
    at::AutoDispatchBelowADInplaceOrView below;
    // Halves accumulate in float32 (ATen's opmath, as dense's sum), and
    // count * fill would overflow in their own dtype: the term is added in
    // float32 and the total cast back, as functions/reductions/handlers.py's
    // values_sum and with_fill_term do.
    const at::ScalarType own = values.scalar_type();
    const bool half = own == at::kHalf || own == at::kBFloat16;
    total = half ? values.sum(at::kFloat) : values.sum();
    if (count > 0) total = at::add(total, half ? T(args[1]).to(at::kFloat) : T(args[1]), count);
    if (half) total = total.to(own);
  } catch (const std::exception&) {
    Py_RETURN_NONE;
  }
  return THPVariable_Wrap(std::move(total));
}

// _C.hot_row(crow, col, values, fill, i) -> (indices, values, fill): row i
// (negative counts from the end) of an unbatched CSR tensor without a dense
// part, as the 1-D COO tensor _indexing._select makes of it: indices a view
// of col's run (indices are never written in place), values and fill
// copies. None for a CUDA tensor (reading the row's bounds would
// synchronise: the route does that), an index out of range (the route
// raises) or anything the functions above refuse.
PyObject* hot_row(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 5 || !PyLong_CheckExact(args[4]) || !ordinary_thread() || !all_plain(args, 4))
    Py_RETURN_NONE;
  const Tensor& crow = T(args[0]);
  if (!crow.is_cpu() || crow.dim() != 1 || crow.scalar_type() != at::kLong ||
      !crow.is_contiguous() || T(args[2]).dim() != 1)
    Py_RETURN_NONE;
  at::Scalar index;
  if (!to_scalar(args[4], index)) Py_RETURN_NONE;
  const int64_t rows = crow.size(0) - 1;
  int64_t i = index.toLong();
  if (i < -rows || i >= rows) Py_RETURN_NONE;
  if (i < 0) i += rows;
  const int64_t* bounds = crow.const_data_ptr<int64_t>() + i;
  const int64_t lo = bounds[0], hi = bounds[1];
  Tensor indices, values, fill;
  try {
    at::AutoDispatchBelowADInplaceOrView below;
    indices = T(args[1]).slice(0, lo, hi).unsqueeze(0);
    values = T(args[2]).slice(0, lo, hi).clone();
    fill = T(args[3]).clone();
  } catch (const std::exception&) {
    Py_RETURN_NONE;
  }
  PyObject* out = PyTuple_New(3);
  if (out == nullptr) return nullptr;
  PyObject* items[3] = {THPVariable_Wrap(std::move(indices)), THPVariable_Wrap(std::move(values)),
                        THPVariable_Wrap(std::move(fill))};
  for (int k = 0; k < 3; ++k) {
    if (items[k] == nullptr) {
      for (int j = 0; j < 3; ++j) Py_XDECREF(items[j]);
      Py_DECREF(out);
      return nullptr;
    }
  }
  for (int k = 0; k < 3; ++k) PyTuple_SET_ITEM(out, k, items[k]);
  return out;
}

// ---- A @ x, A @ B: a plain CSR matrix and a strided operand ---------------------

// a @ b in one C call (spmm's CPU kernel below autograd, a 1-D b without a
// reshape), or None: a a plain CSR SparseFillTensor holding __new__'s
// attributes alone and not fully stored (the route gives a fully stored one
// a fill of 0), b a strided CPU torch.Tensor (not a subclass) that nothing
// tracks, 1-D if `vector`, 2-D if `matrix`, with a's columns as its rows;
// dtypes and the rest are the kernel's checks (an error answers None, and
// the route raises it).
PyObject* product_call(PyObject* a_obj, PyObject* b_obj, bool vector, bool matrix) {
  Operand a;
  if (Py_TYPE(b_obj) != reinterpret_cast<PyTypeObject*>(THPVariableClass) || !plain(b_obj) ||
      !plain_operand(a_obj, a) || a.entry[kLayout] != bound().csr || !ordinary_thread())
    Py_RETURN_NONE;
  PyObject* size = a.entry[kSize];
  if (PyTuple_GET_SIZE(size) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(size, 0)) ||
      !PyLong_CheckExact(PyTuple_GET_ITEM(size, 1)) || !plain(a.entry[kCol]) ||
      !plain(a.entry[kCrow]))
    Py_RETURN_NONE;
  const int64_t m = PyLong_AsLongLong(PyTuple_GET_ITEM(size, 0));
  const int64_t k = PyLong_AsLongLong(PyTuple_GET_ITEM(size, 1));
  int64_t numel = 0;
  if (PyErr_Occurred()) {
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  const Tensor& b = T(b_obj);
  const int64_t d = b.dim();
  if (!((d == 1 && vector) || (d == 2 && matrix)) || b.layout() != at::kStrided ||
      !b.device().is_cpu() || b.size(0) != k || __builtin_mul_overflow(m, k, &numel) ||
      a.values().size(0) >= numel)
    Py_RETURN_NONE;
  Tensor out;
  try {
    at::AutoDispatchBelowADInplaceOrView below;
    out = spmm_or_spmv_cpu(T(a.entry[kCrow]), T(a.entry[kCol]), a.values(), a.fill(), b, k);
  } catch (const std::exception&) {
    Py_RETURN_NONE;
  }
  return THPVariable_Wrap(std::move(out));
}

// The handler's call: self is (fallback, vector, matrix).
PyObject* product_enter(PyObject* self, PyObject* args) {
  if (PyTuple_CheckExact(args) && PyTuple_GET_SIZE(args) == 2) {
    PyObject* out = product_call(PyTuple_GET_ITEM(args, 0), PyTuple_GET_ITEM(args, 1),
                                 PyTuple_GET_ITEM(self, 1) == Py_True,
                                 PyTuple_GET_ITEM(self, 2) == Py_True);
    if (out != Py_None) return out;  // the result, or an error
    Py_DECREF(out);
  }
  return PyObject_CallOneArg(PyTuple_GET_ITEM(self, 0), args);
}

PyMethodDef kProductEnter = {"product_fast", (PyCFunction)product_enter, METH_O,
                             "a fast handler of a matrix product: A @ b in C, or its fallback"};

// _C.hot_product(fallback, vector, matrix) -> a fast handler (docs/design.md#product-fast-path)
// for torch's matmul, mv and mm callables: called with the call's
// positional args, it answers product_call's result, else fallback(args)
// (_products' Python handler, which serves COO operands and the rest).
PyObject* hot_product(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 3 || !PyCallable_Check(args[0]) || !PyBool_Check(args[1]) || !PyBool_Check(args[2])) {
    PyErr_SetString(PyExc_TypeError, "hot_product(fallback, vector: bool, matrix: bool)");
    return nullptr;
  }
  PyObject* self = Py_BuildValue("(OOO)", args[0], args[1], args[2]);
  if (self == nullptr) return nullptr;
  PyObject* fn = PyCFunction_New(&kProductEnter, self);
  Py_DECREF(self);
  return fn;
}

}  // namespace
}  // namespace hot

PyMethodDef kHotMethods[] = {
    {"hot_sum", (PyCFunction)(void (*)())hot::hot_sum, METH_FASTCALL,
     "hot_sum(values, fill, size) -> values.sum() + (prod(size) - nse) * fill, or None"},
    {"hot_row", (PyCFunction)(void (*)())hot::hot_row, METH_FASTCALL,
     "hot_row(crow, col, values, fill, i) -> (indices, values, fill) of row i, or None"},
    {"hot_on", (PyCFunction)hot::hot_on, METH_O,
     "hot_on(name) -> (unary, binary): an element-wise op's whole call on plain SparseFillTensors"},
    {"hot_fast", (PyCFunction)(void (*)())hot::hot_fast, METH_FASTCALL,
     "hot_fast(whole, extra, fallback, reflected) -> a fast handler: whole's C call, else fallback"},
    {"hot_bind", (PyCFunction)(void (*)())hot::hot_bind, METH_FASTCALL,
     "hot_bind(cls, make_wrapper_subclass, sparse_coo, sparse_csr, facts): set up hot_on's functions"},
    {"hot_product", (PyCFunction)(void (*)())hot::hot_product, METH_FASTCALL,
     "hot_product(fallback, vector, matrix) -> a fast handler of A @ b: the C call, else fallback"},
    {"hot", (PyCFunction)hot::hot, METH_O,
     "hot(name) -> (unary, same, scalar): the hot path's functions of an element-wise op"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace sparsefill
