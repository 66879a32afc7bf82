"""Counting with the fill (RFC.md#order-statistics): mode, unique,
unique_consecutive, bincount, histc, histogram, searchsorted, bucketize.
The unspecified elements of a lane are one block of ``n - s`` copies of the
fill: each op counts the block once, with its multiplicity, never element
by element (the inverse of unique: O(numel) by nature).
"""
from __future__ import annotations

import math

import torch

from ...tensor import args as _args
from ...tensor import SparseFillTensor, build
from ...tensor import fill as _fill
from ..indexing.lookup import linear
from .lanes import ASCENDING, Lanes, all_sparse, refuse
from .sort import _along_dense, _check_real, _rt

T = torch.Tensor

__all__: list = []


def _one_fill(A: SparseFillTensor, what: str):
    """(stored values flattened, the fill as a 1-element tensor, the number
    of unspecified elements): refused where the fill is not one value."""
    fill = A._fill_value()
    if fill.numel() != 1 and bool((fill != fill.reshape(-1)[0]).any()):
        refuse(what, "of a tensor whose fill is not one value (a per-slice or dense-part fill)")
    A = A._coalesced()
    values = A._sf_values.reshape(-1)
    return values, fill.reshape(-1)[:1], A.numel() - values.numel()


# ---- mode --------------------------------------------------------------------------

def mode(input, dim=-1, keepdim=False):
    """The most frequent value along `dim` (the smallest of equally frequent
    ones) and its last position, as torch; the block counts ``n - s`` times.
    NaNs count as one value, the largest (torch's answer for a lane with NaN
    depends on how its sort meets NaN: not compared). O(stored log stored +
    output).

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 1]], [4., 4.], (5,), fill_value=1.)
        >>> torch.mode(A)
        torch.return_types.mode(
        values=tensor(1.),
        indices=tensor(4))
    """
    A = _args.sparse(input, "mode()")
    _check_real(A, "mode()")
    if A.dim() == 0:
        return _rt.mode((A.to_dense(), torch.zeros((), dtype=torch.int64)))
    d = _args.dim(dim, A.dim(), "mode()")
    if d >= A.sparse_dim():
        return _rt.mode(_along_dense(A, d, lambda x, j: torch.mode(x, j, keepdim)))
    lanes = Lanes(A, d, "mode()")
    if lanes.n == 0 or lanes.L == 0:
        empty = lanes.to_lanes_shape(lanes.values.new_zeros(lanes.L, 1), keepdim)
        return _rt.mode((empty[..., :0] if lanes.n == 0 else empty, empty.to(torch.int64)))
    dev, L, n = lanes.device, lanes.L, lanes.n
    lanes.place(ASCENDING)  # (for unspecified())
    count = torch.zeros(L, dtype=torch.int64, device=dev).index_add_(
        0, lanes.lane, torch.ones_like(lanes.lane))
    every = torch.arange(L, device=dev)
    has_block = count < n
    # one entry per block: its value the fill, its weight n - s, its
    # position the lane's last unspecified one
    blk = every[has_block]
    fb = lanes.fill_of(blk)
    free = n - count[has_block]
    last_free = lanes.unspecified(blk, free - 1)
    lane = torch.cat([lanes.lane, blk])
    value = torch.cat([lanes.values, fb.to(lanes.values.dtype)])
    pos = torch.cat([lanes.pos, last_free])
    weight = torch.cat([torch.ones_like(lanes.lane), free])
    perm = ASCENDING.argsort(value.detach())
    perm = perm.index_select(0, torch.sort(lane.index_select(0, perm), stable=True).indices)
    lane, value, pos, weight = (x.index_select(0, perm) for x in (lane, value, pos, weight))
    v = value.detach()
    new = torch.ones_like(lane, dtype=torch.bool)
    same = v[1:] == v[:-1]
    if v.is_floating_point():  # NaNs are one value here (torch's own order of NaNs is undefined)
        same |= torch.isnan(v[1:]) & torch.isnan(v[:-1])
    new[1:] = (lane[1:] != lane[:-1]) | ~same
    group = torch.cumsum(new.to(torch.int64), 0) - 1
    ng = int(group[-1]) + 1
    gcount = torch.zeros(ng, dtype=torch.int64, device=dev).index_add_(0, group, weight)
    glast = torch.full((ng,), -1, dtype=torch.int64, device=dev).scatter_reduce_(
        0, group, pos, "amax")
    glane = lane[new]
    best = torch.zeros(L, dtype=torch.int64, device=dev).scatter_reduce_(
        0, glane, gcount, "amax", include_self=False)
    gid = torch.arange(ng, device=dev)
    cand = torch.where(gcount == best.index_select(0, glane), gid, ng)
    pick = torch.full((L,), ng, dtype=torch.int64, device=dev).scatter_reduce_(
        0, glane, cand, "amin")  # the first (smallest) most frequent value
    idx = glast.index_select(0, pick)
    # the value from the entry at that position (its gradient goes there)
    entry = torch.nonzero((pos == glast.index_select(0, group)) &
                          (group == pick.index_select(0, lane))).view(-1)
    out_v = value.index_select(0, entry)
    return _rt.mode((lanes.to_lanes_shape(out_v.reshape(L, 1), keepdim),
                     lanes.to_lanes_shape(idx.reshape(L, 1), keepdim)))


