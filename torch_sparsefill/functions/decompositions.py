"""The fallback of routing.py for a torch callable with no route of its own:
torch's own decomposition of it, run with the SparseFillTensor as argument,
each step routing again (docs/design.md#decomposition-route); then, inside
``sf.auto_densify()``, the dense computation (functions/densify.py).

Where a decomposition comes from, tried in this order (``source(func)``):
  ``composite`` where torch's only decomposition is a C++ kernel
              (CompositeImplicitAutograd, whose steps never route), or its
              Python body takes a step we cannot (composites.py says which):
              its formula restated in torch calls (functions/composites.py);
  ``python``  the function's own Python body, when torch writes the public
              function in Python (``F.softmin``, ``F.mse_loss``'s broadcast
              before its aten call): run with its ``has_torch_function``
              guards off, so its torch calls route;
  ``refs``    torch._refs' reference implementation keyed by the callable
              (``torch._prims.context.torch_to_refs_map``);
  ``decomp``  torch._decomp's table entry of the aten op of the callable's
              name (``torch._C._nn.mse_loss`` -> ``aten.mse_loss``).
A step that is an aten or prims op (the decompositions call some directly)
routes as the torch callable it stands for (``STEP_BRIDGE``, ``_bridge``).

Which callables may take the route is ``eligible(func)``: a decomposition
exists, the callable is not in-place (it would write into our components
through torch's code), not random (torch.Tag.nondeterministic_seeded) and
not on ``REFUSED`` (those whose decomposition gives a number we cannot vouch
for). A step refused refuses the whole call, naming the function the user
called and the step (RFC.md#decomposition-route).
"""
from __future__ import annotations

import functools
import os
import sys
import threading
import types

import torch

from ..tensor import args as _args
from ..tensor import SparseFillTensor
from . import composites as _composites
from . import densify as _densify

__all__: list = []

_aten = torch.ops.aten

# Callables whose decomposition exists but must not run on a SparseFillTensor,
# with the reason (the test of this module checks each still decomposes).
REFUSED = {
    # their decompositions read the components' storage (strides, data_ptr)
    torch.Tensor.as_strided: "views storage by strides",
    torch.as_strided: "views storage by strides",
    # the reference's |x|^2 + |y|^2 - 2xy cancels where dense's pairwise kernel does not
    torch.pdist: "loses float32 precision against dense's kernel",
    torch.nn.functional.pdist: "loses float32 precision against dense's kernel",
}


class Refused(NotImplementedError):
    """A refusal already phrased for the function the user called: the
    decompositions it runs inside re-raise it as it is."""


_state = threading.local()

# How many calls the user made were computed by a decomposition and by the
# dense route (the coverage harness counts its cases by route with them).
TAKEN = {"decomposition": 0, "auto_densify": 0}


def _stack() -> list:
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    return stack


# ---- where a decomposition comes from ---------------------------------------

_GUARDS = ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")


def _no(*args, **kwargs):
    return False


@functools.lru_cache(maxsize=None)
def _unguarded_globals(module_dict_id, module_name):
    import sys
    g = dict(vars(sys.modules[module_name]))
    g.update({name: _no for name in _GUARDS})
    return g


def _python_body(func):
    """func's own Python body with its torch-function guards off, when torch
    writes func in Python and guards it (else None)."""
    code = getattr(func, "__code__", None)
    module = getattr(func, "__module__", None) or ""
    if code is None or not module.startswith("torch") or "handle_torch_function" not in code.co_names:
        return None
    if not any(g in code.co_names for g in _GUARDS):
        return None
    g = _unguarded_globals(id(func.__globals__), module)
    body = types.FunctionType(code, g, func.__name__, func.__defaults__, func.__closure__)
    body.__kwdefaults__ = func.__kwdefaults__
    return body


@functools.lru_cache(maxsize=1)
def _refs_map() -> dict:
    from torch._prims.context import torch_to_refs_map
    return torch_to_refs_map()


