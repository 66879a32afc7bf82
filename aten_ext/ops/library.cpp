// ops/library.cpp -- the extension module and the operator library
// torch.ops.sparsefill: every schema, from the two lists of tools/codegen
// (native.yaml, elementwise.yaml) through ops/generated/. The ops work on
// component tensors (indices, values, fill); what each computes is its entry
// in the list, its kernels live in ops/<family>/ and are registered by
// ops/generated/registrations.cpp.
#include <Python.h>

#include <torch/library.h>

#include "ops/common/memory.h"
#include "ops/generated/elementwise_schemas.h"
#include "ops/generated/schemas.h"

namespace sparsefill {
extern PyMethodDef kHotMethods[];  // hot/module.cpp
}

namespace {

// The CPU output cache (common/memory.h), for torch_sparsefill.memory.
PyObject* output_cache_info(PyObject*, PyObject*) {
  const auto info = sparsefill::output_cache_info();
  return Py_BuildValue("(LLLL)", (long long)info.kept_bytes, (long long)info.limit,
                       (long long)info.hits, (long long)info.misses);
}

PyObject* set_output_cache_limit(PyObject*, PyObject* arg) {
  const long long limit = PyLong_AsLongLong(arg);
  if (limit == -1 && PyErr_Occurred()) return nullptr;
  if (limit < 0) {
    PyErr_Format(PyExc_ValueError, "set_cache_limit(): nbytes must be >= 0, got %lld",
                 limit);
    return nullptr;
  }
  return PyLong_FromLongLong((long long)sparsefill::set_output_cache_limit(limit));
}

PyMethodDef kMemoryMethods[] = {
    {"output_cache_info", output_cache_info, METH_NOARGS,
     "(kept bytes, limit, hits, misses) of the CPU output cache"},
    {"set_output_cache_limit", set_output_cache_limit, METH_O,
     "set the CPU output cache's limit in bytes; returns the previous one"},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

// `import torch_sparsefill._C` loads this library, which registers the ops as
// a side effect; the Python module itself holds the hot path's functions
// (hot/) and the output cache's two (common/memory.h).
extern "C" PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1,
                                          sparsefill::kHotMethods};
  PyObject* module = PyModule_Create(&module_def);
  if (module != nullptr && PyModule_AddFunctions(module, kMemoryMethods) < 0) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}

TORCH_LIBRARY(sparsefill, m) {
  // The ops of tools/codegen/native.yaml and their `<op>_autograd` twins (what
  // an op's Autograd kernel, ops/generated/autograd.cpp, calls when a gradient
  // is tracked: the same schema, one kernel, registered from Python).
  for (const char* schema : sparsefill::kNativeSchemas) m.def(schema);
  // The element-wise ops (elementwise/elementwise.h; tools/codegen/elementwise.yaml).
  for (const char* schema : sparsefill::kElementwiseSchemas) m.def(schema);
}
