"""sf.compile: a function of SparseFillTensors compiled whole, as one graph
with fullgraph=True, forward and backward (RFC.md#sf-compile "Compiled whole").

Every program runs eagerly and through `sf.compile` on a sequence of inputs
whose data would pick other eager paths (fills 0, 0.5, inf, -inf, nan; other
nse; a fully stored matrix; an empty pattern; values past the products'
fast bound): values and the gradients of every leaf (values, fills, dense
operands) must equal eager's on every call. The graph is Dynamo's with
fullgraph=True (a graph break would raise), counted by a recording backend;
nse changes reuse the one trace, layout/size/dtype changes trace anew.
"""
import math

import pytest
import torch

import torch_sparsefill as sf

pytestmark = [pytest.mark.cpu_only(reason="compiles for the CPU"),
              pytest.mark.filterwarnings("ignore:.*0/1 specialized")]

_N, _M = 4, 5
FILLS = [0.0, 0.5, math.inf, -math.inf, math.nan]


def _sparse(nse, fill, layout, seed, scale=1.0):
    """A _N x _M SparseFillTensor with nse stored elements (sorted), float64
    values and fill leaves requiring grad."""
    g = torch.Generator().manual_seed(seed)
    flat = torch.randperm(_N * _M, generator=g)[:nse].sort().values
    values = torch.randn(nse, generator=g, dtype=torch.float64) * scale
    A = sf.sparse_coo_tensor(torch.stack([flat // _M, flat % _M]), values, (_N, _M),
                             fill_value=fill)
    if layout == "csr":
        A = A.to_sparse_csr()
    return A.detach().requires_grad_()


def _dense_x(seed):
    g = torch.Generator().manual_seed(100 + seed)
    return torch.randn(_M, 3, generator=g, dtype=torch.float64).requires_grad_()


def _attention(S, x):
    # CSR attention: the pattern's scores, the rest masked by fill -inf.
    S = S.to_sparse_csr()
    S = sf.sparse_csr_tensor(S.crow_indices(), S.col_indices(), S.values(), S.shape,
                             fill_value=torch.full((), -math.inf, dtype=S.dtype))
    return torch.softmax(S * 0.5, -1) @ x


def _gcn(A, x):
    # A GCN layer over a background fill: normalised by the row sums, relu.
    return torch.relu((A @ (x * 0.5)) / A.sum(1).to_dense().unsqueeze(1))


PROGRAMS = {
    "elementwise": lambda A, x: torch.exp(torch.sigmoid(A * 2 + 1) - 0.5),
    "to-dense": lambda A, x: (A * 2 + 1).to_dense() * x.sum(),
    "matmul-dense": lambda A, x: (A * 2) @ x,
    "dense-matmul": lambda A, x: torch.tanh(x.t() @ A.t()),
    "softmax": lambda A, x: torch.softmax(A * 0.25, -1),
    "log-softmax": lambda A, x: torch.log_softmax(A * 0.5, 0).to_dense(),
    "sum-dim": lambda A, x: (A * 2).sum(0),
    "amax-mean": lambda A, x: A.amax(1).to_dense() + A.mean(0).to_dense().sum(),
    "prod": lambda A, x: A.prod(1),
    "shape": lambda A, x: (A.t() * 2).reshape(_N * _M).unsqueeze(0),
    "two-outputs": lambda A, x: {"sparse": A * x.sum(), "dense": (A @ x, 2)},
    "attention-block": _attention,
    "gcn-block": _gcn,
}
INDUCTOR = ["attention-block", "gcn-block",
            pytest.param("elementwise", marks=pytest.mark.slow)]


def _leaves(A, x):
    return [A._values(), A._fill_value(), x]


def _outputs(out):
    """The tensors of an output tree, SparseFillTensors as dense (finite
    part: the loss must not be nan)."""
    if isinstance(out, dict):
        return [t for v in out.values() for t in _outputs(v)]
    if isinstance(out, tuple):
        return [t for v in out for t in _outputs(v)]
    if isinstance(out, sf.SparseFillTensor):
        return [out.to_dense()]
    return [out] if isinstance(out, torch.Tensor) else []


def _value_and_grads(fn, A, x):
    out = fn(A, x)
    dense = _outputs(out)
    loss = sum((torch.where(torch.isfinite(d), d, 0.0) *
                torch.linspace(-1, 2, d.numel(), dtype=d.dtype).reshape(d.shape)).sum()
               for d in dense)
    grads = torch.autograd.grad(loss, _leaves(A, x), allow_unused=True)
    return out, [d.detach() for d in dense], grads


def _assert_same(got, want):
    got_out, got_dense, got_grads = got
    want_out, want_dense, want_grads = want
    assert type(got_out) is type(want_out)
    for g, w in zip(got_dense, want_dense):
        torch.testing.assert_close(g, w, equal_nan=True)
    for g, w in zip(got_grads, want_grads):
        assert (g is None) == (w is None)
        if w is not None:
            torch.testing.assert_close(g, w, equal_nan=True)


class _Recorder:
    """A backend that records each graph Dynamo hands it, then compiles it
    with `inner`."""

    def __init__(self, inner):
        self.inner, self.graphs = inner, []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return torch._dynamo.lookup_backend(self.inner)(gm, example_inputs)


def _check_calls(compiled, fn, layout, calls):
    """Each call's values and gradients through `compiled` equal eager's."""
    for nse, fill, seed in calls:
        A, x = _sparse(nse, fill, layout, seed), _dense_x(seed)
        _assert_same(_value_and_grads(compiled, A, x), _value_and_grads(fn, A, x))


def _run_sequence(name, layout, backend, calls):
    fn = PROGRAMS[name]
    recorder = _Recorder(backend)
    compiled = sf.compile(fn, backend=recorder)
    _check_calls(compiled, fn, layout, calls)
    return compiled, recorder


# nse and every fill on one trace; each call's data would pick another eager path.
_SEQUENCE = [(nse, fill, seed) for seed, (nse, fill) in
             enumerate(zip([4, 7, 11, 6, 9], FILLS))]


def _matrix():
    """Every program, layout and backend; the default run takes aot_eager on
    one layout per program (alternating), `make test-slow` the rest."""
    for i, name in enumerate(sorted(PROGRAMS)):
        for layout in ("coo", "csr"):
            yield name, layout, "eager"
            fast = layout == ("coo", "csr")[i % 2]
            yield pytest.param(name, layout, "aot_eager",
                               marks=() if fast else pytest.mark.slow)


# Programs whose eager path depends on the pattern, and calls after a trace
# on partial patterns: a fully stored matrix and an empty pattern.
FULL_AND_EMPTY = {"matmul-dense", "softmax", "sum-dim", "elementwise", "gcn-block", "prod"}
_FULL_AND_EMPTY_CALLS = [(_N * _M, 0.5, 1), (_N * _M, math.inf, 2), (0, 0.5, 3),
                         (0, -math.inf, 4), (1, 2.0, 5), (7, math.nan, 6)]


@pytest.mark.parametrize("name,layout,backend", list(_matrix()))
def test_one_graph_equals_eager(name, layout, backend):
    """Values and gradients equal eager's on every call; one trace serves
    every nse and fill; the sparse ops are in the graph (no graph break:
    fullgraph=True would raise). Then, for the programs in FULL_AND_EMPTY
    (backend eager), a fully stored matrix and an empty pattern: a correct
    new trace where the routing's guards ask for it, never a reused one
    whose path does not hold."""
    from torch._dynamo.utils import counters
    counters.clear()
    compiled, recorder = _run_sequence(name, layout, backend, _SEQUENCE)
    assert compiled.traces == 1
    assert recorder.graphs and not counters["graph_break"]
    targets = {str(n.target) for gm in recorder.graphs for n in gm.graph.nodes}
    assert any(t.startswith("sparsefill.") for t in targets), targets
    if backend == "eager" and name in FULL_AND_EMPTY:
        _check_calls(compiled, PROGRAMS[name], layout, _FULL_AND_EMPTY_CALLS)


@pytest.mark.parametrize("name", INDUCTOR)
def test_one_graph_inductor(name):
    # Inductor's on-disk caches key a graph on its ops' names, not on the
    # code of our composite kernels: compiled fresh here.
    with torch._inductor.config.patch(fx_graph_cache=False), \
            torch._functorch.config.patch(enable_autograd_cache=False):
        compiled, _ = _run_sequence(name, "csr", "inductor", _SEQUENCE[:3])
    assert compiled.traces == 1


def test_products_past_the_fast_bound():
    """Values whose products overflow the fast path's bound (eager then takes
    the exact one): the traced product is the exact path for every call."""
    fn = lambda A, B: (A @ B.t()).to_dense()  # noqa: E731
    compiled = sf.compile(fn, backend="eager")
    for seed, (scale, fa, fb) in enumerate([(1.0, 0.5, 2.0), (1e200, 0.5, 2.0),
                                            (1.0, 0.0, 0.0), (1e150, math.inf, -1.0)]):
        A, B = _sparse(6, fa, "coo", seed, scale), _sparse(8, fb, "csr", seed + 10)
        got, want = compiled(A, B), fn(A, B)
        torch.testing.assert_close(got, want, equal_nan=True)
        gg = torch.autograd.grad(got.nan_to_num(0, 0, 0).sum(), [A._values(), B._fill_value()])
        gw = torch.autograd.grad(want.nan_to_num(0, 0, 0).sum(), [A._values(), B._fill_value()])
        for g, w in zip(gg, gw):
            torch.testing.assert_close(g, w, equal_nan=True)
    assert compiled.traces == 1


TWO_OPERANDS = {"union": lambda A, B: torch.sigmoid(A * B + A) - B,
                "cat": lambda A, B: torch.cat([A, B * 3]).sum(1)}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("name", sorted(TWO_OPERANDS))
def test_two_patterns(name, backend):
    """Binary ops on two patterns (COO and CSR: the union path, its nse a
    data-dependent size of the graph) and a concatenation; one trace for
    every nse and fill."""
    fn = TWO_OPERANDS[name]
    compiled = sf.compile(fn, backend=backend)
    for seed, (fa, fb) in enumerate(zip(FILLS, FILLS[2:] + FILLS[:2])):
        A, B = _sparse(4 + seed, fa, "coo", seed), _sparse(9 - seed, fb, "csr", seed + 20)
        got, want = compiled(A, B).to_dense(), fn(A, B).to_dense()
        torch.testing.assert_close(got, want, equal_nan=True)
        leaves = [A._values(), A._fill_value(), B._values(), B._fill_value()]
        gg = torch.autograd.grad(got.nan_to_num(0, 0, 0).sum(), leaves)
        gw = torch.autograd.grad(want.nan_to_num(0, 0, 0).sum(), leaves)
        for g, w in zip(gg, gw):
            torch.testing.assert_close(g, w, equal_nan=True)
    assert compiled.traces == 1


def test_second_order_gradients():
    """Double backward through the graph (backend eager: the graph's ops keep
    their registered autograd): a product, softmax, a reduction."""
    def fn(A, x):
        return (torch.softmax(A, -1) @ x).sum() + (A * A).sum(0).to_dense().pow(2).sum()

    compiled = sf.compile(fn, backend="eager")
    for seed, fill in enumerate([0.5, -1.5]):
        A, x = _sparse(7, fill, "csr", seed), _dense_x(seed)
        results = []
        for f in (compiled, fn):
            g = torch.autograd.grad(f(A, x), _leaves(A, x), create_graph=True)
            results.append(torch.autograd.grad(sum(t.sum() for t in g), _leaves(A, x)))
        for g, w in zip(*results):
            torch.testing.assert_close(g, w)
    # AOTAutograd's compiled backward refuses to be differentiated: an error.
    aot = sf.compile(fn, backend="aot_eager")
    with pytest.raises(RuntimeError, match="create_graph"):
        g = torch.autograd.grad(aot(A, x), _leaves(A, x), create_graph=True)
        torch.autograd.grad(sum(t.sum() for t in g), _leaves(A, x))


def test_structure_changes_trace_anew():
    """Another layout, size or dtype is another trace, each right."""
    fn = PROGRAMS["matmul-dense"]
    compiled = sf.compile(fn, backend="eager")
    A, x = _sparse(6, 0.5, "coo", 0), _dense_x(0)
    torch.testing.assert_close(compiled(A, x), fn(A, x))
    torch.testing.assert_close(compiled(A.to_sparse_csr(), x), fn(A, x))
    assert compiled.traces == 2
    B = sf.sparse_coo_tensor([[0, 2], [1, 0]], [1.0, 2.0], (3, _M), fill_value=0.25)
    torch.testing.assert_close(compiled(B.double(), x), fn(B.double(), x))
    torch.testing.assert_close(compiled(A.float(), x.float()), fn(A.float(), x.float()))
    assert compiled.traces == 4
    compiled(_sparse(9, 1.0, "csr", 3), x)  # back to the CSR trace, another nse
    assert compiled.traces == 4


def test_guards_on_nse_are_kept():
    """A function that compares nse (here the user's; our routing's guards
    alike): export keeps only range guards, sf.compile checks every one, so
    a trace made where nse(A) != nse(B) is never reused where they match."""
    def fn(A, B):
        return A * 2 if A._nnz() == B._nnz() else A * 3

    compiled = sf.compile(fn, backend="eager")
    for n, m in [(5, 4), (4, 4), (6, 3), (3, 3)]:
        A, B = _sparse(n, 0.5, "coo", n), _sparse(m, 0.5, "coo", m + 7)
        torch.testing.assert_close(compiled(A, B).to_dense(), fn(A, B).to_dense())
    assert compiled.traces == 2


@pytest.mark.parametrize("fill", FILLS)
def test_constructor_inside_then_whole_sum(fill):
    """Indices built into a tensor inside the function, coalescing unknown:
    the trace's nse is a data-dependent (unbacked) size, and the whole sum
    leaves out the fill's term exactly when it covers nothing (a full
    pattern with fill inf or nan), as eager does."""
    def f(idx, v, fill):
        A = sf.sparse_coo_tensor(idx, v, (2, 2), fill_value=fill)
        return torch.exp(A).sum() + A.sum(1).to_dense().sum()

    compiled = sf.compile(f, backend="eager")
    for idx in ([[0, 1], [1, 0]], [[0, 0, 1, 1], [0, 1, 0, 1]], [[1, 0, 1], [1, 0, 1]]):
        idx = torch.tensor(idx)
        v = torch.arange(1., idx.shape[1] + 1, dtype=torch.float64, requires_grad=True)
        fv = torch.tensor(fill, dtype=torch.float64, requires_grad=True)
        want = f(idx, v, fv)
        want_grads = torch.autograd.grad(want, (v, fv), allow_unused=True)
        got = compiled(idx, v, fv)
        got_grads = torch.autograd.grad(got, (v, fv), allow_unused=True)
        torch.testing.assert_close(got, want, equal_nan=True)
        for g, w in zip(got_grads, want_grads):
            torch.testing.assert_close(g, w, equal_nan=True)
    assert compiled.traces == 1


def test_data_dependent_branches_refuse():
    """A branch on data that has no single graph: the trace fails, and
    sf.compile raises (never specialises on the example's data)."""
    compiled = sf.compile(lambda A: A * 2 if bool(A._fill_value() > 0) else A * 3,
                          backend="eager")
    with pytest.raises(RuntimeError, match="cannot be traced as one graph"):
        compiled(_sparse(4, 0.5, "coo", 0))
    # The routing's own: a sum over a per-slice fill asks which fill
    # elements are finite (RFC.md#reductions).
    A = _sparse(4, 0.0, "coo", 0)
    P = sf.sparse_coo_tensor(A._indices(), A._values(), (_N, _M),
                             fill_value=torch.tensor([[1.0], [math.inf], [0.5], [2.0]]).double())
    with pytest.raises(RuntimeError, match="cannot be traced as one graph"):
        sf.compile(lambda P: P.sum(), backend="eager")(P)
    # A result whose nse the trace cannot keep (RFC.md#sf-compile).
    B = _sparse(6, 1.5, "coo", 1)
    with pytest.raises(RuntimeError, match="cannot be traced as one graph"):
        sf.compile(lambda A, B: torch.where(A > 0.5, A, B), backend="eager")(A, B)


def test_tensors_outside_the_arguments_refuse():
    """A tensor the function reaches other than through its arguments (a
    closure's parameter, a module's weights) would enter the graph as a
    detached constant: refused, never a lost gradient."""
    W = torch.nn.Parameter(torch.randn(_M, 3, dtype=torch.float64))
    A = _sparse(6, 0.5, "coo", 0)
    with pytest.raises(TypeError, match="pass every tensor as an argument"):
        sf.compile(lambda A: A @ W, backend="eager")(A)
    linear = torch.nn.Linear(_M, 2).double()
    with pytest.raises(TypeError, match="pass every tensor as an argument"):
        sf.compile(lambda A: linear(A.to_dense()), backend="eager")(A)
    f = sf.compile(lambda A, W: A @ W, backend="eager")  # as an argument: its gradient
    torch.testing.assert_close(torch.autograd.grad(f(A, W).sum(), W)[0],
                               torch.autograd.grad((A @ W).sum(), W)[0])


class _GCNLayer(torch.nn.Module):
    """relu(A @ (x W) + b), a buffer scaling it, and a SparseFillTensor
    parameter (a learned background: values and fill) added to A."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.W = torch.nn.Parameter(torch.randn(_M, 3, generator=g, dtype=torch.float64))
        self.b = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
        self.register_buffer("scale", torch.tensor(0.5, dtype=torch.float64))
        E = sf.sparse_coo_tensor([[0, 1], [1, 2]], torch.tensor([0.3, -0.2]).double(),
                                 (_N, _M), fill_value=0.1)
        self.E = torch.nn.Parameter(E, requires_grad=True)

    def forward(self, A, x):
        return torch.relu((A + self.E) @ (x @ self.W[: x.shape[1]]) * self.scale + self.b)


def _train(step_fn, module, steps=3):
    """Three SGD steps; the loss of each and the final state."""
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    losses = []
    for k in range(steps):
        g = torch.Generator().manual_seed(k)
        A = _sparse(6 + k, 0.5, "coo", k).detach()
        x = torch.randn(_M, _M, generator=g, dtype=torch.float64)
        opt.zero_grad()
        loss = step_fn(A, x).square().sum()
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses), {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.mark.parametrize("how", ["module", "method"])
def test_a_module_with_parameters_trains_as_eager(how):
    """sf.compile(model) (or of its bound forward) lifts the module's
    parameters and buffers as inputs of the graph, as torch.export does:
    training takes the same steps as eager, SparseFillTensor parameters
    included, and the refusal of a module's parameter is gone."""
    eager, compiled = _GCNLayer(), _GCNLayer()
    if how == "module":
        fn = sf.compile(compiled, backend="eager")
    else:
        compiled.forward = sf.compile(compiled.forward, backend="eager")
        fn = compiled
    want_losses, want_state = _train(eager, eager)
    got_losses, got_state = _train(fn, compiled)
    torch.testing.assert_close(got_losses, want_losses)
    for k in want_state:
        got, want = got_state[k], want_state[k]
        if isinstance(want, sf.SparseFillTensor):
            got, want = got.to_dense(), want.to_dense()
        torch.testing.assert_close(got, want)
    assert not torch.equal(want_state["W"], _GCNLayer().W.detach())  # the steps moved it
    if how == "module":
        assert fn.traces == 1  # every step reuses the one trace (new nse, new weights)


@pytest.mark.parametrize("heads", [None, 2])
def test_attention_with_a_sparse_mask_compiles_whole(heads, capfd):
    """F.scaled_dot_product_attention with a CSR mask of fill -inf (3-D and
    4-D) traced as one graph (it failed on a guard over the fill's value);
    values and gradients equal eager's, nothing printed to stderr; a mask of
    another fill is refused when the graph runs, never computed as -inf."""
    g = torch.Generator().manual_seed(0)
    shape = (2, 5, 4) if heads is None else (2, heads, 5, 4)
    q, k, v = (torch.randn(shape, generator=g, dtype=torch.float64, requires_grad=True)
               for _ in range(3))
    keep = torch.rand(5, 5, generator=g) < 0.5
    keep |= torch.eye(5, dtype=torch.bool)
    mask = sf.to_sparse(torch.where(keep, torch.zeros(5, 5, dtype=torch.float64), -math.inf),
                        fill_value=-math.inf).to_sparse_csr()

    def attend(q, k, v, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    f = sf.compile(attend, backend="eager")
    got, want = f(q, k, v, mask), attend(q, k, v, mask)
    torch.testing.assert_close(got, want)
    for a, b in zip(torch.autograd.grad(got.sum(), (q, k, v)),
                    torch.autograd.grad(want.sum(), (q, k, v))):
        torch.testing.assert_close(a, b)
    assert capfd.readouterr().err == ""
    other = sf.to_sparse(torch.where(keep, torch.zeros(5, 5, dtype=torch.float64), 0.5),
                         fill_value=0.5).to_sparse_csr()
    with pytest.raises(RuntimeError, match="must exclude its unspecified positions"):
        f(q, k, v, other)


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_indexing_with_a_tensor_compiles_whole(layout):
    """A[idx] with an index tensor inside the function traced as one graph
    (it failed on the bounds check and the CSR rows' count); out of range
    is refused when the graph runs."""
    A = _sparse(7, 0.5, layout, 0)
    f = sf.compile(lambda A, i: A[i] * 2, backend="eager")
    i = torch.tensor([3, 0, 3, -1])
    got, want = f(A, i), A[i] * 2
    torch.testing.assert_close(got.to_dense(), want.to_dense())
    torch.testing.assert_close(torch.autograd.grad(got.to_dense().sum(), A._values())[0],
                               torch.autograd.grad(want.to_dense().sum(), A._values())[0])
    with pytest.raises(RuntimeError, match="out of bounds"):
        f(A, torch.tensor([0, _N]))


def test_a_refused_trace_prints_nothing(capfd):
    """A trace that meets a branch on data is refused by a RuntimeError naming
    the reason; torch's partial FX graph and shape warnings stay off stderr,
    while a warning of the function itself still reaches it."""
    P = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0).double(),
                             (_N, _M), fill_value=torch.tensor([[1.0], [math.inf], [0.5], [2.0]]).double())
    with pytest.raises(RuntimeError, match="cannot be traced as one graph"):
        sf.compile(lambda P: P.sum(), backend="eager")(P)
    assert capfd.readouterr().err == ""

    def noisy(A):
        print("from the function", file=__import__("sys").stderr)
        return A * 2
    sf.compile(noisy, backend="eager")(_sparse(3, 0.5, "coo", 0))
    assert "from the function" in capfd.readouterr().err


def test_decorator_and_arguments():
    @sf.compile(backend="eager")
    def f(A, x, scale=2.0):
        return (A * scale) @ x

    A, x = _sparse(5, 0.5, "coo", 0), _dense_x(0)
    torch.testing.assert_close(f(A, x), (A * 2.0) @ x)
    torch.testing.assert_close(f(A, x, scale=3.0), (A * 3.0) @ x)
    assert f.traces == 2  # a Python constant is part of the key
    assert f.__name__ == "f"
    with pytest.raises(TypeError, match="fn must be callable"):
        sf.compile(3)
    with pytest.raises(TypeError, match="dynamic"):
        sf.compile(f, dynamic="yes")
    with pytest.raises(TypeError, match="layout"):
        sf.compile(lambda t: t * 2, backend="eager")(torch.eye(2).to_sparse())
    from torch.utils import _pytree as pytree
    assert sf.SparseFillTensor not in pytree.SUPPORTED_NODES  # the node is scoped


def test_dynamic_false_specialises_nse():
    compiled = sf.compile(PROGRAMS["softmax"], backend="eager", dynamic=False)
    for seed, nse in enumerate([4, 6, 4]):
        A = _sparse(nse, 0.5, "coo", seed)
        torch.testing.assert_close(compiled(A, None).to_dense(),
                                   PROGRAMS["softmax"](A, None).to_dense())
    assert compiled.traces == 2
