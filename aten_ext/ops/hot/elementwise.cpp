// ops/hot/elementwise.cpp -- the hot path's element-wise functions (docs/design.md#hot-path),
// on the module torch_sparsefill._C: per element-wise op whose extra arguments
// are all numbers, builtin functions that run the op's own kernel body
// (elementwise/elementwise.h) on (values, fill) and return (values, fill)
// (_C.hot); its whole call on plain SparseFillTensors, which returns the result
// tensor (_C.hot_on, bound to the class by _C.hot_bind); and the fast handler
// that tries that call before its Python fallback (_C.hot_fast). One C call
// each: no schema parsing, no autograd or ADInplaceOrView kernel between them
// and ATen's CPU/CUDA kernels.
//
// They serve only what the registered op computes identically below autograd
// (hot.h: plain tensors, an ordinary thread); anything else, and any error,
// answers None, and the caller calls the op through torch.ops. The
// element-wise ops are CompositeImplicitAutograd: the registered op is this
// very body, so the results are the op's.
#include <array>
#include <initializer_list>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "ops/elementwise/elementwise.h"
#include "ops/generated/elementwise_ops.h"
#include "ops/hot/hot.h"

namespace sparsefill::hot {

// _C.hot_bind(cls, make_wrapper_subclass, sparse_coo, sparse_csr, facts):
// what the whole-call functions need, once; `facts` is the tuple of the
// attribute names __new__ sets, in the order of the Fact enum.
PyObject* hot_bind(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 5 || !PyType_Check(args[0]) || !PyTuple_CheckExact(args[4]) ||
      PyTuple_GET_SIZE(args[4]) != kFacts) {
    PyErr_SetString(PyExc_TypeError,
                    "hot_bind(cls, make_wrapper_subclass, sparse_coo, sparse_csr, facts): facts "
                    "must be a tuple of the 11 attribute names SparseFillTensor.__new__ sets");
    return nullptr;
  }
  Bound& b = bound();
  PyObject* kwnames = Py_BuildValue("(ssss)", "dtype", "device", "layout", "dispatch_layout");
  PyObject* dict_name = PyUnicode_InternFromString("__dict__");
  if (kwnames == nullptr || dict_name == nullptr) {
    Py_XDECREF(kwnames);
    Py_XDECREF(dict_name);
    return nullptr;
  }
  PyObject* keys[kFacts];
  for (int k = 0; k < kFacts; ++k) {
    PyObject* name = PyTuple_GET_ITEM(args[4], k);
    keys[k] = PyUnicode_Check(name) ? PyUnicode_InternFromString(PyUnicode_AsUTF8(name)) : nullptr;
    if (keys[k] == nullptr) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "hot_bind: a fact name is not a str");
      for (int j = 0; j < k; ++j) Py_DECREF(keys[j]);
      Py_DECREF(kwnames);
      Py_DECREF(dict_name);
      return nullptr;
    }
  }
  // Kept for the module's life (a second bind replaces, the first leaks:
  // only _tensor.py binds, once).
  for (int k = 0; k < 4; ++k) Py_INCREF(args[k]);
  b.cls = args[0];
  b.make = args[1];
  b.coo = args[2];
  b.csr = args[3];
  b.kwnames = kwnames;
  b.dict_name = dict_name;
  for (int k = 0; k < kFacts; ++k) b.keys[k] = keys[k];
  Py_RETURN_NONE;
}

namespace {

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

  // (a, *extra) with a plain SparseFillTensor a: the result tensor
  static PyObject* unary_on(PyObject* const* args, Py_ssize_t n) {
    std::array<at::Scalar, kExtra> x;
    Operand a;
    if (n != 1 + (Py_ssize_t)kExtra || !ordinary_thread() || !plain_operand(args[0], a) ||
        !to_scalars(args + 1, x))
      Py_RETURN_NONE;
    return run_on(a, [&] {
      return std::apply([&](const auto&... s) { return Unary<Op>::kernel(a.values(), a.fill(), s...); }, x);
    });
  }

