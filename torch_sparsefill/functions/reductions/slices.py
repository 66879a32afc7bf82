"""The machinery of the reductions (functions/reductions/handlers.py) and of softmax
(functions/reductions/softmax.py), RFC.md#reductions-and-softmax: stored elements grouped by slice, the fill
of each slice, and the generic reduction driver with one core per reduction.

Each unspecified element counts as one copy of the fill. The work is split
by the dims reduced:

- dense dims only: the torch reduction runs on ``values`` and on the fill;
  the pattern stays (autograd is torch's on those dense components);
- sparse dims: ``torch.ops.sparsefill.slice_plan`` groups the stored
  elements by slice (the positions of the kept sparse dims), and the
  segment ops (``seg_reduce``, ``seg_max``) reduce each slice with its
  ``n - s`` unspecified elements, with explicit gradients to values and
  fill. Kept sparse dims give a SparseFillTensor whose fill is the reduction
  of ``n`` copies of the fill (``n f`` for sum); no kept sparse dim gives a
  strided tensor.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from ...ops import common as _common
from ...tensor import fill as _fill
from ...tensor import SparseFillTensor, build

_ops = torch.ops.sparsefill

__all__: list = []


# ---- slices and the fill of each slice ------------------------------------------

def flat(x):
    """[rows, *dense] -> [rows, w] (w = 0 allowed)."""
    return x.reshape(x.shape[0], math.prod(x.shape[1:]))


class Slices:
    """The stored elements of A grouped by slice for reducing sparse dims R.

    seg_ptr: [nseg + 1]; perm: stored elements in segment order (None when
    already so); kept: linear index (over the kept sparse dims) of each
    segment, or None when every slice has a segment (row-major);
    n: slice length; kept_dims / kept_sizes: the sparse dims that remain.
    """

    def __init__(self, A: SparseFillTensor, R: list, compact: bool, plan: bool = True):
        sd = A.sparse_dim()
        size = A._sf_size
        self.R = R
        self.sparse_size = tuple(size[:sd])
        self.kept_dims = [d for d in range(sd) if d not in R]
        self.kept_sizes = [size[d] for d in self.kept_dims]
        self.n = math.prod(size[d] for d in R)
        self.nslices = math.prod(self.kept_sizes)
        if not plan:  # the shape facts only (_reduce_by_slots groups nothing)
            return
        if A.layout == torch.sparse_csr and R == [1] and not compact:
            self.seg_ptr, self.perm, self.kept = A._sf_crow, None, None
        else:
            seg_ptr, perm, kept = _ops.slice_plan(A._coo_indices(), list(size[:sd]), R, compact)
            self.seg_ptr = seg_ptr
            self.perm = perm if perm.numel() else None
            self.kept = kept if compact else None
        self.nseg = self.seg_ptr.shape[0] - 1

    def rows(self, values):
        """values in segment order, flattened to [nse, w]."""
        v = values if self.perm is None else values.index_select(0, self.perm)
        return flat(v)

    def unrows(self, out, dense_shape):
        """Inverse of rows for a per-element result of the same dense shape."""
        out = out.reshape((out.shape[0],) + tuple(dense_shape))
        if self.perm is None:
            return out
        # perm is a permutation of every stored row, so each row is written:
        # no zero-filled buffer first (a 40 MB memset for 10M float32)
        return torch.empty_like(out).index_copy(0, self.perm, out)

    def counts(self):
        return self.seg_ptr[1:] - self.seg_ptr[:-1]

    def result(self, layout, kept_lin, values, fill, dense_shape, keepdim: bool):
        """The SparseFillTensor of one stored element per slice `kept_lin`
        (linear indices over the kept sparse dims): `values` ``[len, *dense_shape]``,
        `fill` in the dense-part form or over (kept sparse dims, *dense_shape).
        With `keepdim` the reduced sparse dims stay, with size 1."""
        indices = _ops.coo_delinearize(kept_lin, self.kept_sizes)
        size = tuple(self.kept_sizes)
        if keepdim:
            full = torch.zeros(len(self.sparse_size), indices.shape[1], dtype=torch.int64,
                               device=indices.device)
            full[self.kept_dims] = indices
            indices = full
            size = tuple(1 if d in self.R else s for d, s in enumerate(self.sparse_size))
            if _fill.is_per_slice(fill, len(dense_shape)):
                shape = list(fill.shape)
                for d in self.R:
                    shape.insert(d, 1)
                fill = fill.reshape(shape)
        return build(layout, size + tuple(dense_shape), values, fill, indices=indices)


def fill_over_kept(A: SparseFillTensor, R: list, dense_shape, what: str):
    """The fill as a tensor over (kept sparse dims, *dense_shape), each dim of
    size 1 or full; raises when a per-slice fill varies along a reduced dim."""
    sd = A.sparse_dim()
    fill = A._sf_fill
    if not A._has_per_slice_fill():
        kept = sd - len(R)
        return fill.expand(tuple(dense_shape)).reshape((1,) * kept + tuple(dense_shape))
    if _fill.varies_along(fill, A.dense_dim(), R):
        raise NotImplementedError(
            f"torch_sparsefill: {what} along dims {R} of a tensor whose per-slice fill of shape "
            f"{tuple(fill.shape)} varies along them is not supported yet (only sum and mean)")
    return _over_kept(fill, R, sd, dense_shape)


def _over_kept(fill, R, sd, dense_shape):
    """A full-rank `fill`, size 1 along the reduced sparse dims R, as a
    tensor over (kept sparse dims, *dense_shape)."""
    f = fill.reshape(tuple(fill.shape[d] for d in range(sd) if d not in R) + tuple(fill.shape[sd:]))
    return f.expand(f.shape[: sd - len(R)] + tuple(dense_shape))


def fill_rows(S: Slices, fill_k) -> torch.Tensor:
    """One fill row per segment ([nseg, w]), or a single row when the fill
    is the same for every slice."""
    k = len(S.kept_dims)
    if all(s == 1 for s in fill_k.shape[:k]):
        return fill_k.reshape(1, math.prod(fill_k.shape[k:]))
    width = math.prod(fill_k.shape[k:])
    full = fill_k.expand(tuple(S.kept_sizes) + tuple(fill_k.shape[k:])).reshape(S.nslices, width)
    return full if S.kept is None else full.index_select(0, S.kept)


# ---- the generic reduction driver ----------------------------------------------

def reduce(A: SparseFillTensor, dims: list, keepdim: bool, core: Callable, what: str,
            linear: bool = False, finite_fill: bool = False):
    """Reduce A over `dims` with `core(values [nse, *dense], fill_rows
    [r, *dense], seg_ptr, n, D) -> [nseg, *dense with D kept as 1]`, where D
    are the dense dims (of the dense part) also reduced. Returns a strided
    tensor or a SparseFillTensor (kept sparse dims)."""
    A = A._for_reduction()
    sd = A.sparse_dim()
    size = A._sf_size
    R = [d for d in dims if d < sd]
    D = [d - sd for d in dims if d >= sd]
    dense_shape = tuple(size[sd:])
    kept_dense = tuple(1 if i in D else s for i, s in enumerate(dense_shape))
    final_dense = kept_dense if keepdim else tuple(s for i, s in enumerate(dense_shape)
                                                   if i not in D)
    varying = _fill.varies_along(A._sf_fill, A.dense_dim(), R)
    if varying and not linear:
        fill_over_kept(A, R, dense_shape, what)  # raises the clear error
    if not R:
        # Dense dims only: per stored position and for the fill alike.
        values = core(A._sf_values, None, None, None, D, dense_only=True)
        fill = A._sf_fill
        if A._has_per_slice_fill():
            f = fill.expand(tuple(fill.shape[:sd]) + dense_shape)
            f = core(f.reshape((-1,) + dense_shape), None, None, None, D, dense_only=True)
            f = f.reshape(tuple(fill.shape[:sd]) + f.shape[1:])
        else:
            f = core(fill.expand(dense_shape).unsqueeze(0), None, None, None, D,
                     dense_only=True)[0]
        values = values.reshape((values.shape[0],) + final_dense)
        f = f.reshape(f.shape[: f.dim() - len(kept_dense)] + final_dense) if \
            A._has_per_slice_fill() else f.reshape(final_dense)
        return A._with(values, f)

    if getattr(core, "slot_op", None) is not None and not varying and not D:
        out = _reduce_by_slots(A, R, keepdim, core)
        if out is not None:
            return out
    # Under a torch.func transform every kept slice is stored: vmap cannot
    # batch a count of non-empty slices (a data-dependent size); the empty
    # ones store their reduction of the fill, the same elements.
    every_slice = torch._C._are_functorch_transforms_active()
    compact = not every_slice and not A._has_per_slice_fill() and \
        math.prod(size[d] for d in range(sd) if d not in R) > 2 * A._nnz() + 64
    S = Slices(A, R, compact)
    values = A._sf_values if S.perm is None else A._sf_values.index_select(0, S.perm)
    extra = None
    if varying:
        # sum/mean with a fill that varies inside a slice: subtract each
        # stored element's own fill, then add the fill summed over the slice.
        fill = A._sf_fill
        # (finite_fill: the fill is known finite; under a transform, which
        # cannot read it, the class-counting route serves finite fills too.)
        if not finite_fill and (every_slice or not bool(torch.isfinite(fill).all())):
            # That identity would compute inf - inf: count the classes instead.
            return _nonfinite_linear(A, dims, keepdim, core, what)
        own_fill = _fill.at(fill, A._coo_indices(), dense_shape)
        values = values - (own_fill if S.perm is None else own_fill.index_select(0, S.perm))
        full_sum = fill
        for d in R:
            full_sum = full_sum.sum(d, keepdim=True) if fill.shape[d] != 1 else \
                full_sum * size[d]
        fill_k = _over_kept(full_sum, R, sd, dense_shape)
        extra = fill_rows(S, fill_k)
        fill_k_zero = torch.zeros_like(fill_k)
        frows = fill_rows(S, fill_k_zero)
    else:
        fill_k = fill_over_kept(A, R, dense_shape, what)
        frows = fill_rows(S, fill_k)
    frows = frows.reshape((frows.shape[0],) + dense_shape)
    out = core(values, frows, S.seg_ptr, S.n, D)  # [nseg, *kept_dense]
    if extra is not None:
        out = out + core.scale(extra.reshape((extra.shape[0],) + dense_shape), S.n, D)
    # The reduction of a slice with nothing stored: the result's fill.
    k = len(S.kept_dims)
    # rows counted, not -1: a dense part with a 0 in it has no elements to infer from
    fk_rows = fill_k.reshape((math.prod(fill_k.shape[:k]),) + dense_shape)
    empty_ptr = torch.zeros(fk_rows.shape[0] + 1, dtype=torch.int64, device=fk_rows.device)
    if varying:
        rfill = core(values[:0], torch.zeros_like(fk_rows), empty_ptr, S.n, D) + \
            core.scale(fk_rows, S.n, D)
    else:
        rfill = core(values[:0], fk_rows, empty_ptr, S.n, D)
    rfill = rfill.reshape(tuple(fill_k.shape[:k]) + kept_dense)
    if k == 0:
        res = out[0] if out.shape[0] else rfill
        res = res.reshape(final_dense)
        if keepdim:
            res = res.reshape((1,) * sd + final_dense)
        return res
    # Kept sparse dims: store the slices that hold something.
    if S.kept is None and every_slice:
        kept_lin = torch.arange(out.shape[0], device=out.device)
    elif S.kept is None:
        sel = torch.nonzero(S.counts() > 0).view(-1)
        out, kept_lin = out.index_select(0, sel), sel
    else:
        kept_lin = S.kept
    out = out.reshape((out.shape[0],) + final_dense)
    rfill = rfill.reshape(tuple(fill_k.shape[:k]) + final_dense)
    return S.result(A.layout, kept_lin, out, rfill, final_dense, keepdim)


class _FinitePart(torch.autograd.Function):
    """x with its infinities and NaNs replaced by 0, whose gradient passes
    through unchanged: a sum's derivative by a fill element is the number of
    elements it covers, whatever its value (as dense autograd gives)."""

    # setup_context and a generated vmap rule: usable under torch.func
    # transforms (vmap over slices, grad, jvp), which refuse the old style.
    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return torch.where(torch.isfinite(x), x, torch.zeros((), dtype=x.dtype, device=x.device))

    @staticmethod
    def setup_context(ctx, inputs, output):
        pass

    @staticmethod
    def backward(ctx, grad):
        return grad

    @staticmethod
    def jvp(ctx, tangent):
        return tangent


def _nonfinite_linear(A: SparseFillTensor, dims, keepdim, core, what):
    """sum/mean across a per-slice fill that varies and holds inf, -inf or
    NaN (RFC.md#reductions): the reduction of the finite part (non-finite fill
    elements as 0), plus, per output element, the class its unspecified
    elements add: NaN if one holds NaN or both infinities occur, else the
    infinity that occurs, else 0. Each class is counted as a sum of 0/1
    indicators over the unspecified elements, never as a difference of sums."""
    fill = A._sf_fill
    out = reduce(A._with(A._sf_values, _FinitePart.apply(fill)), dims, keepdim, core, what,
                 linear=True, finite_fill=True)
    nothing = torch.zeros(A._sf_values.shape, dtype=torch.float64, device=fill.device)
    f = fill.detach()

    def occurs(mask):  # per output element: does an unspecified element hold this class?
        n = reduce(A._with(nothing, mask.to(torch.float64)), dims, keepdim, sum_core(), what,
                   linear=True, finite_fill=True)
        return n > 0

    def term(pos, neg, nan):
        return torch.where(nan | (pos & neg), math.nan,
                           torch.where(pos, math.inf, torch.where(neg, -math.inf, 0.0)))

    pos, neg, nan = occurs(f == math.inf), occurs(f == -math.inf), occurs(torch.isnan(f))
    if not isinstance(out, SparseFillTensor):
        return out + term(pos, neg, nan).to(out.dtype)
    # Kept sparse dims: the four reductions of A's one pattern keep the same
    # slices, so the sum is taken on their components (no pattern comparison,
    # which vmap over slices could not read).
    assert all(x._sf_values.shape[0] == out._sf_values.shape[0] for x in (pos, neg, nan)), \
        "internal: the class counts keep other slices than the sum"
    values = out._sf_values + term(pos._sf_values, neg._sf_values, nan._sf_values).to(out.dtype)
    fill = out._sf_fill + term(pos._sf_fill, neg._sf_fill, nan._sf_fill).to(out.dtype)
    return out._with(values, fill)


def _untracked(*tensors) -> bool:
    """Whether no gradient of these tensors is tracked (ops/common.py's
    rule): slot_reduce differentiates sums only, so a tracked prod, amax or
    amin takes the segment ops instead."""
    return _common.untracked(*tensors)


def _reduce_by_slots(A: SparseFillTensor, R: list, keepdim: bool, core):
    """sum, mean, prod, amax or amin over the sparse dims R, some kept, of a CPU
    tensor with one fill (dense part allowed, no dense dim reduced): one pass
    over the stored elements in stored order into the kept slices' slots
    (``torch.ops.sparsefill.slot_reduce``: per-thread partials folded in a
    fixed order, so 1 and 2 threads agree bit for bit), the fill counted once
    per unspecified element -- no slice plan, no reordering; differentiable
    for sum and mean. Kept dims leading (COO rows) make the slots sorted: the
    op then reduces whole runs in one threaded pass, no row pointers built.
    None when the segment path serves: a gradient tracked
    through prod, amax or amin, a torch.func transform, a per-slice fill, nothing kept
    (one slot), CSR rows (crow_indices are their segments), slices outnumbering the
    stored elements (a compact plan), max/min of an empty dim (refused there),
    another device."""
    sd = A.sparse_dim()
    values, fill = A._sf_values, A._sf_fill
    size = A._sf_size
    kept = [d for d in range(sd) if d not in R]
    n = math.prod(size[d] for d in R)
    if (not kept or values.device.type != "cpu" or A._has_per_slice_fill()
            # CSR rows: crow_indices are the segments already
            or (A.layout == torch.sparse_csr and kept == [0])
            or (n == 0 and core.slot_op in ("amax", "amin"))
            or (core.slot_op != "sum" and not _untracked(values, fill))
            # under vmap the counts would come out batched (functorch's
            # fallback batches every output), and which slots hold
            # something must not be
            or torch._C._are_functorch_transforms_active()
            # a tracer (sf.compile, export): its slot count test and the
            # kept-slot comparison would guard on nse; the segment path
            # gives the same values without
            or torch.compiler.is_compiling()):
        return None
    kept_sizes = [size[d] for d in kept]
    nslots = math.prod(kept_sizes)
    if nslots > 2 * values.shape[0] + 64:
        return None
    if A.layout == torch.sparse_csr:  # R == [0]: the slots are the columns
        slot = A._sf_col
    else:
        indices = A._coo_indices()
        slot = indices[kept[0]] if len(kept) == 1 else \
            _ops.coo_linearize(indices[kept], kept_sizes)
    dense_shape = tuple(size[sd:])
    w = math.prod(dense_shape)
    frow = fill.expand(dense_shape).reshape(1, w)
    out, count = _ops.slot_reduce(values.reshape(values.shape[0], w), slot, frow, nslots, n,
                                  core.slot_op)
    out = core.finish(out, n).reshape((nslots,) + dense_shape)
    # The result's fill: the reduction of a slice with nothing stored.
    empty_ptr = torch.zeros(2, dtype=torch.int64)
    rfill = core(values[:0], frow.reshape((1,) + dense_shape), empty_ptr, n, [])[0]
    sel = torch.nonzero(count > 0).view(-1)
    S = Slices(A, R, False, plan=False)
    stored = out if sel.shape[0] == nslots else out.index_select(0, sel)  # every slot: as it is
    return S.result(A.layout, sel, stored, rfill, dense_shape, keepdim)


# ---- cores: one per reduction ----------------------------------------------------

def _dense_then(seg_fn, dense_fn):
    """A core for a separable reduction: the dense dims first with
    `dense_fn(x, dims)` (keepdim), then the sparse slices with `seg_fn`."""
    def core(values, frows, seg_ptr, n, D, dense_only=False):
        shift = [d + 1 for d in D]
        v = dense_fn(values, shift) if D else values
        if dense_only:
            return v
        f = dense_fn(frows, shift) if D else frows
        out = seg_fn(flat(v), flat(f), seg_ptr, n)
        return out.reshape((out.shape[0],) + tuple(v.shape[1:]))
    return core


def _seg_sum(v, f, seg_ptr, n):
    return _ops.seg_reduce(v, f, seg_ptr, n, "sum")


def sum_core():
    def dense(x, dims):
        return x.sum(dims, keepdim=True)
    core = _dense_then(_seg_sum, dense)

    def scale(frows, n, D):  # the slice-wide fill total, already summed over R
        return frows.sum([d + 1 for d in D], keepdim=True) if D else frows
    core.scale = scale
    core.slot_op = "sum"
    core.finish = lambda total, n: total  # _reduce_by_slots' slice totals, as they are
    return core


def mean_core(dense_numel_reduced):
    base = sum_core()

    def core(values, frows, seg_ptr, n, D, dense_only=False):
        if dense_only:
            return values.mean([d + 1 for d in D], keepdim=True) if D else values
        return base(values, frows, seg_ptr, n, D) / (n * dense_numel_reduced)

    def scale(frows, n, D):
        return base.scale(frows, n, D) / (n * dense_numel_reduced)
    core.scale = scale
    core.slot_op = "sum"
    core.finish = lambda total, n: total / (n * dense_numel_reduced)
    return core


def prod_core():
    core = _dense_then(lambda v, f, p, n: _ops.seg_reduce(v, f, p, n, "prod"),
                       lambda x, dims: _prod_dims(x, dims))
    core.slot_op, core.finish = "prod", lambda out, n: out
    return core


def _prod_dims(x, dims):
    for d in dims:
        x = x.prod(d, keepdim=True)
    return x


def max_core(is_min):
    def seg(v, f, p, n):
        return _ops.seg_max(v, f, p, None, n, is_min, True)[0]
    core = _dense_then(seg, lambda x, dims: (x.amin if is_min else x.amax)(dims, keepdim=True))
    core.slot_op, core.finish = ("amin" if is_min else "amax"), lambda out, n: out
    return core


def logsumexp_core():
    def seg(v, f, p, n):
        # the max is a shift for stability only (detached, 0 where infinite,
        # as torch does); the sum of exponentials carries the gradient
        if n == 0:  # empty slices: no max to shift by; the sum is 0, the result -inf
            m = torch.zeros((p.shape[0] - 1,) + tuple(v.shape[1:]), dtype=v.dtype,
                            device=v.device)
        else:
            m = _ops.seg_max(v.detach(), f.detach(), p, None, n, False, True)[0]
            m = torch.where(m.isinf(), torch.zeros_like(m), m)
        counts = p[1:] - p[:-1]
        rows = torch.repeat_interleave(torch.arange(p.shape[0] - 1, device=p.device), counts,
                                       output_size=v.shape[0])  # sized: no device sync
        e = torch.exp(v - m.index_select(0, rows))
        ef = torch.exp(f - m)  # one row per segment (a single fill row broadcasts)
        return torch.log(_ops.seg_reduce(e, ef, p, n, "sum")) + m
    return _dense_then(seg, lambda x, dims: torch.logsumexp(x, dims, keepdim=True))


def count_core():
    def core(values, frows, seg_ptr, n, D, dense_only=False):
        shift = [d + 1 for d in D]
        nz = (values != 0).to(torch.int64)
        v = nz.sum(shift, keepdim=True) if D else nz
        if dense_only:
            return v
        fz = (frows != 0).to(torch.int64)
        f = fz.sum(shift, keepdim=True) if D else fz
        out = _ops.seg_reduce(flat(v), flat(f), seg_ptr, n,
                              "sum")
        return out.reshape((out.shape[0],) + tuple(v.shape[1:]))
    return core


def var_core(correction, dense_numel_reduced, take_sqrt):
    def core(values, frows, seg_ptr, n, D, dense_only=False):
        shift = [d + 1 for d in D]
        if dense_only:
            fn = torch.std if take_sqrt else torch.var
            return fn(values, shift, correction=correction, keepdim=True)
        N = n * dense_numel_reduced
        counts = seg_ptr[1:] - seg_ptr[:-1]
        rows = torch.repeat_interleave(torch.arange(seg_ptr.shape[0] - 1, device=seg_ptr.device),
                                       counts, output_size=values.shape[0])
        # Shifted by the slice's fill: the unspecified elements become exact
        # zeros, so a slice of equal elements has mean and variance exactly
        # 0 (as dense's Welford), not the rounding of (n f) / n - f; the
        # variance of the shifted elements is the variance, gradients included.
        # (A non-finite fill is not a shift: it stays, and gives dense's NaN.
        # With dense dims reduced too, an output element mixes dense
        # positions whose fills differ: no common shift, none taken.)
        offset = torch.where(torch.isfinite(frows) & (not D), frows, torch.zeros_like(frows))
        values = values - (offset if offset.shape[0] == 1 else offset.index_select(0, rows))
        frows = frows - offset
        total = _ops.seg_reduce(*[flat(x.sum(shift, keepdim=True) if D else x)
                                  for x in (values, frows)], seg_ptr, n, "sum")
        kept = tuple((values.sum(shift, keepdim=True) if D else values).shape[1:])
        mu = (total / N).reshape((total.shape[0],) + kept)
        dv = (values - mu.index_select(0, rows)) ** 2
        df = (frows - mu) ** 2  # one row per segment (a single fill row broadcasts)
        dv = dv.sum(shift, keepdim=True) if D else dv
        df = df.sum(shift, keepdim=True) if D else df
        ss = _ops.seg_reduce(flat(dv), flat(df), seg_ptr,
                             n, "sum")
        out = (ss / max(N - correction, 0)).reshape((ss.shape[0],) + kept)
        return safe_root(out, 2) if take_sqrt else out
    return core


def safe_root(s, p):
    """s ** (1/p) whose gradient is 0 where s == 0 (torch's norm and std
    backward do the same), instead of inf * 0 = NaN."""
    positive = s != 0  # NaN stays NaN
    base = torch.where(positive, s, 1.0)
    root = base.sqrt() if p == 2 else base ** (1.0 / p)
    # the result keeps s's dtype (a Python 1.0 or 0.0 in where() must not
    # promote a half s to float32)
    return torch.where(positive, root, 0.0).to(s.dtype)