# ---- unique ------------------------------------------------------------------------

def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct values (sorted), with the fill once where an element is
    unspecified; counts count the block ``n - s`` times. The inverse is
    dense (O(numel)); a NaN fill gives ``n - s`` NaNs (torch counts each
    NaN apart). ``dim=``: the distinct slices, compared on the positions
    some slice stores (see _unique_slices).

    Example::

        >>> torch.unique(sf.sparse_coo_tensor([[0]], [4.], (5,), fill_value=1.),
        ...              return_counts=True)
        (tensor([1., 4.]), tensor([4, 1]))
    """
    A = _args.sparse(input, "unique()")
    if dim is not None:
        return _unique_slices(A, dim, "unique()", return_inverse, return_counts,
                              lambda C: torch.unique(C, sorted=sorted, return_inverse=True,
                                                     return_counts=True, dim=0))
    values, fill, blank = _one_fill(A, "unique()")
    nan_fill = bool(torch.isnan(fill).any()) if fill.is_floating_point() else False
    if nan_fill and blank:  # n - s distinct NaNs: the output is O(numel) anyway
        return torch.unique(A.to_dense(), sorted=True, return_inverse=return_inverse,
                            return_counts=return_counts)
    x = torch.cat([values, fill.expand(min(blank, 1))])
    u, inv, counts = torch.unique(x, sorted=True, return_inverse=True, return_counts=True)
    if blank:
        counts = counts.index_add(0, inv[-1:], counts.new_full((1,), blank - 1))
    out = [u]
    if return_inverse:
        out.append(_inverse(A, inv, values.numel(), blank))
    if return_counts:
        out.append(counts)
    return out[0] if len(out) == 1 else tuple(out)


def _inverse(A, inv, nstored, blank):
    """The dense inverse: the stored elements' entries at their positions,
    the fill's everywhere else."""
    B = all_sparse(A._coalesced())
    idx = B._coo_indices()
    flat = torch.zeros(A.numel(), dtype=torch.bool, device=inv.device)
    lin = torch.ops.sparsefill.coo_linearize(idx, list(A.shape)) if idx.shape[0] > 1 else \
        (idx[0] if idx.shape[0] else idx.new_zeros(idx.shape[1]))
    flat[lin] = True
    out = torch.empty(A.numel(), dtype=torch.int64, device=inv.device)
    out[lin] = inv[:nstored]
    if blank:
        out[~flat] = inv[nstored]
    return out.reshape(A.shape)


def _delinear(lin, sizes):
    """COO coordinates (len(sizes), k) of row-major linear indices."""
    if len(sizes) > 1:
        return torch.ops.sparsefill.coo_delinearize(lin, list(sizes))
    return lin.reshape(1, -1) if sizes else lin.new_zeros((0, lin.numel()))


