"""Sorting and selecting with the fill (RFC.md#order-statistics): sort,
argsort, msort, topk, kthvalue, median, nanmedian, quantile, nanquantile,
argmax, argmin, aminmax. The lanes and the placement of the fill's block:
functions/order/lanes.py.

Along a dense dim (a hybrid tensor) each op runs on ``values`` and on the
fill, keeping the pattern. Along a sparse dim: sorted values stay sparse
(the same fill, the block moved); the indices of a sort are dense (O(numel)
by nature); selections (topk, kthvalue, median, quantile, argmax) read
O(stored log stored + output), never the lane's n elements.
"""
from __future__ import annotations

import torch

from ...tensor import args as _args
from ...tensor import fill as _fill
from ...tensor import SparseFillTensor, build
from ..shape.parts import own, sort as _coalesce
from .lanes import ASCENDING, DESCENDING, Lanes, Order, csr_lanes, csr_rows_first_k, refuse

T = torch.Tensor
_rt = torch.return_types
_ops = torch.ops.sparsefill

__all__: list = []


def _along_dense(A: SparseFillTensor, d: int, fn):
    """fn(x, dim) -> tensor or tuple, on the dense part of A (d a dense dim):
    applied to values and to the fill, the pattern kept."""
    sd = A.sparse_dim()
    A = A._coalesced()
    F = _fill.full_rank(A._sf_fill, A.dim())
    # contiguous: torch's nanmedian reads an expanded (stride 0) all-NaN input wrongly
    F = F.expand(tuple(F.shape[:sd]) + tuple(A.shape[sd:])).contiguous()
    if not A._has_per_slice_fill():
        F = F.reshape(tuple(A.shape[sd:]))
        fd = d - sd
    else:
        fd = d
    values = A._sf_values
    if values.shape[0]:
        v = fn(values, d - sd + 1)
    else:  # nothing stored: torch may refuse an empty input (quantile), so one dummy row
        v = fn(values.new_zeros((1,) + tuple(values.shape[1:])), d - sd + 1)
        v = tuple(x[:0] for x in v) if isinstance(v, tuple) else v[:0]
    f = fn(F, fd)
    if isinstance(v, tuple):
        return tuple(A._with(a, b) for a, b in zip(v, f))
    return A._with(v, f)


def _check_real(A, what):
    if A.dtype.is_complex:
        raise RuntimeError(f"{what}: complex tensors are not supported (torch has no order "
                           f"on them)")


def _sort(A, d, descending, stable, what):
    """(values, indices) of sorting A along d."""
    if d >= A.sparse_dim():
        return _along_dense(A, d, lambda x, k: torch.sort(x, dim=k, descending=descending,
                                                          stable=stable))
    fast = _csr_sort(A, d, DESCENDING if descending else ASCENDING, True)
    if fast is not None:
        return fast
    lanes = Lanes(A, d, what)
    lanes.place(DESCENDING if descending else ASCENDING)
    values = _sorted_values(lanes)
    return values, _sort_indices(lanes)


def _csr_sort(A, d, order: Order, with_indices: bool):
    """(sorted values, dense indices or None) of a 2-D CSR matrix on the CPU
    along its rows (d 1) or columns (d 0), or None where the native path
    does not apply (csr_lanes). sparsefill::lane_sort_fill sorts each lane's
    stored values and places the fill's block in C (and writes the dense
    indices there: the O(numel) part, each slot once); the columns are
    lanes of the transposed pattern, transposed back after (two counting
    sorts, no comparison sort here). The values are one index_select of
    A's: differentiable to them, and to the fill, which stays."""
    args = csr_lanes(A, d, order)
    if args is None:
        return None
    crow, col, v, fill = args
    m, n = A._sf_size
    fill = fill.detach().to(v.dtype)
    if d == 1:
        perm, slot, idx = _ops.lane_sort_fill(crow, col, v.detach(), fill, n, order.descending,
                                              with_indices)
        crow = crow.clone()  # the result owns its pattern
    else:
        crow_t, row_t, to_t = _ops.csr_transpose(crow, col, n)
        perm_t, slot_t, idx = _ops.lane_sort_fill(crow_t, row_t, v.detach().index_select(0, to_t),
                                                  fill, m, order.descending, with_indices)
        # back: the slots are the result's rows, the lanes its columns
        crow, slot, back = _ops.csr_transpose(crow_t, slot_t, m)
        perm = to_t.index_select(0, perm_t.index_select(0, back))
        idx = idx.t().contiguous() if with_indices else None
    values = build(torch.sparse_csr, (m, n), v.index_select(0, perm), own(A._sf_fill, (A,)),
                   crow=crow, col=slot)
    return values, idx


