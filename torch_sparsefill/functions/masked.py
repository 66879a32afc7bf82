"""``torch.masked`` on SparseFillTensors (RFC.md#torch-masked).

torch.masked's functions are plain Python with no ``__torch_function__``
hook: given a sparse layout they read the stored values alone, which would
ignore the fill. So importing the package replaces each of them, in
``torch.masked`` and ``torch.masked._ops`` (:func:`install`), by a function
that passes every call without a SparseFillTensor to torch's unchanged and
answers the others by the dense meaning:

- ``mask=None``: the op on the dense tensor A stands for, through the
  package's routes (O(stored)): ``masked.sum(A, d)`` is ``A.sum(d)``;
- a mask (strided or a SparseFillTensor): torch's masked op on the dense
  forms of A and the mask: exact, and O(numel) as the strided mask itself;
- an op without a route of its own (argmax, argmin, median): refused,
  naming it; cumsum and cumprod, whose result is as large as the dense
  tensor, compute on the dense form;
- an indefinite operand or mask: refused as the routing refuses it
  (``sf.reduce`` is the present-only reduction).

Never on the stored values alone. A module that bound one of them before
``import torch_sparsefill`` (``from torch.masked import sum``) keeps torch's.
"""
from __future__ import annotations

import functools

import torch
import torch.masked
import torch.masked._ops as _masked_ops

from ..tensor import SparseFillTensor
from . import indefinite as _indefinite
from .reductions import handlers as _reductions
from .reductions import softmax as _softmax

__all__: list = []

NAMES = ("sum", "prod", "cumsum", "cumprod", "amax", "amin", "argmax", "argmin", "mean",
         "median", "logsumexp", "logaddexp", "norm", "var", "std", "softmax", "log_softmax",
         "softmin", "normalize")
_MASKS = ("mask", "input_mask", "other_mask")


