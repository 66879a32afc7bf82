"""``torch.sparse.mm(A, x, reduce=...)`` of a SparseFillTensor A (
RFC.md#sparse-mm-reduce).

Output row i reduces ``A[i, j] * x[j, :]`` over all k columns j of A, as
the dense tensor would: the stored values and, for every unspecified j, the
fill. So ``'sum'`` is the product, ``'mean'`` the product over k, and
``'amax'``/``'amin'`` take the fill's products ``fill * x[j, :]`` of the
unspecified columns into the max. (torch's own sparse tensors reduce over
the stored elements only; a SparseFillTensor has no unspecified element
that is left out, whatever its fill.)

The max over a row's unspecified columns is found without the k x d dense
work per row: each column of ``P = fill * x`` is sorted once, and a row's
answer is the first entry in that order whose column the row does not
store (the row's stored columns are skipped with a per-row "first missing
rank" search). Time O(k d log k + nse d log nse), memory O(nse d + k d).

Gradients match the dense ``amax``: tied maxima share the gradient evenly,
stored and unspecified ones alike.

Example::

    >>> A = sf.sparse_coo_tensor([[0], [0]], [-5.], (1, 2), fill_value=1.)
    >>> torch.sparse.mm(A, torch.tensor([[2.], [3.]]), 'amax')
    tensor([[3.]])
"""
from __future__ import annotations

import math

import torch

from ...tensor import args as _args
from . import products as _products
from ...tensor import SparseFillTensor

__all__: list = []

_REDUCTIONS = ("sum", "mean", "amax", "amin")
_ALIASES = {"max": "amax", "min": "amin"}  # torch takes these too (PyG passes them)


def _sparse_mm(mat1, mat2, reduce="sum"):
    """torch.sparse.mm with a SparseFillTensor operand (see the module doc)."""
    fname = "torch.sparse.mm()"
    reduce = _ALIASES.get(reduce, reduce)
    if reduce not in _REDUCTIONS:
        raise RuntimeError(f"{fname}: reduce must be one of {', '.join(map(repr, _REDUCTIONS))}, "
                           f"got {reduce!r}")
    if reduce == "sum":
        return _products._mm(mat1, mat2, torch.sparse.mm)
    A = _products._as_operand(mat1, torch.sparse.mm)
    x = _products._as_operand(mat2, torch.sparse.mm)
    if not isinstance(A, SparseFillTensor) or isinstance(x, SparseFillTensor):
        raise NotImplementedError(f"torch_sparsefill: {fname} with reduce={reduce!r} takes a "
                                  f"sparse mat1 and a strided mat2 (as torch does)")
    _products._check_matrix(A, torch.sparse.mm, "mat1")
    if x.dim() != 2:
        raise RuntimeError(f"{fname}: mat2 must be a matrix, got a {x.dim()}-D tensor")
    _products._check_dtypes(A, x, torch.sparse.mm)
    _products._check_shapes(A, x, torch.sparse.mm)
    if reduce == "mean":  # the dense mean over k columns (k = 0: 0 / 0, nan, as dense)
        return _products._mm(A, x, torch.sparse.mm) / A.shape[1]
    if A.shape[1] == 0:
        raise RuntimeError(f"{fname}: reduce={reduce!r} over 0 columns (mat1 has shape "
                           f"{tuple(A.shape)}) has no identity")
    if reduce == "amin":  # min of a * x = -max of (-a) * x, exactly
        return -_max_product(-A, x, fname)
    return _max_product(A, x, fname)


def _fill_column(A: SparseFillTensor, fname) -> torch.Tensor:
    """A's fill as it multiplies x's rows: a scalar, or (k, 1) for a
    per-column fill. A per-row fill would need a max per row of its own."""
    f = _products._fill2d(A, torch.sparse.mm)
    m, k = A.shape
    if f.numel() == 1:
        return f.reshape(())
    if tuple(f.shape) == (1, k):
        return f.reshape(k, 1)
    raise NotImplementedError(f"torch_sparsefill: {fname}: reduce='amax'/'amin' with a per-row "
                              f"fill of shape {tuple(f.shape)} is not supported (scalar and "
                              f"per-column fills are); call .to_dense() first")


def _max_product(A: SparseFillTensor, x: torch.Tensor, fname) -> torch.Tensor:
    """out[i, :] = max over all j of A[i, j] * x[j, :] (the dense amax)."""
    m, k = A.shape
    d = x.shape[1]
    A = A._coalesced()
    idx = A._coo_indices()
    rows, cols = idx[0].contiguous(), idx[1].contiguous()
    f = _fill_column(A, fname)
    needs_grad = torch.is_grad_enabled() and (A._sf_values.requires_grad or f.requires_grad or
                                              x.requires_grad)
    if needs_grad and not bool(torch.isfinite(f).all()):
        raise NotImplementedError(f"torch_sparsefill: {fname}: gradients of reduce='amax'/'amin' "
                                  f"with a non-finite fill are not supported (the dense gradient "
                                  f"is nan almost everywhere); detach the inputs")
    stored = A._sf_values.unsqueeze(1) * x.index_select(0, cols)  # (nse, d)
    background = f * x  # (k, d): what every unspecified column j contributes
    with torch.no_grad():
        out, order = _exact_max(stored.detach(), background.detach(), rows, cols, m, k)
    if not needs_grad:
        return out
    return _with_amax_gradient(out, order, stored, background, rows, cols, m, k, d)


