"""The routing of a torch function with an indefinite operand
(RFC.md#indefinite-fill): the one check the routing entry makes
(functions/routing.py calls :func:`call` whenever an argument is an
indefinite SparseFillTensor).

A callable is indefinite-aware when its meaning does not read the fill:
  - the tensor's own methods and copies (components, conversions between
    COO/CSR/CSC, clone, detach, casts, device moves, printing, pickling);
  - an element-wise function of one indefinite tensor and Python numbers
    or 0-d tensors (``A * scale`` with a learned scale: its gradient sums
    over the stored elements): it applies to the stored elements (``A > 0``
    is an indefinite bool tensor); two operands of more dimensions refuse,
    naming sf.ewise_add / ewise_mult /
    ewise_union, which say what the union or intersection of the patterns
    means;
  - ``torch.sparse.softmax`` / ``log_softmax`` and ``torch.sparse.mm(A, x,
    reduce=...)``: torch's own stored-element meaning, computed by torch on
    the components.
Every other callable refuses, naming the graph functions.

Example::

    >>> A = sf.to_sparse(torch.tensor([1., float('nan'), -2.]), fill_value=sf.indefinite)
    >>> (A > 0).values()
    tensor([ True, False])
"""
from __future__ import annotations

import torch

from ..ops import elementwise as _generated_ops
from ..tensor import SparseFillTensor, build
from ..tensor import args as _args
from ..tensor import indefinite as _indefinite
from .elementwise import by_hand as _by_hand

__all__ = ["present", "call", "refuse", "GRAPH_FUNCTIONS"]

T = torch.Tensor

GRAPH_FUNCTIONS = ("sf.mxm, sf.ewise_add, sf.ewise_mult, sf.ewise_union, sf.apply, sf.select, "
                   "sf.reduce, sf.extract, sf.assign, sf.kron")

# The tensor's own methods whose meaning reads no fill (those that would,
# to_dense and eliminate_fill, answer for themselves).
_AWARE_METHODS = frozenset([
    T.to_dense, T.coalesce, T.is_coalesced, T.indices, T.values, T._indices, T._values,
    T.crow_indices, T.col_indices, T.ccol_indices, T.row_indices, T.sparse_dim, T.dense_dim,
    T._nnz, T.to_sparse, T.to_sparse_coo, T.to_sparse_csr, T.to_sparse_csc, T.to_sparse_bsr,
    T.to_sparse_bsc, T.clone, torch.clone, T.detach, torch.detach, T.to, T.requires_grad_,
    T.__repr__, T.cpu, T.cuda, T.__hash__, T.__format__, T.__reduce_ex__, T.__deepcopy__,
    T.float, T.double, T.half, T.bfloat16, T.bool, T.int, T.long, T.short, T.char, T.byte,
    T.cfloat, T.cdouble, torch.is_same_size, T.is_same_size,
])
# The table's element-wise functions and those routed by hand (other / A,
# float_power, ldexp), in-place forms aside.
_ELEMENTWISE = frozenset(fn for fn, _, _ in _generated_ops.ROUTES) | frozenset(
    fn for fn in _by_hand.ROUTES if not _args.in_place(fn))
_STORED_MEANING = frozenset([torch.sparse.softmax, torch.sparse.log_softmax, torch.sparse.mm])


def present(args, kwargs) -> bool:
    """Whether an argument (or an element of a list argument) is an
    indefinite SparseFillTensor."""
    for a in args:
        if getattr(a, "_sf_indefinite", False) is True:
            return True
        if isinstance(a, (list, tuple)) and any(_indefinite.is_indefinite(x) for x in a):
            return True
    return any(_indefinite.is_indefinite(v) for v in kwargs.values())


def refuse(func, why=""):
    """Raise the refusal of `func` (a torch callable, or its name) with an
    indefinite operand; `why` (from ": ...") says more.

    Example::

        >>> refuse(torch.sum)
        Traceback (most recent call last):
        NotImplementedError: torch_sparsefill: torch.sum is not defined on a tensor whose ...
    """
    raise NotImplementedError(
        f"torch_sparsefill: {_args.name(func)} is not defined on a tensor whose fill is "
        f"sf.indefinite (its unspecified elements have no value){why}; the graph functions "
        f"({GRAPH_FUNCTIONS}) say what absent elements mean, or A.to_dense(fill=v) gives a "
        f"dense tensor")