def _aten_packet(func):
    n = getattr(func, "__name__", None)
    if not n or n.startswith("__"):
        return None
    packet = getattr(_aten, n, None)
    return packet if packet is not None and hasattr(packet, "overloads") else None


def _decomp_table() -> dict:
    from torch._decomp import decomposition_table
    return decomposition_table


def _aten_decomposition(func):
    """A function trying each overload's torch._decomp entry of the aten op
    named like func whose signature binds the call (else None)."""
    packet = _aten_packet(func)
    if packet is None:
        return None
    table = _decomp_table()
    entries = []
    for overload in packet.overloads():
        fn = table.get(getattr(packet, overload))
        if fn is not None and fn not in entries and "out" not in overload:
            entries.append(fn)
    if not entries:
        return None

    def decomposed(*args, **kwargs):
        import inspect
        for fn in entries:
            try:
                inspect.signature(fn).bind(*args, **kwargs)
            except (TypeError, ValueError):
                continue
            return fn(*args, **kwargs)
        raise Refused(f"torch_sparsefill: {_args.name(func)} is not implemented for "
                      f"SparseFillTensor with these arguments: torch's decompositions of "
                      f"aten.{packet.__name__.split('.')[-1]} take other ones")
    return decomposed


def _nondeterministic(func) -> bool:
    packet = _aten_packet(func)
    if packet is None:
        return False
    return any(torch.Tag.nondeterministic_seeded in getattr(packet, o).tags
               for o in packet.overloads())


def _in_place(func) -> bool:
    n = getattr(func, "__name__", "") or ""
    return (n.endswith("_") and not n.endswith("__")) or n.startswith("__i") \
        or n in ("__setitem__", "__delitem__")


@functools.lru_cache(maxsize=None)
def source(func):
    """(kind, decomposition) of func: kind "python", "composite", "refs" or "decomp"; or
    None where func may not take the route.

    Example::

        >>> source(torch.nn.functional.softmin)[0]
        'python'
    """
    if func in REFUSED or _in_place(func) or _nondeterministic(func):
        return None
    composite = _composites.COMPOSITES.get(func)
    if composite is not None:
        return "composite", composite
    try:
        body = _python_body(func)
    except Exception:  # noqa: BLE001 -- an unusual callable: no Python body
        body = None
    if body is not None:
        return "python", body
    try:
        ref = _refs_map().get(func)
    except TypeError:  # an unhashable callable
        ref = None
    if ref is not None:
        return "refs", ref
    fn = _aten_decomposition(func)
    if fn is not None:
        return "decomp", fn
    return None


def eligible(func) -> bool:
    """Whether func may take the decomposition route."""
    return source(func) is not None


# ---- steps that are aten or prims ops -----------------------------------------

def _convert_element_type(a, dtype):
    return a.to(dtype)


def _broadcast_tensors(*tensors):
    # torch.broadcast_tensors: each operand expanded to the common shape (a
    # SparseFillTensor by its expand route), an operand of that shape as it is.
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = torch.broadcast_shapes(*(t.shape for t in tensors))
    return tuple(t if t.shape == shape else t.expand(shape) for t in tensors)


def _prims_sum(a, dims, *, output_dtype=None):
    return torch.sum(a, dims, dtype=output_dtype)


def _prims_div(a, b):
    # prims.div truncates integers and divides floats exactly
    if any(isinstance(x, torch.Tensor) and not (x.is_floating_point() or x.is_complex())
           for x in (a, b)) and not any(isinstance(x, float) for x in (a, b)):
        return torch.div(a, b, rounding_mode="trunc")
    return torch.true_divide(a, b)


def _prims_var(a, dims, correction=1, *, output_dtype=None):
    out = torch.var(a, dims, correction=correction)
    return out if output_dtype is None else out.to(output_dtype)


_prims = torch.ops.prims
# Steps torch's decompositions take that are no torch callable of ours: what
# each stands for, by torch callables that route.
STEP_BRIDGE = {
    _prims.convert_element_type.default: _convert_element_type,
    _prims.sum.default: _prims_sum,
    _prims.var.default: _prims_var,
    _prims.div.default: _prims_div,
    torch.broadcast_tensors: _broadcast_tensors,
    torch._C._VariableFunctions.broadcast_tensors: _broadcast_tensors,
}