def _row_starts(rows, m):
    """Where each row's stored elements begin (coalesced order) and how many there are."""
    count = torch.bincount(rows, minlength=m)
    return torch.cumsum(count, 0) - count, count


def _exact_max(stored, background, rows, cols, m, k):
    """The row maxima (m, d) over stored products and the background of the
    unspecified columns, nan propagating as in torch.amax; and the order
    sorting each background column descending (nan first)."""
    nse, d = stored.shape
    dev = stored.device
    # Stored part; a row with nothing stored stays -inf.
    index = rows.unsqueeze(1).expand(nse, d)
    best = torch.full((m, d), -math.inf, dtype=stored.dtype, device=dev)
    best = best.scatter_reduce(0, index, stored, "amax", include_self=True)
    has_nan = torch.zeros((m, d), dtype=torch.int64, device=dev).index_add_(
        0, rows, torch.isnan(stored).to(torch.int64)) > 0
    best = torch.where(has_nan, torch.full_like(best, math.nan), best)
    # Background part: the first column in descending order that the row
    # does not store. Ranks of the stored columns, sorted within each row:
    # the first position p whose rank is not p is the answer's rank.
    order = torch.sort(background, dim=0, descending=True, stable=True).indices  # nan first
    rank = torch.empty_like(order).scatter_(
        0, order, torch.arange(k, device=dev).unsqueeze(1).expand(k, d).contiguous())
    start, count = _row_starts(rows, m)
    key = rows.unsqueeze(1) * k + rank.index_select(0, cols)
    ranks_in_row = torch.sort(key, dim=0).values - rows.unsqueeze(1) * k
    position = (torch.arange(nse, device=dev) - start.index_select(0, rows)).unsqueeze(1)
    gap = torch.where(ranks_in_row != position, position.expand(nse, d),
                      torch.full_like(ranks_in_row, k))
    first_free = count.unsqueeze(1).expand(m, d).contiguous().scatter_reduce(
        0, index, gap, "amin", include_self=True)
    free = first_free < k
    pick = order.gather(0, first_free.clamp(max=k - 1))
    from_background = background.gather(0, pick)
    from_background = torch.where(free, from_background,
                                  torch.full_like(from_background, -math.inf))
    return torch.maximum(best, from_background), order


def _with_amax_gradient(out, order, stored, background, rows, cols, m, k, d):
    """`out` (exact) plus a term of value 0 whose gradient is the dense
    amax's: every element equal to its row's max gets gradient / count,
    count taken over stored and unspecified elements together."""
    target = out.index_select(0, rows)
    with torch.no_grad():
        tied = stored == target  # (nse, d)
        # Background ties: all j with background == max, less the stored j.
        ascending = background.gather(0, order.flip(0)).t().contiguous()  # (d, k), nan last
        lo = torch.searchsorted(ascending, out.t().contiguous(), side="left")
        hi = torch.searchsorted(ascending, out.t().contiguous(), side="right")
        stored_bg_tied = background.index_select(0, cols) == target
        count = torch.zeros((m, d), dtype=torch.int64, device=out.device)
        count.index_add_(0, rows, tied.to(torch.int64))
        count += (hi - lo).t()
        count.index_add_(0, rows, -stored_bg_tied.to(torch.int64))
        weight = 1.0 / count.to(out.dtype)  # count >= 1 where out is not nan
    total = torch.zeros((m, d), dtype=out.dtype, device=out.device).index_add(
        0, rows, torch.where(tied, stored, torch.zeros_like(stored)))
    sorted_bg = background.gather(0, order.flip(0))
    prefix = torch.cat([torch.zeros((1, d), dtype=out.dtype, device=out.device),
                        torch.cumsum(sorted_bg, 0)])
    total = total + prefix.gather(0, hi.t()) - prefix.gather(0, lo.t())
    total = total.index_add(0, rows, -torch.where(stored_bg_tied, background.index_select(0, cols),
                                                  torch.zeros_like(stored)))
    expr = total * weight
    # Finite inputs give a finite expr; an overflowed product keeps the
    # exact value (the gradient there is the dense one's nan anyway).
    return torch.where(torch.isfinite(expr), out + (expr - expr.detach()), out)


ROUTES = {torch.sparse.mm: _sparse_mm}
