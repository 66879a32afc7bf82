"""Indexing reads with the fill (RFC.md#indexing-with-the-fill): ``A[rows,
cols]`` with several (broadcast) index tensors, boolean masks of any rank,
masked_select, gather, take, take_along_dim, nonzero, argwhere. Every read
is a lookup (functions/indexing/lookup.py): O(k log stored) for k elements
read, the fill where nothing is stored.
"""
from __future__ import annotations

import math

import torch

from ...tensor import args as _args
from ...tensor import SparseFillTensor, build
from ..order.lanes import all_sparse
from ..shape.copies import broadcast_to
from .lookup import linear, lookup

T = torch.Tensor
_ops = torch.ops.sparsefill

__all__: list = []

# nonzero of a tensor whose fill is not zero lists almost every element: refused
# above this many elements (about 2 GiB of int64 coordinates for a 2-D tensor).
NONZERO_LIMIT = 2 ** 27


def _as_index(x, n, what, device):
    """An integer index tensor for a dim of size n, negatives wrapped, checked."""
    if isinstance(x, SparseFillTensor):
        x = x.to_dense()
    x = torch.as_tensor(x, device=device)
    if x.dtype.is_floating_point or x.dtype.is_complex:
        raise IndexError(f"{what}: tensors used as indices must be long, int, byte or bool "
                         f"tensors")
    x = x.to(torch.int64)
    x = torch.where(x < 0, x + n, x)
    if x.numel() and (int(x.min()) < 0 or int(x.max()) >= n):
        raise IndexError(f"{what}: index {int(x[(x < 0) | (x >= n)][0])} is out of bounds "
                         f"for a dim of size {n}")
    return x


def _mask_coords(mask, shape, what):
    """The positions (ndim, k) of a boolean mask over `shape` (row-major)."""
    if isinstance(mask, SparseFillTensor):
        f = mask._fill_value()
        if tuple(mask.shape) == tuple(shape) and not mask._has_per_slice_fill() and \
                not bool(f.any()) and not mask.dense_dim():
            m = mask._coalesced()
            return m._coo_indices()[:, m._sf_values.reshape(-1).to(torch.bool)]
        mask = mask.to_dense()
    mask = torch.as_tensor(mask)
    if tuple(mask.shape) != tuple(shape):
        raise IndexError(f"{what}: the shape of the mask {tuple(mask.shape)} does not match "
                         f"the shape of the indexed tensor {tuple(shape)}")
    return mask.nonzero().t()


def advanced(a: SparseFillTensor, items):
    """``a[i0, i1, ...]`` with index tensors (broadcast together), ints and
    boolean masks over the leading dims, full slices after them: a strided
    result of the broadcast shape (plus the dense dims) when the sparse dims
    are all indexed, else a SparseFillTensor over (broadcast shape, the rest)."""
    items = list(items)
    while items and (items[-1] is Ellipsis or (isinstance(items[-1], slice) and
                                              items[-1] == slice(None))):
        items.pop()
    idx = []
    for x in items:
        if isinstance(x, (torch.Tensor, list)) and torch.as_tensor(
                x.to_dense() if isinstance(x, SparseFillTensor) else x).dtype == torch.bool:
            shape = a.shape[len(idx): len(idx) + (x.dim() if isinstance(x, torch.Tensor)
                                                  else torch.as_tensor(x).dim())]
            idx.extend(_mask_coords(x if isinstance(x, torch.Tensor) else torch.as_tensor(x),
                                    shape, "__getitem__"))
        elif isinstance(x, (torch.Tensor, list, int)) and not isinstance(x, bool):
            idx.append(x)
        else:
            raise NotImplementedError(
                "torch_sparsefill: __getitem__ with index tensors and slices, None or Ellipsis "
                "between or before them is not supported; index the leading dims with "
                "tensors and ints only (or one dim at a time)")
    if len(idx) > a.dim():
        raise IndexError(f"too many indices for tensor of dimension {a.dim()}")
    dev = a.device
    idx = [_as_index(x, a.shape[k], "__getitem__", dev) for k, x in enumerate(idx)]
    idx = torch.broadcast_tensors(*idx)
    bshape = tuple(idx[0].shape)
    k = len(idx)
    coords = torch.stack([x.reshape(-1) for x in idx]) if idx else None
    sd = a.sparse_dim()
    if k > sd:  # into the dense dims: make them sparse first
        a = all_sparse(a._coalesced())
        sd = a.sparse_dim()
    a = a._coalesced()
    if k == sd:
        return lookup(a, coords).reshape(bshape + tuple(a.shape[sd:]))
    return _prefix(a, coords, bshape)


