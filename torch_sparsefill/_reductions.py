"""Softmax, log_softmax and reductions of SparseFillTensors (RFC.md 6).

Each unspecified element counts as one copy of the fill. The work is split
by the dims reduced:

- dense dims only: the torch reduction runs on ``values`` and on the fill;
  the pattern stays (autograd is torch's on those dense components);
- sparse dims: ``torch.ops.sparsefill.slice_plan`` groups the stored
  elements by slice (the positions of the kept sparse dims), and the
  segment ops of ``aten_ext/reductions.cpp`` reduce each slice with its
  ``n - s`` unspecified elements, with explicit gradients to values and
  fill. Kept sparse dims give a SparseFillTensor whose fill is the reduction
  of ``n`` copies of the fill (``n f`` for sum); no kept sparse dim gives a
  strided tensor.

Softmax along a sparse dim keeps the pattern and gives each slice its own
fill ``exp(f - m_i) / Z_i``: a per-slice fill (RFC.md 1.5).
"""
from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F

from . import _routing
from ._tensor import SparseFillTensor, _prod

_ops = torch.ops.sparsefill
T = torch.Tensor

__all__: list = []


# ---- dims, slices, fill rows ------------------------------------------------

def _dims(A, dim) -> list:
    """Sorted, distinct, non-negative dims; None or () means all."""
    nd = A.dim()
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return list(range(nd))
    dims = [dim] if isinstance(dim, int) else list(dim)
    out = []
    for d in dims:
        d = int(d)
        if not -max(nd, 1) <= d < max(nd, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-max(nd, 1)}, {max(nd, 1) - 1}], but got {d})")
        d = d % max(nd, 1)
        if d in out:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        out.append(d)
    return sorted(out)


def _flat(x):
    """[rows, *dense] -> [rows, w] (w = 0 allowed)."""
    return x.reshape(x.shape[0], _prod(x.shape[1:]))


_coalesced = SparseFillTensor._coalesced


class _Slices:
    """The stored elements of A grouped by slice for reducing sparse dims R.

    seg_ptr: [nseg + 1]; perm: stored elements in segment order (None when
    already so); kept: linear index (over the kept sparse dims) of each
    segment, or None when every slice has a segment (row-major);
    n: slice length; kept_dims / kept_sizes: the sparse dims that remain.
    """

    def __init__(self, A: SparseFillTensor, R: list, compact: bool):
        sd = A.sparse_dim()
        size = A._sf_size
        self.R = R
        self.kept_dims = [d for d in range(sd) if d not in R]
        self.kept_sizes = [size[d] for d in self.kept_dims]
        self.n = _prod(size[d] for d in R)
        self.nslices = _prod(self.kept_sizes)
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
        return _flat(v)

    def unrows(self, out, dense_shape):
        """Inverse of rows for a per-element result of the same dense shape."""
        out = out.reshape((out.shape[0],) + tuple(dense_shape))
        if self.perm is None:
            return out
        return torch.zeros_like(out).index_copy(0, self.perm, out)

    def segment_of_rows(self):
        counts = self.seg_ptr[1:] - self.seg_ptr[:-1]
        return torch.repeat_interleave(torch.arange(self.nseg, device=counts.device), counts)

    def counts(self):
        return self.seg_ptr[1:] - self.seg_ptr[:-1]


def _fill_over_kept(A: SparseFillTensor, R: list, dense_shape, what: str):
    """The fill as a tensor over (kept sparse dims, *dense_shape), each dim of
    size 1 or full; raises when a per-slice fill varies along a reduced dim."""
    sd = A.sparse_dim()
    fill = A._sf_fill
    if not A._has_per_slice_fill():
        kept = sd - len(R)
        return fill.expand(tuple(dense_shape)).reshape((1,) * kept + tuple(dense_shape))
    if any(fill.shape[d] != 1 for d in R):
        raise NotImplementedError(
            f"torch_sparsefill: {what} along dims {R} of a tensor whose per-slice fill of shape "
            f"{tuple(fill.shape)} varies along them is not supported yet (only sum and mean)")
    f = fill.reshape(tuple(fill.shape[d] for d in range(sd) if d not in R) + tuple(fill.shape[sd:]))
    return f.expand(f.shape[: sd - len(R)] + tuple(dense_shape))


