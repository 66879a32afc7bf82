"""Batched compressed tensors (RFC.md#batched-compressed), on components: a CSR,
CSC, BSR or BSC tensor of size ``(*batch, m, n, *dense)`` whose compressed
indices are ``(*batch, P + 1)``, plain indices ``(*batch, nse)`` and values
``(*batch, nse, ...)``: every batch holds the same nse (torch's rule).

Its working form is COO with ``len(batch) + 2`` sparse dims. Both ways go
through the batches stacked into one unbatched pattern (batch after batch
along the compressed dim), so each conversion is the unbatched one of
tensor/compressed.py plus O(nse) index arithmetic (CSC/BSC: plus the sort that
CSR <-> CSC is anyway). Imports only the fill rules and tensor/compressed.py;
tensor/sparse_fill_tensor.py turns these into methods.
"""
from __future__ import annotations

import torch

from . import compressed as _compressed
from . import fill as _fill
from .compressed import BLOCK

_ops = torch.ops.sparsefill

__all__ = ["batch_dim", "to_coo", "from_coo", "check", "swapped_fill"]

_TRANSPOSED = (torch.sparse_csc, torch.sparse_bsc)


def batch_dim(layout, compressed) -> int:
    """Number of leading batch dims of compressed components (0 when
    unbatched or not compressed).

    Example: ``batch_dim(torch.sparse_csr, torch.zeros(4, 3))`` is 1.
    """
    return 0 if compressed is None or layout == torch.sparse_coo else compressed.dim() - 1


def _stack_compressed(compressed, nse: int):
    """Compressed indices ``(B, P + 1)`` of B patterns with `nse` each ->
    those of the stacked pattern ``(B * P + 1,)``: batch k's offsets move by
    k * nse (its first offset is 0, checked before)."""
    B = compressed.shape[0]
    shift = torch.arange(B, device=compressed.device, dtype=compressed.dtype)[:, None] * nse
    last = torch.full((1,), B * nse, dtype=compressed.dtype, device=compressed.device)
    return torch.cat([(compressed[:, :-1] + shift).reshape(-1), last]).contiguous()


def _pattern_shape(layout, size, nb, blocksize):
    """(P, Q, unit): the unbatched CSR pattern the components describe
    (over blocks, of the transpose for CSC/BSC) and its unit (block) shape
    in the order of that pattern."""
    m, n = size[nb], size[nb + 1]
    r, c = blocksize or (1, 1)
    if layout in _TRANSPOSED:
        return n // c, m // r, (c, r)
    return m // r, n // c, (r, c)


def to_coo(layout, size, crow, col, values, fill, blocksize):
    """Batched compressed components -> coalesced COO ``(indices, values)``
    with ``len(batch) + 2`` sparse dims, every element of every block
    stored; differentiable with respect to values.

    Example: a ``(2, 2, 2)`` CSR with one element per batch gives indices
    of shape ``(3, 2)``.
    """
    nb = crow.dim() - 1
    batch = tuple(size[:nb])
    B = _fill.prod(batch)
    m, n = size[nb], size[nb + 1]
    P, Q, unit = _pattern_shape(layout, size, nb, blocksize)
    nse = col.shape[-1]
    crow_s = _stack_compressed(crow.reshape(B, crow.shape[-1]), nse)  # B may be 0
    col_s = col.reshape(-1).contiguous()
    vals = values.reshape((B * nse,) + tuple(values.shape[nb + 1:]))
    if layout in BLOCK:
        if layout == torch.sparse_bsc:  # the BSR blocks of the transpose
            vals = vals.transpose(1, 2)
        crow_s, col_s, vals = _compressed.csr_from_bsr(crow_s, col_s, vals, unit,
                                                       B * P * unit[0])
    rows = _ops.rows_from_crow(crow_s)
    P_elems = P * unit[0]  # elements along the compressed dim of one batch
    b, i = rows // P_elems, rows % P_elems
    j = col_s
    if layout in _TRANSPOSED:
        i, j = j, i
        order = torch.argsort((b * m + i) * n + j, stable=True)
        b, i, j, vals = b[order], i[order], j[order], vals.index_select(0, order)
    bidx = torch.unravel_index(b, batch) if nb else ()
    indices = torch.stack(list(bidx) + [i, j]) if nb else torch.stack([i, j])
    return indices, vals