def _unique_slices(A, dim, what, return_inverse, return_counts, distinct):
    """unique / unique_consecutive with ``dim=``: torch's own ``distinct(C)``
    on C, the slices along `dim` cut down to the positions that can tell two
    slices apart: those some slice stores, and of the positions no slice
    stores, the first of each fill class (positions where every slice holds
    the same fill value; a later one of a class repeats an earlier column,
    which changes neither torch's lexicographic order nor its groups, and
    the kept one keeps what a NaN fill does to its comparisons). So the order
    and groups are those of the dense slices. C is [slices, kept positions],
    at most the dense size; with a fill that varies across the slice, the
    classes cost O(slice size) more. The distinct slices come back sparse,
    every element of C's stored columns stored, each with the fill of the
    slices of its group."""
    nd = A.dim()
    if nd == 0:
        raise IndexError(f"{what}: dim= needs a tensor with at least one dim")
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, "
                         f"{nd - 1}], but got {dim})")
    d = dim % nd
    B = all_sparse(A._coalesced())
    n = A.shape[d]
    rest = tuple(A.shape[:d]) + tuple(A.shape[d + 1:])
    m = math.prod(rest)
    dev = A.device
    # the fill with dim d first: (1 or n, *its sizes over rest), in the graph
    F = _fill.full_rank(A._fill_value(), nd).movedim(d, 0).to(A.dtype)
    frest = tuple(F.shape[1:])
    Fr = F.reshape(F.shape[0], -1)
    idx = B._coo_indices()
    slice_of = idx[d]
    pos = linear(torch.cat([idx[:d], idx[d + 1:]]), rest)  # each stored element's position
    positions = torch.unique(pos)
    if math.prod(frest) == 1:  # one class: the first position no slice stores
        gaps = (positions != torch.arange(positions.numel(), device=dev)).nonzero()
        first = gaps[:1, 0] if gaps.numel() else positions.new_full((int(positions.numel() < m),),
                                                                     positions.numel())
        blank = first
    else:  # the first unstored position of each class, over one slice's positions
        cls_all = torch.arange(math.prod(frest), device=dev).reshape(frest).expand(rest)
        cls_all = cls_all.reshape(-1)
        free = torch.ones(m, dtype=torch.bool, device=dev)
        free[positions] = False
        p_free = free.nonzero().squeeze(1)
        blank = torch.full((math.prod(frest),), m, dtype=torch.int64, device=dev).scatter_reduce(
            0, cls_all[p_free], p_free, "amin")
        blank = blank[blank < m]
    kept, order = torch.sort(torch.cat([positions, blank]))
    coords = _delinear(kept, rest)
    cls = linear(coords * torch.tensor([int(f > 1) for f in frest], device=dev).reshape(-1, 1),
                 frest) if frest else kept.new_zeros(kept.numel())
    C = Fr[:, cls].expand(n, kept.numel()).clone()
    C[slice_of, torch.searchsorted(kept, pos)] = B._sf_values.to(A.dtype)
    u, inv, counts = distinct(C)
    k = u.shape[0]
    stored_cols = order.argsort()[:positions.numel()]  # C's columns of `positions`
    if F.shape[0] == 1:
        fill_out = F
    else:  # the fill of one slice of each group (all of a group's agree where they count)
        src = torch.zeros(k, dtype=torch.int64, device=dev).scatter_(
            0, inv, torch.arange(n, device=dev))
        fill_out = F.index_select(0, src)
    g = torch.arange(k, device=dev).repeat_interleave(positions.numel())
    out_idx = torch.cat([g.unsqueeze(0), _delinear(positions, rest).repeat(1, k)])
    U = build(torch.sparse_coo, (k,) + rest, u[:, stored_cols].reshape(-1),
              _fill.canonical(fill_out, nd, 0), indices=out_idx)
    out = [U.movedim(0, d)]
    if return_inverse:
        out.append(inv)
    if return_counts:
        out.append(counts)
    return out[0] if len(out) == 1 else tuple(out)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """Runs of equal elements in row-major order: the fill's runs between
    stored elements are one run each (O(stored) runs); the inverse is dense
    (O(numel)). ``dim=``: runs of equal slices (see _unique_slices).

    Example::

        >>> A = sf.sparse_coo_tensor([[2]], [4.], (5,), fill_value=1.)
        >>> torch.unique_consecutive(A, return_counts=True)
        (tensor([1., 4., 1.]), tensor([2, 1, 2]))
    """
    A = _args.sparse(input, "unique_consecutive()")
    if dim is not None:
        return _unique_slices(A, dim, "unique_consecutive()", return_inverse, return_counts,
                              lambda C: torch.unique_consecutive(C, return_inverse=True,
                                                                 return_counts=True, dim=0))
    _one_fill(A, "unique_consecutive()")
    lanes = Lanes(A, None, "unique_consecutive()")
    n, dev = lanes.n, lanes.device
    p = lanes.pos
    prev = torch.cat([p.new_full((1,), -1), p])
    gaps = torch.cat([p, p.new_full((1,), n)]) - prev - 1  # fill run before each, and last
    fill = lanes.fill_of(torch.zeros(1, dtype=torch.int64, device=dev)).to(lanes.values.dtype)
    # interleave: gap0, v0, gap1, v1, ..., gap_s
    seq = torch.empty(2 * lanes.s + 1, dtype=lanes.values.dtype, device=dev)
    lens = torch.empty(2 * lanes.s + 1, dtype=torch.int64, device=dev)
    seq[0::2], lens[0::2] = fill.expand(lanes.s + 1), gaps
    seq[1::2], lens[1::2] = lanes.values, 1
    if seq.is_floating_point() and bool(torch.isnan(fill).any()):  # each NaN apart
        is_fill = torch.zeros_like(lens, dtype=torch.bool)
        is_fill[0::2] = True
        reps = torch.where(is_fill, lens, 1)
        seq = seq.repeat_interleave(reps)
        lens = torch.where(is_fill, 1, lens).repeat_interleave(reps)
        lens = torch.where(torch.isnan(seq) | (lens > 0), lens, 0)
    keep = lens > 0
    seq, lens = seq[keep], lens[keep]
    u, inv = torch.unique_consecutive(seq, return_inverse=True)
    out = [u]
    if return_inverse:
        out.append(inv.repeat_interleave(lens).reshape(A.shape))
    if return_counts:
        out.append(torch.zeros(u.shape[0], dtype=torch.int64, device=dev).index_add_(0, inv, lens))
    return out[0] if len(out) == 1 else tuple(out)


