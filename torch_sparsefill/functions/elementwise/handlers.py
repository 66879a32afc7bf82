"""Element-wise ops (RFC.md#elementwise): the routes of the generated table
(ops/elementwise.py, from tools/codegen/elementwise.yaml) turned into this
family's routing table.

Each op's dispatcher handles (``torch.ops.sparsefill.<op>.default`` and its
``_same``/``_scalar``/``_dense`` variants) are resolved once, at import, so a
call looks nothing up by name. A unary op maps values and fill; a binary op
picks its variant by the operands (same pattern, union of patterns, a Python
number, a strided tensor over the dense part); a ternary op works on the
union of three patterns. In-place forms compute out of place and write back
(into the components when the pattern stays, else by replacing them).
"""
from __future__ import annotations

import functools

import torch

from ...tensor import args as _args
from ...tensor import fill as _fill
from ...ops import elementwise as _generated_ops
from ...tensor.fill import full_rank
from ...tensor import SparseFillTensor, build
from . import by_hand as _by_hand
from .merged import merged as _merged
from .operands import (_ask_torch, _call_dtype, _covered, _is_bool, _only_half, _past_dead_fill,
                       _promoted, _promoted_plain)

__all__: list = []

_ns = torch.ops.sparsefill


class Op:
    """One generated op: its YAML spec and its resolved dispatcher handles
    (`main`: the unary op, or the union form of a binary or ternary op)."""

    __slots__ = ("name", "spec", "kind", "main", "same", "scalar", "dense")

    def __init__(self, name: str, spec: dict):
        self.name, self.spec, self.kind = name, spec, spec["kind"]
        self.main = getattr(_ns, name).default
        binary = self.kind == "binary"
        self.same = getattr(_ns, name + "_same").default if binary else None
        self.dense = getattr(_ns, name + "_dense").default if binary else None
        self.scalar = getattr(_ns, name + "_scalar").default if binary and spec["number"] \
            else None


def _bind(spec, func, rest, kwargs):
    """Map the call's extra positional and keyword arguments onto the op's
    YAML args (in order). Returns (values, inplace flag), or raises."""
    names = spec["args"]
    if not rest and not kwargs:  # the common call: no options
        if spec["required"]:
            raise TypeError(f"{_args.name(func)}: missing required argument "
                            f"{spec['required'][0]!r}")
        return spec["defaults"], False
    kwargs = dict(kwargs)
    inplace = bool(kwargs.pop("inplace", False))
    rest = list(rest)
    if len(rest) == len(names) + 1 and isinstance(rest[-1], bool) and \
            getattr(func, "__module__", "") == "torch.nn.functional":
        inplace = rest.pop()  # F.relu(x, True)
    if len(rest) > len(names):
        raise TypeError(f"{_args.name(func)}: too many arguments for SparseFillTensor")
    bound = dict(zip(names, rest))
    for key, value in kwargs.items():
        if key not in names:
            raise NotImplementedError(f"torch_sparsefill: {_args.name(func)} got keyword "
                                      f"{key!r}, which is not supported on SparseFillTensor")
        if key in bound:
            raise TypeError(f"{_args.name(func)}: got multiple values for argument {key!r}")
        bound[key] = value
    out = []
    for name, default in zip(names, spec["defaults"]):
        if name in bound:
            out.append(bound[name])
        elif name in spec["required"]:
            raise TypeError(f"{_args.name(func)}: missing required argument {name!r}")
        else:
            out.append(default)
    return out, inplace


def same_pattern(a: SparseFillTensor, b: SparseFillTensor) -> bool:
    """Whether two coalesced tensors store the same positions (and layout)."""
    if a.layout != b.layout:
        return False
    if a.layout == torch.sparse_csr:
        pairs = ((a._sf_crow, b._sf_crow), (a._sf_col, b._sf_col))
    else:
        pairs = ((a._sf_indices, b._sf_indices),)
    if torch.compiler.is_compiling():
        # A tracer reads no data and compares no traced nse (a guard, or an
        # error on a data-dependent one): the union path gives one pattern's
        # result too.
        return all(x is y for x, y in pairs)
    return all(x is y or (x.shape == y.shape and torch.equal(x, y)) for x, y in pairs)


def _over_dense_part(a: SparseFillTensor, other: torch.Tensor) -> bool:
    """Does a strided `other` broadcast over a's dense part only?"""
    dense = tuple(a._sf_values.shape[1:])
    if other.dim() > len(dense):
        return False
    return all(o in (1, d) for o, d in zip(other.shape, dense[len(dense) - other.dim():]))


