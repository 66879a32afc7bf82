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
#include <torch/csrc/Device.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/forward_grad.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/autograd/variable.h>

#include <array>
#include <initializer_list>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include <ATen/ops/add.h>
#include <ATen/ops/sum.h>

#include "ops/elementwise.h"
#include "ops/generated/elementwise_ops.h"
#include "ops/products.h"

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

// Runs `body` below autograd and hands its pair to `make`, the Python result.
// Any C++ error answers None: the caller then calls the op through torch.ops,
// which raises it as torch does.
template <class Body, class Make>
PyObject* run_then(Body&& body, Make&& make) {
  Pair out;
  try {
    at::AutoDispatchBelowADInplaceOrView below;
    out = body();
  } catch (const std::exception&) {
    Py_RETURN_NONE;
  }
  return make(std::move(out));
}

// run_then with the pair wrapped as (values, fill).
template <class Body>
PyObject* run(Body&& body) {
  return run_then(std::forward<Body>(body), [](Pair&& out) { return wrap(std::move(out)); });
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

// ---- whole calls on plain SparseFillTensors -----------------------------------
// The hot functions above take components; these take the tensors
// themselves and return the result tensor, so that a fast handler is one
// C call: the plain check (_tensor.is_plain's rule, read from the
// instance's dict), the op's kernel body, and the result made as
// _tensor.on_pattern makes it (torch's _make_wrapper_subclass, then a copy
// of the operand's dict with values, fill and the coalesced flag replaced).
// _tensor.py binds the class once (hot_bind).

// The attributes SparseFillTensor.__new__ sets, in this order (kFacts of them).
enum Fact { kLayout, kSize, kIndices, kCrow, kCol, kValues, kFill, kCoalesced, kCoalescedFlag,
            kBlocksize, kFacts };
const char* const kFactNames[kFacts] = {"_sf_layout", "_sf_size", "_sf_indices", "_sf_crow",
                                        "_sf_col", "_sf_values", "_sf_fill", "_sf_coalesced",
                                        "_sf_coalesced_flag", "_sf_blocksize"};

struct Bound {
  PyObject* cls = nullptr;       // SparseFillTensor
  PyObject* make = nullptr;      // torch.Tensor._make_wrapper_subclass
  PyObject* coo = nullptr;       // torch.sparse_coo
  PyObject* csr = nullptr;       // torch.sparse_csr
  PyObject* kwnames = nullptr;   // ("dtype", "device", "layout", "dispatch_layout")
  PyObject* dict_name = nullptr; // "__dict__"
  PyObject* keys[kFacts] = {};
};

Bound& bound() {
  static Bound b;
  return b;
}

// A plain operand's dict (a new reference) and its entries (borrowed from it).
struct Operand {
  PyObject* dict = nullptr;
  PyObject* entry[kFacts] = {};
  Operand() = default;
  Operand(const Operand&) = delete;
  Operand& operator=(const Operand&) = delete;
  ~Operand() { Py_XDECREF(dict); }
  const Tensor& values() const { return T(entry[kValues]); }
  const Tensor& fill() const { return T(entry[kFill]); }
};

// Whether obj is a plain SparseFillTensor (_tensor.is_plain: coalesced COO
// or unbatched CSR, 1-d values, a 0-d fill, neither tracking gradients)
// holding __new__'s attributes alone (no cache: on_pattern's rule); fills `op`.
bool plain_operand(PyObject* obj, Operand& op) {
  const Bound& b = bound();
  if (b.cls == nullptr || Py_TYPE(obj) != reinterpret_cast<PyTypeObject*>(b.cls)) return false;
  op.dict = PyObject_GenericGetDict(obj, nullptr);
  if (op.dict == nullptr) {
    PyErr_Clear();
    return false;
  }
  if (!PyDict_CheckExact(op.dict) || PyDict_GET_SIZE(op.dict) != kFacts) return false;
  for (int k = 0; k < kFacts; ++k) {
    op.entry[k] = PyDict_GetItemWithError(op.dict, b.keys[k]);
    if (op.entry[k] == nullptr) {
      PyErr_Clear();
      return false;
    }
  }
  if (op.entry[kCoalesced] != Py_True || !PyTuple_CheckExact(op.entry[kSize]) ||
      !plain(op.entry[kValues]) || !plain(op.entry[kFill]) || op.values().dim() != 1 ||
      op.fill().dim() != 0)
    return false;
  PyObject* layout = op.entry[kLayout];
  if (layout == b.coo) return THPVariable_Check(op.entry[kIndices]);
  return layout == b.csr && THPVariable_Check(op.entry[kCrow]) && T(op.entry[kCrow]).dim() == 1;
}

// Whether two plain operands share their pattern: the same layout and size,
// the very same index tensors (the fast handlers' rule for `same`).
bool same_pattern(const Operand& a, const Operand& b) {
  if (a.entry[kLayout] != b.entry[kLayout] || a.entry[kIndices] != b.entry[kIndices] ||
      a.entry[kCrow] != b.entry[kCrow] || a.entry[kCol] != b.entry[kCol])
    return false;
  if (a.entry[kSize] == b.entry[kSize]) return true;
  const int equal = PyObject_RichCompareBool(a.entry[kSize], b.entry[kSize], Py_EQ);
  if (equal < 0) PyErr_Clear();
  return equal == 1;
}

// A borrowed torch.device object for `device` (the last one asked for, kept).
PyObject* cached_device(const at::Device& device) {
  static PyObject* last = nullptr;
  static at::Device last_device(at::kCPU);
  if (last == nullptr || device != last_device) {
    PyObject* made = THPDevice_New(device);
    if (made == nullptr) return nullptr;
    Py_XDECREF(last);
    last = made;
    last_device = device;
  }
  return last;
}

// The result on a's pattern with the kernel's (values, fill), as on_pattern.
PyObject* on_pattern(const Operand& a, Pair&& out) {
  const Bound& b = bound();
  Tensor values = std::move(std::get<0>(out)), fill = std::move(std::get<1>(out));
  PyObject* dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(values.scalar_type()));
  // (one device object per device kept: a new one per call costs an allocation)
  PyObject* device = cached_device(values.device());
  if (device == nullptr) return nullptr;
  PyObject* call[] = {b.cls, a.entry[kSize], dtype, device, a.entry[kLayout], Py_True};
  PyObject* result = PyObject_Vectorcall(b.make, call, 2, b.kwnames);
  if (result == nullptr) return nullptr;
  PyObject* facts = PyDict_Copy(a.dict);
  PyObject* v = facts ? THPVariable_Wrap(std::move(values)) : nullptr;
  PyObject* f = v ? THPVariable_Wrap(std::move(fill)) : nullptr;
  const bool ok = f != nullptr && PyDict_SetItem(facts, b.keys[kValues], v) == 0 &&
                  PyDict_SetItem(facts, b.keys[kFill], f) == 0 &&
                  PyDict_SetItem(facts, b.keys[kCoalescedFlag], Py_True) == 0 &&
                  PyObject_SetAttr(result, b.dict_name, facts) == 0;
  Py_XDECREF(facts);
  Py_XDECREF(v);
  Py_XDECREF(f);
  if (!ok) Py_CLEAR(result);
  return result;
}

