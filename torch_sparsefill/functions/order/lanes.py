"""The working form of the order statistics (functions/order/, RFC.md#order-statistics):
a tensor seen as ``L`` lanes of length ``n`` along one dim (or one lane of
every element), each lane holding its stored elements and one block of
``n - s`` copies of its fill.

Everything here is O(stored log stored) plus the size of what is asked for;
nothing is ever of size ``L * n`` except the outputs that are so by nature
(sort's indices, argsort).

The order of a lane (``Order``): its stored values sorted stably by value
(ascending or descending, NaN last or first), then the fill's block placed
at its rank; stored values equal to the fill (ties, NaN with a NaN fill)
interleave with the block in index order, as a stable sort of the dense
lane puts them. A stored element's slot in the sorted lane (``slot``):

- before the block: its rank among the lane's stored values, ``r``;
- tied with the fill: ``r + (p - k)``, where ``p - k`` counts the
  unspecified positions before its position ``p`` (``k``: stored ones);
- after the block: ``r + (n - s)``.

Every slot not taken by a stored element belongs to the block, and the
block's slots, in order, hold the unspecified positions in increasing order.
"""
from __future__ import annotations

import math

import torch

from ...tensor import fill as _fill
from ...tensor import SparseFillTensor, build

_ops = torch.ops.sparsefill

__all__: list = []


def refuse(what: str, why: str):
    raise NotImplementedError(f"torch_sparsefill: {what} {why} is not supported on "
                              f"SparseFillTensor; call it on A.to_dense()")


class Order:
    """How a lane is ordered: `descending`, and whether NaN comes first."""

    def __init__(self, descending: bool, nan_first: bool):
        self.descending, self.nan_first = descending, nan_first

    def classify(self, v, f):
        """Per stored value `v` and its lane's fill `f`: -1 before the block,
        0 tied with it, 1 after it."""
        vn, fn = torch.isnan(v), torch.isnan(f)
        less, more = (v < f), (v > f)
        if self.descending:
            less, more = more, less
        if self.nan_first:
            before, after = less | (vn & ~fn), more | (fn & ~vn)
        else:
            before, after = less | (fn & ~vn), more | (vn & ~fn)
        return after.to(torch.int8) - before.to(torch.int8)

    def argsort(self, v):
        """A stable permutation of `v` into this order."""
        if v.dtype == torch.bool:
            v = v.to(torch.uint8)
        perm = torch.sort(v, stable=True, descending=self.descending).indices
        if self.nan_first != self.descending and v.is_floating_point():
            # torch puts NaN last ascending, first descending: move them
            key = (~torch.isnan(v.index_select(0, perm))).to(torch.int8)
            if self.descending:  # NaN last: the non-NaN key first
                key = 1 - key
            perm = perm.index_select(0, torch.sort(key, stable=True).indices)
        return perm


# the dtypes the native per-lane selection orders exactly (widened to
# float32 / int64 in it)
_NATIVE_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64,
                  torch.int32, torch.int16, torch.int8, torch.uint8)

ASCENDING = Order(False, False)
DESCENDING = Order(True, True)


def _starts(sorted_keys):
    """Per element of a sorted key array: the index of its key's first element."""
    return torch.searchsorted(sorted_keys, sorted_keys)


def merged_values(src, values, fill):
    """The values of merged slots (lane_topk_fill's `src` [L, k]): the stored
    value where src >= 0, else the lane's fill (`fill` [L, 1] or one value).
    Differentiable to both; a fill that no slot takes gets gradient 0, never
    NaN, even when it is inf or NaN (where's backward masks, never multiplies)."""
    if values.shape[0]:
        stored = values.index_select(0, src.reshape(-1).clamp(min=0)).reshape(src.shape)
    else:
        stored = values.new_zeros(src.shape)
    return torch.where(src >= 0, stored, fill.to(values.dtype))


def csr_lanes(A: SparseFillTensor, d: int, order: "Order"):
    """(crow, col, values, fill) of a 2-D CSR matrix (no dense or batch
    dims, on the CPU, a dtype the native per-row ops order) whose lanes
    along `d` are its rows (d 1) or its columns (d 0), `fill` one value or
    one per lane; None where the native per-row ops do not apply (the
    caller takes the general path)."""
    v = A._sf_values
    if (A._sf_layout is not torch.sparse_csr or d not in (0, 1) or len(A._sf_size) != 2 or
            A._sf_crow.dim() != 1 or v.dim() != 1 or v.device.type != "cpu" or
            v.dtype not in _NATIVE_DTYPES or order not in (ASCENDING, DESCENDING)):
        return None
    A._check_edits()
    F = _fill.full_rank(A._sf_fill, 2)
    if F.shape[d] != 1:  # varies along the lanes: no single block (the general path refuses)
        return None
    fill = F.reshape(-1) if F.numel() != 1 else F.reshape(())
    return A._sf_crow, A._sf_col, v, fill


