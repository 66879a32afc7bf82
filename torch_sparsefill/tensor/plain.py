"""Plain tensors, the hot path's operands (docs/design.md#hot-path): what makes a
SparseFillTensor plain, and a result on a plain tensor's pattern made without
build's general case.
"""
from __future__ import annotations

import torch

from .sparse_fill_tensor import FACTS, SparseFillTensor

__all__ = ["is_plain", "on_pattern", "edited"]

_make_wrapper = torch.Tensor._make_wrapper_subclass
# How many attributes SparseFillTensor.__new__ sets (on_pattern copies them;
# so does _C.hot_on's result, made the same way: aten_ext/ops/hot/,
# bound by functions/elementwise/fast.py).
_N_FACTS = len(FACTS)
_COO, _CSR = torch.sparse_coo, torch.sparse_csr


def is_plain(a, per_slice: bool = False) -> bool:
    """Whether `a` is a SparseFillTensor of the simplest kind, the one the
    hot path serves: coalesced COO or unbatched CSR, no dense part, a 0-d
    fill that needs no autograd cut (so ``a._live_fill()`` is ``a._sf_fill``),
    index components not edited since they were checked (edits.py: an
    edited tensor takes the routes, which check it).
    Read from the components on every call (they change in place).
    `per_slice`: a matrix with a per-row (m, 1) or per-column (1, k) fill
    qualifies too (the products' fast path reads those).

    Example::

        >>> is_plain(sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=2.))
        True
    """
    if type(a) is not SparseFillTensor or not a._sf_coalesced:
        return False
    layout, f = a._sf_layout, a._sf_fill
    fill_ok = f.dim() == 0 or (per_slice and f.dim() == 2 and len(a._sf_size) == 2 and
                               (f.shape[1] == 1 or f.shape[0] == 1))
    return ((layout is _COO or (layout is _CSR and a._sf_crow.dim() == 1))
            and a._sf_values.dim() == 1 and fill_ok
            and not f.requires_grad and not a._sf_indefinite
            and not edited(a))


def edited(a: SparseFillTensor) -> bool:
    """Whether a COO or CSR tensor's index components moved since they were
    last checked (edits.py's stamp, inlined for the hot path): then the
    routes, which check them, take the call.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,))
        >>> A._indices()[0, 0] = 2
        >>> edited(A)
        True
    """
    facts = a.__dict__  # one lookup; the class's long MRO makes each attribute slower
    try:
        if facts["_sf_layout"] is _COO:
            return facts["_sf_indices"]._version != facts["_sf_checked"]
        return facts["_sf_crow"]._version + facts["_sf_col"]._version != facts["_sf_checked"]
    except RuntimeError:  # inference tensors track no version (edits.stamp)
        return False


def on_pattern(a: SparseFillTensor, values: torch.Tensor, fill: torch.Tensor
               ) -> SparseFillTensor:
    """``a._with(values, fill)`` for a plain `a` (:func:`is_plain`) and an
    op's 1-d `values` and 0-d `fill`: the same tensor, made without build's
    general case (no layout or fill form to work out, every fact a's).

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=2.)
        >>> on_pattern(A, A.values() * 3, A._fill_value() * 3).to_dense()
        tensor([3., 6., 6.])
    """
    out = _make_wrapper(SparseFillTensor, a._sf_size, dtype=values.dtype, device=values.device,
                        layout=a._sf_layout, dispatch_layout=True)
    facts = a.__dict__
    if len(facts) == _N_FACTS:
        # a holds __new__'s attributes alone (no cache, nothing a user set):
        # a copy of its dict with three entries replaced is the result's,
        # cheaper than building one (its layout, size and pattern are a's;
        # plain: coalesced, no blocksize).
        facts = facts.copy()
        facts["_sf_values"], facts["_sf_fill"], facts["_sf_coalesced_flag"] = values, fill, True
        out.__dict__ = facts
        return out
    out.__dict__.update(zip(FACTS, (a._sf_layout, a._sf_size, a._sf_indices, a._sf_crow,
                                    a._sf_col, values, fill, True, True, None, a._sf_checked)))
    return out