def call(func, handler, args, kwargs):
    """The result of `func` with an indefinite operand (`handler`: the
    routing table's own, for the aware methods), or its refusal."""
    if func in _AWARE_METHODS:
        return handler(*args, **kwargs)
    if func in _ELEMENTWISE:
        return _on_stored(func, args, kwargs)
    if func in _STORED_MEANING:
        return _torch_meaning(func, args, kwargs)
    refuse(func)


def _scalar(a) -> bool:
    """A number, or a 0-d strided tensor (a learned scale, `torch.tensor(2.)`):
    one value, broadcast to every element (it promotes with the stored values
    as with the dense tensor: both have dimensions)."""
    if _args.is_number(a):
        return True
    return (isinstance(a, torch.Tensor) and not isinstance(a, SparseFillTensor)
            and a.dim() == 0 and a.layout == torch.strided)


def _on_stored(func, args, kwargs):
    """An element-wise function of one indefinite tensor and numbers (or 0-d
    tensors, differentiable), on its stored values: same pattern, indefinite."""
    tensors = [a for a in args if isinstance(a, torch.Tensor) and not _scalar(a)]
    tensors += [v for v in kwargs.values() if isinstance(v, torch.Tensor) and not _scalar(v)]
    if len(tensors) != 1 or kwargs.get("inplace") or "out" in kwargs:
        refuse(func, ": an element-wise function applies to one indefinite tensor and "
                      "numbers (two tensors: sf.ewise_add / ewise_mult / ewise_union say "
                      "which elements the result has; in place and out= are not supported)")
    (A,) = tensors
    if A.dense_dim() or A._batch_dim() or not all(
            _scalar(a) or isinstance(a, (str, type(None), torch.dtype)) or a is A
            for a in list(args) + list(kwargs.values())):
        refuse(func, ": on stored elements, only without a dense part and with number "
                      "arguments")
    src = A if A.layout != torch.sparse_coo else A._coalesced()
    values = src._sf_values
    out = func(*[values if a is A else a for a in args],
               **{k: values if v is A else v for k, v in kwargs.items()})
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != tuple(values.shape):
        refuse(func, ": its result is not one value per stored element")
    return _indefinite.mark(src._with(out, _indefinite.placeholder(out.dtype, out.device)))


def _torch_meaning(func, args, kwargs):
    """torch.sparse.softmax / log_softmax / mm(reduce=) as torch computes them:
    over the stored elements only, on a torch sparse tensor of the same
    components (differentiable through the values)."""
    if func is torch.sparse.mm:
        a, b = (list(args) + [kwargs.get("mat1"), kwargs.get("mat2")])[:2] if len(args) >= 2 \
            else (kwargs.get("mat1", args[0] if args else None), kwargs.get("mat2"))
        if not _indefinite.is_indefinite(a) or isinstance(b, SparseFillTensor):
            refuse(func, ": torch.sparse.mm takes the indefinite tensor first and a strided "
                          "one second")
        rest = list(args[2:])
        reduce = kwargs.get("reduce", rest[0] if rest else "sum")
        if reduce == "sum":
            refuse(func, ": reduce='sum' would treat absent elements as 0 (sf.mxm(A, x, "
                          "'plus_times') sums the present terms)")
        torch_a = _as_torch(a).to_sparse_csr()
        return torch.sparse.mm(torch_a, b, reduce)
    A = args[0] if args else kwargs.get("input")
    rest = {**dict(zip(("dim", "dtype"), args[1:])), **{k: v for k, v in kwargs.items()
                                                        if k != "input"}}
    if not _indefinite.is_indefinite(A) or A.dense_dim():
        refuse(func, ": only of one indefinite tensor without a dense part")
    src = A.to_sparse_coo()._coalesced()
    out = func(_as_torch(src), **rest).coalesce()
    return _indefinite.mark(build(torch.sparse_coo, src.shape, out.values(),
                                  _indefinite.placeholder(out.dtype, out.device),
                                  indices=src._sf_indices))


def _as_torch(A) -> torch.Tensor:
    """A torch sparse COO tensor of A's stored elements (coalesced)."""
    A = A.to_sparse_coo()._coalesced()
    return torch.sparse_coo_tensor(A._sf_indices, A._sf_values, A.shape, is_coalesced=True,
                                   check_invariants=False)
