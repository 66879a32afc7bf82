"""Autocast (torch.autocast / torch.amp) for routed torch functions
(RFC.md#autocast).

torch applies autocast at the dispatcher, to the aten ops a dense call
reaches; a SparseFillTensor is handled above that, so its ops would see the
operands' own dtypes. Here each routed call under an enabled autocast asks
torch which dtype the same dense call computes in: it runs the callable on
one-element stand-ins of the operands (same dtypes, devices and ranks) under
the current autocast state. The floating-point operands are cast to that
dtype (a SparseFillTensor casts values and fill, differentiably) and the
routed handler runs with autocast off, so the result has the dtype and the
precision of the dense op under autocast, on every device and for every
policy torch has (lower precision, fp32, promote), without a second copy of
torch's op lists. A call whose stand-ins torch rejects runs unchanged.
"""
from __future__ import annotations

import torch

from ..tensor import SparseFillTensor

__all__: list = []

enabled = torch._C._is_any_autocast_enabled


def _tensors(args):
    for a in args:
        if isinstance(a, torch.Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from _tensors(a)


def _meta(x):
    """(dtype, rank, device) of a tensor, read without routing."""
    if isinstance(x, SparseFillTensor):
        return x._sf_values.dtype, len(x._sf_size), x._sf_values.device
    return x.dtype, x.dim(), x.device


def _stand_in(x):
    if isinstance(x, torch.Tensor):
        dtype, ndim, device = _meta(x)
        make = torch.ones if dtype.is_floating_point else torch.zeros
        return make((1,) * ndim, dtype=dtype, device=device)
    if isinstance(x, (list, tuple)):
        return type(x)(_stand_in(a) for a in x)
    return x


def _dense_dtype(func, args, kwargs):
    """The floating dtype the dense call computes in under the current
    autocast, or None (not a floating result, or not a call torch accepts
    on stand-ins)."""
    try:
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*_stand_in(args),
                       **{k: _stand_in(v) for k, v in kwargs.items() if k != "out"})
    except Exception:  # noqa: BLE001 -- a stand-in torch rejects: no policy to follow
        return None
    first = next(_tensors([out]), None)
    if first is None or not first.dtype.is_floating_point:
        return None
    return first.dtype


def _cast(x, dtype):
    if isinstance(x, torch.Tensor):
        own = _meta(x)[0]
        return x.to(dtype) if own.is_floating_point and own != dtype else x
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(a, dtype) for a in x)
    return x


def call(func, handler, args, kwargs):
    """Run a routed handler under autocast the way torch runs the dense call."""
    sparse = next((t for t in _tensors(list(args) + list(kwargs.values()))
                   if isinstance(t, SparseFillTensor)), None)
    device = sparse._sf_values.device.type if sparse is not None else None
    if device is None or not torch.is_autocast_enabled(device):
        return handler(*args, **kwargs)
    dtype = _dense_dtype(func, args, kwargs)
    with torch.autocast(device, enabled=False):
        if dtype is not None:
            args = _cast(args, dtype)
            kwargs = {k: (v if k == "out" else _cast(v, dtype)) for k, v in kwargs.items()}
        return handler(*args, **kwargs)
