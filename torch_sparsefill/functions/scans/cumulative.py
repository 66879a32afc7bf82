"""Scans with the fill (RFC.md#scans-and-differences): cumsum, cumprod,
cummax, cummin, logcumsumexp, cumulative_trapezoid. A scan's result is
dense in general (every element after the first stored one depends on it):
the lanes are written out once (``to_dense``, O(numel), the result's own
size) and ATen's scan runs on them in place, so the numbers, NaN positions,
tie indices and gradients are dense torch's own, bit for bit.
"""
from __future__ import annotations

import torch

from ...tensor import args as _args

T = torch.Tensor

__all__: list = []


def _lanes_dense(input, dim, what):
    A = _args.sparse(input, what)
    d = _args.dim(dim, A.dim(), what) if A.dim() else 0
    return A.to_dense(), d


def _tracked(x) -> bool:
    return torch.is_grad_enabled() and x.requires_grad


def cumsum(input, dim, *, dtype=None, out=None):
    """Running sums along `dim`: a dense tensor (O(numel): the result's
    size), the unspecified elements adding the fill.

    Example::

        >>> A = sf.sparse_coo_tensor([[1]], [5.], (4,), fill_value=1.)
        >>> torch.cumsum(A, 0)
        tensor([1., 6., 7., 8.])
    """
    D, d = _lanes_dense(input, dim, "cumsum()")
    if dtype is None and not _tracked(D) and D.is_floating_point():
        return D.cumsum_(d)  # in place: the written lanes are the result's memory
    return torch.cumsum(D, d, dtype=dtype)


def cumprod(input, dim, *, dtype=None, out=None):
    """Running products along `dim` (dense, O(numel)).

    Example::

        >>> torch.cumprod(sf.sparse_coo_tensor([[1]], [3.], (3,), fill_value=2.), 0)
        tensor([ 2.,  6., 12.])
    """
    D, d = _lanes_dense(input, dim, "cumprod()")
    return torch.cumprod(D, d, dtype=dtype)


def cummax(input, dim, *, out=None):
    """Running maxima and their positions along `dim` (dense, O(numel)),
    ties and NaN as torch.

    Example::

        >>> torch.cummax(sf.sparse_coo_tensor([[1]], [3.], (3,), fill_value=2.), 0).values
        tensor([2., 3., 3.])
    """
    D, d = _lanes_dense(input, dim, "cummax()")
    return torch.cummax(D, d)


def cummin(input, dim, *, out=None):
    """Running minima and their positions along `dim` (dense, O(numel)).

    Example::

        >>> torch.cummin(sf.sparse_coo_tensor([[1]], [3.], (3,), fill_value=2.), 0).values
        tensor([2., 2., 2.])
    """
    D, d = _lanes_dense(input, dim, "cummin()")
    return torch.cummin(D, d)


def logcumsumexp(input, dim, *, out=None):
    """``log(cumsum(exp(x)))`` along `dim`, stable (dense, O(numel)).

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [0.], (2,), fill_value=0.)
        >>> torch.logcumsumexp(A, 0)
        tensor([0.0000, 0.6931])
    """
    D, d = _lanes_dense(input, dim, "logcumsumexp()")
    return torch.logcumsumexp(D, d)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    """Running trapezoid integrals along `dim` (dense, O(numel)).

    Example::

        >>> A = sf.sparse_coo_tensor([[1]], [3.], (3,), fill_value=1.)
        >>> torch.cumulative_trapezoid(A)
        tensor([2., 4.])
    """
    D, d = _lanes_dense(y, dim, "cumulative_trapezoid()")
    if x is not None:
        return torch.cumulative_trapezoid(D, x.to_dense() if hasattr(x, "_sf_fill") else x,
                                          dim=d)
    return torch.cumulative_trapezoid(D, dx=1 if dx is None else dx, dim=d)


ROUTES = {
    torch.cumsum: cumsum, T.cumsum: cumsum, torch.cumprod: cumprod, T.cumprod: cumprod,
    torch.cummax: cummax, T.cummax: cummax, torch.cummin: cummin, T.cummin: cummin,
    torch.logcumsumexp: logcumsumexp, T.logcumsumexp: logcumsumexp,
    torch.cumulative_trapezoid: cumulative_trapezoid,
}
