"""torch.func.vmap over SparseFillTensor arguments (RFC.md#vmap).

vmap takes its arguments apart with torch's pytree and batches each tensor
leaf itself (C++ `_add_batch_dim`, seen by no `__torch_function__`); a
SparseFillTensor is one leaf there, and its batched form reaches our ops
below autograd, where the fill has no meaning (refused, functions/routing.py). Inside
`vmappable()` (or through `sf.vmap`), torch's pytree sees a SparseFillTensor
as a node whose children are the components **of its slices along dim 0,
stacked** (`_split`: a batched CSR/CSC's own per-batch components; any other
tensor through a batched CSR, whose padding gives every slice one nse, then
each slice's COO indices), so vmap batches the components and
`_unflatten` rebuilds each slice as a SparseFillTensor of batched components;
our routing runs on it. A SparseFillTensor returned per slice flattens into
its own components (nothing is read from batched data), vmap stacks them,
and `_unflatten` restacks them into one tensor with a leading batch dim.

The rule that makes one flattening serve both ways: the children's rank
above the slice's (the context) is the number of leading dims to stack
(0: a slice; 1: the stacked tensor; 2: a per-slice output vmap stacked).

Scoped, never global, and counted: the registration lasts while any thread
is inside the context (threads may enter and leave in any order); while it
lasts, every pytree user sees the node (documented in RFC.md#vmap).
"""
from __future__ import annotations

import contextlib
import functools

import torch
from torch.utils import _pytree as pytree

from . import export as _export
from ..tensor import fill as _fill
from ..tensor import SparseFillTensor, build

__all__ = ["vmappable", "vmap"]

_ops = torch.ops.sparsefill
_functorch = torch._C._functorch
_COO = torch.sparse_coo
_NAMES_COO = ("_sf_indices", "_sf_values", "_sf_fill")
_NAMES_COMPRESSED = ("_sf_crow", "_sf_col", "_sf_values", "_sf_fill")


def _wrapped(A) -> bool:
    """Whether a component is a torch.func transform's tensor (batched or
    grad-tracking): its data cannot be read, so A is not split."""
    return any(_functorch.is_functorch_wrapped_tensor(getattr(A, n))
               for n in A._flatten_components()[0])


def _slice_fill(fill, b, slice_ndim, slice_dense_dim):
    """A's fill as the stacked fills of its b slices along dim 0, each in
    the form a slice stores (_fill.canonical, RFC.md#per-slice-fills)."""
    if not _fill.is_per_slice(fill, slice_dense_dim):
        return fill.expand((b,) + tuple(fill.shape))
    inner = fill.expand((b,) + tuple(fill.shape[1:]))  # a per-slice fill of each slice
    slice_sparse = slice_ndim - slice_dense_dim
    if any(s != 1 for s in inner.shape[1:1 + slice_sparse]):
        return inner
    shape = list(inner.shape[1 + slice_sparse:])
    while shape and shape[0] == 1:
        shape.pop(0)
    return inner.reshape([b] + shape)


def _batches_are_slices(A) -> bool:
    """Whether A's slices along dim 0 are its batches, taken from the
    components as they are (no data read): batched CSR and CSC. A batched
    BSR/BSC is split through COO instead: an op on a BSR slice converts it
    to CSR and back, and blocks from a pattern are a data-dependent count,
    which vmap cannot batch."""
    return bool(A._batch_dim()) and A._sf_blocksize is None