# ---- histograms --------------------------------------------------------------------

def bincount(input, weights=None, minlength=0):
    """Counts of each non-negative integer; the fill counted ``n - s`` times
    (with `weights`, its bin gets the weights of the unspecified positions).

    Example::

        >>> torch.bincount(sf.sparse_coo_tensor([[0]], [3], (5,), fill_value=1))
        tensor([0, 4, 0, 1])
    """
    A = _args.sparse(input, "bincount()")
    if A.dim() != 1:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    values, fill, blank = _one_fill(A, "bincount()")
    x = torch.cat([values, fill.expand(min(blank, 1))])
    if weights is None:
        out = torch.bincount(x, minlength=minlength)
        if blank:
            out = out.index_add(0, fill.to(torch.int64), out.new_full((1,), blank - 1))
        return out
    if isinstance(weights, SparseFillTensor):
        weights = weights.to_dense()
    pos = A._coalesced()._coo_indices()[0]
    free = torch.ones(A.shape[0], dtype=torch.bool, device=pos.device)
    free[pos] = False
    w = torch.cat([weights.index_select(0, pos), weights[free].sum().reshape(1)[:min(blank, 1)]])
    return torch.bincount(x, weights=w, minlength=minlength)


def histc(input, bins=100, min=0, max=0, *, out=None):
    """Histogram of equal-width bins; the fill's bin gets ``n - s``; with
    ``min == max == 0`` the range is the data's, the fill included.

    Example::

        >>> torch.histc(sf.sparse_coo_tensor([[0]], [3.], (5,), fill_value=1.), 2, 0, 4)
        tensor([4., 1.])
    """
    A = _args.sparse(input, "histc()")
    values, fill, blank = _one_fill(A, "histc()")
    lo, hi = float(min), float(max)
    if lo == hi and A.numel():
        lo, hi = float(torch.amin(A).reshape(())), float(torch.amax(A).reshape(()))
        if lo == hi:
            lo, hi = lo - 1, hi + 1
    h = torch.histc(values, bins, lo, hi)
    if blank:
        h = h + torch.histc(fill, bins, lo, hi) * blank
    return h


def histogram(input, bins, *, range=None, weight=None, density=False, out=None):
    """torch.histogram with the fill counted once with weight ``n - s`` (or
    the unspecified positions' weights).

    Example::

        >>> torch.histogram(sf.sparse_coo_tensor([[0]], [3.], (5,), fill_value=1.), 2).hist
        tensor([4., 1.])
    """
    A = _args.sparse(input, "histogram()")
    values, fill, blank = _one_fill(A, "histogram()")
    x = torch.cat([values, fill.expand(min(blank, 1))])
    if weight is None:
        w = torch.ones_like(x)
        if blank:
            w[-1] = blank
    else:
        if isinstance(weight, SparseFillTensor):
            weight = weight.to_dense()
        B = all_sparse(A._coalesced())
        idx = B._coo_indices()
        mask = torch.ones(A.shape, dtype=torch.bool, device=x.device)
        mask[tuple(idx)] = False
        w = torch.cat([weight[~mask], weight[mask].sum().reshape(1)[:min(blank, 1)]])
    if isinstance(bins, SparseFillTensor):
        bins = bins.to_dense()
    if range is None:  # (torch takes no range= beside tensor bins)
        return torch.histogram(x, bins, weight=w, density=density)
    return torch.histogram(x, bins, range=range, weight=w, density=density)


# ---- searchsorted, bucketize ------------------------------------------------------