def csr_rows_first_k(A: SparseFillTensor, d: int, k: int, order: "Order"):
    """topk's (values, positions) [m, k] of a 2-D CSR matrix (no dense or
    batch dims, on the CPU) along its rows (`d` 1), read from its crow and
    col as they are: the native selection merges each row's best stored
    values with its fill's block (sparsefill::lane_topk_fill), no COO
    indices, no sort here. None where this path does not apply (the caller
    takes the general one). Differentiable to values and fill.

    Example::

        >>> A = sf.sparse_csr_tensor([0, 1, 1], [2], [9.], (2, 3), fill_value=1.)
        >>> csr_rows_first_k(A, 1, 2, DESCENDING)
        (tensor([[9., 1.],
                [1., 1.]]), tensor([[2, 0],
                [0, 1]]))
    """
    args = csr_lanes(A, d, order) if d == 1 else None
    if args is None:
        return None
    crow, col, v, fill = args
    src, pos = _ops.lane_topk_fill(crow, col, v.detach(), fill.detach().to(v.dtype),
                                   A._sf_size[1], k, order.descending)
    return merged_values(src, v, fill.unsqueeze(-1) if fill.dim() else fill), pos


def all_sparse(A: SparseFillTensor) -> SparseFillTensor:
    """A coalesced, its dense dims made sparse (SparseFillTensor._all_sparse)."""
    return A._coalesced()._all_sparse()