def _broadcasts_into(small, big) -> bool:
    """Does `small`'s shape broadcast to `big`'s (same rank or less)?"""
    if small.dim() > big.dim():
        return False
    return all(s in (1, b) for s, b in zip(small.shape, big.shape[big.dim() - small.dim():]))


def _per_slice_fill(a: SparseFillTensor, other: torch.Tensor):
    """`other` (strided) as a full-rank per-slice fill of `a` (RFC.md#per-slice-fills)
    when it broadcasts to a's shape and the fill it makes with a's own leaves
    at least one sparse dim of size > 1 unvaried (so it stays smaller than
    the dense tensor: a row (m, 1) or column (1, n) vector); else None."""
    if not _broadcasts_into(other, a):
        return None
    full = other.reshape((1,) * (a.dim() - other.dim()) + tuple(other.shape))
    own = full_rank(a._sf_fill, a.dim())
    sd = a.sparse_dim()
    combined = torch.broadcast_shapes(tuple(full.shape[:sd]), tuple(own.shape[:sd]))
    if not any(c == 1 and n > 1 for c, n in zip(combined, a.shape[:sd])):
        return None
    return full.to(a.device)


def _unary(op: Op, func, args, kwargs, reflected, inplace):
    if reflected:
        args, kwargs = _tensor_first(args, kwargs)
    if not args or not isinstance(args[0], SparseFillTensor):
        return NotImplemented
    extra, inplace_kw = _bind(op.spec, func, args[1:], kwargs)
    if extra and any(isinstance(x, torch.Tensor) for x in extra):
        return NotImplemented  # tensor options: a ternary op's form (clamp(x, t_min, t_max))
    a = args[0]._coalesced()
    values, fill = op.main(a._sf_values, a._live_fill(), *extra)
    out = a._with(values, fill)
    return _assign(args[0], out, func) if inplace or inplace_kw else out


def _tensor_first(args, kwargs):
    """A reflected unary callable's arguments with the tensor first: it takes
    the op's args before the tensor (torch.polygamma(n, input) is
    Tensor.polygamma(input, n)); the tensor is the last positional argument
    or the keyword `input`."""
    if "input" in kwargs:
        kwargs = dict(kwargs)
        return (kwargs.pop("input"),) + tuple(args), kwargs
    if not args:
        return args, kwargs
    return (args[-1],) + tuple(args[:-1]), kwargs


