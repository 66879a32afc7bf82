"""SparseFillTensor: a sparse COO, CSR, CSC, BSR or BSC tensor whose
unspecified elements hold a fill value instead of zero, and `build`, the one
way to make one from its components.

The wrapper holds component tensors (indices or crow/col, values, fill) and
carries no storage of its own. Autograd runs on the components: `values` and
`fill` are ordinary tensors, and every torch.ops.sparsefill op is
differentiable with respect to them (RFC.md section 7). This module holds the
data and converts between layouts by calling the ops; it imports only the
fill rules (_fill.py) and the CSC/BSR/BSC component conversions
(_compressed.py; batched ones: _batched.py). Which torch function does what
is decided in _routing.py, which the package wires to the class
(__init__.py), together
with the methods whose homes lie above this module (pickling from
_factories.py, to_scipy/to_pydata from _interop.py).
"""
from __future__ import annotations

from typing import Optional

import torch

from . import _batched, _compressed, _fill
from ._compressed import BLOCK, EXTRA

_ops = torch.ops.sparsefill

__all__ = ["SparseFillTensor", "build", "coo_indices_of_csr", "is_plain", "on_pattern"]


class SparseFillTensor(torch.Tensor):
    """A sparse tensor (layout ``torch.sparse_coo``, ``sparse_csr``,
    ``sparse_csc``, ``sparse_bsr`` or ``sparse_bsc``) whose unspecified
    elements equal ``fill_value()``.

    Build one with :func:`torch_sparsefill.sparse_coo_tensor`,
    :func:`~torch_sparsefill.sparse_csr_tensor`, :func:`~torch_sparsefill.to_sparse`
    or :func:`~torch_sparsefill.full`, never with this class directly.

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 1]], [3., 4.], (4,), fill_value=5.)
        >>> A.to_dense()
        tensor([3., 4., 5., 5.])
    """

    _sf_indices: Optional[torch.Tensor]
    _sf_crow: Optional[torch.Tensor]
    _sf_col: Optional[torch.Tensor]
    _sf_values: torch.Tensor
    _sf_fill: torch.Tensor
    _sf_coalesced: bool
    _sf_coalesced_flag: bool
    _sf_layout: torch.layout
    _sf_size: tuple
    # CSC, BSR, BSC keep their compressed indices in _sf_crow and their plain
    # indices in _sf_col (RFC.md section 15.1); blocksize is (r, c) for BSR
    # and BSC, None otherwise.
    _sf_blocksize: Optional[tuple]

    @staticmethod
    def __new__(cls, layout, size, values, fill, *, indices=None, crow=None, col=None,
                coalesced=False, coalesced_flag=None, blocksize=None):
        # Trusted: only `build` calls this, after the factories (_factories.py)
        # validated user input or an op produced the components.
        size = tuple(size)
        self = torch.Tensor._make_wrapper_subclass(
            cls, size, dtype=values.dtype, device=values.device, layout=layout,
            requires_grad=False, dispatch_layout=True)
        self._sf_layout = layout
        self._sf_size = size
        self._sf_indices = indices
        self._sf_crow = crow
        self._sf_col = col
        self._sf_values = values
        self._sf_fill = fill
        # Two facts (RFC.md 1.4): whether the COO indices are sorted and
        # unique (what the ops rely on), and torch's is_coalesced() flag (what
        # the user is told; it implies the first, never the reverse).
        is_coo = layout == torch.sparse_coo
        self._sf_coalesced = bool(coalesced) if is_coo else True
        flag = self._sf_coalesced if coalesced_flag is None else bool(coalesced_flag)
        self._sf_coalesced_flag = (flag and self._sf_coalesced) if is_coo else True
        self._sf_blocksize = blocksize
        return self

    def __init__(self, *args, **kwargs):  # all the work is done in __new__
        super().__init__()

    # ---- the traceable wrapper-subclass protocol (RFC.md section 12.1) ------
    # torch's tracers take a subclass apart into its inner tensors and
    # rebuild it from them plus a context. Ours: the components, and layout,
    # size, the coalesced facts and the blocksize; sf.exportable() uses it.
    # Not under torch's names (__tensor_flatten__/__tensor_unflatten__):
    # no tracer reaches them on torch 2.13 (sparse layouts are refused
    # first), and they would switch nn.Module.to() & co. to swap_tensors,
    # which cannot move a SparseFillTensor parameter's gradient. Renaming
    # these two is the whole switch once torch lifts its checks.

    _SF_COMPONENTS = ("_sf_indices", "_sf_crow", "_sf_col", "_sf_values", "_sf_fill")

    def _flatten_components(self):
        """The names of the component tensors this tensor holds, and the
        rest of its structure as a context (torch's __tensor_flatten__).

        Example::

            >>> A = sf.sparse_coo_tensor([[0, 1]], [3., 4.], (4,), fill_value=5.)
            >>> A._flatten_components()[0]
            ['_sf_indices', '_sf_values', '_sf_fill']
        """
        names = [n for n in self._SF_COMPONENTS if getattr(self, n) is not None]
        context = (self._sf_layout, self._sf_size, self._sf_coalesced,
                   self._sf_coalesced_flag, self._sf_blocksize)
        return names, context

    @staticmethod
    def _unflatten_components(inner_tensors, context, outer_size, outer_stride):
        """The tensor `_flatten_components` took apart, from its (possibly
        traced) components; the components are trusted as they were
        (torch's __tensor_unflatten__).

        Example::

            >>> A = sf.sparse_coo_tensor([[0, 1]], [3., 4.], (4,), fill_value=5.)
            >>> names, ctx = A._flatten_components()
            >>> B = type(A)._unflatten_components({n: getattr(A, n) for n in names},
            ...                                  ctx, A.shape, None)
            >>> B.to_dense()
            tensor([3., 4., 5., 5.])
        """
        layout, size, coalesced, coalesced_flag, blocksize = context
        size = tuple(outer_size) if outer_size is not None else size
        return SparseFillTensor(layout, size, inner_tensors["_sf_values"],
                                inner_tensors["_sf_fill"],
                                indices=inner_tensors.get("_sf_indices"),
                                crow=inner_tensors.get("_sf_crow"),
                                col=inner_tensors.get("_sf_col"), coalesced=coalesced,
                                coalesced_flag=coalesced_flag, blocksize=blocksize)

    # ---- routing hooks (see _routing.py) -----------------------------------

    # Wired by the package (__init__.py) to _routing's functions; the
    # package replaces __torch_function__ with _routing.torch_function
    # itself, so no frame of ours lies between torch and the routing.
    _route_dispatch = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        raise RuntimeError("torch_sparsefill internal: the routing is not wired "
                           "(import torch_sparsefill)")

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        return SparseFillTensor._route_dispatch(func, types, args, kwargs or {})

    # ---- structure ----------------------------------------------------------

    def _with(self, values, fill):
        """A tensor with this one's pattern and new values and fill; its dense
        part is that of `values`. An op's result: is_coalesced() reports
        whether the indices are sorted and unique (RFC.md 1.4)."""
        if values.dim() == self._sf_values.dim() == 1:  # no dense part: the size stays
            size = self._sf_size
        else:
            lead = self._batch_dim() + 1 + (2 if self._sf_blocksize else 0)
            size = (self._sf_size[: len(self._sf_size) - self.dense_dim()]
                    + tuple(values.shape[lead:]))
        return build(self._sf_layout, size, values, fill, indices=self._sf_indices,
                     crow=self._sf_crow, col=self._sf_col, coalesced=self._sf_coalesced,
                     blocksize=self._sf_blocksize)

    def _coo_indices(self) -> torch.Tensor:
        """Coalesced COO indices of this tensor's pattern (derived for CSR;
        for the other compressed layouts, of every element they store)."""
        if self._batch_dim():
            return self.to_sparse_coo()._sf_indices
        if self._sf_layout in EXTRA:
            return self._to_csr()._coo_indices()
        if self._sf_layout == torch.sparse_csr:
            return coo_indices_of_csr(self._sf_crow, self._sf_col)
        assert self._sf_coalesced, "internal: coalesce first"
        return self._sf_indices

    # ---- the public surface -------------------------------------------------

    @property
    def layout(self) -> torch.layout:
        """torch.sparse_coo, sparse_csr, sparse_csc, sparse_bsr or sparse_bsc."""
        return self._sf_layout

    def _dense_shape(self) -> tuple:
        return tuple(self._sf_size[len(self._sf_size) - self.dense_dim():])

    def fill_value(self) -> torch.Tensor:
        """The value of every unspecified element, shaped like the dense part:
        ``_fill_value()`` expanded to ``values().shape[1:]`` (RFC.md section
        1.3). A per-slice fill (one fill per row after a softmax, say) is
        returned as stored, with the tensor's full rank: it broadcasts to
        ``shape`` (RFC.md section 1.5).

        Example::

            >>> sf.sparse_coo_tensor([[0]], [[1., 2.]], (3, 2), fill_value=7.).fill_value()
            tensor([7., 7.])
        """
        if self._has_per_slice_fill():
            return self._sf_fill
        return self._sf_fill.expand(self._dense_shape())

    def _coalesced(self) -> "SparseFillTensor":
        """This tensor with sorted, unique COO indices (CSR: itself). The
        ops' way in: a tensor whose indices are sorted is used as it is,
        whatever its is_coalesced() flag."""
        if self._sf_coalesced:
            return self
        return self.coalesce()

    def _live_fill(self, zero: bool = False) -> torch.Tensor:
        """The fill as an op's input (coalesced tensors): autograd cut where a
        fill element covers no unspecified element, and with `zero` its value
        0 there (_fill.live)."""
        f = self._sf_fill
        if not (f.requires_grad or zero):
            return f
        per_slice = _fill.is_per_slice(f, self._sf_values.dim() - 1)
        return _fill.live(f, self._sf_size, self.sparse_dim(), self._sf_values.shape[0],
                          self._coo_indices() if per_slice else None, zero)

    def _for_reduction(self) -> "SparseFillTensor":
        """This tensor coalesced, with fill elements that cover no element set
        to 0 (the same dense tensor; no unseen inf or nan in the arithmetic)."""
        A = self._coalesced()
        f = A._live_fill(zero=True)
        return A if f is A._sf_fill else A._with(A._sf_values, f.to(A._sf_fill.dtype))

    def _has_per_slice_fill(self) -> bool:
        """Whether the fill varies over the sparse dims (RFC.md section 1.5)."""
        return _fill.is_per_slice(self._sf_fill, self.dense_dim())

    def _fill_value(self) -> torch.Tensor:
        """The fill as stored: the tensor given at construction, possibly
        smaller than the dense part (RFC.md section 1.3). Changing it in
        place changes the fill: ``A._fill_value().fill_(1.2)``.
        """
        return self._sf_fill

    def sparse_dim(self) -> int:
        """Number of sparse dimensions (2 for the compressed layouts)."""
        return self._sf_indices.shape[0] if self.layout == torch.sparse_coo else 2

    def dense_dim(self) -> int:
        """Number of dense (trailing) dimensions (a block's two dims are sparse;
        batch dims are neither, as in torch)."""
        return self._sf_values.dim() - (3 if self._sf_blocksize else 1) - self._batch_dim()

    def _batch_dim(self) -> int:
        """Number of leading batch dims of a batched compressed tensor (RFC.md
        15.4); 0 otherwise."""
        return _batched.batch_dim(self._sf_layout, self._sf_crow)

    def _nnz(self) -> int:
        """Number of stored elements (duplicates included; blocks for BSR/BSC,
        as in torch; per batch for a batched tensor). Same as :meth:`nse`."""
        return self._sf_values.shape[self._batch_dim()]

    def nse(self) -> int:
        """Number of specified (stored) elements: the RFC's name for ``_nnz()``.

        Example::

            >>> sf.full((3, 3), 2.).nse()
            0
        """
        return self._sf_values.shape[self._batch_dim()]

    def _indices(self) -> torch.Tensor:
        """COO indices as stored (possibly uncoalesced)."""
        self._require(torch.sparse_coo, "_indices")
        return self._sf_indices

    def _values(self) -> torch.Tensor:
        """Values as stored; a leaf that collects gradients when requires_grad."""
        return self._sf_values

    def indices(self) -> torch.Tensor:
        """COO indices, shape (sparse_dim, nse). As in torch, requires
        ``is_coalesced()``; ``_indices()`` reads them as stored."""
        self._require(torch.sparse_coo, "indices")
        if not self._sf_coalesced_flag:
            raise RuntimeError("Cannot get indices on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._sf_indices

    def values(self) -> torch.Tensor:
        """Stored values, shape (nse, *dense_shape). COO: as in torch,
        requires ``is_coalesced()``; ``_values()`` reads them as stored."""
        if self.layout == torch.sparse_coo and not self._sf_coalesced_flag:
            raise RuntimeError("Cannot get values on an uncoalesced tensor, please call "
                               ".coalesce() first")
        return self._sf_values

    def crow_indices(self) -> torch.Tensor:
        """CSR row pointers, length rows + 1 (BSR: block rows + 1)."""
        self._require((torch.sparse_csr, torch.sparse_bsr), "crow_indices")
        return self._sf_crow

    def col_indices(self) -> torch.Tensor:
        """CSR column index of every stored element (BSR: of every block)."""
        self._require((torch.sparse_csr, torch.sparse_bsr), "col_indices")
        return self._sf_col

    def ccol_indices(self) -> torch.Tensor:
        """CSC column pointers, length columns + 1 (BSC: block columns + 1).

        Example::

            >>> sf.sparse_csc_tensor([0, 1, 1], [1], [7.], (2, 2)).ccol_indices()
            tensor([0, 1, 1])
        """
        self._require((torch.sparse_csc, torch.sparse_bsc), "ccol_indices")
        return self._sf_crow

    def row_indices(self) -> torch.Tensor:
        """CSC row index of every stored element (BSC: of every block)."""
        self._require((torch.sparse_csc, torch.sparse_bsc), "row_indices")
        return self._sf_col

    def is_coalesced(self) -> bool:
        """torch's flag (RFC.md 1.4): True after ``coalesce()``, for op
        results, and for a constructor given ``is_coalesced=True`` or fewer
        than two elements; False for other freshly built tensors, even when
        their indices happen to be sorted.

        Example::

            >>> sf.sparse_coo_tensor([[0, 1]], [1., 2.], (3,)).is_coalesced()
            False
        """
        self._require(torch.sparse_coo, "is_coalesced")
        return self._sf_coalesced_flag

    def coalesce(self) -> "SparseFillTensor":
        """Sort the indices and sum duplicate entries (the fill is unchanged:
        a duplicated element's value is the sum of its entries, as in torch).

        Example::

            >>> sf.sparse_coo_tensor([[1, 1]], [1., 2.], (3,), fill_value=9.).coalesce().values()
            tensor([3.])
        """
        self._require(torch.sparse_coo, "coalesce")
        if self._sf_coalesced_flag:
            return self
        if self._sf_coalesced:  # already sorted and unique: only the flag changes
            return build(torch.sparse_coo, self._sf_size, self._sf_values, self._sf_fill,
                         indices=self._sf_indices)
        indices, values = _ops.coo_coalesce(self._sf_indices, self._sf_values,
                                            list(self._sf_size[: self.sparse_dim()]))
        return build(torch.sparse_coo, self._sf_size, values, self._sf_fill, indices=indices)

    def to_dense(self, dtype=None, *, masked_grad=None) -> torch.Tensor:
        """The strided tensor this one represents: the fill everywhere, the
        stored values at their indices. Differentiable with respect to values
        and fill.

        Example::

            >>> sf.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3., 4., 5.], (2, 3),
            ...                      fill_value=5.).to_dense()
            tensor([[5., 5., 3.],
                    [4., 5., 5.]])
        """
        if masked_grad:
            raise NotImplementedError(
                "to_dense(masked_grad=True): masked gradients contradict fill semantics")
        if self._batch_dim():
            return self.to_sparse_coo().to_dense(dtype)
        if self._sf_blocksize:
            out = _compressed.dense_from_blocks(self._sf_layout, self._sf_crow, self._sf_col,
                                                self._sf_values, self._sf_fill,
                                                self._sf_blocksize, self._sf_size)
            return out if dtype is None else out.to(dtype)
        src = self._to_csr() if self._sf_layout in EXTRA else self._coalesced()
        out = _ops.to_dense(src._coo_indices(), src._sf_values, src._sf_fill, list(self._sf_size))
        return out if dtype is None else out.to(dtype)

    def eliminate_fill(self) -> "SparseFillTensor":
        """Drop stored elements equal to the fill (NaN equals a NaN fill; a
        hybrid position goes when its whole dense part equals the fill): the
        "eliminate zeros" of scipy, for any fill. The tensor's elements do
        not change.

        Example::

            >>> sf.sparse_coo_tensor([[0, 1]], [5., 2.], (3,), fill_value=5.).eliminate_fill().nse()
            1
        """
        if self._batch_dim():  # every batch then pads back to the fullest one's nse
            return self.to_sparse_coo().eliminate_fill()._to_layout(self._sf_layout,
                                                                    self._sf_blocksize)
        if self._sf_layout in EXTRA:  # a block goes when all its elements equal the fill
            return self._to_csr().eliminate_fill()._to_layout(self._sf_layout,
                                                              self._sf_blocksize)
        src = self._coalesced()
        indices, values = _ops.eliminate_fill(src._coo_indices(), src._sf_values, src._sf_fill)
        return build(self.layout, self._sf_size, values, src._sf_fill, indices=indices)

    def to_sparse_coo(self) -> "SparseFillTensor":
        """This tensor in COO layout (coalesced), same fill."""
        if self.layout == torch.sparse_coo:
            return self
        if self._batch_dim():
            indices, values = _batched.to_coo(self._sf_layout, self._sf_size, self._sf_crow,
                                              self._sf_col, self._sf_values, self._sf_fill,
                                              self._sf_blocksize)
            return build(torch.sparse_coo, self._sf_size, values, self._sf_fill,
                         indices=indices)
        if self.layout in EXTRA:
            return self._to_csr().to_sparse_coo()
        return build(torch.sparse_coo, self._sf_size, self._sf_values, self._sf_fill,
                     crow=self._sf_crow, col=self._sf_col)

    # ---- the other compressed layouts (RFC.md section 15) --------------------

    def _to_csr(self) -> "SparseFillTensor":
        """This CSR, CSC, BSR or BSC tensor as CSR, every element kept."""
        layout, size = self._sf_layout, self._sf_size
        crow, col, values, fill = self._sf_crow, self._sf_col, self._sf_values, self._sf_fill
        if layout == torch.sparse_csr:
            return self
        if self._batch_dim():
            return self._to_layout(torch.sparse_csr)
        if layout == torch.sparse_csc:
            crow, col, values = _compressed.transpose_pattern(crow, col, values, size[0])
        elif layout == torch.sparse_bsr:
            crow, col, values = _compressed.csr_from_bsr(crow, col, values, self._sf_blocksize,
                                                         size[0])
        elif layout == torch.sparse_bsc:  # the BSR of the transpose, then CSR <-> CSC
            r, c = self._sf_blocksize
            crow, col, values = _compressed.csr_from_bsr(crow, col, values.transpose(1, 2),
                                                         (c, r), size[1])
            crow, col, values = _compressed.transpose_pattern(crow, col, values, size[0])
        else:
            raise RuntimeError(f"internal: _to_csr of layout {layout}")
        return build(torch.sparse_csr, size, values, fill, crow=crow, col=col)

    def _to_layout(self, layout, blocksize=None) -> "SparseFillTensor":
        """This tensor (two sparse dims) in `layout`, every element kept: the
        one conversion all the to_sparse_* methods share (RFC.md 15.2)."""
        what = "to_sparse(layout=" + str(layout).split(".")[-1] + ")"
        # Batch dims: those of a batched compressed tensor, or a COO tensor's
        # sparse dims beyond two (RFC.md 15.4).
        nb = self._batch_dim() if self._sf_layout != torch.sparse_coo else max(
            self.sparse_dim() - 2, 0)
        if layout in BLOCK:
            if blocksize is None:
                raise TypeError(f"{what}: a block layout needs a blocksize")
            blocksize = _compressed.check_blocksize(blocksize, self._sf_size[nb:], what)
        elif blocksize is not None:
            raise ValueError(f"{what}: blocksize is only for sparse_bsr and sparse_bsc")
        if layout == self._sf_layout and blocksize == self._sf_blocksize:
            return self
        if layout == torch.sparse_coo:
            return self.to_sparse_coo()
        if self._sf_layout == torch.sparse_coo and self.sparse_dim() < 2:
            raise RuntimeError(f"{what}: a compressed layout needs at least 2 sparse "
                               f"dimensions, this tensor has {self.sparse_dim()}")
        if nb:
            if layout not in _compressed.COMPRESSED:
                raise ValueError(f"to_sparse(layout={layout}): not a sparse layout")
            src = self.to_sparse_coo()._coalesced()
            crow, col, values = _batched.from_coo(src._sf_indices, src._sf_values,
                                                  src._sf_fill, self._sf_size, layout, blocksize)
            return build(layout, self._sf_size, values, src._sf_fill, crow=crow, col=col,
                         blocksize=blocksize)
        src = self._to_csr() if self._sf_layout != torch.sparse_coo else self.to_sparse_csr()
        size, fill, dense_dim = self._sf_size, src._sf_fill, self.dense_dim()
        crow, col, values = src._sf_crow, src._sf_col, src._sf_values
        if layout == torch.sparse_csr:
            return src
        if layout == torch.sparse_csc:
            crow, col, values = _compressed.transpose_pattern(crow, col, values, size[1])
        elif layout == torch.sparse_bsr:
            crow, col, values = _compressed.bsr_from_csr(crow, col, values, fill, blocksize, size)
        elif layout == torch.sparse_bsc:  # the BSR of the transpose, blocks transposed back
            r, c = blocksize
            tsize = (size[1], size[0]) + tuple(size[2:])
            crow, col, values = _compressed.transpose_pattern(crow, col, values, size[1])
            crow, col, values = _compressed.bsr_from_csr(
                crow, col, values, _compressed.transpose_fill(fill, dense_dim), (c, r), tsize)
            values = values.transpose(1, 2)
        else:
            raise ValueError(f"to_sparse(layout={layout}): not a sparse layout")
        return build(layout, size, values, fill, crow=crow, col=col, blocksize=blocksize)

    def _swapped(self) -> "SparseFillTensor":
        """The transpose of a compressed tensor in O(1): CSR <-> CSC, BSR <->
        BSC, sharing the indices and values (RFC.md section 15.1)."""
        nb, size = self._batch_dim(), self._sf_size
        size = size[:nb] + (size[nb + 1], size[nb]) + tuple(size[nb + 2:])
        values, blocksize = self._sf_values, self._sf_blocksize
        if blocksize:
            values, blocksize = values.transpose(nb + 1, nb + 2), (blocksize[1], blocksize[0])
        return build(_compressed.SWAPPED[self._sf_layout], size, values,
                     _batched.swapped_fill(self._sf_fill, nb, self.dense_dim()),
                     crow=self._sf_crow, col=self._sf_col, blocksize=blocksize)

    def to_sparse_csc(self, dense_dim=None) -> "SparseFillTensor":
        """This tensor in CSC layout, same fill. Needs exactly 2 sparse dims.

        Example::

            >>> sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2), fill_value=3.).to_sparse_csc().row_indices()
            tensor([1, 0])
        """
        self._check_dense_dim(dense_dim, "to_sparse_csc")
        return self._to_layout(torch.sparse_csc)

    def to_sparse_bsr(self, blocksize, dense_dim=None) -> "SparseFillTensor":
        """This tensor in BSR layout with `blocksize` (an int or ``(r, c)``),
        same fill: a block is stored when it holds a stored element, its other
        elements holding the fill (RFC.md section 15.2).

        Example::

            >>> sf.sparse_coo_tensor([[0], [3]], [1.], (2, 4), fill_value=3.).to_sparse_bsr(2).values()
            tensor([[[3., 1.],
                     [3., 3.]]])
        """
        self._check_dense_dim(dense_dim, "to_sparse_bsr")
        return self._to_layout(torch.sparse_bsr, blocksize)

    def to_sparse_bsc(self, blocksize, dense_dim=None) -> "SparseFillTensor":
        """This tensor in BSC layout with `blocksize`, same fill (see
        :meth:`to_sparse_bsr`).

        Example: ``A.to_sparse_bsc((2, 1)).to_dense()`` equals ``A.to_dense()``.
        """
        self._check_dense_dim(dense_dim, "to_sparse_bsc")
        return self._to_layout(torch.sparse_bsc, blocksize)

    def _check_dense_dim(self, dense_dim, what):
        if dense_dim is not None and dense_dim != self.dense_dim():
            raise NotImplementedError(
                f"{what}(dense_dim={dense_dim}): changing dense_dim is not supported; "
                f"this tensor has dense_dim {self.dense_dim()}")

    def to_sparse_csr(self, dense_dim=None) -> "SparseFillTensor":
        """This tensor in CSR layout, same fill. Needs exactly 2 sparse dims.

        Example::

            >>> sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2), fill_value=3.).to_sparse_csr().crow_indices()
            tensor([0, 1, 2])
        """
        if self.layout == torch.sparse_csr:
            return self
        self._check_dense_dim(dense_dim, "to_sparse_csr")
        if self.layout in EXTRA:
            return self._to_csr()
        if self.sparse_dim() != 2:
            return self._to_layout(torch.sparse_csr)  # batched, or refused there
        src = self.coalesce()
        return build(torch.sparse_csr, self._sf_size, src._sf_values, src._sf_fill,
                     indices=src._sf_indices)

    def to_sparse(self, *args, layout=None, blocksize=None, dense_dim=None):
        """Convert between sparse layouts (COO, CSR, CSC, and BSR or BSC with
        `blocksize`); the fill travels along.

        Example: ``A.to_sparse(layout=torch.sparse_bsr, blocksize=(2, 2))``.
        """
        if args:
            raise NotImplementedError("to_sparse(sparse_dim): changing sparse_dim of a "
                                      "SparseFillTensor is not supported; pass layout=")
        layout = layout or torch.sparse_coo
        self._check_dense_dim(dense_dim, "to_sparse")
        if layout == torch.sparse_csr and blocksize is None:
            return self.to_sparse_csr(dense_dim)
        return self._to_layout(layout, blocksize)

    def clone(self, *, memory_format=None) -> "SparseFillTensor":
        """A copy of every component (differentiable)."""
        return self._map_components(torch.clone, copy_indices=True)

    def detach(self) -> "SparseFillTensor":
        """The same data, cut from the autograd graph."""
        return self._map_components(torch.Tensor.detach)

    def to(self, *args, **kwargs) -> "SparseFillTensor":
        """Change dtype and/or device of values and fill (indices follow the
        device). Example: ``A.to(torch.float64)``."""
        device, dtype, non_blocking, _ = torch._C._nn._parse_to(*args, **kwargs)
        if kwargs.get("copy"):
            return self.clone().to(device=device, dtype=dtype)
        # A cast to an integral dtype leaves the graph, as torch's does.
        if dtype is not None and dtype != self.dtype and self.layout == torch.sparse_coo and \
                not self._sf_coalesced:
            # Duplicates sum before the cast (rounding after, as the dense
            # tensor's element is the sum).
            return self.coalesce().to(*args, **kwargs)

        def move(t, is_index):
            return t.to(device=device, dtype=None if is_index else dtype,
                        non_blocking=non_blocking)

        return self._map_components(move, with_kind=True)

    def requires_grad_(self, requires_grad: bool = True) -> "SparseFillTensor":
        """Make values and fill leaves that collect gradients."""
        for t in (self._sf_values, self._sf_fill):
            t.requires_grad_(requires_grad)
        return self

    @property
    def requires_grad(self) -> bool:  # noqa: D401 -- property
        """Whether values or fill take part in autograd."""
        return self._sf_values.requires_grad or self._sf_fill.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    @property
    def grad(self) -> Optional["SparseFillTensor"]:
        """The gradient as a SparseFillTensor on this tensor's pattern.

        Its values are ``_values().grad``. Its fill is ``_fill_value().grad``
        divided by the number of unspecified elements each fill element
        covers: the per-element gradient, so that ``A.grad.to_dense()`` equals
        the dense gradient whenever that gradient is constant over the
        unspecified elements (every element-wise chain), and otherwise is its
        least-squares projection onto this pattern (RFC.md section 7.4).
        The raw parameter gradients stay on ``_values().grad`` and
        ``_fill_value().grad``; optimise those components.
        """
        values, fill = self._sf_values, self._sf_fill
        gv, gf = values.grad, fill.grad
        if gv is None and gf is None:
            return None
        if gv is None:
            gv = torch.zeros_like(values)
        if gf is None:
            gf = torch.zeros_like(fill)
        per = _fill.unspecified_per_element(fill, self._sf_size,
                                            self._coalesced()._coo_indices()).to(gf.device)
        grad = self._with(gv, torch.where(per > 0, gf / per.clamp_min(1),
                                          torch.zeros_like(gf)).to(gv.dtype))

        def write_back(g):
            # In-place changes to the returned gradient (clipping, unscaling,
            # zeroing) reach the component gradients: the fill's as the sum
            # again (RFC.md section 7.2).
            def same(x, y):
                return x is y or (x is not None and y is not None and torch.equal(x, y))
            if g._sf_values.shape != values.shape or g._sf_size != self._sf_size or not all(
                    same(getattr(g, k), getattr(self, k))
                    for k in ("_sf_indices", "_sf_crow", "_sf_col")):
                raise RuntimeError("an in-place change of A.grad must keep A's pattern (the "
                                   "gradient of an uncoalesced parameter: coalesce it first)")
            values.grad = g._sf_values
            fill.grad = (g._sf_fill * per).to(fill.dtype)

        grad._sf_grad_sink = write_back
        return grad

    @grad.setter
    def grad(self, value) -> None:
        if value is not None:
            raise RuntimeError("set A.grad only to None; gradients live on A._values().grad "
                               "and A._fill_value().grad")
        self._sf_values.grad = None
        self._sf_fill.grad = None

    @property
    def is_leaf(self) -> bool:
        """Whether values and fill are autograd leaves."""
        return self._sf_values.is_leaf and self._sf_fill.is_leaf

    @property
    def grad_fn(self):
        """The autograd node that produced the values (None for leaves)."""
        return self._sf_values.grad_fn or self._sf_fill.grad_fn

    # Set on the tensors `grad` returns: writes in-place changes back to the
    # component gradients.
    _sf_grad_sink = None

    def _after_inplace(self) -> None:
        """Called by every in-place op after it wrote this tensor's values and fill."""
        if self._sf_grad_sink is not None:
            self._sf_grad_sink(self)

    # ---- in place --------------------------------------------------------------

    def _adopt(self, out: "SparseFillTensor", what: str, *, bump: bool = True
               ) -> "SparseFillTensor":
        """Become `out` in place, keeping this object's identity (RFC.md 4.5):
        its components, size and coalesced flags become out's. As for torch's
        in-place ops, a leaf that requires grad refuses while grad mode is on,
        stays a leaf that requires grad under no_grad, and `_version` moves on
        (`bump`; detach_ does not bump, as in torch)."""
        if bump and self.requires_grad and self.is_leaf and torch.is_grad_enabled():
            raise RuntimeError(f"{what}: a leaf Variable that requires grad is being used in "
                               f"an in-place operation.")
        if out.dtype != self.dtype:
            raise RuntimeError(f"{what}: result type {out.dtype} can't be cast to the desired "
                               f"output type {self.dtype}")
        if bump and self.requires_grad and not out.requires_grad:
            out = out.detach().requires_grad_()  # under no_grad: still a leaf that requires grad
        version = self._version
        if (out._sf_size != self._sf_size or out.device != self.device
                or out._sf_layout != self._sf_layout):
            # The wrapper's TensorImpl holds size, device and layout: take
            # out's whole tensor.
            out = build(out._sf_layout, out._sf_size, out._sf_values, out._sf_fill,
                        indices=out._sf_indices, crow=out._sf_crow, col=out._sf_col,
                        coalesced=out._sf_coalesced, coalesced_flag=out._sf_coalesced_flag,
                        blocksize=out._sf_blocksize)
            torch.utils.swap_tensors(self, out)
            for _ in range(version):  # the new TensorImpl counts from 0
                torch.autograd.graph.increment_version(self)
        else:
            for key in ("_sf_indices", "_sf_crow", "_sf_col", "_sf_values", "_sf_fill",
                        "_sf_coalesced", "_sf_coalesced_flag", "_sf_blocksize"):
                setattr(self, key, getattr(out, key))
        if bump:
            torch.autograd.graph.increment_version(self)
        self._after_inplace()
        return self

    # ---- helpers --------------------------------------------------------------

    def _require(self, layouts, what):
        layouts = layouts if isinstance(layouts, tuple) else (layouts,)
        if self.layout not in layouts:
            names = " or ".join(str(x) for x in layouts)
            raise RuntimeError(f"{what}(): expected a SparseFillTensor of layout {names}, "
                               f"got {self.layout}")

    def _map_components(self, fn, *, with_kind=False, copy_indices=False):
        def idx(t):
            if t is None:
                return None
            if with_kind:
                return fn(t, True)
            return fn(t) if copy_indices else t

        def val(t):
            return fn(t, False) if with_kind else fn(t)

        return build(self.layout, self._sf_size, val(self._sf_values), val(self._sf_fill),
                     indices=idx(self._sf_indices), crow=idx(self._sf_crow),
                     col=idx(self._sf_col), coalesced=self._sf_coalesced,
                     coalesced_flag=self._sf_coalesced_flag, blocksize=self._sf_blocksize)

    # ---- printing (pickling and copying: _factories.py) -------------------------

    def __repr__(self, *, tensor_contents=None) -> str:
        def field(name, t):
            text = repr(t.detach())
            return f"{name}=" + text.replace("\n", "\n" + " " * (len(name) + 1))

        if self.layout in (torch.sparse_csr, torch.sparse_bsr):
            parts = [field("crow_indices", self._sf_crow), field("col_indices", self._sf_col)]
        elif self.layout in (torch.sparse_csc, torch.sparse_bsc):
            parts = [field("ccol_indices", self._sf_crow), field("row_indices", self._sf_col)]
        else:
            parts = [field("indices", self._sf_indices)]
        parts.append(field("values", self._sf_values))
        tail = (f"size={self._sf_size}, nse={self.nse()}, "
                f"{field('fill_value', self._sf_fill)}, layout={self.layout}")
        if self.layout == torch.sparse_coo and not self._sf_coalesced_flag:
            tail += ", coalesced=False"
        if self.requires_grad:
            tail += ", requires_grad=True"
        parts.append(tail)
        indent = " " * len("SparseFillTensor(")
        body = (",\n").join(parts).replace("\n", "\n" + indent)
        return f"SparseFillTensor({body})"


def coo_indices_of_csr(crow: torch.Tensor, col: torch.Tensor) -> torch.Tensor:
    """The coalesced COO indices (2, nse) of an unbatched CSR pattern: ATen's
    own conversion (what torch's to_sparse_coo calls), which writes both rows
    of the result in one parallel pass; rows_from_crow plus a stack would
    write the row indices twice.

    Example::

        >>> coo_indices_of_csr(torch.tensor([0, 1, 1, 3]), torch.tensor([2, 0, 1]))
        tensor([[0, 2, 2],
                [2, 0, 1]])
    """
    if torch.compiler.is_compiling():
        # ATen's fake kernel reads numel(), which a traced nse (symbolic) refuses.
        return torch.stack([torch.ops.sparsefill.rows_from_crow(crow), col])
    return torch._convert_indices_from_csr_to_coo(crow, col)


def build(layout, size, values, fill, *, indices=None, crow=None, col=None,
          coalesced=True, coalesced_flag=None, blocksize=None) -> SparseFillTensor:
    """The one way to make a SparseFillTensor from trusted components: the
    public constructors call it after validating, every op on its results.

    The pattern comes as COO `indices` or as CSR `crow`/`col`, and is
    converted to `layout` when it is in the other form: CSR when `layout`
    is CSR and the pattern has two sparse dims (COO indices must then be
    coalesced), COO otherwise. `coalesced` describes COO `indices` (CSR is
    always coalesced). CSC, BSR and BSC take their compressed and plain
    indices as `crow` and `col` (and BSR/BSC a `blocksize`), never converted
    here (RFC.md section 15.1). The fill is stored in its canonical form
    (_fill.canonical, RFC.md section 1.5).

    Example::

        >>> from torch_sparsefill._tensor import build
        >>> build(torch.sparse_csr, (2, 2), torch.tensor([1.]), torch.tensor(3.),
        ...       indices=torch.tensor([[1], [0]])).crow_indices()
        tensor([0, 0, 1])
    """
    size = tuple(size)
    if layout in EXTRA:
        assert indices is None and crow is not None, "internal: give CSC/BSR/BSC components"
        assert (blocksize is not None) == (layout in BLOCK), "internal: blocksize vs layout"
    else:
        blocksize = None
    if indices is not None:
        if layout == torch.sparse_csr and indices.shape[0] == 2:
            assert coalesced, "internal: a CSR pattern needs coalesced COO indices"
            crow = _ops.crow_from_rows(indices[0].contiguous(), size[0])
            col, indices = indices[1].contiguous(), None
        else:
            layout = torch.sparse_coo
    elif layout == torch.sparse_coo:
        indices, coalesced = coo_indices_of_csr(crow, col), True
        crow = col = None
    dense_dim = values.dim() - (3 if blocksize else 1) - _batched.batch_dim(layout, crow)
    if fill.dim() > dense_dim:  # only a per-slice fill may change form (skip the call)
        fill = _fill.canonical(fill, len(size) - dense_dim, dense_dim)
    # __new__ alone: calling the class would also run __init__ (a microsecond
    # per result, for nothing).
    return SparseFillTensor.__new__(SparseFillTensor, layout, size, values, fill, indices=indices,
                                    crow=crow, col=col, coalesced=coalesced,
                                    coalesced_flag=coalesced_flag, blocksize=blocksize)


# ---- the hot path (RFC.md section 9.1) ------------------------------------------

_make_wrapper = torch.Tensor._make_wrapper_subclass
# How many attributes SparseFillTensor.__new__ sets (on_pattern copies them;
# so does _C.hot_on's result, made the same way: aten_ext/ops/hot.cpp,
# bound by _elementwise).
_N_FACTS = 10
_COO, _CSR = torch.sparse_coo, torch.sparse_csr


def is_plain(a) -> bool:
    """Whether `a` is a SparseFillTensor of the simplest kind, the one the
    hot path serves: coalesced COO or unbatched CSR, no dense part, a 0-d
    fill that needs no autograd cut (so ``a._live_fill()`` is ``a._sf_fill``).
    Read from the components on every call (they change in place).

    Example::

        >>> is_plain(sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=2.))
        True
    """
    if type(a) is not SparseFillTensor or not a._sf_coalesced:
        return False
    layout = a._sf_layout
    return ((layout is _COO or (layout is _CSR and a._sf_crow.dim() == 1))
            and a._sf_values.dim() == 1 and a._sf_fill.dim() == 0
            and not a._sf_fill.requires_grad)


def on_pattern(a: SparseFillTensor, values: torch.Tensor, fill: torch.Tensor
               ) -> SparseFillTensor:
    """``a._with(values, fill)`` for a plain `a` (:func:`is_plain`) and an
    op's 1-d `values` and 0-d `fill`: the same tensor, made without build's
    general case (no layout or fill form to work out, every fact a's).

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=2.)
        >>> on_pattern(A, A.values() * 3, A._fill_value() * 3).to_dense()
        tensor([3., 6., 6.])
    """
    out = _make_wrapper(SparseFillTensor, a._sf_size, dtype=values.dtype, device=values.device,
                        layout=a._sf_layout, dispatch_layout=True)
    facts = a.__dict__
    if len(facts) == _N_FACTS:
        # a holds __new__'s attributes alone (no cache, nothing a user set):
        # a copy of its dict with three entries replaced is the result's,
        # cheaper than building one (its layout, size and pattern are a's;
        # plain: coalesced, no blocksize).
        facts = facts.copy()
        facts["_sf_values"], facts["_sf_fill"], facts["_sf_coalesced_flag"] = values, fill, True
        out.__dict__ = facts
        return out
    out.__dict__.update(_sf_layout=a._sf_layout, _sf_size=a._sf_size, _sf_indices=a._sf_indices,
                        _sf_crow=a._sf_crow, _sf_col=a._sf_col, _sf_values=values, _sf_fill=fill,
                        _sf_coalesced=True, _sf_coalesced_flag=True, _sf_blocksize=None)
    return out
