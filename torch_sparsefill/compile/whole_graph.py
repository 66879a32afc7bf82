"""sf.compile: a function of SparseFillTensors compiled whole, as ONE graph
(RFC.md#sf-compile, "Compiled whole").

Dynamo refuses a sparse-layout tensor (RFC.md#sf-compile, limit 1), so the function
is not traced by Dynamo. Per call:

1. its arguments are taken apart with the pytree node of `sf.exportable()`
   (a SparseFillTensor's children are its components; layout, size, the
   coalesced facts and the blocksize are the node's context);
2. a cache is looked up by that tree spec, the dtype, device, rank,
   contiguity and requires_grad of every tensor leaf, the other leaves
   (numbers, strings, None) and the grad mode; within a key, each trace
   holds its shape constraints (nse symbolic, sizes of 0 or 1 and whatever
   the routing compared specialised), checked as torch.export's program
   checks its inputs;
3. on a miss, the function is traced without Dynamo: non-strict
   `torch.export.export` of a module on the flat tensor leaves that
   rebuilds the SparseFillTensors (on fakes), calls the function (our
   routing runs on the fakes and records torch.ops.sparsefill + ATen ops,
   each with its registered autograd) and flattens the outputs. Every
   tensor dim is `Dim.AUTO` with `dynamic=True`: one trace serves every
   nse. A Python branch of the routing that reads data fails that trace
   (a data-dependent guard), and `sf.compile` raises: it never picks an
   eager path from the traced example's data;
4. the traced graph is compiled by `torch.compile(fullgraph=True)` with the
   caller's backend, then run, and SparseFillTensor outputs are rebuilt
   from their components.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import io
import itertools
import logging
import sys
import threading

import sympy
import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils import _pytree as pytree

from . import export as _export
from ..tensor import SparseFillTensor

__all__ = ["compile", "CompiledFunction"]

_TENSOR = object()  # where a tensor leaf goes (the trace keeps no input alive)


def _node():
    # The node of sf.exportable(): nesting inside it is allowed.
    return _export.scoped_node("sf.compile", _export._flatten, _export._unflatten,
                               _export._flatten_with_keys, _export._TYPE_NAME)


def _leaf_key(leaf):
    """What a trace specialises on for one leaf: a tensor's metadata (not its
    sizes: those are the trace's constraints), another leaf's type and value."""
    if isinstance(leaf, torch.Tensor):
        if leaf.layout != torch.strided:
            raise TypeError(f"torch_sparsefill.compile: an argument is a torch tensor of layout "
                            f"{leaf.layout}; pass dense tensors and SparseFillTensors")
        return (type(leaf), leaf.dtype, leaf.device, leaf.dim(), leaf.requires_grad,
                leaf.is_contiguous())
    if isinstance(leaf, float):
        # By repr: NaN != NaN (a key never found again), -0.0 == 0.0 (another trace).
        return (float, repr(leaf))
    try:
        hash(leaf)
    except TypeError:
        raise TypeError(f"torch_sparsefill.compile: an argument of type {type(leaf).__name__} "
                        f"(unhashable) cannot key the cache; pass tensors, numbers, strings, "
                        f"None and containers of them") from None
    return (type(leaf), leaf)


def _nse_dims(tree) -> dict:
    """id of each SparseFillTensor component in `tree` -> its dim of size nse
    (the one dim a trace keeps symbolic; a component's other sizes follow
    from the tensor's size, part of the tree spec)."""
    dims = {}  # components whose sizes are all fixed by the spec: None
    for A in pytree.tree_leaves(tree, is_leaf=lambda x: isinstance(x, SparseFillTensor)):
        if isinstance(A, SparseFillTensor):
            for name in A._flatten_components()[0]:
                dims[id(getattr(A, name))] = None
            if A._sf_indices is not None:
                dims[id(A._sf_indices)] = 1
                dims[id(A._sf_values)] = 0
            else:  # compressed: (*batch, nse) plain indices, (*batch, nse, ...) values
                batch = A._sf_col.dim() - 1
                dims[id(A._sf_col)] = batch
                dims[id(A._sf_values)] = batch
    return dims


def _dynamic_shapes(tensors, nse_dims):
    """Dim.AUTO on every nse dim and every dim of a dense argument (torch.export
    keeps it symbolic unless the trace compares it), none on a size of 0 or 1
    (export specialises those anyway)."""
    auto = torch.export.Dim.AUTO
    shapes = []
    for t in tensors:
        if id(t) in nse_dims:
            dims = [] if nse_dims[id(t)] is None else [nse_dims[id(t)]]
        else:
            dims = range(t.dim())
        shapes.append({d: auto for d in dims if t.shape[d] > 1})
    return (tuple(shapes),)


class _OutsideGradient(RuntimeError):
    """Raised while tracing (not a TypeError: torch turns one raised inside an
    operator such as ``@`` into NotImplemented); re-raised as TypeError."""


class _NoOutsideGradient(torch.overrides.TorchFunctionMode):
    """While tracing: refuses a real tensor that requires grad in a call of
    the function (a closure's or a module's parameter, a global): export
    would lift it as a detached constant, its gradient silently lost.
    The traced arguments are fakes; tensors made while tracing need none."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        for t in pytree.tree_leaves((args, kwargs or {})):
            if isinstance(t, torch.Tensor) and not isinstance(t, (FakeTensor, SparseFillTensor)) \
                    and t.requires_grad:
                name = torch.overrides.resolve_name(func) or func
                raise _OutsideGradient(
                    f"torch_sparsefill.compile: {name} gets a tensor requiring grad that is not "
                    f"an argument of the function (a closure's, a global, a module's "
                    f"parameter): its gradient would be lost in the graph; pass every tensor "
                    f"as an argument")
        return func(*args, **(kwargs or {}))


class _Flat(torch.nn.Module):
    """The traced module: the flat tensor leaves in, `fn`'s tensor outputs
    flat out. The other input leaves are constants of the trace; the output
    tree spec and non-tensor outputs are recorded in `out`."""

    def __init__(self, fn, spec, leaves, out):
        super().__init__()
        self._fn = [fn]  # in a list: never registered as a submodule (its parameters lifted)
        self._spec, self._out = spec, out
        self._leaves = [_TENSOR if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves]

    def forward(self, *tensors):
        it = iter(tensors)
        leaves = [next(it) if leaf is _TENSOR else leaf for leaf in self._leaves]
        args, kwargs = pytree.tree_unflatten(leaves, self._spec)
        with _NoOutsideGradient():
            result = self._fn[0](*args, **kwargs)
        out, out_spec = pytree.tree_flatten(result)
        for leaf in out:
            if isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                raise RuntimeError("torch_sparsefill.compile: the function returns a Python "
                                   "number computed from traced tensors (a size or data); "
                                   "return a tensor instead")
        self._out["spec"] = out_spec
        self._out["leaves"] = [_TENSOR if isinstance(leaf, torch.Tensor) else leaf for leaf in out]
        return tuple(leaf for leaf in out if isinstance(leaf, torch.Tensor))


def _for_dynamo(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """The traced graph made ready for Dynamo: calls that return no tensor and
    take only constants (``aten.promote_types`` of two dtypes) are folded,
    since Dynamo refuses a torch op returning a non-tensor; the code is
    regenerated, so that its line map (which Dynamo reads to keep the
    nodes' metadata) matches the nodes that are left."""
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.all_input_nodes or \
                isinstance(node.meta.get("val"), torch.Tensor):
            continue
        value = node.target(*node.args, **node.kwargs)
        if isinstance(value, torch.Tensor):
            continue
        for user in list(node.users):
            user.args = torch.fx.node.map_arg(user.args, lambda n: value if n is node else n)
            user.kwargs = torch.fx.node.map_arg(user.kwargs, lambda n: value if n is node else n)
        gm.graph.erase_node(node)
    gm.recompile()
    return gm


class _Trace:
    """One traced and compiled graph, with the input constraints it holds for."""

    def __init__(self, program, compiled, out):
        self.program, self.compiled = program, compiled
        self.out_spec, self.out_leaves = out["spec"], out["leaves"]
        sig = program.graph_signature
        users = set(sig.user_inputs)
        self.placeholders = [n for n in program.graph.nodes
                             if n.op == "placeholder" and n.name in users]
        # The trace's guards on the symbolic sizes (export keeps the range
        # ones as range_constraints but drops the others, e.g. nse(A) !=
        # nse(B) from a comparison): each must hold for a call's sizes.
        vals = [n.meta.get("val") for n in self.placeholders]
        fake = next((v for v in vals if isinstance(v, torch.Tensor)), None)
        env = getattr(getattr(fake, "fake_mode", None), "shape_env", None)
        # (Symbols the trace later fixed to a number are replaced first.)
        guards = [env.replace(g.expr) for g in env.guards] if env is not None else []
        self.guards = [g for g in guards if g is not sympy.true]
        # Per input tensor, per dim: an int (static) or the size's sympy expression.
        self.sizes = [[d.node.expr if isinstance(d, torch.SymInt) else int(d) for d in v.shape]
                      for v in vals]
        # Lifted constants (tensors made while tracing, or a real tensor the
        # function reached outside its arguments, refused if it needs a
        # gradient: _NoOutsideGradient): inputs of the graph too, as traced.
        self._answers: dict = {}  # shapes of the tensor leaves -> accepts()
        self.constants = []
        for spec in sig.input_specs:
            if spec.kind == spec.kind.USER_INPUT:
                self.constants.append(None)
            elif spec.kind == spec.kind.CONSTANT_TENSOR:
                self.constants.append(program.constants[spec.target])
            else:
                raise TypeError(f"torch_sparsefill.compile: the function uses {spec.kind.name} "
                                f"{spec.target!r}; pass every tensor as an argument")

    def accepts(self, tensors) -> bool:
        """Whether this trace holds for these tensor leaves: every static size
        equal, every symbolic one in its range (strictly: torch.export's own
        check lets a size of 0 or 1 pass where the trace assumed >= 2, which
        our routing's paths do not promise), and every guard true.

        The answer depends on the leaves' shapes alone, so it is remembered
        per shape tuple (sympy's evaluation of the guards cost about 200 us
        a call; a loop over the same shapes pays it once)."""
        shapes = tuple(t.shape for t in tensors)
        answer = self._answers.get(shapes)
        if answer is None:
            if len(self._answers) >= 1024:  # nse changing every call: bounded
                self._answers.clear()
            answer = self._answers[shapes] = self._check(tensors)
        return answer

    def _check(self, tensors) -> bool:
        binding = {}
        for t, sizes in zip(tensors, self.sizes):
            if t.dim() != len(sizes):
                return False
            for expr, n in zip(sizes, t.shape):
                if isinstance(expr, int):
                    if expr != n:
                        return False
                elif expr.is_Symbol:
                    if binding.setdefault(expr, sympy.Integer(n)) != n:
                        return False
        for symbol, n in binding.items():
            bounds = self.program.range_constraints.get(symbol)
            if bounds is not None and not (bounds.lower <= n <= bounds.upper):
                return False
        for t, sizes in zip(tensors, self.sizes):
            for expr, n in zip(sizes, t.shape):
                if not isinstance(expr, int) and not expr.is_Symbol and \
                        expr.xreplace(binding) != n:
                    return False
        # A guard left with a free symbol (none bound) does not hold: a new trace.
        return all(g.xreplace(binding) is sympy.true for g in self.guards)

    def __call__(self, tensors):
        it = iter(tensors)
        inputs = [next(it) if c is None else c for c in self.constants]
        try:
            outs = iter(self.compiled(*inputs))
        except torch._dynamo.exc.Unsupported:
            # A check in the graph failing as it runs (an index out of range,
            # an attention mask's fill) reaches the caller from Dynamo's
            # compiled GraphModule as "Attempt to trace generator"; the same
            # graph run eagerly raises the check's own message.
            self.program.graph_module(*inputs)
            raise
        leaves = [next(outs) if leaf is _TENSOR else leaf for leaf in self.out_leaves]
        return leaves


class _Method(torch.nn.Module):
    """A module's bound method as a module of its own (the owner a submodule,
    ``m``), so that torch.func.functional_call can swap the owner's state."""

    def __init__(self, method):
        super().__init__()
        self.m, self._func = method.__self__, method.__func__

    def forward(self, *args, **kwargs):
        return self._func(self.m, *args, **kwargs)


def _stateless(fn):
    """(the function traced, the module whose state it takes) for `fn`: an
    nn.Module, or a bound method of one (``model.forward = sf.compile(
    model.forward)``), runs with its parameters and buffers passed as its
    first argument (a dict, as torch.export lifts them), so they are inputs
    of the graph and their gradients reach them; any other `fn` as it is."""
    if isinstance(fn, torch.nn.Module):
        target, prefix = fn, ""
    elif inspect.ismethod(fn) and isinstance(fn.__self__, torch.nn.Module):
        target, prefix = _Method(fn), "m."
    else:
        return fn, None
    owner = fn if prefix == "" else fn.__self__

    def call(state, *args, **kwargs):
        return torch.func.functional_call(
            target, {prefix + k: v for k, v in state.items()}, args, kwargs)
    return call, owner


@contextlib.contextmanager
def _quiet_tracer():
    """A trace that meets a data-dependent branch makes torch log a warning
    and print the partial FX graph to stderr; the error sf.compile raises
    names the reason, so both are held back. Anything else written to
    stderr meanwhile (a warning of the user's function) is passed on."""
    logger = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    level = logger.level
    logger.setLevel(logging.ERROR)
    held = io.StringIO()
    try:
        with contextlib.redirect_stderr(held):
            yield
    except Exception as e:
        text = held.getvalue()
        graph = getattr(e, "partial_fx_graph", None)  # (printed once per export layer)
        held = io.StringIO(text.replace(f"{graph}\n", "") if graph else text)
        raise
    finally:
        logger.setLevel(level)
        sys.stderr.write(held.getvalue())


class CompiledFunction:
    """`fn` compiled whole by `torch_sparsefill.compile`: call it as `fn`.
    `traces` counts the traces made (one per new key or constraint miss)."""

    def __init__(self, fn, backend, mode, options, dynamic):
        # (a module's __dict__, its state, is not copied onto the wrapper)
        functools.update_wrapper(self, fn, updated=() if isinstance(fn, torch.nn.Module)
                                 else functools.WRAPPER_UPDATES)
        self._fn, self._owner = _stateless(fn)
        self._compile = dict(backend=backend, mode=mode, options=options, dynamic=dynamic)
        self._dynamic = dynamic
        self._cache: dict = {}
        self._lock = threading.Lock()
        self.traces = 0

    def __call__(self, *args, **kwargs):
        if self._owner is not None:  # the module's state, as it is now (after optimizer steps)
            args = (dict(itertools.chain(self._owner.named_parameters(),
                                         self._owner.named_buffers())),) + args
        with _node():
            leaves, spec = pytree.tree_flatten((args, kwargs))
            key = (str(spec), tuple(_leaf_key(leaf) for leaf in leaves), torch.is_grad_enabled())
            tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
            with self._lock:
                traces = self._cache.setdefault(key, [])
                trace = next((t for t in traces if t.accepts(tensors)), None)
                if trace is None:
                    nse_dims = _nse_dims((args, kwargs)) if self._dynamic else None
                    trace = self._trace(spec, leaves, tensors, nse_dims)
                    traces.append(trace)
            out = trace(tensors)
            return pytree.tree_unflatten(out, trace.out_spec)

    def _trace(self, spec, leaves, tensors, nse_dims):
        out: dict = {}
        module = _Flat(self._fn, spec, leaves, out)
        dims = _dynamic_shapes(tensors, nse_dims) if self._dynamic else None
        try:
            with _quiet_tracer():
                program = torch.export.export(module, tuple(tensors), strict=False,
                                              dynamic_shapes=dims)
        except _OutsideGradient as e:
            raise TypeError(str(e)) from None
        except Exception as e:
            raise RuntimeError(
                f"torch_sparsefill.compile: {getattr(self._fn, '__qualname__', self._fn)} cannot "
                f"be traced as one graph ({type(e).__name__}: {str(e).splitlines()[0]}). A "
                f"branch that reads data (a value, .item(), a count) has no single graph; run "
                f"it eagerly or under torch.compile (graph breaks, eager's values)") from e
        compiled = torch.compile(_for_dynamo(program.graph_module), fullgraph=True,
                                 **self._compile)
        trace = _Trace(program, compiled, out)
        self.traces += 1
        return trace


def compile(fn=None, *, backend="inductor", mode=None, options=None, dynamic=True):
    """Compile `fn`, a function of SparseFillTensors, dense tensors and
    Python constants, as ONE graph, forward and backward: no graph break at
    the sparse ops (RFC.md#sf-compile, "Compiled whole"). The function is traced
    without Dynamo (non-strict torch.export on the components), once per
    structure of its arguments (layouts, sizes, dtypes, coalesced facts,
    requires_grad, constants; nse is symbolic with ``dynamic=True``: one
    trace serves every nse), and the graph compiled by
    ``torch.compile(..., fullgraph=True, backend=backend, mode=mode,
    options=options)``. A function whose graph would depend on its data
    raises RuntimeError when traced, never specialises. Usable as a
    decorator, with or without arguments. `fn` may be an ``nn.Module`` or a
    module's bound method: its parameters and buffers become inputs of the
    graph on every call (gradients reach them; optimizer steps are seen).

    Example::

        >>> @sf.compile(backend="eager")
        ... def f(A, x):
        ...     return torch.softmax(A * 2, -1) @ x
        >>> A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2), fill_value=0.5)
        >>> x = torch.ones(2, 1)
        >>> torch.allclose(f(A, x), torch.softmax(A.to_dense() * 2, -1) @ x)
        True
    """
    if fn is None:
        return functools.partial(compile, backend=backend, mode=mode, options=options,
                                 dynamic=dynamic)
    if not callable(fn):
        raise TypeError(f"torch_sparsefill.compile: fn must be callable, got "
                        f"{type(fn).__name__}")
    if not isinstance(dynamic, bool):
        raise TypeError(f"torch_sparsefill.compile: dynamic must be True or False, got "
                        f"{dynamic!r}")
    return CompiledFunction(fn, backend, mode, options, dynamic)
