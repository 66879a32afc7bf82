"""torch.compile never gives another result than eager.

Programs that chain every family of ops (element-wise, products, softmax,
reductions, shape, indexing, concatenation, to_dense, two model blocks) run
eagerly and under torch.compile with the backends eager, aot_eager and
inductor; their values and the gradients of every input (values and fills
of the sparse operands, the dense operand) must be equal. The sparse ops run
eagerly between the compiled dense pieces (torch_sparsefill/compile/dynamo.py); a
fullgraph compile of a SparseFillTensor refuses instead of guessing (torch
2.13's limits, pinned by tests below), and a function of the components
compiles fullgraph, forward and backward, with nse symbolic (no recompile).

Inductor compiles C++ per graph (seconds on a small machine): the default
run compiles a few programs with it, `make test-slow` (pytest -m slow) all.
"""
import math

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from torch_sparsefill.compile import dynamo as _compile

pytestmark = pytest.mark.cpu_only(reason="compiles for the CPU")


def _operands(fill_a=1.5, fill_b=-2.0):
    """A (COO) and B (CSR) on different patterns of one size, a dense x; every
    value and fill a float64 leaf."""
    g = torch.Generator().manual_seed(0)
    A = sf.sparse_coo_tensor([[0, 1, 1, 3], [2, 0, 4, 1]], torch.randn(4, generator=g,
                                                                         dtype=torch.float64),
                             (4, 5), fill_value=fill_a)
    B = sf.sparse_csr_tensor([0, 1, 1, 3, 4], [2, 0, 3, 4],
                             torch.randn(4, generator=g, dtype=torch.float64), (4, 5),
                             fill_value=fill_b)
    x = torch.randn(5, 3, generator=g, dtype=torch.float64)
    A.requires_grad_()
    B.requires_grad_()
    x.requires_grad_()
    return A, B, x


def _attention(A, B, x):
    # A sparse attention block: scores on B's CSR pattern, the rest masked
    # out by a -inf fill, softmax per row, then the values.
    S = sf.sparse_csr_tensor(B.crow_indices(), B.col_indices(), B.values(), B.shape,
                             fill_value=float("-inf"))
    return torch.softmax(S * 0.5, -1) @ x


def _gcn(A, B, x):
    # A GCN layer: a normalised adjacency with a background fill, then relu.
    h = A @ (x * 0.5)
    return torch.relu(h / A.sum(1).to_dense().unsqueeze(1))


PROGRAMS = {
    "elementwise-scalar": lambda A, B, x: (A * 2 + 1).exp(),
    "elementwise-issue": lambda A, B, x: (A * 2 + 1).to_dense(),
    "elementwise-union": lambda A, B, x: torch.sigmoid(A * B + A) - B,
    "elementwise-dense-mix": lambda A, B, x: torch.sin(A.to_dense() * 3) + x.sum(),
    "where": lambda A, B, x: torch.where(A > 0.5, A, B),
    "matmul-dense": lambda A, B, x: (A * 2) @ x,
    "dense-matmul": lambda A, B, x: torch.tanh(x.t() @ B.t()),
    "softmax": lambda A, B, x: torch.softmax(A * 0.25, -1),
    "log-softmax-then-sum": lambda A, B, x: torch.log_softmax(B, 0).sum(1),
    "sum-all": lambda A, B, x: (A * B).sum() * x.sum(),
    "sum-dim": lambda A, B, x: (A * 2).sum(0),
    "amax-mean": lambda A, B, x: A.amax(1).to_dense() + B.mean(0).to_dense().sum(),
    "shape": lambda A, B, x: (A.t() * 2).reshape(20).unsqueeze(0),
    "indexing": lambda A, B, x: A[1] * B[2],
    "cat": lambda A, B, x: torch.cat([A, B * 3]).sum(0),
    "attention-block": _attention,
    "gcn-block": _gcn,
}

# Inductor in the default run: one program per kind of compiled piece.
INDUCTOR_FAST = {"elementwise-issue", "elementwise-dense-mix", "attention-block", "gcn-block"}


