"""Shared test machinery: random SparseFillTensors over named cases, the dense
reference checks, gradchecks and opchecks that the generated per-op tests call.

The oracle is always the dense computation: op(A).to_dense() == op(A.to_dense()),
and gradients equal the dense computation's (fill gradient = sum of the dense
gradient over the unspecified elements).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import torch

import torch_sparsefill as sf

LAYOUTS = [torch.sparse_coo, torch.sparse_csr]
FILLS = [0.0, 1.5, -2.0, math.inf, -math.inf, math.nan]
# The shared real matrices sit beside the checkout (../shared); override with
# SPARSEFILL_MATRICES. Tests that use them fail, never skip, when missing.
MATRICES = Path(os.environ.get("SPARSEFILL_MATRICES", Path(__file__).resolve().parents[2] /
                               "shared" / "data" / "matrices"))


@dataclass(frozen=True)
class Case:
    pattern: str  # empty | one | random | full | duplicates | hybrid
    fill: float


CASES = [Case(p, f) for p in ("empty", "one", "random", "full", "duplicates", "hybrid")
         for f in FILLS]


def case_id(case: Case) -> str:
    return f"{case.pattern}-fill{case.fill}"


def random_tensor(pattern: str, fill, layout=torch.sparse_coo, *, dtype=torch.float64,
                  seed: int = 0, size=(5, 7), domain: str = "real",
                  requires_grad: bool = False) -> sf.SparseFillTensor:
    """A SparseFillTensor of a named pattern. Stored values never equal the
    fill, so the pattern survives round trips through dense."""
    g = torch.Generator().manual_seed(seed)
    rows, cols = size
    dense_shape = (3,) if pattern == "hybrid" else ()
    if pattern == "empty":
        idx = torch.zeros(2, 0, dtype=torch.int64)
    elif pattern == "one":
        idx = torch.tensor([[rows // 2], [cols - 1]])
    elif pattern == "full":
        idx = torch.cartesian_prod(torch.arange(rows), torch.arange(cols)).t()
    else:
        mask = torch.rand(rows, cols, generator=g) < 0.35
        idx = mask.nonzero().t()
    nse = idx.shape[1]
    values = torch.randn((nse,) + dense_shape, generator=g, dtype=torch.float64)
    if domain == "positive":
        values = values.abs() + 0.1
    values = values.to(dtype)
    if pattern == "duplicates" and layout == torch.sparse_coo and nse > 1:
        # Repeat some entries, shuffled: the tensor is uncoalesced.
        extra = idx[:, : nse // 2]
        idx = torch.cat([idx, extra], 1)
        values = torch.cat([values, torch.randn(extra.shape[1], generator=g,
                                                dtype=torch.float64).to(dtype)])
        perm = torch.randperm(idx.shape[1], generator=g)
        idx, values = idx[:, perm], values[perm]
    fill_t = torch.full(dense_shape[-1:] if pattern == "hybrid" else (), fill, dtype=dtype)
    if pattern == "hybrid":
        fill_t[0] = 0.5 if not math.isnan(fill) else fill
    if domain == "positive" and not (fill > 0):
        fill_t = torch.full_like(fill_t, 0.75)
    A = sf.sparse_coo_tensor(idx, values, (rows, cols) + dense_shape, fill_value=fill_t,
                             requires_grad=requires_grad)
    return A.to_sparse(layout=layout)


def assert_dense_equal(actual: torch.Tensor, expected: torch.Tensor, **kw):
    assert not isinstance(actual, sf.SparseFillTensor)
    assert actual.layout == torch.strided
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    torch.testing.assert_close(actual, expected, equal_nan=True, **kw)


def check_result(out, expected_dense, layout):
    assert isinstance(out, sf.SparseFillTensor), type(out)
    assert out.layout == layout
    assert_dense_equal(out.to_dense(), expected_dense)


# ---- element-wise checks used by the generated tests ------------------------

def _operand(case: Case, layout, domain, seed=0):
    return random_tensor(case.pattern, case.fill, layout, seed=seed, domain=domain)


def check_unary(func, case, layout, domain="real"):
    A = _operand(case, layout, domain)
    out = func(A)
    check_result(out, func(A.to_dense()), layout)
    assert_dense_equal(out.fill_value(), func(A.fill_value()))
    assert out.nse() <= A.nse()


def check_scalar(func, case, layout, domain="real"):
    A = _operand(case, layout, domain)
    for other in (2.5, -3, 0, True):
        check_result(func(A, other), func(A.to_dense(), other), layout)


def check_binary(func, case, layout, domain="real"):
    A = _operand(case, layout, domain)
    for seed, fill in ((1, 6.0), (2, case.fill), (3, -math.inf)):
        B = random_tensor(case.pattern if case.pattern != "duplicates" else "random", fill,
                          layout, seed=seed, domain=domain)
        check_result(func(A, B), func(A.to_dense(), B.to_dense()), layout)
    # Same pattern, other values: the no-merge path.
    A = A.coalesce() if layout == torch.sparse_coo else A
    B = A._with(A._values() * 2 + 1, A._fill_value() - 1)
    check_result(func(A, B), func(A.to_dense(), B.to_dense()), layout)


def check_route_unary(func):
    A = random_tensor("random", 1.5)
    assert_dense_equal(func(A).to_dense(), func(A.to_dense()))


def check_route_scalar(func):
    A = random_tensor("random", 1.5)
    assert_dense_equal(func(A, 3.0).to_dense(), func(A.to_dense(), 3.0))


def check_route_binary(func):
    A, B = random_tensor("random", 1.5, seed=1), random_tensor("random", -0.5, seed=2)
    assert_dense_equal(func(A, B).to_dense(), func(A.to_dense(), B.to_dense()))


# ---- gradients ------------------------------------------------------------------

def _leaf_parts(seed, fill, layout, domain, pattern="random"):
    A = random_tensor(pattern, fill, layout, seed=seed, domain=domain)
    if layout == torch.sparse_csr:
        idx = (A.crow_indices(), A.col_indices())
    else:
        A = A.coalesce()
        idx = (A.indices(),)
    v = A.values().detach().clone().requires_grad_()
    f = A._fill_value().detach().clone().requires_grad_()
    return idx, v, f, A.shape


def _build(layout, idx, v, f, size):
    if layout == torch.sparse_csr:
        return sf.sparse_csr_tensor(*idx, v, size, fill_value=f)
    return sf.sparse_coo_tensor(*idx, v, size, fill_value=f)


def check_dense_gradients(fn_sparse, fn_dense, A: sf.SparseFillTensor):
    """Gradients through the sparse path equal the dense computation's:
    values get the dense gradient at their positions, the fill gets its sum
    over the unspecified elements, and A.grad.to_dense() is the dense
    gradient when that is constant over the unspecified elements."""
    A = (A.coalesce() if A.layout == torch.sparse_coo else A).detach().requires_grad_()
    fn_sparse(A).to_dense().sum().backward()
    D = A.to_dense().detach().requires_grad_()
    fn_dense(D).sum().backward()
    stored = torch.zeros(A.shape[:2], dtype=torch.bool)
    idx = A._coo_indices()
    stored[idx[0], idx[1]] = True
    torch.testing.assert_close(A._values().grad, D.grad[idx[0], idx[1]])
    expected_fill = D.grad[~stored].sum(0)
    torch.testing.assert_close(A._fill_value().grad.expand_as(expected_fill), expected_fill)


def gradcheck_unary(func, layout, second_order=False, domain="real"):
    for fill in (0.0, 1.5):
        idx, v, f, size = _leaf_parts(3, fill, layout, domain)

        def fn(v, f):
            return func(_build(layout, idx, v, f, size)).to_dense()

        assert torch.autograd.gradcheck(fn, (v, f))
        if second_order:
            assert torch.autograd.gradgradcheck(fn, (v, f))
        check_dense_gradients(func, func, random_tensor("random", fill, layout, seed=4,
                                                        domain=domain))


def gradcheck_scalar(func, layout, second_order=False, domain="real"):
    idx, v, f, size = _leaf_parts(5, 1.5, layout, domain)

    def fn(v, f):
        return func(_build(layout, idx, v, f, size), 2.5).to_dense()

    assert torch.autograd.gradcheck(fn, (v, f))
    if second_order:
        assert torch.autograd.gradgradcheck(fn, (v, f))
    check_dense_gradients(lambda t: func(t, -1.5), lambda t: func(t, -1.5),
                          random_tensor("random", 2.0, layout, seed=6, domain=domain))


def gradcheck_binary(func, layout, second_order=False, domain="real"):
    ia, va, fa, size = _leaf_parts(7, 1.5, layout, domain)
    for ib, vb, fb, _ in (_leaf_parts(8, -0.5, layout, domain),
                          (ia, va.detach().clone().requires_grad_(), fa.detach().clone()
                           .requires_grad_(), size)):
        def fn(va, fa, vb, fb):
            return func(_build(layout, ia, va, fa, size), _build(layout, ib, vb, fb, size)).to_dense()

        assert torch.autograd.gradcheck(fn, (va, fa, vb, fb))
        if second_order:
            assert torch.autograd.gradgradcheck(fn, (va, fa, vb, fb))
    B = random_tensor("random", -0.5, layout, seed=9, domain=domain)
    check_dense_gradients(lambda t: func(t, B), lambda t: func(t, B.to_dense()),
                          random_tensor("random", 1.5, layout, seed=10, domain=domain))


# ---- opcheck ---------------------------------------------------------------------

def opcheck_unary(op):
    v = torch.randn(6, 3, dtype=torch.float64, requires_grad=True)
    f = torch.randn(3, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(op, (v, f))


def opcheck_scalar(op):
    v = torch.randn(6, dtype=torch.float64, requires_grad=True)
    f = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    torch.library.opcheck(op, (v, f, 2.5))


def opcheck_binary(op):
    A = random_tensor("random", 1.5, seed=11)
    B = random_tensor("random", -2.0, seed=12)
    args = (A.indices(), A.values().requires_grad_(), A._fill_value().requires_grad_(),
            B.indices(), B.values().requires_grad_(), B._fill_value().requires_grad_(),
            list(A.shape))
    torch.library.opcheck(op, args)
    same = getattr(torch.ops.sparsefill, op._qualified_op_name.split("::")[1] + "_same")
    torch.library.opcheck(same, (args[1], args[2], args[4].detach()[: 0].new_ones(args[1].shape)
                                 .requires_grad_(), args[5]))