// run_then with the result made on a's pattern.
template <class Body>
PyObject* run_on(const Operand& a, Body&& body) {
  return run_then(std::forward<Body>(body),
                  [&a](Pair&& out) { return on_pattern(a, std::move(out)); });
}

// _C.hot_bind(cls, make_wrapper_subclass, sparse_coo, sparse_csr): what the
// whole-call functions need, once.
PyObject* hot_bind(PyObject*, PyObject* const* args, Py_ssize_t n) {
  if (n != 4 || !PyType_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "hot_bind(cls, make_wrapper_subclass, sparse_coo, sparse_csr)");
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
    keys[k] = PyUnicode_InternFromString(kFactNames[k]);
    if (keys[k] == nullptr) {
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

// _C.hot_fast(whole, extra, fallback, reflected) -> a fast handler (RFC.md
// 9.1) for one routed callable: called with the call's positional args, it
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

// _C.hot_product(fallback, vector, matrix) -> a fast handler (RFC.md 9.1)
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

PyMethodDef kHotMethods[] = {
    {"hot_sum", (PyCFunction)(void (*)())hot_sum, METH_FASTCALL,
     "hot_sum(values, fill, size) -> values.sum() + (prod(size) - nse) * fill, or None"},
    {"hot_row", (PyCFunction)(void (*)())hot_row, METH_FASTCALL,
     "hot_row(crow, col, values, fill, i) -> (indices, values, fill) of row i, or None"},
    {"hot_on", (PyCFunction)hot_on, METH_O,
     "hot_on(name) -> (unary, binary): an element-wise op's whole call on plain SparseFillTensors"},
    {"hot_fast", (PyCFunction)(void (*)())hot_fast, METH_FASTCALL,
     "hot_fast(whole, extra, fallback, reflected) -> a fast handler: whole's C call, else fallback"},
    {"hot_bind", (PyCFunction)(void (*)())hot_bind, METH_FASTCALL,
     "hot_bind(cls, make_wrapper_subclass, sparse_coo, sparse_csr): set up hot_on's functions"},
    {"hot_product", (PyCFunction)(void (*)())hot_product, METH_FASTCALL,
     "hot_product(fallback, vector, matrix) -> a fast handler of A @ b: the C call, else fallback"},
    {"hot", (PyCFunction)hot, METH_O,
     "hot(name) -> (unary, same, scalar): the hot path's functions of an element-wise op"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace sparsefill
