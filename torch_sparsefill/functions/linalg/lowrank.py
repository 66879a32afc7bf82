"""Low-rank solvers on a SparseFillTensor: ``torch.lobpcg``,
``torch.svd_lowrank`` and ``torch.pca_lowrank``.

They touch the matrix only through products with it (``A @ X``,
``X^H @ A``), and those are exact with a fill (RFC.md#products), so torch's own
algorithms run on the SparseFillTensor: the handlers call torch's
implementations past their ``__torch_function__`` entry. ``pca_lowrank``
centres with the dense row of column means (computed by one product), where
torch builds a sparse rank-one matrix with ``torch.sparse.sum``. Gradients
flow as torch's do for ``svd_lowrank``/``pca_lowrank``; ``lobpcg`` with an
``A`` that requires grad is refused (torch has no sparse gradient for it).
"""
from __future__ import annotations

import inspect

import torch
from torch import _lobpcg, _lowrank

from ...tensor import args as _args
from ...tensor import SparseFillTensor

T = torch.Tensor

__all__: list = []


def _matrix(A, what):
    A = _args.sparse(A, what, "A")
    if A.dim() != 2 or A.dense_dim() != 0:
        raise NotImplementedError(f"{what}: needs a 2-D SparseFillTensor without dense dims, "
                                  f"got size {tuple(A.shape)} with dense_dim {A.dense_dim()}")
    return A


def svd_lowrank(A, q=6, niter=2, M=None):
    """``torch.svd_lowrank(A, q, niter, M)`` on a SparseFillTensor."""
    A = _matrix(A, "svd_lowrank()")
    if isinstance(M, SparseFillTensor):
        M = M.to_dense()
    return _lowrank._svd_lowrank(A, q=q, niter=niter, M=M)


def pca_lowrank(A, q=None, center=True, niter=2):
    """``torch.pca_lowrank(A, q, center, niter)`` on a SparseFillTensor."""
    A = _matrix(A, "pca_lowrank()")
    m, n = A.shape
    if q is None:
        q = min(6, m, n)
    elif not 0 <= q <= min(m, n):
        raise ValueError(f"q(={q}) must be non-negative integer and not greater than "
                         f"min(m, n)={min(m, n)}")
    if not niter >= 0:
        raise ValueError(f"niter(={niter}) must be non-negative integer")
    if not center:
        return _lowrank._svd_lowrank(A, q, niter=niter, M=None)
    means = torch.ones(1, m, dtype=A.dtype, device=A.device) @ A / m
    return _lowrank._svd_lowrank(A, q, niter=niter, M=means)


_LOBPCG = inspect.signature(_lobpcg.lobpcg)


def lobpcg(*args, **kwargs):
    """``torch.lobpcg(A, k, B, X, ...)`` on a SparseFillTensor ``A`` (and
    ``B``); forward only."""
    bound = _LOBPCG.bind(*args, **kwargs)
    bound.apply_defaults()
    values = dict(bound.arguments)
    _matrix(values["A"], "lobpcg()")
    for name in ("A", "B"):
        if isinstance(values[name], torch.Tensor) and values[name].requires_grad:
            raise NotImplementedError(f"lobpcg(): {name} requires grad; gradients through "
                                      f"lobpcg of a SparseFillTensor are not supported (torch "
                                      f"has none for sparse inputs either): detach it")
    return _lobpcg._lobpcg(**values)


def _mH(self):
    """``A.mH`` of a real SparseFillTensor: its transpose."""
    if self.is_complex():
        raise NotImplementedError("mH of a complex SparseFillTensor is not supported")
    return self.mT


ROUTES = {
    torch.svd_lowrank: svd_lowrank,
    torch.pca_lowrank: pca_lowrank,
    torch.lobpcg: lobpcg,
    T.mH.__get__: _mH,
}