def _stacked_fill(fill, size, nb, transposed):
    """A per-slice fill of the batched tensor as the fill of the stacked
    unbatched pattern ``(B * m, n, ...)`` (the transpose's for CSC/BSC)."""
    full = fill
    if transposed:
        full = full.transpose(nb, nb + 1)
    shape = list(full.shape)
    lead = tuple(size[:nb]) + ((size[nb + 1] if transposed else size[nb]),)
    full = full.expand(lead + tuple(shape[nb + 1:]))
    return full.reshape((_fill.prod(lead),) + tuple(shape[nb + 1:]))


def from_coo(indices, values, fill, size, layout, blocksize):
    """Coalesced COO components with ``nb + 2`` sparse dims (nb >= 1) ->
    batched components ``(compressed, plain, values)`` of `layout`. Batches
    that store fewer elements (blocks) than the fullest are padded with
    explicitly stored fill-valued ones at their first unspecified positions
    (RFC.md#batched-compressed), so every batch has the same nse, as torch requires.
    Differentiable with respect to values and fill.

    Example: a 3-D COO with 1 and 2 elements in its two batches gives a
    batched CSR with nse 2 in each.
    """
    nb = indices.shape[0] - 2
    batch = tuple(size[:nb])
    B = _fill.prod(batch)
    m, n = size[nb], size[nb + 1]
    dense_shape = tuple(values.shape[1:])
    transposed = layout in _TRANSPOSED
    P, Q, unit = _pattern_shape(layout, size, nb, blocksize)
    b = _ravel(indices[:nb], batch)
    i, j = indices[nb], indices[nb + 1]
    if transposed:
        i, j = j, i
    rows = b * (P * unit[0]) + i
    vals = values
    if transposed:  # the transpose's pattern: sort by its rows
        order = torch.argsort(rows * (Q * unit[1]) + j, stable=True)
        rows, j, vals = rows[order], j[order], vals.index_select(0, order)
    crow_s = _ops.crow_from_rows(rows.contiguous(), B * P * unit[0])
    col_s = j.contiguous()
    if layout in BLOCK:
        per_slice = _fill.is_per_slice(fill, len(dense_shape))
        sfill = _stacked_fill(fill, size, nb, transposed) if per_slice else fill
        crow_s, col_s, vals = _compressed.bsr_from_csr(
            crow_s, col_s, vals, sfill, unit, (B * P * unit[0], Q * unit[1]) + dense_shape)
        if layout == torch.sparse_bsc:
            vals = vals.transpose(1, 2)
    bounds = crow_s[::P] if P else crow_s.new_zeros(B + 1)
    counts = bounds.diff()
    nse = int(counts.max()) if B else 0
    if B and bool((counts != nse).any()):
        indices, values = _padded(indices, values, fill, size, layout, blocksize, crow_s,
                                  col_s, counts, nse, Q)
        return from_coo(indices, values, fill, size, layout, blocksize)
    compressed = torch.cat([crow_s[:-1].reshape(B, P) - bounds[:-1, None],
                            torch.full((B, 1), nse, dtype=crow_s.dtype, device=crow_s.device)],
                           1)
    return (compressed.reshape(batch + (P + 1,)).contiguous(),
            col_s.reshape(batch + (nse,)).contiguous(),
            vals.reshape(batch + (nse,) + tuple(vals.shape[1:])))


def _ravel(idx, batch):
    flat = torch.zeros_like(idx[0]) if idx.shape[0] else None
    for d, s in enumerate(batch):
        flat = flat * s + idx[d]
    return flat


