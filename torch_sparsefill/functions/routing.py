"""Which torch function does what on a SparseFillTensor: one table, assembled
here from what each family declares.

`torch_function` is the __torch_function__ of SparseFillTensor (wired in
torch_sparsefill/__init__.py). It looks the callable up in TABLE, whose entries come from
  - the methods SparseFillTensor implements itself (to_dense, coalesce,
    clone, casts, ...) and the metadata queries the wrapper answers by
    itself (shape, dtype, device, dim, ...), declared here;
  - each family module's ROUTES (_FAMILIES): elementwise/ (the generated
    ops and their in-place forms), shape/ (reshape, indexing, concat),
    linalg/ (products, einsum, lowrank, torch.sparse.mm with reduce=,
    smm/hspmm/sspaddmm), reductions/ (reductions, softmax), methods/
    (copy_, comparisons, conversions; *_like, new_*; zero_, t_, resizes),
    nn (what nn and optim call), attention (sampled products, SDPA,
    dropout).
A routed call with a SparseFillTensor `out=` writes its result there
(copy_); under an enabled torch.autocast it runs through autocast.py.
A callable claimed twice is an error at import. A family's handler sees
only COO and CSR tensors: CSC, BSR and BSC operands go through layouts.py
(RFC.md#through-csr). Anything not in TABLE raises
NotImplementedError naming the function: no torch function ever computes on
a SparseFillTensor as if its fill were 0 (RFC.md#errors).
`torch_dispatch` (below autograd) refuses every aten op but prim.layout.
"""
from __future__ import annotations

import torch

from ..creation import serialization as _serialization
from ..tensor import args as _args
from ..tensor import edits as _edits
from . import attention as _attention
from . import autocast as _autocast
from . import components as _components
from . import decompositions as _decompositions
from . import empty_results as _empty_results
from . import indefinite as _indefinite
from . import layouts as _layouts
from . import nn as _nn
from .elementwise import fast as _elementwise_fast
from .elementwise import handlers as _elementwise
from .indexing import reads as _indexing_reads
from .indexing import writes as _indexing_writes
from .linalg import einsum as _einsum
from .linalg import lowrank as _lowrank
from .linalg import products as _products
from .linalg import sparse_mm as _sparse_mm
from .linalg import sparse_results as _sparse_results
from .methods import copy as _copy
from .methods import inplace as _inplace
from .methods import like as _like
from .order import counting as _order_counting
from .order import select as _order_select
from .order import sort as _order_sort
from .reductions import handlers as _reductions
from .scans import cumulative as _scans_cumulative
from .scans import differences as _scans_differences
from .reductions import softmax as _softmax
from .shape import concat as _concat
from .shape import copies as _shape_copies
from .shape import moves as _shape_moves
from .shape import indexing as _indexing
from .shape import reshape as _reshape
from ..tensor import SparseFillTensor

T = torch.Tensor

__all__: list = []

# ---- the methods SparseFillTensor implements itself -----------------------------

_METHOD_NAMES = [
    "to_dense", "coalesce", "is_coalesced", "indices", "values", "_indices", "_values",
    "crow_indices", "col_indices", "sparse_dim", "dense_dim", "_nnz", "to_sparse",
    "to_sparse_coo", "to_sparse_csr", "clone", "detach", "to", "requires_grad_", "__repr__",
    "ccol_indices", "row_indices", "to_sparse_csc", "to_sparse_bsr", "to_sparse_bsc",
]
_CASTS = {"float": torch.float32, "double": torch.float64, "half": torch.float16,
          "bfloat16": torch.bfloat16, "bool": torch.bool, "int": torch.int32,
          "long": torch.int64, "short": torch.int16, "char": torch.int8, "byte": torch.uint8,
          "cfloat": torch.complex64, "cdouble": torch.complex128}


def _cast(dtype):
    return lambda self, memory_format=None: self.to(dtype)


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    """A.cuda(device): every component on that GPU (the current one by default)."""
    if isinstance(device, int):
        device = torch.device("cuda", device)
    return self.to("cuda" if device is None else device, non_blocking=non_blocking)


