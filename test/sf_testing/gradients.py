"""Gradients against the dense computation: a SparseFillTensor's values get
the dense gradient at their positions, its fill the sum of the dense
gradient over the unspecified elements.

    >>> idx, v, f, size = leaf_parts(7, 0.7, torch.sparse_csr, "real")
    >>> fn = lambda v, f: torch.exp(build(torch.sparse_csr, idx, v, f, size)).to_dense()
    >>> torch.autograd.gradcheck(fn, (v, f))
    >>> check_dense_gradients(torch.exp, torch.exp, random_tensor("random", 0.7))
"""
from __future__ import annotations

import torch

import torch_sparsefill as sf

from .tensors import EXTRA_LAYOUTS, random_tensor


def leaf_parts(seed, fill, layout, domain, pattern="random"):
    """(index tensors, values, fill, size) of random_tensor(pattern, fill,
    layout, seed=seed, domain=domain), values and fill as leaves requiring
    grad; `build(layout, *those)` makes the tensor again.

        >>> idx, v, f, size = leaf_parts(7, 0.7, torch.sparse_coo, "real")
    """
    A = random_tensor(pattern, fill, layout, seed=seed, domain=domain)
    if layout in (torch.sparse_csr, torch.sparse_bsr):
        idx = (A.crow_indices(), A.col_indices())
    elif layout in (torch.sparse_csc, torch.sparse_bsc):
        idx = (A.ccol_indices(), A.row_indices())
    else:
        A = A.coalesce()
        idx = (A.indices(),)
    v = A.values().detach().clone().requires_grad_()
    f = A._fill_value().detach().clone().requires_grad_()
    return idx, v, f, A.shape


def build(layout, idx, v, f, size):
    """The SparseFillTensor of leaf_parts' components, through the public
    constructors (so gradients flow through them too).

        >>> build(torch.sparse_coo, (indices,), values, fill, (5, 7))
    """
    if layout != torch.sparse_coo:
        return sf.sparse_compressed_tensor(*idx, v, size, layout=layout, fill_value=f)
    return sf.sparse_coo_tensor(*idx, v, size, fill_value=f)


def check_dense_gradients(fn_sparse, fn_dense, A: sf.SparseFillTensor):
    """Gradients through the sparse path equal the dense computation's:
    values get the dense gradient at their positions, the fill gets its sum
    over the unspecified elements, and A.grad.to_dense() is the dense
    gradient when that is constant over the unspecified elements.

        >>> check_dense_gradients(torch.sin, torch.sin, random_tensor("random", 0.7))
    """
    A = (A.coalesce() if A.layout == torch.sparse_coo else A).detach().requires_grad_()
    fn_sparse(A).to_dense().sum().backward()
    D = A.to_dense().detach().requires_grad_()
    fn_dense(D).sum().backward()
    stored = torch.zeros(A.shape[:2], dtype=torch.bool)
    idx = A._coo_indices()
    stored[idx[0], idx[1]] = True
    grad = A._values().grad
    if A.layout in EXTRA_LAYOUTS:  # the gradient in CSR order, like idx
        grad = A._with(grad, torch.zeros_like(A._fill_value()))._to_csr()._values()
    torch.testing.assert_close(grad, D.grad[idx[0], idx[1]])
    expected_fill = D.grad[~stored].sum(0)
    torch.testing.assert_close(A._fill_value().grad.expand_as(expected_fill), expected_fill)