def _run(program, backend):
    """Output (dense) and the gradient of every leaf, eager or compiled."""
    torch._dynamo.reset()
    A, B, x = _operands()
    fn = program if backend is None else torch.compile(program, backend=backend)
    out = T.dense(fn(A, B, x))
    weight = torch.linspace(-1.0, 2.0, out.numel(), dtype=out.dtype).reshape(out.shape)
    finite = torch.isfinite(out)
    (torch.where(finite, out, 0.0) * weight).sum().backward()
    leaves = [A._values(), A._fill_value(), B._values(), B._fill_value(), x]
    return out.detach(), [t.grad for t in leaves]


def _check(name, backend):
    want, want_grads = _run(PROGRAMS[name], None)
    got, got_grads = _run(PROGRAMS[name], backend)
    torch.testing.assert_close(got, want, equal_nan=True)
    for g, w in zip(got_grads, want_grads):
        assert (g is None) == (w is None)
        if w is not None:
            torch.testing.assert_close(g, w, equal_nan=True)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiled_equals_eager(name, backend):
    _check(name, backend)


@pytest.mark.parametrize("name", [name if name in INDUCTOR_FAST else
                                  pytest.param(name, marks=pytest.mark.slow)
                                  for name in sorted(PROGRAMS)])
def test_compiled_equals_eager_inductor(name):
    _check(name, "inductor")


def test_issue_examples():
    """The three wrong results the issue reported, with backend eager."""
    torch._dynamo.reset()
    A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2), fill_value=0.5)
    got = torch.compile(lambda A: (A * 2 + 1).to_dense(), backend="eager")(A)
    torch.testing.assert_close(got, A.to_dense() * 2 + 1)
    got = torch.compile(lambda A: (A * 2).sum(0), backend="eager")(A)
    torch.testing.assert_close(got.to_dense(), (A.to_dense() * 2).sum(0))
    got = torch.compile(lambda A: A.sum(), backend="eager")(A)  # was a RecursionError
    torch.testing.assert_close(got, A.to_dense().sum())
    S = sf.sparse_csr_tensor([0, 2, 3], [0, 1, 1], [1., 2., 3.], (2, 2), fill_value=-math.inf)
    got = torch.compile(lambda S: torch.softmax(S * 0.25, -1) @ torch.ones(2, 2),
                        backend="eager")(S)
    torch.testing.assert_close(got, torch.softmax(S.to_dense() * 0.25, -1) @ torch.ones(2, 2))


def test_same_code_different_ops_never_mixed():
    """Many ops share the package's code objects (one handler per kind of
    op): compiled calls in a row must each compute their own op."""
    torch._dynamo.reset()
    A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2), fill_value=0.5)
    for op in (lambda A: A * 2, lambda A: A * 3, lambda A: A + 1, lambda A: A - 1,
               lambda A: 2 / A, lambda A: A ** 2):
        torch.testing.assert_close(torch.compile(op, backend="eager")(A).to_dense(),
                                   op(A.to_dense()))


def _protocol_cases():
    """A COO with the coalesced flag off, a CSR with a per-row fill, a BSR."""
    coo = sf.sparse_coo_tensor([[1, 0], [0, 2]], [1.0, -2.0], (2, 3), fill_value=0.5)
    csr = torch.softmax(sf.sparse_csr_tensor([0, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0], (2, 3),
                                             fill_value=-1.0), 1)
    bsr = sf.to_sparse(torch.tensor([[1.0, 2.0, 0.0, 0.0], [3.0, 4.0, 0.0, 0.0],
                                     [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 5.0, 0.0]]),
                       fill_value=0.0).to_sparse_bsr((2, 2))
    return [coo, csr, bsr]


@pytest.mark.parametrize("case", range(3))
def test_traceable_subclass_protocol(case):
    """_flatten_components / _unflatten_components take a tensor apart into its
    components and rebuild the same tensor (what torch's subclass tracers
    do: the components cloned, the context kept; no strides, which a sparse
    layout does not have)."""
    from torch.utils._python_dispatch import is_traceable_wrapper_subclass
    A = _protocol_cases()[case]
    # Under its own names until torch's tracers accept sparse layouts
    # (tensor/sparse_fill_tensor.py says why): nn.Module conversions keep their usual path.
    assert not is_traceable_wrapper_subclass(A)
    names, context = A._flatten_components()
    assert "_sf_values" in names and "_sf_fill" in names
    B = type(A)._unflatten_components({n: getattr(A, n).clone() for n in names}, context,
                                     A.shape, None)
    assert type(B) is sf.SparseFillTensor and B.layout == A.layout and B.shape == A.shape
    if A.layout == torch.sparse_coo:
        assert not A.is_coalesced() and not B.is_coalesced()
    torch.testing.assert_close(B.to_dense(), A.to_dense())
    for name in names:
        assert getattr(B, name) is not getattr(A, name)  # rebuilt from the new components
        torch.testing.assert_close(getattr(B, name), getattr(A, name))


