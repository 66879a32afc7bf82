"""Extraction, assignment and the Kronecker product of indefinite tensors
(RFC.md#indefinite-fill), as GraphBLAS has them.

Example::

    >>> A = sf.to_sparse(torch.tensor([[1., float('nan')], [2., 3.]]), fill_value=sf.indefinite)
    >>> sf.extract(A, [1], [0, 1]).values()
    tensor([2., 3.])
"""
from __future__ import annotations

import torch

from .ewise import ewise_add
from .operands import Entries, entries, lookup, result
from .operators import binary

__all__ = ["extract", "assign", "kron"]


def _index(idx, n: int, name: str, device) -> torch.Tensor:
    """An index list (None: all of 0..n-1) as an int64 tensor, checked."""
    if idx is None:
        return torch.arange(n, device=device)
    if isinstance(idx, slice):
        return torch.arange(n, device=device)[idx]
    if isinstance(idx, (list, tuple)) and len(idx) == 0:  # as torch's x[[]]: no index
        return torch.empty(0, dtype=torch.int64, device=device)
    t = torch.as_tensor(idx, device=device)
    if t.dim() != 1 or t.dtype.is_floating_point or t.dtype == torch.bool:
        raise ValueError(f"{name}: expected a 1-D integer index list, got {idx!r}")
    t = t.to(torch.int64)
    if t.numel() and (int(t.min()) < -n or int(t.max()) >= n):
        raise IndexError(f"{name}: an index is out of range for size {n}")
    return t % n if n else t


def _spread(coord: torch.Tensor, idx: torch.Tensor):
    """For each coordinate, every output position p with idx[p] == coord:
    (which coordinate, p) pairs (duplicates in idx repeat)."""
    srt, perm = torch.sort(idx)
    lo = torch.searchsorted(srt, coord)
    hi = torch.searchsorted(srt, coord, right=True)
    count = hi - lo
    which = torch.repeat_interleave(torch.arange(coord.shape[0], device=coord.device), count)
    first = torch.cumsum(count, 0) - count
    pos = perm[lo[which] + torch.arange(which.shape[0], device=coord.device) - first[which]]
    return which, pos


def extract(A, rows=None, cols=None):
    """The submatrix ``A[rows][:, cols]`` (index lists, duplicates allowed;
    None: all), of a vector ``A[rows]``; present where A is.

    Example::

        >>> A = sf.to_sparse(torch.tensor([1., float('nan'), 3.]), fill_value=sf.indefinite)
        >>> sf.extract(A, [2, 0, 2]).values()
        tensor([3., 1., 3.])
    """
    a = entries(A, "extract: A")
    dev = a.keys.device
    r = _index(rows, a.size[0], "extract: rows", dev)
    which, out_r = _spread(a.rows(), r)
    if len(a.size) == 1:
        if cols is not None:
            raise ValueError("extract: a vector takes rows only")
        keys, order = torch.sort(out_r)
        return result((r.shape[0],), keys, a.values[which[order]])
    c = _index(cols, a.size[1], "extract: cols", dev)
    which2, out_c = _spread(a.cols()[which], c)
    src, out_r = which[which2], out_r[which2]
    keys, order = torch.sort(out_r * c.shape[0] + out_c)
    return result((r.shape[0], c.shape[0]), keys, a.values[src[order]], a.layout)


def _position_map(idx: torch.Tensor, n: int, name: str) -> torch.Tensor:
    """pos[i] = where i sits in idx, -1 where absent (idx without duplicates)."""
    if torch.unique(idx).shape[0] != idx.shape[0]:
        raise ValueError(f"{name}: assign needs indices without duplicates")
    pos = torch.full((n,), -1, dtype=torch.int64, device=idx.device)
    return pos.index_put((idx,), torch.arange(idx.shape[0], device=idx.device))


