"""Concatenation that keeps the fill (RFC.md#cat): cat/concatenate,
stack, hstack, vstack, dstack. How they treat the fill and the layouts:
functions/shape/parts.py.
"""
from __future__ import annotations

import functools

import torch

from ...tensor import args as _args
from ...tensor import fill as _fill
from .parts import Parts, finish, parts, sort
from .reshape import unsqueeze

_ops = torch.ops.sparsefill

__all__: list = []


def _same(x: torch.Tensor, y: torch.Tensor) -> bool:
    if x.shape != y.shape:
        return False
    return bool(((x == y) | (x.isnan() & y.isnan())).all())


def _cat_fill(fulls, sources, sizes, d):
    """The fill of cat(tensors, d): one of them when all are the same tensor,
    or equal and not requiring grad; otherwise the fills expanded along d and
    concatenated (a per-slice fill when d is sparse), which keeps each
    input's fill gradient separate."""
    shape = list(torch.broadcast_shapes(*[tuple(f.shape[i] if i != d else 1
                                                for i in range(f.dim())) for f in fulls]))
    if all(f.shape[d] == 1 for f in fulls):
        first = fulls[0].expand(shape)
        if all(f is sources[0] for f in sources) or (
                not any(f.requires_grad for f in fulls) and
                all(_same(f.expand(shape), first) for f in fulls[1:])):
            return fulls[0] if list(fulls[0].shape) == shape else first.contiguous()
    parts = []
    for f, n in zip(fulls, sizes):
        target = list(shape)
        target[d] = n
        parts.append(f.expand(target))
    return torch.cat(parts, d)


def _union_values(ps, s):
    """Values of each of ps on the union of their patterns (unspecified
    positions take that tensor's fill there) and the union's indices."""
    sparse = list(ps[0].size[:s])
    if s == 0:
        linears = [p.indices.new_zeros(p.indices.shape[1]) for p in ps]
    else:
        linears = [_ops.coo_linearize(p.indices, sparse) for p in ps]
    union = torch.unique(torch.cat(linears))  # sorted
    if s == 0:
        indices = union.new_zeros((0, union.numel()))
    else:
        indices = _ops.coo_delinearize(union, sparse)
    out = []
    for p, lin in zip(ps, linears):
        src = torch.full((union.numel(),), -1, dtype=torch.int64, device=union.device)
        src[torch.searchsorted(union, lin)] = torch.arange(lin.numel(), device=lin.device)
        fill = _fill.canonical(p.F, s, len(p.dense_shape))
        if not _fill.is_per_slice(fill, len(p.dense_shape)):
            out.append(_ops.gather_with_fill(p.values, fill, src))
        else:  # the fill at each union position
            fill_rows = _fill.at(fill, indices, p.dense_shape)
            if not p.values.shape[0]:  # nothing stored: all fill (seed 799250)
                out.append(fill_rows.to(p.values.dtype))
                continue
            taken = p.values.index_select(0, src.clamp(min=0))
            mask = (src >= 0).view((-1,) + (1,) * len(p.dense_shape))
            out.append(torch.where(mask, taken, fill_rows))
    return indices, out