def _fill_rows(S: _Slices, fill_k) -> torch.Tensor:
    """One fill row per segment ([nseg, w]), or a single row when the fill
    is the same for every slice."""
    k = len(S.kept_dims)
    if all(s == 1 for s in fill_k.shape[:k]):
        return fill_k.reshape(1, _prod(fill_k.shape[k:]))
    full = fill_k.expand(tuple(S.kept_sizes) + tuple(fill_k.shape[k:])).reshape(S.nslices, _prod(fill_k.shape[k:]))
    return full if S.kept is None else full.index_select(0, S.kept)


def _new_sparse(layout_hint, size, indices, values, fill) -> SparseFillTensor:
    """A coalesced result from COO parts; CSR when the hint is CSR and the
    result has two sparse dims. A per-slice fill constant over the sparse
    dims is stored in the dense-part form (RFC.md 1.5)."""
    sd = indices.shape[0]
    if fill.dim() > values.dim() - 1 and all(s == 1 for s in fill.shape[:sd]):
        fill = fill.reshape(fill.shape[sd:])
    out = SparseFillTensor(torch.sparse_coo, size, values, fill, indices=indices, coalesced=True)
    if layout_hint == torch.sparse_csr and sd == 2:
        return out.to_sparse_csr()
    return out


# ---- the generic reduction driver ----------------------------------------------

def _reduce(A: SparseFillTensor, dims: list, keepdim: bool, core: Callable, what: str,
            linear: bool = False):
    """Reduce A over `dims` with `core(values [nse, *dense], fill_rows
    [r, *dense], seg_ptr, n, D) -> [nseg, *dense with D kept as 1]`, where D
    are the dense dims (of the dense part) also reduced. Returns a strided
    tensor or a SparseFillTensor (kept sparse dims)."""
    A = _coalesced(A)
    sd = A.sparse_dim()
    size = A._sf_size
    R = [d for d in dims if d < sd]
    D = [d - sd for d in dims if d >= sd]
    dense_shape = tuple(size[sd:])
    kept_dense = tuple(1 if i in D else s for i, s in enumerate(dense_shape))
    final_dense = kept_dense if keepdim else tuple(s for i, s in enumerate(dense_shape)
                                                   if i not in D)
    varying = A._has_per_slice_fill() and any(A._sf_fill.shape[d] != 1 for d in R)
    if varying and not linear:
        _fill_over_kept(A, R, dense_shape, what)  # raises the clear error
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
        return A._with(values, f, size=tuple(size[:sd]) + final_dense)

    compact = not A._has_per_slice_fill() and _prod(size[d] for d in range(sd) if d not in R) \
        > 2 * A._nnz() + 64
    S = _Slices(A, R, compact)
    values = A._sf_values if S.perm is None else A._sf_values.index_select(0, S.perm)
    extra = None
    if varying:
        # sum/mean with a fill that varies inside a slice: subtract each
        # stored element's own fill, then add the fill summed over the slice.
        fill = A._sf_fill
        values = values - _fill_at(A, S)
        full_sum = fill
        for d in R:
            full_sum = full_sum.sum(d, keepdim=True) if fill.shape[d] != 1 else \
                full_sum * size[d]
        fill_k = _fill_over_kept_any(full_sum, R, sd, dense_shape)
        extra = _fill_rows(S, fill_k)
        fill_k_zero = torch.zeros_like(fill_k)
        frows = _fill_rows(S, fill_k_zero)
    else:
        fill_k = _fill_over_kept(A, R, dense_shape, what)
        frows = _fill_rows(S, fill_k)
    frows = frows.reshape((frows.shape[0],) + dense_shape)
    out = core(values, frows, S.seg_ptr, S.n, D)  # [nseg, *kept_dense]
    if extra is not None:
        out = out + core.scale(extra.reshape((extra.shape[0],) + dense_shape), S.n, D)
    # The reduction of a slice with nothing stored: the result's fill.
    k = len(S.kept_dims)
    fk_rows = fill_k.reshape((-1,) + dense_shape)
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
    if S.kept is None:
        sel = torch.nonzero(S.counts() > 0).view(-1)
        out, kept_lin = out.index_select(0, sel), sel
    else:
        kept_lin = S.kept
    kept_idx = _ops.coo_delinearize(kept_lin, S.kept_sizes)
    out = out.reshape((out.shape[0],) + final_dense)
    rfill = rfill.reshape(tuple(fill_k.shape[:k]) + final_dense)
    if keepdim:
        full_idx = torch.zeros(sd, kept_idx.shape[1], dtype=torch.int64, device=kept_idx.device)
        full_idx[S.kept_dims] = kept_idx
        kept_idx = full_idx
        new_size = tuple(1 if d in R else size[d] for d in range(sd)) + final_dense
        if rfill.dim() > len(final_dense):
            shape = list(rfill.shape)
            for d in R:
                shape.insert(d, 1)
            rfill = rfill.reshape(shape)
    else:
        new_size = tuple(S.kept_sizes) + final_dense
    if rfill.dim() > len(final_dense) and all(s == 1 for s in rfill.shape[: kept_idx.shape[0]]):
        rfill = rfill.reshape(final_dense)
    return _new_sparse(A.layout, new_size, kept_idx, out, rfill)


