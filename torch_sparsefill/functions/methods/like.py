"""New tensors shaped after a SparseFillTensor: ``torch.zeros_like`` and the
other ``*_like`` factories and the ``new_*`` methods (README "Moving from
torch.sparse").

A sparse result has no stored element; the value asked for is its fill, so
``zeros_like(A).to_dense()`` is ``zeros_like(A.to_dense())`` whatever A's
fill. Torch keeps A's pattern in some of these (``ones_like`` of a CSR tensor
writes ones at the stored positions and leaves zeros elsewhere, which is not
the dense ``ones_like``); the dense result is the rule here (RFC.md#stored-elements).
``empty_like`` and ``new_empty`` give zeros, as torch's sparse ones do.
Random ``*_like`` factories are refused (not routed): a random dense tensor
has no sparse pattern.
"""
from __future__ import annotations

import torch

from ...tensor import SparseFillTensor, build

T = torch.Tensor

__all__: list = []

_LAYOUTS = (torch.sparse_coo, torch.sparse_csr)


def _without_elements(size, sparse_dim, layout, value, dtype, device,
                      requires_grad) -> torch.Tensor:
    """Every element `value`: a SparseFillTensor with no stored element, or a
    strided tensor when `layout` is torch.strided."""
    size = tuple(int(s) for s in size)
    if layout == torch.strided:
        return torch.full(size, value, dtype=dtype, device=device, requires_grad=requires_grad)
    if layout not in _LAYOUTS:
        raise NotImplementedError(f"layout={layout}: only torch.sparse_coo, torch.sparse_csr "
                                  f"and torch.strided are supported")
    if layout == torch.sparse_csr and sparse_dim < 2:
        raise RuntimeError(f"layout=torch.sparse_csr needs 2 sparse dimensions, got size {size} "
                           f"with {sparse_dim}")
    if requires_grad and not (dtype.is_floating_point or dtype.is_complex):
        raise RuntimeError(f"requires_grad=True needs a floating point or complex dtype, got "
                           f"{dtype}")
    if layout == torch.sparse_csr and sparse_dim > 2:
        # leading dims beyond two are batch dims (RFC.md#batched-compressed), as torch's
        # new_zeros((b, m, n)) of a CSR tensor makes a batched CSR tensor
        out = _without_elements(size, sparse_dim, torch.sparse_coo, value, dtype, device,
                                False).to_sparse_csr()
        return out.requires_grad_() if requires_grad else out
    values = torch.zeros((0,) + size[sparse_dim:], dtype=dtype, device=device)
    fill = torch.full((), value, dtype=dtype, device=device)
    if requires_grad:
        values.requires_grad_()
        fill.requires_grad_()
    indices = torch.zeros(sparse_dim, 0, dtype=torch.int64, device=device)
    return build(layout, size, values, fill, indices=indices)


def _like(value_of):
    """The handler of one ``torch.*_like`` factory; `value_of(args)` is the
    value of every element of the result."""
    def like(input, *args, fill_value=None, dtype=None, layout=None, device=None,
             requires_grad=False, memory_format=None, pin_memory=False):
        value = value_of(args if fill_value is None else args + (fill_value,))
        # sparse dims as COO counts them (a batched CSR input's batch dims too)
        return _without_elements(input.shape, input.dim() - input.dense_dim(),
                                 layout or input.layout, value,
                                 dtype or input.dtype, device or input.device, requires_grad)
    return like


def _new(value_of):
    """The handler of one ``Tensor.new_*`` method: the size given, the
    layout, dtype and device of ``self`` (all dims sparse, as torch)."""
    def new(self, *args, fill_value=None, dtype=None, layout=None, device=None,
            requires_grad=False, pin_memory=False):
        if args and isinstance(args[0], (tuple, list, torch.Size)):
            size, rest = tuple(args[0]), args[1:]
        else:
            count = sum(1 for a in args if isinstance(a, int))
            size, rest = tuple(args[:count]), args[count:]
        value = value_of(rest if fill_value is None else rest + (fill_value,))
        return _without_elements(size, len(size), layout or self.layout, value,
                                 dtype or self.dtype, device or self.device, requires_grad)
    return new


def _new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None,
                pin_memory=False):
    """``A.new_tensor(data)``: a strided copy of `data` with A's dtype and
    device, as torch gives for a sparse ``self``."""
    if isinstance(data, SparseFillTensor):
        raise NotImplementedError("new_tensor(data): data is a SparseFillTensor; use "
                                  "data.clone()")
    if isinstance(data, torch.Tensor):
        data = data.detach()
    out = torch.tensor(data, dtype=dtype or self.dtype, device=device or self.device)
    return out.requires_grad_(requires_grad)


def _zero(args):
    if args:
        raise TypeError("zeros_like()/empty_like()/new_zeros()/new_empty(): unexpected value "
                        "argument")
    return 0


def _one(args):
    if args:
        raise TypeError("ones_like()/new_ones(): unexpected value argument")
    return 1


def _given(args):
    if len(args) != 1:
        raise TypeError("full_like()/new_full(): expected one fill_value")
    return args[0]


ROUTES = {
    torch.zeros_like: _like(_zero),
    torch.empty_like: _like(_zero),
    torch.ones_like: _like(_one),
    torch.full_like: _like(_given),
    T.new_zeros: _new(_zero),
    T.new_empty: _new(_zero),
    T.new_ones: _new(_one),
    T.new_full: _new(_given),
    T.new_tensor: _new_tensor,
}