def _split(A):
    """(children, context) of A's slices along dim 0 stacked, or None when
    A has no slices that are SparseFillTensors (fewer than two sparse dims,
    counting batch dims)."""
    b, size = A.shape[0], tuple(A.shape[1:])
    dense_dim = A.dense_dim()
    if _batches_are_slices(A):
        fill = _slice_fill(A._sf_fill, b, len(size), dense_dim)
        children = [A._sf_crow, A._sf_col, A._sf_values, fill]
        context = (_NAMES_COMPRESSED, A.layout, size, True, True, A._sf_blocksize,
                   A._sf_values.dim() - 1, None)
        return children, context
    coo = A.to_sparse_coo().coalesce()
    sparse_dim = coo.sparse_dim()
    if sparse_dim < 2:
        return None
    # Through a batched CSR: its padding stores fill-valued elements so that
    # every batch (every slice's rows) holds one nse (RFC.md#batched-compressed); its COO
    # form then lists the slices one after another, nse_slice each.
    lifted = coo if sparse_dim >= 3 else coo.unsqueeze(1)
    padded = lifted.to_sparse_csr().to_sparse_coo()
    indices, values = padded._sf_indices, padded._sf_values
    rows = indices[1:] if sparse_dim >= 3 else indices[2:]
    per_slice = values.shape[0] // b if b else 0
    k = sparse_dim - 1
    children = [rows.reshape(k, b, per_slice).transpose(0, 1),
                values.reshape((b, per_slice) + tuple(values.shape[1:])),
                _slice_fill(A._sf_fill, b, len(size), dense_dim)]
    context = (_NAMES_COO, _COO, size, True, True, None, values.dim(),
               None if A.layout == _COO else (A.layout, A._sf_blocksize))
    return children, context


def _flatten(A):
    # A batched CSR/CSC's batches are read off its components' shapes;
    # other slices only from plain data (not a transform's).
    if _batches_are_slices(A) or (A.dim() and not _wrapped(A)):
        split = _split(A)
        if split is not None:
            return split
    # A tensor of a transform's components (a slice, an op's result under
    # vmap): its own components, whose batch vmap holds.
    names, (layout, size, coalesced, flag, blocksize) = A._flatten_components()
    context = (tuple(names), layout, size, coalesced, flag, blocksize,
               A._sf_values.dim(), None)
    return [getattr(A, n) for n in names], context


def _flatten_with_keys(A):
    children, context = _flatten(A)
    return [(pytree.GetAttrKey(n), t) for n, t in zip(context[0], children)], context


def _refuse(why):
    raise ValueError(
        f"torch_sparsefill: vmap over a SparseFillTensor: {why}. A SparseFillTensor is "
        f"batched along its dim 0 only (in_dims=0, or None to pass it whole) and a "
        f"SparseFillTensor result is stacked along dim 0 (out_dims=0); for another dim, "
        f"move it first (A.transpose(0, d)), or pass the components")


def _check_batch_dims(parts):
    """A slice's components are batched at dim 0 of what was flattened (the
    check that in_dims was 0 for this tensor)."""
    for t in parts.values():
        if _functorch.is_batchedtensor(t) and _functorch.maybe_get_bdim(t) != 0:
            _refuse(f"in_dims={_functorch.maybe_get_bdim(t)} for it")


def _unflatten(children, context):
    names, layout, size, coalesced, flag, blocksize, value_rank, origin = context
    if not all(isinstance(t, torch.Tensor) for t in children):
        # torch's pytree rebuilds structures of other leaves too (vmap's
        # in_dims broadcast, with ints): a node of as many leaves stands in.
        return tuple(children)
    parts = dict(zip(names, children))
    values, fill = parts["_sf_values"], parts["_sf_fill"]
    lead = values.dim() - value_rank
    if lead < 0:
        _refuse("its components have fewer dims than its slices' (a vmap over a slice "
                "whose pattern it cannot read: nested vmap over a COO tensor; convert it "
                "to a batched CSR first, A.to_sparse_csr(), whose batches need no reading)")
    if lead == 0:
        _check_batch_dims(parts)
        return SparseFillTensor._unflatten_components(
            parts, (layout, size, coalesced, flag, blocksize), None, None)
    batch = tuple(values.shape[:lead])
    if any(tuple(t.shape[:lead]) != batch for t in parts.values()):
        _refuse("its components were stacked along different dims (out_dims other than 0)")
    n = _fill.prod(batch)
    slice_ndim = len(size)
    inner = fill.dim() - lead
    if inner < slice_ndim:  # the slices' dense-part fills, one per slice: per-slice form
        fill = fill.reshape(batch + (1,) * (slice_ndim - inner) + tuple(fill.shape[lead:]))
    out_size = batch + tuple(size)
    if layout != _COO:
        return build(layout, out_size, values, fill, crow=parts["_sf_crow"],
                     col=parts["_sf_col"], blocksize=blocksize)
    idx = parts["_sf_indices"]
    k, nse = idx.shape[lead], idx.shape[lead + 1]
    if tuple(idx.shape[lead:]) != (k, values.shape[lead]):
        _refuse("its components were stacked along different dims (out_dims other than 0)")
    slices = torch.arange(n, device=idx.device).repeat_interleave(nse)
    front = torch.stack(torch.unravel_index(slices, batch)) if batch else slices[None]
    indices = torch.cat([front, idx.reshape(n, k, nse).permute(1, 0, 2).reshape(k, n * nse)])
    out = build(_COO, out_size, values.reshape((n * nse,) + tuple(values.shape[lead + 1:])),
                fill, indices=indices, coalesced=coalesced, coalesced_flag=flag)
    if origin is not None:  # split through COO: back to the layout it had
        out_layout, out_blocksize = origin
        out = out.to_sparse(layout=out_layout, blocksize=out_blocksize)
    return out


