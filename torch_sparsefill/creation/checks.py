"""The argument checks of the public constructors: indices, values, fill and
size are turned into tensors of agreeing dtype and device, or refused with
an error that names the argument and the rule. The pattern itself is
checked by the C core (torch.ops.sparsefill.coo_check / csr_check, on the
indices' own device).
"""
from __future__ import annotations

import numbers
import operator

import torch

from ..tensor import SparseFillTensor
from ..tensor import fill as _fill

_ops = torch.ops.sparsefill

SCALAR_DTYPE = {bool: torch.bool, int: torch.int64, float: torch.float64,
                 complex: torch.complex128}


def as_index_tensor(x, name: str, device, values_device) -> torch.Tensor:
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


def as_values(values, dtype, device) -> torch.Tensor:
    if isinstance(values, SparseFillTensor):
        raise TypeError("values must be a strided tensor, got a SparseFillTensor")
    if isinstance(values, torch.Tensor):
        if values.layout != torch.strided:
            raise TypeError(f"values must be a strided tensor, got layout {values.layout}")
        return values.to(dtype=dtype, device=device)
    return torch.as_tensor(values, dtype=dtype, device=device)


def scalar_castable(x, dtype: torch.dtype) -> bool:
    kind = type(x) if type(x) in SCALAR_DTYPE else None
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
    return torch.can_cast(SCALAR_DTYPE[kind], dtype)


def as_fill(fill_value, dtype: torch.dtype, device, dense_shape, size=None) -> torch.Tensor:
    """The stored fill: a tensor of `dtype` on `device`, broadcastable to the
    dense part (RFC.md#the-fill) or, given the full `size`, a per-slice
    fill of rank len(size) that broadcasts to `size` (RFC.md#per-slice-fills), in its
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
        _check_integer_range(fill, dtype)
    else:
        if not scalar_castable(fill_value, dtype):
            raise TypeError(f"fill_value {fill_value!r} ({type(fill_value).__name__}) cannot be "
                            f"cast to the tensor's dtype {dtype}")
        try:
            fill = torch.tensor(fill_value, dtype=dtype, device=device)
        except RuntimeError:  # torch: "value cannot be converted ... without overflow"
            raise ValueError(f"fill_value {fill_value!r} is out of the range of the tensor's "
                             f"dtype {dtype}") from None
    dense_shape = tuple(dense_shape)
    if size is not None and _fill.is_per_slice(fill, len(dense_shape)):
        size = tuple(size)
        sparse_dim = len(size) - len(dense_shape)
        if sparse_dim < 1 or fill.dim() != len(size) or not broadcasts_to(fill.shape, size):
            raise ValueError(f"fill_value of shape {tuple(fill.shape)} is neither broadcastable "
                             f"to the dense part's shape {dense_shape} nor a per-slice fill: "
                             f"that has the tensor's {len(size)} dimensions and broadcasts to "
                             f"its size {size} (RFC.md#per-slice-fills)")
        return _fill.canonical(fill, sparse_dim, len(dense_shape)).to(dtype)
    if not broadcasts_to(fill.shape, dense_shape):
        raise ValueError(f"fill_value of shape {tuple(fill.shape)} is not broadcastable to the "
                         f"dense part's shape {dense_shape}: give a fill that broadcasts to "
                         f"the dense part, or a per-slice fill of the tensor's full rank "
                         f"(RFC.md#per-slice-fills)")
    return fill.to(dtype)


def broadcasts_to(shape, target) -> bool:
    if len(shape) > len(target):
        return False
    return all(s in (1, t) for s, t in zip(shape, tuple(target)[len(target) - len(shape):]))


def _check_integer_range(fill: torch.Tensor, dtype: torch.dtype) -> None:
    """A fill tensor of a wider integer dtype must fit `dtype` (torch's cast
    would wrap it silently: 2**40 as int32 is 0)."""
    if fill.dtype == dtype or fill.dtype.is_floating_point or fill.dtype.is_complex or \
            dtype.is_floating_point or dtype.is_complex or dtype == torch.bool or \
            fill.is_meta or torch.compiler.is_compiling():
        return
    info = torch.iinfo(dtype)
    if bool(((fill < info.min) | (fill > info.max)).any()):
        raise ValueError(f"fill_value {fill.detach().cpu().tolist()} ({fill.dtype}) is out of "
                         f"the range of the tensor's dtype {dtype}")


def _index(s) -> int:
    """One extent of a size: an integer (torch refuses 3.5 rather than truncate it)."""
    if isinstance(s, torch.SymInt):
        return s
    return operator.index(s)


def check_size(size, name="size") -> tuple:
    try:
        size = tuple(_index(s) for s in size)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of integers, got {size!r}") from None
    for d, s in enumerate(size):
        if s < 0:
            raise ValueError(f"{name} must be non-negative, got {size} (dimension {d})")
    return size


def compressed_size(size, dense_shape) -> tuple:
    """The size of a compressed tensor, checked: 2 sparse dims, then exactly
    the dense part of `values`."""
    size = check_size(size)
    if len(size) != 2 + len(dense_shape):
        raise ValueError(f"size {size} must have 2 sparse + {len(dense_shape)} dense dimensions")
    if size[2:] != dense_shape:
        raise ValueError(f"values' dense part {dense_shape} does not match size{size}'s dense "
                         f"dimensions {size[2:]}")
    return size


def leafify(values, fill, requires_grad):
    if not requires_grad:
        return values, fill
    if not (values.dtype.is_floating_point or values.dtype.is_complex):
        raise RuntimeError(f"requires_grad=True needs a floating point or complex dtype, got "
                           f"{values.dtype}")
    # As torch.sparse_coo_tensor: a component that already takes part in
    # autograd keeps its graph; any other becomes a leaf that requires grad.
    return tuple(t if t.requires_grad else t.detach().requires_grad_() for t in (values, fill))


NOT_COALESCED = ("is_coalesced=True, but the indices are not sorted and unique: leave "
                  "is_coalesced unset and call .coalesce()")


def checked_coalesced(coalesced, is_coalesced, nse):
    """Whether the checked indices (coo_check's 0-d bool tensor) are
    coalesced, as a Python bool. A tracer (torch.export) cannot read it: the
    program then takes the user's word (is_coalesced=True, asserted when it
    runs) or treats the indices as not coalesced (later ops coalesce them:
    the same values), unless nse < 2."""
    if not torch.compiler.is_compiling():
        return bool(coalesced)
    if is_coalesced:
        torch._assert_async(coalesced, NOT_COALESCED)
        return True
    # The check stays in the exported graph unused (torch.export keeps it,
    # test_compile.py asserts so) and refuses bad indices when it runs.
    return bool(nse < 2)


