"""Differences with the fill (RFC.md#scans-and-differences): diff,
gradient, trapezoid. Each output element is a fixed formula of a window of
neighbours along one dim (a stencil): it differs from the formula of the
fill's window only where the window holds a stored element, so the result
stays sparse -- stored where a window touches a stored element, the
formula of the fill's window as its fill (``f - f``: 0, or NaN for an
infinite or NaN fill). O(stored log stored); the arithmetic is dense's.
"""
from __future__ import annotations


import torch

from ...creation import sparse_coo_tensor, to_sparse
from ...tensor import args as _args
from ...tensor import fill as _fill
from ...tensor import SparseFillTensor, build
from ..indexing.lookup import lookup

T = torch.Tensor
_ops = torch.ops.sparsefill

__all__: list = []


def stencil(A: SparseFillTensor, d: int, width: int, fn, what: str):
    """out[k] = fn(x[k], x[k+1], ..., x[k+width-1]) along sparse dim `d`
    (length n - width + 1): stored where a window holds a stored element,
    fn of the fill's window elsewhere."""
    A = A._coalesced()
    size = tuple(A._sf_size)
    sd = A.sparse_dim()
    n = size[d]
    m = max(n - width + 1, 0)
    dense_shape = size[sd:]
    sizes = list(size[:sd])
    idx = A._coo_indices()
    lin = _ops.coo_linearize(idx, sizes) if sd > 1 else idx[0]
    out_sizes = sizes[:d] + [m] + sizes[d + 1:]
    cand = []
    for o in range(width):
        c = idx.clone()
        c[d] -= o
        cand.append(c[:, (c[d] >= 0) & (c[d] < m)])
    cand = torch.cat(cand, 1)
    if cand.shape[1]:
        key = _ops.coo_linearize(cand, out_sizes) if sd > 1 else cand[0]
        key = torch.unique(key)
        cand = _ops.coo_delinearize(key, out_sizes) if sd > 1 else key.unsqueeze(0)
    window = []
    for o in range(width):
        c = cand.clone()
        c[d] += o
        window.append(lookup(A, c, lin))
    values = fn(*window) if cand.shape[1] else \
        A._sf_values.new_zeros((0,) + tuple(dense_shape))
    F = _fill.full_rank(A._sf_fill, len(size))
    fills = [F if F.shape[d] == 1 else F.narrow(d, o, m) for o in range(width)]
    fill = fn(*fills)
    out_size = size[:d] + (m,) + size[d + 1:]
    return build(A.layout, out_size, values.to(fill.dtype) if values.dtype != fill.dtype else
                 values, fill, indices=cand)


def _stencil_any(A, d, width, fn, what):
    """stencil along any dim: a dense dim runs fn on shifted views of values and fill."""
    sd = A.sparse_dim()
    if d < sd:
        return stencil(A, d, width, fn, what)
    A = A._coalesced()
    n = A.shape[d]
    m = max(n - width + 1, 0)
    v = A._sf_values
    F = _fill.full_rank(A._sf_fill, A.dim())
    F = F.expand(tuple(F.shape[:sd]) + tuple(A.shape[sd:]))
    vals = fn(*[v.narrow(d - sd + 1, o, m) for o in range(width)])
    fill = fn(*[F.narrow(d, o, m) for o in range(width)])
    if not A._has_per_slice_fill():
        fill = fill.reshape(fill.shape[sd:])
    return A._with(vals, fill)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """``x[k+1] - x[k]`` along `dim`, `n` times: sparse, stored next to the
    stored elements, the fill ``f - f``. `prepend`/`append` are joined
    first (strided ones become tensors storing every element).

    Example::

        >>> A = sf.sparse_coo_tensor([[2]], [5.], (5,), fill_value=1.)
        >>> torch.diff(A).to_dense()
        tensor([ 0.,  4., -4.,  0.])
    """
    A = _args.sparse(input, "diff()")
    if A.dim() == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    d = _args.dim(dim, A.dim(), "diff()")
    n = _args.integer(n, "diff()")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    parts = [_as_sparse(prepend, A, d, "prepend"), A, _as_sparse(append, A, d, "append")]
    parts = [p for p in parts if p is not None]
    if len(parts) > 1:
        A = torch.cat(parts, d)
    sub = (lambda a, b: torch.logical_xor(b, a)) if A.dtype == torch.bool else \
        (lambda a, b: b - a)
    for _ in range(n):
        if A.shape[d] == 0:
            break
        A = _stencil_any(A, d, 2, sub, "diff()")
    return A


