"""The layout conversions of SparseFillTensor (RFC.md#compressed-layouts): COO, CSR,
CSC, BSR and BSC into one another, batched ones through COO. A mixin of the
class (sparse_fill_tensor.py), which builds every result through its
``_build`` (the module's :func:`build`), so this module needs only the
component rules below the class.

Example::

    >>> A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [3., 4.], (2, 2), fill_value=1.)
    >>> A.to_sparse_csr().crow_indices()
    tensor([0, 1, 2])
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from . import batched as _batched
from . import compressed as _compressed
from . import fill as _fill
from .compressed import BLOCK, EXTRA

if TYPE_CHECKING:
    from .sparse_fill_tensor import SparseFillTensor

_ops = torch.ops.sparsefill


class LayoutConversions:
    """SparseFillTensor's coalesce, to_dense, eliminate_fill and ``to_sparse_*``
    methods, and their helpers."""

    def coalesce(self) -> "SparseFillTensor":
        """Sort the indices and sum duplicate entries (the fill is unchanged:
        a duplicated element's value is the sum of its entries, as in torch).

        Example::

            >>> sf.sparse_coo_tensor([[1, 1]], [1., 2.], (3,), fill_value=9.).coalesce().values()
            tensor([3.])
        """
        self._check_edits()
        self._require(torch.sparse_coo, "coalesce")
        if self._sf_coalesced_flag:
            return self
        if self._sf_coalesced:  # already sorted and unique: only the flag changes
            return self._build(torch.sparse_coo, self._sf_size, self._sf_values, self._sf_fill,
                         indices=self._sf_indices)
        indices, values = _ops.coo_coalesce(self._sf_indices, self._sf_values,
                                            list(self._sf_size[: self.sparse_dim()]))
        return self._build(torch.sparse_coo, self._sf_size, values, self._sf_fill, indices=indices)

    def _all_sparse(self) -> "SparseFillTensor":
        """This tensor (coalesced) with its dense dims made sparse: one stored
        element per element of each stored dense part (O(stored elements)),
        the fill a per-slice fill over the former dense dims; COO. Without
        dense dims: itself. The common form of two operands whose sparse
        dims differ, and of the ops that index every dim."""
        dd = self.dense_dim()
        if not dd:
            return self
        # through COO: a CSC/BSR/BSC pattern's derived COO indices are
        # row-major, its values are not
        A = (self if self._sf_layout == torch.sparse_coo else self.to_sparse_coo())._coalesced()
        size = tuple(A._sf_size)
        dense = size[len(size) - dd:]
        w = _fill.prod(dense)
        idx = A._coo_indices()
        inner = _ops.coo_delinearize(torch.arange(w, device=idx.device), list(dense))
        indices = torch.cat([idx.repeat_interleave(w, dim=1), inner.repeat(1, idx.shape[1])])
        F = _fill.full_rank(A._sf_fill, len(size))
        return self._build(torch.sparse_coo, size, A._sf_values.reshape(-1), F, indices=indices)

    def to_dense(self, dtype=None, *, masked_grad=None, fill=None) -> torch.Tensor:
        """The strided tensor this one represents: the fill everywhere, the
        stored values at their indices. Differentiable with respect to values
        and fill.

        Example::

            >>> sf.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3., 4., 5.], (2, 3),
            ...                      fill_value=5.).to_dense()
            tensor([[5., 5., 3.],
                    [4., 5., 5.]])

        ``fill=v`` (a number or a tensor broadcastable to the dense part)
        puts `v` in the unspecified elements instead of the fill: the one way
        to a strided tensor from an indefinite fill (RFC.md#indefinite-fill).
        """
        self._check_edits()
        if fill is not None:
            v = torch.as_tensor(fill, device=self.device)
            v = v.to(torch.result_type(torch.zeros((), dtype=self.dtype), v))
            src = self._with(self._sf_values.to(v.dtype), v)
            src.__dict__.pop("_sf_indefinite", None)
            return src.to_dense(dtype)
        if self._sf_indefinite:
            raise RuntimeError("to_dense(): this tensor's fill is sf.indefinite (its unspecified "
                               "elements have no value); call A.to_dense(fill=v) to put v there")
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
        self._check_edits()
        if self._sf_indefinite:
            raise RuntimeError("eliminate_fill(): an indefinite tensor has no fill value to "
                               "compare with; sf.select(A, predicate) drops stored elements")
        if self._batch_dim():  # every batch then pads back to the fullest one's nse
            return self.to_sparse_coo().eliminate_fill()._to_layout(self._sf_layout,
                                                                    self._sf_blocksize)
        if self._sf_layout in EXTRA:  # a block goes when all its elements equal the fill
            return self._to_csr().eliminate_fill()._to_layout(self._sf_layout,
                                                              self._sf_blocksize)
        src = self._coalesced()
        indices, values = _ops.eliminate_fill(src._coo_indices(), src._sf_values, src._sf_fill)
        return self._build(self.layout, self._sf_size, values, src._sf_fill, indices=indices)

    def to_sparse_coo(self) -> "SparseFillTensor":
        """This tensor in COO layout (coalesced), same fill."""
        self._check_edits()
        if self.layout == torch.sparse_coo:
            return self
        if self._batch_dim():
            indices, values = _batched.to_coo(self._sf_layout, self._sf_size, self._sf_crow,
                                              self._sf_col, self._sf_values, self._sf_fill,
                                              self._sf_blocksize)
            return self._build(torch.sparse_coo, self._sf_size, values, self._sf_fill,
                         indices=indices)
        if self.layout in EXTRA:
            return self._to_csr().to_sparse_coo()
        return self._build(torch.sparse_coo, self._sf_size, self._sf_values, self._sf_fill,
                     crow=self._sf_crow, col=self._sf_col)

    # ---- the other compressed layouts (RFC.md#compressed-layouts) --------------------

    def _to_csr(self) -> "SparseFillTensor":
        """This CSR, CSC, BSR or BSC tensor as CSR, every element kept."""
        self._check_edits()
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
        return self._build(torch.sparse_csr, size, values, fill, crow=crow, col=col)

    def _to_layout(self, layout, blocksize=None) -> "SparseFillTensor":
        """This tensor (two sparse dims) in `layout`, every element kept: the
        one conversion all the to_sparse_* methods share (RFC.md#compressed-conversions)."""
        self._check_edits()
        what = "to_sparse(layout=" + str(layout).split(".")[-1] + ")"
        # Batch dims: those of a batched compressed tensor, or a COO tensor's
        # sparse dims beyond two (RFC.md#batched-compressed).
        nb = self._batch_dim() if self._sf_layout != torch.sparse_coo else max(
            self.sparse_dim() - 2, 0)
        if layout in BLOCK:
            if self._sf_indefinite:  # a block's padding would become stored elements
                raise NotImplementedError(
                    f"{what}: an indefinite tensor has no value to pad its blocks with; "
                    f"keep it in COO, CSR or CSC")
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
            return self._build(layout, self._sf_size, values, src._sf_fill, crow=crow, col=col,
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
        return self._build(layout, size, values, fill, crow=crow, col=col, blocksize=blocksize)

    def _swapped(self) -> "SparseFillTensor":
        """The transpose of a compressed tensor in O(1): CSR <-> CSC, BSR <->
        BSC, sharing the indices and values (RFC.md#compressed-components)."""
        self._check_edits()
        nb, size = self._batch_dim(), self._sf_size
        size = size[:nb] + (size[nb + 1], size[nb]) + tuple(size[nb + 2:])
        values, blocksize = self._sf_values, self._sf_blocksize
        if blocksize:
            values, blocksize = values.transpose(nb + 1, nb + 2), (blocksize[1], blocksize[0])
        return self._build(_compressed.SWAPPED[self._sf_layout], size, values,
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
        elements holding the fill (RFC.md#compressed-conversions).

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
        self._check_edits()
        if self.layout == torch.sparse_csr:
            return self
        self._check_dense_dim(dense_dim, "to_sparse_csr")
        if self.layout in EXTRA:
            return self._to_csr()
        if self.sparse_dim() != 2:
            return self._to_layout(torch.sparse_csr)  # batched, or refused there
        src = self.coalesce()
        return self._build(torch.sparse_csr, self._sf_size, src._sf_values, src._sf_fill,
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

    def to(self, *args, **kwargs) -> "SparseFillTensor":
        """Change dtype and/or device of values and fill (indices follow the
        device); torch's signatures, ``copy`` positional too. Example:
        ``A.to(torch.float64)``, ``A.to('cpu', torch.float64, False, True)``."""
        self._check_edits()
        kwargs = dict(kwargs)
        copy = kwargs.pop("copy", False)
        # The arguments after the target (device, dtype or a tensor) are
        # non_blocking, then copy; torch's parser below takes no copy.
        target = next((i for i, a in enumerate(args) if isinstance(a, bool)), len(args))
        if len(args) > target + 1:
            copy, args = args[target + 1], args[:target + 1] + args[target + 2:]
        device, dtype, non_blocking, _ = torch._C._nn._parse_to(*args, **kwargs)
        if copy:
            return self.clone().to(device=device, dtype=dtype, non_blocking=non_blocking)
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
