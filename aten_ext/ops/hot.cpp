// ops/hot.cpp -- the hot path's entry points (RFC.md 9.1), on the module
// torch_sparsefill._C: per element-wise op whose extra arguments are all
// numbers, builtin functions that run the op's own kernel body
// (elementwise.h) on (values, fill) and return (values, fill); and the sum
// of a plain tensor and one row of a CSR tensor. One C call each: no schema parsing, no autograd or
// ADInplaceOrView kernel between them and ATen's CPU/CUDA kernels.
//
// They serve only what the registered op computes identically below
// autograd: no component requires grad or has a forward-mode tangent, the
// thread forces no dispatch key on (modes, functorch transforms, tracing)
// and no component has a Python or functorch key. Anything else, and any
// error, answers None, and the caller calls the op through torch.ops. The
// element-wise ops are CompositeImplicitAutograd: the registered op is this
// very body, so the results are the op's.
#include <Python.h>

#include <ATen/core/Tensor.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/forward_grad.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/variable.h>

#include <array>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>

#include <ATen/ops/add.h>
#include <ATen/ops/sum.h>

#include "ops/elementwise.h"
#include "ops/generated/elementwise_ops.h"

namespace sparsefill {
namespace {

using Pair = std::tuple<Tensor, Tensor>;

// The keys a plain CPU/CUDA/Meta tensor may carry besides its backend's:
// autograd's and ADInplaceOrView (skipped by the guard below).
const c10::DispatchKeySet kSkipped = c10::autograd_dispatch_keyset_with_ADInplaceOrView;

bool plain(PyObject* obj) {
  if (!THPVariable_Check(obj)) return false;
  const Tensor& t = THPVariable_Unpack(obj);
  if (!t.defined() || t.requires_grad()) return false;
  // A forward-mode tangent (torch.autograd.forward_ad) needs the autograd kernel too.
  const auto* meta = torch::autograd::impl::get_autograd_meta(t);
  if (meta != nullptr && meta->fw_grad_ && !meta->fw_grad_->empty()) return false;
  const c10::DispatchKeySet keys = t.key_set() - kSkipped;
  return !keys.has_any(c10::python_ks | c10::functorch_transforms_ks);
}

// Whether the thread dispatches as usual: nothing forced on beyond the
// defaults (modes, tracing, functorch levels) and no Python mode on the stack.
bool ordinary_thread() {
  return (c10::impl::tls_local_dispatch_key_set().included_ - c10::default_included_set).empty() &&
         c10::impl::TorchDispatchModeTLS::stack_len() == 0;
}

PyObject* wrap(Pair&& out) {
  PyObject* v = THPVariable_Wrap(std::move(std::get<0>(out)));
  if (v == nullptr) return nullptr;
  PyObject* f = THPVariable_Wrap(std::move(std::get<1>(out)));
  if (f == nullptr) {
    Py_DECREF(v);
    return nullptr;
  }
  PyObject* pair = PyTuple_New(2);
  if (pair == nullptr) {
    Py_DECREF(v);
    Py_DECREF(f);
    return nullptr;
  }
  PyTuple_SET_ITEM(pair, 0, v);
  PyTuple_SET_ITEM(pair, 1, f);
  return pair;
}

// Runs `body` below autograd. Any C++ error answers None: the caller then
// calls the op through torch.ops, which raises it as torch does.
template <class Body>
PyObject* run(Body&& body) {
  Pair out;
  try {
    at::AutoDispatchBelowADInplaceOrView below;
    out = body();
  } catch (const std::exception&) {
    Py_RETURN_NONE;
  }
  return wrap(std::move(out));
}

const Tensor& T(PyObject* obj) { return THPVariable_Unpack(obj); }

bool all_plain(PyObject* const* args, Py_ssize_t n) {
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!plain(args[i])) return false;
  }
  return true;
}

