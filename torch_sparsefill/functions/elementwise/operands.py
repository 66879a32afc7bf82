"""The rules of a second operand that is not a SparseFillTensor of the same
dtype (RFC.md#with-a-strided-tensor): torch's type promotion (a 0-d tensor
of the same kind does not widen), torch's own refusals of a dtype mix, half
precision rounded once, and gradients that must not pass through a fill
element that covers no element.
"""
from __future__ import annotations

import torch
from torch import _prims_common

from ...tensor import SparseFillTensor
from ...tensor import fill as _fill

__all__: list = []


def _promoted(a: SparseFillTensor, other: torch.Tensor):
    """`a` and a strided `other` in the dtype torch computes their op in
    (torch.result_type: a 0-d tensor of the same kind does not widen a
    tensor of more dims, one of more dims does), so that values and fill
    both get it; the generated ops would otherwise widen to the larger."""
    # from dtypes and dims alone (torch.result_type's rule, as torch._refs
    # apply it): no tensor op, so nothing enters a traced graph
    # (a 0-d SparseFillTensor promotes as a 0-d tensor: its values, 1-D, would not)
    mine = a._sf_values if a.dim() else torch.empty((), dtype=a.dtype, device="meta")
    common = _prims_common.elementwise_dtypes(
        mine, other, type_promotion_kind=_prims_common.ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT)[1]
    return (a if a._sf_values.dtype == common else a.to(common),
            other if other.dtype == common else other.to(common))


def _past_dead_fill(compute, a: SparseFillTensor, other):
    """compute(fill, other) where `other` is a tensor that needs a gradient
    and some element of a's fill covers no element: None otherwise. Such a
    fill element is in no dense element, so no gradient may pass through it,
    but the chain rule would send `other` 0 * d op(fill, other)/d other,
    NaN for a fill of inf or NaN, or where that derivative is undefined
    (pow at a fill of -1). So the op runs with 1 in its place (every
    derivative there is finite, and is multiplied by 0), and the result's
    fill shows the true op(fill, other) there, computed off the graph."""
    if not (isinstance(other, torch.Tensor) and other.requires_grad and torch.is_grad_enabled()) \
            or torch.compiler.is_compiling():
        return None
    covered = _covered(a) != 0
    if bool(covered.all()):
        return None
    f = a._live_fill()
    with torch.no_grad():
        _, shown = compute(a._sf_fill, other)
    if not bool(covered.any()):
        # no element at all: the fill leaves the graph whole (with a NaN
        # `other`, even op(1, other)'s second derivatives are NaN: pow)
        values, _ = compute(torch.ones_like(f), other)
        if f.requires_grad and shown.dtype.is_floating_point:
            # f stays a leaf of the result with a zero gradient, as in dense
            # (where's backward selects, it never multiplies by 0)
            shown = torch.where(covered, f.to(shown.dtype), shown)
        return values, shown
    values, fill = compute(torch.where(covered, f, torch.ones_like(f)), other)
    return values, torch.where(covered, fill, shown)


def _is_bool(x) -> bool:
    return isinstance(x, bool) or (isinstance(x, torch.Tensor) and x.dtype == torch.bool)


def _ask_torch(func, args, kwargs) -> None:
    """Let torch raise where it refuses an operand's dtype (``True - x``:
    torch does not subtract with bools): `func` on empty stand-ins of the
    tensors' dtypes, numbers as they are."""
    def stand_in(x):
        if not isinstance(x, torch.Tensor):
            return x
        zero_d = not isinstance(x, SparseFillTensor) and x.dim() == 0
        return torch.empty(() if zero_d else 0, dtype=x.dtype)
    if not args or not isinstance(args[0], torch.Tensor):
        return  # a reflected method called with its number first: torch checks nothing
    try:
        func(*[stand_in(x) for x in args], **{k: stand_in(v) for k, v in kwargs.items()})
    except (TypeError, AttributeError):  # not torch's dtype rule: no answer
        pass


def _only_half(operands):
    """The half dtype when every floating tensor operand has it, else None."""
    dtypes = {o.dtype for o in operands if isinstance(o, torch.Tensor) and o.dtype != torch.bool}
    return dtypes.pop() if len(dtypes) == 1 and dtypes <= {torch.float16, torch.bfloat16} \
        else None


def _call_dtype(func, operands) -> torch.dtype:
    """The dtype torch gives `func` on the operands: numbers as they are,
    tensors as empty stand-ins of their dtype and of rank 0 or 1 (a 0-d
    tensor promotes as such, a 0-d SparseFillTensor too)."""
    def stand_in(o):
        if not isinstance(o, torch.Tensor):
            return o
        return torch.empty(() if o.dim() == 0 else 0, dtype=o.dtype)
    return func(*[stand_in(o) for o in operands]).dtype


def _promoted_plain(func, operands):
    """The operands of a ternary op in the dtype torch computes in, where a
    strided operand of another dtype takes part: torch's own answer for
    empty stand-ins (a 0-d one stays 0-d, so its promotion rule holds:
    torch.lerp(x, y, tensor(0.5, float32)) stays float64), which also
    raises where torch refuses the mix (lerp's `end` of another dtype).
    A where's bool condition is left as it is; other bool operands take the
    common dtype (torch.lerp(bools, True, tensor(0.5)) computes in float)."""
    dtypes = {o.dtype for o in operands if isinstance(o, torch.Tensor)}
    if len(dtypes) < 2 or not any(isinstance(o, torch.Tensor) and
                                  not isinstance(o, SparseFillTensor) for o in operands):
        return operands
    common = _call_dtype(func, operands)
    if common == torch.bool:
        return operands
    keep_bool = "where" in getattr(func, "__name__", "")
    return [o.to(common) if isinstance(o, torch.Tensor) and o.dtype != common and
            not (keep_bool and o.dtype == torch.bool) else o for o in operands]


def _covered(a: SparseFillTensor) -> torch.Tensor:
    """1 where an element of a's fill covers some element, else 0 (fill's shape)."""
    f = a._sf_fill.detach()
    return _fill.live(torch.ones_like(f), a._sf_size, a.sparse_dim(), a._sf_values.shape[0],
                      a._coo_indices() if _fill.is_per_slice(f, a.dense_dim()) else None,
                      zero=True)
