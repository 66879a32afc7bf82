"""Which torch function does what on a SparseFillTensor.

`torch_function` is the __torch_function__ of SparseFillTensor. It looks the
callable up in three tables and otherwise refuses:
  1. METHODS: Tensor methods (and torch functions) that SparseFillTensor
     implements itself (to_dense, coalesce, clone, ...);
  2. ELEMENTWISE / INPLACE_ROUTES: the generated tables (_generated_ops.py)
     of element-wise ops and their in-place forms;
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


def _cuda(self, device=None, non_blocking=False, memory_format=None):
    """A.cuda(device): every component on that GPU (the current one by default)."""
    if isinstance(device, int):
        device = torch.device("cuda", device)
    return self.to("cuda" if device is None else device, non_blocking=non_blocking)


METHODS[T.cuda] = _cuda
# x.where(condition, y) is torch.where(condition, x, y): the generated where op.
METHODS[T.where] = lambda self, condition, other: torch.where(condition, self, other)
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

ELEMENTWISE: dict = {}  # callable -> [(op name, reflected)]
for _fn, _op, _reflected in _generated_ops.ROUTES:
    ELEMENTWISE.setdefault(_fn, []).append((_op, _reflected))


def _is_number(x) -> bool:
    return isinstance(x, numbers.Number) and not isinstance(x, torch.Tensor)


def _name(func) -> str:
    return resolve_name(func) or getattr(func, "__name__", str(func))


def _bind(spec, func, rest, kwargs):
    """Map the call's extra positional and keyword arguments onto the op's
    YAML args (in order). Returns (values, inplace flag), or raises."""
    names = spec["args"]
    kwargs = dict(kwargs)
    inplace = bool(kwargs.pop("inplace", False))
    rest = list(rest)
    if len(rest) == len(names) + 1 and isinstance(rest[-1], bool) and \
            getattr(func, "__module__", "") == "torch.nn.functional":
        inplace = rest.pop()  # F.relu(x, True)
    if len(rest) > len(names):
        raise TypeError(f"{_name(func)}: too many arguments for SparseFillTensor")
    bound = dict(zip(names, rest))
    for key, value in kwargs.items():
        if key not in names:
            raise NotImplementedError(f"torch_sparsefill: {_name(func)} got keyword {key!r}, "
                                      f"which is not supported on SparseFillTensor")
        if key in bound:
            raise TypeError(f"{_name(func)}: got multiple values for argument {key!r}")
        bound[key] = value
    out = []
    for name, default in zip(names, spec["defaults"]):
        if name in bound:
            out.append(bound[name])
        elif name in spec["required"]:
            raise TypeError(f"{_name(func)}: missing required argument {name!r}")
        else:
            out.append(default)
    return out, inplace


_coalesced = SparseFillTensor._coalesced


def _same_pattern(a: SparseFillTensor, b: SparseFillTensor) -> bool:
    if a.layout != b.layout:
        return False
    if a.layout == torch.sparse_csr:
        pairs = ((a._sf_crow, b._sf_crow), (a._sf_col, b._sf_col))
    else:
        pairs = ((a._sf_indices, b._sf_indices),)
    return all(x is y or (x.shape == y.shape and torch.equal(x, y)) for x, y in pairs)


def _over_dense_part(a: SparseFillTensor, other: torch.Tensor) -> bool:
    """Does a strided `other` broadcast over a's dense part only?"""
    dense = tuple(a._sf_values.shape[1:])
    if other.dim() > len(dense):
        return False
    return all(o in (1, d) for o, d in zip(other.shape, dense[len(dense) - other.dim():]))


def _unary(op_name, spec, func, args, kwargs):
    if not args or not isinstance(args[0], SparseFillTensor):
        return NotImplemented
    extra, inplace = _bind(spec, func, args[1:], kwargs)
    if any(isinstance(x, torch.Tensor) for x in extra):
        return NotImplemented  # tensor options: a ternary op's form (clamp(x, t_min, t_max))
    a = _coalesced(args[0])
    values, fill = getattr(_ops, op_name)(a._sf_values, a._sf_fill, *extra)
    out = a._with(values, fill)
    return _assign(args[0], out, func) if inplace else out


