"""torch.func and forward-mode AD through the products, softmax and reductions:
grad, vjp, jacrev, jvp, forward_ad dual numbers, vmap (of the function and
of its gradient) and the Hessian (jacfwd of jacrev) of functions of a
SparseFillTensor's components and of dense operands, each equal to the same
function of the dense tensor, with finite and non-finite fills; and the
gradients in float16 and bfloat16.

These ops have a derivative of their own (torch_sparsefill/_autograd.py,
reached from their Autograd kernels when a gradient is tracked, 
docs/design.md#autograd-twins); the element-wise ops are composite and checked by
test_func_elementwise.py. The dense reference builds the same tensor
differentiably (index_put of the values into the fill) and runs under the
same transform.
"""
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.autograd.forward_ad as fwAD

import torch_sparsefill as sf
from sf_testing import assert_all_close, dense_from_parts, sparse_from_parts

pytestmark = pytest.mark.cpu_only(reason="transforms of CPU programs")

F64 = torch.float64
IDX_A = torch.tensor([[0, 0, 1, 2], [0, 3, 1, 2]])  # A: 3 x 4, row 1 and column 1 partly stored
IDX_B = torch.tensor([[0, 1, 3, 3], [2, 0, 0, 1]])  # B: 4 x 3
FILLS = [0.3, math.inf, -math.inf, math.nan]


def _csr(T, idx, v, f, size):
    out = T(idx, v, f, size)
    return out.to_sparse_csr() if isinstance(out, sf.SparseFillTensor) else out


# Functions of (va, fa, w, vb, fb): A = (IDX_A, va, fa) 3 x 4, w dense 4 x 2,
# B = (IDX_B, vb, fb) 4 x 3; T builds a tensor from components (sparse or dense).
A = lambda T, va, fa: T(IDX_A, va, fa, (3, 4))  # noqa: E731
PROGRAMS = {
    "A@W": lambda T, va, fa, w, vb, fb: A(T, va, fa) @ w,
    "A@W csr": lambda T, va, fa, w, vb, fb: _csr(T, IDX_A, va, fa, (3, 4)) @ w,
    "W@A": lambda T, va, fa, w, vb, fb: w.t()[:, :3] @ A(T, va, fa),
    "A@B": lambda T, va, fa, w, vb, fb: A(T, va, fa) @ T(IDX_B, vb, fb, (4, 3)),
    "A@B fill 0": lambda T, va, fa, w, vb, fb: (
        _csr(T, IDX_A, va, torch.zeros((), dtype=F64), (3, 4))
        @ _csr(T, IDX_B, vb, torch.zeros((), dtype=F64), (4, 3))),
    "softmax": lambda T, va, fa, w, vb, fb: torch.softmax(A(T, va, fa), -1),
    "log_softmax dim 0": lambda T, va, fa, w, vb, fb: torch.log_softmax(A(T, va, fa), 0),
    "sum dim 0": lambda T, va, fa, w, vb, fb: A(T, va, fa).sum(0),
    "sum dim 1": lambda T, va, fa, w, vb, fb: A(T, va, fa).sum(1),
    "sum": lambda T, va, fa, w, vb, fb: A(T, va, fa).sum(),
    "mean dim 0": lambda T, va, fa, w, vb, fb: A(T, va, fa).mean(0),
    "prod dim 1": lambda T, va, fa, w, vb, fb: A(T, va, fa).prod(1),
    "prod dim 0": lambda T, va, fa, w, vb, fb: A(T, va, fa).prod(0),
    "amax dim 1": lambda T, va, fa, w, vb, fb: A(T, va, fa).amax(1),
    "amin dim 0": lambda T, va, fa, w, vb, fb: A(T, va, fa).amin(0),
    "amax": lambda T, va, fa, w, vb, fb: A(T, va, fa).amax(),
    "block": lambda T, va, fa, w, vb, fb: torch.softmax(A(T, va, fa) * 0.5, -1) @ w,
}


def _scalar_fn(name, builder):
    prog = PROGRAMS[name]

    def fn(va, fa, w, vb, fb):
        out = prog(builder, va, fa, w, vb, fb)
        if isinstance(out, sf.SparseFillTensor):
            out = out.to_dense()
        # positive weights: a fill's gradient is a sum of same-signed terms
        # also where an operand is infinite (no inf - inf of the weighting)
        weight = torch.linspace(0.5, 1.5, out.numel(), dtype=F64).reshape(out.shape)
        return (out * weight).sum()
    return fn


