"""Quantiles and the positions of extremes with the fill
(RFC.md#order-statistics): quantile, nanquantile, argmax, argmin, aminmax.
Each reads a few slots of each sorted lane (functions/order/lanes.py):
O(stored log stored + output), never a lane's n elements.
"""
from __future__ import annotations

import torch

from ...tensor import SparseFillTensor
from ...tensor import args as _args
from .lanes import ASCENDING, DESCENDING, Lanes, Order
from .sort import _along_dense, _check_real, _nonnan_count, _rt, _select

T = torch.Tensor

__all__: list = []

_MODES = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan):
    what = "nanquantile()" if ignore_nan else "quantile()"
    A = _args.sparse(input, what)
    # as torch: float32 and float64 only (no half types)
    if A.dtype not in (torch.float32, torch.float64):
        raise RuntimeError(f"{what} input tensor must be either float or double dtype")
    if interpolation not in _MODES:
        raise ValueError(f"{what} interpolation must be one of linear, lower, higher, "
                         f"midpoint or nearest. Got {interpolation}")
    scalar_q = not isinstance(q, torch.Tensor)
    qt = torch.as_tensor(q, dtype=A.dtype, device=A.device) if scalar_q else q
    if not scalar_q and qt.dtype != A.dtype:
        raise RuntimeError(f"{what} expected q tensor to have the same dtype as the input "
                           f"tensor, got {qt.dtype} and {A.dtype}")
    if qt.dim() > 1:
        raise RuntimeError(f"{what} q must be a scalar or 1D tensor")
    if qt.numel() and bool(((qt < 0) | (qt > 1)).any()):
        raise RuntimeError(f"{what} q values must be in the range [0, 1]")
    d = None if dim is None else _args.dim(dim, A.dim(), what)
    if d is not None and d >= A.sparse_dim():
        fn = torch.nanquantile if ignore_nan else torch.quantile

        def one(qj):
            return _along_dense(A, d, lambda x, j: fn(x, qj, j, keepdim,
                                                      interpolation=interpolation))
        if qt.dim() == 0:
            return one(qt)
        # torch puts q's dim first, before the sparse dims: a dense result
        return torch.stack([one(qj).to_dense() for qj in qt]) if qt.numel() else \
            one(qt.new_zeros(())).to_dense().unsqueeze(0)[:0]
    lanes = Lanes(A, d, what)
    if lanes.n == 0:
        raise IndexError(f"{what} input tensor must be non-empty")
    q1 = qt.reshape(1, -1)
    count = _nonnan_count(lanes).unsqueeze(1)
    if ignore_nan:
        ranks = q1 * (count - 1)
        ranks = ranks.masked_fill(ranks < 0, 0)
    else:
        last = lanes.n - 1
        ranks = (q1 * last).expand(lanes.L, q1.shape[1]).masked_fill(count < lanes.n, last)
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.to(torch.int64)
    values, _ = _select(lanes, ASCENDING, below)
    if interpolation in ("linear", "midpoint"):
        weights = torch.full_like(ranks, 0.5) if interpolation == "midpoint" else ranks - below
        above, _ = lanes.at_slots(lanes.all_lanes(below.shape[1]), ranks.ceil().to(torch.int64))
        values = values.lerp(above, weights)
    outs = [lanes.to_lanes_shape(values[:, j:j + 1], keepdim) for j in range(values.shape[1])]
    if scalar_q or qt.dim() == 0:
        return outs[0]
    if not outs:  # an empty q: (0, *the reduced shape)
        shape = lanes.to_lanes_shape(values.new_zeros(lanes.L, 1), keepdim).shape
        return values.new_empty((0,) + tuple(shape))
    return torch.stack(outs)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """The q-quantiles along `dim` (or of every element), as torch: ranks
    ``q * (n - 1)``, NaN where a lane holds NaN, every interpolation; the
    slots are read from the sorted lanes in O(stored log stored + output).

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [10.], (5,), fill_value=0.)
        >>> torch.quantile(A, 0.9)
        tensor(6.)
    """
    return _quantile(input, q, dim, keepdim, interpolation, False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """:func:`quantile` of the elements that are not NaN.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [float('nan')], (3,), fill_value=1.)
        >>> torch.nanquantile(A, 0.5)
        tensor(1.)
    """
    return _quantile(input, q, dim, keepdim, interpolation, True)


def _arg_extreme(input, dim, keepdim, is_min):
    what = "argmin()" if is_min else "argmax()"
    A = _args.sparse(input, what)
    _check_real(A, what)
    if A.dim() == 0:
        return torch.zeros((), dtype=torch.int64)
    d = None if dim is None else _args.dim(dim, A.dim(), what)
    if d is not None and d >= A.sparse_dim():
        fn = torch.argmin if is_min else torch.argmax
        return _along_dense(A, d, lambda x, j: fn(x, j, keepdim))
    if A.dtype != torch.bool and A.numel() and (d is not None or A.fill_value().numel() == 1):
        # max/min's one O(stored) pass (ops: seg_max) answers the same first
        # extreme, NaN first; no sort of the stored values
        flat = A if d is not None else A.reshape(-1)
        pos = (torch.min if is_min else torch.max)(flat, 0 if d is None else d, keepdim).indices
        pos = pos.to_dense() if isinstance(pos, SparseFillTensor) else pos
        return pos.reshape((1,) * A.dim()) if d is None and keepdim else pos
    lanes = Lanes(A, d, what)
    if lanes.n == 0:
        raise IndexError(f"{what}: Expected reduction dim to have non-zero size.")
    # the first extreme by index: slot 0 of a stable order, NaN first (torch's
    # argmax and argmin both answer a NaN's position)
    order = Order(False, True) if is_min else DESCENDING
    _, pos = _select(lanes, order, torch.zeros(lanes.L, 1, dtype=torch.int64,
                                               device=A.device))
    return lanes.to_lanes_shape(pos, keepdim)


def argmax(input, dim=None, keepdim=False):
    """Position of the first maximum along `dim` (or of the flattened
    tensor), NaN counting as the largest: one pass over the stored elements
    (max's, with its index), O(stored + output).

    Example::

        >>> A = sf.sparse_coo_tensor([[5]], [-1.], (10**7,), fill_value=2.)
        >>> torch.argmax(A), torch.argmin(A)
        (tensor(0), tensor(5))
    """
    return _arg_extreme(input, dim, keepdim, False)


def argmin(input, dim=None, keepdim=False):
    """Position of the first minimum; see :func:`argmax`."""
    return _arg_extreme(input, dim, keepdim, True)


def aminmax(input, *, dim=None, keepdim=False):
    """``(amin, amax)`` along `dim` or of every element: the reductions.

    Example::

        >>> torch.aminmax(sf.sparse_coo_tensor([[0]], [-3.], (3,), fill_value=1.))
        torch.return_types.aminmax(
        min=tensor(-3.),
        max=tensor(1.))
    """
    A = _args.sparse(input, "aminmax()")
    if dim is None:
        lo, hi = torch.amin(A), torch.amax(A)
        if keepdim:
            lo, hi = lo.reshape((1,) * A.dim()), hi.reshape((1,) * A.dim())
    else:
        lo, hi = torch.amin(A, dim, keepdim), torch.amax(A, dim, keepdim)
    return _rt.aminmax((lo, hi))


ROUTES = {
    torch.quantile: quantile, T.quantile: quantile,
    torch.nanquantile: nanquantile, T.nanquantile: nanquantile,
    torch.argmax: argmax, T.argmax: argmax, torch.argmin: argmin, T.argmin: argmin,
    torch.aminmax: aminmax, T.aminmax: aminmax,
}
