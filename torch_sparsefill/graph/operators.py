"""The graph domain's operators (RFC.md#indefinite-fill): binary ops by
name, monoids (a binary op with its reduction over present terms), and
semirings ``"<monoid>_<op>"``.

A monoid reduces only over the terms that are present: nothing present is
absent, never the identity. ``any`` picks deterministically: the term with
the smallest index along the reduced dimension (k, for a product).

Example::

    >>> semiring("min_plus")
    ('min', 'plus')
"""
from __future__ import annotations

import torch

from ..ops.common import untracked

__all__ = ["BINARY", "MONOIDS", "NATIVE_MONOIDS", "NATIVE_OPS", "binary", "semiring",
           "segment_reduce", "monoid_dtype"]


def _pair(a, b):
    return torch.ones(torch.broadcast_shapes(a.shape, b.shape), device=a.device,
                      dtype=_counting(a, b))


def _counting(a, b):
    """pair's dtype: the operands' promoted one; int64 for bool operands (so
    plus_pair counts)."""
    dtype = torch.promote_types(a.dtype, b.dtype)
    return torch.int64 if dtype == torch.bool else dtype


# Each takes two tensors of broadcastable shapes (the present operands).
BINARY = {
    "plus": torch.add, "minus": torch.sub, "rminus": lambda a, b: b - a,
    "times": torch.mul, "div": torch.div, "rdiv": lambda a, b: torch.div(b, a),
    "min": torch.minimum, "max": torch.maximum,
    "first": lambda a, b: a.expand(torch.broadcast_shapes(a.shape, b.shape)),
    "second": lambda a, b: b.expand(torch.broadcast_shapes(a.shape, b.shape)),
    "pair": _pair, "oneb": _pair,
    "land": torch.logical_and, "lor": torch.logical_or, "lxor": torch.logical_xor,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "gt": torch.gt, "le": torch.le,
    "ge": torch.ge, "pow": torch.pow, "atan2": torch.atan2, "hypot": torch.hypot,
}

# monoid name -> torch.scatter_reduce's reduce ("any" is handled apart).
MONOIDS = {"plus": "sum", "times": "prod", "min": "amin", "max": "amax", "lor": "amax",
           "land": "amin", "any": None}


# The codes of the native semiring kernels (sparsefill_core.h: sf_monoid,
# sf_binop, in this order): a name here has a C twin; an op not named here
# (pow, atan2, hypot, a callable) takes the torch route.
NATIVE_MONOIDS = {name: code for code, name in enumerate(
    ("plus", "times", "min", "max", "lor", "land", "any"))}
NATIVE_OPS = {name: code for code, name in enumerate(
    ("plus", "minus", "rminus", "times", "div", "rdiv", "min", "max", "first", "second", "pair",
     "land", "lor", "lxor", "eq", "ne", "lt", "gt", "le", "ge"))}
NATIVE_OPS["oneb"] = NATIVE_OPS["pair"]

def binary(op, what: str = "op"):
    """The callable of a binary op: a name of :data:`BINARY` or a torch
    callable of two tensors.

    Example::

        >>> binary("min")(torch.tensor([1., 4.]), torch.tensor([3., 2.]))
        tensor([1., 2.])
    """
    if callable(op):
        return op
    if isinstance(op, str) and op in BINARY:
        return BINARY[op]
    raise ValueError(f"{what}: expected a binary op name ({', '.join(sorted(BINARY))}) or a "
                     f"callable of two tensors, got {op!r}")


def semiring(name) -> tuple:
    """(monoid, op) of a semiring name ``"<monoid>_<op>"``, or of a pair
    ``(monoid, op)`` whose op may be a callable.

    Example::

        >>> semiring("plus_pair")
        ('plus', 'pair')
    """
    if isinstance(name, tuple) and len(name) == 2:
        monoid, op = name
    elif isinstance(name, str) and "_" in name:
        monoid, op = name.split("_", 1)
    else:
        raise ValueError(f"semiring: expected '<monoid>_<op>' (e.g. 'min_plus') or a pair "
                         f"(monoid, op), got {name!r}")
    if monoid not in MONOIDS:
        raise ValueError(f"semiring {name!r}: unknown monoid {monoid!r} (one of "
                         f"{', '.join(MONOIDS)})")
    binary(op, f"semiring {name!r}")
    return monoid, op


def monoid_dtype(monoid: str, dtype: torch.dtype) -> torch.dtype:
    """The dtype a monoid's result has over terms of `dtype`: bool for lor
    and land; int64 for plus and times over bool (as torch.sum); else `dtype`."""
    if monoid in ("lor", "land"):
        return torch.bool
    if monoid in ("plus", "times") and dtype == torch.bool:
        return torch.int64
    return dtype