def _prefix(a: SparseFillTensor, coords, bshape):
    """The elements of `a` whose leading k sparse coordinates are the
    columns of `coords`: a SparseFillTensor over (bshape, the rest)."""
    if a._has_per_slice_fill():
        raise NotImplementedError("torch_sparsefill: __getitem__ with index tensors on part "
                                  "of the sparse dims of a tensor with a per-slice fill is not "
                                  "supported; index every sparse dim, or index one dim at a "
                                  "time")
    k = coords.shape[0]
    sizes = a.shape[:k]
    idx = a._coo_indices()
    key = linear(idx[:k], sizes)  # sorted: a is coalesced
    q = linear(coords, sizes)
    lo = torch.searchsorted(key, q)
    cnt = torch.searchsorted(key, q, right=True) - lo
    total = int(cnt.sum())
    which = torch.repeat_interleave(torch.arange(q.shape[0], device=q.device), cnt,
                                    output_size=total)
    within = torch.arange(total, device=q.device) - (cnt.cumsum(0) - cnt).index_select(0, which)
    src = lo.index_select(0, which) + within
    outer = _ops.coo_delinearize(which, list(bshape)) if len(bshape) > 1 else \
        which.reshape(len(bshape), -1)
    indices = torch.cat([outer, idx[k:].index_select(1, src)])
    size = bshape + tuple(a.shape[k:])
    return build(a.layout, size, a._sf_values.index_select(0, src), a._sf_fill.clone(),
                 indices=indices)


def masked_select(input, mask):
    """The elements where `mask` (broadcast to the shape) is True, as a 1-D
    strided tensor, in row-major order: O(k log stored) for k selected.

    Example::

        >>> A = sf.sparse_coo_tensor([[1]], [5.], (3,), fill_value=2.)
        >>> torch.masked_select(A, torch.tensor([True, True, False]))
        tensor([2., 5.])
    """
    a = _args.sparse(input, "masked_select()")
    if not isinstance(mask, SparseFillTensor):
        mask = torch.as_tensor(mask, device=a.device)
        if mask.dtype != torch.bool:
            raise RuntimeError("masked_select: expected BoolTensor for mask")
        shape = torch.broadcast_shapes(mask.shape, a.shape)
        if tuple(shape) != tuple(a.shape):  # copies of the stored elements
            a = broadcast_to(a, shape)
        mask = mask.expand(a.shape)
    b = all_sparse(a._coalesced())
    return lookup(b, _mask_coords(mask, a.shape, "masked_select()"))


def _positions(index, dim, what):
    """COO coordinates (ndim, numel(index)) of each element of `index`
    with its coordinate along `dim` replaced by its value."""
    if index.dim() == 0:
        return index.reshape(1, 1)
    grids = torch.meshgrid(*[torch.arange(s, device=index.device) for s in index.shape],
                           indexing="ij")
    coords = [g.reshape(-1) for g in grids]
    coords[dim] = index.reshape(-1)
    return torch.stack(coords) if coords else index.reshape(0, 1)


def gather(input, dim, index, *, sparse_grad=False, out=None):
    """``out[p] = A[p with p[dim] = index[p]]``: a strided tensor of index's
    shape, each element a lookup (O(numel(index) log stored)).

    Example::

        >>> A = sf.sparse_coo_tensor([[0], [1]], [5.], (2, 3), fill_value=2.)
        >>> torch.gather(A, 1, torch.tensor([[1, 1], [0, 2]]))
        tensor([[5., 5.],
                [2., 2.]])
    """
    a = _args.sparse(input, "gather()")
    d = _args.dim(dim, max(a.dim(), 1), "gather()")
    if isinstance(index, SparseFillTensor):
        index = index.to_dense()
    index = torch.as_tensor(index, device=a.device)
    if index.dtype not in (torch.int64, torch.int32):
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    if a.dim() == 0:
        return a.to_dense().expand(index.shape).clone()
    if index.dim() != a.dim():
        raise RuntimeError("Index tensor must have the same number of dimensions as input "
                           "tensor")
    for k in range(a.dim()):
        if k != d and index.shape[k] > a.shape[k]:
            raise RuntimeError(f"Size does not match at dimension {k} expected index "
                               f"{tuple(index.shape)} to be no larger than self "
                               f"{tuple(a.shape)} apart from dimension {d}")
    index = _as_index(index, a.shape[d], "gather()", a.device)
    b = all_sparse(a._coalesced())
    return lookup(b, _positions(index, d, "gather()")).reshape(index.shape)


