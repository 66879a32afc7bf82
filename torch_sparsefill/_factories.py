"""Public constructors of SparseFillTensor, and the rebuild that pickling,
``torch.load`` and ``copy.deepcopy`` go through. Every argument is checked
here or by the C core (through torch.ops.sparsefill.coo_check / csr_check, on
the indices' own device) before a tensor is built; each error names the
argument and the rule."""
from __future__ import annotations

import copy
import numbers
import re
from typing import Sequence

import torch

from . import _batched, _compressed, _fill
from ._compressed import BLOCK, COMPRESSED
from ._tensor import SparseFillTensor, build

_ops = torch.ops.sparsefill

__all__ = ["sparse_coo_tensor", "sparse_csr_tensor", "to_sparse", "full", "zeros", "ones",
           "empty", "fill_value", "eliminate_fill", "sparse_compressed_tensor", "sparse_csc_tensor",
           "sparse_bsr_tensor", "sparse_bsc_tensor"]

_SCALAR_DTYPE = {bool: torch.bool, int: torch.int64, float: torch.float64,
                 complex: torch.complex128}


def _as_index_tensor(x, name: str, device, values_device) -> torch.Tensor:
    """An int64 index tensor; moved only when the caller asked for `device`."""
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(x, device=values_device)
    if isinstance(t, SparseFillTensor) or t.layout != torch.strided:
        raise TypeError(f"{name} must be a strided tensor, got layout {t.layout}")
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        if t.numel() == 0 and not isinstance(x, torch.Tensor):
            t = t.to(torch.int64)  # torch.as_tensor([]) is float; an empty list is fine
        else:
            raise TypeError(f"{name} must be an integer tensor, got dtype {t.dtype}")
    if device is not None:
        t = t.to(device)
    return t.to(torch.int64)


def _as_values(values, dtype, device) -> torch.Tensor:
    if isinstance(values, SparseFillTensor):
        raise TypeError("values must be a strided tensor, got a SparseFillTensor")
    if isinstance(values, torch.Tensor):
        if values.layout != torch.strided:
            raise TypeError(f"values must be a strided tensor, got layout {values.layout}")
        return values.to(dtype=dtype, device=device)
    return torch.as_tensor(values, dtype=dtype, device=device)


def _scalar_castable(x, dtype: torch.dtype) -> bool:
    kind = type(x) if type(x) in _SCALAR_DTYPE else None
    if kind is None:
        for k in (bool, numbers.Integral, numbers.Real, numbers.Complex):
            if isinstance(x, k):
                kind = {bool: bool, numbers.Integral: int, numbers.Real: float,
                        numbers.Complex: complex}[k]
                break
    if kind is None:
        return False
    if dtype == torch.bool and kind is int and x in (0, 1):
        return True
    return torch.can_cast(_SCALAR_DTYPE[kind], dtype)


def _as_fill(fill_value, dtype: torch.dtype, device, dense_shape, size=None) -> torch.Tensor:
    """The stored fill: a tensor of `dtype` on `device`, broadcastable to the
    dense part (RFC.md section 1.3) or, given the full `size`, a per-slice
    fill of rank len(size) that broadcasts to `size` (section 1.5), in its
    canonical form. Differentiable when given a tensor."""
    if fill_value is None:
        return torch.zeros((), dtype=dtype, device=device)
    if isinstance(fill_value, torch.Tensor):
        if isinstance(fill_value, SparseFillTensor) or fill_value.layout != torch.strided:
            raise TypeError("fill_value must be a number or a strided tensor")
        if fill_value.device != device:
            raise RuntimeError(f"fill_value is on {fill_value.device} but values are on "
                               f"{device}: all components must be on one device")
        if not torch.can_cast(fill_value.dtype, dtype):
            raise TypeError(f"fill_value of dtype {fill_value.dtype} cannot be cast to the "
                            f"tensor's dtype {dtype}")
        fill = fill_value
    else:
        if not _scalar_castable(fill_value, dtype):
            raise TypeError(f"fill_value {fill_value!r} ({type(fill_value).__name__}) cannot be "
                            f"cast to the tensor's dtype {dtype}")
        fill = torch.tensor(fill_value, dtype=dtype, device=device)
    dense_shape = tuple(dense_shape)
    if size is not None and _fill.is_per_slice(fill, len(dense_shape)):
        size = tuple(size)
        sparse_dim = len(size) - len(dense_shape)
        if sparse_dim < 1 or fill.dim() != len(size) or not _broadcasts_to(fill.shape, size):
            raise ValueError(f"fill_value of shape {tuple(fill.shape)} is neither broadcastable "
                             f"to the dense part's shape {dense_shape} nor a per-slice fill: "
                             f"that has the tensor's {len(size)} dimensions and broadcasts to "
                             f"its size {size} (RFC.md section 1.5)")
        return _fill.canonical(fill, sparse_dim, len(dense_shape)).to(dtype)
    if not _broadcasts_to(fill.shape, dense_shape):
        raise ValueError(f"fill_value of shape {tuple(fill.shape)} is not broadcastable to the "
                         f"dense part's shape {dense_shape}: give a fill that broadcasts to "
                         f"the dense part, or a per-slice fill of the tensor's full rank "
                         f"(RFC.md section 1.5)")
    return fill.to(dtype)