def _padded(indices, values, fill, size, layout, blocksize, crow_s, col_s, counts, nse, Q):
    """COO components with one fill-valued element added at an unspecified
    unit (element or block) of each batch per unit it lacks: the first units
    of its pattern, in order, that it does not store."""
    nb = indices.shape[0] - 2
    batch = tuple(size[:nb])
    B = counts.shape[0]
    dense_shape = tuple(values.shape[1:])
    need = nse - counts
    # Unit k of a batch is (k // Q, k % Q) of its pattern; only units below
    # nse can be needed (a batch lacking some stores fewer than nse units).
    srow = _ops.rows_from_crow(crow_s)
    P = (crow_s.shape[0] - 1) // B
    sb, sp = srow // P, srow % P
    lin = sp * Q + col_s
    stored = torch.zeros(B, nse + 1, dtype=torch.bool, device=indices.device)
    keep = lin < nse
    stored[sb[keep], lin[keep]] = True
    free = ~stored[:, :nse]
    pick = free & (torch.cumsum(free, 1) <= need[:, None])
    pb, k = pick.nonzero().unbind(1)
    p, q = k // Q, k % Q
    r, c = blocksize or (1, 1)
    if layout == torch.sparse_csr:
        i, j = p, q
    elif layout == torch.sparse_csc:
        i, j = q, p
    elif layout == torch.sparse_bsr:
        i, j = p * r, q * c
    else:
        i, j = q * r, p * c
    bidx = torch.unravel_index(pb, batch)
    new = torch.stack(list(bidx) + [i, j])
    if _fill.is_per_slice(fill, len(dense_shape)):
        new_values = _fill.at(fill, new, dense_shape)
    else:
        new_values = fill.expand((new.shape[1],) + dense_shape)
    all_indices = torch.cat([indices, new], 1)
    all_values = torch.cat([values, new_values.to(values.dtype)], 0)
    key = torch.zeros_like(all_indices[0])
    for d, s in enumerate(tuple(size[:nb + 2])):
        key = key * s + all_indices[d]
    order = torch.argsort(key)
    return all_indices[:, order], all_values.index_select(0, order)


def swapped_fill(fill, nb: int, dense_dim: int):
    """The fill of the transpose of the last two sparse dims: a per-slice
    fill (full rank) swaps them; a dense-part fill is unchanged.

    Example: a per-batch fill ``(2, 1, 1)`` stays ``(2, 1, 1)``.
    """
    return fill.transpose(nb, nb + 1) if _fill.is_per_slice(fill, dense_dim) else fill


def check(layout, compressed, plain, values, size, names, blocksize, renamed):
    """Validate batched components with torch's rules, naming the argument:
    the batch shapes agree, every batch's compressed indices start at 0 and
    end at nse, and every batch is a valid unbatched pattern. Returns the
    batch shape. `renamed` puts a message of the unbatched CSR check in the
    words of `layout`.

    Example: ``crow_indices`` of shape ``(2, 3)`` with ``col_indices`` of
    shape ``(3, 1)`` raises ``ValueError`` naming both.
    """
    cname, pname = names
    nb = compressed.dim() - 1
    batch = tuple(compressed.shape[:-1])
    if plain.dim() != compressed.dim() or tuple(plain.shape[:-1]) != batch:
        raise ValueError(f"{cname} and {pname} must have the same batch shape: got "
                         f"{tuple(compressed.shape)} and {tuple(plain.shape)}")
    block = layout in BLOCK
    if values.dim() < nb + (3 if block else 1) or tuple(values.shape[:nb]) != batch:
        raise ValueError(f"values of shape {tuple(values.shape)} must start with the batch "
                         f"shape {batch} of {cname}, then the nse dimension"
                         + (" and the blocksize" if block else ""))
    if values.shape[nb] != plain.shape[-1]:
        raise ValueError(f"values has {values.shape[nb]} elements per batch but {pname} has "
                         f"{plain.shape[-1]}: they must match")
    if tuple(size[:nb]) != batch:
        raise ValueError(f"size {tuple(size)} must start with the batch shape {batch} of "
                         f"{cname}")
    P, Q, _ = _pattern_shape(layout, size, nb, blocksize)
    what = "columns" if layout in _TRANSPOSED else "rows"
    if compressed.shape[-1] != P + 1:
        raise RuntimeError(f"{cname}.shape[-1] must be equal to the number of compressed "
                           f"{what}{' (blocks)' if block else ''} + 1 (={P + 1}), but got "
                           f"{compressed.shape[-1]}")
    if compressed.numel() and bool((compressed[..., 0] != 0).any()):
        raise RuntimeError(f"`{cname}[..., 0] == 0` is not satisfied.")
    if compressed.numel() and bool((compressed[..., -1] != plain.shape[-1]).any()):
        raise RuntimeError(f"`{cname}[..., -1] == nse` is not satisfied (nse = "
                           f"{plain.shape[-1]}).")
    B = _fill.prod(batch)
    stacked = _stack_compressed(compressed.reshape(B, compressed.shape[-1]), plain.shape[-1])
    try:
        _ops.csr_check(stacked, plain.reshape(-1).contiguous(), [B * P, Q])
    except RuntimeError as e:
        raise RuntimeError(renamed(str(e).split("\n")[0])) from None
    return batch