def test_fullgraph_refuses():
    """fullgraph=True cannot hold a SparseFillTensor on torch 2.13: Dynamo
    refuses it (docs/design.md#why-fullgraph-is-refused), a clear error, not a wrong graph. This test
    fails when torch lifts the limit."""
    torch._dynamo.reset()
    A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2), fill_value=0.5)
    # Refused at the first op on it (with the protocol under torch's names:
    # at the input, "Attempted to wrap sparse Tensor").
    with pytest.raises(torch._dynamo.exc.Unsupported, match="SparseFillTensor|sparse"):
        torch.compile(lambda A: (A * 2).to_dense(), backend="eager", fullgraph=True)(A)


def test_fake_tensor_drops_the_subclass():
    """The second limit (docs/design.md#why-fullgraph-is-refused): FakeTensor copies a sparse-layout
    tensor through its sparse branch before the subclass one, so the fake of
    a SparseFillTensor is a plain torch sparse tensor without its fill. With
    torch functions on, the copy is refused clearly instead. This test fails
    when torch lifts the limit."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2), fill_value=0.5)
    with pytest.raises(NotImplementedError, match="_is_view.*tracers"):
        with FakeTensorMode() as mode:
            mode.from_tensor(A)
    with torch._C.DisableTorchFunctionSubclass(), FakeTensorMode() as mode:
        fake = mode.from_tensor(A)
    assert not isinstance(fake, sf.SparseFillTensor) and fake.layout == torch.sparse_coo


@pytest.mark.parametrize("strict", [False, True])
def test_export_of_a_sparsefilltensor_input_refuses(strict):
    """Outside sf.exportable(), a module taking a SparseFillTensor is refused
    by torch.export (the limits above), never exported with torch's fill-0
    semantics."""
    class Scale(torch.nn.Module):
        def forward(self, A):
            return (A * 2).to_dense()

    A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2), fill_value=0.5)
    with pytest.raises(Exception, match="_is_view|SparseFillTensor"):
        torch.export.export(Scale(), (A,), strict=strict)


def test_dense_work_around_sparse_ops_still_compiles():
    """The dense work before a sparse op forms a graph of its own (what
    follows it in the same frame may run eagerly: Dynamo gives up a frame
    whose resumption starts on a SparseFillTensor)."""
    torch._dynamo.reset()
    counts = []

    def backend(gm, example_inputs):
        counts.append(len([n for n in gm.graph.nodes if n.op == "call_function"]))
        return gm.forward

    A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2), fill_value=0.5)
    x = torch.randn(2, 2, dtype=torch.float32)

    def program(A, x):
        y = torch.sin(x) * 2  # dense: compiled
        z = (A * 2) @ y  # sparse: eager
        return torch.cos(z) + 1  # dense: compiled

    got = torch.compile(program, backend=backend)(A, x)
    torch.testing.assert_close(got, torch.cos((A.to_dense() * 2) @ (torch.sin(x) * 2)) + 1)
    assert sum(counts) >= 2, counts  # sin and mul went into a graph


def test_every_package_function_is_hidden():
    """No function of the package can be compiled or inlined by Dynamo: the
    marking reaches every module (new ones included) and routing closure."""
    import sys
    import types

    seen: set = set()
    modules = [m for n, m in sys.modules.items() if n.startswith("torch_sparsefill")]
    functions = list(_compile._functions(modules, "torch_sparsefill", seen))
    ours = [f for f in functions if f.__module__.startswith("torch_sparsefill")]
    assert len(ours) > 100
    unmarked = [f"{f.__module__}.{f.__qualname__}" for f in ours
                if not getattr(f, "_torchdynamo_disable", False)]
    assert not unmarked, unmarked
    assert isinstance(sf.SparseFillTensor.__dict__["__torch_function__"], classmethod)
    assert sf.SparseFillTensor.__torch_function__.__func__._torchdynamo_disable
    assert isinstance(sf.sparse_coo_tensor, types.FunctionType)


def test_no_recompile_when_nse_changes():
    """The compiled pieces see dense tensors whose shapes do not depend on
    nse: calls with 1, 3 and 6 stored elements reuse the first compilation."""
    torch._dynamo.reset()
    frames = []

    def backend(gm, example_inputs):
        frames.append(gm)
        return gm.forward

    x = torch.randn(4, 3, dtype=torch.float64)

    @torch.compile(backend=backend)
    def program(A, x):
        y = torch.sin(x) * 2  # dense: compiled
        return torch.softmax(A, -1) @ y  # sparse: eager

    g = torch.Generator().manual_seed(1)
    for nse in (1, 3, 6):
        flat = torch.randperm(20, generator=g)[:nse]
        A = sf.sparse_coo_tensor(torch.stack([flat // 4, flat % 4]),
                                 torch.randn(nse, generator=g, dtype=torch.float64), (5, 4),
                                 fill_value=-0.5)
        torch.testing.assert_close(program(A, x),
                                   torch.softmax(A.to_dense(), -1) @ (torch.sin(x) * 2))
        if nse == 1:
            first = len(frames)
    assert first >= 1 and len(frames) == first, f"{first} graphs, then {len(frames)}"


class _ComponentsModule(torch.nn.Module):
    """A module on a sparse tensor's components, calling the ops directly."""

    def forward(self, indices, values, fill, x):
        ops = torch.ops.sparsefill
        v, f = ops.mul_scalar(values, fill, 2.0, False)
        v, f = ops.exp(v, f)
        dense = ops.to_dense(indices, v, f, [3, 4])
        crow = ops.crow_from_rows(indices[0].contiguous(), 3)
        return dense @ x + ops.spmm(crow, indices[1].contiguous(), v, f, x, 4)