def _binary(op_name, spec, func, args, kwargs, reflected):
    if len(args) < 2:
        return NotImplemented
    x, y = (args[1], args[0]) if reflected else (args[0], args[1])
    extra, inplace = _bind(spec, func, args[2:], kwargs)
    if any(isinstance(e, torch.Tensor) for e in extra):
        return NotImplemented  # e.g. lerp with a tensor weight: the ternary form
    sx, sy = isinstance(x, SparseFillTensor), isinstance(y, SparseFillTensor)
    if sx and sy:
        a, b = _coalesced(x), _coalesced(y)
        if a._sf_size != b._sf_size:
            raise RuntimeError(f"torch_sparsefill: {_name(func)}: operands must have the same "
                               f"size (no broadcasting between sparse operands), got "
                               f"{a._sf_size} and {b._sf_size}")
        if _same_pattern(a, b):
            values, fill = getattr(_ops, op_name + "_same")(a._sf_values, a._sf_fill,
                                                              b._sf_values, b._sf_fill, *extra)
            out = a._with(values, fill)
        else:
            values, fill, indices = getattr(_ops, op_name)(
                a._coo_indices(), a._sf_values, a._sf_fill, b._coo_indices(), b._sf_values,
                b._sf_fill, list(a._sf_size), *extra)
            out = a._from_coo(a.layout, indices, values, fill)
    elif sx or sy:
        a, other, reverse = (x, y, False) if sx else (y, x, True)
        a = _coalesced(a)
        if _is_number(other):
            if not spec["number"]:
                raise TypeError(f"{_name(func)}(): a Python number is not accepted as an operand "
                                f"(torch takes a tensor here), got {type(other).__name__}")
            values, fill = getattr(_ops, op_name + "_scalar")(a._sf_values, a._sf_fill, other,
                                                                reverse, *extra)
        elif isinstance(other, torch.Tensor) and other.layout == torch.strided:
            if not _over_dense_part(a, other):
                if inplace:
                    raise RuntimeError(f"torch_sparsefill: in-place {_name(func)} with a strided "
                                       f"operand that covers the sparse dims would densify")
                # Broadcasts over the sparse dims too: the result is dense.
                dense_args = [t.to_dense() if isinstance(t, SparseFillTensor) else t for t in args]
                return func(*dense_args, **kwargs)
            values, fill = getattr(_ops, op_name + "_dense")(a._sf_values, a._sf_fill,
                                                               other.to(a.device), reverse, *extra)
        else:
            return NotImplemented
        out = a._with(values, fill)
    else:
        return NotImplemented
    if inplace:
        if reflected or not sx:
            raise RuntimeError(f"torch_sparsefill: in-place {_name(func)} needs the "
                               f"SparseFillTensor first")
        return _assign(x, out, func)
    return out


def _ternary(op_name, spec, func, args, kwargs):
    """Three operands on the union of their patterns. Numbers and tensors that
    broadcast over the dense part become operands with no stored element (the
    number or tensor is their fill), so one op serves every combination."""
    names = spec["params"]
    if len(args) > len(names):
        return NotImplemented
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names or key in bound:
            return NotImplemented
        bound[key] = value
    if not spec["number"] and any(_is_number(v) for v in bound.values()):
        return NotImplemented  # torch takes tensors here, or all-number options (unary form)
    for name in names:
        if bound.get(name) is None:
            if name not in spec["missing"]:
                return NotImplemented
            bound[name] = spec["missing"][name]
    operands = [bound[n] for n in names]
    ref = next((o for o in operands if isinstance(o, SparseFillTensor)), None)
    if ref is None:
        return NotImplemented
    dense_shape = tuple(ref._sf_values.shape[1:])
    sparse_dim = ref.sparse_dim()
    parts = []
    for o in operands:
        if isinstance(o, SparseFillTensor):
            if o._sf_size != ref._sf_size:
                raise RuntimeError(f"torch_sparsefill: {_name(func)}: operands must have the same "
                                   f"size, got {o._sf_size} and {ref._sf_size}")
            o = _coalesced(o)
            parts += [o._coo_indices(), o._sf_values, o._sf_fill]
            continue
        if _is_number(o):
            o = torch.tensor(o, device=ref.device)
        if not isinstance(o, torch.Tensor) or o.layout != torch.strided:
            return NotImplemented
        if not _over_dense_part(ref, o):
            dense = {n: (v.to_dense() if isinstance(v, SparseFillTensor) else v)
                     for n, v in bound.items()}
            return func(*[dense[n] for n in names])
        empty_values = o.new_zeros((0,) + dense_shape)
        parts += [torch.zeros(sparse_dim, 0, dtype=torch.int64, device=ref.device),
                  empty_values, o]
    values, fill, indices = getattr(_ops, op_name)(*parts, list(ref._sf_size))
    return ref._from_coo(ref.layout, indices, values, fill)


