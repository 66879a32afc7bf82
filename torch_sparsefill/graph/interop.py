"""python-graphblas and indefinite tensors (RFC.md#indefinite-fill): a
GraphBLAS Matrix or Vector holds exactly an indefinite tensor (present
elements, no fill). python-graphblas is an optional dependency, imported
when first used.

Example::

    >>> import graphblas as gb
    >>> sf.from_graphblas(gb.Vector.from_coo([2], [1.], size=3)).nse()
    1
"""
from __future__ import annotations

import numpy as np
import torch

from ..creation import sparse_coo_tensor
from ..tensor.indefinite import indefinite
from .operands import entries

__all__ = ["from_graphblas", "to_graphblas"]


def from_graphblas(M, *, layout=None, device=None):
    """The indefinite tensor of a python-graphblas Matrix (CSR by default)
    or Vector (COO): its stored elements present, the rest absent.

    Example::

        >>> import graphblas as gb
        >>> M = gb.Matrix.from_coo([0, 1], [1, 0], [2., 3.], nrows=2, ncols=2)
        >>> sf.from_graphblas(M).to_dense(fill=0.)
        tensor([[0., 2.],
                [3., 0.]], dtype=torch.float64)
    """
    import graphblas as gb
    if isinstance(M, gb.Matrix):
        rows, cols, values = M.to_coo()
        indices = np.stack([rows, cols]).astype(np.int64)
        size = (M.nrows, M.ncols)
        layout = torch.sparse_csr if layout is None else layout
    elif isinstance(M, gb.Vector):
        idx, values = M.to_coo()
        indices, size = idx.astype(np.int64)[None], (M.size,)
        layout = torch.sparse_coo if layout is None else layout
    else:
        raise TypeError(f"from_graphblas: expected a graphblas Matrix or Vector, got "
                        f"{type(M).__name__}")
    A = sparse_coo_tensor(torch.from_numpy(indices), torch.from_numpy(np.ascontiguousarray(values)),
                          size, fill_value=indefinite, device=device).coalesce()
    return A if layout == torch.sparse_coo else A.to_sparse(layout=layout)


def to_graphblas(A):
    """A python-graphblas Matrix (2-D) or Vector (1-D) of an indefinite
    tensor's present elements (CPU copies).

    Example::

        >>> A = sf.to_sparse(torch.tensor([1., float('nan')]), fill_value=sf.indefinite)
        >>> A.to_graphblas().nvals
        1
    """
    import graphblas as gb
    a = entries(A, "to_graphblas: A")
    values = a.values.detach().cpu().numpy()
    if len(a.size) == 1:
        return gb.Vector.from_coo(a.keys.cpu().numpy(), values, size=a.size[0])
    return gb.Matrix.from_coo(a.rows().cpu().numpy(), a.cols().cpu().numpy(), values,
                              nrows=a.size[0], ncols=a.size[1])