@pytest.mark.parametrize("strict", [False, True])
def test_export_of_components(strict):
    """torch.export of a module that takes the components: the exported
    program computes what the module does (shapes static: to_dense's C++
    composite specializes nse today)."""
    torch._dynamo.reset()
    indices = torch.tensor([[0, 1, 2, 2], [1, 0, 0, 3]])
    values, fill = torch.tensor([0.5, -1.0, 2.0, 0.25]), torch.tensor(0.5)
    x = torch.linspace(-1, 1, 8).reshape(4, 2)
    ep = torch.export.export(_ComponentsModule(), (indices, values, fill, x), strict=strict)
    A = sf.sparse_coo_tensor(indices, values, (3, 4), fill_value=fill)
    want = torch.exp(A.to_dense() * 2) @ x
    torch.testing.assert_close(ep.module()(indices, values, fill, x), want * 2)
    other = torch.tensor([1.5, 0.0, -0.5, 1.0])
    torch.testing.assert_close(ep.module()(indices, other, fill, x),
                               _ComponentsModule()(indices, other, fill, x))


class _Build(torch.nn.Module):
    """Builds a COO SparseFillTensor from components, then computes on it."""

    def __init__(self, is_coalesced=None):
        super().__init__()
        self.is_coalesced = is_coalesced

    def forward(self, indices, values, fill, x):
        A = sf.sparse_coo_tensor(indices, values, (3, 4), fill_value=fill,
                                 is_coalesced=self.is_coalesced)
        return torch.softmax(A * 2, -1) @ x + A.to_dense().sum(1, keepdim=True)