def _dims(dim, ndim):
    """torch.masked's dims: None or an empty sequence reduce every dim."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return list(range(ndim))
    return [dim] if isinstance(dim, int) else list(dim)


def _to(A, dtype):
    return A if dtype is None or A.dtype == dtype else A.to(dtype)


def _sum(A, dim=None, *, keepdim=False, dtype=None):
    return _reductions.sum_(A, _dims(dim, A.dim()), bool(keepdim), dtype=dtype)


def _prod(A, dim=None, *, keepdim=False, dtype=None):
    return _reductions.prod_(A, _dims(dim, A.dim()), bool(keepdim), dtype=dtype)


def _amax(A, dim=None, *, keepdim=False, dtype=None):
    return _reductions.amax_(_to(A, dtype), _dims(dim, A.dim()), bool(keepdim))


def _amin(A, dim=None, *, keepdim=False, dtype=None):
    return _reductions.amin_(_to(A, dtype), _dims(dim, A.dim()), bool(keepdim))


def _mean(A, dim=None, *, keepdim=False, dtype=None):
    dtype = A.dtype if dtype is None else dtype
    if not (dtype.is_floating_point or dtype.is_complex):
        raise ValueError(f"mean(): Could not infer output dtype. Input dtype must be either a "
                         f"floating point or complex dtype. Got: {dtype}")
    return _reductions.mean_(A, _dims(dim, A.dim()), bool(keepdim), dtype=dtype)


def _std_var(take_sqrt, A, dim=None, unbiased=None, *, correction=None, keepdim=False,
             dtype=None):
    if unbiased is not None and correction is not None:
        raise ValueError("Only one of unbiased and correction may be given")
    c = correction if correction is not None else (0 if unbiased is False else 1)
    if dtype is None:
        dtype = A.dtype if A.dtype.is_floating_point or A.dtype.is_complex else torch.float32
    fn = _reductions.std_ if take_sqrt else _reductions.var_
    return fn(_to(A, dtype), _dims(dim, A.dim()), keepdim=bool(keepdim), correction=c)


def _norm(A, ord=2.0, dim=None, *, keepdim=False, dtype=None):
    return _reductions.norm_(A, 2.0 if ord is None else ord, _dims(dim, A.dim()),
                             bool(keepdim), dtype)


def _logsumexp(A, dim=None, *, keepdim=False, dtype=None):
    out = _reductions.logsumexp_(A, _dims(dim, A.dim()), bool(keepdim))
    return _to(out, A.dtype if dtype is None else dtype)


def _softmax_of(log, negate):
    def impl(A, dim, *, dtype=None):
        return (_softmax.log_softmax_ if log else _softmax.softmax_)(-A if negate else A, dim,
                                                                     dtype)
    return impl


def _normalize(A, ord, dim, *, eps=1e-12, dtype=None):
    norm = _norm(A, ord, dim, keepdim=True, dtype=A.dtype if dtype is None else dtype)
    floor = torch.full((), eps, dtype=norm.dtype, device=norm.device)
    return torch.divide(A, torch.maximum(norm, floor))


def _logaddexp(A, other, *, dtype=None):
    dtype = A.dtype if dtype is None else dtype
    return torch.logaddexp(A, other).to(dtype)


# mask=None: the dense op through the package's routes.
_UNMASKED = {
    "sum": _sum, "prod": _prod, "amax": _amax, "amin": _amin, "mean": _mean,
    "var": functools.partial(_std_var, False), "std": functools.partial(_std_var, True),
    "norm": _norm, "logsumexp": _logsumexp, "softmax": _softmax_of(False, False),
    "log_softmax": _softmax_of(True, False), "softmin": _softmax_of(False, True),
    "normalize": _normalize, "logaddexp": _logaddexp,
}
# Their result is as large as the dense tensor: computed on it.
_ON_DENSE = ("cumsum", "cumprod")


def _dense(x):
    return x.to_dense() if isinstance(x, SparseFillTensor) else x


def _routed(name: str, torch_op):
    operands = 2 if name == "logaddexp" else 1

    @functools.wraps(torch_op)
    def masked_op(*args, **kwargs):
        if not any(isinstance(x, SparseFillTensor)
                   for x in (*args[:operands], *(kwargs.get(m) for m in _MASKS))):
            return torch_op(*args, **kwargs)
        if _indefinite.present(args, kwargs):  # this entry is not the routing's: its check
            _indefinite.refuse(f"torch.masked.{name}", ": torch.masked would read the "
                               "placeholder (sf.reduce(A, dim, monoid) reduces over the "
                               "present elements only)")
        if any(kwargs.get(m) is not None for m in _MASKS) or name in _ON_DENSE:
            # The masked op on the dense tensors A and the mask stand for.
            return torch_op(*[_dense(a) for a in args],
                            **{k: _dense(v) for k, v in kwargs.items()})
        unmasked = _UNMASKED.get(name)
        if unmasked is None:
            raise NotImplementedError(
                f"torch_sparsefill: torch.masked.{name} is not implemented for SparseFillTensor "
                f"(torch's would read the stored values alone, ignoring the fill); call it on "
                f"A.to_dense()")
        kwargs = {k: v for k, v in kwargs.items() if k not in _MASKS}
        return unmasked(*args, **kwargs)
    masked_op.__doc__ = (f"``torch.masked.{name}``, with SparseFillTensor operands computed "
                         f"with the fill (torch_sparsefill.functions.masked).\n\n"
                         f"{torch_op.__doc__ or ''}")
    masked_op.__wrapped_by_sparsefill__ = True
    return masked_op


def install() -> None:
    """Replace torch.masked's functions (idempotent; torch's own stay
    reachable as ``torch.masked.sum.__wrapped__``).

    Example::

        >>> A = sf.full((2, 3), 0.75)
        >>> torch.masked.sum(A)
        tensor(4.5000)
    """
    for name in NAMES:
        torch_op = getattr(_masked_ops, name)
        if getattr(torch_op, "__wrapped_by_sparsefill__", False):
            continue
        routed = _routed(name, torch_op)
        setattr(_masked_ops, name, routed)
        if getattr(torch.masked, name, None) is torch_op:
            setattr(torch.masked, name, routed)
