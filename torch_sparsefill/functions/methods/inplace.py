"""In-place ops that give a SparseFillTensor another pattern, size or graph:
``zero_``, ``t_``, ``transpose_``, ``detach_``, ``resize_as_``,
``sparse_resize_`` and ``sparse_resize_and_clear_`` (RFC.md#in-place; the in-place
element-wise ops are functions/elementwise/'s). Each computes its result out of place
and the tensor adopts it (``SparseFillTensor._adopt``): same object, new
components, `_version` bumped, a leaf that requires grad refused as in torch.

Resizing keeps the fill: elements that a larger size adds are unspecified,
so they hold the fill (torch's hold 0, its fill). ``sparse_resize_and_clear_``
drops the stored elements: every element is then the fill.
"""
from __future__ import annotations

import torch

from ...tensor import args as _args
from ..shape import reshape as _shape
from ...tensor import SparseFillTensor, build

T = torch.Tensor

__all__: list = []


def zero_(self):
    """``A.zero_()``: every element 0, no stored element (as torch).

    A gradient (``A.grad``, whose in-place changes reach the component
    gradients) keeps its pattern: the components' gradients keep their shapes.
    Both forms are the same dense tensor.
    """
    if self._sf_grad_sink is not None:
        self._sf_values.zero_()
        self._sf_fill.zero_()
        self._after_inplace()
        return self
    fill = torch.zeros_like(self._sf_fill.detach())
    values = self._sf_values.new_zeros((0,) + tuple(self._sf_values.shape[1:]))
    indices = torch.zeros(self.sparse_dim(), 0, dtype=torch.int64, device=self.device)
    return self._adopt(build(self.layout, self._sf_size, values, fill, indices=indices),
                       "zero_()")


def t_(self):
    """``A.t_()``: A becomes ``A.t()``."""
    return self._adopt(_shape.t(self), "t_()")


def transpose_(self, dim0, dim1):
    """``A.transpose_(d0, d1)``: A becomes ``A.transpose(d0, d1)``."""
    return self._adopt(_shape.transpose(self, dim0, dim1), "transpose_()")


def detach_(self):
    """``A.detach_()``: A's components leave the autograd graph."""
    return self._adopt(self.detach(), "detach_()", bump=False)


def _resized(self, size, sparse_dim, dense_dim, clear, what):
    """A with `size`, keeping its stored elements (unless `clear`) and fill,
    under torch's rules for resizing a non-empty sparse tensor."""
    if self.layout != torch.sparse_coo:
        raise NotImplementedError(f"{what}: only sparse COO tensors can be resized (as in "
                                  f"torch); convert with .to_sparse_coo()")
    size = tuple(_args.integer(s, what) for s in size)
    sparse_dim, dense_dim = _args.integer(sparse_dim, what), _args.integer(dense_dim, what)
    if sparse_dim + dense_dim != len(size) or sparse_dim < 0 or dense_dim < 0:
        raise RuntimeError(f"{what}: number of dimensions must be sparse_dim ({sparse_dim}) + "
                           f"dense_dim ({dense_dim}), but got {len(size)}")
    if any(s < 0 for s in size):
        raise RuntimeError(f"{what}: size must be non-negative, got {size}")
    src = self._coalesced()
    keep = not clear and src.nse() > 0
    if keep:
        old = self._sf_size
        if sparse_dim != self.sparse_dim() or dense_dim != self.dense_dim():
            raise RuntimeError(f"{what}: changing the number of sparse or dense dimensions of "
                               f"a non-empty sparse tensor is not supported (from "
                               f"{self.sparse_dim()}+{self.dense_dim()} to "
                               f"{sparse_dim}+{dense_dim})")
        if any(n < o for n, o in zip(size[:sparse_dim], old[:sparse_dim])):
            raise RuntimeError(f"{what}: shrinking the size of sparse dimensions (from "
                               f"{old[:sparse_dim]} to {size[:sparse_dim]}) on a non-empty "
                               f"sparse tensor is not supported")
        if size[sparse_dim:] != old[sparse_dim:]:
            raise NotImplementedError(f"{what}: changing the size of dense dimensions (from "
                                      f"{old[sparse_dim:]} to {size[sparse_dim:]}) of a "
                                      f"non-empty SparseFillTensor is not supported")
    fill = self._sf_fill
    if self._has_per_slice_fill() and size != self._sf_size:
        raise NotImplementedError(f"{what}: resizing a tensor with a per-slice fill of shape "
                                  f"{tuple(fill.shape)} is not supported")
    dense_shape = size[sparse_dim:]
    if fill.dim() > len(dense_shape) or any(
            f not in (1, d) for f, d in zip(fill.shape, dense_shape[len(dense_shape) - fill.dim():])):
        raise NotImplementedError(f"{what}: the fill of shape {tuple(fill.shape)} does not "
                                  f"broadcast to the new dense part {dense_shape}")
    if keep:
        return build(torch.sparse_coo, size, src._sf_values, fill, indices=src._sf_indices)
    values = self._sf_values.new_zeros((0,) + dense_shape)
    indices = torch.zeros(sparse_dim, 0, dtype=torch.int64, device=self.device)
    return build(torch.sparse_coo, size, values, fill, indices=indices)


def sparse_resize_(self, size, sparse_dim, dense_dim):
    """``A.sparse_resize_(size, sparse_dim, dense_dim)``: torch's rules; new
    elements hold the fill."""
    out = _resized(self, size, sparse_dim, dense_dim, False, "sparse_resize_()")
    return self._adopt(out, "sparse_resize_()")


def sparse_resize_and_clear_(self, size, sparse_dim, dense_dim):
    """``A.sparse_resize_and_clear_(size, sparse_dim, dense_dim)``: no stored
    element afterwards; every element is the fill."""
    out = _resized(self, size, sparse_dim, dense_dim, True, "sparse_resize_and_clear_()")
    return self._adopt(out, "sparse_resize_and_clear_()")


def resize_as_(self, other, *, memory_format=None):
    """``A.resize_as_(B)`` for a sparse ``B``: ``A.sparse_resize_`` to B's size
    and dims, as torch does for sparse tensors."""
    if not isinstance(other, torch.Tensor) or other.layout == torch.strided:
        raise NotImplementedError("resize_as_(other): other must be a sparse tensor")
    return sparse_resize_(self, other.shape, other.sparse_dim(), other.dense_dim())


ROUTES = {
    T.zero_: zero_,
    T.t_: t_,
    T.transpose_: transpose_,
    T.detach_: detach_,
    torch.detach_: detach_,
    T.resize_as_: resize_as_,
    T.sparse_resize_: sparse_resize_,
    T.sparse_resize_and_clear_: sparse_resize_and_clear_,
}