_TYPE_NAME = "torch_sparsefill.SparseFillTensor.vmap_slices"


def registered() -> bool:
    """Whether the slice flattening is the pytree node of SparseFillTensor now."""
    return _export.registered(_flatten)


@contextlib.contextmanager
def vmappable():
    """Within this context, ``torch.func.vmap`` takes a SparseFillTensor
    argument apart into its slices along dim 0 (``in_dims=0``): the function
    sees each slice as a SparseFillTensor, and a SparseFillTensor it returns
    is stacked into one with a leading batch dim (``out_dims=0``).
    ``torch.func.grad`` and the other transforms inside it take the slices
    as they are. Outside the context a SparseFillTensor argument of a
    transform is refused. A function whose only output is a SparseFillTensor
    must return it in a tuple here (torch.func.vmap takes a lone tensor
    output for one leaf); :func:`vmap` does that itself.

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 1], [1, 0], [0, 1]], [1., 2.], (2, 2, 2),
        ...                          fill_value=0.5)
        >>> with sf.vmappable():
        ...     torch.func.vmap(lambda S: S.sum(-1).to_dense())(A)
        tensor([[1.0000, 1.5000],
                [2.5000, 1.0000]])
    """
    with _export.scoped_node("sf.vmappable()", _flatten, _unflatten, _flatten_with_keys,
                             _TYPE_NAME):
        yield


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``torch.func.vmap`` that takes SparseFillTensor arguments apart into
    their slices along dim 0 (the call runs inside :func:`vmappable`).

    Example::

        >>> A = sf.sparse_csr_tensor([[0, 1, 1], [0, 0, 1]], [[1], [0]], [[2.], [3.]],
        ...                          (2, 2, 2), fill_value=-1.)
        >>> sf.vmap(lambda S: (S * 2).to_dense())(A)
        tensor([[[-2.,  4.],
                 [-2., -2.]],
        <BLANKLINE>
                [[-2., -2.],
                 [ 6., -2.]]])
    """
    # torch.func.vmap takes a lone Tensor output for one leaf (vmap.py,
    # _unwrap_batched: a single out_dim), which a SparseFillTensor is not:
    # the result travels in a 1-tuple.
    def boxed(*args, **kwargs):
        return (func(*args, **kwargs),)

    batched = torch.func.vmap(boxed, in_dims, (out_dims,), randomness, chunk_size=chunk_size)

    @functools.wraps(func)
    def call(*args, **kwargs):
        with vmappable():
            return batched(*args, **kwargs)[0]
    return call


# ---- csr_check under vmap ------------------------------------------------------------
# The public constructors check CSR components with csr_check, which returns
# nothing; functorch's loop fallback refuses such an op. Its batching rule:
# the check of every batch member.

def _csr_check_vmap(info, in_dims, crow, col, size):
    crow_dim, col_dim = in_dims[0], in_dims[1]
    crow = crow.movedim(crow_dim, 0) if crow_dim is not None else crow.expand(
        (info.batch_size,) + tuple(crow.shape))
    col = col.movedim(col_dim, 0) if col_dim is not None else col.expand(
        (info.batch_size,) + tuple(col.shape))
    for i in range(info.batch_size):
        _ops.csr_check(crow[i].contiguous(), col[i].contiguous(), size)
    return None, None


torch.library.register_vmap("sparsefill::csr_check", _csr_check_vmap)
