"""The compressed layouts beyond CSR, on components: CSC is the CSR pattern
of the transpose, BSR a CSR pattern over blocks whose values are whole
blocks, BSC the BSR pattern of the transpose (RFC.md#compressed-layouts). Every
conversion here is between such components and CSR components, and is
differentiable with respect to values and fill (indexing and index_put).

Imports only the fill rules; tensor/sparse_fill_tensor.py turns these into methods.
"""
from __future__ import annotations

import re

import torch

from . import fill as _fill

_ops = torch.ops.sparsefill

__all__ = ["ELEMENT", "BLOCK", "COMPRESSED", "EXTRA", "transpose_fill", "transpose_pattern",
           "csr_from_bsr", "bsr_from_csr", "check_blocksize", "dense_from_blocks",
           "blocks_from_dense", "NAMES", "renamed"]

ELEMENT = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc)
BLOCK = (torch.sparse_bsr, torch.sparse_bsc)
COMPRESSED = (torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)
# Layouts the op families never see: the routing converts them to CSR.
EXTRA = (torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc)
# The layout of the transpose (t() in O(1)).
SWAPPED = {torch.sparse_csr: torch.sparse_csc, torch.sparse_csc: torch.sparse_csr,
           torch.sparse_bsr: torch.sparse_bsc, torch.sparse_bsc: torch.sparse_bsr}
# The names of a compressed layout's (compressed, plain) indices, as its
# constructor's arguments and accessors say them.
NAMES = {torch.sparse_csr: ("crow_indices", "col_indices"),
         torch.sparse_bsr: ("crow_indices", "col_indices"),
         torch.sparse_csc: ("ccol_indices", "row_indices"),
         torch.sparse_bsc: ("ccol_indices", "row_indices")}


def renamed(message: str, layout) -> str:
    """A CSR check's message in the words of `layout`'s arguments.

    Example::

        >>> renamed("sparsefill: col_indices out of range", torch.sparse_csc)
        'sparsefill: row_indices out of range'
    """
    if layout in (torch.sparse_csc, torch.sparse_bsc):
        words = {"crow_indices": "ccol_indices", "col_indices": "row_indices",
                 "rows + 1": "columns + 1", " columns": " rows", "within each row":
                 "within each column", "duplicate column": "duplicate row"}
        message = re.sub("|".join(re.escape(w) for w in words), lambda m: words[m.group(0)],
                         message)
    if layout in BLOCK:
        message = message.replace("sparsefill: ", "sparsefill: (the block pattern) ", 1)
    return message


def transpose_fill(fill: torch.Tensor, dense_dim: int) -> torch.Tensor:
    """The fill of the transposed tensor: a per-slice fill (full rank) swaps
    its two sparse dims; a dense-part fill is unchanged.

    Example: a per-row fill of shape ``(3, 1)`` becomes per-column ``(1, 3)``.
    """
    return fill.transpose(0, 1) if _fill.is_per_slice(fill, dense_dim) else fill


def transpose_pattern(compressed, plain, values, n_plain: int):
    """CSR components of an ``(m, n)`` pattern -> CSR components of its
    transpose ``(n, m)`` (with `n_plain` = n), values permuted along: a
    stable sort by column, since rows are already in order. The CSR
    components of A's transpose are A's CSC components, so this converts
    CSR <-> CSC both ways.

    Example::

        >>> transpose_pattern(torch.tensor([0, 1, 2]), torch.tensor([1, 0]),
        ...                   torch.tensor([5., 6.]), 2)[2]
        tensor([6., 5.])
    """
    rows = _ops.rows_from_crow(compressed)
    plain_sorted, order = torch.sort(plain, stable=True)
    return (_ops.crow_from_rows(plain_sorted.contiguous(), n_plain), rows[order].contiguous(),
            values.index_select(0, order))


def _block_positions(brow, bcol, blocksize):
    """Row and column of every element of every block, each (nblocks, r, c)."""
    r, c = blocksize
    nblk = brow.numel()
    ar = torch.arange(r, device=brow.device)
    ac = torch.arange(c, device=brow.device)
    er = (brow * r)[:, None, None] + ar[None, :, None]
    ec = (bcol * c)[:, None, None] + ac[None, None, :]
    return er.expand(nblk, r, c), ec.expand(nblk, r, c)


def csr_from_bsr(crow, col, values, blocksize, nrows: int):
    """BSR components (values ``(nblocks, r, c, *dense)``) -> CSR components
    storing every element of every block.

    Example: one ``(2, 2)`` block gives four stored elements.
    """
    brow = _ops.rows_from_crow(crow)
    er, ec = _block_positions(brow, col, blocksize)
    er, ec = er.reshape(-1), ec.reshape(-1)
    # Blocks of one block row are in column order and so are the columns of a
    # block: a stable sort by row leaves every row's columns increasing.
    rows, order = torch.sort(er, stable=True)
    # sizes counted, not -1: with a 0 in the dense part -1 is ambiguous
    flat = values.reshape((values.shape[0] * values.shape[1] * values.shape[2],) +
                          tuple(values.shape[3:]))
    return (_ops.crow_from_rows(rows.contiguous(), nrows), ec[order].contiguous(),
            flat.index_select(0, order))