def _bridge(func):
    """The torch callable an aten/prims OpOverload step stands for, or None."""
    bridged = STEP_BRIDGE.get(func)
    if bridged is not None:
        return bridged
    packet = func.overloadpacket if isinstance(func, torch._ops.OpOverload) else func
    if isinstance(packet, torch._ops.OpOverloadPacket) and \
            packet._qualified_op_name.startswith("aten::"):
        n = packet._qualified_op_name.split("::")[-1]
        for home in (torch, torch.Tensor, torch.nn.functional, torch.special, torch.linalg):
            f = getattr(home, n, None)
            if f is not None:
                return f
    return None


# ---- the route -----------------------------------------------------------------

def _densified(func, args, kwargs):
    result = _densify.call(func, args, kwargs)
    TAKEN["auto_densify"] += 1
    return result


def _name(func) -> str:
    if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return str(func)  # aten._safe_softmax.default, as the user wrote it
    return _args.name(func)


def _outermost(func) -> str:
    """The function a refusal names: the outermost of the decompositions
    running, and the torch function the user called when that one reached
    it through torch's own Python code (``_called_through``)."""
    stack = _stack()
    outer = stack[0] if stack else func
    caller = _called_through(outer)
    return _name(outer) + (f" (called by {caller})" if caller else "")


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _called_through(func):
    """The public torch function the user called, when it reached `func`
    through torch's Python code that has no __torch_function__ hook of its
    own, so that the route never saw its name (``F.upsample_bilinear`` calls
    ``F.interpolate``): "torch.nn.functional.upsample_bilinear", else None.
    Read off the Python stack: the torch frames just outside this package's
    outermost frame, the outermost of them that is a module-level public
    function (wrappers such as boolean_dispatch's are not)."""
    frame, outside = sys._getframe(1), None
    while frame is not None:
        if os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE_DIR):
            outside = frame.f_back
        frame = frame.f_back
    caller = None
    while outside is not None and \
            os.path.abspath(outside.f_code.co_filename).startswith(_TORCH_DIR):
        code = outside.f_code
        named = outside.f_globals.get(code.co_name)
        if not code.co_name.startswith("_") and getattr(named, "__code__", None) is code:
            caller = outside
        outside = outside.f_back
    if caller is None or caller.f_code is getattr(func, "__code__", None):
        return None
    return f"{caller.f_globals.get('__name__', '?')}.{caller.f_code.co_name}"


def _refuse(func, why: str):
    outer = _outermost(func)
    stack = _stack()
    where = ""
    if stack:
        chain = " -> ".join(_name(f) for f in stack[1:] + [func])
        where = f" torch's decomposition of it reaches {chain}, which"
    else:
        where = " it"
    raise Refused(
        f"torch_sparsefill: {outer} is not implemented for SparseFillTensor:{where} {why}, so "
        f"it is refused rather than computed as if the fill were 0; call it on A.to_dense(), "
        f"or inside `with sf.auto_densify():` for a dense result")


def _meta(x):
    if isinstance(x, torch.Tensor):
        return torch.empty(x.shape, dtype=x.dtype, device="meta")
    if isinstance(x, (list, tuple)):
        return type(x)(_meta(y) for y in x)
    if isinstance(x, dict):
        return {k: _meta(v) for k, v in x.items()}
    return x


def _dense_raises_too(func, args, kwargs) -> bool:
    """Whether func raises on meta tensors of the same shapes and dtypes: then
    an exception of its decomposition is the argument error dense torch
    raises, not a failure of the route."""
    try:
        with torch._C.DisableTorchFunctionSubclass():
            func(*_meta(args), **_meta(kwargs))
    except NotImplementedError:
        return False
    except Exception:  # noqa: BLE001 -- an argument error, as dense torch raises it
        return True
    return False


