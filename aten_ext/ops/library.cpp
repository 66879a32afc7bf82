// ops/library.cpp -- the extension module and the operator library: every
// schema of torch.ops.sparsefill, in one place. The ops work on component
// tensors (indices, values, fill); what each op does is in its family's
// header (structure.h, products.h, bsr.h, reductions.h, elementwise.h), its kernels
// in the folder named by their dispatch key (cpu/, cuda/, composite/,
// autograd/). The element-wise schemas come from tools/codegen, as a list.
#include <Python.h>

#include <torch/library.h>

#include "ops/generated/elementwise_schemas.h"

namespace sparsefill {
extern PyMethodDef kHotMethods[];  // hot.cpp
}

// `import torch_sparsefill._C` loads this library, which registers the ops as
// a side effect; the Python module itself holds only the hot path's
// functions (hot.cpp).
extern "C" PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1,
                                          sparsefill::kHotMethods};
  return PyModule_Create(&module_def);
}

TORCH_LIBRARY(sparsefill, m) {
  // ---- structure (structure.h) ----
  m.def("coo_check(Tensor indices, int[] size) -> Tensor");
  m.def("csr_check(Tensor crow_indices, Tensor col_indices, int[] size) -> ()");
  m.def("coo_linearize(Tensor indices, int[] size) -> Tensor");
  m.def("coo_delinearize(Tensor linear, int[] size) -> Tensor");
  m.def("coalesce_plan(Tensor indices, int[] size) -> (Tensor indices, Tensor segment)");
  m.def("coo_coalesce(Tensor indices, Tensor values, int[] size) -> (Tensor indices, Tensor values)");
  m.def("rows_from_crow(Tensor crow_indices) -> Tensor");
  m.def("crow_from_rows(Tensor rows, int nrows) -> Tensor");
  m.def("union_plan(Tensor indices_a, Tensor indices_b, int[] size) -> (Tensor indices, Tensor src_a, Tensor src_b)");
  m.def("union_values(Tensor indices_a, Tensor values_a, Tensor fill_a, Tensor indices_b, "
        "Tensor values_b, Tensor fill_b, int[] size) -> (Tensor indices, Tensor a, Tensor b)");
  m.def("index_select_plan(Tensor indices, Tensor index, int dim, int[] size) -> "
        "(Tensor indices, Tensor src)");
  m.def("gather_with_fill(Tensor values, Tensor fill, Tensor src) -> Tensor");
  m.def("to_dense(Tensor indices, Tensor values, Tensor fill, int[] size) -> Tensor");
  m.def("from_dense(Tensor self, Tensor fill, int sparse_dim) -> (Tensor indices, Tensor values, Tensor fill)");
  m.def("eliminate_fill(Tensor indices, Tensor values, Tensor fill) -> (Tensor indices, Tensor values)");

  // ---- matrix products (products.h) ----
  m.def("spmm(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor fill, Tensor other, "
        "int ncols) -> Tensor");
  m.def("dense_spmm(Tensor other, Tensor crow_indices, Tensor col_indices, Tensor values, "
        "Tensor fill, int ncols) -> Tensor");
  m.def("sddmm(Tensor crow_indices, Tensor col_indices, int ncols, Tensor x, Tensor y) -> Tensor");
  m.def("sparse_attention(Tensor crow_indices, Tensor col_indices, Tensor? bias, Tensor query, "
        "Tensor key, Tensor value, float scale) -> (Tensor out, Tensor lse)");
  m.def("sparse_attention_backward(Tensor crow_indices, Tensor col_indices, Tensor? bias, "
        "Tensor query, Tensor key, Tensor value, Tensor lse, Tensor grad_out, Tensor? grad_lse, "
        "float scale) -> (Tensor grad_query, Tensor grad_key, Tensor grad_value, "
        "Tensor grad_scores)");
  m.def("csr_transpose(Tensor crow_indices, Tensor col_indices, int ncols) -> "
        "(Tensor crow_indices, Tensor col_indices, Tensor perm)");
  m.def("spgemm(Tensor crow_a, Tensor col_a, Tensor values_a, Tensor crow_b, Tensor col_b, "
        "Tensor values_b, int n) -> (Tensor crow_indices, Tensor col_indices, Tensor values)");
  m.def("sparse_mm_dense(Tensor crow_a, Tensor col_a, Tensor values_a, Tensor fill_a, "
        "Tensor crow_b, Tensor col_b, Tensor values_b, Tensor fill_b, int k, int n) -> Tensor");

  // ---- BSR products (bsr.h) ----
  m.def("bsr_spmm(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor fill, "
        "Tensor other, int ncols) -> Tensor");

  // ---- softmax and reductions (reductions.h) ----
  m.def("slice_plan(Tensor indices, int[] size, int[] dims, bool compact) -> (Tensor seg_ptr, Tensor perm, Tensor kept)");
  m.def("seg_reduce(Tensor values, Tensor fill, Tensor seg_ptr, int n, str reduce) -> Tensor");
  m.def("seg_max(Tensor values, Tensor fill, Tensor seg_ptr, Tensor? coord, int n, bool is_min, bool split_ties) -> (Tensor out, Tensor winner, Tensor index)");
  m.def("seg_softmax(Tensor values, Tensor fill, Tensor seg_ptr, int n, bool log) -> (Tensor values, Tensor fill)");
  m.def("seg_softmax_backward(Tensor out, Tensor out_fill, Tensor grad, Tensor grad_fill, Tensor seg_ptr, int n, bool log) -> (Tensor grad_values, Tensor grad_fill)");
  m.def("slot_reduce(Tensor values, Tensor slot, Tensor fill, int nslots, int n, str reduce) -> (Tensor out, Tensor count)");
  m.def("slot_softmax(Tensor values, Tensor slot, Tensor fill, int nslots, int n, bool log) -> (Tensor values, Tensor fill)");
  m.def("slot_softmax_backward(Tensor out, Tensor out_fill, Tensor grad, Tensor grad_fill, Tensor slot, int n, bool log) -> (Tensor grad_values, Tensor grad_fill)");

  // ---- the ops with a backward formula, recording it (ops/autograd/) ----
  // What an op's Autograd kernel calls when a gradient is tracked: the same
  // schema, one kernel (CompositeImplicitAutograd, registered by
  // torch_sparsefill/_autograd.py), never in a traced graph.
  m.def("spmm_autograd(Tensor crow_indices, Tensor col_indices, Tensor values, Tensor fill, "
        "Tensor other, int ncols) -> Tensor");
  m.def("sddmm_autograd(Tensor crow_indices, Tensor col_indices, int ncols, Tensor x, "
        "Tensor y) -> Tensor");
  m.def("spgemm_autograd(Tensor crow_a, Tensor col_a, Tensor values_a, Tensor crow_b, "
        "Tensor col_b, Tensor values_b, int n) -> (Tensor crow_indices, Tensor col_indices, "
        "Tensor values)");
  m.def("seg_reduce_autograd(Tensor values, Tensor fill, Tensor seg_ptr, int n, str reduce) "
        "-> Tensor");
  m.def("seg_max_autograd(Tensor values, Tensor fill, Tensor seg_ptr, Tensor? coord, int n, "
        "bool is_min, bool split_ties) -> (Tensor out, Tensor winner, Tensor index)");
  m.def("seg_softmax_autograd(Tensor values, Tensor fill, Tensor seg_ptr, int n, bool log) "
        "-> (Tensor values, Tensor fill)");
  m.def("slot_reduce_autograd(Tensor values, Tensor slot, Tensor fill, int nslots, int n, "
        "str reduce) -> (Tensor out, Tensor count)");
  m.def("slot_softmax_autograd(Tensor values, Tensor slot, Tensor fill, int nslots, int n, "
        "bool log) -> (Tensor values, Tensor fill)");
  m.def("from_dense_autograd(Tensor self, Tensor fill, int sparse_dim) -> (Tensor indices, "
        "Tensor values, Tensor fill)");

  // ---- element-wise (elementwise.h; generated from tools/codegen/elementwise.yaml) ----
  for (const char* schema : sparsefill::kElementwiseSchemas) m.def(schema);
}
