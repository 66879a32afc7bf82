"""Tensors made from a value or a dense tensor: sf.full, zeros, ones, empty,
sf.to_sparse of a strided tensor; sf.fill_value of any sparse tensor and
sf.eliminate_fill."""
from __future__ import annotations

from typing import Sequence

import torch

from ..tensor import indefinite as _indefinite
from ..tensor import SparseFillTensor, build
from ..tensor import compressed as _compressed
from ..tensor.compressed import BLOCK, COMPRESSED
from .checks import as_fill, check_size
from .constructors import sparse_compressed_tensor, sparse_coo_tensor

_ops = torch.ops.sparsefill

__all__ = ["to_sparse", "full", "zeros", "ones", "empty", "fill_value", "eliminate_fill"]


def to_sparse(x, *, fill_value=None, layout=None, dense_dim=0,
              blocksize=None, mask=None) -> SparseFillTensor:
    """Make a SparseFillTensor from a strided or a native sparse tensor.

    - strided ``x``: stored elements are those that differ from the fill
      (NaN equals a NaN fill); with ``dense_dim`` > 0 a sparse position is
      stored when any element of its dense part differs. Differentiable with
      respect to ``x`` (RFC.md#to-sparse-gradient).
    - native torch sparse ``x`` (any layout): wrapped without copying its
      values; its unspecified elements take ``fill_value`` (default 0).
    - a SparseFillTensor: converted to ``layout``.

    ``layout`` defaults to ``torch.sparse_coo`` for a strided ``x`` and to
    ``x``'s own layout (and blocksize) for a sparse one; ``sparse_bsr`` and
    ``sparse_bsc`` need ``blocksize`` (RFC.md#compressed-conversions).

    ``fill_value=sf.indefinite`` (RFC.md#indefinite-fill): a strided ``x``
    stores its elements that are not NaN (NaN marks "no value" in a dense
    view), or, given a boolean ``mask`` of x's shape, those where it is True.

    Example::

        >>> sf.to_sparse(torch.ones(10), fill_value=1.)._nnz()
        0
    """
    if layout is None:
        layout = x.layout if isinstance(x, torch.Tensor) and x.layout in (
            (torch.sparse_coo,) + COMPRESSED) else torch.sparse_coo
        if layout in BLOCK and blocksize is None:
            blocksize = (x._sf_blocksize if isinstance(x, SparseFillTensor)
                         else tuple(x.values().shape[1:3]))
    if mask is not None and fill_value is not _indefinite.indefinite:
        raise ValueError("to_sparse(mask=...): a mask selects the stored elements of an "
                         "indefinite tensor only (fill_value=sf.indefinite)")
    if isinstance(x, SparseFillTensor) and fill_value is _indefinite.indefinite:
        if not x.is_indefinite():
            raise ValueError("to_sparse(fill_value=sf.indefinite): x has a defined fill; "
                             "x.to_indefinite() forgets it")
        fill_value = None
    if isinstance(x, torch.Tensor) and x.layout == torch.strided and \
            fill_value is _indefinite.indefinite:
        return _indefinite_from_dense(x, mask, dense_dim).to_sparse(layout=layout,
                                                                   blocksize=blocksize)
    if isinstance(x, SparseFillTensor):
        if fill_value is not None:
            given, own = torch.broadcast_tensors(
                torch.as_tensor(fill_value, dtype=x.dtype, device=x.device), x.fill_value())
            same = torch.equal(given, own)
            if not same:
                raise ValueError("to_sparse(fill_value=...): x is already a SparseFillTensor "
                                 "with another fill; changing the fill is not a conversion "
                                 "(use x.to_dense() first, or x._fill_value().fill_() to "
                                 "reinterpret)")
        return x.to_sparse(layout=layout, blocksize=blocksize)
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a tensor, got {type(x).__name__}")
    if x.layout == torch.sparse_coo:
        out = sparse_coo_tensor(x._indices(), x._values(), x.shape, fill_value=fill_value,
                                is_coalesced=x.is_coalesced() or None)
        return out.to_sparse(layout=layout)
    if x.layout in COMPRESSED:
        names = ("crow_indices", "col_indices") if x.layout in (
            torch.sparse_csr, torch.sparse_bsr) else ("ccol_indices", "row_indices")
        out = sparse_compressed_tensor(*[getattr(x, n)() for n in names], x.values(), x.shape,
                                       layout=x.layout, fill_value=fill_value)
        return out.to_sparse(layout=layout, blocksize=blocksize)
    if x.layout != torch.strided:
        raise NotImplementedError(f"to_sparse: layout {x.layout} is not supported")
    if not 0 <= dense_dim <= x.dim():
        raise ValueError(f"dense_dim must be in [0, {x.dim()}], got {dense_dim}")
    sparse_dim = x.dim() - dense_dim
    fill = as_fill(fill_value, x.dtype, x.device, tuple(x.shape[sparse_dim:]),
                    tuple(x.shape) if sparse_dim > 0 else None)
    if fill.requires_grad:
        # The fill is the value x has on its unspecified set: a constant here.
        fill = fill.detach()
    if layout in BLOCK and sparse_dim == 2:  # straight to blocks, no element pattern
        blocksize = _compressed.check_blocksize(blocksize, x.shape, "to_sparse")
        compressed, plain, values = _compressed.blocks_from_dense(x, fill, blocksize, layout)
        return build(layout, x.shape, values, fill, crow=compressed, col=plain,
                     blocksize=blocksize)
    indices, values, fill = _ops.from_dense(x, fill, sparse_dim)
    out = build(torch.sparse_coo, x.shape, values, fill, indices=indices)
    return out.to_sparse(layout=layout, blocksize=blocksize)


