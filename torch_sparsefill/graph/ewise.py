"""Element-wise functions of indefinite tensors (RFC.md#indefinite-fill):
GraphBLAS's three modes over two operands (ewise_mult: the intersection of
the patterns; ewise_add: the union, an element present in one operand
passing through; ewise_union: the union, absent elements standing in as
given defaults), and apply / select on one operand.

ewise_add and ewise_union of two 2-D CPU operands, the first CSR (or CSC),
of one float32, float64 or int64 dtype, with a named op and no gradient
tracked, take the C merge of the sorted rows
(``torch.ops.sparsefill.ewise_merge``: two passes over row ranges on
torch's threads); the rest is torch ops over the sorted keys.

Example::

    >>> A = sf.to_sparse(torch.tensor([1., float('nan'), 3.]), fill_value=sf.indefinite)
    >>> B = sf.to_sparse(torch.tensor([float('nan'), 2., 5.]), fill_value=sf.indefinite)
    >>> sf.ewise_add(A, B, "min").to_dense(fill=float('nan'))
    tensor([1., 2., 3.])
"""
from __future__ import annotations

import torch

from ..ops import common as _common
from ..tensor import SparseFillTensor
from .operands import Entries, check_same_shape, entries, lookup, result, result_csr
from .operators import BINARY, NATIVE_OPS, binary

__all__ = ["ewise_mult", "ewise_add", "ewise_union", "apply", "select"]


def _both(A, B, what):
    a, b = entries(A, f"{what}: A"), entries(B, f"{what}: B")
    check_same_shape(a, b, what)
    return a, b


def _union(a: Entries, b: Entries):
    """The union's keys and where a's, b's keys sit in it: a merge of the two
    sorted key lists (b's keys that a has too sit where a's do)."""
    found, pos = lookup(a.keys, b.keys)
    b_only = torch.ones_like(b.keys, dtype=torch.bool).index_fill_(
        0, pos.index_select(0, found.nonzero().squeeze(1)), False)
    only = b_only.nonzero().squeeze(1)
    kbo = b.keys.index_select(0, only)
    at_a = torch.arange(a.keys.shape[0], device=a.keys.device) + torch.searchsorted(kbo, a.keys)
    at_bo = torch.arange(kbo.shape[0], device=a.keys.device) + torch.searchsorted(a.keys, kbo)
    keys = torch.empty(a.keys.shape[0] + kbo.shape[0], dtype=a.keys.dtype, device=a.keys.device)
    keys.index_copy_(0, at_a, a.keys).index_copy_(0, at_bo, kbo)
    both = found.nonzero().squeeze(1)
    at_b = torch.empty_like(b.keys).index_copy_(0, only, at_bo).index_copy_(
        0, pos.index_select(0, both), at_a.index_select(0, both))
    return keys, at_a, at_b


# The element types of the C merge (sparsefill_core.h).
_NATIVE_DTYPES = (torch.float32, torch.float64, torch.int64)


def _native_merge(A, B, op, fn, defaults=None):
    """ewise_add (defaults None) or ewise_union (the pair of defaults) by the
    C merge, or None where the torch route serves: a tracked gradient, an op
    without a C twin, another dtype or device, a result that is not CSR
    (the first operand COO), a shape mismatch (the torch route names it)."""
    if not (isinstance(op, str) and op in NATIVE_OPS):
        return None
    for M in (A, B):
        if not (isinstance(M, SparseFillTensor) and M.is_indefinite() and M.dim() == 2
                and not M.dense_dim() and not M._batch_dim() and M.device.type == "cpu"
                and M.dtype in _NATIVE_DTYPES):
            return None
    if A.dtype != B.dtype or A.shape != B.shape or A.layout == torch.sparse_coo:
        return None
    A, B = (M if M.layout == torch.sparse_csr else M.to_sparse_csr() for M in (A, B))
    given = [d for d in defaults or () if isinstance(d, torch.Tensor)]
    if not _common.untracked(A._sf_values, B._sf_values, *given):
        return None
    dtype = fn(A._sf_values[:0], B._sf_values[:0]).dtype
    if dtype not in (A.dtype, torch.bool):  # e.g. an integer div: torch gives floats
        return None
    if defaults is not None:
        defaults = tuple(_default(d, A.dtype, name) for d, name in
                         zip(defaults, ("a_default", "b_default")))
    crow, col, values = torch.ops.sparsefill.ewise_merge(
        A._sf_crow, A._sf_col, A._sf_values, B._sf_crow, B._sf_col, B._sf_values, A.shape[1],
        NATIVE_OPS[op], *(defaults or (None, None)))
    return result_csr(A.shape, crow, col, values.to(dtype))


