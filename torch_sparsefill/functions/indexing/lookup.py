"""Reading and writing elements at given positions of a SparseFillTensor
(RFC.md#indexing-with-the-fill): the one lookup (a binary search among the
stored positions, O(k log stored) for k positions) and the one write (the
pattern grows by the positions written; the value there is torch's
``scatter_reduce`` of the old element and what is written).
"""
from __future__ import annotations

import torch

from ...tensor import fill as _fill
from ...tensor import SparseFillTensor, build
from ..shape.parts import own, sort as _coalesce

_ops = torch.ops.sparsefill

__all__: list = []


def linear(coords, sizes):
    """Row-major linear index of COO coordinates (sparse_dim, k)."""
    if coords.shape[0] == 0:
        return torch.zeros(coords.shape[1], dtype=torch.int64, device=coords.device)
    return _ops.coo_linearize(coords, list(sizes)) if coords.shape[0] > 1 else coords[0]


def fill_rows(A: SparseFillTensor, coords, dense_shape):
    """The fill at COO positions `coords` (sparse_dim, k): rows (k, *dense)."""
    f = A._sf_fill
    if A._has_per_slice_fill():
        return _fill.at(f, coords, dense_shape)
    return f.expand(tuple(dense_shape)).unsqueeze(0).expand((coords.shape[1],) +
                                                            tuple(dense_shape))


def _search(lin, q):
    """torch.searchsorted(lin, q); many queries are sorted first (their
    binary searches then walk the same cache lines: about 3x faster for
    10^5 queries into 10^6 positions)."""
    if q.numel() < 4096 or q.device.type != "cpu":
        return torch.searchsorted(lin, q)
    qs, perm = torch.sort(q)
    js = torch.searchsorted(lin, qs)
    return torch.empty_like(js).index_put_((perm,), js)


def lookup(A: SparseFillTensor, coords, lin=None):
    """Elements of coalesced A at COO positions `coords` (sparse_dim, k) in
    bounds: rows (k, *dense), the stored value or the fill (differentiable
    to both). `lin`: A's stored linear indices, when already made."""
    sizes = A._sf_size[: A.sparse_dim()]
    dense_shape = A._sf_size[A.sparse_dim():]
    if lin is None and A.layout == torch.sparse_csr and A.device.type == "cpu" \
            and not A._batch_dim() and not torch.compiler.is_compiling():
        # a binary search of each queried row: no COO indices of A made
        fill = fill_rows(A, coords, dense_shape).to(A._sf_values.dtype)
        if not A._sf_values.shape[0]:
            return fill
        # the searches run in groups whose cache misses overlap (sf_csr_find):
        # no sort of the queries pays for itself
        j = _ops.csr_find(A._sf_crow, A._sf_col, coords[0], coords[1], sizes[1])
        stored = A._sf_values.index_select(0, j.clamp(min=0))
        return torch.where((j >= 0).reshape((-1,) + (1,) * len(dense_shape)), stored, fill)
    if lin is None:
        lin = linear(A._coo_indices(), sizes)
    q = linear(coords, sizes)
    s = lin.shape[0]
    fill = fill_rows(A, coords, dense_shape).to(A._sf_values.dtype)
    if not s:
        return fill
    j = _search(lin, q)
    jc = j.clamp(max=s - 1)
    hit = (j < s) & (lin.index_select(0, jc) == q)
    stored = A._sf_values.index_select(0, jc)
    return torch.where(hit.reshape((-1,) + (1,) * len(dense_shape)), stored, fill)


def write(A: SparseFillTensor, coords, src, reduce=None, include_self=True):
    """A with the elements at COO `coords` (sparse_dim, k; repeats allowed)
    written from `src` (k, *dense): ``reduce`` None sets (the last write of
    a position wins), else torch's scatter_reduce ("sum", "prod", "mean",
    "amax", "amin") of the old element and the written ones. The positions
    written become stored elements; differentiable to A's values, fill and src."""
    A = A._coalesced()
    sd = A.sparse_dim()
    sizes = A._sf_size[:sd]
    dense_shape = tuple(A._sf_size[sd:])
    idx = A._coo_indices()
    lin = linear(idx, sizes)
    q = linear(coords, sizes)
    uq, slot = torch.unique(q, return_inverse=True)
    ucoords = _ops.coo_delinearize(uq, list(sizes)) if sd > 1 else uq.unsqueeze(0)
    base = lookup(A, ucoords, lin)
    src = src.to(base.dtype).reshape((-1,) + dense_shape)
    w = base.flatten(1) if base.dim() > 1 else base.unsqueeze(1)
    srcw = src.flatten(1) if src.dim() > 1 else src.unsqueeze(1)
    index = slot.unsqueeze(1).expand(srcw.shape)
    if reduce is None:
        # the last write wins: scatter in order (torch leaves repeats open)
        last = torch.zeros(uq.shape[0], dtype=torch.int64, device=q.device).scatter_reduce(
            0, slot, torch.arange(q.shape[0], device=q.device), "amax", include_self=False)
        new = srcw.index_select(0, last)
    elif reduce == "sum":
        # index_add, as torch's put(accumulate=True) and index_put_ do: it
        # has complex derivatives, which scatter_reduce lacks (seed 1037646)
        new = (w if include_self else torch.zeros_like(w)).index_add(0, slot, srcw)
    else:
        new = w.scatter_reduce(0, index, srcw, reduce, include_self=include_self)
    new = new.reshape((-1,) + dense_shape)
    # the result: the old elements not written, then the written ones, sorted
    keep = ~torch.isin(lin, uq) if lin.numel() else torch.zeros(0, dtype=torch.bool,
                                                               device=q.device)
    indices = torch.cat([idx[:, keep], ucoords], 1)
    values = torch.cat([A._sf_values[keep], new.to(A._sf_values.dtype)])
    indices, values = _coalesce(indices, values, A._sf_size)
    return build(A.layout, A._sf_size, values, own(A._sf_fill, (A,)), indices=indices)
