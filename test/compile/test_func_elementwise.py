"""torch.func and forward-mode AD through the element-wise ops: grad, vjp,
jacrev, jvp, forward_ad dual numbers and vmap over functions of a
SparseFillTensor's components, each equal to the same function of the dense
tensor, for every kind of element-wise op (unary, scalar, dense operand,
same pattern, union of patterns, three patterns) and finite and non-finite
fills.

The element-wise kernels are CompositeImplicitAutograd over ATen (
docs/design.md#composite-elementwise), so these transforms see ATen ops; the dense reference builds the
same tensor differentiably (index_put of the values into the fill).
"""
import math

import pytest
import torch
import torch.autograd.forward_ad as fwAD

from sf_testing import assert_all_close, dense_from_parts, leaf, sparse_from_parts

pytestmark = pytest.mark.cpu_only(reason="transforms of CPU programs")

F64 = torch.float64
SIZE = (3, 4)
IDX_A = torch.tensor([[0, 0, 1, 2], [0, 3, 1, 2]])  # A's pattern
IDX_B = torch.tensor([[0, 1, 2, 2], [3, 1, 0, 3]])  # B's: shares two elements with A
# Positive weights: a fill's gradient is the weights' sum times the op's
# derivative, which agrees with dense's per-element sum also where that
# derivative is infinite (mixed signs would make dense compute inf - inf).
WEIGHT = torch.linspace(0.5, 1.5, 12, dtype=F64).reshape(SIZE)
FILLS = [0.3, math.inf, -math.inf, math.nan]


# Functions of two operands' components (va, fa, vb, fb) -> a scalar, each
# given the tensor builder (sparse or dense); one per kind of element-wise op.
PROGRAMS = {
    "unary": lambda T, va, fa, vb, fb: torch.sin(T(IDX_A, va, fa)),
    "unary_chain": lambda T, va, fa, vb, fb: torch.sigmoid(torch.tanh(T(IDX_A, va, fa))).square(),
    "scalar": lambda T, va, fa, vb, fb: 2.5 - T(IDX_A, va, fa) * 3,
    "dense_operand": lambda T, va, fa, vb, fb: T(IDX_A, va, fa) * fb,
    "same_pattern": lambda T, va, fa, vb, fb: T(IDX_A, va, fa) * T(IDX_A, vb, fb),
    "union": lambda T, va, fa, vb, fb: torch.atan2(T(IDX_A, va, fa), T(IDX_B, vb, fb)),
    "union_add": lambda T, va, fa, vb, fb: T(IDX_A, va, fa) + 2 * T(IDX_B, vb, fb),
    "ternary": lambda T, va, fa, vb, fb: torch.lerp(T(IDX_A, va, fa), T(IDX_B, vb, fb),
                                                    T(IDX_B, vb * 0.5, fb * 0.25)),
    "clamp_tensor": lambda T, va, fa, vb, fb: torch.clamp(T(IDX_A, va, fa), T(IDX_B, vb, fb)),
}


def _scalar_fn(name, builder):
    prog = PROGRAMS[name]

    def fn(va, fa, vb, fb):
        out = prog(builder, va, fa, vb, fb)
        if not isinstance(out, torch.Tensor) or out.layout != torch.strided:
            out = out.to_dense()
        return (out * WEIGHT).sum()
    return fn


# The two builders of a program: the same components as a SparseFillTensor or strided.
SPARSE = lambda idx, v, f: sparse_from_parts(idx, v, f, SIZE)  # noqa: E731
DENSE = lambda idx, v, f: dense_from_parts(idx, v, f, SIZE)  # noqa: E731


def _inputs(fill):
    g = torch.Generator().manual_seed(0)
    va = torch.rand(4, dtype=F64, generator=g) + 0.25
    vb = -torch.rand(4, dtype=F64, generator=g) - 0.5
    return va, torch.tensor(fill, dtype=F64), vb, torch.tensor(-0.7, dtype=F64)


CASES = [(n, f) for n in PROGRAMS for f in FILLS]
IDS = [f"{n}-fill{f}" for n, f in CASES]


