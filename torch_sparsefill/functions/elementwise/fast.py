"""The hot path of the element-wise ops (docs/design.md#hot-path): a fast handler
per out-of-place callable with one route, for plain operands
(tensor/plain.py); the routing tries it before the route itself.
"""
from __future__ import annotations

import torch

from ... import _C
from ...ops import elementwise as _generated_ops
from ...tensor import FACTS, SparseFillTensor, is_plain, on_pattern
from .handlers import Op, named_op

__all__ = ["FAST"]


# ---- the hot path (docs/design.md#hot-path) ------------------------------------------
# A fast handler takes the positional arguments of a call without keywords
# and returns its result, or None to hand the call to the routes above. It
# serves plain operands only (_tensor.is_plain) and calls the same op with
# the same arguments as its route would, so the result is the route's; any
# RuntimeError (an integer division by a zero fill, ...) is also left to the
# route, which knows the exceptions' rules.
#
# The op is first tried through its hot function (_C.hot, aten_ext/ops/hot/:
# the op's kernel body below autograd, one C call), which answers None
# where it does not serve the call (a component that tracks gradients, a
# mode or transform, an error); `hot(...) or op(...)` then calls the op
# overload's C++ callable itself (OpOverload.__call__ is a Python frame that
# only calls it). An op without a hot function calls the op alone.

def _hot(op: Op) -> tuple:
    """(unary, same, scalar): op's hot functions, each the op's own callable
    where it has none (`f(...) or f(...)` calls it once)."""
    unary, same, scalar = _C.hot(op.name)
    return (unary or op.main._op, same or (op.same._op if op.same else None),
            scalar or (op.scalar._op if op.scalar else None))


def _fast_unary(op: Op):
    main, extra = op.main._op, tuple(op.spec["defaults"])
    hot = _hot(op)[0]

    def fast(args):
        if len(args) != 1 or not is_plain(a := args[0]):
            return None
        values, fill = (hot(a._sf_values, a._sf_fill, *extra)
                        or main(a._sf_values, a._sf_fill, *extra))
        return on_pattern(a, values, fill)
    return _whole_call(op, 0, extra, fast, False)


# The whole calls in C make results as on_pattern does: they are told the
# class and torch's wrapper constructor once.
_C.hot_bind(SparseFillTensor, torch.Tensor._make_wrapper_subclass, torch.sparse_coo,
            torch.sparse_csr, FACTS)


def _whole_call(op: Op, kind: int, extra: tuple, fast, reflected: bool):
    """The fast handler: `fast` behind the op's whole call in C where it has
    one (_C.hot_on: plain SparseFillTensors, one C call from the call's
    arguments to the result; it answers what `fast` would, and leaves to
    `fast` whatever it does not serve)."""
    whole = _C.hot_on(op.name)[kind]
    return fast if whole is None else _C.hot_fast(whole, extra, fast, reflected)


def _fast_binary(op: Op, reflected: bool):
    same, extra = op.same._op, tuple(op.spec["defaults"])
    scalar = op.scalar._op if op.scalar is not None else None
    _, hot_same, hot_scalar = _hot(op)
    numbers = (int, float) if scalar is not None and op.name != "pow" else ()

    def fast(args):
        if len(args) != 2:
            return None
        x, y = (args[1], args[0]) if reflected else args
        try:
            if is_plain(x):
                if type(y) in numbers:
                    values, fill = (hot_scalar(x._sf_values, x._sf_fill, y, False, *extra)
                                    or scalar(x._sf_values, x._sf_fill, y, False, *extra))
                    return on_pattern(x, values, fill)
                if (is_plain(y) and x._sf_layout is y._sf_layout and x._sf_size == y._sf_size
                        and x._sf_indices is y._sf_indices and x._sf_crow is y._sf_crow
                        and x._sf_col is y._sf_col):
                    values, fill = (hot_same(x._sf_values, x._sf_fill, y._sf_values, y._sf_fill,
                                             *extra)
                                    or same(x._sf_values, x._sf_fill, y._sf_values, y._sf_fill,
                                            *extra))
                    return on_pattern(x, values, fill)
            elif type(x) in numbers and is_plain(y):
                values, fill = (hot_scalar(y._sf_values, y._sf_fill, x, True, *extra)
                                or scalar(y._sf_values, y._sf_fill, x, True, *extra))
                return on_pattern(y, values, fill)
        except RuntimeError:
            return None
        return None
    return _whole_call(op, 1, extra, fast, reflected)


def _fast_table() -> dict:
    """{torch callable: fast handler} for the out-of-place callables with
    one route: a unary op without required arguments, or a binary op."""
    routes: dict = {}
    for fn, name, reflected in _generated_ops.ROUTES:  # (T.__neg__ is T.neg: one route twice)
        routes.setdefault(fn, {})[name, reflected] = None
    table = {}
    for fn, ((name, reflected),) in ((f, r) for f, r in routes.items() if len(r) == 1):
        op = named_op(name)
        if op.kind == "unary" and not op.spec["required"]:
            table[fn] = _fast_unary(op)
        elif op.kind == "binary" and not op.spec["required"]:
            table[fn] = _fast_binary(op, reflected)
    return table


FAST = _fast_table()