def _methods() -> dict:
    table = {getattr(T, n): getattr(SparseFillTensor, n) for n in _METHOD_NAMES}
    # A neighbour library reading the components of a tensor whose fill is
    # not 0 is refused (functions/components.py).
    table.update({getattr(T, n): _components.guarded(n, getattr(SparseFillTensor, n))
                  for n in _components.ACCESSORS})
    table.update({getattr(T, n): _cast(d) for n, d in _CASTS.items()})
    table.update({
        torch.clone: SparseFillTensor.clone,
        torch.detach: SparseFillTensor.detach,
        T.cpu: lambda self, memory_format=None: self.to("cpu"),
        T.cuda: _cuda,
        # x.where(condition, y) is torch.where(condition, x, y): the generated where op.
        T.where: lambda self, condition, other: torch.where(condition, self, other),
        T.__hash__: lambda self: id(self),
        T.__format__: lambda self, spec: format(repr(self), spec),
        T.__reduce_ex__: _serialization.reduce_ex,
        T.__deepcopy__: _serialization.deepcopy,
    })
    return table


# ---- metadata the wrapper answers itself ------------------------------------------

_PASSTHROUGH = [
    T.size, T.dim, T.ndimension, T.numel, T.nelement, T.element_size, T.is_floating_point,
    T.is_complex, T.get_device, T.__len__,
    T.shape.__get__, T.dtype.__get__, T.device.__get__, T.ndim.__get__, T.layout.__get__,
    T.is_sparse_csr.__get__, T.is_cuda.__get__, T.is_cpu.__get__,
    T.is_meta.__get__, T.is_quantized.__get__, T.is_mkldnn.__get__, T.is_nested.__get__,
    T.itemsize.__get__, T._version.__get__,
    # Device queries (torch.testing asks is_mps first) and inference mode:
    # as for the dense tensor, the wrapper's own answer.
    T.is_mps.__get__, T.is_xpu.__get__, T.is_ipu.__get__, T.is_maia.__get__, T.is_mtia.__get__,
    T.is_vulkan.__get__, T.is_xla.__get__, T.is_inference,
    # The function forms (torch.is_floating_point(A), ...) answer as the methods.
    torch.is_floating_point, torch.is_complex, torch.is_signed, T.is_signed,
]


def _is_same_size(self, other):
    """torch.is_same_size(A, B): whether the shapes are equal."""
    return tuple(self.shape) == tuple(other.shape)


def _is_nonzero(self):
    """torch.is_nonzero(A): the one element's truth, read from the dense form."""
    if self.numel() != 1:
        raise RuntimeError(f"Boolean value of Tensor with "
                           f"{'no values' if self.numel() == 0 else 'more than one value'} "
                           f"is ambiguous")
    return torch.is_nonzero(self.to_dense())


# torch's own answer with subclass routing off, in C: a metadata query
# (A.dim(), A.shape, ...) costs no Python frame of ours beyond the lookup.
_disabled_impl = torch._C._disabled_torch_function_impl


def _passthrough(func):
    def answer(*args, **kwargs):
        return _disabled_impl(func, (), args, kwargs)
    return answer


# torch's tracers (FakeTensor) ask _is_view first: refused with the reason
# (compile/dynamo.py says why they cannot take a SparseFillTensor).
def _refuse_tracing(self, *args, **kwargs):
    raise NotImplementedError(
        "torch_sparsefill: torch.Tensor._is_view is not implemented for SparseFillTensor: "
        "torch's tracers (FakeTensor: torch.export, torch.compile(fullgraph=True)) ask it to "
        "copy a tensor, and on torch 2.13 they copy a sparse layout as a plain torch sparse "
        "tensor, losing the fill (docs/design.md#why-fullgraph-is-refused); export non-strict inside "
        "torch_sparsefill.exportable(), or compile a function of the components "
        "(A.crow_indices(), A.col_indices(), A.values(), A.fill_value())")


