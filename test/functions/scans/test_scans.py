"""Scans and differences with the fill (torch_sparsefill/functions/scans/):
cumsum, cumprod, cummax, cummin, logcumsumexp, cumulative_trapezoid, diff,
gradient, trapezoid against the dense ops on A.to_dense() over every fill,
pattern and layout, and their gradients against dense autograd."""
from __future__ import annotations

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from sf_testing.gradients import build, leaf_parts

CASES = [T.Case(p, f) for p in ("empty", "one", "random", "full", "hybrid") for f in T.FILLS]


def _ops(d):
    return {
        "cumsum": lambda x: torch.cumsum(x, d),
        "cumsum-dtype": lambda x: torch.cumsum(x, d, dtype=torch.float32),
        "cumprod": lambda x: torch.cumprod(x, d),
        "cummax": lambda x: torch.cummax(x, d),
        "cummin": lambda x: torch.cummin(x, d),
        "logcumsumexp": lambda x: torch.logcumsumexp(x, d),
        "cumulative_trapezoid": lambda x: torch.cumulative_trapezoid(x, dx=0.5, dim=d),
        "diff": lambda x: torch.diff(x, dim=d),
        "diff2": lambda x: torch.diff(x, 2, d),
        "gradient": lambda x: torch.gradient(x, dim=d),
        "gradient-edge2": lambda x: torch.gradient(x, spacing=0.5, dim=d, edge_order=2),
        "trapezoid": lambda x: torch.trapezoid(x, dx=2.0, dim=d),
    }


def _dense(x):
    if isinstance(x, (tuple, list)):
        return tuple(_dense(y) for y in x)
    return x.to_dense() if isinstance(x, sf.SparseFillTensor) else x


def _check(got, want):
    got, want = _dense(got), want
    if isinstance(want, tuple):
        for a, b in zip(got, want):
            _check(a, b)
        return
    assert got.dtype == want.dtype and got.shape == want.shape
    T.assert_dense_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("layout", T.ALL_LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("case", CASES, ids=T.case_id)
def test_scans_equal_dense(case, layout):
    if layout in T.EXTRA_LAYOUTS and case not in T.EXTRA_CASES:
        pytest.skip("the extra layouts run their own cases")
    A = T.random_tensor(case.pattern, case.fill, layout, seed=6)
    D = A.to_dense()
    for d in range(A.dim()):
        for name, fn in _ops(d).items():
            if name.startswith("gradient") and A.shape[d] < 3:
                continue
            _check(fn(A), fn(D))


def test_diff_keeps_it_sparse_and_joins():
    A = sf.sparse_coo_tensor([[2, 7]], [5.0, -1.0], (10**6,), fill_value=1.0)
    out = torch.diff(A)
    assert out._nnz() <= 4 and float(out.fill_value()) == 0.0
    D = A.to_dense()
    _check(torch.diff(A, prepend=torch.tensor([3.0]), append=torch.tensor([4.0, 1.0])),
           torch.diff(D, prepend=torch.tensor([3.0]), append=torch.tensor([4.0, 1.0])))
    B = sf.sparse_coo_tensor([[1]], [True], (4,), fill_value=False)
    _check(torch.diff(B), torch.diff(B.to_dense()))
    B = sf.sparse_coo_tensor([[1, 3]], [2.0, -1.0], (5,), fill_value=0.5)
    x = torch.tensor([0.0, 0.5, 2.0, 2.5, 4.0])
    _check(torch.trapezoid(B, x), torch.trapezoid(B.to_dense(), x))
    _check(torch.trapz(B, x), torch.trapz(B.to_dense(), x))


_GRAD_OPS = ["cumsum", "cumprod", "cummax", "logcumsumexp", "diff", "diff2", "gradient",
             "gradient-edge2", "trapezoid", "cumulative_trapezoid"]


@pytest.mark.parametrize("layout", T.LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("op", _GRAD_OPS)
def test_gradients(op, layout):
    idx, v, f, size = leaf_parts(12, 0.7, layout, "real")
    for d in (0, 1):
        fn = _ops(d)[op]

        def run(v, f):
            out = fn(build(layout, idx, v, f, size))
            out = out[0] if isinstance(out, tuple) else out
            return _dense(out)

        torch.autograd.gradcheck(run, (v, f))
        A = build(layout, idx, v, f, size)
        D = A.to_dense().detach().requires_grad_()
        want = fn(D)
        want = want[0] if isinstance(want, tuple) else want
        g = torch.randn(want.shape, dtype=want.dtype, generator=torch.Generator().manual_seed(d))
        (gd,) = torch.autograd.grad(want, D, g)
        gv, gf = torch.autograd.grad(run(v, f), (v, f), g)
        stored = T.stored_mask(A)
        torch.testing.assert_close(gf, gd[~stored].sum())
        torch.testing.assert_close(gv, gd[stored])
