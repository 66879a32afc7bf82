"""Reductions of indefinite tensors over their present elements
(RFC.md#indefinite-fill): a slice with nothing present is absent in the
result, never the monoid's identity.

Example::

    >>> A = sf.to_sparse(torch.tensor([[1., float('nan')], [float('nan'), float('nan')]]),
    ...                  fill_value=sf.indefinite)
    >>> sf.reduce(A, 1, "min").to_dense(fill=float('nan'))
    tensor([1., nan])
"""
from __future__ import annotations

import torch

from .operands import entries, result, scalar_result
from .operators import MONOIDS, segment_reduce

__all__ = ["reduce"]


def reduce(A, dim=None, monoid="plus"):
    """The ``monoid`` (plus times min max lor land any) of A's present
    elements: over everything (``dim=None``: a 0-d tensor, or ``sf.indefinite``
    when nothing is present), or along ``dim`` of a matrix (an indefinite
    vector, absent where the slice has nothing present). ``any`` takes the
    element of the smallest index along ``dim``. Differentiable for plus,
    times, min and max (ties share the gradient as torch.amin shares it).

    Example::

        >>> A = sf.to_sparse(torch.tensor([[1., 2.], [float('nan'), 3.]]),
        ...                  fill_value=sf.indefinite)
        >>> sf.reduce(A, 0, "max").values()
        tensor([1., 3.])
    """
    if monoid not in MONOIDS:
        raise ValueError(f"reduce: unknown monoid {monoid!r} (one of {', '.join(MONOIDS)})")
    a = entries(A, "reduce: A")
    nd = len(a.size)
    if dim is not None:
        if not isinstance(dim, int) or not -nd <= dim < nd:
            raise ValueError(f"reduce: dim must be None or an int in [{-nd}, {nd}), got {dim!r}")
        dim %= nd
    if dim is None or nd == 1:
        group = torch.zeros_like(a.keys)
        return scalar_result(segment_reduce(monoid, a.values, group, min(a.nse(), 1), a.keys))
    rows, cols = a.rows(), a.cols()
    if dim == 1:  # one value per row; keys are in row order
        uniq, inv, counts = torch.unique_consecutive(rows, return_inverse=True,
                                                     return_counts=True)
        order = cols
    else:
        uniq, inv = torch.unique(cols, return_inverse=True)
        order, counts = rows, None
    values = segment_reduce(monoid, a.values, inv, uniq.shape[0], order, counts)
    return result((a.size[1 - dim],), uniq, values)
