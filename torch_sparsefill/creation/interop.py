"""Moving data between SparseFillTensor and scipy.sparse / pydata sparse.

scipy.sparse has no fill value: ``from_scipy`` takes one, ``to_scipy``
returns it beside the matrix. pydata sparse (``sparse.COO``, ``sparse.GCXS``)
has a scalar ``fill_value`` that travels both ways. Neither library is a
dependency: each is imported when first used.
"""
from __future__ import annotations

import torch

from .constructors import (sparse_bsr_tensor, sparse_coo_tensor, sparse_csc_tensor,
                           sparse_csr_tensor)
from ..tensor import SparseFillTensor
from ..tensor import indefinite as _indefinite

__all__ = ["from_scipy", "to_scipy", "from_pydata", "to_pydata"]


def _numpy(t: torch.Tensor):
    return t.detach().cpu().numpy()


def _scalar_fill(A: SparseFillTensor, where: str):
    if A.dense_dim() != 0:
        raise NotImplementedError(f"{where}: hybrid tensors (dense_dim={A.dense_dim()}) have no "
                                  f"counterpart there")
    if A.is_indefinite():  # scipy's explicit entries; the state travels as the fill
        return _indefinite.indefinite
    if A._has_per_slice_fill():
        raise NotImplementedError(f"{where}: a per-slice fill of shape "
                                  f"{tuple(A._fill_value().shape)} has no counterpart there "
                                  f"(only one scalar fill)")
    return A._fill_value().detach().cpu().item()


# scipy formats whose (indptr, indices, data) are ours as they are
_COMPRESSED = {"csr": sparse_csr_tensor, "csc": sparse_csc_tensor, "bsr": sparse_bsr_tensor}


def from_scipy(m, fill_value=0, *, layout=None, dtype=None, device=None,
               requires_grad=False) -> SparseFillTensor:
    """A SparseFillTensor from a scipy.sparse matrix or array.

    scipy stores no fill: the elements it leaves out take ``fill_value``.
    CSR, CSC and BSR input keep their layout (sorted, duplicates summed; a
    BSR block is stored whole, its zeros included, as in scipy), anything
    else gives COO, unless ``layout`` says otherwise.

    Example::

        >>> import scipy.sparse
        >>> sf.from_scipy(scipy.sparse.eye_array(2, format="csr"), fill_value=-1.).to_dense()
        tensor([[ 1., -1.],
                [-1.,  1.]], dtype=torch.float64)
    """
    import numpy as np
    import scipy.sparse

    if not scipy.sparse.issparse(m):
        raise TypeError(f"from_scipy expects a scipy.sparse matrix or array, got {type(m).__name__}")
    kwargs = dict(fill_value=fill_value, dtype=dtype, device=device, requires_grad=requires_grad)
    if m.format in _COMPRESSED:
        if not m.has_canonical_format:
            m = m.copy()
            m.sum_duplicates()  # also sorts each row's (column's) indices
        out = _COMPRESSED[m.format](torch.from_numpy(m.indptr.astype(np.int64)),
                                    torch.from_numpy(m.indices.astype(np.int64)),
                                    torch.from_numpy(np.ascontiguousarray(m.data)), m.shape,
                                    **kwargs)
    else:
        coo = m.tocoo()
        indices = torch.from_numpy(np.stack([coo.row, coo.col]).astype(np.int64))
        out = sparse_coo_tensor(indices, torch.from_numpy(np.ascontiguousarray(coo.data)),
                                coo.shape, **kwargs)
    return out if layout is None else out.to_sparse(layout=layout)


def _element_layout(A: SparseFillTensor) -> SparseFillTensor:
    """CSC, BSR and BSC tensors as CSR (every element of a block kept);
    batched compressed ones as COO (neither library has batches)."""
    A._check_edits()
    if A.layout != torch.sparse_coo and A._batch_dim():
        return A.to_sparse_coo()
    return A if A.layout in (torch.sparse_coo, torch.sparse_csr) else A.to_sparse_csr()