def _broadcasts_to(shape, target) -> bool:
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(shape, tuple(target)[len(target) - len(shape):]))


def _check_size(size, name="size") -> tuple:
    try:
        size = tuple(int(s) for s in size)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of integers, got {size!r}") from None
    for d, s in enumerate(size):
        if s < 0:
            raise ValueError(f"{name} must be non-negative, got {size} (dimension {d})")
    return size


def _compressed_size(size, dense_shape) -> tuple:
    """The size of a compressed tensor, checked: 2 sparse dims, then exactly
    the dense part of `values`."""
    size = _check_size(size)
    if len(size) != 2 + len(dense_shape):
        raise ValueError(f"size {size} must have 2 sparse + {len(dense_shape)} dense dimensions")
    if size[2:] != dense_shape:
        raise ValueError(f"values' dense part {dense_shape} does not match size{size}'s dense "
                         f"dimensions {size[2:]}")
    return size


def _leafify(values, fill, requires_grad):
    if not requires_grad:
        return values, fill
    if not (values.dtype.is_floating_point or values.dtype.is_complex):
        raise RuntimeError(f"requires_grad=True needs a floating point or complex dtype, got "
                           f"{values.dtype}")
    # As torch.sparse_coo_tensor: a component that already takes part in
    # autograd keeps its graph; any other becomes a leaf that requires grad.
    return tuple(t if t.requires_grad else t.detach().requires_grad_() for t in (values, fill))


_NOT_COALESCED = ("is_coalesced=True, but the indices are not sorted and unique: leave "
                  "is_coalesced unset and call .coalesce()")