def _binary(op: Op, func, args, kwargs, reflected, inplace):
    if len(args) < 2:
        return NotImplemented
    x, y = (args[1], args[0]) if reflected else (args[0], args[1])
    extra, inplace_kw = _bind(op.spec, func, args[2:], kwargs)
    inplace = inplace or inplace_kw
    if extra and any(isinstance(e, torch.Tensor) for e in extra):
        return NotImplemented  # e.g. lerp with a tensor weight: the ternary form
    sx, sy = isinstance(x, SparseFillTensor), isinstance(y, SparseFillTensor)
    if any(_is_bool(o) for o in (x, y)):
        _ask_torch(func, args, kwargs)
    if sx and sy:
        a, b = x._coalesced(), y._coalesced()
        if a._sf_size != b._sf_size and _broadcasts_into(b, a) != _broadcasts_into(a, b):
            # A vector of one row/column per slice (A.sum(1, keepdim=True)):
            # its dense form is as small as a per-slice fill.
            small = 1 if _broadcasts_into(b, a) else 0
            dense_args = list(args)
            pos = small if not reflected else 1 - small
            dense_args[pos] = dense_args[pos].to_dense()
            return _binary(op, func, tuple(dense_args), kwargs, reflected, inplace)
        if a._sf_size != b._sf_size:
            raise _size_mismatch(func, a._sf_size, b._sf_size)
        if a.dense_dim() != b.dense_dim():
            # sparse dims differ (a hybrid and a plain operand of one shape):
            # the merge needs one pattern form, so both index every dim
            a, b = a._all_sparse(), b._all_sparse()

        def both(fb):
            refill = lambda mask: _fill_only(op, a, [(a._sf_values, mask(a._live_fill())),
                                                     (b._sf_values, mask(fb))], extra)
            if same_pattern(a, b):
                values, fill = op.same(a._sf_values, a._live_fill(), b._sf_values, fb, *extra)
                if fill.requires_grad and _fill.is_per_slice(fill, values.dim() - 1):
                    # slices of the fill that cover nothing leave the graph, as
                    # on a union (seed 788156: atan2's derivative there is NaN)
                    return _union(a.layout, a._sf_size, values, fill, a._coo_indices(), refill)
                return a._with(values, fill)
            out = _merged(op, a, b, fb, extra)  # the native merge, where it serves
            if out is not None:
                return out
            values, fill, indices = op.main(a._coo_indices(), a._sf_values, a._live_fill(),
                                            b._coo_indices(), b._sf_values, fb,
                                            list(a._sf_size), *extra)
            return _union(a.layout, a._sf_size, values, fill, indices, refill)
        try:
            out = both(b._live_fill())
        except RuntimeError as e:
            # Integer division by a zero fill: torch raises, but only rightly
            # when the fill is some element's; one that covers no element
            # (every element of b stored) is in no dense element, so it is
            # replaced by 1 and the (equally unseen) result fill computed.
            if "ZeroDivisionError" not in str(e):
                raise
            out = both(_dead_fill_as_one(b, e))
    elif sx or sy:
        a, other, reverse = (x, y, False) if sx else (y, x, True)
        a = a._coalesced()
        if _args.is_number(other):
            if op.scalar is None:
                raise TypeError(f"{_args.name(func)}(): a Python number is not accepted as an "
                                f"operand (torch takes a tensor here), got "
                                f"{type(other).__name__}")
            if op.name == "pow" and not reverse:
                _check_pow_number(a, other)
            values, fill = _dividing(
                lambda fa, o: op.scalar(a._sf_values, fa, o, reverse, *extra), a, other, 1,
                reverse)
        elif isinstance(other, torch.Tensor) and other.layout == torch.strided:
            if other.dtype != a.dtype:
                _ask_torch(func, args, kwargs)  # e.g. lerp refuses an `end` of another dtype
            if other.dtype != torch.bool:  # a mask or condition keeps its dtype
                a, other = _promoted(a, other)
            if not _over_dense_part(a, other) and _per_slice_fill(a, other) is not None:
                # Broadcasts along some sparse dims: an operand with nothing
                # stored whose fill is `other` (a per-slice fill), merged.
                full = _per_slice_fill(a, other)
                nothing = [torch.zeros(a.sparse_dim(), 0, dtype=torch.int64, device=a.device),
                           full.new_zeros((0,) + tuple(a._sf_values.shape[1:])), full]
                mine = [a._coo_indices(), a._sf_values, a._sf_fill]
                first, second = (nothing, mine) if reverse else (mine, nothing)
                values, fill, indices = op.main(*first, *second, list(a._sf_size), *extra)
                pair = [(nothing[1], full), (a._sf_values, a._sf_fill)]
                pair = pair if reverse else pair[::-1]
                out = _union(a.layout, a._sf_size, values, fill, indices,
                             lambda mask: _fill_only(op, a, [(v, mask(f)) for v, f in pair], extra))
                if inplace:
                    return _assign(x, out, func)
                return out
            if not _over_dense_part(a, other):
                if inplace:
                    raise NotImplementedError(f"torch_sparsefill: in-place {_args.name(func)} "
                                              f"with a strided operand that covers the sparse "
                                              f"dims would densify; use the out-of-place form")
                # Broadcasts over the sparse dims too: the result is dense.
                dense_args = [t.to_dense() if isinstance(t, SparseFillTensor) else t for t in args]
                return func(*dense_args, **kwargs)
            values, fill = _dividing(
                lambda fa, o: op.dense(a._sf_values, fa, o, reverse, *extra), a,
                other.to(a.device), torch.ones_like(other, device=a.device), reverse)
        else:
            return NotImplemented
        out = a._with(values, fill)
    else:
        return NotImplemented
    if inplace:
        if reflected or not sx:
            raise NotImplementedError(f"torch_sparsefill: in-place {_args.name(func)} needs the "
                                      f"SparseFillTensor first")
        return _assign(x, out, func)
    return out


