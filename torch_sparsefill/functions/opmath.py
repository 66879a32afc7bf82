"""Half precision as dense torch computes it (RFC.md#half-precision): ATen
accumulates float16 and bfloat16 in float32 (its ``opmath_type``) and
returns the input's dtype. A route that accumulates (a reduction, softmax, a
product and its fill correction) is wrapped by :func:`in_opmath`: a half
operand is computed on in float32, and every float32 result is cast back.
So ``count * fill``, ``sum / n`` and ``x ** p`` never overflow where dense
does not; only the final cast rounds (and overflows where dense's does).
"""
from __future__ import annotations

import functools

import torch

from ..tensor import SparseFillTensor

__all__: list = []

HALF = (torch.float16, torch.bfloat16)


def opmath(dtype: torch.dtype) -> torch.dtype:
    """The dtype a computation on `dtype` accumulates in (float32 for halves).

    Example::

        >>> opmath(torch.bfloat16)
        torch.float32
    """
    return torch.float32 if dtype in HALF else dtype


def _half_of(x):
    if isinstance(x, SparseFillTensor):
        return x._sf_values.dtype if x._sf_values.dtype in HALF else None
    if isinstance(x, torch.Tensor) and x.dtype in HALF:
        return x.dtype
    return None


def _up(x, wide=torch.float32):
    return x.to(wide) if _half_of(x) is not None else x


def _back(out, dtype, wide=torch.float32):
    if isinstance(out, torch.Tensor):
        return out.to(dtype) if out.dtype == wide else out
    if isinstance(out, tuple) and hasattr(out, "_fields"):  # torch.return_types
        return type(out)([_back(o, dtype, wide) for o in out])
    if isinstance(out, (tuple, list)):
        return type(out)(_back(o, dtype, wide) for o in out)
    return out


def in_opmath(handler=None, *, operands: int = 1, dtype_at: int | None = None,
              wide: torch.dtype = torch.float32):
    """Wraps a route so that a float16/bfloat16 call computes in float32 and
    returns the half dtype. `operands`: how many leading arguments are
    tensors to upcast (their common half dtype is the result's); `dtype_at`:
    the position of a ``dtype`` argument that, when given, decides instead;
    `wide`: float64 for the products (PRODUCTS), whose fill correction
    cancels terms far larger than the result, which float32 loses and
    dense's direct sum of products does not.

    Example::

        >>> mean_ = in_opmath(lambda A: A.mean())
    """
    if handler is None:
        return functools.partial(in_opmath, operands=operands, dtype_at=dtype_at, wide=wide)

    @functools.wraps(handler)
    def run(*args, **kwargs):
        if kwargs.get("dtype") is not None or (dtype_at is not None and len(args) > dtype_at
                                               and args[dtype_at] is not None):
            return handler(*args, **kwargs)
        lead = args[:operands]
        halves = {_half_of(a) for a in lead} - {None}
        if len(halves) != 1 or not any(isinstance(a, SparseFillTensor) for a in lead) or \
                any(isinstance(a, torch.Tensor) and _half_of(a) is None and a.is_floating_point()
                    for a in lead):
            # No half operand, or a wider one that decides the dtype anyway.
            return handler(*args, **kwargs)
        out = handler(*[_up(a, wide) for a in lead], *args[operands:], **kwargs)
        return _back(out, halves.pop(), wide)
    return run


# A product's half operands: computed in float64, rounded once (fuzz seeds
# 5690, 161861, 419717: float32 cancelled the fill's correction to 2 units of
# float16 off, where dense's float32 sum of the elements' products is exact).
PRODUCTS = dict(operands=3, wide=torch.float64)