def _checked_coalesced(coalesced, is_coalesced, nse):
    """Whether the checked indices (coo_check's 0-d bool tensor) are
    coalesced, as a Python bool. A tracer (torch.export) cannot read it: the
    program then takes the user's word (is_coalesced=True, asserted when it
    runs) or treats the indices as not coalesced (later ops coalesce them:
    the same values), unless nse < 2."""
    if not torch.compiler.is_compiling():
        return bool(coalesced)
    if is_coalesced:
        torch._assert_async(coalesced, _NOT_COALESCED)
        return True
    # The check stays in the exported graph unused (torch.export keeps it,
    # test_compile.py asserts so) and refuses bad indices when it runs.
    return bool(nse < 2)


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
            RFC.md sections 1.3 and 1.5); default 0. A tensor that requires grad receives the
            fill gradient.
        requires_grad: make values and fill autograd leaves.
        is_coalesced: torch's flag (RFC.md 1.4): by default True only for
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
        size = _check_size(size)
        indices = torch.zeros(len(size), 0, dtype=torch.int64, device=device)
        values = torch.zeros(0, dtype=dtype or torch.get_default_dtype(), device=device)
    elif indices is None or values is None:
        raise TypeError(f"sparse_coo_tensor(): missing {'indices' if indices is None else 'values'}"
                        f" (give indices and values, or size alone)")
    values = _as_values(values, dtype, device)
    indices = _as_index_tensor(indices, "indices", device, values.device)
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
    size = _check_size(size)
    if len(size) != sparse_dim + len(dense_shape):
        raise ValueError(f"size {size} must have sparse_dim + dense_dim = {sparse_dim} + "
                         f"{len(dense_shape)} dimensions (indices rows + values dims - 1)")
    if size[sparse_dim:] != dense_shape:
        raise ValueError(f"values' dense part {dense_shape} does not match size{size}'s dense "
                         f"dimensions {size[sparse_dim:]}")
    coalesced = _checked_coalesced(_ops.coo_check(indices, list(size[:sparse_dim])),
                                   is_coalesced, nse)
    if is_coalesced and not coalesced:
        raise ValueError(_NOT_COALESCED)
    flag = nse < 2 if is_coalesced is None else bool(is_coalesced)
    fill = _as_fill(fill_value, values.dtype, values.device, dense_shape, size)
    values, fill = _leafify(values, fill, requires_grad)
    return build(torch.sparse_coo, size, values, fill, indices=indices.contiguous(),
                 coalesced=coalesced, coalesced_flag=flag)


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
        size = _check_size(size)
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
    values = _as_values(values, dtype, device)
    if (isinstance(crow_indices, torch.Tensor) and isinstance(col_indices, torch.Tensor)
            and crow_indices.dtype != col_indices.dtype):
        raise TypeError(f"crow_indices and col_indices must have the same dtype, got "
                        f"{crow_indices.dtype} and {col_indices.dtype}")
    crow = _as_index_tensor(crow_indices, "crow_indices", device, values.device)
    col = _as_index_tensor(col_indices, "col_indices", device, values.device)
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
    size = _compressed_size(size, dense_shape)
    _ops.csr_check(crow, col, list(size[:2]))
    fill = _as_fill(fill_value, values.dtype, values.device, dense_shape, size)
    values, fill = _leafify(values, fill, requires_grad)
    return build(torch.sparse_csr, size, values, fill, crow=crow.contiguous(),
                 col=col.contiguous())


def to_sparse(x, *, fill_value=None, layout=None, dense_dim=0,
              blocksize=None) -> SparseFillTensor:
    """Make a SparseFillTensor from a strided or a native sparse tensor.

    - strided ``x``: stored elements are those that differ from the fill
      (NaN equals a NaN fill); with ``dense_dim`` > 0 a sparse position is
      stored when any element of its dense part differs. Differentiable with
      respect to ``x`` (RFC.md section 7.5).
    - native torch sparse ``x`` (any layout): wrapped without copying its
      values; its unspecified elements take ``fill_value`` (default 0).
    - a SparseFillTensor: converted to ``layout``.

    ``layout`` defaults to ``torch.sparse_coo`` for a strided ``x`` and to
    ``x``'s own layout (and blocksize) for a sparse one; ``sparse_bsr`` and
    ``sparse_bsc`` need ``blocksize`` (RFC.md section 15.2).

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
    fill = _as_fill(fill_value, x.dtype, x.device, tuple(x.shape[sparse_dim:]),
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


def full(size, fill_value, *, layout=torch.sparse_coo, dtype=None, device=None,
         requires_grad=False, blocksize=None) -> SparseFillTensor:
    """A SparseFillTensor of `size` with no stored elements: every element is
    `fill_value`. dtype defaults as in ``torch.full``. A compressed `layout`
    (CSR, CSC, and BSR or BSC with `blocksize`) takes the last two dims of
    `size` as its sparse dims and any before them as batch dims (RFC.md
    15.4); a per-slice `fill_value` (1.5) is allowed as for the constructors.

    Example::

        >>> sf.full((2, 2), 3.).to_dense()
        tensor([[3., 3.],
                [3., 3.]])
        >>> sf.full((2, 4), 1., layout=torch.sparse_bsr, blocksize=2).values().shape
        torch.Size([0, 2, 2])
    """
    size = _check_size(size)
    if dtype is None:
        if isinstance(fill_value, torch.Tensor):
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
    (shaped like the dense part, RFC.md section 1.3).

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


# ---- CSC, BSR, BSC (RFC.md section 15): CSR rules on the stored pattern ---------------

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
    values = _as_values(values, dtype, device)
    if (isinstance(compressed_indices, torch.Tensor) and isinstance(plain_indices, torch.Tensor)
            and compressed_indices.dtype != plain_indices.dtype):
        raise TypeError(f"{cname} and {pname} must have the same dtype, got "
                        f"{compressed_indices.dtype} and {plain_indices.dtype}")
    compressed = _as_index_tensor(compressed_indices, cname, device, values.device)
    plain = _as_index_tensor(plain_indices, pname, device, values.device)
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
    size = _compressed_size(size, dense_shape)
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
    fill = _as_fill(fill_value, values.dtype, values.device, dense_shape, size)
    values, fill = _leafify(values, fill, requires_grad)
    return build(layout, size, values, fill, crow=compressed.contiguous(),
                 col=plain.contiguous(), blocksize=blocksize)


def _batched_compressed(layout, compressed, plain, values, size, fill_value, requires_grad):
    """A batched compressed tensor (RFC.md 15.4), validated with torch's
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
    size = _check_size(size)
    if len(size) != nb + 2 + len(dense_shape) or size[nb + 2:] != dense_shape:
        raise ValueError(f"size {size} must have {nb} batch + 2 sparse + {len(dense_shape)} "
                         f"dense dimensions, the dense ones {dense_shape} as in values")
    if size[nb] % r or size[nb + 1] % c:
        raise ValueError(f"size {size} is not divisible by blocksize {blocksize}")
    _batched.check(layout, compressed, plain, values, size, (cname, pname), blocksize,
                   lambda message: _renamed(message, layout))
    fill = _as_fill(fill_value, values.dtype, values.device, dense_shape, size)
    values, fill = _leafify(values, fill, requires_grad)
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


