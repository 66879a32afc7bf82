// ops/hot/hot.h -- what the hot path's functions (hot/elementwise.cpp,
// hot/module.cpp) share: when a call may skip the dispatcher (plain tensors, an
// ordinary thread), running a body below autograd with any error answering
// None, Python numbers as Scalars, and the whole call on plain
// SparseFillTensors (the instance's attributes, the result on an operand's
// pattern). docs/design.md#hot-path.
#pragma once

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


namespace sparsefill::hot {

using at::Tensor;
using Pair = std::tuple<Tensor, Tensor>;

// The keys a plain CPU/CUDA/Meta tensor may carry besides its backend's:
// autograd's and ADInplaceOrView (skipped by the guard below).
inline const c10::DispatchKeySet kSkipped = c10::autograd_dispatch_keyset_with_ADInplaceOrView;

inline bool plain(PyObject* obj) {
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
inline bool ordinary_thread() {
  return (c10::impl::tls_local_dispatch_key_set().included_ - c10::default_included_set).empty() &&
         c10::impl::TorchDispatchModeTLS::stack_len() == 0;
}

inline PyObject* wrap(Pair&& out) {
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
inline PyObject* run_then(Body&& body, Make&& make) {
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
inline PyObject* run(Body&& body) {
  return run_then(std::forward<Body>(body), [](Pair&& out) { return wrap(std::move(out)); });
}

inline const Tensor& T(PyObject* obj) { return THPVariable_Unpack(obj); }

inline bool all_plain(PyObject* const* args, Py_ssize_t n) {
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (!plain(args[i])) return false;
  }
  return true;
}

// A Python int or float (not a bool), as torch.ops passes it as a Scalar;
// false for anything else (an int beyond int64 too).
inline bool to_scalar(PyObject* obj, at::Scalar& out) {
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
inline bool to_scalars(PyObject* const* args, std::array<at::Scalar, N>& out) {
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

// The attributes SparseFillTensor.__new__ sets, by position (kFacts of them):
// their names have one home, torch_sparsefill/tensor/sparse_fill_tensor.py's
// FACTS, which hot_bind receives in this order.
// kChecked (the index components' version stamp) is copied into a result on
// the operand's pattern: the result shares those components, and their edits.
enum Fact { kLayout, kSize, kIndices, kCrow, kCol, kValues, kFill, kCoalesced, kCoalescedFlag,
            kBlocksize, kChecked, kFacts };

struct Bound {
  PyObject* cls = nullptr;       // SparseFillTensor
  PyObject* make = nullptr;      // torch.Tensor._make_wrapper_subclass
  PyObject* coo = nullptr;       // torch.sparse_coo
  PyObject* csr = nullptr;       // torch.sparse_csr
  PyObject* kwnames = nullptr;   // ("dtype", "device", "layout", "dispatch_layout")
  PyObject* dict_name = nullptr; // "__dict__"
  PyObject* keys[kFacts] = {};
};

inline Bound& bound() {
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

// Whether the operand's index components are as last checked: their
// version counters sum to its stamp (tensor/edits.py; plain.py's edited()).
// An edited operand is not plain: the routes check it (an edit may make
// duplicates, which an element-wise op on the stored values would misread).
// Inference tensors track no version and are not rechecked, as in Python.
inline bool unedited(const Operand& op, bool coo) {
  PyObject* stamp = op.entry[kChecked];
  int64_t now = 0;
  if (coo) {
    const Tensor& indices = T(op.entry[kIndices]);
    if (indices.is_inference()) return true;
    now = indices._version();
  } else {
    const Tensor& crow = T(op.entry[kCrow]);
    const Tensor& col = T(op.entry[kCol]);
    if (crow.is_inference() || col.is_inference()) return true;
    now = static_cast<int64_t>(crow._version() + col._version());
  }
  if (!PyLong_CheckExact(stamp)) return false;
  const long long was = PyLong_AsLongLong(stamp);
  if (was == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return was == now;
}

// Whether obj is a plain SparseFillTensor (_tensor.is_plain: coalesced COO
// or unbatched CSR, 1-d values, a 0-d fill, neither tracking gradients)
// holding __new__'s attributes alone (no cache: on_pattern's rule); fills `op`.
inline bool plain_operand(PyObject* obj, Operand& op) {
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
  if (layout == b.coo) return THPVariable_Check(op.entry[kIndices]) && unedited(op, true);
  return layout == b.csr && THPVariable_Check(op.entry[kCrow]) && THPVariable_Check(op.entry[kCol]) &&
         T(op.entry[kCrow]).dim() == 1 && unedited(op, false);
}

// Whether two plain operands share their pattern: the same layout and size,
// the very same index tensors (the fast handlers' rule for `same`).
inline bool same_pattern(const Operand& a, const Operand& b) {
  if (a.entry[kLayout] != b.entry[kLayout] || a.entry[kIndices] != b.entry[kIndices] ||
      a.entry[kCrow] != b.entry[kCrow] || a.entry[kCol] != b.entry[kCol])
    return false;
  if (a.entry[kSize] == b.entry[kSize]) return true;
  const int equal = PyObject_RichCompareBool(a.entry[kSize], b.entry[kSize], Py_EQ);
  if (equal < 0) PyErr_Clear();
  return equal == 1;
}

// A borrowed torch.device object for `device` (the last one asked for, kept).
inline PyObject* cached_device(const at::Device& device) {
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
inline PyObject* on_pattern(const Operand& a, Pair&& out) {
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
inline PyObject* run_on(const Operand& a, Body&& body) {
  return run_then(std::forward<Body>(body),
                  [&a](Pair&& out) { return on_pattern(a, std::move(out)); });
}

// The module's functions of hot/elementwise.cpp (the table: hot/module.cpp).
PyObject* hot_bind(PyObject*, PyObject* const* args, Py_ssize_t n);
PyObject* hot(PyObject*, PyObject* name);
PyObject* hot_on(PyObject*, PyObject* name);
PyObject* hot_fast(PyObject*, PyObject* const* args, Py_ssize_t n);

}  // namespace sparsefill::hot
