"""``torch.sparse.mm(A, x, reduce=...)`` of a SparseFillTensor A
(RFC.md#sparse-mm-reduce, RFC.md#stored-only-ops).

torch documents ``reduce=`` over the stored elements of each row. With a
defined fill that is the dense meaning only for ``'sum'`` (the product,
any fill); ``'mean'``, ``'amax'`` and ``'amin'`` would leave the fill out
(or, counting it, silently differ from torch's own sparse tensors, as a
neighbourhood mean does), so they are refused, naming ``A @ x`` and ``amax``
along a dim for the dense meaning and the indefinite fill for the
stored-only one (functions/stored_only.py).

Example::

    >>> A = sf.sparse_coo_tensor([[0], [0]], [-5.], (1, 2), fill_value=1.)
    >>> torch.sparse.mm(A, torch.tensor([[2.], [3.]]))
    tensor([[-7.]])
"""
from __future__ import annotations

import torch

from .. import stored_only
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
    if not isinstance(mat1, SparseFillTensor) or isinstance(mat2, SparseFillTensor):
        raise NotImplementedError(f"torch_sparsefill: {fname} with reduce={reduce!r} takes a "
                                  f"sparse mat1 and a strided mat2 (as torch does)")
    return _defined_fill_reduce(mat1, reduce)


def _defined_fill_reduce(A: SparseFillTensor, reduce: str):
    """reduce='mean'|'amax'|'amin' of a tensor with a defined fill: torch's
    stored-only meaning is not the dense one at any fill, so refused."""
    dense = {"mean": "A @ x / A.shape[1] (the mean over all columns)",
             "amax": "(A.to_dense()[:, :, None] * x).amax(1) (amax along a dim)",
             "amin": "(A.to_dense()[:, :, None] * x).amin(1) (amin along a dim)"}[reduce]
    stored_only.refuse(f"torch.sparse.mm(A, x, reduce={reduce!r})",
                       f"the fill {_fill_text(A)} would be left out", dense)


def _fill_text(A: SparseFillTensor) -> str:
    f = A._sf_fill.detach()
    return str(f.item()) if f.numel() == 1 else f"of shape {tuple(f.shape)}"


ROUTES = {torch.sparse.mm: _sparse_mm}