# ---- the table -----------------------------------------------------------------------

def _assemble(*families) -> dict:
    table: dict = {}
    for family, routes in families:
        for func, handler in routes.items():
            if func in table:
                raise RuntimeError(f"torch_sparsefill internal: {_args.name(func)} is routed by "
                                   f"both {table[func][0]} and {family}")
            table[func] = (family, handler)
    return {func: handler for func, (family, handler) in table.items()}


_FAMILIES = (
    ("elementwise", _elementwise.ROUTES),
    ("shape.reshape", _reshape.ROUTES),
    ("shape.indexing", _indexing.ROUTES),
    ("shape.concat", _concat.ROUTES),
    ("linalg.products", _products.ROUTES),
    ("reductions", _reductions.ROUTES),
    ("reductions.softmax", _softmax.ROUTES),
    ("methods.copy", _copy.ROUTES),
    ("nn", _nn.ROUTES),
    ("methods.like", _like.ROUTES),
    ("methods.inplace", _inplace.ROUTES),
    ("linalg.sparse_results", _sparse_results.ROUTES),
    ("linalg.lowrank", _lowrank.ROUTES),
    ("attention", _attention.ROUTES),
    ("linalg.sparse_mm", _sparse_mm.ROUTES),
    ("linalg.einsum", _einsum.ROUTES),
    ("order.sort", _order_sort.ROUTES),
    ("order.select", _order_select.ROUTES),
    ("order.counting", _order_counting.ROUTES),
    ("scans.cumulative", _scans_cumulative.ROUTES),
    ("scans.differences", _scans_differences.ROUTES),
    ("indexing.reads", _indexing_reads.ROUTES),
    ("indexing.writes", _indexing_writes.ROUTES),
    ("shape.moves", _shape_moves.ROUTES),
    ("shape.copies", _shape_copies.ROUTES),
    ("tracing", {T._is_view: _refuse_tracing}),
)
TABLE = _assemble(
    ("the tensor's methods", _methods()),
    ("metadata", {func: _passthrough(func) for func in _PASSTHROUGH}),
    ("metadata", {torch.is_nonzero: _is_nonzero, T.is_nonzero: _is_nonzero,
                  torch.is_same_size: _is_same_size, T.is_same_size: _is_same_size}),
    *_FAMILIES)


def extend(family: str, routes: dict) -> None:
    """Add the routes of a layer above this one (distributed/: torch's own
    collectives), which the package's __init__ wires in; a callable routed
    twice is refused as in the table above."""
    twice = [func for func in routes if func in TABLE]
    if twice:
        raise RuntimeError(f"torch_sparsefill internal: {_args.name(twice[0])} is routed by "
                           f"both the table and {family}")
    TABLE.update(routes)


# The families' callables: those whose CSC/BSR/BSC operands _layouts converts.
_FAMILY_FUNCS = frozenset(func for _, routes in _FAMILIES for func in routes)
# Answered before any other check (no out=, layout or autocast rule applies
# to a metadata query).
_METADATA = frozenset(_PASSTHROUGH)


# The hot path (docs/design.md#hot-path): per callable, a family's fast handler
# of plain operands (tensor/plain.py's is_plain), tried before TABLE's handler; a
# family may only speed up a callable it routes.
_FAST_FAMILIES = ((_elementwise_fast.FAST, _elementwise.ROUTES), (_reductions.FAST, _reductions.ROUTES),
                  (_indexing.FAST, _indexing.ROUTES), (_products.FAST, _products.ROUTES))
FAST = {f: fast for table, _ in _FAST_FAMILIES for f, fast in table.items()}
assert all(TABLE[f] is routes[f] for table, routes in _FAST_FAMILIES for f in table), \
    "internal: a fast handler for a callable its family does not route"


