"""torch.sparse's functions documented over the *specified* elements
(RFC.md#stored-only-ops): ``torch.sparse.softmax``/``log_softmax``
("unspecified entries are ignored") and ``torch.sparse.mm(A, x, reduce=
'mean'|'amax'|'amin')``. On a tensor with a defined fill they compute only
where that documented meaning equals the dense one (softmax at fill -inf,
``reduce='sum'``: the product); elsewhere they are refused by
:func:`refuse`, which names the plain function for the dense meaning and the
indefinite fill for the stored-only one.
"""
from __future__ import annotations

__all__: list = []


def refuse(name: str, why: str, dense_call: str):
    """The refusal of a stored-only function `name` on a defined fill.

    Example::

        >>> refuse("torch.sparse.mm(A, x, reduce='mean')", "the fill is 0.5",
        ...        "A @ x / A.shape[1]")
        Traceback (most recent call last):
        NotImplementedError: torch_sparsefill: torch.sparse.mm(A, x, reduce='mean') ...
    """
    raise NotImplementedError(
        f"torch_sparsefill: {name} is documented over the specified elements only (the "
        f"unspecified ones left out), which on a SparseFillTensor with a defined fill is not "
        f"the dense meaning ({why}); for the dense meaning, the fill taking part, call "
        f"{dense_call}; for the stored-only meaning give the tensor the indefinite fill "
        f"(A.to_indefinite())")