def _inputs(fill, zeros=False):
    g = torch.Generator().manual_seed(0)
    va = torch.rand(4, dtype=F64, generator=g) + 0.25
    if zeros:  # prod: a zero stored value, where its double backward used to fail
        va[1] = 0.0
    w = torch.rand(4, 2, dtype=F64, generator=g) - 0.25
    vb = torch.rand(4, dtype=F64, generator=g) - 0.5
    return va, torch.tensor(fill, dtype=F64), w, vb, torch.tensor(-0.7, dtype=F64)


ARGNUMS = (0, 1, 2, 3, 4)
CASES = [(n, f) for n in PROGRAMS for f in FILLS]
IDS = [f"{n}-fill{f}" for n, f in CASES]


@pytest.mark.parametrize("name,fill", CASES, ids=IDS)
def test_grad_vjp_jacrev(name, fill):
    ours, dense = _scalar_fn(name, sparse_from_parts), _scalar_fn(name, dense_from_parts)
    args = _inputs(fill, zeros=name.startswith("prod"))
    want = torch.func.grad(dense, argnums=ARGNUMS)(*args)
    assert_all_close(torch.func.grad(ours, argnums=ARGNUMS)(*args), want)
    assert_all_close(torch.func.jacrev(ours, argnums=ARGNUMS)(*args), want)
    assert_all_close(torch.func.vjp(ours, *args)[1](torch.tensor(1.0, dtype=F64)), want)


@pytest.mark.parametrize("name,fill", CASES, ids=IDS)
def test_jvp_and_dual_numbers(name, fill):
    ours, dense = _scalar_fn(name, sparse_from_parts), _scalar_fn(name, dense_from_parts)
    args = _inputs(fill, zeros=name.startswith("prod"))
    tangents = (torch.linspace(0.5, 2.0, 4, dtype=F64), torch.tensor(-0.4, dtype=F64),
                torch.linspace(-1.0, 1.0, 8, dtype=F64).reshape(4, 2),
                torch.linspace(1.0, -0.5, 4, dtype=F64), torch.tensor(0.6, dtype=F64))
    want = torch.func.jvp(dense, args, tangents)
    assert_all_close(torch.func.jvp(ours, args, tangents), want)
    with fwAD.dual_level():
        out = ours(*(fwAD.make_dual(a, t) for a, t in zip(args, tangents)))
        primal, tangent = fwAD.unpack_dual(out)
    assert_all_close((primal, tangent), want)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_vmap_and_per_example_grad(name):
    """vmap over a batch of A's values and of W equals the dense function
    under vmap (functorch's batching fallback: a loop over the batch); so
    does vmap of grad (A @ B with fills included: under a transform
    sparse_mm_dense takes its exact path instead of reading the operands'
    range with `.item()`, which vmap refuses)."""
    ours, dense = _scalar_fn(name, sparse_from_parts), _scalar_fn(name, dense_from_parts)
    va, fa, w, vb, fb = _inputs(0.3)
    batch_v, batch_w = torch.stack([va, va * 2, -va]), torch.stack([w, w * 0.5, -w])
    in_dims = (0, None, 0, None, None)
    assert_all_close((torch.func.vmap(ours, in_dims)(batch_v, fa, batch_w, vb, fb),),
           (torch.func.vmap(dense, in_dims)(batch_v, fa, batch_w, vb, fb),))
    grads = lambda fn: torch.func.vmap(  # noqa: E731
        torch.func.grad(fn, argnums=ARGNUMS), in_dims)(batch_v, fa, batch_w, vb, fb)
    assert_all_close(grads(ours), grads(dense))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("fill", [0.3, 0.0])
def test_hessian(name, fill):
    """Second order through functorch (jacfwd of jacrev, and jacrev of
    jacrev) equals dense, prod with a zero stored value and a zero fill
    included."""
    ours, dense = _scalar_fn(name, sparse_from_parts), _scalar_fn(name, dense_from_parts)
    args = _inputs(fill, zeros=name.startswith("prod"))
    for outer in (torch.func.jacfwd, torch.func.jacrev):
        hess = lambda fn: outer(torch.func.jacrev(fn, argnums=ARGNUMS),  # noqa: E731
                                argnums=ARGNUMS)(*args)
        for g_row, w_row in zip(hess(ours), hess(dense)):
            assert_all_close(g_row, w_row)