def _count_sorted(seq: SparseFillTensor, x: torch.Tensor, right: bool):
    """torch's binary search of each `x` in the 1-D sparse `seq`, step for
    step (so a sequence with NaN answers as dense does): log2(n) probes,
    each a lookup among the stored positions. O(len(x) log n log stored)."""
    values, fill, _ = _one_fill(seq, "searchsorted()")
    pos = seq._coalesced()._coo_indices()[0]
    s, n = pos.numel(), seq.shape[0]
    start = torch.zeros(x.shape, dtype=torch.int64, device=x.device)
    end = torch.full(x.shape, n, dtype=torch.int64, device=x.device)
    f = fill.reshape(())
    while True:
        active = start < end
        if not bool(active.any()):
            return start
        mid = start + (end - start) // 2
        j = torch.searchsorted(pos, mid).clamp_(max=max(s - 1, 0))
        hit = pos[j] == mid if s else torch.zeros_like(active)
        mid_val = torch.where(hit, values[j], f) if s else f.expand(x.shape)
        # torch's tests: lower bound moves on where not (b >= x), upper where not (b > x)
        go_right = ~(mid_val > x) if right else ~(mid_val >= x)
        start = torch.where(active & go_right, mid + 1, start)
        end = torch.where(active & ~go_right, mid, end)


def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None, out=None):
    """torch.searchsorted: a 1-D sparse sorted sequence (torch's binary
    search run on it, each probe a lookup: O(len(input) log n log stored)),
    or a sparse `input` (the result has its pattern).

    Example::

        >>> seq = sf.sparse_coo_tensor([[4]], [9.], (5,), fill_value=1.)
        >>> torch.searchsorted(seq, torch.tensor([0., 1., 5.]))
        tensor([0, 0, 4])
    """
    if sorter is not None and isinstance(sorted_sequence, SparseFillTensor):
        # the sorter is a dense permutation of the sequence: the sequence in
        # its order, read through it (lookups), is no larger
        if tuple(sorter.shape) != tuple(sorted_sequence.shape):
            raise RuntimeError(f"torch.searchsorted(): boundary and sorter must have the same "
                               f"size, but got boundary tensor {list(sorted_sequence.shape)} "
                               f"and got sorter tensor {list(sorter.shape)}")
        sorted_sequence, sorter = torch.gather(sorted_sequence, -1, sorter), None
    if side is not None:
        right = side == "right"
    dtype = torch.int32 if out_int32 else torch.int64
    if isinstance(input, SparseFillTensor):
        if isinstance(sorted_sequence, SparseFillTensor):
            raise NotImplementedError("torch_sparsefill: searchsorted of a SparseFillTensor in "
                                      "a SparseFillTensor is not supported; densify one")
        input = input._coalesced()
        return input._with(torch.searchsorted(sorted_sequence, input._sf_values, right=right,
                                              out_int32=out_int32, sorter=sorter),
                           torch.searchsorted(sorted_sequence, input._sf_fill, right=right,
                                              out_int32=out_int32, sorter=sorter))
    if not isinstance(sorted_sequence, SparseFillTensor):
        return torch.searchsorted(sorted_sequence, input, right=right, out_int32=out_int32,
                                  sorter=sorter)
    seq = sorted_sequence
    if seq.dim() != 1:
        refuse("searchsorted()", "with a sparse sequence of more than one dim")
    if not isinstance(input, torch.Tensor):
        input = torch.tensor(input, dtype=seq.dtype)
    return _count_sorted(seq, input, right).to(dtype)


def bucketize(input, boundaries, *, out_int32=False, right=False, out=None):
    """torch.bucketize: element-wise on a sparse `input` (its pattern kept),
    or into sparse sorted `boundaries` (see :func:`searchsorted`).

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [7.], (3,), fill_value=1.)
        >>> torch.bucketize(A, torch.tensor([0., 5.])).to_dense()
        tensor([2, 1, 1])
    """
    if isinstance(input, SparseFillTensor):
        input = input._coalesced()  # (duplicates sum first: bucketize is not linear)
        if isinstance(boundaries, SparseFillTensor):
            boundaries = boundaries.to_dense()  # 1-D, no larger than the result's count
        return input._with(torch.bucketize(input._sf_values, boundaries, out_int32=out_int32,
                                           right=right),
                           torch.bucketize(input._sf_fill, boundaries, out_int32=out_int32,
                                           right=right))
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


ROUTES = {
    torch.mode: mode, T.mode: mode, torch.unique: unique, T.unique: unique,
    torch.unique_consecutive: unique_consecutive, T.unique_consecutive: unique_consecutive,
    torch.bincount: bincount, T.bincount: bincount, torch.histc: histc, T.histc: histc,
    torch.histogram: histogram, T.histogram: histogram,
    torch.searchsorted: searchsorted, torch.bucketize: bucketize,
}
