"""Which torch function does what on a SparseFillTensor.

`torch_function` is the __torch_function__ of SparseFillTensor. It looks the
callable up in three tables and otherwise refuses:
  1. METHODS: Tensor methods (and torch functions) that SparseFillTensor
     implements itself (to_dense, coalesce, clone, ...);
  2. ELEMENTWISE: the generated table (_generated_ops.py) of element-wise ops;
  3. PASSTHROUGH: metadata queries that the wrapper answers by itself
     (shape, dtype, device, dim, ...).
Anything else raises NotImplementedError naming the function: no torch
function ever computes on a SparseFillTensor as if its fill were 0.
`torch_dispatch` (below autograd) refuses every aten op but prim.layout.
"""
from __future__ import annotations

import numbers

import torch
from torch.overrides import resolve_name

from . import _generated_ops
from ._tensor import SparseFillTensor

_ops = torch.ops.sparsefill
T = torch.Tensor

# ---- 1. methods SparseFillTensor implements --------------------------------

_METHOD_NAMES = [
    "to_dense", "coalesce", "is_coalesced", "indices", "values", "_indices", "_values",
    "crow_indices", "col_indices", "sparse_dim", "dense_dim", "_nnz", "to_sparse",
    "to_sparse_coo", "to_sparse_csr", "clone", "detach", "to", "requires_grad_", "__repr__",
    "__reduce_ex__", "__deepcopy__",
]
METHODS = {getattr(T, n): getattr(SparseFillTensor, n) for n in _METHOD_NAMES}
METHODS[torch.clone] = SparseFillTensor.clone
METHODS[torch.detach] = SparseFillTensor.detach
_CASTS = {"float": torch.float32, "double": torch.float64, "half": torch.float16,
          "bfloat16": torch.bfloat16, "bool": torch.bool, "int": torch.int32,
          "long": torch.int64, "short": torch.int16, "char": torch.int8, "byte": torch.uint8,
          "cfloat": torch.complex64, "cdouble": torch.complex128}
for _name, _dtype in _CASTS.items():
    METHODS[getattr(T, _name)] = (lambda d: lambda self, memory_format=None: self.to(d))(_dtype)
METHODS[T.cpu] = lambda self, memory_format=None: self.to("cpu")
METHODS[T.__hash__] = lambda self: id(self)
METHODS[T.__format__] = lambda self, spec: format(repr(self), spec)

# ---- 3. metadata the wrapper answers itself ----------------------------------

PASSTHROUGH = {
    T.size, T.dim, T.ndimension, T.numel, T.nelement, T.element_size, T.is_floating_point,
    T.is_complex, T.get_device, T.__len__,
    T.shape.__get__, T.dtype.__get__, T.device.__get__, T.ndim.__get__, T.layout.__get__,
    T.is_sparse.__get__, T.is_sparse_csr.__get__, T.is_cuda.__get__, T.is_cpu.__get__,
    T.is_meta.__get__, T.is_quantized.__get__, T.is_mkldnn.__get__, T.is_nested.__get__,
    T.itemsize.__get__,
}

# ---- 2. element-wise ops (generated table) ----------------------------------

ELEMENTWISE: dict = {}
for _fn, _op in _generated_ops.ROUTES:
    ELEMENTWISE.setdefault(_fn, []).append(_op)


def _is_number(x) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, torch.Tensor)


def _extra_args(spec, kwargs, func):
    extra = dict(zip(spec["args"], spec["defaults"]))
    for key, value in kwargs.items():
        if key not in extra:
            raise NotImplementedError(
                f"torch_sparsefill: {resolve_name(func) or func} got keyword {key!r}, which "
                f"is not supported on SparseFillTensor")
        extra[key] = value
    return [extra[a] for a in spec["args"]]


def _coalesced(t: SparseFillTensor) -> SparseFillTensor:
    return t.coalesce() if t.layout == torch.sparse_coo else t


def _same_pattern(a: SparseFillTensor, b: SparseFillTensor) -> bool:
    if a.layout != b.layout:
        return False
    if a.layout == torch.sparse_csr:
        pairs = ((a._sf_crow, b._sf_crow), (a._sf_col, b._sf_col))
    else:
        pairs = ((a._sf_indices, b._sf_indices),)
    return all(x is y or (x.shape == y.shape and torch.equal(x, y)) for x, y in pairs)


def _try_elementwise(op_name, func, args, kwargs):
    """Call op `op_name` if the arguments fit its kind; else return None."""
    spec = _generated_ops.OPS[op_name]
    op = getattr(_ops, op_name)
    kind = spec["kind"]
    if kind == "unary":
        if len(args) != 1 or kwargs:
            return None
        a = _coalesced(args[0])
        values, fill = op(a._sf_values, a._sf_fill)
        return a._with(values, fill)
    if kind == "scalar":
        if len(args) != 2:
            return None
        a, other = args
        if not isinstance(a, SparseFillTensor) and spec["commutative"]:
            a, other = other, a
        if not (isinstance(a, SparseFillTensor) and _is_number(other)):
            return None
        a = _coalesced(a)
        values, fill = op(a._sf_values, a._sf_fill, other, *_extra_args(spec, kwargs, func))
        return a._with(values, fill)
    if kind == "binary":
        if len(args) != 2 or not all(isinstance(x, SparseFillTensor) for x in args):
            return None
        a, b = (_coalesced(x) for x in args)
        if a._sf_size != b._sf_size:
            raise RuntimeError(f"torch_sparsefill: {resolve_name(func)}: operands must have the "
                               f"same size (no broadcasting between sparse operands), got "
                               f"{a._sf_size} and {b._sf_size}")
        extra = _extra_args(spec, kwargs, func)
        if _same_pattern(a, b):
            same = getattr(_ops, op_name + "_same")
            values, fill = same(a._sf_values, a._sf_fill, b._sf_values, b._sf_fill, *extra)
            return a._with(values, fill)
        values, fill, indices = op(a._coo_indices(), a._sf_values, a._sf_fill, b._coo_indices(),
                                   b._sf_values, b._sf_fill, list(a._sf_size), *extra)
        return a._from_coo(a.layout, indices, values, fill)
    raise AssertionError(kind)


def _describe(args) -> str:
    return ", ".join(type(a).__name__ for a in args)


def torch_function(func, types, args, kwargs):
    method = METHODS.get(func)
    if method is not None:
        return method(*args, **kwargs)
    ops = ELEMENTWISE.get(func)
    if ops is not None:
        for op_name in ops:
            out = _try_elementwise(op_name, func, args, kwargs)
            if out is not None:
                return out
        raise NotImplementedError(
            f"torch_sparsefill: {resolve_name(func) or func} is not supported for arguments "
            f"({_describe(args)}){' with keywords ' + str(sorted(kwargs)) if kwargs else ''} "
            f"on SparseFillTensor yet")
    if func in PASSTHROUGH:
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)
    raise NotImplementedError(
        f"torch_sparsefill: {resolve_name(func) or getattr(func, '__name__', func)} has no "
        f"fill-value semantics yet, so it is refused rather than computed as if the fill "
        f"were 0; convert with .to_dense() if a dense result is what you want")


def torch_dispatch(func, types, args, kwargs):
    if func is torch.ops.prim.layout.default:
        return args[0]._sf_layout
    raise NotImplementedError(
        f"torch_sparsefill: {func} reached a SparseFillTensor below autograd; it has no "
        f"fill-value semantics yet (call .to_dense() for a dense computation)")


SparseFillTensor._route_function = staticmethod(torch_function)
SparseFillTensor._route_dispatch = staticmethod(torch_dispatch)