// A Python int or float (not a bool), as torch.ops passes it as a Scalar;
// false for anything else (an int beyond int64 too).
bool to_scalar(PyObject* obj, at::Scalar& out) {
  if (PyFloat_CheckExact(obj)) {
    out = at::Scalar(PyFloat_AS_DOUBLE(obj));
    return true;
  }
  if (!PyLong_CheckExact(obj)) return false;
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(obj, &overflow);
  if (overflow != 0 || (x == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return false;
  }
  out = at::Scalar(static_cast<int64_t>(x));
  return true;
}

template <size_t N>
bool to_scalars(PyObject* const* args, std::array<at::Scalar, N>& out) {
  for (size_t i = 0; i < N; ++i) {
    if (!to_scalar(args[i], out[i])) return false;
  }
  return true;
}

template <class A> constexpr bool kScalarArg = std::is_same_v<A, const at::Scalar&>;

// One op's hot functions, for ops whose extra arguments are all Scalars
// (passed last, as Python numbers, in the schema's order).
template <class Op, class P> struct Hot;
template <class Op, class... A> struct Hot<Op, Pack<A...>> {
  static constexpr bool kServed = (kScalarArg<A> && ...);
  static constexpr size_t kExtra = sizeof...(A);

  // (values, fill, *extra)
  static PyObject* unary(PyObject* const* args, Py_ssize_t n) {
    std::array<at::Scalar, kExtra> x;
    if (n != 2 + (Py_ssize_t)kExtra || !ordinary_thread() || !all_plain(args, 2) ||
        !to_scalars(args + 2, x))
      Py_RETURN_NONE;
    return run([&] {
      return std::apply([&](const auto&... s) { return Unary<Op>::kernel(T(args[0]), T(args[1]), s...); }, x);
    });
  }

  // (values_a, fill_a, values_b, fill_b, *extra)
  static PyObject* same(PyObject* const* args, Py_ssize_t n) {
    std::array<at::Scalar, kExtra> x;
    if (n != 4 + (Py_ssize_t)kExtra || !ordinary_thread() || !all_plain(args, 4) ||
        !to_scalars(args + 4, x))
      Py_RETURN_NONE;
    return run([&] {
      return std::apply([&](const auto&... s) {
        return Binary<Op>::same_kernel(T(args[0]), T(args[1]), T(args[2]), T(args[3]), s...);
      }, x);
    });
  }

  // (values, fill, number, reverse, *extra)
  static PyObject* scalar(PyObject* const* args, Py_ssize_t n) {
    std::array<at::Scalar, kExtra> x;
    at::Scalar number;
    if (n != 4 + (Py_ssize_t)kExtra || !ordinary_thread() || !all_plain(args, 2) ||
        !to_scalar(args[2], number) || !PyBool_Check(args[3]) || !to_scalars(args + 4, x))
      Py_RETURN_NONE;
    const bool reverse = args[3] == Py_True;
    return run([&] {
      return std::apply([&](const auto&... s) {
        return Binary<Op>::scalar_kernel(T(args[0]), T(args[1]), number, reverse, s...);
      }, x);
    });
  }
};

using Entry = PyObject* (*)(PyObject* const*, Py_ssize_t);

// The builtin functions' self is a capsule holding the op's Entry.
PyObject* enter(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  return reinterpret_cast<Entry>(PyCapsule_GetPointer(self, nullptr))(args, n);
}

PyMethodDef kEnter = {"hot", (PyCFunction)(void (*)())enter, METH_FASTCALL,
                      "an element-wise op's kernel body below autograd: (values, fill), or None "
                      "where the op must be called through torch.ops"};

struct Entries {
  Entry unary = nullptr, same = nullptr, scalar = nullptr;
};

// name -> the entries of the op's kinds served here.
const std::unordered_map<std::string, Entries>& entries() {
  static const auto table = [] {
    std::unordered_map<std::string, Entries> t;
    for_each_op(UnaryOps(), [&](auto op) {
      using Op = typename decltype(op)::type;
      using H = Hot<Op, typename Extra<Op, 1>::type>;
      if constexpr (H::kServed) t[Op::name].unary = &H::unary;
    });
    for_each_op(BinaryOps(), [&](auto op) {
      using Op = typename decltype(op)::type;
      using H = Hot<Op, typename Extra<Op, 2>::type>;
      if constexpr (H::kServed) {
        t[Op::name].same = &H::same;
        if constexpr (Op::number) t[Op::name].scalar = &H::scalar;
      }
    });
    return t;
  }();
  return table;
}

PyObject* function(Entry entry) {
  if (entry == nullptr) Py_RETURN_NONE;
  PyObject* capsule = PyCapsule_New(reinterpret_cast<void*>(entry), nullptr, nullptr);
  if (capsule == nullptr) return nullptr;
  PyObject* fn = PyCFunction_New(&kEnter, capsule);
  Py_DECREF(capsule);
  return fn;
}

// _C.hot(name) -> (unary, same, scalar): the op's hot functions, None for a
// kind it lacks or whose extra arguments are not all numbers.
PyObject* hot(PyObject*, PyObject* name) {
  const char* s = PyUnicode_AsUTF8(name);
  if (s == nullptr) return nullptr;
  auto it = entries().find(s);
  const Entries e = it == entries().end() ? Entries() : it->second;
  PyObject* u = function(e.unary);
  PyObject* m = u ? function(e.same) : nullptr;
  PyObject* c = m ? function(e.scalar) : nullptr;
  if (c == nullptr) {
    Py_XDECREF(u);
    Py_XDECREF(m);
    return nullptr;
  }
  PyObject* out = PyTuple_Pack(3, u, m, c);
  Py_DECREF(u);
  Py_DECREF(m);
  Py_DECREF(c);
  return out;
}

// _C.hot_sum(values, fill, size) -> values.sum() + count * fill, count the
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
    total = values.sum();
    if (count > 0) total = at::add(total, T(args[1]), count);
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

}  // namespace

PyMethodDef kHotMethods[] = {
    {"hot_sum", (PyCFunction)(void (*)())hot_sum, METH_FASTCALL,
     "hot_sum(values, fill, size) -> values.sum() + (prod(size) - nse) * fill, or None"},
    {"hot_row", (PyCFunction)(void (*)())hot_row, METH_FASTCALL,
     "hot_row(crow, col, values, fill, i) -> (indices, values, fill) of row i, or None"},
    {"hot", (PyCFunction)hot, METH_O,
     "hot(name) -> (unary, same, scalar): the hot path's functions of an element-wise op"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace sparsefill