@pytest.mark.parametrize("name", ["prod dim 1", "prod dim 0", "A@W", "softmax", "amax dim 1"])
def test_double_backward_of_autograd(name):
    """torch.autograd's double backward (create_graph) equals dense's,
    prod at a zero stored value included (a fuzzer finding: it was NaN)."""
    ours, dense = _scalar_fn(name, sparse_from_parts), _scalar_fn(name, dense_from_parts)
    args = _inputs(0.3, zeros=True)

    def second(fn):
        leaves = [a.clone().requires_grad_() for a in args]
        first = torch.autograd.grad(fn(*leaves), leaves, create_graph=True, allow_unused=True,
                                    materialize_grads=True)
        probe = sum((g * torch.linspace(0.2, 1.0, g.numel(), dtype=F64).reshape(g.shape)).sum()
                    for g in first)
        return torch.autograd.grad(probe, leaves, allow_unused=True, materialize_grads=True)

    assert_all_close(second(ours), second(dense))


@pytest.mark.parametrize("name", ["softmax", "log_softmax dim 0", "prod dim 1", "A@W", "block"])
def test_func_grad_inside_autograd(name):
    """torch.func.grad inside torch.autograd (the transform's level over
    autograd's): the outer gradient of the inner one equals dense's; the
    forward recorded at every level (softmax's backward reads its output)."""
    ours, dense = _scalar_fn(name, sparse_from_parts), _scalar_fn(name, dense_from_parts)
    args = _inputs(0.3, zeros=name.startswith("prod"))

    def outer(fn):
        leaves = [a.clone().requires_grad_() for a in args]
        inner = torch.func.grad(fn, argnums=ARGNUMS)(*leaves)
        probe = sum((g * torch.linspace(0.2, 1.0, g.numel(), dtype=F64).reshape(g.shape)).sum()
                    for g in inner)
        return torch.autograd.grad(probe, leaves, allow_unused=True, materialize_grads=True)

    assert_all_close(outer(ours), outer(dense))


def test_from_dense_jvp_is_the_transpose_of_its_vjp():
    """sf.to_sparse's gradient projects the fill's gradient onto the
    unspecified elements (RFC.md#a-grad); its jvp is the transpose of that map:
    <J t, g> = <t, J^T g>."""
    x = torch.tensor([[0.5, 1.0, 0.5], [2.0, 0.5, -1.0]], dtype=F64)

    def fn(x):
        A = sf.to_sparse(x, fill_value=0.5)
        return A._values(), A._fill_value()

    t = torch.linspace(-1.0, 1.0, 6, dtype=F64).reshape(2, 3)
    _, (tv, tf) = torch.func.jvp(fn, (x,), (t,))
    gv, gf = torch.linspace(0.3, 1.2, tv.numel(), dtype=F64), torch.tensor(0.8, dtype=F64)
    (gx,) = torch.func.vjp(fn, x)[1]((gv, gf))
    torch.testing.assert_close((tv * gv).sum() + tf * gf, (t * gx).sum())


def test_transforms_of_a_sparsefill_tensor_outside_vmappable_refuse():
    # Outside sf.vmappable(), torch's pytree sees a SparseFillTensor as one
    # tensor and the transform wraps it whole (BatchedTensor, grad's
    # wrapper), whose ops reach ours below __torch_function__ (RFC.md#vmap).
    # Our refusal, naming the ways out (torch 2.13), or functorch's own
    # assertion before our code is reached (torch 2.14): never a result.
    # (vmap over its slices: test_vmap.py.)
    A = sf.sparse_csr_tensor([0, 2, 2, 4], [0, 3, 1, 2], torch.ones(4, dtype=F64), (3, 4),
                             fill_value=0.5)
    with pytest.raises((NotImplementedError, RuntimeError),
                       match="sf.vmap.*pass its components instead|INTERNAL ASSERT"):
        torch.func.vmap(lambda A: A.to_dense())(A)
    # grad's wrapper is refused by torch itself first: torch 2.13 raises
    # ("layout_impl is only implemented for TensorImpl subclasses"), torch
    # 2.14's functorch to_dense rule aborts the process (SIGABRT, torch's own
    # defect, RFC.md#vmap). Either way never a result; run apart so that an
    # abort fails nothing else.
    program = (
        "import torch, torch_sparsefill as sf\n"
        "A = sf.sparse_csr_tensor([0, 2, 2, 4], [0, 3, 1, 2], torch.ones(4, dtype=torch.float64),"
        " (3, 4), fill_value=0.5)\n"
        "try:\n"
        "    torch.func.grad(lambda A: A.to_dense().sum())(A)\n"
        "except (NotImplementedError, RuntimeError):\n"
        "    raise SystemExit(3)\n"
        "raise SystemExit(0)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(sf.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True,
                          timeout=300)
    assert done.returncode != 0, "torch.func.grad over a SparseFillTensor gave a result"
    assert done.returncode == 3 or done.returncode < 0, done.stderr.decode()[-2000:]