def to_scipy(A: SparseFillTensor, *, format=None):
    """``(matrix, fill)``: the stored elements as a scipy.sparse array (COO for
    COO tensors, CSR for CSR ones, or ``format``) and the fill as a Python
    number, because scipy has nowhere to keep it. CSC gives CSC and BSR gives
    BSR (same blocksize); BSC, which scipy lacks, gives CSR.

    Example::

        >>> m, fill = sf.sparse_coo_tensor([[0], [1]], [2.], (2, 2), fill_value=7.).to_scipy()
        >>> m.toarray(), fill
        (array([[0., 2.], [0., 0.]], dtype=float32), 7.0)
    """
    import scipy.sparse

    fill = _scalar_fill(A, "to_scipy")
    if A.layout == torch.sparse_csc and format is None:
        format = "csc"
    if A.layout == torch.sparse_bsr and A.dim() == 2:
        A._check_edits()
        m = scipy.sparse.bsr_array((_numpy(A.values()), _numpy(A.col_indices()),
                                    _numpy(A.crow_indices())), shape=tuple(A.shape))
        return (m if format is None else m.asformat(format)), fill
    A = _element_layout(A)
    if len(A.shape) != 2:
        raise NotImplementedError(f"to_scipy: scipy.sparse is 2-D, this tensor has shape "
                                  f"{tuple(A.shape)}")
    if A.layout == torch.sparse_csr:
        m = scipy.sparse.csr_array((_numpy(A.values()), _numpy(A.col_indices()),
                                    _numpy(A.crow_indices())), shape=tuple(A.shape))
    else:
        B = A.coalesce()
        idx = _numpy(B.indices())
        m = scipy.sparse.coo_array((_numpy(B.values()), (idx[0], idx[1])), shape=tuple(A.shape))
    return (m if format is None else m.asformat(format)), fill


def from_pydata(s, *, layout=None, device=None, requires_grad=False) -> SparseFillTensor:
    """A SparseFillTensor from a pydata ``sparse.COO`` or ``sparse.GCXS``,
    keeping its ``fill_value``. A 2-D GCXS compressed along rows becomes CSR.

    Example::

        >>> import sparse
        >>> sf.from_pydata(sparse.full((2,), 3.)).fill_value()
        tensor(3., dtype=torch.float64)
    """
    import numpy as np
    import sparse

    kwargs = dict(device=device, requires_grad=requires_grad)
    if isinstance(s, sparse.GCXS) and s.ndim == 2 and tuple(s.compressed_axes) == (0,):
        data, indices, indptr = s.data, s.indices, s.indptr
        fill = torch.tensor(s.fill_value, dtype=torch.from_numpy(data[:0]).dtype)
        out = sparse_csr_tensor(torch.from_numpy(indptr.astype(np.int64)),
                                torch.from_numpy(indices.astype(np.int64)),
                                torch.from_numpy(np.ascontiguousarray(data)), s.shape,
                                fill_value=fill, **kwargs)
    elif isinstance(s, (sparse.COO, sparse.GCXS)):
        coo = s.tocoo() if isinstance(s, sparse.GCXS) else s
        data = np.ascontiguousarray(coo.data)
        fill = torch.tensor(coo.fill_value, dtype=torch.from_numpy(data[:0]).dtype)
        out = sparse_coo_tensor(torch.from_numpy(coo.coords.astype(np.int64)),
                                torch.from_numpy(data), coo.shape, fill_value=fill, **kwargs)
    else:
        raise TypeError(f"from_pydata expects sparse.COO or sparse.GCXS, got {type(s).__name__}")
    return out if layout is None else out.to_sparse(layout=layout)


def to_pydata(A: SparseFillTensor):
    """The same tensor as pydata ``sparse.COO`` (COO layout) or ``sparse.GCXS``
    (CSR layout), fill included.

    Example::

        >>> sf.full((2, 2), 4.).to_pydata().todense()
        array([[4., 4.],
               [4., 4.]], dtype=float32)
    """
    if A.is_indefinite():  # pydata's fill_value is a number: it has no "no value"
        raise NotImplementedError("to_pydata(): this tensor's fill is sf.indefinite, which "
                                  "pydata sparse cannot hold; A.to_dense(fill=v) or "
                                  "A.to_scipy() (explicit entries) keep the stored elements")
    import sparse

    fill = _scalar_fill(A, "to_pydata")
    A = _element_layout(A)
    if A.layout == torch.sparse_csr:
        return sparse.GCXS((_numpy(A.values()), _numpy(A.col_indices()), _numpy(A.crow_indices())),
                           shape=tuple(A.shape), compressed_axes=(0,), fill_value=fill)
    B = A.coalesce()
    return sparse.COO(_numpy(B.indices()), _numpy(B.values()), shape=tuple(A.shape),
                      fill_value=fill, has_duplicates=False, sorted=True)