@pytest.mark.parametrize("is_coalesced", [None, True])
def test_export_of_a_constructor(is_coalesced):
    """A module that builds a SparseFillTensor exports (non-strict): the
    program checks its indices when it runs (coo_check is in the graph), so
    bad input is refused at run time, never computed on; with
    is_coalesced=True the claim is asserted at run time too. nse dynamic."""
    torch._dynamo.reset()
    x = torch.linspace(-1, 1, 8, dtype=torch.float64).reshape(4, 2)
    fill = torch.tensor(0.5, dtype=torch.float64)
    idx = torch.tensor([[0, 1, 2], [1, 0, 3]])
    vals = torch.tensor([1.0, -2.0, 0.25], dtype=torch.float64)
    nse = torch.export.Dim("nse", min=2, max=11)
    ep = torch.export.export(_Build(is_coalesced), (idx, vals, fill, x), strict=False,
                             dynamic_shapes=({1: nse}, {0: nse}, None, None))
    assert any(str(n.target).startswith("sparsefill.coo_check") for n in ep.graph.nodes)
    run = ep.module()
    for idx, vals in [(idx, vals),
                      (torch.tensor([[0, 0, 1, 2, 2], [0, 3, 2, 0, 1]]),
                       torch.tensor([0.5, 1.5, -1.0, 2.0, 3.0], dtype=torch.float64))]:
        A = sf.sparse_coo_tensor(idx, vals, (3, 4), fill_value=fill)
        want = torch.softmax(A.to_dense() * 2, -1) @ x + A.to_dense().sum(1, keepdim=True)
        torch.testing.assert_close(run(idx, vals, fill, x), want)
    with pytest.raises(RuntimeError, match="out of range"):
        run(torch.tensor([[0, 1], [1, 7]]), vals[:2], fill, x)
    unsorted = torch.tensor([[1, 0], [0, 1]])
    if is_coalesced:
        with pytest.raises(RuntimeError, match="is_coalesced=True"):
            run(unsorted, vals[:2], fill, x)
    else:  # uncoalesced input is coalesced by the program, as eagerly
        A = sf.sparse_coo_tensor(unsorted, vals[:2], (3, 4), fill_value=fill)
        torch.testing.assert_close(run(unsorted, vals[:2], fill, x),
                                   torch.softmax(A.to_dense() * 2, -1) @ x
                                   + A.to_dense().sum(1, keepdim=True))


# ---- fullgraph over the components ---------------------------------------------------
# A SparseFillTensor cannot enter a Dynamo graph on torch 2.13 (docs/design.md#why-fullgraph-is-refused),
# but its components can: a function of indices, values, fill and dense
# operands calling torch.ops.sparsefill compiles with fullgraph=True, forward
# and backward (each op has a fake kernel, its nse a symbolic size).

_N, _M = 5, 4  # the sparse operand is _N x _M, CSR


def _c_elementwise(crow, col, values, fill, x):
    v, f = _ops.mul_scalar(values, fill, 2.0, False)
    v, f = _ops.add_scalar(v, f, 1.0, False)
    v, f = _ops.sigmoid(v, f)
    v, f = _ops.exp(v, f)
    return _ops.spmm(crow, col, v, f, x, _M)


def _c_softmax(crow, col, values, fill, x):
    # softmax along rows, fill -inf: the attention block on components.
    v, f = _ops.mul_scalar(values, fill, 0.25, False)
    v, f = _ops.seg_softmax(v.unsqueeze(1), f.expand(_N, 1), crow, _M, False)
    return _ops.spmm(crow, col, v[:, 0], f, x, _M)


def _c_dense_spmm(crow, col, values, fill, x):
    v, f = _ops.tanh(values, fill)
    return _ops.dense_spmm(x.t() @ torch.ones(_M, _N, dtype=x.dtype), crow, col, v, f, _M)


def _c_union(crow, col, values, fill, x):
    # A binary op on two patterns: its union's nse is data, a dynamic size.
    rows = _ops.rows_from_crow(crow)
    a = torch.stack([rows, col])
    b = torch.stack([rows.flip(0), col.flip(0)])
    b = b[:, torch.argsort(b[0] * _M + b[1])]
    _, src_a, src_b = _ops.union_plan(a, b, [_N, _M])
    va = _ops.gather_with_fill(values, fill, src_a)
    vb = _ops.gather_with_fill(values * 2, fill * 3, src_b)
    return (va * vb).sum() + fill * x.sum()


def _c_gcn(crow, col, values, fill, x):
    # The GCN layer on components: A @ (x / 2) over a background fill,
    # normalised by A's row sums, then relu.
    h = _ops.spmm(crow, col, values, fill, x * 0.5, _M)
    degree = _ops.seg_reduce(values.unsqueeze(1), fill.expand(_N, 1), crow, _M, "sum")
    return torch.relu(h / degree)


def _c_seg_sum(crow, col, values, fill, x):
    v, f = _ops.exp(values, fill)
    return _ops.seg_reduce(v.unsqueeze(1), f.expand(_N, 1), crow, _M, "sum")


def _c_seg_max(crow, col, values, fill, x):
    return _ops.seg_max(values.unsqueeze(1), fill.expand(_N, 1), crow, None, _M, False, True)[0]


