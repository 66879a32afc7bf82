"""The working form of the shape, indexing and concatenation ops (functions/shape/reshape.py,
functions/shape/indexing.py, functions/shape/concat.py; RFC.md#shape-and-indexing).

Every such op is composed of index arithmetic on the coalesced COO (or CSR)
components and ATen ops on ``values`` and the fill, so autograd reaches
``values`` and the fill by itself; no op there writes a backward formula.

The fill is handled in one uniform way: it is first written as a full-rank
tensor ``F`` that broadcasts to the whole size (_fill.full_rank: a dense-part
fill of shape ``(3,)`` on a ``(5, 7, 3)`` tensor is ``(1, 1, 3)``; a
per-slice fill already is one), the op is applied to ``F`` the way it is
applied to a dense tensor (size-1 dims stay size 1: they broadcast), and the
result is stored in the canonical form (_fill.canonical). So a per-slice fill
is sliced, permuted and concatenated along with the tensor.

Layouts: a COO input gives COO. A CSR input gives CSR when the result still
has two sparse dims and COO otherwise (`build`). When indexing removes the
last sparse dim the result is strided (a 0-d tensor for a single element),
holding the fill where the element is unspecified; its gradient reaches the
fill.
"""
from __future__ import annotations

import torch

from ...tensor import fill as _fill
from ...tensor import SparseFillTensor, build

_ops = torch.ops.sparsefill

__all__: list = []


class Parts:
    """Coalesced COO components of a tensor, its fill as a full-rank tensor
    ``F`` broadcasting to ``size``, and the layout the result should get."""

    __slots__ = ("indices", "values", "F", "size", "layout")

    def __init__(self, indices, values, F, size, layout):
        self.indices, self.values, self.F = indices, values, F
        self.size, self.layout = tuple(int(s) for s in size), layout

    @property
    def sparse_dim(self) -> int:
        return self.indices.shape[0]

    @property
    def dense_shape(self) -> tuple:
        return self.size[self.sparse_dim:]


def full_fill(t: SparseFillTensor) -> torch.Tensor:
    """t's fill as a tensor of t's rank that broadcasts to t's size."""
    return _fill.full_rank(t._sf_fill, len(t._sf_size))


def parts(t: SparseFillTensor) -> Parts:
    """The working form of `t` (coalesced first)."""
    src = t._coalesced()
    return Parts(src._coo_indices(), src._sf_values, full_fill(t), t._sf_size, t.layout)


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr() if t.numel() else 0


def own(t: torch.Tensor, inputs) -> torch.Tensor:
    """t, or a copy of it when it shares memory with an input's values or
    fill. Results are never views: writing into one in place (an in-place op,
    ``_fill_value().fill_()``) must not change the input, whose fill covers
    elements the result does not have."""
    if torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active():
        return t.clone()  # a traced or wrapped tensor has no storage to compare: never alias
    ptr = _storage(t)
    if ptr and any(ptr in (_storage(x._sf_values), _storage(x._sf_fill)) for x in inputs):
        return t.clone()
    return t


def finish(p: Parts, *inputs, values_view=False):
    """The result tensor of parts `p` (CSR when asked for and possible).
    Values and fill that alias one of `inputs` are copied (see `own`), except
    the values when `values_view`."""
    values = p.values if values_view else own(p.values, inputs)
    return build(p.layout, p.size, values, own(p.F, inputs), indices=p.indices)


def strided(p: Parts) -> torch.Tensor:
    """A tensor with no sparse dim left (0 or 1 stored element) as a strided
    tensor: the stored dense part, or the fill. gather_with_fill sends the
    gradient of an unspecified result to the fill."""
    assert p.sparse_dim == 0
    src = torch.tensor([0 if p.values.shape[0] else -1], dtype=torch.int64,
                       device=p.values.device)
    return _ops.gather_with_fill(p.values, p.F, src)[0]


def sort(indices, values, size):
    """Indices (unique) and values brought into coalesced row-major order."""
    if indices.shape[0] <= 1 and values.shape[0] <= 1:
        return indices, values
    return _ops.coo_coalesce(indices, values, list(size[: indices.shape[0]]))


def fill_index(F, d, fn):
    """Apply an indexing fn along dim d of F, unless F broadcasts there."""
    return F if F.shape[d] == 1 else fn(F)
