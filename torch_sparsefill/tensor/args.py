"""Argument checks shared by the op families: the SparseFillTensor operand,
dims, integer arguments, the name of a torch callable for messages.

Each error names the op and the argument. An argument kind that an op does
not support (a strided tensor where a SparseFillTensor is needed) raises
NotImplementedError, as an unsupported argument combination does everywhere
in the package (RFC.md#errors) and as torch does for a layout an op has
no kernel for.
"""
from __future__ import annotations

import numbers
import operator

import torch
from torch.overrides import resolve_name

from .sparse_fill_tensor import SparseFillTensor

__all__: list = []


def name(func) -> str:
    """The public name of a torch callable, for messages."""
    return resolve_name(func) or getattr(func, "__name__", str(func))


def in_place(func) -> bool:
    """add_, mul_, __iadd__, A[i] = v, ...: the ops that write into their
    first argument (by name; __radd__ and the like are not).

    Example::

        >>> in_place(torch.Tensor.add_), in_place(torch.Tensor.__rtruediv__)
        (True, False)
    """
    n = getattr(func, "__name__", "")
    return (n.endswith("_") and not n.endswith("__")) or n == "__setitem__" or (
        n.startswith("__i") and n.endswith("__"))


_NUMBER_TYPES = (int, float, complex, bool)


def is_number(x) -> bool:
    """A Python number (bool included), not a tensor."""
    # The common types first, and tensors before the ABC: an isinstance check
    # against numbers.Number walks the ABC's registry the first time it sees a
    # type (about 0.2 ms for torch.Tensor) and stays slower than these after.
    if type(x) in _NUMBER_TYPES:
        return True
    return not isinstance(x, torch.Tensor) and isinstance(x, numbers.Number)


def sparse(x, what: str, arg: str = "input") -> SparseFillTensor:
    """`x` when it is a SparseFillTensor; otherwise NotImplementedError naming
    the op and the argument.

    Example::

        >>> sparse(torch.ones(2), "narrow()")
        Traceback (most recent call last):
        NotImplementedError: narrow(): input must be a SparseFillTensor, got a Tensor of layout torch.strided; convert it with sf.to_sparse(), or the other operands with .to_dense()
    """
    if isinstance(x, SparseFillTensor):
        return x
    got = f"a {type(x).__name__}" + (f" of layout {x.layout}" if isinstance(x, torch.Tensor) else "")
    raise NotImplementedError(f"{what}: {arg} must be a SparseFillTensor, got {got}; convert it "
                              f"with sf.to_sparse(), or the other operands with .to_dense()")


def dim(d, ndim: int, what: str, *, extra: int = 0) -> int:
    """Normalise a dim like torch (negative counts from the end) for a tensor
    of `ndim` dims (`extra` more for ops that insert one); IndexError when
    out of range, TypeError when not an int.

    Example::

        >>> dim(-1, 3, "sum()")
        2
    """
    if isinstance(d, torch.Tensor) or not isinstance(d, numbers.Integral):
        raise TypeError(f"{what}: dim must be an int, got {type(d).__name__}")
    n = max(ndim + extra, 1)
    if not -n <= d < n:
        raise IndexError(f"{what}: dimension out of range (expected to be in range of "
                         f"[{-n}, {n - 1}], but got {d})")
    return int(d) % n


def dims(spec, ndim: int, what: str) -> list:
    """Sorted, distinct, normalised dims from an int or a sequence of ints;
    None or an empty sequence means every dim.

    Example::

        >>> dims((-1, 0), 3, "sum()")
        [0, 2]
    """
    if spec is None or (isinstance(spec, (tuple, list)) and len(spec) == 0):
        return list(range(ndim))
    out = []
    for d in ([spec] if isinstance(spec, numbers.Integral) else list(spec)):
        d = dim(d, ndim, what)
        if d in out:
            raise RuntimeError(f"{what}: dim {d} appears multiple times in the list of dims")
        out.append(d)
    return sorted(out)


def integer(i, what: str) -> int:
    """A Python int from an int-like argument or a one-element integer tensor."""
    if isinstance(i, torch.Tensor):
        if i.numel() != 1 or i.dtype.is_floating_point or i.dtype.is_complex or \
                i.dtype == torch.bool:
            raise TypeError(f"{what}: expected an integer index, got a tensor of shape "
                            f"{tuple(i.shape)} and dtype {i.dtype}")
        return int(i.item())
    try:
        return operator.index(i)
    except TypeError:
        raise TypeError(f"{what}: expected an integer index, got {type(i).__name__}") from None
