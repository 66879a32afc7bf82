"""Softmax and log_softmax of SparseFillTensors (RFC.md#softmax).

Softmax along a sparse dim keeps the pattern and gives each slice its own
fill ``exp(f - m_i) / Z_i``: a per-slice fill (RFC.md#per-slice-fills). Along a
dense dim, each stored dense part and the fill are normalised alone.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...tensor import args as _args
from .. import stored_only
from ..opmath import in_opmath
from .slices import Slices, fill_over_kept, fill_rows

_ops = torch.ops.sparsefill
T = torch.Tensor

__all__: list = []


def _softmax(log, input, dim=None, dtype=None, what="softmax"):
    _args.sparse(input, f"{what}()")
    if dim is None:
        raise TypeError(f"{what}() needs dim for a SparseFillTensor (torch's implicit choice "
                        f"of dim is deprecated)")
    A = (input if dtype is None else input.to(dtype))._for_reduction()
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{what}(): expected a floating point tensor, got {A.dtype}")
    d = _args.dim(dim, A.dim(), f"{what}()")
    if A.numel() == 0:  # no element: nothing to normalise (the fill covers none)
        return A._with(A._sf_values.clone(), torch.zeros_like(A._sf_fill))
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
    fill_k = fill_over_kept(A, [d], dense_shape, what)
    by_slots = _by_slots(A, d, fill_k, dense_shape, log)
    if by_slots is not None:
        values, out_fill = by_slots
    else:
        S = Slices(A, [d], False)
        v = S.rows(A._sf_values)
        frows = fill_rows(S, fill_k)
        out, out_fill = _ops.seg_softmax(v, frows, S.seg_ptr, S.n, log)
        values = S.unrows(out, dense_shape)
    # One fill per slice: the kept sparse dims, size 1 along d (
    # RFC.md#per-slice-fills); `build` stores it in the dense-part form when d was the
    # only sparse dim of size above 1.
    fshape = tuple(1 if e == d else A.shape[e] for e in range(sd)) + dense_shape
    return A._with(values, out_fill.reshape(fshape))


def _by_slots(A, d, fill_k, dense_shape, log):
    """Softmax along sparse dim `d` when the kept dims do not lead (COO dim 0,
    CSR dim 0: the stored order does not group the slices), in stored order
    by ``torch.ops.sparsefill.slot_softmax`` (docs/design.md#softmax-kernel): each stored element
    goes to its slice's slot, no sort, no gather into slice order, no scatter
    back. Returns (values in stored order, fill [nslots, w]), or None where
    the segment path serves: the kept dims lead (the slices lie in stored
    order already), a tensor with no element, another device than the CPU, a torch.func transform
    (functorch's fallback would batch the slots), a batched or blocked layout."""
    sd = A.sparse_dim()
    values = A._sf_values
    if (d == sd - 1 or values.device.type != "cpu"
            or A.layout not in (torch.sparse_coo, torch.sparse_csr) or A._batch_dim()
            or torch._C._are_functorch_transforms_active()
            or math.prod(A._sf_size) == 0):  # no element: the C op would get no buffers
        return None
    size = A._sf_size
    kept = [e for e in range(sd) if e != d]
    kept_sizes = [size[e] for e in kept]
    if A.layout == torch.sparse_csr:  # d == 0: the slots are the columns
        slot = A._sf_col
    else:
        indices = A._coo_indices()
        slot = indices[kept[0]] if len(kept) == 1 else \
            _ops.coo_linearize(indices[kept], kept_sizes)
    nslots = math.prod(kept_sizes)
    w = math.prod(dense_shape)
    k = len(kept)
    if all(s == 1 for s in fill_k.shape[:k]):  # one fill row for every slice
        frows = fill_k.reshape(1, w)
    else:
        frows = fill_k.expand(tuple(kept_sizes) + tuple(fill_k.shape[k:])).reshape(nslots, w)
    out, out_fill = _ops.slot_softmax(values.reshape(values.shape[0], w), slot, frows, nslots,
                                      size[d], log)
    return out.reshape(values.shape), out_fill


@in_opmath(dtype_at=2)
def softmax_(input, dim=None, dtype=None, *, _stacklevel=3):
    """Softmax along `dim`: the pattern stays, each slice gets its own fill
    ``exp(f - m) / Z`` (a per-slice fill, RFC.md#per-slice-fills and RFC.md#softmax).

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 3]], [[.11, .12], [.31, .32]], (4, 2))
        >>> torch.softmax(A, 0).fill_value()
        tensor([0.2232, 0.2220])
    """
    return _softmax(False, input, dim, dtype)


@in_opmath(dtype_at=2)
def log_softmax_(input, dim=None, dtype=None, *, _stacklevel=3):
    """log_softmax along `dim`; see :func:`softmax_`.

    Example::

        >>> torch.log_softmax(sf.full((2,), 0.), 0).fill_value()
        tensor(-0.6931)
    """
    return _softmax(True, input, dim, dtype, "log_softmax")


def _f_softmax(log):
    @in_opmath(dtype_at=3)
    def impl(input, dim=None, _stacklevel=3, dtype=None):
        return _softmax(log, input, dim, dtype, "log_softmax" if log else "softmax")
    return impl


def _sparse_softmax(log):
    """torch.sparse.(log_)softmax (RFC.md#stored-only-ops): documented with
    unspecified entries ignored, which on a defined fill is the dense
    meaning only at fill -inf (_defined_fill_softmax)."""
    name = "log_softmax" if log else "softmax"

    @in_opmath(dtype_at=2)
    def impl(input, dim, dtype=None):
        _defined_fill_softmax(input, name)
        return _softmax(log, input, dim, dtype, name)
    return impl


def _defined_fill_softmax(A, name: str) -> None:
    """Whether torch.sparse.`name` of A (a defined fill) computes: at fill
    -inf ignoring the unspecified entries is the dense softmax; any other
    fill is refused (functions/stored_only.py)."""
    fill = getattr(A, "_sf_fill", None)
    if fill is not None and not bool((fill == -math.inf).all()):
        shown = fill.detach().cpu()
        stored_only.refuse(f"torch.sparse.{name}",
                           f"the fill {shown.item() if shown.numel() == 1 else shown.tolist()} "
                           f"would be ignored; only a fill of -inf is ignored by the dense "
                           f"softmax too", f"torch.{name}(A, dim)")

ROUTES = {
    torch.softmax: softmax_, T.softmax: softmax_,
    torch.log_softmax: log_softmax_, T.log_softmax: log_softmax_,
    F.softmax: _f_softmax(False), F.log_softmax: _f_softmax(True),
    torch.sparse.softmax: _sparse_softmax(False), torch.sparse.log_softmax: _sparse_softmax(True),
}