def _sorted_values(lanes: Lanes):
    """The sorted tensor: the stored values at their slots, the same fill."""
    A, d = lanes.A, lanes.d
    idx = torch.empty((len(lanes.size), lanes.s), dtype=torch.int64, device=lanes.device)
    others = [k for k in range(len(lanes.size)) if k != d]
    idx[others] = lanes.others.index_select(1, lanes.perm) if others else idx[others]
    idx[d] = lanes.slot
    values = lanes.values.index_select(0, lanes.perm)
    if d != len(lanes.size) - 1:
        idx, values = _coalesce(idx, values, lanes.size)
    return build(A.layout, lanes.size, values, own(A._sf_fill, (A,)), indices=idx)


def _sort_indices(lanes: Lanes):
    """Sort's indices, dense (O(numel)): the stored positions at their
    slots, and in each lane's block region (the fill's block merged with
    the stored values tied with it) every position but the other stored
    ones, in increasing order. That region is a count along the lane that
    skips the other stored positions: written as increments (1 per slot,
    more after a skipped position) and one in-place cumsum per lane, so the
    n elements of each lane are written twice, never searched or masked."""
    n, L, dev = lanes.n, lanes.L, lanes.device
    if not L * n:
        return lanes.to_lanes_shape(torch.empty(L, n, dtype=torch.int64, device=dev), False,
                                    width=n)
    lane_s, cls = lanes.lane_sorted, lanes.cls
    pos_s = lanes.pos.index_select(0, lanes.perm)
    before = torch.bincount(lane_s[cls < 0], minlength=L)  # slots before the region, per lane
    out = torch.ones(L, n, dtype=torch.int64, device=dev)
    lanes_with_region = torch.nonzero(before < n).view(-1)
    start = before.index_select(0, lanes_with_region)
    # the region's first slot counts from 0: cancel the `before` ones above it
    out.index_put_((lanes_with_region, start), -start)
    # a skipped (stored, not tied) position q: the region's next kept
    # position, number q - (skipped ones before q in the lane), counts one more
    other = cls != 0
    lane_q, q = lane_s[other], pos_s[other]
    order = torch.argsort(lane_q * n + q)
    lane_q, q = lane_q.index_select(0, order), q.index_select(0, order)
    per_lane = torch.bincount(lane_q, minlength=L)
    rank = torch.arange(q.shape[0], device=dev) - \
        (torch.cumsum(per_lane, 0) - per_lane).index_select(0, lane_q)
    at = before.index_select(0, lane_q) + q - rank
    inside = at < n
    out.index_put_((lane_q[inside], at[inside]), torch.ones_like(q[inside]), accumulate=True)
    out.cumsum_(1)
    out.index_put_((lane_s, lanes.slot), pos_s)
    return lanes.to_lanes_shape(out, False, width=n)


def sort(input, dim=-1, descending=False, stable=False, *, out=None):
    """Sort along `dim`: values stay sparse (the stored values sorted, the
    fill's block placed at its rank, NaN last ascending and first
    descending); the indices are a dense tensor (O(numel), as any sort's).
    Stored values equal to the fill interleave with the block in index
    order, so the result is what a stable sort gives (``stable=False`` too).

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 3]], [7., -1.], (4,), fill_value=2.)
        >>> v, i = torch.sort(A)
        >>> v.to_dense(), i
        (tensor([-1.,  2.,  2.,  7.]), tensor([3, 1, 2, 0]))
    """
    A = _args.sparse(input, "sort()")
    _check_real(A, "sort()")
    if isinstance(dim, bool):  # sort(A, stable=..., dim=..) keyword order
        raise TypeError("sort(): dim must be an int")
    d = _args.dim(dim, A.dim(), "sort()") if A.dim() else 0
    if A.dim() == 0:
        return _rt.sort((A.clone(), torch.zeros((), dtype=torch.int64)))
    return _rt.sort(_sort(A, d, bool(descending), bool(stable), "sort()"))


