"""SparseFillTensor: a sparse COO, CSR, CSC, BSR or BSC tensor whose
unspecified elements hold a fill value instead of zero, and `build`, the one
way to make one from its components.

The wrapper holds component tensors (indices or crow/col, values, fill) and
carries no storage of its own. Autograd runs on the components: `values` and
`fill` are ordinary tensors, and every torch.ops.sparsefill op is
differentiable with respect to them (RFC.md#gradients). This module holds the
data; its layout conversions (conversions.py) and its autograd surface
(gradients.py) are mixins below it. It imports only the component rules
(fill.py, compressed.py, batched.py). Which torch function does what is
decided in functions/routing.py, which the package wires to the class
(torch_sparsefill/__init__.py), together with the methods whose homes lie
above this package (pickling from creation/serialization.py,
to_scipy/to_pydata from creation/interop.py).
"""
from __future__ import annotations

from typing import Optional

import torch

from . import batched as _batched
from . import fill as _fill
from . import indefinite as _indefinite
from .compressed import BLOCK, EXTRA
from .conversions import LayoutConversions
from .gradients import ComponentGradients

_ops = torch.ops.sparsefill

__all__ = ["SparseFillTensor", "build", "coo_indices_of_csr", "FACTS"]

# The attributes SparseFillTensor.__new__ sets, in this order: the one home of
# their names. The hot path reads them by position (aten_ext/ops/hot/hot.h's
# Fact enum), from these names, bound once (functions/elementwise/fast.py).
FACTS = ("_sf_layout", "_sf_size", "_sf_indices", "_sf_crow", "_sf_col", "_sf_values",
         "_sf_fill", "_sf_coalesced", "_sf_coalesced_flag", "_sf_blocksize")


class SparseFillTensor(LayoutConversions, ComponentGradients, torch.Tensor):
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
    # indices in _sf_col (RFC.md#compressed-components); blocksize is (r, c) for BSR
    # and BSC, None otherwise.
    _sf_blocksize: Optional[tuple]
    # True (an instance attribute) only on an indefinite tensor (indefinite.py).
    _sf_indefinite = False

    @staticmethod
    def __new__(cls, layout, size, values, fill, *, indices=None, crow=None, col=None,
                coalesced=False, coalesced_flag=None, blocksize=None):
        # Trusted: only `build` calls this, after the factories (creation/)
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
        # Two facts (RFC.md#stored-elements): whether the COO indices are sorted and
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

    # ---- the traceable wrapper-subclass protocol (docs/design.md#why-fullgraph-is-refused) ------
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

    # ---- routing hooks (see functions/routing.py) -----------------------------------

    # Wired by the package (__init__.py) to functions/routing.py; the
    # package replaces __torch_function__ with functions/routing.py's torch_function
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
        whether the indices are sorted and unique (RFC.md#stored-elements)."""
        if values.dim() == self._sf_values.dim() == 1:  # no dense part: the size stays
            size = self._sf_size
        else:
            lead = self._batch_dim() + 1 + (2 if self._sf_blocksize else 0)
            size = (self._sf_size[: len(self._sf_size) - self.dense_dim()]
                    + tuple(values.shape[lead:]))
        return self._build(self._sf_layout, size, values, fill, indices=self._sf_indices,
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
        ``shape`` (RFC.md#per-slice-fills).

        Example::

            >>> sf.sparse_coo_tensor([[0]], [[1., 2.]], (3, 2), fill_value=7.).fill_value()
            tensor([7., 7.])
        """
        if self._sf_indefinite:
            _indefinite.refuse_value("fill_value()")
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
        """Whether the fill varies over the sparse dims (RFC.md#per-slice-fills)."""
        return _fill.is_per_slice(self._sf_fill, self.dense_dim())

    def _fill_value(self) -> torch.Tensor:
        """The fill as stored: the tensor given at construction, possibly
        smaller than the dense part (RFC.md#the-fill). Changing it in
        place changes the fill: ``A._fill_value().fill_(1.2)``.
        """
        if self._sf_indefinite:
            _indefinite.refuse_value("_fill_value()")
        return self._sf_fill

    def is_indefinite(self) -> bool:
        """Whether the fill is ``sf.indefinite`` (RFC.md#indefinite-fill).

        Example::

            >>> sf.full((2,), 1.).is_indefinite()
            False
        """
        return self._sf_indefinite

    def to_indefinite(self) -> "SparseFillTensor":
        """This tensor with its fill forgotten: the stored elements, the rest
        absent (RFC.md#indefinite-fill); shares the components.

        Example::

            >>> sf.full((2,), 1.).to_indefinite().nse()
            0
        """
        out = self._build(self._sf_layout, self._sf_size, self._sf_values,
                          _indefinite.placeholder(self.dtype, self.device),
                          indices=self._sf_indices, crow=self._sf_crow, col=self._sf_col,
                          coalesced=self._sf_coalesced, coalesced_flag=self._sf_coalesced_flag,
                          blocksize=self._sf_blocksize)
        return _indefinite.mark(out)

    def sparse_dim(self) -> int:
        """Number of sparse dimensions (2 for the compressed layouts)."""
        return self._sf_indices.shape[0] if self.layout == torch.sparse_coo else 2

    def dense_dim(self) -> int:
        """Number of dense (trailing) dimensions (a block's two dims are sparse;
        batch dims are neither, as in torch)."""
        return self._sf_values.dim() - (3 if self._sf_blocksize else 1) - self._batch_dim()

    def _batch_dim(self) -> int:
        """Number of leading batch dims of a batched compressed tensor (
        RFC.md#batched-compressed); 0 otherwise."""
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
        """torch's flag (RFC.md#stored-elements): True after ``coalesce()``, for op
        results, and for a constructor given ``is_coalesced=True`` or fewer
        than two elements; False for other freshly built tensors, even when
        their indices happen to be sorted.

        Example::

            >>> sf.sparse_coo_tensor([[0, 1]], [1., 2.], (3,)).is_coalesced()
            False
        """
        self._require(torch.sparse_coo, "is_coalesced")
        return self._sf_coalesced_flag

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

        return self._build(self.layout, self._sf_size, val(self._sf_values), val(self._sf_fill),
                           indices=idx(self._sf_indices), crow=idx(self._sf_crow),
                           col=idx(self._sf_col), coalesced=self._sf_coalesced,
                           coalesced_flag=self._sf_coalesced_flag, blocksize=self._sf_blocksize)

    # ---- printing (pickling and copying: creation/) -------------------------

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
        fill = ("fill_value=sf.indefinite" if self._sf_indefinite
                else field('fill_value', self._sf_fill))
        tail = f"size={self._sf_size}, nse={self.nse()}, {fill}, layout={self.layout}"
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
    here (RFC.md#compressed-components). The fill is stored in its canonical form
    (_fill.canonical, RFC.md#per-slice-fills).

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


# ---- the hot path (docs/design.md#hot-path) ------------------------------------------


def _build_like(self, *args, **kwargs) -> SparseFillTensor:
    """build(), the result indefinite when `self` is: the mixins'
    (conversions.py, gradients.py) and the copies' way to make a result."""
    return _indefinite.keep(self, build(*args, **kwargs))


SparseFillTensor._build = _build_like