def assign(A, rows, cols, B, mask=None, accum=None):
    """A copy of A with its submatrix ``A[rows][:, cols]`` (index lists
    without duplicates; None: all) assigned from B (an indefinite or strided
    tensor of the submatrix's shape, or a number: present everywhere there),
    GraphBLAS's ``C(rows, cols)<mask> = accum(C(rows, cols), B)`` with the
    mask of the submatrix's shape (structural): where the mask allows, the
    element becomes ``ewise_add(C, B, accum)``'s (B's alone without accum:
    absent where B is); elsewhere it stays. A vector takes ``cols=None``.

    Example::

        >>> A = sf.to_sparse(torch.tensor([1., float('nan'), 3.]), fill_value=sf.indefinite)
        >>> sf.assign(A, [1, 2], None, torch.tensor([7., 8.])).values()
        tensor([1., 7., 8.])
    """
    a = entries(A, "assign: A")
    dev, vector = a.keys.device, len(a.size) == 1
    r = _index(rows, a.size[0], "assign: rows", dev)
    c = _index(cols, 1 if vector else a.size[1], "assign: cols", dev)
    if vector and cols is not None:
        raise ValueError("assign: a vector takes cols=None")
    shape = (r.shape[0],) if vector else (r.shape[0], c.shape[0])
    if not isinstance(B, torch.Tensor):
        B = torch.full(shape, B, dtype=a.values.dtype, device=dev)
    b = entries(B, "assign: B")
    if b.size != shape:
        raise ValueError(f"assign: B has shape {b.size}, the submatrix {shape}")
    # A's elements in the submatrix, in its coordinates (-1: outside).
    rmap = _position_map(r, a.size[0], "assign: rows")[a.rows()]
    cmap = _position_map(c, a.ncols, "assign: cols")[a.cols()]
    inside = (rmap >= 0) & (cmap >= 0)
    sub_key = rmap * (1 if vector else c.shape[0]) + cmap
    allowed = inside.clone()
    b_keys, b_vals = b.keys, b.values
    if mask is not None:
        m = entries(mask, "assign: mask")
        if m.size != shape:
            raise ValueError(f"assign: mask has shape {m.size}, the submatrix {shape}")
        found, _ = lookup(sub_key, m.keys)
        allowed &= found
        keep_b = lookup(b.keys, m.keys)[0].nonzero().squeeze(1)
        b_keys, b_vals = b.keys[keep_b], b.values[keep_b]
    new_b = Entries(shape, b_keys, b_vals, a.layout)
    if accum is not None:  # the allowed old elements fold into B's
        old = allowed.nonzero().squeeze(1)
        order = torch.argsort(sub_key[old])
        z = entries(ewise_add(result(shape, sub_key[old][order], a.values[old][order]),
                              result(shape, b_keys, b_vals), accum), "assign")
        new_b = z
    # back to A's coordinates
    nb = new_b.keys
    br = r[torch.div(nb, 1 if vector else c.shape[0], rounding_mode="floor")]
    bk = br if vector else br * a.size[1] + c[nb % c.shape[0]]
    stay = (~allowed).nonzero().squeeze(1)
    dtype = torch.promote_types(a.values.dtype, new_b.values.dtype)
    keys = torch.cat([a.keys[stay], bk])
    vals = torch.cat([a.values[stay].to(dtype), new_b.values.to(dtype)])
    keys, order = torch.sort(keys)
    return result(a.size, keys, vals[order], a.layout)


def kron(A, B, op="times"):
    """The Kronecker product with ``op``: element ``(i*p + k, j*q + l)`` is
    ``op(A[i, j], B[k, l])``, present where both are (B of shape (p, q)).

    Example::

        >>> A = sf.to_sparse(torch.tensor([[1., float('nan')]]), fill_value=sf.indefinite)
        >>> sf.kron(A, torch.tensor([[1., 2.]]), "plus").values()
        tensor([2., 3.])
    """
    a, b = entries(A, "kron: A", dims=(2,)), entries(B, "kron: B", dims=(2,))
    fn = binary(op, "kron: op")
    p, q = b.size
    size = (a.size[0] * p, a.size[1] * q)
    ia = torch.arange(a.nse(), device=a.keys.device).repeat_interleave(b.nse())
    ib = torch.arange(b.nse(), device=a.keys.device).repeat(a.nse())
    rows = a.rows()[ia] * p + b.rows()[ib]
    cols = a.cols()[ia] * q + b.cols()[ib]
    keys, order = torch.sort(rows * size[1] + cols)
    ia, ib = ia[order], ib[order]
    return result(size, keys, fn(a.values[ia], b.values[ib]), a.layout)