  // (a, b, *extra): plain SparseFillTensors of one pattern, or a plain one
  // and a Python int or float on either side (`A * 2`, `2 - A`: ops with a
  // number form, but pow, as _elementwise's fast handler serves them, with
  // the same kernel): the result on the tensor operand's pattern
  static PyObject* binary_on(PyObject* const* args, Py_ssize_t n) {
    std::array<at::Scalar, kExtra> x;
    Operand a, b;
    if (n != 2 + (Py_ssize_t)kExtra || !ordinary_thread() || !to_scalars(args + 2, x))
      Py_RETURN_NONE;
    if constexpr (Op::number && std::string_view(Op::name) != "pow") {
      at::Scalar number;
      const bool reverse = to_scalar(args[0], number);  // `number op A`
      if (reverse || to_scalar(args[1], number)) {
        if (!plain_operand(args[reverse ? 1 : 0], a)) Py_RETURN_NONE;
        return run_on(a, [&] {
          return std::apply([&](const auto&... s) {
            return Binary<Op>::scalar_kernel(a.values(), a.fill(), number, reverse, s...);
          }, x);
        });
      }
    }
    if (!plain_operand(args[0], a) || !plain_operand(args[1], b) || !same_pattern(a, b))
      Py_RETURN_NONE;
    return run_on(a, [&] {
      return std::apply([&](const auto&... s) {
        return Binary<Op>::same_kernel(a.values(), a.fill(), b.values(), b.fill(), s...);
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
  Entry unary = nullptr, same = nullptr, scalar = nullptr, unary_on = nullptr, binary_on = nullptr;
};

// name -> the entries of the op's kinds served here.
const std::unordered_map<std::string, Entries>& entries() {
  static const auto table = [] {
    std::unordered_map<std::string, Entries> t;
    for_each_op(UnaryOps(), [&](auto op) {
      using Op = typename decltype(op)::type;
      using H = Hot<Op, typename Extra<Op, 1>::type>;
      if constexpr (H::kServed) {
        t[Op::name].unary = &H::unary;
        t[Op::name].unary_on = &H::unary_on;
      }
    });
    for_each_op(BinaryOps(), [&](auto op) {
      using Op = typename decltype(op)::type;
      using H = Hot<Op, typename Extra<Op, 2>::type>;
      if constexpr (H::kServed) {
        t[Op::name].same = &H::same;
        t[Op::name].binary_on = &H::binary_on;
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

// A tuple of one Python function per entry (None for an entry the op lacks).
PyObject* functions(std::initializer_list<Entry> list) {
  PyObject* out = PyTuple_New(static_cast<Py_ssize_t>(list.size()));
  if (out == nullptr) return nullptr;
  Py_ssize_t i = 0;
  for (Entry entry : list) {
    PyObject* fn = function(entry);
    if (fn == nullptr) {
      Py_DECREF(out);
      return nullptr;
    }
    PyTuple_SET_ITEM(out, i++, fn);  // steals fn
  }
  return out;
}

// The entries of the op named by a Python str (none for an op not served).
bool entries_named(PyObject* name, Entries& e) {
  const char* s = PyUnicode_AsUTF8(name);
  if (s == nullptr) return false;
  auto it = entries().find(s);
  e = it == entries().end() ? Entries() : it->second;
  return true;
}

}  // namespace

// _C.hot(name) -> (unary, same, scalar): the op's hot functions, None for a
// kind it lacks or whose extra arguments are not all numbers.
PyObject* hot(PyObject*, PyObject* name) {
  Entries e;
  return entries_named(name, e) ? functions({e.unary, e.same, e.scalar}) : nullptr;
}

// _C.hot_on(name) -> (unary, binary): the op's whole-call functions on plain
// SparseFillTensors (and numbers, binary_on), the result tensor or None;
// None for a kind it lacks.
PyObject* hot_on(PyObject*, PyObject* name) {
  Entries e;
  return entries_named(name, e) ? functions({e.unary_on, e.binary_on}) : nullptr;
}

namespace {

// _C.hot_fast(whole, extra, fallback, reflected) -> a fast handler (
// docs/design.md#hot-path) for one routed callable: called with the call's positional args, it
// runs `whole` (a function of hot_on) on them (swapped when `reflected`, a
// binary op's reflected form), then `extra`; where that answers None it
// returns fallback(args). A fast handler of element-wise ops is then one C
// call, with no Python frame of its own, where the C path serves.
PyObject* fast_enter(PyObject* self, PyObject* args) {
  PyObject* whole = PyTuple_GET_ITEM(self, 0);
  PyObject* extra = PyTuple_GET_ITEM(self, 1);
  PyObject* fallback = PyTuple_GET_ITEM(self, 2);
  const bool reflected = PyTuple_GET_ITEM(self, 3) == Py_True;
  const Py_ssize_t operands = PyLong_AsSsize_t(PyTuple_GET_ITEM(self, 4));
  const Py_ssize_t n_extra = PyTuple_GET_SIZE(extra);
  // (a cheap first look: a SparseFillTensor among the operands; `A * 2` has it first)
  const auto* cls = reinterpret_cast<PyTypeObject*>(bound().cls);
  if (PyTuple_CheckExact(args) && PyTuple_GET_SIZE(args) == operands && n_extra <= 6 &&
      (Py_TYPE(PyTuple_GET_ITEM(args, 0)) == cls ||
       Py_TYPE(PyTuple_GET_ITEM(args, operands - 1)) == cls)) {
    PyObject* stack[8];
    for (Py_ssize_t i = 0; i < operands; ++i) {
      stack[i] = PyTuple_GET_ITEM(args, reflected ? operands - 1 - i : i);
    }
    for (Py_ssize_t i = 0; i < n_extra; ++i) stack[operands + i] = PyTuple_GET_ITEM(extra, i);
    PyObject* capsule = PyCFunction_GET_SELF(whole);
    auto entry = reinterpret_cast<Entry>(PyCapsule_GetPointer(capsule, nullptr));
    PyObject* out = entry(stack, operands + n_extra);
    if (out != Py_None) return out;  // the result, or an error
    Py_DECREF(out);
  }
  return PyObject_CallOneArg(fallback, args);
}

PyMethodDef kFastEnter = {"fast", (PyCFunction)fast_enter, METH_O,
                          "a fast handler: the whole call in C, or its fallback"};

}  // namespace

PyObject* hot_fast(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 4 || !PyCFunction_Check(args[0]) || PyCFunction_GET_SELF(args[0]) == nullptr ||
      !PyCapsule_CheckExact(PyCFunction_GET_SELF(args[0])) || !PyTuple_CheckExact(args[1]) ||
      !PyCallable_Check(args[2]) || !PyBool_Check(args[3])) {
    PyErr_SetString(PyExc_TypeError,
                    "hot_fast(whole, extra: tuple, fallback, reflected: bool), whole from hot_on");
    return nullptr;
  }
  // unary entries take one operand, binary entries two
  auto entry = reinterpret_cast<Entry>(PyCapsule_GetPointer(PyCFunction_GET_SELF(args[0]), nullptr));
  Py_ssize_t operands = 0;
  for (const auto& kv : entries()) {
    if (kv.second.unary_on == entry) operands = 1;
    if (kv.second.binary_on == entry) operands = 2;
  }
  if (operands == 0) {
    PyErr_SetString(PyExc_TypeError, "hot_fast: whole must be a function of hot_on");
    return nullptr;
  }
  PyObject* self = Py_BuildValue("(OOOOn)", args[0], args[1], args[2], args[3], operands);
  if (self == nullptr) return nullptr;
  PyObject* fn = PyCFunction_New(&kFastEnter, self);
  Py_DECREF(self);
  return fn;
}

}  // namespace sparsefill::hot
