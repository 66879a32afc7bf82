"""Reductions of SparseFillTensors (RFC.md#reductions): sum, mean, prod,
amax/amin, max/min, logsumexp, norm, var/std, count_nonzero, all/any. Each
unspecified element counts as one copy of the fill; the machinery is in
reduce.py.
"""
from __future__ import annotations

import math

import torch

from ... import _C
from ...tensor import args as _args
from ...tensor import fill as _fill
from ...tensor import SparseFillTensor, edited, is_plain
from ..opmath import HALF, in_opmath, opmath
from .slices import (Slices, count_core, fill_over_kept, fill_rows, logsumexp_core, max_core, mean_core, prod_core, reduce, safe_root, sum_core, var_core)

_ops = torch.ops.sparsefill
T = torch.Tensor

__all__: list = []


def _cast(A, dtype):
    return A if dtype is None else A.to(dtype)


def sum_(input, dim=None, keepdim=False, *, dtype=None):
    """Sum with each unspecified element counted as the fill (RFC.md#reductions).

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [3., 4.], (2, 3), fill_value=1.)
        >>> A.sum(1).to_dense()
        tensor([5., 6.])
    """
    _args.sparse(input, "sum()")
    A = input
    # The components' dtype and the stored size: A.dtype and A.dim() would
    # each take a trip through __torch_function__.
    own = A._sf_values.dtype
    if dtype is None and not (own.is_floating_point or own.is_complex):
        dtype = torch.int64  # torch sums bool and integers as int64
    A = _cast(A, dtype)
    own = A._sf_values.dtype
    if own.is_complex:
        raise NotImplementedError("torch_sparsefill: sum of complex tensors is not supported yet")
    ndim = len(A._sf_size)
    dims = _args.dims(dim, ndim, "sum()")
    if len(dims) == ndim and own.is_floating_point and not A._has_per_slice_fill():
        return _sum_all(A, keepdim)
    if own in HALF:  # accumulated in float32, as dense (functions/opmath.py)
        return reduce(A.to(torch.float32), dims, keepdim, sum_core(), "sum", linear=True).to(own)
    return reduce(A, dims, keepdim, sum_core(), "sum", linear=True)


def sparse_sum_(input, dim=None, dtype=None):
    """``torch.sparse.sum`` (which calls ``torch._sparse_sum``): :func:`sum_`
    over `dim` (every dim when None), the fill counted as in
    ``torch.sum(A.to_dense(), dim)``.

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [3., 4.], (2, 3), fill_value=1.)
        >>> torch.sparse.sum(A, 0).to_dense()
        tensor([5., 4., 2.])
    """
    return sum_(input, dim, dtype=dtype)


def _sum_all(A, keepdim: bool) -> torch.Tensor:
    """The sum of every element: the stored values' sum plus the fill's sum
    times the number of unspecified elements each fill element stands for
    (the term is left out when there are none, so an infinite or NaN fill
    that covers nothing does not leak in). One pass over the values, at ATen's speed;
    differentiable with respect to values and fill. The fill is in the
    dense-part form here, so it covers no element exactly when count is 0:
    _for_reduction's zeroing is the skipped term."""
    A = A._coalesced()
    count = _fill.unspecified_per_dense_part_element(A._sf_fill, A._sf_size, A.sparse_dim(),
                                                     A._sf_values.shape[0])
    total = with_fill_term(values_sum(A._sf_values), A._sf_fill.sum(), count)
    return total.reshape((1,) * len(A._sf_size)) if keepdim else total


def values_sum(values):
    """The stored values' sum as a whole sum's `total`: in float32 for
    float16/bfloat16 values (ATen's opmath, as dense's sum accumulates).

    Example::

        >>> values_sum(torch.tensor([6e4, 6e4], dtype=torch.float16))
        tensor(120000.)
    """
    return values.sum(dtype=torch.float32) if values.dtype in HALF else values.sum()