# Tolerances of the low-precision gradients against float64 on the same
# (rounded) inputs: a few of the dtype's ulps over these small sums.
LOW_PRECISION = {torch.float16: 1e-2, torch.bfloat16: 6e-2}


@pytest.mark.parametrize("dtype", list(LOW_PRECISION), ids=str)
@pytest.mark.parametrize("fill", [0.3, -math.inf])
@pytest.mark.parametrize("name", sorted(set(PROGRAMS) - {"A@B fill 0"}))
def test_low_precision_gradients(name, fill, dtype):
    """The backward formulas of the products, softmax and reductions
    (torch_sparsefill/_autograd.py) in float16 and bfloat16: each input's
    gradient keeps its dtype and equals the dense gradient in float64 of the
    same rounded inputs, within the dtype's tolerance. ("A@B fill 0" builds
    its fills in float64; its path is spgemm's, covered by "A@B".)"""
    ours, dense = _scalar_fn(name, sparse_from_parts), _scalar_fn(name, dense_from_parts)
    args = [a.to(dtype).requires_grad_() for a in _inputs(fill, zeros=name.startswith("prod"))]
    got = torch.autograd.grad(ours(*args), args, allow_unused=True)
    exact = [a.detach().double().requires_grad_() for a in args]
    want = torch.autograd.grad(dense(*exact), exact, allow_unused=True)
    tol = LOW_PRECISION[dtype]
    for g, w in zip(got, want):
        assert (g is None) == (w is None)
        if w is not None:
            assert g.dtype == dtype
            torch.testing.assert_close(g.double(), w, rtol=tol, atol=tol, equal_nan=True)


def _direct_backward_only_calls():
    """The two ops whose derivative is a backward only, called directly
    (the routes take other ops under transforms): (name, fn of one tensor)."""
    ops = torch.ops.sparsefill
    crow, col = torch.tensor([0, 1, 2]), torch.tensor([0, 1])
    blocks = torch.tensor([[[2.]], [[3.]]], dtype=torch.float64)
    fill = torch.tensor(0.5, dtype=torch.float64)
    k = torch.linspace(-1, 1, 8, dtype=torch.float64).reshape(2, 4)
    return [("bsr_spmm", lambda x: ops.bsr_spmm(crow, col, blocks, fill, x, 2)),
            ("sparse_attention", lambda x: ops.sparse_attention(crow, col, None, x, k, k.flip(0),
                                                                0.5)[0])]


@pytest.mark.cpu_only("the ops' registration, not a kernel")
@pytest.mark.parametrize("name", ["bsr_spmm", "sparse_attention"])
def test_backward_only_ops_refuse_forward_mode_and_take_torch_func_grad(name):
    """sparsefill::bsr_spmm and ::sparse_attention called directly under
    torch.func.jvp gave a zero tangent (forward AD: no tangent at all);
    torch.func.grad raised torch's "must override setup_context". Now
    forward mode refuses naming what to call, and grad equals autograd's."""
    fn = dict(_direct_backward_only_calls())[name]
    x = torch.linspace(0.1, 0.9, 8, dtype=torch.float64).reshape(2, 4)
    with pytest.raises(RuntimeError, match=f"sparsefill::{name} has no forward-mode derivative"):
        torch.func.jvp(fn, (x,), (torch.ones_like(x),))
    with pytest.raises(RuntimeError, match="no forward-mode derivative"), fwAD.dual_level():
        fn(fwAD.make_dual(x, torch.ones_like(x)))
    leaf = x.clone().requires_grad_()
    expected, = torch.autograd.grad(fn(leaf).square().sum(), leaf)
    torch.testing.assert_close(torch.func.grad(lambda x: fn(x).square().sum())(x), expected)
    assert torch.autograd.gradgradcheck(fn, (leaf,))