_SEGMENT = {"plus": "sum", "times": "prod", "min": "min", "max": "max"}


def segment_reduce(monoid: str, terms: torch.Tensor, group: torch.Tensor, n_groups: int,
                   order: torch.Tensor = None, counts: torch.Tensor = None) -> torch.Tensor:
    """The reduction of `terms` by `group` (every group 0..n_groups-1 has at
    least one term): one value per group. `order` ranks the terms within a
    group for ``any`` (the smallest wins; default: position).
    Differentiable for plus, times, min, max, in reverse and forward mode
    (ties share the gradient as torch.amin shares it). `counts`, when the
    groups are contiguous runs of these lengths, lets floating terms whose
    gradient is not tracked take torch.segment_reduce (parallel).

    Example::

        >>> segment_reduce("min", torch.tensor([3., 1., 2.]), torch.tensor([0, 0, 1]), 2)
        tensor([1., 2.])
    """
    dtype = monoid_dtype(monoid, terms.dtype)
    if monoid in ("plus", "times") and terms.dtype in (torch.float16, torch.bfloat16):
        # as torch.sum accumulates them (opmath): a bfloat16 sum of 4,000
        # terms near 1 stalls at 512 when every step rounds to bfloat16
        return segment_reduce(monoid, terms.float(), group, n_groups, order, counts).to(dtype)
    # Not with a gradient: torch.segment_reduce has no forward derivative, and
    # its backward of min/max gives every tied term the whole gradient when
    # that is negative (torch 2.13; torch.amin gives each its share).
    if (counts is not None and monoid in _SEGMENT and terms.dtype.is_floating_point
            and untracked(terms)):
        return torch.segment_reduce(terms, _SEGMENT[monoid], lengths=counts, unsafe=True)
    if monoid == "any":
        if order is None:
            order = torch.arange(terms.shape[0], device=terms.device)
        best = torch.full((n_groups,), torch.iinfo(torch.int64).max, device=terms.device,
                          dtype=torch.int64).scatter_reduce(0, group, order, "amin")
        chosen = (order == best[group]).nonzero().squeeze(1)
        out = terms.new_zeros((n_groups,))
        return out.index_put((group[chosen],), terms[chosen])
    if monoid in ("lor", "land"):
        terms = terms.ne(0).to(torch.uint8)
    elif terms.dtype != dtype:
        terms = terms.to(dtype)
    elif terms.dtype == torch.bool:  # min and max of bools, as uint8
        terms = terms.to(torch.uint8)
    if monoid == "times" and not untracked(terms):
        return _product_by_pairs(terms, group, n_groups)
    # torch's backward of amin/amax counts an initial element equal to the
    # result as a tie even with include_self=False: start from NaN, equal to nothing.
    init = float("nan") if terms.dtype.is_floating_point else 0
    out = torch.full((n_groups,), init, dtype=terms.dtype, device=terms.device)
    out = out.scatter_reduce(0, group, terms, MONOIDS[monoid], include_self=False)
    return out.to(dtype)


def _product_by_pairs(terms: torch.Tensor, group: torch.Tensor, n_groups: int) -> torch.Tensor:
    """Each group's product (every group has a term) by rounds that multiply
    neighbours of a group in pairs, log2 of the largest group's size of
    them: only multiplications, so the reverse, double and forward-mode
    derivatives are exact, zeros included, where scatter_reduce("prod") has
    no forward derivative (torch 2.13: its tangent is dropped). The indices
    come from `group` alone, so a vmapped `terms` keeps its batch.

    Example::

        >>> _product_by_pairs(torch.tensor([2., 3., 0., 5.]), torch.tensor([1, 0, 1, 1]), 2)
        tensor([3., 0.])
    """
    order = torch.argsort(group, stable=True)
    x, g = terms.index_select(0, order), group.index_select(0, order)
    while g.shape[0] > n_groups:
        n = g.shape[0]
        pos = torch.arange(n, device=g.device)
        starts = torch.ones(n, dtype=torch.bool, device=g.device)
        starts[1:] = g[1:] != g[:-1]
        first = torch.cummax(torch.where(starts, pos, 0), 0).values  # each term's group start
        left = ((pos - first) % 2 == 0).nonzero().squeeze(1)  # the first of each pair
        right = (left + 1).clamp(max=n - 1)
        paired = (left + 1 < n) & (g.index_select(0, right) == g.index_select(0, left))
        x = x.index_select(0, left) * torch.where(paired, x.index_select(0, right),
                                                   torch.ones((), dtype=x.dtype, device=x.device))
        g = g.index_select(0, left)
    return x