def _fill_at(A: SparseFillTensor, S: _Slices):
    """Each stored element's own (per-slice) fill, in segment order."""
    sd = A.sparse_dim()
    fill = A._sf_fill
    slots = A._fill_slots()
    rows = fill.reshape((-1,) + tuple(fill.shape[sd:])).index_select(0, slots)
    rows = rows.expand((rows.shape[0],) + tuple(A._sf_size[sd:]))
    return rows if S.perm is None else rows.index_select(0, S.perm)


def _fill_over_kept_any(fill_summed, R, sd, dense_shape):
    f = fill_summed.reshape(tuple(fill_summed.shape[d] for d in range(sd) if d not in R) +
                            tuple(fill_summed.shape[sd:]))
    return f.expand(f.shape[: sd - len(R)] + tuple(dense_shape))


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
        out = seg_fn(_flat(v), _flat(f), seg_ptr, n)
        return out.reshape((out.shape[0],) + tuple(v.shape[1:]))
    return core


def _seg_sum(v, f, seg_ptr, n):
    return _ops.seg_reduce(v, f, seg_ptr, n, "sum")


def _sum_core():
    def dense(x, dims):
        return x.sum(dims, keepdim=True)
    core = _dense_then(_seg_sum, dense)

    def scale(frows, n, D):  # the slice-wide fill total, already summed over R
        return frows.sum([d + 1 for d in D], keepdim=True) if D else frows
    core.scale = scale
    return core


def _mean_core(dense_numel_reduced):
    base = _sum_core()

    def core(values, frows, seg_ptr, n, D, dense_only=False):
        if dense_only:
            return values.mean([d + 1 for d in D], keepdim=True) if D else values
        return base(values, frows, seg_ptr, n, D) / (n * dense_numel_reduced)

    def scale(frows, n, D):
        return base.scale(frows, n, D) / (n * dense_numel_reduced)
    core.scale = scale
    return core


def _prod_core():
    return _dense_then(lambda v, f, p, n: _ops.seg_reduce(v, f, p, n, "prod"),
                       lambda x, dims: _prod_dims(x, dims))


def _prod_dims(x, dims):
    for d in dims:
        x = x.prod(d, keepdim=True)
    return x


def _max_core(is_min):
    def seg(v, f, p, n):
        return _ops.seg_max(v, f, p, None, n, is_min, True)[0]
    return _dense_then(seg, lambda x, dims: (x.amin if is_min else x.amax)(dims, keepdim=True))


