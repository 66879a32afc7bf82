"""The public constructors of SparseFillTensor from components: COO, CSR,
CSC, BSR, BSC (batched too). Every argument is checked
(checks.py) or by the C core (through torch.ops.sparsefill.coo_check / csr_check, on
the indices' own device) before a tensor is built; each error names the
argument and the rule."""
from __future__ import annotations

import re

import torch

from ..tensor import batched as _batched
from ..tensor.compressed import BLOCK
from ..tensor import SparseFillTensor, build
from ..tensor.indefinite import takes_indefinite
from .checks import (NOT_COALESCED, as_fill, as_index_tensor, as_values, check_size,
                     checked_coalesced, compressed_size, leafify)

_ops = torch.ops.sparsefill

__all__ = ["sparse_coo_tensor", "sparse_csr_tensor", "sparse_compressed_tensor",
           "sparse_csc_tensor", "sparse_bsr_tensor", "sparse_bsc_tensor"]

@takes_indefinite
def sparse_coo_tensor(indices=None, values=None, size=None, *, fill_value=None, dtype=None,
                      device=None, requires_grad=False, is_coalesced=None,
                      check_invariants=None) -> SparseFillTensor:
    """A COO SparseFillTensor: `values` at `indices`, `fill_value` elsewhere.

    Args:
        indices: integer tensor (sparse_dim, nse); duplicates are allowed and
            summed by ``coalesce()``.
        values: tensor (nse, *dense_shape).
        size: the full shape; inferred from indices and values when None.
        fill_value: number or tensor broadcastable to the dense part, or a
            per-slice fill of full rank (e.g. shape (m, 1) for one fill per row;
            RFC.md#the-fill and RFC.md#per-slice-fills); default 0. A tensor that requires grad receives the
            fill gradient.
        requires_grad: make values and fill autograd leaves.
        is_coalesced: torch's flag (RFC.md#stored-elements): by default True only for
            fewer than two elements; True claims sorted unique indices
            (checked: a false claim raises ValueError).
        check_invariants: accepted for torch's signature; the invariants
            are always checked.

    With only ``size`` (no indices, no values) the tensor has no stored
    element, as ``torch.sparse_coo_tensor(size=...)``.

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3., 4., 5.], (2, 3), fill_value=5.)
        >>> A.to_dense()
        tensor([[5., 5., 3.],
                [4., 5., 5.]])
    """
    if indices is None and values is None:
        if size is None:
            raise TypeError("sparse_coo_tensor(): give indices and values, or size alone")
        size = check_size(size)
        indices = torch.zeros(len(size), 0, dtype=torch.int64, device=device)
        values = torch.zeros(0, dtype=dtype or torch.get_default_dtype(), device=device)
    elif indices is None or values is None:
        raise TypeError(f"sparse_coo_tensor(): missing {'indices' if indices is None else 'values'}"
                        f" (give indices and values, or size alone)")
    values = as_values(values, dtype, device)
    indices = as_index_tensor(indices, "indices", device, values.device)
    if indices.device != values.device:
        raise RuntimeError(f"indices are on {indices.device} but values are on {values.device}")
    if indices.dim() != 2:
        raise ValueError(f"indices must be 2-D (sparse_dim, nse), got shape {tuple(indices.shape)}")
    if values.dim() < 1:
        raise ValueError("values must have a leading nse dimension, got a 0-d tensor")
    sparse_dim, nse = indices.shape
    if values.shape[0] != nse:
        raise ValueError(f"values has {values.shape[0]} rows but indices has {nse} elements: "
                         f"they must match")
    dense_shape = tuple(values.shape[1:])
    if size is None:
        sparse_size = tuple((indices.amax(1) + 1).tolist()) if nse > 0 else (0,) * sparse_dim
        size = sparse_size + dense_shape
    size = check_size(size)
    if len(size) != sparse_dim + len(dense_shape):
        raise ValueError(f"size {size} must have sparse_dim + dense_dim = {sparse_dim} + "
                         f"{len(dense_shape)} dimensions (indices rows + values dims - 1)")
    if size[sparse_dim:] != dense_shape:
        raise ValueError(f"values' dense part {dense_shape} does not match size{size}'s dense "
                         f"dimensions {size[sparse_dim:]}")
    coalesced = checked_coalesced(_ops.coo_check(indices, list(size[:sparse_dim])),
                                   is_coalesced, nse)
    if is_coalesced and not coalesced:
        raise ValueError(NOT_COALESCED)
    flag = nse < 2 if is_coalesced is None else bool(is_coalesced)
    fill = as_fill(fill_value, values.dtype, values.device, dense_shape, size)
    values, fill = leafify(values, fill, requires_grad)
    return build(torch.sparse_coo, size, values, fill, indices=indices.contiguous(),
                 coalesced=coalesced, coalesced_flag=flag)