# Callables that read a tensor's elements out as plain data: what to call instead.
_AS_DATA = {T.tolist: "A.to_dense().tolist()", T.numpy: "A.to_dense().numpy()",
            T.item: "A.to_dense().item()", T.__array__: "np.asarray(A.to_dense())",
            T.__bool__: "bool(A.to_dense())", T.__float__: "float(A.to_dense())",
            T.__int__: "int(A.to_dense())", T.__index__: "operator.index(A.to_dense())"}


_NUMPY_NAMES = {"axis": "dim", "keepdims": "keepdim"}


def torch_function(cls, func, types, args=(), kwargs=None):
    """SparseFillTensor.__torch_function__ (a classmethod): the routed
    handler, or a refusal that says what is unsupported and what to call
    instead.

    The hot path: a fast handler (FAST) for a call without keywords
    outside autocast, which answers None where its operands are not plain;
    then one set and one dict lookup, then the handler; every other rule is
    a cheap test that fails fast."""
    if not kwargs:
        fast = FAST.get(func)
        if fast is not None and not _autocast.enabled():
            out = fast(args)
            if out is not None:
                return out
    if kwargs is None:
        kwargs = {}
    elif "axis" in kwargs or "keepdims" in kwargs:
        # torch's argument parser takes numpy's names wherever it takes dim
        # and keepdim: so do the routes.
        kwargs = {_NUMPY_NAMES.get(k, k): v for k, v in kwargs.items()}
    if func in _METADATA:
        return _disabled_impl(func, types, args, kwargs)
    if _indefinite.present(args, kwargs):  # the fill has no value: aware routes only
        return _indefinite.call(func, TABLE.get(func), args, kwargs)
    handler = TABLE.get(func)
    if handler is not None:
        # Before any handler reads a pattern: an index component edited in
        # place is checked again (tensor/edits.py).
        _edits.check_operands(SparseFillTensor, args, kwargs)
        if kwargs and isinstance(kwargs.get("out"), SparseFillTensor):
            handler = _copy.writing_out(handler)
        if func in _FAMILY_FUNCS and _layouts.needs(func, args, kwargs):
            family_handler = handler

            def handler(*args, **kwargs):
                return _layouts.call(func, family_handler, args, kwargs)
        if _autocast.enabled():
            return _autocast.call(func, handler, args, kwargs)
        return _empty_results.in_graph(func, handler(*args, **kwargs), args, kwargs,
                                       _like.ROUTES)
    if func in _AS_DATA:
        raise NotImplementedError(
            f"torch_sparsefill: {_args.name(func)} is not supported on a SparseFillTensor "
            f"(it would read the stored components, not the elements); call it on the dense "
            f"tensor: {_AS_DATA[func]}")
    library = _components.reading_library(1)
    if library is not None:  # a neighbour library taking the tensor apart
        raise NotImplementedError(_components.library_refusal(
            library, f"called {_args.name(func)}, which is not implemented for SparseFillTensor"))
    # No route: torch's own decomposition, the dense route, or a refusal by name.
    return _decompositions.call(func, args, kwargs)


def torch_dispatch(func, types, args, kwargs):
    """SparseFillTensor.__torch_dispatch__: refuses every aten op but prim.layout."""
    if func is torch.ops.prim.layout.default:
        return args[0]._sf_layout
    # Ops reach here only past __torch_function__: an op torch calls below
    # it, or a torch.func transform that wrapped the tensor itself (vmap's
    # _add_batch_dim, grad's _wrap_for_grad take any tensor; RFC.md#vmap).
    # Neither leaves a trace to tell them apart here, so the message names both.
    raise NotImplementedError(
        f"torch_sparsefill: {func} reached a SparseFillTensor below autograd; it has no "
        f"fill-value semantics yet (call .to_dense() for a dense computation). If a "
        f"torch.func transform (vmap, grad, jvp, ...) was given a SparseFillTensor as an "
        f"argument: it wraps it as a plain tensor; for vmap over its slices along dim 0 use "
        f"sf.vmap(f)(A) (or torch.func.vmap inside `with sf.vmappable():`), for the other "
        f"transforms pass its components instead (values, fill) and build the "
        f"SparseFillTensor inside the function")