def call(func, args, kwargs):
    """func(*args, **kwargs) for a callable routing.py has no route for: its
    decomposition, else (inside sf.auto_densify()) the dense computation, else a
    refusal naming it (and, inside a decomposition, the step).

    Example::

        >>> A = sf.to_sparse(torch.tensor([0., 3.]), fill_value=0.)
        >>> torch.nn.functional.mse_loss(A, torch.ones(2))
        tensor(2.5000)
    """
    bridged = _bridge(func)
    if bridged is not None and bridged is not func:
        return _run(func, ("bridge", bridged), args, kwargs)
    found = source(func)
    stack = _stack()
    if found is None or func in stack or (kwargs and kwargs.get("out") is not None):
        # the dense route takes the whole call the user made, never a step
        # of a decomposition (prims have no autograd of their own)
        if not stack and _densify.enabled() and not _in_place(func):
            return _densified(func, args, kwargs)
        why = ("has no fill-value semantics yet" if found is None else
               "has a decomposition that reaches itself" if func in stack else
               "is decomposed only without out=")
        _refuse(func, why)
    return _run(func, found, args, kwargs)


def decompose(func, args, kwargs):
    """func's decomposition on these arguments, for a route that computes some
    of its cases itself and leaves the others to torch's decomposition
    (``torch.linalg.vector_norm`` along dims)."""
    found = source(func)
    if found is None:
        _refuse(func, "has no decomposition")
    return _run(func, found, args, kwargs)


def _run(func, found, args, kwargs):
    stack = _stack()
    kind, decomposition = found
    stack.append(func)
    try:
        result = decomposition(*args, **kwargs)
        if len(stack) == 1:
            TAKEN["decomposition"] += 1
        return result
    except Refused:
        if len(stack) == 1 and _densify.enabled():
            return _densified(func, args, kwargs)
        raise
    except NotImplementedError as exc:
        if len(stack) == 1 and _densify.enabled():
            return _densified(func, args, kwargs)
        raise Refused(f"torch_sparsefill: {_outermost(func)} is not implemented for "
                      f"SparseFillTensor: a step of torch's decomposition of "
                      f"{_name(func)} ({kind}) was refused: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 -- judged below: an argument error or a failure
        if _dense_raises_too(func, args, kwargs):
            raise
        if len(stack) == 1 and _densify.enabled():
            return _densified(func, args, kwargs)
        raise Refused(f"torch_sparsefill: {_outermost(func)} is not implemented for "
                      f"SparseFillTensor: torch's decomposition of {_name(func)} ({kind}) "
                      f"failed on it ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
                      ) from exc
    finally:
        stack.pop()


# ---- the table of what takes which route --------------------------------------

def candidates() -> list:
    """torch's overridable callables (torch.overrides' registry): the
    universe the route table and docs/routes.md classify."""
    from torch.overrides import get_overridable_functions
    seen, out = set(), []
    for funcs in get_overridable_functions().values():
        for f in funcs:
            try:
                if f in seen:
                    continue
                seen.add(f)
            except TypeError:
                continue
            out.append(f)
    return out


def route_of(func, routed) -> str:
    """How a call of func with a SparseFillTensor operand is computed:
    "explicit" (routed: in `routed`), "decomposition" (torch's decomposition,
    its source kind after a colon), "auto_densify" (refused, dense inside
    sf.auto_densify()) or "refused" (in-place: never densified).

    Example::

        >>> route_of(torch.nn.functional.mse_loss, {})
        'decomposition:python'
    """
    if func in routed:
        return "explicit"
    found = source(func)
    if found is not None:
        return "decomposition:" + found[0]
    return "refused" if _in_place(func) else "auto_densify"


def table(routed) -> dict:
    """{callable: route_of(callable)} over candidates(), built from torch's
    registries (overridable functions, torch._refs, torch._decomp)."""
    funcs = candidates()
    funcs += [f for f in routed if f not in set(funcs)]
    return {f: route_of(f, routed) for f in funcs}


def name(func) -> str:
    """The public name of a callable for messages and docs."""
    return _name(func)
