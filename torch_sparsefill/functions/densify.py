"""The opt-in dense route (RFC.md#auto-densify): inside ``sf.auto_densify()``
(or with the setting on) a torch function that has neither a route nor a
decomposition computes on every SparseFillTensor argument's ``to_dense()`` and
returns the dense result; gradients flow to values and fill through
``to_dense``. Off by default: densifying a 10^6 x 10^6 operand is an
out-of-memory, not an answer, so the caller says where it is acceptable.

The state is a context variable (each thread and task sees its own, a nested
``auto_densify(False)`` turns it off inside); its default is the setting
(``set_auto_densify``), whose initial value is read from the environment
variable SPARSEFILL_AUTO_DENSIFY (as pydata/sparse's SPARSE_AUTO_DENSIFY).
"""
from __future__ import annotations

import contextlib
import contextvars
import os

import torch

from ..tensor import SparseFillTensor
from ..tensor import args as _args

__all__ = ["auto_densify", "set_auto_densify", "is_auto_densify"]

_setting = [os.environ.get("SPARSEFILL_AUTO_DENSIFY", "0").strip().lower() in ("1", "true", "yes")]
_scoped: contextvars.ContextVar = contextvars.ContextVar("sparsefill_auto_densify", default=None)


def enabled() -> bool:
    """Whether a dense-only call computes densely here (the innermost
    auto_densify() scope, else the setting)."""
    scoped = _scoped.get()
    return _setting[0] if scoped is None else scoped


is_auto_densify = enabled


def set_auto_densify(flag: bool) -> None:
    """The setting: whether dense-only functions compute on ``A.to_dense()``
    outside any ``auto_densify()`` scope (default off, or
    SPARSEFILL_AUTO_DENSIFY=1).

    Example::

        >>> sf.set_auto_densify(True); sf.is_auto_densify()
        True
    """
    if not isinstance(flag, bool):
        raise TypeError(f"set_auto_densify(): flag must be a bool, got {type(flag).__name__}")
    _setting[0] = flag


@contextlib.contextmanager
def auto_densify(enabled: bool = True):
    """Inside this scope a torch function with no sparse algorithm (linalg
    factorizations, fft, convolutions, pooling, ...) computes on every
    SparseFillTensor argument's dense form and returns the dense result, with
    gradients to values and fill; outside it such a call is refused.
    ``auto_densify(False)`` turns it off in a nested scope.

    Example::

        >>> A = sf.to_sparse(torch.eye(2) * 2, fill_value=0.)
        >>> with sf.auto_densify():
        ...     torch.linalg.inv(A)
        tensor([[0.5000, 0.0000],
                [0.0000, 0.5000]])
    """
    if not isinstance(enabled, bool):
        raise TypeError(f"auto_densify(): enabled must be a bool, got {type(enabled).__name__}")
    token = _scoped.set(enabled)
    try:
        yield
    finally:
        _scoped.reset(token)


def _dense(x):
    if isinstance(x, SparseFillTensor):
        return x.to_dense()
    if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
        return type(x)(_dense(y) for y in x)
    if isinstance(x, dict):
        return {k: _dense(v) for k, v in x.items()}
    return x


def _has_sparse(x) -> bool:
    if isinstance(x, SparseFillTensor):
        return True
    if isinstance(x, (list, tuple)):
        return any(_has_sparse(y) for y in x)
    if isinstance(x, dict):
        return any(_has_sparse(v) for v in x.values())
    return False


def call(func, args, kwargs):
    """func on the dense forms of its SparseFillTensor arguments (the caller
    checked that the dense route is on and func writes into none of them)."""
    if kwargs and _has_sparse(kwargs.get("out")):
        raise NotImplementedError(
            f"torch_sparsefill: {_args.name(func)} with a SparseFillTensor out= is not "
            f"computed inside sf.auto_densify() (its result is dense); pass a dense out= or "
            f"none")
    return func(*_dense(args), **_dense(kwargs or {}))
