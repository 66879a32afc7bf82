// ops/library.cpp -- the extension module and the operator library
// torch.ops.sparsefill: every schema, from the two lists of tools/codegen
// (native.yaml, elementwise.yaml) through ops/generated/. The ops work on
// component tensors (indices, values, fill); what each computes is its entry
// in the list, its kernels live in ops/<family>/ and are registered by
// ops/generated/registrations.cpp.
#include <Python.h>

#include <torch/library.h>

#include "ops/generated/elementwise_schemas.h"
#include "ops/generated/schemas.h"

namespace sparsefill {
extern PyMethodDef kHotMethods[];  // hot/module.cpp
}

// `import torch_sparsefill._C` loads this library, which registers the ops as
// a side effect; the Python module itself holds only the hot path's
// functions (hot/).
extern "C" PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1,
                                          sparsefill::kHotMethods};
  return PyModule_Create(&module_def);
}

TORCH_LIBRARY(sparsefill, m) {
  // The ops of tools/codegen/native.yaml and their `<op>_autograd` twins (what
  // an op's Autograd kernel, ops/generated/autograd.cpp, calls when a gradient
  // is tracked: the same schema, one kernel, registered from Python).
  for (const char* schema : sparsefill::kNativeSchemas) m.def(schema);
  // The element-wise ops (elementwise/elementwise.h; tools/codegen/elementwise.yaml).
  for (const char* schema : sparsefill::kElementwiseSchemas) m.def(schema);
}