def _ternary(op: Op, func, args, kwargs, reflected, inplace):
    """Three operands on the union of their patterns. Numbers and tensors that
    broadcast over the dense part become operands with no stored element (the
    number or tensor is their fill), so one op serves every combination."""
    spec = op.spec
    names = spec["params"]
    if inplace or len(args) > len(names):
        return NotImplemented
    bound = dict(zip(names, args))
    for key, value in kwargs.items():
        if key not in names or key in bound:
            return NotImplemented
        bound[key] = value
    if not spec["number"] and any(_args.is_number(v) for v in bound.values()):
        return NotImplemented  # torch takes tensors here, or all-number options (unary form)
    given = {n: v for n, v in bound.items() if v is not None}
    ref = next((given[n] for n in names if isinstance(given.get(n), SparseFillTensor)), None)
    if ref is None:
        return NotImplemented
    if op.name == "clamp_tensor" and "input" in given and len(given) == 2:
        # One bound: torch's derivatives of clamp(x, min) are clamp_min's, not
        # those of clamp(x, min, +inf) (which differ where min is +inf, and
        # in forward mode where x is NaN).
        bound = "min" if "min" in given else "max"
        name = f"clamp_{bound}"  # and its callable, which _binary's fallbacks call
        return _binary(named_op(name), getattr(torch, name), (given["input"], given[bound]),
                       {}, False, False)
    for name in names:
        if bound.get(name) is None:
            if name not in spec["missing"]:
                return NotImplemented
            bound[name] = _stand_in(spec["missing"][name], given.values(), ref.device)
    half = _only_half(bound.values())
    if half is not None:
        # Three operands, one rounding: in float32 as ATen's opmath (x + t * u
        # would overflow t * u in the half dtype where dense's does not).
        wide = [v.to(torch.float32) if isinstance(v, torch.Tensor) and v.dtype == half else v
                for v in (bound[n] for n in names)]
        out = _ternary(op, func, tuple(wide), {}, reflected, inplace)
        return out if out is NotImplemented or out.dtype != torch.float32 else out.to(half)
    operands = _promoted_plain(func, [bound[n] for n in names])
    dense_shape = tuple(ref._sf_values.shape[1:])
    sparse_dim = ref.sparse_dim()
    parts = []
    for o in operands:
        if isinstance(o, SparseFillTensor):
            if o._sf_size != ref._sf_size:
                raise _size_mismatch(func, o._sf_size, ref._sf_size)
            o = o._coalesced()
            parts += [o._coo_indices(), o._sf_values, o._live_fill()]
            continue
        if _args.is_number(o):
            # a number does not widen (torch.where(c, int32, 0) is int32):
            # the dtype torch gives the call, a 0-d tensor of it
            o = torch.tensor(o, dtype=_call_dtype(func, operands), device=ref.device)
        if not isinstance(o, torch.Tensor) or o.layout != torch.strided:
            return NotImplemented
        if not _over_dense_part(ref, o):
            # Broadcasts over the sparse dims too: the result is dense, torch's
            # call on the dense operands (omitted ones omitted again).
            return func(*[v.to_dense() if isinstance(v, SparseFillTensor) else v
                          for v in (given.get(n) for n in names)])
        empty_values = o.new_zeros((0,) + dense_shape)
        parts += [torch.zeros(sparse_dim, 0, dtype=torch.int64, device=ref.device),
                  empty_values, o]
    values, fill, indices = op.main(*parts, list(ref._sf_size))

    def refill(mask):  # the fill from the operands' fills alone, all masked (_union):
        # a plain operand too, or its gradient meets the others' dead fills
        nothing = torch.zeros(sparse_dim, 0, dtype=torch.int64, device=ref.device)
        alone = []
        for k in range(0, len(parts), 3):
            alone += [nothing, parts[k + 1][:0], mask(parts[k + 2])]
        return op.main(*alone, list(ref._sf_size))[1]
    return _union(ref.layout, ref._sf_size, values, fill, indices, refill)


def _fill_only(op: Op, ref: SparseFillTensor, operands, extra) -> torch.Tensor:
    """The fill `op.main` computes from the operands' fills alone, both
    patterns empty: `operands` is ((values, fill), (values, fill)), each
    values tensor giving its operand's dtype and dense shape."""
    nothing = torch.zeros(ref.sparse_dim(), 0, dtype=torch.int64, device=ref.device)
    parts = [x for v, f in operands for x in (nothing, v.new_zeros((0,) + tuple(v.shape[1:])), f)]
    return op.main(*parts, list(ref._sf_size), *extra)[1]


