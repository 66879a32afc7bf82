"""Indexing writes with the fill (RFC.md#indexing-with-the-fill):
``A[i, j] = v``, index_put(_), index_add, index_copy, index_fill, scatter,
scatter_add, scatter_reduce, put, masked_scatter, each out of place and in
place. Each turns its arguments into positions and the values written there,
and ends in the one write (functions/indexing/lookup.py): the positions
written become stored elements (the pattern grows, as torch's sparse
in-place ops do), in place through ``_adopt``. Gradients reach the values,
the fill and what is written.
"""
from __future__ import annotations

import torch

from ...tensor import args as _args
from ...tensor import SparseFillTensor
from ..order.lanes import all_sparse
from .lookup import write
from .reads import _as_index, _mask_coords, _positions

T = torch.Tensor
_ops = torch.ops.sparsefill

__all__: list = []


def _target(A: SparseFillTensor):
    """A coalesced with its dense dims sparse (a write names single elements)."""
    return all_sparse(A._coalesced())


def _src(x, like: SparseFillTensor, shape):
    x = x.to_dense() if isinstance(x, SparseFillTensor) else x
    x = torch.as_tensor(x, dtype=like.dtype, device=like.device)
    return torch.broadcast_to(x, shape).reshape(-1)


def _grid(shape, device):
    """Every position of `shape`, row-major: (len(shape), numel)."""
    if not shape:
        return torch.zeros(0, 1, dtype=torch.int64, device=device)
    grids = torch.meshgrid(*[torch.arange(s, device=device) for s in shape], indexing="ij")
    return torch.stack([g.reshape(-1) for g in grids])


def _put_coords(A, indices, what):
    """(coords, selection shape) of A[indices] for index tensors, ints and
    boolean masks over the leading dims (the rest taken whole)."""
    idx = []
    for x in indices:
        if x is None:
            raise NotImplementedError(f"torch_sparsefill: {what} with None in the indices is "
                                      f"not supported")
        t = x.to_dense() if isinstance(x, SparseFillTensor) else torch.as_tensor(x)
        if t.dtype == torch.bool:
            shape = A.shape[len(idx): len(idx) + t.dim()]
            idx.extend(_mask_coords(x, shape, what))
        else:
            idx.append(t)
    idx = [_as_index(x, A.shape[k], what, A.device) for k, x in enumerate(idx)]
    idx = torch.broadcast_tensors(*idx)
    bshape = tuple(idx[0].shape)
    rest = tuple(A.shape[len(idx):])
    lead = torch.stack([x.reshape(-1) for x in idx])
    inner = _grid(rest, A.device)
    n, r = lead.shape[1], inner.shape[1]
    coords = torch.cat([lead.repeat_interleave(r, 1), inner.repeat(1, n)]) if rest else lead
    return coords, bshape + rest


def index_put(input, indices, values, accumulate=False):
    """A with ``A[indices] = values`` (``+=`` with `accumulate`): the
    positions become stored elements.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (4,), fill_value=9.)
        >>> A.index_put((torch.tensor([2]),), torch.tensor(5.)).to_dense()
        tensor([1., 9., 5., 9.])
    """
    A = _args.sparse(input, "index_put()")
    coords, shape = _put_coords(A, list(indices), "index_put()")
    return write(_target(A), coords, _src(values, A, shape), "sum" if accumulate else None)


def index_put_(input, indices, values, accumulate=False):
    """In place :func:`index_put`."""
    return input._adopt(index_put(input, indices, values, accumulate), "index_put_()")