def with_fill_term(total, fill, count):
    """The one rule of a whole sum's fill term: ``total + count * fill`` (one
    ATen add with alpha, in `total`'s dtype: float32 for a half fill, whose
    ``count * fill`` would overflow in its own dtype), cast to the fill's
    dtype; the term is left out where the fill covers nothing (count 0), so
    an infinite or NaN fill that covers no element does not leak in. Every
    path of ``A.sum()`` computes it so (the route, the fast handler, and the
    C hot path ``_C.hot_sum``'s ``at::add(total, fill, count)``): their bits
    are equal (test/functions/test_fast_paths.py).

    Example::

        >>> half = torch.tensor(100., dtype=torch.float16)
        >>> with_fill_term(torch.tensor(-6e4), half, 1000)  # 1000 * 100 overflows float16
        tensor(40000., dtype=torch.float16)
    """
    acc = opmath(fill.dtype)
    if isinstance(count, torch.SymInt):
        # A traced nse (sf.compile): comparing it would guard on data (an
        # unbacked nse cannot be), so the term is masked instead.
        covered = torch.full((), count, dtype=torch.int64, device=fill.device) > 0
        f = fill.to(acc)
        return (total + torch.where(covered, f * count, torch.zeros_like(f))).to(fill.dtype)
    return (torch.add(total, fill.to(acc), alpha=count) if count > 0 else total).to(fill.dtype)


@in_opmath
def mean_(input, dim=None, keepdim=False, *, dtype=None):
    """Mean over the dims, unspecified elements counted as the fill.

    Example::

        >>> sf.sparse_coo_tensor([[0]], [4.], (4,), fill_value=0.).mean()
        tensor(1.)
    """
    _args.sparse(input, "mean()")
    A = _cast(input, dtype)
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a "
                           f"floating point or complex dtype. Got: {A.dtype}")
    dims = _args.dims(dim, A.dim(), "mean()")
    sd = A.sparse_dim()
    dense_reduced = math.prod(A.shape[d] for d in dims if d >= sd)
    return reduce(A, dims, keepdim, mean_core(dense_reduced), "mean", linear=True)


@in_opmath
def prod_(input, dim=None, keepdim=False, *, dtype=None):
    """Product; the fill enters as fill**(n - s) per slice.

    Example::

        >>> sf.sparse_coo_tensor([[0]], [3.], (3,), fill_value=2.).prod()
        tensor(12.)
    """
    _args.sparse(input, "prod()")
    A = _cast(input, dtype)
    if not A.dtype.is_floating_point:
        raise NotImplementedError(f"torch_sparsefill: prod of dtype {A.dtype} is not supported "
                                  f"yet (floating point only)")
    return reduce(A, _args.dims(dim, A.dim(), "prod()"), keepdim, prod_core(), "prod")


def _amax(input, dim=(), keepdim=False, *, is_min=False):
    _args.sparse(input, "amin()" if is_min else "amax()")
    A = input
    if A.dtype.is_complex:
        if A.numel():
            raise RuntimeError("amax/amin is not supported for complex tensors")
        # no element: torch answers (an empty result, or its error for an
        # empty reduced dim); the real parts give the same shapes and errors
        real = A._with(A._sf_values.real, A._sf_fill.real)
        return _amax(real, dim, keepdim, is_min=is_min).to(A.dtype)
    if A.dtype == torch.bool:
        return _amax(A.to(torch.uint8), dim, keepdim, is_min=is_min).to(torch.bool)
    what = "amin" if is_min else "amax"
    dims = _args.dims(dim, A.dim(), f"{what}()")
    # torch's errors for a max over no element (fuzz seed 445027)
    if A.numel() == 0 and (dim is None or dim == () or dim == []):
        raise RuntimeError(f"{what}(): Expected reduction dim to be specified for "
                           f"input.numel() == 0. Specify the reduction dim with the 'dim' argument.")
    for d in dims:
        if A.shape[d] == 0:
            raise IndexError(f"{what}(): Expected reduction dim {d} to have non-zero size.")
    out = reduce(A, dims, keepdim, max_core(is_min), what)
    # the slot kernels widen int32/int16/int8 to int64; a max is one of the
    # elements, so it keeps the input's dtype, as torch's does
    return out.to(A.dtype) if out.dtype != A.dtype and not A.dtype.is_floating_point else out


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
    _args.sparse(input, f"{name}()")
    if out is not None:
        raise NotImplementedError(f"torch_sparsefill: {name}(out=...) is not supported")
    if isinstance(dim, torch.Tensor):  # torch.max(a, b): element-wise
        return (torch.minimum if is_min else torch.maximum)(input, dim)
    if dim is None:
        if keepdim:
            raise TypeError(f"{name}() got keepdim without dim")
        return _amax(input, (), False, is_min=is_min)
    A = input._for_reduction()
    d = _args.dim(dim, A.dim(), f"{name}()")
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
        return result_type((A._with(vals, fv), A._with(idx, fi)))
    dense_shape = tuple(A.shape[sd:])
    fill_k = fill_over_kept(A, [d], dense_shape, name)
    S = Slices(A, [d], False)
    coord = A._coo_indices()[d]
    coord = coord if S.perm is None else coord.index_select(0, S.perm)
    v = S.rows(A._sf_values)
    frows = fill_rows(S, fill_k)
    out, winner, index = _ops.seg_max(v, frows, S.seg_ptr, coord, S.n, is_min, False)
    out = out.reshape((S.nseg,) + dense_shape)
    index = index.reshape((S.nseg,) + dense_shape)
    k = len(S.kept_dims)
    final = dense_shape
    if k == 0:
        shape = ((1,) * sd if keepdim else ()) + final
        return result_type((out[0].reshape(shape), index[0].reshape(shape)))
    sel = torch.nonzero(S.counts() > 0).view(-1)
    rfill = fill_k.reshape(tuple(fill_k.shape[:k]) + dense_shape)
    values = S.result(A.layout, sel, out.index_select(0, sel), rfill, dense_shape, keepdim)
    # An empty slice's first maximum is its first element: index 0.
    zero = torch.zeros((), dtype=torch.int64, device=sel.device)
    indices = S.result(A.layout, sel, index.index_select(0, sel), zero, dense_shape, keepdim)
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