def _indefinite_from_dense(x, mask, dense_dim) -> SparseFillTensor:
    """The indefinite tensor of a strided `x`: its non-NaN elements, or
    those `mask` selects (differentiable with respect to x)."""
    if dense_dim:
        raise NotImplementedError("to_sparse(fill_value=sf.indefinite, dense_dim>0): a hybrid "
                                  "indefinite tensor from a dense one is not supported")
    if mask is None:
        mask = ~torch.isnan(x) if x.is_floating_point() or x.is_complex() else \
            torch.ones_like(x, dtype=torch.bool)
    elif not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or \
            tuple(mask.shape) != tuple(x.shape):
        raise ValueError(f"to_sparse(mask=...): expected a bool tensor of x's shape "
                         f"{tuple(x.shape)}")
    indices = mask.nonzero().T.contiguous()
    out = build(torch.sparse_coo, x.shape, x[mask], _indefinite.placeholder(x.dtype, x.device),
                indices=indices)
    return _indefinite.mark(out)


def full(size, fill_value, *, layout=torch.sparse_coo, dtype=None, device=None,
         requires_grad=False, blocksize=None) -> SparseFillTensor:
    """A SparseFillTensor of `size` with no stored elements: every element is
    `fill_value`. dtype defaults as in ``torch.full``. A compressed `layout`
    (CSR, CSC, and BSR or BSC with `blocksize`) takes the last two dims of
    `size` as its sparse dims and any before them as batch dims (
    RFC.md#batched-compressed); a per-slice `fill_value` (1.5) is allowed as for the constructors.

    Example::

        >>> sf.full((2, 2), 3.).to_dense()
        tensor([[3., 3.],
                [3., 3.]])
        >>> sf.full((2, 4), 1., layout=torch.sparse_bsr, blocksize=2).values().shape
        torch.Size([0, 2, 2])
    """
    size = check_size(size)
    if dtype is None:
        if fill_value is _indefinite.indefinite:  # nothing stored: torch's default dtype
            dtype = torch.get_default_dtype()
        elif isinstance(fill_value, torch.Tensor):
            dtype = fill_value.dtype
        else:
            dtype = torch.full((), fill_value).dtype
    if layout == torch.sparse_coo:
        if blocksize is not None:
            raise ValueError("full(blocksize=...): blocksize is only for sparse_bsr and "
                             "sparse_bsc")
        return sparse_coo_tensor(torch.zeros(len(size), 0, dtype=torch.int64, device=device),
                                 torch.zeros(0, dtype=dtype, device=device), size,
                                 fill_value=fill_value, requires_grad=requires_grad)
    if layout not in COMPRESSED:
        raise ValueError(f"layout must be torch.sparse_coo, sparse_csr, sparse_csc, sparse_bsr "
                         f"or sparse_bsc, got {layout}")
    if len(size) < 2:
        raise ValueError(f"full(layout={layout}): a compressed tensor needs at least 2 "
                         f"dimensions, got size {size}")
    if layout in BLOCK:
        if blocksize is None:
            raise TypeError(f"full(layout={layout}): a block layout needs blocksize=")
        blocksize = _compressed.check_blocksize(blocksize, size[-2:], "full")
    elif blocksize is not None:
        raise ValueError("full(blocksize=...): blocksize is only for sparse_bsr and sparse_bsc")
    batch, (m, n) = size[:-2], size[-2:]
    r, c = blocksize or (1, 1)
    n_compressed = n // c if layout in (torch.sparse_csc, torch.sparse_bsc) else m // r
    return sparse_compressed_tensor(
        torch.zeros(batch + (n_compressed + 1,), dtype=torch.int64, device=device),
        torch.zeros(batch + (0,), dtype=torch.int64, device=device),
        torch.zeros(batch + (0,) + ((r, c) if blocksize else ()), dtype=dtype, device=device),
        size, layout=layout, fill_value=fill_value, requires_grad=requires_grad)


