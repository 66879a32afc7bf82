"""How a SparseFillTensor takes part in autograd (RFC.md#gradients): its
values and fill are the autograd leaves or results; ``requires_grad``,
``grad``, ``is_leaf`` and ``grad_fn`` answer for the pair, and ``_adopt`` is
every in-place op's last step. A mixin of the class (sparse_fill_tensor.py),
which builds results through its ``_build``.

Example::

    >>> A = sf.full((3,), 2., requires_grad=True)
    >>> (A * A).to_dense().sum().backward()
    >>> A.grad.to_dense()
    tensor([4., 4., 4.])
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import torch

from . import fill as _fill

if TYPE_CHECKING:
    from .sparse_fill_tensor import SparseFillTensor


class ComponentGradients:
    """SparseFillTensor's autograd surface, read off its values and fill."""

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
        least-squares projection onto this pattern (RFC.md#a-grad).
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
            # again (RFC.md#gradient-convention).
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
        """Become `out` in place, keeping this object's identity (RFC.md#in-place):
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
            out = self._build(out._sf_layout, out._sf_size, out._sf_values, out._sf_fill,
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