def _default(default, dtype, name):
    """ewise_union's default as a 0-d tensor of the operand's dtype."""
    if isinstance(default, torch.Tensor):
        if default.numel() != 1:
            raise ValueError(f"ewise_union: {name} must be a scalar")
        return default.reshape(()).to(dtype)
    return torch.full((), default, dtype=dtype)


def ewise_mult(A, B, op="times"):
    """The element-wise ``op`` where both are present (the intersection of
    the patterns); absent elsewhere.

    Example::

        >>> A = sf.to_sparse(torch.tensor([1., float('nan'), 3.]), fill_value=sf.indefinite)
        >>> sf.ewise_mult(A, A, "plus").values()
        tensor([2., 6.])
    """
    a, b = _both(A, B, "ewise_mult")
    fn = binary(op, "ewise_mult: op")
    found, pos = lookup(a.keys, b.keys)
    sel = found.nonzero().squeeze(1)
    values = fn(a.values[sel], b.values[pos[sel]])
    return result(a.size, a.keys[sel], values, a.layout)


def ewise_add(A, B, op="plus"):
    """The element-wise ``op`` where both are present; where only one is, its
    value passes through unchanged (cast to the result's dtype); absent where
    neither is (the union of the patterns).

    Example::

        >>> A = sf.to_sparse(torch.tensor([1., float('nan'), 3.]), fill_value=sf.indefinite)
        >>> B = sf.to_sparse(torch.tensor([float('nan'), 2., 5.]), fill_value=sf.indefinite)
        >>> sf.ewise_add(A, B, "plus").values()
        tensor([1., 2., 8.])
    """
    fn = binary(op, "ewise_add: op")
    native = _native_merge(A, B, op, fn)
    if native is not None:
        return native
    a, b = _both(A, B, "ewise_add")
    keys, at_a, at_b = _union(a, b)
    found, pos = lookup(a.keys, b.keys)
    sel = found.nonzero().squeeze(1)
    both = fn(a.values.index_select(0, sel), b.values.index_select(0, pos.index_select(0, sel)))
    dtype = torch.promote_types(both.dtype, torch.promote_types(a.values.dtype, b.values.dtype)) \
        if op in ("first", "second") or callable(op) else both.dtype
    values = torch.zeros(keys.shape[0], dtype=dtype, device=keys.device)
    values = values.index_copy(0, at_a, a.values.to(dtype))
    values = values.index_copy(0, at_b, b.values.to(dtype))
    values = values.index_copy(0, at_a.index_select(0, sel), both.to(dtype))
    return result(a.size, keys, values, a.layout)


