"""The binary rule of two SparseFillTensors (RFC.md#union)
in one native merge: the union pattern and the op's values written
together, with no operand's values spread onto the union first.

It serves the common case exactly as the route computes it: plain 2-D CPU
operands (tensor/plain.py: coalesced, 0-d fill, no dense part) of one
float32, float64 or int64 dtype, an op whose C twin (sf_binop) computes
what ATen does in that dtype (add and sub with alpha 1, mul, float div
without rounding), and no gradient tracked, traced or transformed. Two CSR
operands merge by rows into CSR (``sparsefill::ewise_merge`` with the fills
as defaults); otherwise the COO merge (``sparsefill::union_binop``). The
result fill is the op on the fills, as the route's. Anything else returns
None and takes the route (union_values or union_plan and ATen).
"""
from __future__ import annotations

import torch

from ...ops import common as _common
from ...tensor import SparseFillTensor, build, is_plain

__all__ = ["merged"]

_ns = torch.ops.sparsefill

# sf_binop codes (sparsefill_core.h) of the ops whose term equals ATen's.
_PLUS, _MINUS, _TIMES, _DIV = 0, 1, 3, 4
_DTYPES = (torch.float32, torch.float64, torch.int64)


def _code(name: str, extra, floating: bool):
    """The sf_binop code of op `name` called with `extra`, or None."""
    if name in ("add", "sub"):
        alpha = extra[0]
        if type(alpha) not in (int, float) or alpha != 1:  # a bool or tensor alpha: the route
            return None
        return _PLUS if name == "add" else _MINUS
    if name == "mul":
        return _TIMES
    if name == "div" and floating and extra[0] is None:  # an int64 division gives floats
        return _DIV
    return None


def _served(a: SparseFillTensor, fill_b: torch.Tensor) -> bool:
    return (is_plain(a) and len(a._sf_size) == 2 and a.dtype in _DTYPES
            and a.device.type == "cpu" and a._sf_fill.dtype == a.dtype
            and fill_b.dtype == a.dtype and fill_b.dim() == 0
            # a subclass (fake or functional tensors while tracing): the route
            and type(a._sf_values) is torch.Tensor and type(a._sf_fill) is torch.Tensor)


def merged(op, a: SparseFillTensor, b: SparseFillTensor, fill_b: torch.Tensor, extra):
    """`op(a, b)` with b's fill `fill_b` by the native merge, or None where
    the route serves (same sizes, different patterns: the caller's checks)."""
    if a.dtype != b.dtype or not (_served(a, fill_b) and _served(b, fill_b)):
        return None
    code = _code(op.name, extra, a.dtype.is_floating_point)
    if code is None or torch.compiler.is_compiling() or \
            not _common.untracked(a._sf_values, a._sf_fill, b._sf_values, fill_b):
        return None
    va, fa, vb = a._sf_values, a._sf_fill, b._sf_values
    fill = op.same(va[:0], fa, vb[:0], fill_b, *extra)[1]  # the route's result fill
    if fill.dtype != a.dtype:
        return None
    size = a._sf_size
    if a._sf_layout == torch.sparse_csr and b._sf_layout == torch.sparse_csr:
        crow, col, values = _ns.ewise_merge(a._sf_crow, a._sf_col, va, b._sf_crow, b._sf_col, vb,
                                            size[1], code, fa, fill_b)
        return build(torch.sparse_csr, size, values, fill, crow=crow, col=col)
    indices, values = _ns.union_binop(a._coo_indices(), va, fa, b._coo_indices(), vb, fill_b,
                                      list(size), code)
    return build(a._sf_layout, size, values, fill, indices=indices)