def _size_args(size) -> Sequence[int]:
    if len(size) == 1 and not isinstance(size[0], int):
        return tuple(size[0])
    return size


def zeros(*size, layout=torch.sparse_coo, dtype=None, device=None,
          requires_grad=False, blocksize=None) -> SparseFillTensor:
    """All-zero SparseFillTensor with no stored elements (fill 0).

    Example: ``sf.zeros(2, 3).to_dense()`` is ``torch.zeros(2, 3)``.
    """
    dtype = dtype or torch.get_default_dtype()
    return full(_size_args(size), 0, layout=layout, dtype=dtype, device=device,
                requires_grad=requires_grad, blocksize=blocksize)


def ones(*size, layout=torch.sparse_coo, dtype=None, device=None,
         requires_grad=False, blocksize=None) -> SparseFillTensor:
    """All-one SparseFillTensor with no stored elements (fill 1).

    Example: ``sf.ones(2, 3).to_dense()`` is ``torch.ones(2, 3)``.
    """
    dtype = dtype or torch.get_default_dtype()
    return full(_size_args(size), 1, layout=layout, dtype=dtype, device=device,
                requires_grad=requires_grad, blocksize=blocksize)


def empty(*size, layout=torch.sparse_coo, dtype=None, device=None,
          requires_grad=False, blocksize=None) -> SparseFillTensor:
    """``torch.empty(size, layout=torch.sparse_coo)`` of this package: the
    same as :func:`zeros` (torch's sparse empty tensor is all zeros too).

    Example: ``sf.empty(2, 3, layout=torch.sparse_csr).to_dense()`` is ``torch.zeros(2, 3)``.
    """
    return zeros(*size, layout=layout, dtype=dtype, device=device, requires_grad=requires_grad,
                 blocksize=blocksize)


def fill_value(t: torch.Tensor) -> torch.Tensor:
    """The fill of any sparse tensor: ours, or 0 for native torch sparse ones
    (shaped like the dense part, RFC.md#the-fill).

    Example::

        >>> sf.fill_value(torch.eye(2).to_sparse())
        tensor(0.)
    """
    if isinstance(t, SparseFillTensor):
        return t.fill_value()
    if isinstance(t, torch.Tensor) and t.layout in (torch.sparse_coo, torch.sparse_csr,
                                                    torch.sparse_csc, torch.sparse_bsr,
                                                    torch.sparse_bsc):
        dense_shape = t.shape[t.dim() - t.dense_dim():]
        return torch.zeros(dense_shape, dtype=t.dtype, device=t.device)
    raise TypeError(f"fill_value(): expected a sparse tensor, got "
                    f"{type(t).__name__} with layout {getattr(t, 'layout', None)}")


def eliminate_fill(t: SparseFillTensor) -> SparseFillTensor:
    """``t`` without its stored elements that equal the fill; see
    :meth:`SparseFillTensor.eliminate_fill`.

    Example::

        >>> sf.eliminate_fill(sf.to_sparse(torch.ones(3), fill_value=0.) * 0).nse()
        0
    """
    if not isinstance(t, SparseFillTensor):
        raise TypeError(f"eliminate_fill expects a SparseFillTensor, got {type(t).__name__}")
    return t.eliminate_fill()


