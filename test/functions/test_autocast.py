"""Autocast (RFC.md#autocast): a routed call under torch.autocast computes
in the dtype the dense call computes in, with that precision, and gradients
reach the fp32 components in fp32."""
import math

import pytest
import torch
import torch.nn.functional as F


import sf_testing as T

SIZE = (6, 5)
CALLS = {
    "A @ x": lambda A, x, y: A @ x,
    "y @ A": lambda A, x, y: y @ A,
    "mm": lambda A, x, y: torch.mm(A, x),
    "addmm": lambda A, x, y: torch.addmm(torch.ones(SIZE[0], 3), A, x),
    "linear": lambda A, x, y: F.linear(x.t(), A),
    "A @ x bf16": lambda A, x, y: A @ x.bfloat16(),
    "exp": lambda A, x, y: torch.exp(A),
    "A + bf16": lambda A, x, y: A + torch.ones(SIZE[1], dtype=torch.bfloat16),
    "A * 2": lambda A, x, y: A * 2,
    "sum": lambda A, x, y: A.sum(1),
    "softmax": lambda A, x, y: torch.softmax(A, 1),
}


@pytest.mark.cpu_only(reason="torch.autocast('cpu') is the policy under test")
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("fill", [0.0, 1.5, math.inf, math.nan])
@pytest.mark.parametrize("layout", T.LAYOUTS)
@pytest.mark.parametrize("name", sorted(CALLS))
def test_calls_follow_the_dense_autocast_policy(name, layout, fill, dtype):
    call = CALLS[name]
    if fill != fill or math.isinf(fill):
        if "@" in name or name in ("mm", "addmm", "linear"):
            fill = -0.5  # products' non-finite fills belong to their own tests
    A = T.random_tensor("random", fill, layout, dtype=torch.float32, size=SIZE)
    g = T.rng(7)
    x = torch.randn(SIZE[1], 3, generator=g)
    y = torch.randn(4, SIZE[0], generator=g)
    with torch.autocast("cpu", dtype=dtype):
        got = call(A, x, y)
        expected = call(A.to_dense(), x, y)
    assert got.dtype == expected.dtype
    tol = dict(rtol=2e-2, atol=2e-2) if expected.dtype != torch.float32 else {}
    torch.testing.assert_close(T.dense(got), expected, equal_nan=True, **tol)


@pytest.mark.cpu_only(reason="torch.autocast('cpu') is the policy under test")
@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_gradients_reach_fp32_components(layout):
    A = T.random_tensor("random", 0.25, layout, dtype=torch.float32, size=SIZE,
                        requires_grad=True)
    x = torch.randn(SIZE[1], 3, generator=T.rng(8))
    D = A.to_dense().detach().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, ref = A @ x, D @ x
    assert out.dtype == ref.dtype == torch.bfloat16
    out.float().pow(2).sum().backward()
    ref.float().pow(2).sum().backward()
    assert A._values().grad.dtype == A._fill_value().grad.dtype == torch.float32
    G = A.grad.to_dense()
    stored = A.to_dense() != A.fill_value()
    torch.testing.assert_close(G[stored], D.grad[stored], rtol=3e-2, atol=3e-2)
    torch.testing.assert_close(G[~stored], D.grad[~stored].mean().expand_as(G[~stored]),
                               rtol=3e-2, atol=3e-2)


@pytest.mark.cpu_only(reason="torch.autocast('cpu') is the policy under test")
def test_disabled_and_other_device_autocast_change_nothing():
    A = T.random_tensor("random", 0.5, torch.sparse_csr, dtype=torch.float32, size=SIZE)
    x = torch.randn(SIZE[1], 2)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        assert (A @ x).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        with torch.autocast("cpu", enabled=False):
            assert (A @ x).dtype == torch.float32
        assert (A.double() @ x.double()).dtype == (A.to_dense().double() @ x.double()).dtype


@pytest.mark.cpu_only(reason="torch.autocast('cpu') is the policy under test")
def test_out_keyword_under_autocast():
    A = T.random_tensor("random", 0.5, torch.sparse_coo, dtype=torch.float32, size=SIZE)
    out = torch.zeros_like(A)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.exp(A.bfloat16(), out=out) is out  # computed as dense would, then cast
    T.assert_dense_equal(out.to_dense(), torch.exp(A.to_dense().bfloat16()).float())