@takes_indefinite
def sparse_csr_tensor(crow_indices=None, col_indices=None, values=None, size=None, *,
                      fill_value=None, dtype=None, device=None, requires_grad=False,
                      check_invariants=None) -> SparseFillTensor:
    """A CSR SparseFillTensor (2 sparse dims, optional trailing dense dims).

    Columns must be strictly increasing within each row (no duplicates).
    With only ``size`` the tensor has no stored element (torch asks for the
    three components; the COO constructor's size-only form, extended).
    ``check_invariants`` is accepted for torch's signature; the invariants
    are always checked.

    Example::

        >>> sf.sparse_csr_tensor([0, 1, 1], [2], [7.], (2, 3), fill_value=-1.).to_dense()
        tensor([[-1., -1.,  7.],
                [-1., -1., -1.]])
    """
    given = [x is not None for x in (crow_indices, col_indices, values)]
    if not any(given):
        if size is None:
            raise TypeError("sparse_csr_tensor(): give crow_indices, col_indices and values, "
                            "or size alone")
        size = check_size(size)
        if len(size) != 2:
            raise ValueError(f"sparse_csr_tensor(size=...): a CSR tensor needs 2 dimensions, "
                             f"got size {size}")
        crow_indices = torch.zeros(size[0] + 1, dtype=torch.int64, device=device)
        col_indices = torch.zeros(0, dtype=torch.int64, device=device)
        values = torch.zeros(0, dtype=dtype or torch.get_default_dtype(), device=device)
    elif not all(given):
        missing = [n for n, g in zip(("crow_indices", "col_indices", "values"), given) if not g]
        raise TypeError(f"sparse_csr_tensor(): missing {', '.join(missing)} (give all three "
                        f"components, or size alone)")
    values = as_values(values, dtype, device)
    if (isinstance(crow_indices, torch.Tensor) and isinstance(col_indices, torch.Tensor)
            and crow_indices.dtype != col_indices.dtype):
        raise TypeError(f"crow_indices and col_indices must have the same dtype, got "
                        f"{crow_indices.dtype} and {col_indices.dtype}")
    crow = as_index_tensor(crow_indices, "crow_indices", device, values.device)
    col = as_index_tensor(col_indices, "col_indices", device, values.device)
    if crow.dim() > 1:
        return _batched_compressed(torch.sparse_csr, crow, col, values, size, fill_value,
                                   requires_grad)
    for name, t in (("crow_indices", crow), ("col_indices", col)):
        if t.dim() != 1:
            raise ValueError(f"{name} must be 1-D like crow_indices, got shape "
                             f"{tuple(t.shape)}")
        if t.device != values.device:
            raise RuntimeError(f"{name} is on {t.device} but values are on {values.device}")
    if values.dim() < 1:
        raise ValueError("values must have a leading nse dimension, got a 0-d tensor")
    if values.shape[0] != col.shape[0]:
        raise ValueError(f"values has {values.shape[0]} rows but col_indices has "
                         f"{col.shape[0]} elements: they must match")
    if crow.shape[0] < 1:
        raise ValueError("crow_indices must have length rows + 1 >= 1")
    dense_shape = tuple(values.shape[1:])
    if size is None:
        ncols = int(col.max()) + 1 if col.numel() else 0
        size = (crow.shape[0] - 1, ncols) + dense_shape
    size = compressed_size(size, dense_shape)
    _ops.csr_check(crow, col, list(size[:2]))
    fill = as_fill(fill_value, values.dtype, values.device, dense_shape, size)
    values, fill = leafify(values, fill, requires_grad)
    return build(torch.sparse_csr, size, values, fill, crow=crow.contiguous(),
                 col=col.contiguous())


# ---- CSC, BSR, BSC (RFC.md#compressed-layouts): CSR rules on the stored pattern ---------------

_NAMES = {torch.sparse_csr: ("crow_indices", "col_indices"),
          torch.sparse_bsr: ("crow_indices", "col_indices"),
          torch.sparse_csc: ("ccol_indices", "row_indices"),
          torch.sparse_bsc: ("ccol_indices", "row_indices")}


def _renamed(message: str, layout) -> str:
    """A CSR check's message in the words of `layout`'s arguments."""
    if layout in (torch.sparse_csc, torch.sparse_bsc):
        words = {"crow_indices": "ccol_indices", "col_indices": "row_indices",
                 "rows + 1": "columns + 1", " columns": " rows", "within each row":
                 "within each column", "duplicate column": "duplicate row"}
        message = re.sub("|".join(re.escape(w) for w in words), lambda m: words[m.group(0)],
                         message)
    if layout in BLOCK:
        message = message.replace("sparsefill: ", "sparsefill: (the block pattern) ", 1)
    return message