def take(input, index):
    """The elements at row-major linear positions `index` (negatives wrap):
    a strided tensor of index's shape.

    Example::

        >>> A = sf.sparse_coo_tensor([[0], [1]], [5.], (2, 3), fill_value=2.)
        >>> torch.take(A, torch.tensor([1, 5]))
        tensor([5., 2.])
    """
    a = _args.sparse(input, "take()")
    index = torch.as_tensor(index, device=a.device)
    n = a.numel()
    index = _as_index(index, n, "take()", a.device)
    b = all_sparse(a._coalesced())
    coords = _ops.coo_delinearize(index.reshape(-1), list(a.shape)) if a.dim() > 1 else \
        index.reshape(1, -1)
    if a.dim() == 0:
        return a.to_dense().expand(index.shape).clone()
    return lookup(b, coords).reshape(index.shape)


def take_along_dim(input, indices, dim=None, *, out=None):
    """``gather`` with `indices` broadcast to the input's shape (but `dim`);
    without `dim`, :func:`take` of the flattened tensor.

    Example::

        >>> A = sf.sparse_coo_tensor([[0], [1]], [5.], (2, 3), fill_value=2.)
        >>> torch.take_along_dim(A, torch.tensor([[1], [0]]), 1)
        tensor([[5.],
                [2.]])
    """
    a = _args.sparse(input, "take_along_dim()")
    if isinstance(indices, SparseFillTensor):
        indices = indices.to_dense()
    indices = torch.as_tensor(indices, device=a.device)
    if dim is None:
        return take(a, indices.reshape(-1))
    d = _args.dim(dim, a.dim(), "take_along_dim()")
    shape = list(torch.broadcast_shapes(
        tuple(s for k, s in enumerate(a.shape) if k != d),
        tuple(s for k, s in enumerate(indices.shape) if k != d)))
    if [s for k, s in enumerate(a.shape) if k != d] != shape:  # copies of the stored elements
        target = list(shape)
        target.insert(d, a.shape[d])
        a = broadcast_to(a, target)
    shape.insert(d, indices.shape[d])
    return gather(a, d, indices.expand(shape))


def nonzero(input, *, out=None, as_tuple=False):
    """Positions of the non-zero elements (row-major), as torch. With a zero
    fill: the stored non-zeros, O(stored). Any other fill makes almost every
    element non-zero: the output is O(numel), refused above NONZERO_LIMIT
    elements.

    Example::

        >>> torch.nonzero(sf.sparse_coo_tensor([[1, 3]], [5., 0.], (6,), fill_value=0.))
        tensor([[1]])
    """
    a = _args.sparse(input, "nonzero()")
    b = all_sparse(a._coalesced())
    f = b._sf_fill
    if not bool((f != 0).any()):
        keep = (b._sf_values != 0).reshape(-1)
        out = b._coo_indices()[:, keep].t().contiguous()
    else:
        if a.numel() > NONZERO_LIMIT:
            raise NotImplementedError(
                f"torch_sparsefill: nonzero() of a tensor whose fill is not zero lists almost "
                f"every one of its {a.numel()} elements; refused above {NONZERO_LIMIT} (see "
                f"torch_sparsefill.functions.indexing.reads.NONZERO_LIMIT): compare with the "
                f"fill first (A != 0 is sparse) or call it on A.to_dense()")
        out = a.to_dense().nonzero()
    if as_tuple:
        return tuple(out.t()) if a.dim() else (out.reshape(-1),)
    return out


def argwhere(input):
    """:func:`nonzero` (``torch.argwhere``)."""
    return nonzero(input)


ROUTES = {
    torch.masked_select: masked_select, T.masked_select: masked_select,
    torch.gather: gather, T.gather: gather, torch.take: take, T.take: take,
    torch.take_along_dim: take_along_dim, T.take_along_dim: take_along_dim,
    torch.nonzero: nonzero, T.nonzero: nonzero, torch.argwhere: argwhere, T.argwhere: argwhere,
}