@in_opmath
def logsumexp_(input, dim, keepdim=False):
    """``log(sum(exp(x)))`` over the dims, stable, fill included.

    Example::

        >>> sf.full((4,), 0.).logsumexp(0)
        tensor(1.3863)
    """
    _args.sparse(input, "logsumexp()")
    A = input if input.dtype.is_floating_point else input.to(torch.get_default_dtype())
    return reduce(A, _args.dims(dim, A.dim(), "logsumexp()"), keepdim, logsumexp_core(),
                  "logsumexp")


@in_opmath(dtype_at=4)
def norm_(input, p="fro", dim=None, keepdim=False, dtype=None, out=None):
    """Vector p-norm over the dims (p = 1, 2, 'fro', inf, -inf, 0 or any
    other number), fill included.

    Example::

        >>> sf.full((4,), -3.).norm(1)
        tensor(12.)
    """
    _args.sparse(input, "norm()")
    if out is not None:
        raise NotImplementedError("torch_sparsefill: norm(out=...) is not supported")
    A = _cast(input, dtype)
    if p == "fro" or p is None:
        p = 2
    if A.dtype in (torch.float16, torch.bfloat16) and p not in (math.inf, -math.inf, 0):
        # as dense: a half's powers accumulate in float32 (a float16 sum of
        # squares overflows at 256 elements of 16)
        return norm_(A.float(), p, dim, keepdim).to(A.dtype)
    if isinstance(p, str):
        raise NotImplementedError(f"torch_sparsefill: norm(p={p!r}) is not supported")
    if p == math.inf:
        return _amax(A.abs(), dim if dim is not None else (), keepdim)
    if p == -math.inf:
        return _amax(A.abs(), dim if dim is not None else (), keepdim, is_min=True)
    if p == 0:
        count = sum_(A != 0, dim, keepdim, dtype=A.dtype)
        if not (A.requires_grad and torch.is_grad_enabled()):
            return count
        # Dense norm(p=0) stays in the graph with a zero gradient; so does
        # this, through a where that never picks the sum (no 0 * inf).
        never = torch.zeros((), dtype=torch.bool, device=A.device)
        return torch.where(never, sum_(A, dim, keepdim), count)
    # An even power needs no abs: |x| ** 2 has second derivative 0 at x = 0,
    # x ** 2 has 2, as dense norm's double backward.
    even = float(p).is_integer() and int(p) % 2 == 0 and not A.dtype.is_complex
    if p < 1:
        # |x| ** p has an infinite derivative at 0, which dense's backward
        # masks (a zero element's gradient is 0): there the power of 1
        # stands in, off the path of that element's value (0, or inf for p < 0)
        nonzero = A != 0
        safe = torch.where(nonzero, A, 1.0)
        powered = torch.where(nonzero, safe.abs() ** p, 0.0 if p > 0 else math.inf)
    else:
        powered = A ** p if even else (A.abs() ** p if p != 1 else A.abs())
    s = sum_(powered, dim, keepdim)
    return s if p == 1 else safe_root(s, p)