def _union(layout, size, values, fill, indices, refill=None) -> SparseFillTensor:
    """The result of an op on the union of its operands' patterns (coalesced
    COO `indices`). Where that union stores every position a fill element
    covers, that element is in no dense element, though each operand's fill
    was: its gradient must be 0, yet the op's derivative at the fills
    (atan2's at (0, 0) is 0/0) times that 0 makes the second derivative nan
    where dense has none (fuzzer seeds 107562, 208137). A whole fill that
    covers nothing is cut from the graph. A per-slice fill some of whose
    slices cover nothing is recomputed by `refill(mask)` from the operands'
    fills with `mask` cutting those slices' graph before the op, so its
    derivative there is never formed (a cut after the op would still meet
    it)."""
    if fill.requires_grad:
        sparse_dim = indices.shape[0]
        if not _fill.is_per_slice(fill, values.dim() - 1):
            count = _fill.unspecified_per_dense_part_element(fill, size, sparse_dim,
                                                             values.shape[0])
            if isinstance(count, torch.SymInt):  # traced: the test as data, no guard
                covered = torch.full((), count, dtype=torch.int64, device=fill.device) > 0
                fill = torch.where(covered, fill, fill.detach())
            elif count == 0:
                fill = fill.detach()
        elif fill.numel() == 0:
            # a per-slice fill of no element covers nothing (and torch's own
            # clamp backward fails to broadcast into a 0-d bound then: seed 710690)
            fill = fill.detach()
        elif refill is not None and not torch.compiler.is_compiling():
            covered = _fill.unspecified_per_element(fill, size, indices).to(fill.device) > 0
            if not bool(covered.all()):
                fill = refill(lambda f: torch.where(
                    covered, *(lambda g: (g, g.detach()))(torch.broadcast_to(f, fill.shape))))
    return build(layout, size, values, fill, indices=indices)


def _dividing(compute, a: SparseFillTensor, other, one, reverse):
    """compute(fill, other) for a SparseFillTensor `a` and a number or strided
    `other`; on an integer ZeroDivisionError from a's fill that covers no
    element (which no dense element divides by or has), recomputed with that
    fill element 1 (a divisor) or, with nothing stored, `other` as `one`."""
    cut = _past_dead_fill(compute, a, other)
    if cut is not None:
        return cut
    try:
        return compute(a._live_fill(), other)
    except RuntimeError as e:
        if "ZeroDivisionError" not in str(e):
            raise
        if reverse:  # a divides: its dead zero fill
            return compute(_dead_fill_as_one(a, e), other)
        if a._sf_values.numel() == 0 and not _covered(a).any():
            return compute(a._live_fill(), one)  # no element at all: nothing divides
        raise


def _dead_fill_as_one(b: SparseFillTensor, error: Exception) -> torch.Tensor:
    """b's fill with 1 where it covers no element; re-raises `error` when a
    zero of it covers some element (dense torch divides by it too)."""
    f = b._live_fill()
    covered = _covered(b)
    if bool(((f == 0) & (covered != 0)).any()):
        raise error
    return torch.where(covered != 0, f, torch.ones_like(f))


def _check_pow_number(a: SparseFillTensor, exponent) -> None:
    """torch.pow(int_tensor, -1) raises; the op computes on the number as a
    wrapped tensor, where torch does not check, so ask torch on an empty
    tensor of a's dtype (it raises exactly as for the dense tensor)."""
    if not (a.dtype.is_floating_point or a.dtype.is_complex):
        torch.pow(torch.empty(0, dtype=a.dtype), exponent)


@functools.cache
def named_op(name: str) -> Op:
    """The generated op `name`, for routes that pick another op than their own."""
    return Op(name, _generated_ops.OPS[name])


def _size_mismatch(func, a, b) -> Exception:
    """Two SparseFillTensors of different sizes: NotImplementedError where
    torch would broadcast them (not supported yet), torch's RuntimeError
    where it could not."""
    try:
        torch.broadcast_shapes(a, b)
    except RuntimeError:
        return RuntimeError(f"torch_sparsefill: {_args.name(func)}: operands must have the "
                            f"same size, got {tuple(a)} and {tuple(b)}, which do not broadcast")
    return NotImplementedError(f"torch_sparsefill: {_args.name(func)}: operands must have the "
                               f"same size (no broadcasting between sparse operands yet), got "
                               f"{tuple(a)} and {tuple(b)}")


def _floating(operands) -> bool:
    """Whether torch would compute on these operands in a floating dtype."""
    tensors = [o for o in operands if isinstance(o, torch.Tensor)]
    return any(t.dtype.is_floating_point or t.dtype.is_complex for t in tensors) or \
        any(isinstance(o, float) for o in operands)