# ---- pickling, torch.save/torch.load, copy.deepcopy ---------------------------------

def _rebuild_sparsefill(layout_name, size, indices, crow, col, values, fill, coalesced,
                        requires_grad, is_param=False):
    """Unpickling entry point (torch.save/torch.load, copy, multiprocessing).

    Validates like the public constructors, so a tampered file cannot build
    an inconsistent tensor. `is_param`: it was an ``nn.Parameter`` (files
    written before it was recorded omit it).
    """
    if layout_name == "sparse_coo":
        out = sparse_coo_tensor(indices, values, size, fill_value=fill,
                                requires_grad=requires_grad, is_coalesced=coalesced or None)
    else:
        layout = {"sparse_csr": torch.sparse_csr, "sparse_csc": torch.sparse_csc,
                  "sparse_bsr": torch.sparse_bsr, "sparse_bsc": torch.sparse_bsc}.get(layout_name)
        if layout is None:
            raise ValueError(f"unknown SparseFillTensor layout {layout_name!r}")
        out = sparse_compressed_tensor(crow, col, values, size, layout=layout, fill_value=fill,
                                       requires_grad=requires_grad)
    if is_param:
        out._is_param = True  # what nn.Parameter(A) marks on a tensor subclass
    return out


def _rebuild_args(A: SparseFillTensor, detach) -> tuple:
    comps = [None if t is None else detach(t) for t in
             (A._sf_indices, A._sf_crow, A._sf_col, A._sf_values, A._sf_fill)]
    return (str(A.layout).split(".")[-1], A._sf_size, *comps, A._sf_coalesced_flag,
            A.requires_grad, bool(getattr(A, "_is_param", False)))


def reduce_ex(self: SparseFillTensor, protocol):
    """``SparseFillTensor.__reduce_ex__``: pickle the components; unpickling
    validates them again (``_rebuild_sparsefill``)."""
    return _rebuild_sparsefill, _rebuild_args(self, torch.Tensor.detach)


def deepcopy(self: SparseFillTensor, memo):
    """``SparseFillTensor.__deepcopy__``: copies of the components, validated
    like a new tensor."""
    if id(self) in memo:
        return memo[id(self)]
    out = _rebuild_sparsefill(*_rebuild_args(self, lambda t: copy.deepcopy(t.detach(), memo)))
    memo[id(self)] = out
    return out