@takes_indefinite
def sparse_compressed_tensor(compressed_indices, plain_indices, values, size=None, *,
                             layout=None, fill_value=None, dtype=None, device=None,
                             requires_grad=False) -> SparseFillTensor:
    """A CSR, CSC, BSR or BSC SparseFillTensor (torch's signature plus
    `fill_value`). For BSR/BSC the blocksize is ``values.shape[1:3]``.

    Example::

        >>> sf.sparse_compressed_tensor([0, 1, 1], [1], [[[1., 2.]]], (2, 4),
        ...                             layout=torch.sparse_bsr, fill_value=9.).to_dense()
        tensor([[9., 9., 1., 2.],
                [9., 9., 9., 9.]])
    """
    if layout not in _NAMES:
        raise ValueError(f"layout must be one of torch.sparse_csr, sparse_csc, sparse_bsr, "
                         f"sparse_bsc, got {layout}")
    if layout == torch.sparse_csr:
        return sparse_csr_tensor(compressed_indices, plain_indices, values, size,
                                            fill_value=fill_value, dtype=dtype, device=device,
                                            requires_grad=requires_grad)
    cname, pname = _NAMES[layout]
    values = as_values(values, dtype, device)
    if (isinstance(compressed_indices, torch.Tensor) and isinstance(plain_indices, torch.Tensor)
            and compressed_indices.dtype != plain_indices.dtype):
        raise TypeError(f"{cname} and {pname} must have the same dtype, got "
                        f"{compressed_indices.dtype} and {plain_indices.dtype}")
    compressed = as_index_tensor(compressed_indices, cname, device, values.device)
    plain = as_index_tensor(plain_indices, pname, device, values.device)
    if compressed.dim() > 1:
        return _batched_compressed(layout, compressed, plain, values, size, fill_value,
                                   requires_grad)
    for name, t in ((cname, compressed), (pname, plain)):
        if t.dim() != 1:
            raise ValueError(f"{name} must be 1-D like {cname}, got shape {tuple(t.shape)}")
        if t.device != values.device:
            raise RuntimeError(f"{name} is on {t.device} but values are on {values.device}")
    block = layout in BLOCK
    if values.dim() < (3 if block else 1):
        raise ValueError(f"values must have shape (nblocks, r, c, ...) for a block layout, got "
                         f"{tuple(values.shape)}" if block else
                         "values must have a leading nse dimension, got a 0-d tensor")
    blocksize = tuple(values.shape[1:3]) if block else None
    if block and min(blocksize) < 1:
        raise ValueError(f"values' blocksize {blocksize} must be positive")
    if values.shape[0] != plain.shape[0]:
        raise ValueError(f"values has {values.shape[0]} rows but {pname} has "
                         f"{plain.shape[0]} elements: they must match")
    if compressed.shape[0] < 1:
        raise ValueError(f"{cname} must have length {'columns' if cname[1] == 'c' else 'rows'}"
                         f" + 1 >= 1")
    r, c = blocksize or (1, 1)
    dense_shape = tuple(values.shape[(3 if block else 1):])
    if size is None:
        n_plain = int(plain.max()) + 1 if plain.numel() else 0
        n_compressed = compressed.shape[0] - 1
        if layout == torch.sparse_bsr:
            size = (n_compressed * r, n_plain * c)
        elif layout == torch.sparse_bsc:
            size = (n_plain * r, n_compressed * c)
        else:
            size = (n_plain, n_compressed)
        size = size + dense_shape
    size = compressed_size(size, dense_shape)
    if size[0] % r or size[1] % c:
        raise ValueError(f"size {size} is not divisible by blocksize {blocksize}")
    # The CSR pattern actually stored: over blocks, of the transpose for CSC/BSC.
    pattern = (size[0] // r, size[1] // c)
    if layout in (torch.sparse_csc, torch.sparse_bsc):
        pattern = pattern[::-1]
    try:
        _ops.csr_check(compressed, plain, list(pattern))
    except RuntimeError as e:
        raise RuntimeError(_renamed(str(e).split("\n")[0], layout)) from None
    fill = as_fill(fill_value, values.dtype, values.device, dense_shape, size)
    values, fill = leafify(values, fill, requires_grad)
    return build(layout, size, values, fill, crow=compressed.contiguous(),
                 col=plain.contiguous(), blocksize=blocksize)


def _batched_compressed(layout, compressed, plain, values, size, fill_value, requires_grad):
    """A batched compressed tensor (RFC.md#batched-compressed), validated with torch's
    rules: `compressed` ``(*batch, P + 1)``, `plain` ``(*batch, nse)``,
    `values` ``(*batch, nse, [r, c,] *dense)``; every batch the same nse."""
    cname, pname = _NAMES[layout]
    for name, t in ((cname, compressed), (pname, plain)):
        if t.device != values.device:
            raise RuntimeError(f"{name} is on {t.device} but values are on {values.device}")
    if compressed.dtype != plain.dtype:
        raise TypeError(f"{cname} and {pname} must have the same dtype, got "
                        f"{compressed.dtype} and {plain.dtype}")
    nb = compressed.dim() - 1
    block = layout in BLOCK
    if tuple(plain.shape[:-1]) != tuple(compressed.shape[:-1]) or plain.dim() != nb + 1:
        raise ValueError(f"{cname} and {pname} must have the same batch shape: got "
                         f"{tuple(compressed.shape)} and {tuple(plain.shape)}")
    if values.dim() < nb + (3 if block else 1):
        raise ValueError(f"values of shape {tuple(values.shape)} must start with the batch "
                         f"shape {tuple(compressed.shape[:-1])} of {cname}, then the nse "
                         f"dimension" + (" and the blocksize" if block else ""))
    blocksize = tuple(values.shape[nb + 1:nb + 3]) if block else None
    if block and min(blocksize) < 1:
        raise ValueError(f"values' blocksize {blocksize} must be positive")
    r, c = blocksize or (1, 1)
    dense_shape = tuple(values.shape[nb + (3 if block else 1):])
    batch = tuple(compressed.shape[:-1])
    if size is None:  # torch's inference: the plain size from the largest plain index
        n_plain = int(plain.max()) + 1 if plain.numel() else 0
        n_compressed = compressed.shape[-1] - 1
        if layout in (torch.sparse_csc, torch.sparse_bsc):
            size = (n_plain * r, n_compressed * c)
        else:
            size = (n_compressed * r, n_plain * c)
        size = batch + size + dense_shape
    size = check_size(size)
    if len(size) != nb + 2 + len(dense_shape) or size[nb + 2:] != dense_shape:
        raise ValueError(f"size {size} must have {nb} batch + 2 sparse + {len(dense_shape)} "
                         f"dense dimensions, the dense ones {dense_shape} as in values")
    if size[nb] % r or size[nb + 1] % c:
        raise ValueError(f"size {size} is not divisible by blocksize {blocksize}")
    _batched.check(layout, compressed, plain, values, size, (cname, pname), blocksize,
                   lambda message: _renamed(message, layout))
    fill = as_fill(fill_value, values.dtype, values.device, dense_shape, size)
    values, fill = leafify(values, fill, requires_grad)
    return build(layout, size, values, fill, crow=compressed.contiguous(),
                 col=plain.contiguous(), blocksize=blocksize)


def sparse_csc_tensor(ccol_indices, row_indices, values, size=None, *, fill_value=None,
                      dtype=None, device=None, requires_grad=False) -> SparseFillTensor:
    """A CSC SparseFillTensor: rows strictly increasing within each column.

    Example::

        >>> sf.sparse_csc_tensor([0, 1, 1], [1], [7.], (2, 2), fill_value=-1.).to_dense()
        tensor([[-1., -1.],
                [ 7., -1.]])
    """
    return sparse_compressed_tensor(ccol_indices, row_indices, values, size,
                                    layout=torch.sparse_csc, fill_value=fill_value, dtype=dtype,
                                    device=device, requires_grad=requires_grad)


def sparse_bsr_tensor(crow_indices, col_indices, values, size=None, *, fill_value=None,
                      dtype=None, device=None, requires_grad=False) -> SparseFillTensor:
    """A BSR SparseFillTensor: `values` ``(nblocks, r, c, *dense)`` are whole
    blocks; elements outside every stored block equal `fill_value`.

    Example::

        >>> sf.sparse_bsr_tensor([0, 1], [1], torch.ones(1, 2, 2), (2, 4), fill_value=5.).to_dense()
        tensor([[5., 5., 1., 1.],
                [5., 5., 1., 1.]])
    """
    return sparse_compressed_tensor(crow_indices, col_indices, values, size,
                                    layout=torch.sparse_bsr, fill_value=fill_value, dtype=dtype,
                                    device=device, requires_grad=requires_grad)


def sparse_bsc_tensor(ccol_indices, row_indices, values, size=None, *, fill_value=None,
                      dtype=None, device=None, requires_grad=False) -> SparseFillTensor:
    """A BSC SparseFillTensor (block columns; see :func:`sparse_bsr_tensor`).

    Example::

        >>> sf.sparse_bsc_tensor([0, 0, 1], [0], torch.ones(1, 2, 2), (2, 4)).to_dense()
        tensor([[0., 0., 1., 1.],
                [0., 0., 1., 1.]])
    """
    return sparse_compressed_tensor(ccol_indices, row_indices, values, size,
                                    layout=torch.sparse_bsc, fill_value=fill_value, dtype=dtype,
                                    device=device, requires_grad=requires_grad)


