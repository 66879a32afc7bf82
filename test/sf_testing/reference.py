"""The dense side of the oracle: `op(A).to_dense()` must equal `op(dense)`.

`dense(x)` is the library's own to_dense() (what a user compares); `dense_of`
builds the strided tensor from the components alone, so that a test of a
conversion or of a per-slice fill does not check the library against itself.

    >>> dense(torch.exp(A))            # a SparseFillTensor's to_dense(), a tensor as is
    >>> dense_of(A)                    # independent of to_dense(), differentiable
    >>> stored_mask(A)                 # True where A stores an element
"""
from __future__ import annotations

import torch

import torch_sparsefill as sf


def dense(x, *, any_sparse=False):
    """x.to_dense() for a SparseFillTensor, x itself otherwise (a strided
    result, a number): dense(sf.full((2,), 3.)) is tensor([3., 3.]). With
    `any_sparse`, torch's own sparse tensors are densified too (the tests
    that run the same code on both); without, a torch sparse result stays
    as it is and fails a comparison with a strided tensor."""
    if isinstance(x, sf.SparseFillTensor) or (
            any_sparse and isinstance(x, torch.Tensor) and x.layout != torch.strided):
        return x.to_dense()
    return x


def dense_of(A) -> torch.Tensor:
    """Strided equivalent of A built from its components, differentiable
    w.r.t. values and fill: the fill broadcast over the size (per-slice fills
    included), the (summed) stored values at their indices. COO (coalesced
    or not) and CSR are read directly, CSC as its CSR, the other layouts
    through their COO form. Anything else is returned as is.

        >>> dense_of(sf.sparse_coo_tensor([[0]], [2.], (3,), fill_value=1.))
        tensor([2., 1., 1.])
    """
    if not isinstance(A, sf.SparseFillTensor):
        return A
    if A.layout == torch.sparse_csc and not A._batch_dim():
        return dense_of(A._to_csr())  # the CSR of the same matrix, read as such
    size = tuple(A.shape)
    values, fill = A._values(), A._fill_value()
    if A.layout == torch.sparse_csr and not A._batch_dim():
        rows = torch.repeat_interleave(torch.arange(size[0]), A.crow_indices().diff())
        indices = torch.stack([rows, A.col_indices()])
        s = 2
    elif A.layout == torch.sparse_coo:
        indices, s = A._indices(), A.sparse_dim()
    else:  # block and batched layouts: a stored element per COO index
        B = A.to_sparse_coo()
        indices, values, s = B._indices(), B._values(), B.sparse_dim()
    base = fill.expand(size) if fill.dim() > len(size) - s else \
        fill.expand(size[s:]).expand(size)
    if s == 0:
        if values.shape[0] == 0:
            return base.clone()
        return values.sum(0) + base * 0
    stored = torch.zeros(size[:s], dtype=torch.bool)
    stored[tuple(indices)] = True
    vals = torch.zeros(size, dtype=values.dtype).index_put(tuple(indices), values,
                                                           accumulate=True)
    return torch.where(stored.view(size[:s] + (1,) * (len(size) - s)), vals, base)


def stored_mask(A) -> torch.Tensor:
    """A bool tensor over A's sparse dims (batch dims included): True where A
    stores an element.

        >>> stored_mask(sf.sparse_coo_tensor([[1]], [2.], (3,)))
        tensor([False,  True, False])
    """
    idx = A._coo_indices() if A.layout != torch.sparse_coo else A.coalesce()._indices()
    mask = torch.zeros(A.shape[:idx.shape[0]], dtype=torch.bool)
    mask[tuple(idx)] = True
    return mask


def sparse_from_parts(indices, values, fill, size) -> sf.SparseFillTensor:
    """The COO SparseFillTensor of components, the twin of dense_from_parts
    (a program written over a builder runs on both):
    sparse_from_parts(torch.tensor([[0], [1]]), v, f, (2, 3))."""
    return sf.sparse_coo_tensor(indices, values, size, fill_value=fill)


def dense_from_parts(indices, values, fill, size) -> torch.Tensor:
    """The strided tensor of COO components (unique indices): the fill
    everywhere, the values at their indices; differentiable in values and
    fill, under torch.func transforms too.

        >>> dense_from_parts(torch.tensor([[0], [1]]), torch.tensor([5.]),
        ...                  torch.tensor(1.), (2, 2))
        tensor([[1., 5.],
                [1., 1.]])
    """
    return fill.expand(size).index_put(tuple(indices), values)