def _logsumexp_core():
    def seg(v, f, p, n):
        # the max is a shift for stability only (detached, 0 where infinite,
        # as torch does); the sum of exponentials carries the gradient
        m = _ops.seg_max(v.detach(), f.detach(), p, None, n, False, True)[0]
        m = torch.where(m.isinf(), torch.zeros_like(m), m)
        counts = p[1:] - p[:-1]
        rows = torch.repeat_interleave(torch.arange(p.shape[0] - 1, device=p.device), counts,
                                       output_size=v.shape[0])  # sized: no device sync
        e = torch.exp(v - m.index_select(0, rows))
        ef = torch.exp(f - m)  # one row per segment (a single fill row broadcasts)
        return torch.log(_ops.seg_reduce(e, ef, p, n, "sum")) + m
    return _dense_then(seg, lambda x, dims: torch.logsumexp(x, dims, keepdim=True))


def _count_core():
    def core(values, frows, seg_ptr, n, D, dense_only=False):
        shift = [d + 1 for d in D]
        nz = (values != 0).to(torch.int64)
        v = nz.sum(shift, keepdim=True) if D else nz
        if dense_only:
            return v
        fz = (frows != 0).to(torch.int64)
        f = fz.sum(shift, keepdim=True) if D else fz
        out = _ops.seg_reduce(_flat(v), _flat(f), seg_ptr, n,
                              "sum")
        return out.reshape((out.shape[0],) + tuple(v.shape[1:]))
    return core


def _var_core(correction, dense_numel_reduced, take_sqrt):
    def core(values, frows, seg_ptr, n, D, dense_only=False):
        shift = [d + 1 for d in D]
        if dense_only:
            fn = torch.std if take_sqrt else torch.var
            return fn(values, shift, correction=correction, keepdim=True)
        N = n * dense_numel_reduced
        total = _ops.seg_reduce(*[_flat(x.sum(shift, keepdim=True) if D else x)
                                  for x in (values, frows)], seg_ptr, n, "sum")
        kept = tuple((values.sum(shift, keepdim=True) if D else values).shape[1:])
        mu = (total / N).reshape((total.shape[0],) + kept)
        counts = seg_ptr[1:] - seg_ptr[:-1]
        rows = torch.repeat_interleave(torch.arange(seg_ptr.shape[0] - 1, device=seg_ptr.device),
                                       counts, output_size=values.shape[0])
        dv = (values - mu.index_select(0, rows)) ** 2
        df = (frows - mu) ** 2  # one row per segment (a single fill row broadcasts)
        dv = dv.sum(shift, keepdim=True) if D else dv
        df = df.sum(shift, keepdim=True) if D else df
        ss = _ops.seg_reduce(_flat(dv), _flat(df), seg_ptr,
                             n, "sum")
        out = (ss / max(N - correction, 0)).reshape((ss.shape[0],) + kept)
        return _safe_root(out, 2) if take_sqrt else out
    return core


# ---- public entry points ----------------------------------------------------------

def _require(A, what):
    if not isinstance(A, SparseFillTensor):
        raise NotImplementedError(f"torch_sparsefill: {what} expects a SparseFillTensor first")


def _cast(A, dtype):
    return A if dtype is None else A.to(dtype)


def sum_(input, dim=None, keepdim=False, *, dtype=None):
    """Sum with each unspecified element counted as the fill (RFC.md 6.1).

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [3., 4.], (2, 3), fill_value=1.)
        >>> A.sum(1).to_dense()
        tensor([5., 6.])
    """
    _require(input, "sum")
    A = input
    if dtype is None and not (A.dtype.is_floating_point or A.dtype.is_complex):
        dtype = torch.int64  # torch sums bool and integers as int64
    A = _cast(A, dtype)
    if A.dtype.is_complex:
        raise NotImplementedError("torch_sparsefill: sum of complex tensors is not supported yet")
    dims = _dims(A, dim)
    if len(dims) == A.dim() and A.dtype.is_floating_point and not A._has_per_slice_fill():
        return _sum_all(A, keepdim)
    return _reduce(A, dims, keepdim, _sum_core(), "sum", linear=True)