def setitem(input, index, value):
    """``A[index] = value`` for ints and slices (basic indexing), or index
    tensors, ints and masks over the leading dims (advanced): the positions
    become stored elements.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (4,), fill_value=9.)
        >>> A[1:3] = 0.
        >>> A.to_dense()
        tensor([1., 0., 0., 9.])
    """
    A = _args.sparse(input, "__setitem__()")
    items = list(index) if isinstance(index, tuple) else [index]
    basic = all(isinstance(x, (int, slice)) and not isinstance(x, bool) or x is Ellipsis
                for x in items)
    if not basic:
        if any(isinstance(x, slice) or x is Ellipsis or x is None for x in items):
            raise NotImplementedError("torch_sparsefill: __setitem__ mixing index tensors with "
                                      "slices is not supported; write with index tensors over "
                                      "the leading dims (or with ints and slices only)")
        return index_put_(A, tuple(items), value)
    if Ellipsis in items:
        k = items.index(Ellipsis)
        items[k: k + 1] = [slice(None)] * (A.dim() - len(items) + 1)
    items += [slice(None)] * (A.dim() - len(items))
    if len(items) > A.dim():
        raise IndexError(f"too many indices for tensor of dimension {A.dim()}")
    ranges, shape = [], []
    for k, x in enumerate(items):
        n = A.shape[k]
        if isinstance(x, int):
            if not -n <= x < n:
                raise IndexError(f"index {x} is out of bounds for dimension {k} with size {n}")
            ranges.append(torch.tensor([x % n], device=A.device))
        else:
            ranges.append(torch.arange(n, device=A.device)[x])
            shape.append(ranges[-1].numel())
    grid = torch.meshgrid(*ranges, indexing="ij")
    coords = torch.stack([g.reshape(-1) for g in grid])
    src = _src(value, A, tuple(shape)) if coords.shape[1] else A._sf_values.new_zeros(0)
    return A._adopt(write(_target(A), coords, src), "__setitem__()")


def _along(A, dim, index, source_shape, what):
    """Positions of a source of `source_shape` whose coordinate along `dim`
    goes through `index` (index_add, index_copy)."""
    d = _args.dim(dim, max(A.dim(), 1), what)
    index = _as_index(torch.as_tensor(index).reshape(-1), A.shape[d] if A.dim() else 1, what,
                      A.device)
    coords = _grid(source_shape, A.device)
    if A.dim():
        coords[d] = index.index_select(0, coords[d])
    return coords


def index_add(input, dim, index, source, *, alpha=1):
    """A with ``source`` times `alpha` added at `index` along `dim`.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=9.)
        >>> A.index_add(0, torch.tensor([0, 2]), torch.tensor([1., 2.])).to_dense()
        tensor([ 2.,  9., 11.])
    """
    A = _args.sparse(input, "index_add()")
    source = torch.as_tensor(source, device=A.device)
    coords = _along(A, dim, index, source.shape, "index_add()")
    return write(_target(A), coords, _src(source * alpha, A, source.shape), "sum")


def index_copy(input, dim, index, source):
    """A with ``source`` copied to `index` along `dim` (repeats: torch leaves
    the winner open; here the last).

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=9.)
        >>> A.index_copy(0, torch.tensor([2]), torch.tensor([5.])).to_dense()
        tensor([1., 9., 5.])
    """
    A = _args.sparse(input, "index_copy()")
    source = torch.as_tensor(source, device=A.device)
    coords = _along(A, dim, index, source.shape, "index_copy()")
    return write(_target(A), coords, _src(source, A, source.shape))


def index_fill(input, dim, index, value):
    """A with every element at `index` along `dim` set to `value`.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=9.)
        >>> A.index_fill(0, torch.tensor([1]), 0.).to_dense()
        tensor([1., 0., 9.])
    """
    A = _args.sparse(input, "index_fill()")
    d = _args.dim(dim, max(A.dim(), 1), "index_fill()")
    index = torch.as_tensor(index, device=A.device).reshape(-1)
    shape = list(A.shape)
    if A.dim():
        shape[d] = index.numel()
    coords = _along(A, d, index, tuple(shape), "index_fill()")
    value = value.to_dense() if isinstance(value, SparseFillTensor) else value
    return write(_target(A), coords, _src(value, A, (coords.shape[1],)))


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """torch.scatter: ``A[p with p[dim] = index[p]] = src[p]`` for p over
    index's shape (or `value`); `reduce` "add"/"multiply" combine instead.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=9.)
        >>> A.scatter(0, torch.tensor([2]), torch.tensor([5.])).to_dense()
        tensor([1., 9., 5.])
    """
    A = _args.sparse(input, "scatter()")
    if src is None:
        src = value
    how = {None: None, "add": "sum", "multiply": "prod"}[reduce]
    return _scatter(A, dim, index, src, how, True, "scatter()")


def _scatter(A, dim, index, src, how, include_self, what):
    index = torch.as_tensor(index, device=A.device)
    if A.dim() == 0:
        raise NotImplementedError(f"torch_sparsefill: {what} of a 0-d SparseFillTensor is not "
                                  f"supported")
    d = _args.dim(dim, A.dim(), what)
    index = _as_index(index, A.shape[d], what, A.device)
    coords = _positions(index, d, what)
    if isinstance(src, torch.Tensor) and src.dim():
        src = src.to_dense() if isinstance(src, SparseFillTensor) else src
        src = src[tuple(slice(0, s) for s in index.shape)]
    return write(_target(A), coords, _src(src, A, index.shape), how, include_self)