def argsort(input, dim=-1, descending=False, stable=False):
    """The indices of :func:`sort`: a dense tensor (O(numel)).

    Example::

        >>> torch.argsort(sf.sparse_coo_tensor([[0]], [7.], (3,), fill_value=2.))
        tensor([1, 2, 0])
    """
    return sort(input, dim, descending, stable).indices


def msort(input):
    """Values sorted along dim 0 (sparse, the same fill).

    Example::

        >>> torch.msort(sf.sparse_coo_tensor([[0]], [7.], (3,), fill_value=2.)).to_dense()
        tensor([2., 2., 7.])
    """
    A = _args.sparse(input, "msort()")
    _check_real(A, "msort()")
    if A.dim() == 0:
        return A.clone()
    if A.sparse_dim() == 0:
        return _sort(A, 0, False, True, "msort()")[0]
    fast = _csr_sort(A, 0, ASCENDING, False)
    if fast is not None:
        return fast[0]
    lanes = Lanes(A, 0, "msort()")
    lanes.place(ASCENDING)
    return _sorted_values(lanes)


def _select(lanes: Lanes, order: Order, slots):
    """(values, positions) [L, q] of `slots` ([L, q]) of the lanes sorted in `order`."""
    lanes.place(order)
    return lanes.at_slots(lanes.all_lanes(slots.shape[1]), slots)


def topk(input, k, dim=-1, largest=True, sorted=True, *, out=None):
    """The k largest (smallest) elements along `dim` and their positions,
    dense ``[..., k]``, read in O(stored log k + output): each lane's k
    best stored values merge with the fill's block (its unspecified
    positions in increasing order), ties in index order: the first k of a
    stable sort of the dense lane. On the CPU one native pass does both
    (a CSR matrix along its rows is read as it is).

    Example::

        >>> A = sf.sparse_coo_tensor([[2]], [9.], (10**7,), fill_value=1.)
        >>> torch.topk(A, 2)
        torch.return_types.topk(
        values=tensor([9., 1.]),
        indices=tensor([2, 0]))
    """
    A = _args.sparse(input, "topk()")
    _check_real(A, "topk()")
    k = _args.integer(k, "topk()")
    d = _args.dim(dim, A.dim(), "topk()") if A.dim() else 0
    n = A.shape[d] if A.dim() else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"topk(): selected index k ({k}) out of range for dim {d} of "
                           f"size {n}")
    if A.dim() == 0 or d >= A.sparse_dim():
        return _rt.topk(_along_dense(A, d, lambda x, j: torch.topk(x, k, j, largest, sorted)))
    order = DESCENDING if largest else ASCENDING
    picked = csr_rows_first_k(A, d, k, order)  # a CSR matrix's rows: no lanes to build
    if picked is not None:
        return _rt.topk(picked)
    lanes = Lanes(A, d, "topk()")
    picked = lanes.first_k(k, order)
    if picked is None:
        picked = _select(lanes, order, torch.arange(k, device=A.device).expand(lanes.L, k))
    v, i = picked
    return _rt.topk((lanes.to_lanes_shape(v, False, k), lanes.to_lanes_shape(i, False, k)))


def _one_slot(A, dim, keepdim, what, order, slot_of):
    """(values, positions) of one slot per lane, `slot_of(lanes)` -> [L]."""
    d = None if dim is None else _args.dim(dim, A.dim(), what)
    if d is not None and d >= A.sparse_dim():
        return None, d
    lanes = Lanes(A, d, what)
    if lanes.n == 0:
        raise IndexError(f"{what}: Expected reduction dim {d} to have non-zero size.")
    slots = slot_of(lanes).reshape(lanes.L, 1)
    v, i = _select(lanes, order, slots)
    return (lanes.to_lanes_shape(v, keepdim), lanes.to_lanes_shape(i, keepdim)), d


