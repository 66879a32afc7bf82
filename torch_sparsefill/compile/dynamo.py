"""How torch.compile sees this package: as opaque eager code.

Dynamo cannot wrap a SparseFillTensor (it refuses sparse layouts at its
inputs, torch/_dynamo/variables/builder.py "Attempted to wrap sparse
Tensor"), so it used to fall back to compiling our own Python (the routing,
the handlers, the constructors) frame by frame, with graph breaks at
`_make_wrapper_subclass` and resume functions in between. Those frames share
code objects (one `route` closure per routed callable, one `_binary` for
every binary op) and their guards did not tell the ops apart: `A * 2 + 1`
compiled to `A * 2 * 1` (docs/design.md#dynamo-skip). A compiled program must give
eager's result, so every function of the package is kept out of Dynamo:

- its frame is never compiled (execution strategy SKIP, set on the code
  object through torch's C API: no import of torch._dynamo, nothing on the
  eager path), while frames it calls are decided on their own (ours: SKIP
  too; torch's own functions by Dynamo's rules);
- Dynamo never inlines it into a user's graph (`_torchdynamo_disable`,
  the marker `torch.compiler.disable` sets): the call is a graph break and
  runs eagerly, like any op Dynamo cannot trace.

A user's function around our calls still compiles, in pieces: dense work
before and after a sparse op forms graphs of its own.

torch's tracers cannot take a SparseFillTensor itself on torch 2.13 (
docs/design.md#why-fullgraph-is-refused): Dynamo refuses a sparse layout at its inputs, and FakeTensor copies a
sparse-layout tensor as a plain torch sparse tensor (the subclass and its
fill lost). Faking starts by asking `_is_view`; the routing refuses it with that
reason, so torch.export of a module taking a SparseFillTensor fails clearly
instead of tracing torch's fill-0 semantics. What compiles fullgraph and
exports is a function of the components (test/compile/test_compile.py), or a
function of SparseFillTensors through `sf.compile` (compile/whole_graph.py).
"""
from __future__ import annotations

import types

import torch
from torch._C._dynamo import eval_frame as _eval_frame

__all__ = ["hide_from_dynamo"]


_SKIP = _eval_frame._FrameExecStrategy(_eval_frame._FrameAction.SKIP,
                                       _eval_frame._FrameAction.DEFAULT)


def _codes(code: types.CodeType):
    """`code` and every code object nested in it (inner functions, lambdas,
    comprehensions, generator expressions)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _functions(obj, package: str, seen: set):
    """The Python functions reachable from a module or class of `package`,
    or a callable: members, methods, properties, closures' cells, and the
    contents of the dicts, lists and tuples that hold them (routing tables)."""
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, (staticmethod, classmethod)):
        yield from _functions(obj.__func__, package, seen)
    elif isinstance(obj, property):
        for f in (obj.fget, obj.fset, obj.fdel):
            if f is not None:
                yield from _functions(f, package, seen)
    elif isinstance(obj, types.FunctionType):
        yield obj
        for cell in obj.__closure__ or ():
            try:
                content = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            yield from _functions(content, package, seen)
    elif isinstance(obj, types.ModuleType):
        if obj.__name__.startswith(package):
            for value in vars(obj).values():
                yield from _functions(value, package, seen)
    elif isinstance(obj, type):
        if obj.__module__.startswith(package):
            for value in vars(obj).values():
                yield from _functions(value, package, seen)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield from _functions(key, package, seen)
            yield from _functions(value, package, seen)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _functions(value, package, seen)


def hide_from_dynamo(modules, package: str) -> int:
    """Keep every function defined in `package` (found from `modules`) out
    of Dynamo: never compiled as a frame, never inlined. Returns how many
    functions were marked.

    Example::

        >>> import torch_sparsefill._compile as c, torch_sparsefill as sf
        >>> c.hide_from_dynamo([sf.functions.routing], "torch_sparsefill") > 0
        True
    """
    marked = 0
    seen: set = set()
    for module in modules:
        for fn in _functions(module, package, seen):
            if not (fn.__module__ or "").startswith(package):
                continue  # torch's, or a user's: Dynamo's own rules apply
            fn._torchdynamo_disable = True
            for code in _codes(fn.__code__):
                _eval_frame.set_code_exec_strategy(code, _SKIP)
            marked += 1
    return marked