def ewise_union(A, B, op, a_default, b_default):
    """The element-wise ``op`` over the union of the patterns, an element
    absent from A standing in as ``a_default`` and one absent from B as
    ``b_default`` (with defined fills, this is the binary rule of torch's
    operators on two SparseFillTensors).

    Example::

        >>> A = sf.to_sparse(torch.tensor([1., float('nan'), 3.]), fill_value=sf.indefinite)
        >>> B = sf.to_sparse(torch.tensor([float('nan'), 2., 5.]), fill_value=sf.indefinite)
        >>> sf.ewise_union(A, B, "minus", 0., 10.).values()
        tensor([-9., -2., -2.])
    """
    fn = binary(op, "ewise_union: op")
    native = _native_merge(A, B, op, fn, (a_default, b_default))
    if native is not None:
        return native
    a, b = _both(A, B, "ewise_union")
    keys, at_a, at_b = _union(a, b)

    def spread(e: Entries, at, default, name):
        full = _default(default, e.values.dtype, name).to(keys.device).expand(keys.shape[0])
        return full.index_put((at,), e.values)
    return result(a.size, keys, fn(spread(a, at_a, a_default, "a_default"),
                                   spread(b, at_b, b_default, "b_default")), a.layout)


_UNARY = {"identity": lambda v: v, "ainv": torch.neg, "minv": torch.reciprocal,
          "abs": torch.abs, "lnot": torch.logical_not, "one": torch.ones_like}


def apply(A, op, scalar=None, *, left=False):
    """``op`` on every present element; the pattern stays. ``op``: a unary
    name (identity ainv minv abs lnot one) or callable of one tensor; or,
    with ``scalar``, a binary name or callable with the scalar bound second
    (first with ``left=True``).

    Example::

        >>> A = sf.to_sparse(torch.tensor([1., float('nan'), 3.]), fill_value=sf.indefinite)
        >>> sf.apply(A, "plus", 10.).values()
        tensor([11., 13.])
    """
    a = entries(A, "apply: A")
    if scalar is None:
        fn = _UNARY.get(op, op) if isinstance(op, str) else op
        if not callable(fn):
            raise ValueError(f"apply: op {op!r}: expected a unary name ({', '.join(_UNARY)}), a "
                             f"callable, or a binary op with a scalar")
        values = fn(a.values)
    else:
        fn = binary(op, "apply: op")
        s = torch.as_tensor(scalar, device=a.values.device)
        values = fn(s, a.values) if left else fn(a.values, s)
    if tuple(values.shape) != tuple(a.values.shape):
        raise ValueError("apply: op must give one value per present element")
    return result(a.size, a.keys, values, a.layout)


_STRUCTURAL = {"tril": lambda d, k: d <= k, "triu": lambda d, k: d >= k,
               "diag": lambda d, k: d == k, "offdiag": lambda d, k: d != k}


def select(A, which, k=0):
    """The present elements that ``which`` keeps; the rest absent. ``which``:
    ``"tril"`` / ``"triu"`` / ``"diag"`` / ``"offdiag"`` (relative to the k-th
    diagonal, as torch.tril's ``diagonal``), a comparison name (``"gt"``,
    ``"ge"``, ``"lt"``, ``"le"``, ``"eq"``, ``"ne"``: value op k), or a
    callable of the values returning a bool tensor.

    Example::

        >>> A = sf.to_sparse(torch.tensor([[1., 2.], [3., 4.]]), fill_value=sf.indefinite)
        >>> sf.select(A, "tril").values()
        tensor([1., 3., 4.])
    """
    a = entries(A, "select: A")
    if which in _STRUCTURAL:
        if len(a.size) != 2:
            raise ValueError(f"select: {which!r} needs a 2-D tensor, got shape {a.size}")
        keep = _STRUCTURAL[which](a.cols() - a.rows(), int(k))
    elif which in ("gt", "ge", "lt", "le", "eq", "ne"):
        keep = BINARY[which](a.values, torch.as_tensor(k, device=a.values.device))
    elif callable(which):
        keep = which(a.values)
        if not isinstance(keep, torch.Tensor) or keep.dtype != torch.bool or \
                tuple(keep.shape) != tuple(a.values.shape):
            raise ValueError("select: a predicate must return a bool tensor, one per element")
    else:
        raise ValueError(f"select: which must be tril, triu, diag, offdiag, a comparison name "
                         f"or a callable, got {which!r}")
    sel = keep.nonzero().squeeze(1)
    return result(a.size, a.keys[sel], a.values[sel], a.layout)
