"""Element-wise ops with an operand that broadcasts along sparse dims: a row
(m, 1) or column (1, n) vector keeps the pattern and makes a per-slice fill;
results and gradients equal the dense computation."""
from __future__ import annotations

import math
import operator

import pytest
import torch

import torch_sparsefill as sf
from sf_testing import assert_dense_equal, rng

FILLS = [0.0, 1.5, math.inf, -math.inf, math.nan]
LAYOUTS = [torch.sparse_coo, torch.sparse_csr]
OPS = [operator.add, operator.sub, operator.mul, operator.truediv, torch.maximum]


def sparse(shape, fill, seed, layout=torch.sparse_coo):
    g = rng(seed)
    keep = torch.rand(shape, generator=g) < 0.4
    idx = keep.nonzero().t()
    A = sf.sparse_coo_tensor(idx, torch.randn(idx.shape[1], generator=g, dtype=torch.float64),
                             shape, fill_value=fill).coalesce()
    return A.to_sparse_csr() if layout == torch.sparse_csr else A


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("vec", [(5, 1), (1, 6), (6,)], ids=str)
@pytest.mark.parametrize("op", OPS, ids=lambda f: f.__name__)
def test_vector_keeps_the_pattern(op, vec, fill, layout):
    A = sparse((5, 6), fill, 1, layout)
    x = torch.randn(vec, generator=rng(2), dtype=torch.float64)
    for out, expected in ((op(A, x), op(A.to_dense(), x)), (op(x, A), op(x, A.to_dense()))):
        assert isinstance(out, sf.SparseFillTensor)
        assert out._nnz() == A._nnz() and out.layout == layout
        assert_dense_equal(out.to_dense(), expected)


@pytest.mark.parametrize("fill", [0.0, 2.0, -math.inf])
def test_normalisations_from_the_issue(fill):
    A = sparse((5, 6), fill, 3)
    D = A.to_dense()
    # sparse keepdim reductions broadcast back over their tensor
    out = A - A.amax(-1, keepdim=True)
    assert isinstance(out, sf.SparseFillTensor)
    assert_dense_equal(out.to_dense(), D - D.amax(-1, keepdim=True))
    P = sparse((5, 6), 1.0, 4).abs()
    out = P / P.sum(1, keepdim=True)
    assert isinstance(out, sf.SparseFillTensor)
    assert_dense_equal(out.to_dense(), P.to_dense() / P.to_dense().sum(1, keepdim=True))


def test_row_scaling_and_masked_fill_stay_sparse():
    A = sparse((5, 6), 0.0, 5)
    d = torch.rand(5, generator=rng(6), dtype=torch.float64)
    out = d[:, None] * A
    assert isinstance(out, sf.SparseFillTensor)
    assert_dense_equal(out.to_dense(), d[:, None] * A.to_dense())
    pad = torch.tensor([False, True, False, False, True, False])
    out = A.masked_fill(pad[None, :], float("-inf"))
    assert isinstance(out, sf.SparseFillTensor)
    assert_dense_equal(out.to_dense(), A.to_dense().masked_fill(pad[None, :], float("-inf")))


def test_batched_row_vector():
    A = sparse((2, 5, 6), 1.0, 7)
    x = torch.randn(2, 5, 1, generator=rng(8), dtype=torch.float64)
    out = A * x
    assert isinstance(out, sf.SparseFillTensor)
    assert_dense_equal(out.to_dense(), A.to_dense() * x)


def test_a_fill_varying_along_every_sparse_dim_is_dense():
    A = sparse((5, 6), 1.0, 9)
    rows = A + torch.randn(5, 1, generator=rng(10), dtype=torch.float64)  # per-row fill
    col = torch.randn(1, 6, generator=rng(11), dtype=torch.float64)
    out = rows * col  # its fill would vary along rows and columns: dense, exact
    assert not isinstance(out, sf.SparseFillTensor)
    assert_dense_equal(out, rows.to_dense() * col)


@pytest.mark.parametrize("fill", [0.0, 1.5])
def test_gradients_reach_the_vector_and_the_tensor(fill):
    A = sparse((4, 5), fill, 12)
    v = A.values().detach().clone().requires_grad_()
    f = A._fill_value().detach().clone().requires_grad_()
    x = torch.randn(4, 1, generator=rng(13), dtype=torch.float64, requires_grad=True)
    S = sf.sparse_coo_tensor(A.indices(), v, A.shape, fill_value=f)
    ((S * x).to_dense() ** 2).sum().backward()
    D = A.to_dense().detach().requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    ((D * x2) ** 2).sum().backward()
    idx = A.indices()
    stored = torch.zeros(A.shape, dtype=torch.bool)
    stored[idx[0], idx[1]] = True
    torch.testing.assert_close(v.grad, D.grad[idx[0], idx[1]])
    torch.testing.assert_close(f.grad, D.grad[~stored].sum())
    torch.testing.assert_close(x.grad, x2.grad)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fill", [0.0, 1.5, math.nan])
@pytest.mark.parametrize("op", OPS, ids=lambda f: f.__name__)
def test_operands_of_one_shape_with_different_sparse_dims(op, fill, layout):
    """A hybrid operand (one sparse dim, a dense one) and a plain one of the
    same shape: their patterns meet with every dim sparse (fuzz seed 2203, a
    kron of a hybrid and a plain tensor, raised from the merge)."""
    g = rng(5)
    A = sparse((4, 3), fill, 3, layout)
    idx = torch.tensor([[0, 2]])
    f = torch.tensor([1., -2., 0.5], dtype=torch.float64)
    v = torch.randn(2, 3, generator=g, dtype=torch.float64, requires_grad=True)
    H = sf.sparse_coo_tensor(idx, v, (4, 3), fill_value=f, is_coalesced=True)
    assert H.dense_dim() == 1 and A.dense_dim() == 0
    for x, y in ((A, H), (H, A)):
        assert_dense_equal(op(x, y).to_dense(), op(x.to_dense(), y.to_dense()))
    op(A, H).to_dense().nansum().backward()
    v2 = v.detach().clone().requires_grad_()
    op(A.to_dense(), f.expand(4, 3).index_put((idx[0],), v2)).nansum().backward()
    assert_dense_equal(v.grad, v2.grad)


def test_trace_of_bool_is_refused_as_torch_refuses_it():
    A = sf.sparse_coo_tensor([[0], [0]], [True], (2, 2), fill_value=False)
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.trace(torch.zeros(2, 2, dtype=torch.bool))
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.trace(A)
