"""The graph functions' operands and results (RFC.md#indefinite-fill).

An operand is an indefinite SparseFillTensor (its stored elements are
present, the rest absent) or a strided tensor (every element present); a
tensor with a defined fill is refused (``A.to_indefinite()`` forgets the
fill). Inside, a 1-D or 2-D operand is its present elements as sorted
linear keys (row-major: ``i * ncols + j``) and their values.

Example::

    >>> A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [2., 3.], (2, 2), fill_value=sf.indefinite)
    >>> entries(A, "A").keys
    tensor([1, 2])
"""
from __future__ import annotations

import torch

from ..tensor import SparseFillTensor, build
from ..tensor import indefinite as _indefinite

__all__ = ["Entries", "entries", "result", "result_csr", "check_same_shape", "scalar_result"]


class Entries:
    """A 1-D or 2-D operand's present elements: `size`, sorted unique linear
    `keys`, `values` (differentiable), and `layout` (the result's layout
    when this operand leads)."""

    __slots__ = ("size", "keys", "values", "layout")

    def __init__(self, size, keys, values, layout):
        self.size, self.keys, self.values, self.layout = tuple(size), keys, values, layout

    @property
    def ncols(self) -> int:
        return self.size[1] if len(self.size) == 2 else 1

    def rows(self) -> torch.Tensor:
        return torch.div(self.keys, self.ncols, rounding_mode="floor") \
            if len(self.size) == 2 else self.keys

    def cols(self) -> torch.Tensor:
        return self.keys % self.ncols if len(self.size) == 2 else torch.zeros_like(self.keys)

    def nse(self) -> int:
        return self.keys.shape[0]


def entries(A, name: str, *, dims=(1, 2)) -> Entries:
    """`A` as :class:`Entries`, or a clear error naming `name`."""
    if isinstance(A, SparseFillTensor):
        if not A.is_indefinite():
            raise ValueError(f"{name}: a SparseFillTensor with a defined fill; the graph "
                             f"functions take indefinite tensors (A.to_indefinite() forgets "
                             f"the fill: the stored elements are present, the rest absent)")
        if A.dim() not in dims or A.dense_dim() or A._batch_dim():
            raise ValueError(f"{name}: expected a {' or '.join(f'{d}-D' for d in dims)} tensor "
                             f"without dense or batch dims, got shape {tuple(A.shape)}")
        layout = A.layout if A.layout in (torch.sparse_coo, torch.sparse_csr) else \
            torch.sparse_csr
        src = A.to_sparse_coo()._coalesced()
        idx = src._sf_indices
        keys = idx[0] * A.shape[1] + idx[1] if A.dim() == 2 else idx[0]
        return Entries(A.shape, keys.contiguous(), src._sf_values, layout)
    if isinstance(A, torch.Tensor) and A.layout == torch.strided:
        if A.dim() not in dims:
            raise ValueError(f"{name}: expected a {' or '.join(f'{d}-D' for d in dims)} tensor, "
                             f"got shape {tuple(A.shape)}")
        return Entries(A.shape, torch.arange(A.numel(), device=A.device), A.reshape(-1),
                       torch.sparse_csr if A.dim() == 2 else torch.sparse_coo)
    raise TypeError(f"{name}: expected an indefinite SparseFillTensor or a strided tensor, got "
                    f"{type(A).__name__}"
                    + (f" of layout {A.layout}" if isinstance(A, torch.Tensor) else ""))


def result(size, keys: torch.Tensor, values: torch.Tensor, layout=torch.sparse_coo
           ) -> SparseFillTensor:
    """The indefinite tensor of `size` with `values` at the sorted unique
    linear `keys`: CSR when `layout` is and the size is 2-D, else COO."""
    size = tuple(size)
    if len(size) == 2:
        indices = torch.stack([torch.div(keys, size[1], rounding_mode="floor"), keys % size[1]]) \
            if size[1] else keys.new_zeros((2, 0))
    else:
        indices = keys.reshape(1, -1)
        layout = torch.sparse_coo
    out = build(layout if layout == torch.sparse_csr else torch.sparse_coo, size, values,
                _indefinite.placeholder(values.dtype, values.device), indices=indices)
    return _indefinite.mark(out)


def result_csr(size, crow: torch.Tensor, col: torch.Tensor, values: torch.Tensor
               ) -> SparseFillTensor:
    """The indefinite CSR tensor of a 2-D `size` from its components (rows'
    columns sorted, as a native kernel writes them).

    Example::

        >>> result_csr((2, 2), torch.tensor([0, 1, 1]), torch.tensor([1]), torch.tensor([3.])
        ...            ).to_dense(fill=0.)
        tensor([[0., 3.],
                [0., 0.]])
    """
    out = build(torch.sparse_csr, tuple(size), values,
                _indefinite.placeholder(values.dtype, values.device), crow=crow, col=col)
    return _indefinite.mark(out)


def scalar_result(values: torch.Tensor):
    """A full reduction's answer: its 0-d value, or sf.indefinite when nothing
    was present."""
    return values.reshape(()) if values.numel() else _indefinite.indefinite


def check_same_shape(a: Entries, b: Entries, what: str):
    if a.size != b.size:
        raise ValueError(f"{what}: the operands' shapes differ: {a.size} and {b.size}")


def lookup(keys: torch.Tensor, sorted_keys: torch.Tensor):
    """(found, position): whether each of `keys` is in `sorted_keys`, and
    where (clamped where not)."""
    if sorted_keys.numel() == 0:
        return torch.zeros_like(keys, dtype=torch.bool), torch.zeros_like(keys)
    pos = torch.searchsorted(sorted_keys, keys).clamp_(max=sorted_keys.shape[0] - 1)
    return sorted_keys.index_select(0, pos) == keys, pos