@pytest.mark.parametrize("name,fill", CASES, ids=IDS)
def test_grad_vjp_jacrev(name, fill):
    ours, dense = _scalar_fn(name, SPARSE), _scalar_fn(name, DENSE)
    args, argnums = _inputs(fill), (0, 1, 2, 3)
    want = torch.func.grad(dense, argnums=argnums)(*args)
    assert_all_close(torch.func.grad(ours, argnums=argnums)(*args), want)
    assert_all_close(torch.func.jacrev(ours, argnums=argnums)(*args), want)
    assert_all_close(torch.func.vjp(ours, *args)[1](torch.tensor(1.0, dtype=F64)), want)
    # and torch.autograd agrees (the reverse mode all of these are built on)
    leaves = [a.clone().requires_grad_() for a in args]
    assert_all_close(torch.autograd.grad(ours(*leaves), leaves, materialize_grads=True), want)


@pytest.mark.parametrize("name,fill", CASES, ids=IDS)
def test_jvp_and_dual_numbers(name, fill):
    ours, dense = _scalar_fn(name, SPARSE), _scalar_fn(name, DENSE)
    args = _inputs(fill)
    tangents = (torch.linspace(0.5, 2.0, 4, dtype=F64), torch.tensor(-0.4, dtype=F64),
                torch.linspace(-1.0, 1.0, 4, dtype=F64), torch.tensor(0.6, dtype=F64))
    want = torch.func.jvp(dense, args, tangents)
    assert_all_close(torch.func.jvp(ours, args, tangents), want)
    with fwAD.dual_level():
        out = ours(*(fwAD.make_dual(a, t) for a, t in zip(args, tangents)))
        primal, tangent = fwAD.unpack_dual(out)
    assert_all_close((primal, tangent), want)


@pytest.mark.parametrize("name,fill", CASES, ids=IDS)
def test_vmap(name, fill):
    """vmap over a batch of A's values (and, for a dense operand, of the
    number it is combined with) equals the dense function under vmap."""
    ours, dense = _scalar_fn(name, SPARSE), _scalar_fn(name, DENSE)
    va, fa, vb, fb = _inputs(fill)
    batch_v = torch.stack([va, va * 2, -va])
    batch_f = torch.stack([fb, fb * 3, fb - 1])
    in_dims = (0, None, None, 0)
    assert_all_close((torch.func.vmap(ours, in_dims)(batch_v, fa, vb, batch_f),),
           (torch.func.vmap(dense, in_dims)(batch_v, fa, vb, batch_f),))
    # per-example gradients: vmap of grad
    grads = torch.func.vmap(torch.func.grad(ours, argnums=(0, 1)), in_dims)
    want = torch.func.vmap(torch.func.grad(dense, argnums=(0, 1)), in_dims)
    assert_all_close(grads(batch_v, fa, vb, batch_f), want(batch_v, fa, vb, batch_f))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_hessian(name):
    """Second order through functorch (jacfwd of jacrev) equals dense."""
    ours, dense = _scalar_fn(name, SPARSE), _scalar_fn(name, DENSE)
    args = _inputs(0.3)
    hess = lambda fn: torch.func.jacfwd(torch.func.jacrev(fn, argnums=(0, 1)),  # noqa: E731
                                        argnums=(0, 1))(*args)
    want = hess(dense)
    got = hess(ours)
    for g_row, w_row in zip(got, want):
        assert_all_close(g_row, w_row)


@pytest.mark.parametrize("fn", [torch.sign, torch.round, torch.floor, torch.ceil, torch.trunc])
def test_piecewise_constant_ops_give_torchs_gradient(fn):
    """sign/round/...: the gradient torch gives the dense tensor (zeros),
    no more and no less (the hand-written derivatives gave zero tensors also
    where torch gives none)."""
    v = torch.tensor([0.4, -1.6, 2.5, 0.0], dtype=F64, requires_grad=True)
    f = torch.tensor(0.7, dtype=F64, requires_grad=True)
    out = fn(SPARSE(IDX_A, v, f))
    vd, fd = leaf(v), leaf(f)
    dense_out = fn(DENSE(IDX_A, vd, fd))
    assert out.requires_grad == dense_out.requires_grad
    (out.to_dense() * WEIGHT).sum().backward()
    (dense_out * WEIGHT).sum().backward()
    assert_all_close((v.grad, f.grad), (vd.grad, fd.grad))
