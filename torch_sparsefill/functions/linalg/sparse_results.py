"""The products whose result is sparse in torch.sparse's docs: ``torch.smm``,
``torch.hspmm`` and ``torch.sspaddmm`` (and the ``Tensor.smm`` /
``Tensor.sspaddmm`` methods), for a SparseFillTensor @ a strided matrix.

torch stores, for fill 0, every column of each row of ``A`` that has a stored
element; the other rows are zero. With a fill, such a row of ``A @ D`` is the
fill's row times ``D``: one row vector for every such row when the fill is a
scalar or per column, so it becomes the result's fill (per column for
``smm``, the dense part for ``hspmm``'s hybrid result) and the result stays
exact and sparse. A per-row fill makes those rows differ, so every row is
stored (fill 0). The values come from the fill-aware product of RFC.md#products
(differentiable in A's values and fill and in ``D``).

Example::

    >>> A = sf.sparse_coo_tensor([[0], [1]], [2.], (3, 2), fill_value=1.)
    >>> torch.smm(A, torch.eye(2)).to_dense()
    tensor([[1., 2.],
            [1., 1.],
            [1., 1.]])
"""
from __future__ import annotations

import torch

from ..opmath import PRODUCTS, in_opmath
from ...tensor import args as _args
from ...tensor import SparseFillTensor, build

T = torch.Tensor

__all__: list = []


def _product_rows(A, mat, what):
    """(dense product A @ mat, the rows to store, the fill row or None)."""
    A = _args.sparse(A, what)
    if A.dim() != 2 or A.dense_dim() != 0:
        raise NotImplementedError(f"{what}: needs a 2-D SparseFillTensor without dense dims, "
                                  f"got size {tuple(A.shape)} with dense_dim {A.dense_dim()}")
    if not isinstance(mat, torch.Tensor) or isinstance(mat, SparseFillTensor) or \
            mat.layout != torch.strided or mat.dim() != 2:
        raise NotImplementedError(f"{what}: the second operand must be a strided 2-D tensor")
    product = A @ mat
    src = A._coalesced()
    m = A.shape[0]
    fill = src._sf_fill
    if fill.dim() == 2 and fill.shape[0] != 1:  # per row: rows without stored elements differ
        return product, torch.arange(m, device=A.device), None
    # Scalar or per column: every row without a stored element is the same
    # row of the product; it becomes the fill (read from the product, so the
    # result's to_dense() is the product exactly).
    rows = torch.unique(src._coo_indices()[0])
    empty = torch.ones(m, dtype=torch.bool, device=A.device)
    empty[rows] = False
    first = empty.nonzero()
    if first.numel() == 0:
        return product, rows, None
    fill_row = product[first[0, 0]]
    if not fill_row.requires_grad and not bool((fill_row != 0).any()):
        fill_row = None  # exactly 0: torch's fill
    return product, rows, fill_row


def smm(input, mat):
    """``torch.smm(A, D)``: ``A @ D`` as a sparse COO tensor (see the module)."""
    product, rows, fill_row = _product_rows(input, mat, "smm()")
    n = product.shape[1]
    indices = torch.stack([rows.repeat_interleave(n),
                           torch.arange(n, device=rows.device).repeat(rows.numel())])
    values = product[rows].reshape(-1)
    fill = product.new_zeros(()) if fill_row is None else fill_row.reshape(1, n)
    return build(torch.sparse_coo, product.shape, values, fill, indices=indices)


def hspmm(mat1, mat2):
    """``torch.hspmm(A, D)``: ``A @ D`` as a hybrid COO tensor, one sparse dim
    (rows) and the columns dense."""
    product, rows, fill_row = _product_rows(mat1, mat2, "hspmm()")
    fill = product.new_zeros(()) if fill_row is None else fill_row
    return build(torch.sparse_coo, product.shape, product[rows], fill, indices=rows[None])


@in_opmath(**PRODUCTS)  # input + product rounded once (as ATen)
def sspaddmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``torch.sspaddmm(S, A, D, beta=, alpha=)``: ``beta * S + alpha *
    smm(A, D)``, sparse, on the union of both patterns (RFC.md#elementwise). With
    ``beta == 0``, ``S`` is not read."""
    input = _args.sparse(input, "sspaddmm()")
    product = smm(mat1, mat2)
    if tuple(input.shape) != tuple(product.shape):
        raise RuntimeError(f"sspaddmm(): input of size {tuple(input.shape)} does not match "
                           f"the product's size {tuple(product.shape)}")
    scaled = product if alpha == 1 else product * alpha
    if beta == 0:
        return scaled
    return (input if beta == 1 else input * beta) + scaled


def _sspaddmm_method(self, mat1, mat2, *, beta=1, alpha=1):
    return sspaddmm(self, mat1, mat2, beta=beta, alpha=alpha)


ROUTES = {
    torch.smm: smm, T.smm: smm,
    torch.hspmm: hspmm,
    torch.sspaddmm: sspaddmm, T.sspaddmm: _sspaddmm_method,
}