def scatter_add(input, dim, index, src):
    """torch.scatter_add: src added at the scattered positions.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=9.)
        >>> A.scatter_add(0, torch.tensor([2, 2]), torch.tensor([5., 1.])).to_dense()
        tensor([ 1.,  9., 15.])
    """
    A = _args.sparse(input, "scatter_add()")
    return _scatter(A, dim, index, src, "sum", True, "scatter_add()")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """torch.scatter_reduce (sum, prod, mean, amax, amin; `include_self` both
    ways): the old element is the stored value or the fill.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=9.)
        >>> A.scatter_reduce(0, torch.tensor([2, 2]), torch.tensor([5., 1.]), "amin").to_dense()
        tensor([1., 9., 1.])
    """
    A = _args.sparse(input, "scatter_reduce()")
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    return _scatter(A, dim, index, src, reduce, include_self, "scatter_reduce()")


def put(input, index, source, accumulate=False):
    """A with `source` written at row-major linear positions `index`.

    Example::

        >>> A = sf.sparse_coo_tensor([[0], [0]], [1.], (2, 2), fill_value=9.)
        >>> A.put(torch.tensor([3]), torch.tensor([5.])).to_dense()
        tensor([[1., 9.],
                [9., 5.]])
    """
    A = _args.sparse(input, "put()")
    index = _as_index(torch.as_tensor(index).reshape(-1), A.numel(), "put()", A.device)
    coords = _ops.coo_delinearize(index, list(A.shape)) if A.dim() > 1 else \
        index.reshape(A.dim(), -1)
    source = torch.as_tensor(source, device=A.device).reshape(-1)
    if source.numel() != index.numel():
        raise RuntimeError("put_(): Expected source and index to have the same number of "
                           "elements")
    return write(_target(A), coords, _src(source, A, source.shape),
                 "sum" if accumulate else None)


def masked_scatter(input, mask, source):
    """A with the True positions of `mask` (row-major) taking `source`'s
    elements in order.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=9.)
        >>> A.masked_scatter(torch.tensor([False, True, True]), torch.tensor([4., 5.])).to_dense()
        tensor([1., 4., 5.])
    """
    A = _args.sparse(input, "masked_scatter()")
    if not isinstance(mask, SparseFillTensor):
        mask = torch.as_tensor(mask, device=A.device).expand(A.shape)
    coords = _mask_coords(mask, A.shape, "masked_scatter()")
    source = torch.as_tensor(source, device=A.device).reshape(-1)
    k = coords.shape[1]
    if source.numel() < k:
        raise RuntimeError("masked_scatter: expected source to have at least as many elements "
                           "as ones in mask")
    return write(_target(A), coords, _src(source[:k], A, (k,)))


def _in_place(fn, name):
    def method(self, *args, **kwargs):
        return self._adopt(fn(self, *args, **kwargs), name)
    method.__doc__ = f"In place :func:`{fn.__name__}` (the pattern grows)."
    method.__name__ = name
    return method


ROUTES = {
    torch.index_put: index_put, T.index_put: index_put, T.index_put_: index_put_,
    torch.index_put_: index_put_, T.__setitem__: setitem,
    torch.index_add: index_add, T.index_add: index_add,
    T.index_add_: _in_place(index_add, "index_add_"),
    torch.index_copy: index_copy, T.index_copy: index_copy,
    T.index_copy_: _in_place(index_copy, "index_copy_"),
    torch.index_fill: index_fill, T.index_fill: index_fill,
    T.index_fill_: _in_place(index_fill, "index_fill_"),
    torch.scatter: scatter, T.scatter: scatter, T.scatter_: _in_place(scatter, "scatter_"),
    torch.scatter_add: scatter_add, T.scatter_add: scatter_add,
    T.scatter_add_: _in_place(scatter_add, "scatter_add_"),
    torch.scatter_reduce: scatter_reduce, T.scatter_reduce: scatter_reduce,
    T.scatter_reduce_: _in_place(scatter_reduce, "scatter_reduce_"),
    torch.put: put, T.put: put, T.put_: _in_place(put, "put_"),
    torch.masked_scatter: masked_scatter, T.masked_scatter: masked_scatter,
    T.masked_scatter_: _in_place(masked_scatter, "masked_scatter_"),
}