def _c_to_dense(crow, col, values, fill, x):
    return _ops.to_dense(torch.stack([_ops.rows_from_crow(crow), col]), values, fill, [_N, _M])


_ops = torch.ops.sparsefill
COMPONENT_PROGRAMS = {"elementwise-spmm": _c_elementwise, "softmax-spmm": _c_softmax,
                      "dense-spmm": _c_dense_spmm, "union": _c_union, "gcn": _c_gcn,
                      "seg-sum": _c_seg_sum,
                      "seg-max": _c_seg_max, "to-dense": _c_to_dense}
# Programs whose op reads nse as an int while it is traced, so that the graph
# specializes on nse (one graph per nse) instead of keeping it symbolic:
# (why, the backends where it does). None today: to_dense's C++ composite
# left it when it read sizes as SymInts (seg_reduce and seg_max when their
# backward moved to Python). strict: a program that stops specializing must
# leave this list.
SPECIALIZES_NSE: dict = {}


def _components(nse, seed=0):
    """crow, col, values, fill of a random _N x _M CSR pattern with nse
    elements, and a dense x; values, fill and x float64 leaves."""
    g = torch.Generator().manual_seed(seed)
    flat = torch.randperm(_N * _M, generator=g)[:nse].sort().values
    crow = _ops.crow_from_rows(flat // _M, _N)
    values = torch.randn(nse, generator=g, dtype=torch.float64).requires_grad_()
    fill = torch.tensor(-0.75, dtype=torch.float64, requires_grad=True)
    x = torch.randn(_M, 3, generator=g, dtype=torch.float64).requires_grad_()
    return crow, flat % _M, values, fill, x


def _grads(program, args):
    """Output, and the gradients of values, fill and x of out.sum()."""
    out = program(*args)
    out.sum().backward()
    grads = [args[i].grad for i in (2, 3, 4)]
    for i in (2, 3, 4):
        args[i].grad = None
    return out.detach(), grads


@pytest.mark.parametrize("backend", ["eager", "aot_eager",
                                     pytest.param("inductor", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", sorted(COMPONENT_PROGRAMS))
def test_components_compile_fullgraph(name, backend):
    """fullgraph=True over the components, forward and backward, values and
    gradients equal eager's at every nse; nse stays symbolic (one graph for
    every nse, counted by Dynamo) except where SPECIALIZES_NSE says why."""
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()
    program = COMPONENT_PROGRAMS[name]
    compiled = torch.compile(program, backend=backend, fullgraph=True)
    specializes = backend in SPECIALIZES_NSE.get(name, ("", ()))[1]
    for nse in (3, 6, 11):
        args = _components(nse, seed=nse)
        if not specializes:
            torch._dynamo.mark_dynamic(args[1], 0)
            torch._dynamo.mark_dynamic(args[2], 0)
        got, got_grads = _grads(compiled, args)
        want, want_grads = _grads(program, args)
        torch.testing.assert_close(got, want)
        for g, w in zip(got_grads, want_grads):
            assert (g is None) == (w is None)
            if w is not None:
                torch.testing.assert_close(g, w)
    graphs = counters["stats"]["unique_graphs"]
    assert graphs == (3 if specializes else 1), graphs


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_components_compile_refuses_what_eager_refuses(backend):
    """A fake kernel checks the shapes its kernel checks: a wrong dense
    operand is refused while tracing, with eager's message."""
    torch._dynamo.reset()
    crow, col, values, fill, x = _components(4)
    wrong = torch.ones(_M + 1, 3, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="must be 2-D with 4 rows"):
        _ops.spmm(crow, col, values, fill, wrong, _M)
    compiled = torch.compile(lambda *a: _ops.spmm(*a, _M), backend=backend, fullgraph=True)
    with pytest.raises(Exception, match="must be 2-D with 4 rows"):
        compiled(crow, col, values, fill, wrong)


class _AttentionComponents(torch.nn.Module):
    """The attention block on a CSR pattern's components (fill -inf)."""

    def forward(self, crow, col, values, fill, x):
        return _c_softmax(crow, col, values, fill, x)


def test_export_with_dynamic_nse():
    """torch.export of a module on the components with nse a symbolic
    dimension: the exported program runs at another nse and matches eager."""
    torch._dynamo.reset()
    nse = torch.export.Dim("nse", min=2, max=_N * _M)
    args = [t.detach() for t in _components(6)]
    args[3] = torch.tensor(-math.inf, dtype=torch.float64)
    ep = torch.export.export(_AttentionComponents(), tuple(args),
                             dynamic_shapes=({}, {0: nse}, {0: nse}, {}, {}))
    for other in (4, 11):
        crow, col, values, _, x = [t.detach() for t in _components(other, seed=other)]
        fill = torch.tensor(-math.inf, dtype=torch.float64)
        A = sf.sparse_csr_tensor(crow, col, values, (_N, _M), fill_value=fill)
        want = torch.softmax(A.to_dense() * 0.25, -1) @ x
        # Empty rows are all -inf: nan, as in the dense softmax.
        torch.testing.assert_close(ep.module()(crow, col, values, fill, x), want,
                                   equal_nan=True)


# ---- torch.export of modules taking SparseFillTensors (sf.exportable) ----------------

class _Attend(torch.nn.Module):
    """Attention on a CSR pattern with fill -inf, then a dense projection."""

    def forward(self, S, x):
        return torch.softmax(S * 0.5, -1) @ x


class _Gcn(torch.nn.Module):
    """A GCN layer on a CSR adjacency with a background fill."""

    def forward(self, A, x):
        # A.sum(1) keeps the rows that store something: a data-dependent
        # nse, which to_dense traces as an unbacked size (RFC.md#compile-components).
        return torch.relu((A @ (x * 0.5)) / A.sum(1).to_dense().unsqueeze(1))


def _csr(nse, seed, fill):
    crow, col, values, _, _ = _components(nse, seed)
    return sf.sparse_csr_tensor(crow, col, values.detach(), (_N, _M), fill_value=fill)


def test_export_of_a_sparsefilltensor_input():
    """Inside sf.exportable(), non-strict export takes a SparseFillTensor:
    the program's inputs are its components, its graph the sparsefill ops,
    and it runs on another tensor of the same structure, nse dynamic."""
    x = torch.randn(_M, 3, dtype=torch.float64)
    S = _csr(6, 6, -math.inf)
    # nse below the size: a full pattern takes other paths, which the
    # program's guard refuses.
    nse = torch.export.Dim("nse", min=2, max=_N * _M - 1)
    with sf.exportable():
        ep = torch.export.export(_Attend(), (S, x), strict=False,
                                 dynamic_shapes=([None, {0: nse}, {0: nse}, None], None))
        targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
        assert any(t.startswith("sparsefill.seg_softmax") for t in targets), targets
        for other in (4, 11):
            T = _csr(other, other, -math.inf)
            torch.testing.assert_close(ep.module()(T, x), _Attend()(T, x), equal_nan=True)
            torch.testing.assert_close(ep.module()(T, x),
                                       torch.softmax(T.to_dense() * 0.5, -1) @ x, equal_nan=True)
        # Another layout or size: the input spec refuses it, never misreads it.
        with pytest.raises(ValueError, match="input tree spec"):
            ep.module()(T.to_sparse_coo(), x)
        with pytest.raises(ValueError, match="input tree spec"):
            ep.module()(T.t().to_sparse_csr(), x[:1].expand(_N, 3))
    # Outside the context a SparseFillTensor is not taken apart.
    with pytest.raises(ValueError, match="input tree spec"):
        ep.module()(S, x)
    from torch.utils import _pytree as pytree
    assert sf.SparseFillTensor not in pytree.SUPPORTED_NODES


def test_export_gcn_block():
    """The GCN block (CSR, background fill) exports and runs at the
    exported nse on other values and fill."""
    A = sf.sparse_coo_tensor([[0, 1, 1, 3, 4], [2, 0, 3, 1, 0]],
                             torch.tensor([1.0, 0.5, 2.0, -1.0, 0.25], dtype=torch.float64),
                             (_N, _M), fill_value=0.125).to_sparse_csr()
    x = torch.randn(_M, 3, dtype=torch.float64)
    with sf.exportable():
        ep = torch.export.export(_Gcn(), (A, x), strict=False)
        B = sf.sparse_csr_tensor(A.crow_indices(), A.col_indices(), A.values() * 3, (_N, _M),
                                 fill_value=0.5)
        want = torch.relu((B.to_dense() @ (x * 0.5)) / B.to_dense().sum(1, keepdim=True))
        torch.testing.assert_close(ep.module()(B, x), want)
