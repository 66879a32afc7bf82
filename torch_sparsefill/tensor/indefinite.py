"""The indefinite fill (RFC.md#indefinite-fill): a tensor whose unspecified
elements have no value at all (a graph's non-edges), not a number.

It is a state of the tensor, held as one instance attribute
(``_sf_indefinite``, absent on every other tensor, so the hot path's plain
check, which counts the attributes, never takes one); the fill component is
then a placeholder 0 that nothing reads: ``fill_value()`` raises, and the
routing refuses every torch function not marked indefinite-aware
(functions/indefinite.py).

Example::

    >>> A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [2., 3.], (2, 2), fill_value=sf.indefinite)
    >>> A.is_indefinite()
    True
"""
from __future__ import annotations

import functools

import torch

__all__ = ["indefinite", "is_indefinite", "mark", "keep", "placeholder", "takes_indefinite",
           "refuse_value"]


class Indefinite:
    """The type of ``sf.indefinite``, the one "no value" fill (a singleton).

    Example::

        >>> sf.indefinite
        sf.indefinite
    """

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "sf.indefinite"

    def __reduce__(self):  # pickles as the singleton
        return (Indefinite, ())

    def __bool__(self):
        raise TypeError("sf.indefinite has no truth value (it is no value)")


indefinite = Indefinite()


def is_indefinite(a) -> bool:
    """Whether `a` is a SparseFillTensor whose fill is ``sf.indefinite``.

    Example::

        >>> is_indefinite(sf.full((2,), 1.))
        False
    """
    return getattr(a, "_sf_indefinite", False) is True


def mark(a):
    """`a` (a SparseFillTensor just built) made indefinite; returns it."""
    a._sf_indefinite = True
    return a


def keep(src, out):
    """`out` indefinite when `src` is: what a layout conversion, copy or cast
    of an indefinite tensor returns."""
    if is_indefinite(src) and not is_indefinite(out) and hasattr(out, "_sf_fill"):
        mark(out)
    return out


def placeholder(dtype: torch.dtype, device=None) -> torch.Tensor:
    """The fill component an indefinite tensor carries: 0, never read."""
    return torch.zeros((), dtype=dtype, device=device)


def refuse_value(what: str):
    """The error for reading an indefinite tensor's fill as a value."""
    raise RuntimeError(
        f"{what}: this tensor's fill is sf.indefinite (its unspecified elements have no "
        f"value); A.to_dense(fill=v) fills them with v, A.values() reads the stored ones")


def takes_indefinite(constructor):
    """`constructor` (one of keyword argument ``fill_value``) also taking
    ``fill_value=sf.indefinite``: it builds with the placeholder fill, then
    marks the result.

    Example::

        >>> sf.sparse_csr_tensor([0, 1], [0], [1.], (1, 2), fill_value=sf.indefinite).nse()
        1
    """
    @functools.wraps(constructor)
    def wrapper(*args, **kwargs):
        if kwargs.get("fill_value") is indefinite:
            kwargs["fill_value"] = None
            return mark(constructor(*args, **kwargs))
        return constructor(*args, **kwargs)
    return wrapper