def kthvalue(input, k, dim=-1, keepdim=False, *, out=None):
    """The k-th smallest element along `dim` (1-based) and its position,
    in O(stored log stored + output).

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [-4.], (5,), fill_value=3.)
        >>> torch.kthvalue(A, 2)
        torch.return_types.kthvalue(
        values=tensor(3.),
        indices=tensor(1))
    """
    A = _args.sparse(input, "kthvalue()")
    _check_real(A, "kthvalue()")
    k = _args.integer(k, "kthvalue()")
    n = A.shape[_args.dim(dim, A.dim(), "kthvalue()")] if A.dim() else 1
    if not 1 <= k <= n:
        raise IndexError(f"kthvalue(): selected number k ({k}) out of range for a dim of size "
                         f"{n}")
    res, d = _one_slot(A, dim, keepdim, "kthvalue()", ASCENDING,
                       lambda lanes: torch.full((lanes.L,), k - 1, device=A.device))
    if res is None:
        return _rt.kthvalue(_along_dense(A, d, lambda x, j: torch.kthvalue(x, k, j, keepdim)))
    return _rt.kthvalue(res)


def _nonnan_count(lanes: Lanes):
    """[L] the number of elements of each lane that are not NaN."""
    dev = lanes.device
    ok = ~torch.isnan(lanes.values) if lanes.values.is_floating_point() else \
        torch.ones(lanes.s, dtype=torch.bool, device=dev)
    stored_ok = torch.zeros(lanes.L, dtype=torch.int64, device=dev).index_add_(
        0, lanes.lane, ok.to(torch.int64))
    stored = torch.zeros(lanes.L, dtype=torch.int64, device=dev).index_add_(
        0, lanes.lane, torch.ones_like(lanes.lane))
    f = lanes.fill_of(torch.arange(lanes.L, device=dev))
    fill_ok = ~torch.isnan(f) if f.is_floating_point() else torch.ones_like(f, dtype=torch.bool)
    return stored_ok + torch.where(fill_ok, lanes.n - stored, 0)


def _median(input, dim, keepdim, ignore_nan):
    what = "nanmedian()" if ignore_nan else "median()"
    A = _args.sparse(input, what)
    _check_real(A, what)
    if A.dim() == 0:
        return A.to_dense() if dim is None else (A.to_dense(), torch.zeros((), dtype=torch.int64))
    if dim is None and A.numel() == 0:
        return torch.full((), float("nan"), dtype=A.dtype)
    if ignore_nan:
        def slot_of(lanes):
            c = _nonnan_count(lanes)
            return torch.where(c > 0, (c - 1) // 2, (lanes.n - 1) // 2)
        res, d = _one_slot(A, dim, keepdim, what, ASCENDING, slot_of)
    else:
        res, d = _one_slot(A, dim, keepdim, what, ASCENDING,
                           lambda lanes: torch.full((lanes.L,), (lanes.n - 1) // 2,
                                                    device=A.device))
        if res is not None and A.is_floating_point():
            # a lane holding NaN: its median is NaN, at its first NaN
            first, _ = _one_slot(A, dim, keepdim, what, Order(False, True),
                                 lambda lanes: torch.zeros(lanes.L, dtype=torch.int64,
                                                           device=A.device))
            nan = torch.isnan(first[0])
            res = (torch.where(nan, first[0], res[0]), torch.where(nan, first[1], res[1]))
    if res is None:
        fn = torch.nanmedian if ignore_nan else torch.median
        return (_rt.nanmedian if ignore_nan else _rt.median)(
            _along_dense(A, d, lambda x, j: fn(x, j, keepdim)))
    if dim is None:
        return res[0]
    return (_rt.nanmedian if ignore_nan else _rt.median)(res)


def median(input, dim=None, keepdim=False, *, out=None):
    """The lower median along `dim` (or of every element) and its position;
    NaN where a lane holds NaN (at its first NaN), as torch. O(stored log
    stored + output).

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 1]], [-4., 8.], (5,), fill_value=3.)
        >>> torch.median(A)
        tensor(3.)
    """
    return _median(input, dim, keepdim, False)


def nanmedian(input, dim=None, keepdim=False, *, out=None):
    """:func:`median` of the elements that are not NaN.

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 1]], [float('nan'), 8.], (3,), fill_value=3.)
        >>> torch.nanmedian(A)
        tensor(3.)
    """
    return _median(input, dim, keepdim, True)


ROUTES = {
    torch.sort: sort, T.sort: sort, torch.argsort: argsort, T.argsort: argsort,
    torch.msort: msort, T.msort: msort, torch.topk: topk, T.topk: topk,
    torch.kthvalue: kthvalue, T.kthvalue: kthvalue,
    torch.median: median, T.median: median, torch.nanmedian: nanmedian, T.nanmedian: nanmedian,
}