def _as_sparse(x, A, d, what):
    if x is None or isinstance(x, SparseFillTensor):
        return x
    x = torch.as_tensor(x, dtype=A.dtype, device=A.device)
    if x.dim() == 0:
        shape = list(A.shape)
        shape[d] = 1
        x = x.expand(shape)
    layout = torch.sparse_coo if A.layout == torch.sparse_coo else A.layout
    return to_sparse(x.contiguous(), fill_value=A._fill_value().reshape(-1)[0].detach()
                     if not A._has_per_slice_fill() else None, layout=layout)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """torch.gradient with a uniform spacing: central differences inside,
    one-sided at the edges, each output sparse (see :func:`diff`); the edge
    elements are always stored (their formula of the fill is not exactly 0).

    Example::

        >>> A = sf.sparse_coo_tensor([[2]], [5.], (5,), fill_value=1.)
        >>> torch.gradient(A)[0].to_dense()
        tensor([ 0.,  2.,  0., -2.,  0.])
    """
    A = _args.sparse(input, "gradient()")
    dims = list(range(A.dim())) if dim is None else \
        [_args.dim(x, A.dim(), "gradient()") for x in
         (dim if isinstance(dim, (list, tuple)) else [dim])]
    if spacing is None:
        spacing = 1
    if isinstance(spacing, (list, tuple)):
        if any(isinstance(h, torch.Tensor) and h.dim() for h in spacing):
            raise NotImplementedError("torch_sparsefill: gradient() with coordinate tensors "
                                      "is not supported; call it on A.to_dense()")
        hs = [float(h) for h in spacing]
        if len(hs) == 1:
            hs = hs * len(dims)
    else:
        if isinstance(spacing, torch.Tensor) and spacing.dim():
            raise NotImplementedError("torch_sparsefill: gradient() with a coordinate tensor "
                                      "is not supported; call it on A.to_dense()")
        hs = [float(spacing)] * len(dims)
    if dim is None and len(hs) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or "
                           f"a list of length equal to 'self.dim() = {A.dim()}'")
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    out = []
    for d, h in zip(dims, hs):
        n = A.shape[d]
        if n < edge_order + 1:
            raise RuntimeError(f"torch.gradient expected each dimension size to be at least "
                               f"edge_order+1")
        inner = _stencil_any(A, d, 3, lambda a, b, c: (c - a) / (2 * h), "gradient()")
        first = A.narrow(d, 0, edge_order + 1)
        last = A.narrow(d, n - edge_order - 1, edge_order + 1)
        if edge_order == 1:
            lo = _stencil_any(first, d, 2, lambda a, b: (b - a) / h, "gradient()")
            hi = _stencil_any(last, d, 2, lambda a, b: (b - a) / h, "gradient()")
        else:
            lo = _stencil_any(first, d, 3, lambda a, b, c: (-1.5 * a + 2 * b - 0.5 * c) / h,
                              "gradient()")
            hi = _stencil_any(last, d, 3, lambda a, b, c: (0.5 * a - 2 * b + 1.5 * c) / h,
                              "gradient()")
        out.append(torch.cat([_all_stored(lo, inner), inner, _all_stored(hi, inner)], d))
    return tuple(out)


def _all_stored(E, like):
    """The edge slice E with every element stored and `like`'s fill (so the
    edges join the interior without changing its fill)."""
    f = like._sf_fill
    if like._has_per_slice_fill() or E.numel() == 0:
        return E
    sd = E.sparse_dim()
    D = E.to_dense()
    idx = torch.ones(tuple(E.shape[:sd]), dtype=torch.bool, device=D.device).nonzero().t()
    out = sparse_coo_tensor(idx, D[tuple(idx)], tuple(E.shape), fill_value=f)
    return out.to_sparse_csr() if like.layout == torch.sparse_csr and sd == 2 else out


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule along `dim`, as torch writes it: ``dx * (sum(y) -
    (y[0] + y[-1]) / 2)``, the sum counting the fill (so an infinite fill
    gives NaN exactly where dense does). With sample points `x` the lanes
    are written out (O(numel)).

    Example::

        >>> A = sf.sparse_coo_tensor([[1]], [3.], (3,), fill_value=1.)
        >>> torch.trapezoid(A)
        tensor(4.)
    """
    A = _args.sparse(y, "trapezoid()")
    d = _args.dim(dim, A.dim(), "trapezoid()")
    if x is not None:
        # sample points: a strided x of the lanes' length or shape; the
        # weights differ per element, so the lanes are written out (O(numel))
        x = x.to_dense() if isinstance(x, SparseFillTensor) else x
        return torch.trapezoid(A.to_dense(), x, dim=d)
    h = 1 if dx is None else dx
    total = torch.sum(A, d)
    if A.shape[d] == 0:
        return total * 0
    ends = A.select(d, 0) + A.select(d, A.shape[d] - 1)
    return (total - ends * 0.5) * h


ROUTES = {
    torch.diff: diff, T.diff: diff, torch.gradient: gradient, torch.trapezoid: trapezoid,
    torch.trapz: trapezoid,
}