def cat(tensors, dim=0):
    """Concatenate SparseFillTensors along `dim`. Equal fills stay one fill;
    different fills become a per-slice fill varying along `dim` (RFC.md#cat),
    so the result is never densified. The result has the first tensor's
    layout when it has two sparse dims, else COO.

    Example::

        >>> A = sf.full((2,), 1.)
        >>> B = sf.full((3,), 7.)
        >>> torch.cat([A, B]).to_dense()
        tensor([1., 1., 7., 7., 7.])
    """
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("cat(): expected a non-empty list of tensors")
    for k, x in enumerate(tensors):
        _args.sparse(x, "cat()", f"tensors[{k}]")
    # As torch: 1-D empty tensors are skipped (they still take part in the
    # result's dtype), unless every tensor is one.
    dtype = functools.reduce(torch.promote_types, [x.dtype for x in tensors])
    kept = [x for x in tensors if x.shape != (0,)]
    if kept and len(kept) < len(tensors):
        return cat([x.to(dtype) for x in kept], dim)
    a = tensors[0]
    nd, s = a.dim(), a.sparse_dim()
    if nd == 0:
        raise RuntimeError("cat(): zero-dimensional tensor cannot be concatenated")
    d = _args.dim(dim, nd, "cat()")
    for k, x in enumerate(tensors[1:], 1):
        if x.dim() != nd or x.sparse_dim() != s:
            raise RuntimeError(f"cat(): tensor {k} has {x.sparse_dim()} sparse and "
                               f"{x.dense_dim()} dense dims, tensor 0 has {s} and {nd - s}")
        for i in range(nd):
            if i != d and x.shape[i] != a.shape[i]:
                raise RuntimeError(f"cat(): sizes of tensors must match except in dimension "
                                   f"{d}; tensor {k} has size {x.shape[i]} at dim {i}, "
                                   f"tensor 0 has {a.shape[i]}")
    if len(tensors) == 1:
        return a.to(dtype)
    ps = [parts(x.to(dtype)) for x in tensors]
    sizes = [x.shape[d] for x in tensors]
    size = a._sf_size[:d] + (sum(sizes),) + a._sf_size[d + 1:]
    F = _cat_fill([p.F for p in ps], [x._sf_fill for x in tensors], sizes, d)
    layout = a.layout
    if d < s:
        pieces, offset = [], 0
        for p, n in zip(ps, sizes):
            idx = p.indices.clone()
            idx[d] += offset
            pieces.append(idx)
            offset += n
        indices = torch.cat(pieces, 1)
        values = torch.cat([p.values for p in ps])
        if d > 0:
            indices, values = sort(indices, values, size)
        return finish(Parts(indices, values, F, size, layout), *tensors)
    indices, values = _union_values(ps, s)
    return finish(Parts(indices, torch.cat(values, d - s + 1), F, size, layout), *tensors)


def concatenate(tensors, axis=0, dim=None):
    return cat(tensors, axis if dim is None else dim)


def stack(tensors, dim=0):
    """Stack SparseFillTensors along a new dim (unsqueeze each, then cat)."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack(): expected a non-empty list of tensors")
    for k, x in enumerate(tensors):
        _args.sparse(x, "stack()", f"tensors[{k}]")
        if x.shape != tensors[0].shape:
            raise RuntimeError(f"stack(): expects each tensor to be equal size, but got "
                               f"{tuple(tensors[0].shape)} and {tuple(x.shape)}")
    d = _args.dim(dim, tensors[0].dim(), "stack()", extra=1)
    return cat([unsqueeze(x, d) for x in tensors], d)


def _at_least(x, n):
    """torch.atleast_1d/2d/3d of one tensor: 0-d becomes (1,)*n, 1-D (k,)
    becomes (1, k) for n = 2 and (1, k, 1) for n = 3, 2-D (m, k) becomes
    (m, k, 1) for n = 3."""
    if x.dim() == 0:
        for _ in range(n):
            x = unsqueeze(x, 0)
        return x
    if x.dim() == 1 and n >= 2:
        x = unsqueeze(x, 0)
    if x.dim() == 2 and n == 3:
        x = unsqueeze(x, 2)
    return x


def dstack(tensors):
    """torch.dstack: each tensor at least 3-D ((n,) becomes (1, n, 1), (m, n)
    becomes (m, n, 1)), then cat along dim 2."""
    tensors = [_args.sparse(x, "dstack()", f"tensors[{k}]") for k, x in enumerate(tensors)]
    return cat([_at_least(x, 3) for x in tensors], 2)


def hstack(tensors):
    """torch.hstack: each tensor at least 1-D, then cat along dim 1, or dim 0
    for 1-D tensors."""
    tensors = [_at_least(_args.sparse(x, "hstack()", f"tensors[{k}]"), 1)
               for k, x in enumerate(tensors)]
    return cat(tensors, 0 if tensors and tensors[0].dim() == 1 else 1)


def vstack(tensors):
    """torch.vstack: each tensor at least 2-D (1-D tensors become rows (1, n)),
    then cat along dim 0."""
    tensors = [_args.sparse(x, "vstack()", f"tensors[{k}]") for k, x in enumerate(tensors)]
    return cat([_at_least(x, 2) for x in tensors], 0)


ROUTES = {
    torch.cat: cat, torch.concat: cat, torch.concatenate: concatenate,
    torch.stack: stack, torch.hstack: hstack, torch.vstack: vstack, torch.dstack: dstack,
}