def _assign(target: SparseFillTensor, out: SparseFillTensor, func):
    """Write `out` into `target` in place; the pattern and dtype must not change."""
    if target.layout == torch.sparse_coo and not target._sf_coalesced:
        c = target.coalesce()  # same elements: adopt the coalesced form first
        target._sf_indices, target._sf_values, target._sf_coalesced = \
            c._sf_indices, c._sf_values, True
    if out.dtype != target.dtype:
        raise RuntimeError(f"{_name(func)}: result type {out.dtype} can't be cast to the "
                           f"desired output type {target.dtype}")
    if out.layout != target.layout or not _same_pattern(out, target):
        raise RuntimeError(f"torch_sparsefill: in-place {_name(func)} would change the sparsity "
                           f"pattern; use the out-of-place form")
    if out._sf_fill.shape != target._sf_fill.shape:
        raise RuntimeError(f"torch_sparsefill: in-place {_name(func)} would change the shape "
                           f"of the fill from {tuple(target._sf_fill.shape)} to "
                           f"{tuple(out._sf_fill.shape)}")
    target._sf_values.copy_(out._sf_values)
    target._sf_fill.copy_(out._sf_fill)
    return target


def _elementwise(func, args, kwargs, routes, inplace=False):
    for op_name, reflected in routes:
        spec = _generated_ops.OPS[op_name]
        kw = dict(kwargs, inplace=True) if inplace else kwargs
        if spec["kind"] == "unary":
            out = _unary(op_name, spec, func, args, kw)
        elif spec["kind"] == "ternary":
            out = NotImplemented if inplace else _ternary(op_name, spec, func, args, kw)
        else:
            out = _binary(op_name, spec, func, args, kw, reflected)
        if out is not NotImplemented:
            return out
    raise NotImplementedError(
        f"torch_sparsefill: {_name(func)} is not supported for arguments "
        f"({_describe(args)}){' with keywords ' + str(sorted(kwargs)) if kwargs else ''} "
        f"on SparseFillTensor yet")


INPLACE_ROUTES: dict = {}  # in-place callable -> [(op name, reflected)]
for _fn, _op in _generated_ops.INPLACE_ROUTES:
    INPLACE_ROUTES.setdefault(_fn, []).append((_op, False))


def _describe(args) -> str:
    return ", ".join(type(a).__name__ for a in args)


def torch_function(func, types, args, kwargs):
    method = METHODS.get(func)
    if method is not None:
        return method(*args, **kwargs)
    routes = ELEMENTWISE.get(func)
    if routes is not None:
        return _elementwise(func, args, kwargs, routes)
    routes = INPLACE_ROUTES.get(func)
    if routes is not None:
        return _elementwise(func, args, kwargs, routes, inplace=True)
    if func in PASSTHROUGH:
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **kwargs)
    raise NotImplementedError(
        f"torch_sparsefill: {_name(func)} has no fill-value semantics yet, so it is refused "
        f"rather than computed as if the fill were 0; convert with .to_dense() if a dense "
        f"result is what you want")


def torch_dispatch(func, types, args, kwargs):
    if func is torch.ops.prim.layout.default:
        return args[0]._sf_layout
    raise NotImplementedError(
        f"torch_sparsefill: {func} reached a SparseFillTensor below autograd; it has no "
        f"fill-value semantics yet (call .to_dense() for a dense computation)")


SparseFillTensor._route_function = staticmethod(torch_function)
SparseFillTensor._route_dispatch = staticmethod(torch_dispatch)