def _var_std(take_sqrt, input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    name = "std" if take_sqrt else "var"
    _args.sparse(input, f"{name}()")
    if isinstance(dim, bool):  # var(input, unbiased)
        unbiased, dim = dim, None
    if correction is None:
        correction = 1 if unbiased is None or unbiased else 0
    A = input
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{name}(): input dtype should be floating point, got {A.dtype}")
    dims = _args.dims(dim, A.dim(), f"{name}()")
    sd = A.sparse_dim()
    dense_reduced = math.prod(A.shape[d] for d in dims if d >= sd)
    return reduce(A, dims, keepdim, var_core(correction, dense_reduced, take_sqrt), name)


@in_opmath
def var_(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """Variance over the dims (``correction`` as torch), fill included.

    Example::

        >>> sf.sparse_coo_tensor([[0]], [4.], (2,), fill_value=0.).var()
        tensor(8.)
    """
    return _var_std(False, input, dim, unbiased, keepdim, correction=correction)


@in_opmath
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
    _args.sparse(input, "count_nonzero()")
    return reduce(input, _args.dims(dim, input.dim(), "count_nonzero()"), False, count_core(),
                  "count_nonzero")


def _any_all(is_all, input, dim=None, keepdim=False):
    name = "all" if is_all else "any"
    _args.sparse(input, f"{name}()")
    A = input
    dims = _args.dims(dim, A.dim(), f"{name}()")
    count = reduce(A, dims, keepdim, count_core(), name)
    if not is_all:
        out = count > 0
    else:
        total = math.prod(A.shape[d] for d in dims)
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


ROUTES = {
    torch.sum: sum_, T.sum: sum_, torch._sparse_sum: sparse_sum_, torch.mean: mean_, T.mean: mean_,
    torch.prod: prod_, T.prod: prod_, torch.amax: amax_, T.amax: amax_,
    torch.amin: amin_, T.amin: amin_, torch.max: max_, T.max: max_, torch.min: min_, T.min: min_,
    torch.logsumexp: logsumexp_, T.logsumexp: logsumexp_, torch.norm: norm_, T.norm: norm_,
    # torch.sparse's docs list native_norm: the same vector norm.
    torch.native_norm: lambda input, p=2, dim=None, keepdim=False, dtype=None:
        norm_(input, p, dim, keepdim, dtype),
    torch.var: var_, T.var: var_, torch.std: std_, T.std: std_,
    torch.all: all_, T.all: all_, torch.any: any_, T.any: any_,
    torch.count_nonzero: count_nonzero_, T.count_nonzero: count_nonzero_,
}


def _fast_sum(args):
    """The hot path of ``A.sum()`` (docs/design.md#hot-path): a plain floating
    tensor's _sum_all, the count read off the size; None for any other call."""
    if len(args) != 1 or type(A := args[0]) is not SparseFillTensor or not A._sf_coalesced \
            or (A._sf_layout is not _COO and A._sf_layout is not _CSR) or A._sf_indefinite \
            or edited(A):
        return None
    # The same, in one C call, where nothing needs autograd; it checks the
    # rest of is_plain (1-d values, a 0-d fill) and that the values are
    # floating itself, and answers None otherwise.
    total = _C.hot_sum(A._sf_values, A._sf_fill, A._sf_size)
    if total is not None:
        return total
    if not is_plain(A) or not A._sf_values.dtype.is_floating_point:
        return None
    return with_fill_term(values_sum(A._sf_values), A._sf_fill,
                          math.prod(A._sf_size) - A._sf_values.shape[0])


_COO, _CSR = torch.sparse_coo, torch.sparse_csr
# Callables whose calls without keywords the routing tries here first.
FAST = {torch.sum: _fast_sum, T.sum: _fast_sum, torch._sparse_sum: _fast_sum}