def _stand_in(missing: float, operands, device):
    """The value of an omitted operand (an infinity from the YAML's
    `missing`), in the dtype torch computes in: for integral operands the
    dtype's own bound, so that the stand-in does not promote them to float."""
    if _floating(operands) or abs(missing) != float("inf"):
        return missing
    dtype = functools.reduce(torch.promote_types, [o.dtype for o in operands])
    info = torch.iinfo(dtype) if dtype != torch.bool else None
    value = (missing > 0) if info is None else (info.max if missing > 0 else info.min)
    return torch.tensor(value, dtype=dtype, device=device)


def _assign(target: SparseFillTensor, out: SparseFillTensor, func):
    """Write `out` into `target` in place (RFC.md#in-place): into its values and
    fill when the pattern and fill shape are unchanged and autograd is not
    involved (the components keep their identity, so an optimiser holding
    them sees a no_grad update), otherwise by replacing its components, as
    torch's sparse in-place ops do."""
    if out.dtype != target.dtype and torch.can_cast(out.dtype, target.dtype) and \
            out.dtype.is_complex == target.dtype.is_complex and \
            out.dtype.is_floating_point == target.dtype.is_floating_point:
        out = out.to(target.dtype)  # torch's in-place rule: computed wide, cast back
    if out.dtype != target.dtype:
        raise RuntimeError(f"{_args.name(func)}: result type {out.dtype} can't be cast to the "
                           f"desired output type {target.dtype}")
    # Into the components only outside autograd: inside it the op may have
    # saved them for its backward (torch saves what an in-place op needs).
    graph = torch.is_grad_enabled() and (out.requires_grad or target.requires_grad)
    if (not graph and target._sf_coalesced and out.layout == target.layout
            and same_pattern(out, target) and out._sf_fill.shape == target._sf_fill.shape):
        target._sf_values.copy_(out._sf_values)
        target._sf_fill.copy_(out._sf_fill)
        torch.autograd.graph.increment_version(target)
        target._after_inplace()
        return target
    return target._adopt(out, _args.name(func))


_KIND = {"unary": _unary, "binary": _binary, "ternary": _ternary}


def _route(func, routes, inplace: bool):
    """The handler of one torch callable: its ops tried in order, the first
    that accepts the arguments computes."""
    tries = [(_KIND[op.kind], op, reflected) for op, reflected in routes]

    def refuse(args, kwargs):
        return NotImplementedError(
            f"torch_sparsefill: {_args.name(func)} is not supported for arguments "
            f"({', '.join(type(a).__name__ for a in args)})"
            f"{' with keywords ' + str(sorted(kwargs)) if kwargs else ''} on SparseFillTensor yet")

    if len(tries) == 1:  # most callables: no loop on the hot path
        ((kind, op, reflected),) = tries

        def route(*args, **kwargs):
            out = kind(op, func, args, kwargs, reflected, inplace)
            if out is NotImplemented:
                raise refuse(args, kwargs)
            return out
        return route

    def route(*args, **kwargs):
        for kind, op, reflected in tries:
            out = kind(op, func, args, kwargs, reflected, inplace)
            if out is not NotImplemented:
                return out
        raise refuse(args, kwargs)
    return route


def _table() -> dict:
    ops = {name: Op(name, spec) for name, spec in _generated_ops.OPS.items()}
    out_of_place, in_place = {}, {}
    for fn, name, reflected in _generated_ops.ROUTES:
        out_of_place.setdefault(fn, []).append((ops[name], reflected))
    for fn, name in _generated_ops.INPLACE_ROUTES:
        in_place.setdefault(fn, []).append((ops[name], False))
    both = set(out_of_place) & set(in_place)
    assert not both, f"internal: callables routed both in place and out of place: {both}"
    table = {fn: _route(fn, routes, False) for fn, routes in out_of_place.items()}
    table.update({fn: _route(fn, routes, True) for fn, routes in in_place.items()})
    return table


ROUTES = _table()
# the ops ATen computes from each operand's own dtype: by_hand.py's
ROUTES.update(_by_hand.ROUTES)
for _f, _n in ((torch.masked_fill, "masked_fill"), (torch.Tensor.masked_fill, "masked_fill"),
               (torch.Tensor.masked_fill_, "masked_fill_")):
    ROUTES[_f] = _by_hand.tensor_value(_n, ROUTES[_f])
