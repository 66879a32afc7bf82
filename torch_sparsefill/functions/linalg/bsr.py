"""Block-sparse @ strided products (RFC.md#through-csr): BSR @ dense, BSC
@ dense, dense @ BSR and dense @ BSC through one op,
``torch.ops.sparsefill.bsr_spmm`` (a BSR operand with a scalar fill times a
strided matrix; C core ``sf_bsr.c``, CUDA ``sf_cuda_bsr.cu``), and that op's
backward, written in differentiable ops so that the double backward is
exact.

A BSC tensor stores the BSR components of its transpose (RFC.md#compressed-components), so
``dense @ BSC`` is ``(BSR(A^T) @ dense^T)^T`` on its own components; BSC @
dense and dense @ BSR transpose the block pattern first (a counting sort of
the blocks, ``csr_transpose``).
"""
from __future__ import annotations

import torch

from ...ops import common as _common
from ...tensor import SparseFillTensor

_ops = torch.ops.sparsefill

__all__ = ["matmul"]

_FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


# ---- the products --------------------------------------------------------------------

def _transposed(crow, col, values, nbcols):
    """The BSR components of the transpose of the BSR operand (crow, col,
    values) with nbcols block columns."""
    crow_t, col_t, perm = _ops.csr_transpose(crow, col, nbcols)
    return crow_t, col_t, values.index_select(0, perm).transpose(1, 2)


def _bsr_of(A: SparseFillTensor, transpose: bool):
    """BSR components (crow, col, values) of A (transpose False) or of A^T,
    for a 2-D BSR or BSC tensor A."""
    r, c = A._sf_blocksize
    crow, col, values = A._sf_crow, A._sf_col, A._sf_values
    if (A._sf_layout == torch.sparse_bsc) == transpose:
        # BSR and A, or BSC and A^T: the stored components themselves.
        return (crow, col, values) if not transpose else (crow, col, values.transpose(1, 2))
    if A._sf_layout == torch.sparse_bsr:  # BSR, A^T
        return _transposed(crow, col, values, A.shape[1] // c)
    # BSC, A: transpose the BSR components of A^T (A.shape[0] // r block columns).
    return _transposed(crow, col, values.transpose(1, 2), A.shape[0] // r)


def _block_operand(A) -> bool:
    return (type(A) is SparseFillTensor and A._sf_layout in (torch.sparse_bsr, torch.sparse_bsc)
            and A.dim() == 2 and A.dense_dim() == 0 and A._sf_fill.numel() == 1
            and A.dtype in _FLOATS)


def _strided_operand(X, like: SparseFillTensor) -> bool:
    return (type(X) is torch.Tensor and X.layout == torch.strided and X.dim() in (1, 2)
            and X.dtype == like.dtype and X.device == like.device)


def matmul(a, b, vectors: bool) -> "torch.Tensor | None":
    """``a @ b`` for a 2-D BSR/BSC tensor with one fill value and a strided
    matrix (or vector, when `vectors`) of its dtype and device, on either
    side, through ``sparsefill::bsr_spmm``; None for anything else (the
    general route computes it, or raises torch's error for bad shapes).

    Example::

        >>> A = sf.sparse_bsr_tensor([0, 1], [0], torch.ones(1, 2, 2), (2, 2), fill_value=3.)
        >>> _bsr.matmul(A, torch.eye(2), True)
        tensor([[1., 1.],
                [1., 1.]])
    """
    if _common.transformed():
        return None  # bsr_spmm has a backward only: the route through CSR has a jvp too
    if _block_operand(a) and _strided_operand(b, a) and (vectors or b.dim() == 2) \
            and b.shape[0] == a.shape[1]:
        crow, col, values = _bsr_of(a, transpose=False)
        x = b if b.dim() == 2 else b.unsqueeze(1)
        out = _ops.bsr_spmm(crow, col, values, a._sf_fill, x, a.shape[1])
        return out if b.dim() == 2 else out.squeeze(1)
    if _block_operand(b) and _strided_operand(a, b) and (vectors or a.dim() == 2) \
            and a.shape[-1] == b.shape[0]:
        crow, col, values = _bsr_of(b, transpose=True)
        x = a.t() if a.dim() == 2 else a.unsqueeze(1)
        out = _ops.bsr_spmm(crow, col, values, b._sf_fill, x, b.shape[0])
        return out.t() if a.dim() == 2 else out.squeeze(1)
    return None