class Lanes:
    """The stored elements of A (no dense dims) along dim `d` (None: every
    element in one lane, row-major) in (lane, position) order:
    ``lane``, ``pos``, ``values``; ``n`` the lane length, ``L`` the lane
    count, ``other_sizes`` the sizes of the other dims (in order)."""

    def __init__(self, A: SparseFillTensor, d, what: str):
        A = all_sparse(A._coalesced())
        size = tuple(A._sf_size)
        sd = len(size)
        idx = A._coo_indices()
        values = A._sf_values
        F = _fill.full_rank(A._sf_fill, sd)
        self.A, self.d, self.size = A, d, size
        if d is None:
            if F.numel() != 1:
                refuse(what, "over every element of a tensor with a per-slice fill")
            self.n, self.L, self.other_sizes = math.prod(size), 1, ()
            self.lane = torch.zeros(values.shape[0], dtype=torch.int64, device=values.device)
            self.pos = _ops.coo_linearize(idx, list(size)) if sd > 1 else \
                (idx[0] if sd == 1 else self.lane)
            self.others = idx[:0]
            self._fill = F.reshape(1)
        else:
            if F.shape[d] != 1:
                refuse(what, f"along dim {d} of a tensor whose per-slice fill varies along it")
            others = [k for k in range(sd) if k != d]
            self.n = size[d]
            self.other_sizes = tuple(size[k] for k in others)
            self.L = math.prod(self.other_sizes)
            self.pos = idx[d]
            self.others = idx[others]
            # one lane: an expanded zero (read only), no copy of the positions' size
            self.lane = _ops.coo_linearize(self.others, list(self.other_sizes)) if others else \
                torch.zeros((), dtype=torch.int64, device=self.pos.device).expand(self.pos.shape)
            if d != sd - 1 and values.shape[0] > 1:
                perm = torch.argsort(self.lane * self.n + self.pos)
                self.lane, self.pos = self.lane[perm], self.pos[perm]
                self.others, values = self.others[:, perm], values.index_select(0, perm)
            f = F.select(d, 0)
            self._fill = f.reshape(1) if f.numel() == 1 else f  # over the other dims
        self.values = values
        self.s = values.shape[0]
        self.device = values.device

    def fill_of(self, lanes):
        """The fill of each lane in `lanes` (any shape)."""
        f = self._fill
        if f.numel() == 1:
            return f.reshape(()).expand(lanes.shape)
        return f.expand(self.other_sizes).reshape(-1)[lanes]

    # ---- the sorted lanes ---------------------------------------------------------

    def place(self, order: Order):
        """Sort each lane's stored values in `order` and give each its slot in
        the sorted lane. Sets ``perm`` (stored elements in sorted order),
        ``slot`` (their slots, increasing within a lane), ``cls`` and
        ``lane_sorted`` (each one's place against the block and lane, in
        that order) and ``key`` (``lane * n + slot``, sorted)."""
        lane, pos = self.lane, self.pos
        k = torch.arange(self.s, device=self.device) - _starts(lane)  # stored before, per lane
        perm = order.argsort(self.values)
        perm = perm.index_select(0, torch.sort(lane.index_select(0, perm), stable=True).indices)
        lane_s = lane.index_select(0, perm)
        start = _starts(lane_s)
        r = torch.arange(self.s, device=self.device) - start
        count = torch.searchsorted(lane_s, lane_s, right=True) - start  # stored per lane
        cls = order.classify(self.values.index_select(0, perm), self.fill_of(lane_s))
        gap = (pos - k).index_select(0, perm)  # unspecified positions before each
        slot = torch.where(cls < 0, r, torch.where(cls == 0, r + gap, r + (self.n - count)))
        self.perm, self.slot, self.cls, self.lane_sorted = perm, slot, cls, lane_s
        self.key = lane_s * self.n + slot
        # (lane, unspecified before) of each stored element: sorted, for unspecified()
        self._gap_key = lane * (self.n + 1) + (pos - k)

    def unspecified(self, lanes, m):
        """The m-th unspecified position (0-based) of each lane in `lanes`."""
        base = lanes * (self.n + 1)
        stored = torch.searchsorted(self._gap_key, base + m, right=True) - \
            torch.searchsorted(self._gap_key, base)
        return m + stored

    def at_slots(self, lanes, slots):
        """Value and position of the elements at `slots` of the sorted
        `lanes` (equal shapes): differentiable to values and fill."""
        q = lanes * self.n + slots
        flat_q = q.reshape(-1)
        at = torch.searchsorted(self.key, flat_q)
        found = torch.clamp(at, max=max(self.s - 1, 0))
        hit = (at < self.s) & (self.key.index_select(0, found) == flat_q) if self.s else \
            torch.zeros_like(flat_q, dtype=torch.bool)
        taken_before = at - torch.searchsorted(self.key, lanes.reshape(-1) * self.n)
        free = self.unspecified(lanes.reshape(-1), slots.reshape(-1) - taken_before)
        src = self.perm.index_select(0, found) if self.s else found
        if self.s:
            stored_v = self.values.index_select(0, src)
            stored_p = self.pos.index_select(0, src)
        else:
            stored_v = torch.zeros(flat_q.shape, dtype=self.values.dtype, device=self.device)
            stored_p = torch.zeros_like(flat_q)
        fill = self.fill_of(lanes.reshape(-1)).to(stored_v.dtype)
        values = torch.where(hit, stored_v, fill)
        positions = torch.where(hit, stored_p, free)
        return values.reshape(q.shape), positions.reshape(q.shape)

    def first_k(self, k: int, order: Order):
        """(values, positions) [L, k] of the first k slots of every lane sorted
        in `order` (torch's own orders: DESCENDING or ASCENDING), without
        sorting all stored values. On the CPU the native selection does it
        all (sparsefill::lane_topk_fill: a heap of k per lane, O(stored log
        k), merged with the fill's block there). Elsewhere each lane's
        stored values are laid in a row of a padded [L, widest lane] matrix
        in position order, whose topk gives each lane's k-th best value and
        so its best k stored ones; they meet the fill's first k unspecified
        positions in a sort of 2k candidates by position, then stably by
        value. Either way ties fall in index order, as in a stable sort of
        the dense lane. None where the padding would outweigh the stored
        elements (a lane much longer than the others) or for bool: the
        caller then places every stored value. Differentiable to values and
        fill."""
        v, lane, pos, L, n, s = self.values, self.lane, self.pos, self.L, self.n, self.s
        if v.dtype == torch.bool or order not in (ASCENDING, DESCENDING):
            return None
        dev = self.device
        if dev.type == "cpu" and v.dtype in _NATIVE_DTYPES:
            # the lanes as CSR rows (stored elements in (lane, position) order):
            # the native selection merges them with the block
            crow = torch.tensor([0, s], device=dev) if L == 1 else _ops.crow_from_rows(lane, L)
            f = self._fill if self._fill.numel() == 1 else \
                self.fill_of(torch.arange(L, device=dev))
            f = f.reshape(()) if f.numel() == 1 else f
            src, where = _ops.lane_topk_fill(crow, pos, v.detach(), f.detach().to(v.dtype), n, k,
                                             order.descending)
            return merged_values(src, v, f.unsqueeze(-1) if f.dim() else f), where
        # (lane, unspecified before) of each stored element, as place() sets it,
        # for unspecified(); one lane: its position less its rank, in place
        if L == 1:
            count = torch.full((1,), s, dtype=torch.int64, device=dev)
            self._gap_key = torch.arange(s, device=dev).neg_().add_(pos)
        else:
            count = torch.bincount(lane, minlength=L) if s else \
                torch.zeros(L, dtype=torch.int64, device=dev)
            self._gap_key = lane * (n + 1) + (pos - self._columns(count))
        desc = order.descending
        if v.is_floating_point():
            worst = -math.inf if desc else math.nan  # after every value in torch's order
        else:
            info = torch.iinfo(v.dtype)
            worst = info.min if desc else info.max
        width = int(count.max()) if s else 0
        if L * width > 4 * s + 4096:
            return None
        sv, sp = self._padded_best(count, self._columns(count), width, k, desc, worst)
        # the fill's block: the first k unspecified positions of each lane
        m = torch.arange(min(k, n), device=dev).expand(L, min(k, n))
        fp = self.unspecified(torch.arange(L, device=dev).unsqueeze(1).expand_as(m).contiguous(),
                              m.contiguous())
        real = m < (n - count).unsqueeze(1)
        fv = self.fill_of(torch.arange(L, device=dev)).to(v.dtype).unsqueeze(1).expand_as(m)
        fv = torch.where(real, fv, torch.full((), worst, dtype=v.dtype, device=dev))
        cand_v, cand_p = torch.cat([sv, fv], 1), torch.cat([sp, torch.where(real, fp, n)], 1)
        by_pos = torch.sort(cand_p, dim=1, stable=True).indices
        cand_v, cand_p = cand_v.gather(1, by_pos), cand_p.gather(1, by_pos)
        best = torch.sort(cand_v, dim=1, descending=desc, stable=True).indices[:, :k]
        return cand_v.gather(1, best), cand_p.gather(1, best)

    def _columns(self, count):
        """Each stored element's rank within its lane."""
        return torch.arange(self.s, device=self.device) - \
            (torch.cumsum(count, 0) - count).index_select(0, self.lane)

    def _padded_best(self, count, col, width: int, k: int, desc: bool, worst):
        """The same by a padded [L, widest lane] matrix and its topk."""
        v, lane, pos, L, n, dev = self.values, self.lane, self.pos, self.L, self.n, self.device
        padded = v.new_full((L, width), worst).index_put((lane, col), v)
        where = torch.full((L, width), n, dtype=torch.int64, device=dev).index_put((lane, col),
                                                                                    pos)
        kk = min(k, width)
        if kk:
            # each lane's kk best, ties by position: all better than its kk-th
            # best value t, then the first of those equal to t (values of
            # topk are exact whatever tied element it picks)
            t = torch.topk(padded.detach(), kk, dim=1, largest=desc).values[:, -1:]
            floating = v.is_floating_point()
            nan_t = torch.isnan(t) if floating else torch.zeros_like(t, dtype=torch.bool)
            isnan = torch.isnan(padded) if floating else torch.zeros_like(padded, dtype=torch.bool)
            better = (padded > t) if desc else (padded < t)
            better = better | (isnan & ~nan_t) if desc else better | (~isnan & nan_t)
            equal = (padded == t) | (isnan & nan_t)
            need = kk - better.sum(1, keepdim=True)
            chosen = better | (equal & (torch.cumsum(equal, 1) <= need))
            rows_cols = chosen.nonzero()  # kk per lane, in position order
            sv = padded[rows_cols[:, 0], rows_cols[:, 1]].reshape(L, kk)
            sp = where[rows_cols[:, 0], rows_cols[:, 1]].reshape(L, kk)
        else:
            sv, sp = padded[:, :0], where[:, :0]
        return sv, sp

    def all_lanes(self, count: int):
        """[L, count] lane numbers, every lane."""
        return torch.arange(self.L, device=self.device).unsqueeze(1).expand(self.L, count)

    def to_lanes_shape(self, x, keepdim: bool, width=None):
        """[L, w] per-lane results as a tensor of A's shape with dim d of
        size w (kept with `keepdim` or when `width` is given; removed
        otherwise); d None: the lane's result alone."""
        w = x.shape[-1]
        if self.d is None:
            return x.reshape(((1,) * len(self.size) if keepdim else ()) + (() if width is None
                                                                          else (w,)))
        out = x.reshape(self.other_sizes + (w,)).movedim(-1, self.d)
        if width is None and not keepdim:
            out = out.squeeze(self.d)
        return out