def _sum_all(A: SparseFillTensor, keepdim: bool) -> torch.Tensor:
    """The sum of every element: the stored values' sum plus the fill's sum
    over the dense part times the number of unspecified positions (the term
    is left out when there are none, so an infinite or NaN fill that covers
    nothing does not leak in). One pass over the values, at ATen's speed;
    differentiable with respect to values and fill."""
    A = _coalesced(A)
    total = A._sf_values.sum()
    unspecified = A._unspecified_count()
    if unspecified > 0:
        dense_numel = _prod(A._sf_values.shape[1:])
        fill_numel = max(A._sf_fill.numel(), 1)
        total = total + A._sf_fill.sum() * (unspecified * (dense_numel // fill_numel))
    return total.reshape((1,) * A.dim()) if keepdim else total


def mean_(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over the dims, unspecified elements counted as the fill.

    Example::

        >>> sf.sparse_coo_tensor([[0]], [4.], (4,), fill_value=0.).mean()
        tensor(1.)
    """
    _require(input, "mean")
    A = _cast(input, dtype)
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a "
                           f"floating point or complex dtype. Got: {A.dtype}")
    dims = _dims(A, dim)
    sd = A.sparse_dim()
    dense_reduced = _prod(A.shape[d] for d in dims if d >= sd)
    return _reduce(A, dims, keepdim, _mean_core(dense_reduced), "mean", linear=True)


def prod_(input, dim=None, keepdim=False, *, dtype=None):
    """Product; the fill enters as fill**(n - s) per slice.

    Example::

        >>> sf.sparse_coo_tensor([[0]], [3.], (3,), fill_value=2.).prod()
        tensor(12.)
    """
    _require(input, "prod")
    A = _cast(input, dtype)
    if not A.dtype.is_floating_point:
        raise NotImplementedError(f"torch_sparsefill: prod of dtype {A.dtype} is not supported "
                                  f"yet (floating point only)")
    return _reduce(A, _dims(A, dim), keepdim, _prod_core(), "prod")


def _amax(input, dim=(), keepdim=False, *, is_min=False):
    _require(input, "amin" if is_min else "amax")
    A = input
    if A.dtype.is_complex:
        raise RuntimeError("amax/amin is not supported for complex tensors")
    if A.dtype == torch.bool:
        return _amax(A.to(torch.uint8), dim, keepdim, is_min=is_min).to(torch.bool)
    return _reduce(A, _dims(A, dim), keepdim, _max_core(is_min), "amin" if is_min else "amax")


def amax_(input, dim=(), keepdim=False):
    """Largest element over the dims, the fill included where unspecified
    elements exist. Ties share the gradient evenly, as torch does.

    Example::

        >>> sf.sparse_coo_tensor([[0]], [-3.], (3,), fill_value=-1.).amax()
        tensor(-1.)
    """
    return _amax(input, dim, keepdim)


def amin_(input, dim=(), keepdim=False):
    """Smallest element over the dims; see :func:`amax_`.

    Example::

        >>> sf.sparse_coo_tensor([[0]], [-3.], (3,), fill_value=-1.).amin()
        tensor(-3.)
    """
    return _amax(input, dim, keepdim, is_min=True)


def _max_min(is_min, input, dim=None, keepdim=False, *, out=None):
    name = "min" if is_min else "max"
    _require(input, name)
    if out is not None:
        raise NotImplementedError(f"torch_sparsefill: {name}(out=...) is not supported")
    if isinstance(dim, torch.Tensor):  # torch.max(a, b): element-wise
        return (torch.minimum if is_min else torch.maximum)(input, dim)
    if dim is None:
        if keepdim:
            raise TypeError(f"{name}() got keepdim without dim")
        return _amax(input, (), False, is_min=is_min)
    A = _coalesced(input)
    d = _dims(A, dim)[0]
    sd = A.sparse_dim()
    result_type = torch.return_types.min if is_min else torch.return_types.max
    if A.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")
    if d >= sd:
        dd = d - sd + 1
        vals, idx = (torch.min if is_min else torch.max)(A._sf_values, dd, keepdim)
        fill = A._sf_fill
        if A._has_per_slice_fill():
            f = fill.expand(tuple(fill.shape[:sd]) + tuple(A.shape[sd:]))
            fv, fi = (torch.min if is_min else torch.max)(f, d, keepdim)
        else:
            f = fill.expand(tuple(A.shape[sd:]))
            fv, fi = (torch.min if is_min else torch.max)(f, d - sd, keepdim)
        size = tuple(A.shape[:sd]) + tuple(vals.shape[1:])
        return result_type((A._with(vals, fv, size=size), A._with(idx, fi, size=size)))
    dense_shape = tuple(A.shape[sd:])
    fill_k = _fill_over_kept(A, [d], dense_shape, name)
    S = _Slices(A, [d], False)
    coord = A._coo_indices()[d]
    coord = coord if S.perm is None else coord.index_select(0, S.perm)
    v = S.rows(A._sf_values)
    frows = _fill_rows(S, fill_k)
    out, winner, index = _ops.seg_max(v, frows, S.seg_ptr, coord, S.n, is_min, False)
    out = out.reshape((S.nseg,) + dense_shape)
    index = index.reshape((S.nseg,) + dense_shape)
    k = len(S.kept_dims)
    final = dense_shape
    if k == 0:
        shape = ((1,) * sd if keepdim else ()) + final
        return result_type((out[0].reshape(shape), index[0].reshape(shape)))
    sel = torch.nonzero(S.counts() > 0).view(-1)
    kept_idx = _ops.coo_delinearize(sel, S.kept_sizes)
    rfill = fill_k.reshape(tuple(fill_k.shape[:k]) + dense_shape)
    if keepdim:
        full_idx = torch.zeros(sd, kept_idx.shape[1], dtype=torch.int64, device=kept_idx.device)
        full_idx[S.kept_dims] = kept_idx
        kept_idx = full_idx
        size = tuple(1 if e == d else A.shape[e] for e in range(sd)) + dense_shape
        if rfill.dim() > len(dense_shape):
            rfill = rfill.unsqueeze(d)
    else:
        size = tuple(S.kept_sizes) + dense_shape
    values = _new_sparse(A.layout, size, kept_idx, out.index_select(0, sel), rfill)
    # An empty slice's first maximum is its first element: index 0.
    indices = _new_sparse(A.layout, size, kept_idx, index.index_select(0, sel),
                          torch.zeros((), dtype=torch.int64, device=kept_idx.device))
    return result_type((values, indices))


def max_(input, dim=None, keepdim=False, *, out=None):
    """``torch.max``: of everything (ties share the gradient), or along one
    dim with the index of the first maximum, unspecified positions included.

    Example::

        >>> A = sf.sparse_coo_tensor([[0], [2]], [5.], (1, 3), fill_value=5.)
        >>> torch.max(A, 1).indices.to_dense()
        tensor([0])
    """
    return _max_min(False, input, dim, keepdim, out=out)


def min_(input, dim=None, keepdim=False, *, out=None):
    """``torch.min``; see :func:`max_`.

    Example::

        >>> torch.min(sf.sparse_coo_tensor([[1]], [-2.], (3,), fill_value=1.))
        tensor(-2.)
    """
    return _max_min(True, input, dim, keepdim, out=out)


def logsumexp_(input, dim, keepdim=False):
    """``log(sum(exp(x)))`` over the dims, stable, fill included.

    Example::

        >>> sf.full((4,), 0.).logsumexp(0)
        tensor(1.3863)
    """
    _require(input, "logsumexp")
    A = input if input.dtype.is_floating_point else input.to(torch.get_default_dtype())
    return _reduce(A, _dims(A, dim), keepdim, _logsumexp_core(), "logsumexp")


def norm_(input, p="fro", dim=None, keepdim=False, dtype=None, out=None):
    """Vector p-norm over the dims (p = 1, 2, 'fro', inf, -inf, 0 or any
    other number), fill included.

    Example::

        >>> sf.full((4,), -3.).norm(1)
        tensor(12.)
    """
    _require(input, "norm")
    if out is not None:
        raise NotImplementedError("torch_sparsefill: norm(out=...) is not supported")
    A = _cast(input, dtype)
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise NotImplementedError(f"torch_sparsefill: norm(p={p!r}) is not supported")
    if p == math.inf:
        return _amax(A.abs(), dim if dim is not None else (), keepdim)
    if p == -math.inf:
        return _amax(A.abs(), dim if dim is not None else (), keepdim, is_min=True)
    if p == 0:
        return sum_(A != 0, dim, keepdim, dtype=A.dtype)
    powered = A.abs() ** p if p != 1 else A.abs()
    s = sum_(powered, dim, keepdim)
    return s if p == 1 else _safe_root(s, p)


def _safe_root(s, p):
    """s ** (1/p) whose gradient is 0 where s == 0 (torch's norm and std
    backward do the same), instead of inf * 0 = NaN."""
    positive = s != 0  # NaN stays NaN
    base = torch.where(positive, s, 1.0)
    root = base.sqrt() if p == 2 else base ** (1.0 / p)
    return torch.where(positive, root, 0.0)


def _var_std(take_sqrt, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    name = "std" if take_sqrt else "var"
    _require(input, name)
    if isinstance(dim, bool):  # var(input, unbiased)
        unbiased, dim = dim, None
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    A = input
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{name}(): input dtype should be floating point, got {A.dtype}")
    dims = _dims(A, dim)
    sd = A.sparse_dim()
    dense_reduced = _prod(A.shape[d] for d in dims if d >= sd)
    return _reduce(A, dims, keepdim, _var_core(correction, dense_reduced, take_sqrt), name)


def var_(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over the dims (``correction`` as torch), fill included.

    Example::

        >>> sf.sparse_coo_tensor([[0]], [4.], (2,), fill_value=0.).var()
        tensor(8.)
    """
    return _var_std(False, input, dim, unbiased, keepdim, correction=correction)


def std_(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Standard deviation; see :func:`var_`.

    Example::

        >>> sf.sparse_coo_tensor([[0]], [4.], (2,), fill_value=0.).std()
        tensor(2.8284)
    """
    return _var_std(True, input, dim, unbiased, keepdim, correction=correction)


def count_nonzero_(input, dim=None):
    """Number of non-zero elements, the unspecified ones counted when the
    fill is non-zero.

    Example::

        >>> sf.full((2, 3), 1.).count_nonzero()
        tensor(6)
    """
    _require(input, "count_nonzero")
    return _reduce(input, _dims(input, dim), False, _count_core(), "count_nonzero")


def _any_all(is_all, input, dim=None, keepdim=False):
    name = "all" if is_all else "any"
    _require(input, name)
    A = input
    dims = _dims(A, dim)
    count = _reduce(A, dims, keepdim, _count_core(), name)
    if not is_all:
        out = count > 0
    else:
        total = _prod(A.shape[d] for d in dims)
        out = count == total
    return out if A.dtype != torch.uint8 else out.to(torch.uint8)


def all_(input, dim=None, keepdim=False):
    """Whether every element (fill included) is non-zero.

    Example::

        >>> sf.sparse_coo_tensor([[0]], [0.], (3,), fill_value=1.).all()
        tensor(False)
    """
    return _any_all(True, input, dim, keepdim)


def any_(input, dim=None, keepdim=False):
    """Whether some element (fill included) is non-zero.

    Example::

        >>> sf.full((3,), 2.).any()
        tensor(True)
    """
    return _any_all(False, input, dim, keepdim)


# ---- softmax ---------------------------------------------------------------------

def _softmax(log, input, dim=None, dtype=None, what="softmax"):
    _require(input, what)
    if dim is None:
        raise TypeError(f"{what}() needs dim for a SparseFillTensor (torch's implicit choice "
                        f"of dim is deprecated)")
    A = _coalesced(_cast(input, dtype))
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{what}(): expected a floating point tensor, got {A.dtype}")
    d = _dims(A, dim)[0]
    sd = A.sparse_dim()
    dense_shape = tuple(A.shape[sd:])
    fn = torch.log_softmax if log else torch.softmax
    if d >= sd:
        # Along a dense dim: each stored dense part and the fill alone.
        fill = A._sf_fill
        if A._has_per_slice_fill():
            f = fn(fill.expand(tuple(fill.shape[:sd]) + dense_shape), d)
        else:
            f = fn(fill.expand(dense_shape), d - sd)
        return A._with(fn(A._sf_values, d - sd + 1), f)
    fill_k = _fill_over_kept(A, [d], dense_shape, what)
    S = _Slices(A, [d], False)
    v = S.rows(A._sf_values)
    frows = _fill_rows(S, fill_k)
    out, out_fill = _ops.seg_softmax(v, frows, S.seg_ptr, S.n, log)
    values = S.unrows(out, dense_shape)
    # One fill per slice: the kept sparse dims, size 1 along d (RFC.md 1.5).
    fshape = tuple(1 if e == d else A.shape[e] for e in range(sd)) + dense_shape
    fill = out_fill.reshape(fshape)
    if all(s == 1 for s in fshape[:sd]):
        fill = fill.reshape(dense_shape)
    return A._with(values, fill)


def softmax_(input, dim=None, dtype=None, *, _stacklevel=3):
    """Softmax along `dim`: the pattern stays, each slice gets its own fill
    ``exp(f - m) / Z`` (a per-slice fill, RFC.md 1.5 and 6.2).

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 3]], [[.11, .12], [.31, .32]], (4, 2))
        >>> torch.softmax(A, 0).fill_value()
        tensor([0.2232, 0.2220])
    """
    return _softmax(False, input, dim, dtype)


def log_softmax_(input, dim=None, dtype=None, *, _stacklevel=3):
    """log_softmax along `dim`; see :func:`softmax_`.

    Example::

        >>> torch.log_softmax(sf.full((2,), 0.), 0).fill_value()
        tensor(-0.6931)
    """
    return _softmax(True, input, dim, dtype, "log_softmax")


def _f_softmax(log):
    def impl(input, dim=None, _stacklevel=3, dtype=None):
        return _softmax(log, input, dim, dtype, "log_softmax" if log else "softmax")
    return impl


def _sparse_softmax(log):
    def impl(input, dim, dtype=None):
        return _softmax(log, input, dim, dtype, "log_softmax" if log else "softmax")
    return impl


# ---- routes --------------------------------------------------------------------------

_ROUTES = {
    torch.softmax: softmax_, T.softmax: softmax_,
    torch.log_softmax: log_softmax_, T.log_softmax: log_softmax_,
    F.softmax: _f_softmax(False), F.log_softmax: _f_softmax(True),
    torch.sparse.softmax: _sparse_softmax(False), torch.sparse.log_softmax: _sparse_softmax(True),
    torch.sum: sum_, T.sum: sum_, torch.mean: mean_, T.mean: mean_,
    torch.prod: prod_, T.prod: prod_, torch.amax: amax_, T.amax: amax_,
    torch.amin: amin_, T.amin: amin_, torch.max: max_, T.max: max_, torch.min: min_, T.min: min_,
    torch.logsumexp: logsumexp_, T.logsumexp: logsumexp_, torch.norm: norm_, T.norm: norm_,
    torch.var: var_, T.var: var_, torch.std: std_, T.std: std_,
    torch.all: all_, T.all: all_, torch.any: any_, T.any: any_,
    torch.count_nonzero: count_nonzero_, T.count_nonzero: count_nonzero_,
}
_routing.METHODS.update(_ROUTES)
