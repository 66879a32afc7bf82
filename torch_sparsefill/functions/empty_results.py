"""Results with no element, or made from inputs with none, stay in the
autograd graph, as dense torch's do.

A route may build an empty result from fresh tensors (nothing to compute),
which leaves it out of the graph: ``torch.softmax(A, 0)`` of a tensor with a
size-0 dim would not require grad where dense's does, and a backward
through it raises. :func:`in_graph` links such a result to an input that
requires grad with a ``where`` that selects the result's own fill: its value
is unchanged, and the backward sends exactly 0 (a ``where`` selects, it never
multiplies, so a NaN or infinite input sends no NaN back).
"""
from __future__ import annotations

import torch

from ..tensor import SparseFillTensor

__all__: list = []

# Functions whose dense result does not require grad either.
_CUTS = {torch.Tensor.detach, torch.detach, torch.Tensor.requires_grad_, torch.histc,
         torch.Tensor.histc, torch.Tensor.new_zeros, torch.Tensor.new_ones,
         torch.Tensor.new_full, torch.Tensor.new_empty, torch.Tensor.new_tensor}


def _grad_input(args, kwargs):
    for a in list(args) + list(kwargs.values()):
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, torch.Tensor) and t.requires_grad:
                return t
    return None


def _zero_link(t: torch.Tensor) -> torch.Tensor:
    """A 0-d tensor in t's graph (its value is never used)."""
    if isinstance(t, SparseFillTensor):
        return t._sf_values.reshape(-1)[:1].sum() + t._sf_fill.reshape(-1)[:1].sum()
    return t.reshape(-1)[:1].sum()


def in_graph(func, out, args, kwargs, cuts=frozenset()):
    """`out`, linked to the graph of an input that requires grad when it has
    no element and a dense result would require grad; `cuts`: more
    functions (the ``*_like`` factories) whose dense result does not.

    Example::

        >>> f = torch.tensor(1., requires_grad=True)
        >>> A = sf.full((0, 3), 1., dtype=torch.float32) * f
        >>> torch.softmax(A, 0).requires_grad
        True
    """
    sparse = type(out) is SparseFillTensor
    if not (sparse or (type(out) is torch.Tensor and out.layout == torch.strided)) or \
            out.requires_grad or not torch.is_grad_enabled() or func in _CUTS or func in cuts or \
            not (out.dtype.is_floating_point or out.dtype.is_complex) or \
            getattr(func, "__name__", "").endswith("_") or "out" in kwargs:
        return out
    source = _grad_input(args, kwargs)
    # No element in the result, or none in the input it comes from (F.pad of
    # an empty tensor is all pad value, yet dense's requires grad; fuzz seed 343383)
    if source is None or (out.numel() != 0 and source.numel() != 0):
        return out
    # (a strided result too: baddbmm of an empty sparse batch, fuzz seed 348427)
    target = out._sf_fill if sparse else out
    link = _zero_link(source).to(target.dtype)
    never = torch.zeros((), dtype=torch.bool, device=target.device)
    linked = torch.where(never, link, target)
    return out._with(out._sf_values, linked) if sparse else linked