def _rank(key, n_keys: int):
    """The distinct values of `key` (in [0, n_keys)) in increasing order, and
    the position of each key among them: a mark per possible key when there
    are not many more of those than keys (linear time), a sort otherwise."""
    if n_keys > 4 * key.numel() + (1 << 20):
        return torch.unique(key, sorted=True, return_inverse=True)
    marked = torch.zeros(n_keys, dtype=torch.bool, device=key.device)
    marked[key] = True
    distinct = marked.nonzero().squeeze(1)
    rank = torch.cumsum(marked, 0) - 1
    return distinct, rank[key]


def bsr_from_csr(crow, col, values, fill, blocksize, size):
    """CSR components -> BSR components: a block is stored when it holds a
    stored element; its other elements take the fill at their position
    (RFC.md#compressed-conversions), so no element changes.

    Example: one stored element in a ``(2, 2)`` block stores the block, with
    the fill at its three other elements.
    """
    r, c = blocksize
    m, n = size[0], size[1]
    dense_shape = tuple(values.shape[1:])
    rows = _ops.rows_from_crow(crow)
    nbc = n // c
    key = (rows // r) * nbc + col // c
    blocks, slot = _rank(key, (m // r) * nbc)
    brow, bcol = blocks // nbc, blocks % nbc
    nblk = blocks.numel()
    if _fill.is_per_slice(fill, len(dense_shape)):
        er, ec = _block_positions(brow, bcol, blocksize)
        where = torch.stack([er.reshape(-1), ec.reshape(-1)])
        base = _fill.at(fill, where, dense_shape).reshape((nblk, r, c) + dense_shape)
    else:
        base = fill.expand((nblk, r, c) + dense_shape)
    block_values = torch.index_put(base.contiguous(), (slot, rows % r, col % c), values)
    return (_ops.crow_from_rows(brow.contiguous(), m // r), bcol.contiguous(), block_values)


def check_blocksize(blocksize, size, what: str) -> tuple:
    """`blocksize` as two positive ints that divide the two sparse sizes, or a
    clear error naming it.

    Example: ``check_blocksize(2, (4, 6), "to_sparse_bsr")`` is ``(2, 2)``.
    """
    if isinstance(blocksize, int) and not isinstance(blocksize, bool):
        blocksize = (blocksize, blocksize)
    try:
        blocksize = tuple(int(b) for b in blocksize)
    except TypeError:
        raise TypeError(f"{what}: blocksize must be an int or a pair of ints, "
                        f"got {blocksize!r}") from None
    if len(blocksize) != 2 or min(blocksize) < 1:
        raise ValueError(f"{what}: blocksize must be two positive ints, got {blocksize}")
    if size[0] % blocksize[0] or size[1] % blocksize[1]:
        raise RuntimeError(f"{what}: the sparse sizes {tuple(size[:2])} are not divisible by "
                           f"blocksize {blocksize}")
    return blocksize


def dense_from_blocks(layout, compressed, plain, values, fill, blocksize, size):
    """The strided tensor of BSR/BSC components: the fill broadcast over
    `size`, each stored block written in place; differentiable with respect
    to values and fill.

    Example: one ``(2, 2)`` block of ones in a ``(2, 4)`` BSR tensor with
    fill 5 gives ``[[5, 5, 1, 1], [5, 5, 1, 1]]``.
    """
    (r, c), (m, n), dense_shape = blocksize, size[:2], tuple(size[2:])
    blocks = _ops.rows_from_crow(compressed)
    brow, bcol = (blocks, plain) if layout == torch.sparse_bsr else (plain, blocks)
    out = fill.expand(size).clone(memory_format=torch.contiguous_format)
    # Index tensors on dims 0 and 2 around a slice: the indexed view has the
    # shape (nblocks, r, c, *dense) of `values`.
    out.view((m // r, r, n // c, c) + dense_shape)[brow, :, bcol, :] = values
    return out


def blocks_from_dense(x, fill, blocksize, layout):
    """BSR/BSC components of strided `x` (two sparse dims, then dense dims):
    a block is stored when one of its elements differs from the fill (NaN
    equals a NaN fill). Differentiable with respect to `x`.

    Example: ``blocks_from_dense(torch.eye(4), torch.tensor(0.), (2, 2),
    torch.sparse_bsr)`` stores the two diagonal blocks.
    """
    (r, c), (m, n), dense_shape = blocksize, x.shape[:2], tuple(x.shape[2:])
    differs = x != fill
    if bool(fill.isnan().any()):  # NaN equals a NaN fill; one pass less without one
        differs &= ~(x.isnan() & fill.isnan())
    if dense_shape:
        differs = differs.flatten(2).any(2)
    stored = differs.reshape(m // r, r, n // c, c).any(dim=(1, 3))
    if layout == torch.sparse_bsr:
        brow, bcol = stored.nonzero().unbind(1)
        compressed, plain = _ops.crow_from_rows(brow.contiguous(), m // r), bcol.contiguous()
    else:
        bcol, brow = stored.t().nonzero().unbind(1)
        compressed, plain = _ops.crow_from_rows(bcol.contiguous(), n // c), brow.contiguous()
    values = x.reshape((m // r, r, n // c, c) + dense_shape)[brow, :, bcol, :]
    return compressed, plain, values
