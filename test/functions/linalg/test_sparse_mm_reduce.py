"""torch.sparse.mm(A, x, reduce=...) of a SparseFillTensor: each output row
reduces over all columns of A, the fill counted for the unspecified ones, as
the dense tensor would."""
from __future__ import annotations

import math

import pytest
import torch

import torch_sparsefill as sf
from sf_testing import FILLS, LAYOUTS, assert_dense_equal, layout_id, rng

REDUCTIONS = ["sum", "mean", "amax", "amin"]


def dense_reduce(D, x, reduce):
    prods = D.unsqueeze(-1) * x.unsqueeze(0)  # (m, k, d): every A[i, j] * x[j, :]
    return getattr(prods, reduce)(1)


def operands(fill, layout, seed, *, ties=False, m=6, k=7, d=3):
    """A (m, k) with an empty row and a full row, and x (k, d). With ties,
    values and x come from a few integers, so maxima tie often (the fill's
    products too)."""
    g = rng(seed)
    keep = torch.rand(m, k, generator=g) < 0.4
    keep[1] = False
    keep[2] = True
    idx = keep.nonzero().t()
    if ties:
        values = torch.randint(-2, 3, (idx.shape[1],), generator=g).double()
        x = torch.randint(-2, 3, (k, d), generator=g).double()
    else:
        values = torch.randn(idx.shape[1], generator=g, dtype=torch.float64)
        x = torch.randn(k, d, generator=g, dtype=torch.float64)
    A = sf.sparse_coo_tensor(idx, values, (m, k), fill_value=fill).coalesce()
    return (A.to_sparse_csr() if layout == torch.sparse_csr else A), x


@pytest.mark.parametrize("layout", LAYOUTS, ids=layout_id)
@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_matches_dense(reduce, fill, layout):
    for ties in (False, True):
        A, x = operands(fill, layout, 1, ties=ties)
        x[4, 1] = math.inf if ties else x[4, 1]
        out = torch.sparse.mm(A, x, reduce)
        assert_dense_equal(out, dense_reduce(A.to_dense(), x, reduce))


@pytest.mark.parametrize("reduce", ["amax", "amin"])
def test_nan_operand_propagates(reduce):
    A, x = operands(1.5, torch.sparse_coo, 2)
    x[3, 0] = math.nan  # column 3: stored in some rows, unspecified in others
    assert_dense_equal(torch.sparse.mm(A, x, reduce), dense_reduce(A.to_dense(), x, reduce))


@pytest.mark.parametrize("reduce", ["amax", "amin", "mean"])
def test_per_column_fill(reduce):
    A, x = operands(0.5, torch.sparse_coo, 3)
    A = A * torch.randn(1, 7, generator=rng(4), dtype=torch.float64)  # fill (1, 7)
    assert A._fill_value().shape == (1, 7)
    assert_dense_equal(torch.sparse.mm(A, x, reduce), dense_reduce(A.to_dense(), x, reduce))


def test_per_row_fill_refused():
    A, x = operands(0.5, torch.sparse_coo, 3)
    A = A * torch.randn(6, 1, generator=rng(4), dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="per-row fill"):
        torch.sparse.mm(A, x, "amax")
    assert_dense_equal(torch.sparse.mm(A, x, "mean"), dense_reduce(A.to_dense(), x, "mean"))


@pytest.mark.parametrize("layout", LAYOUTS, ids=layout_id)
@pytest.mark.parametrize("fill", [0.0, 1.0, -2.0])
@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_gradients_match_dense_with_ties(reduce, fill, layout):
    # Integer data: maxima tie among stored and unspecified elements; the
    # dense amax shares the gradient evenly among them, and so must we.
    A, x = operands(fill, layout, 5, ties=True)
    v = A.values().detach().clone().requires_grad_()
    f = torch.tensor(fill, dtype=torch.float64, requires_grad=True)
    xs = x.clone().requires_grad_()
    parts = (A.crow_indices(), A.col_indices()) if layout == torch.sparse_csr else (A.indices(),)
    make = sf.sparse_csr_tensor if layout == torch.sparse_csr else sf.sparse_coo_tensor
    S = make(*parts, v, A.shape, fill_value=f)
    w = torch.randn(6, 3, generator=rng(6), dtype=torch.float64)
    (torch.sparse.mm(S, xs, reduce) * w).sum().backward()
    v2 = v.detach().clone().requires_grad_()
    f2 = f.detach().clone().requires_grad_()
    x2 = x.clone().requires_grad_()
    D = make(*parts, v2, A.shape, fill_value=f2).to_dense()
    (dense_reduce(D, x2, reduce) * w).sum().backward()
    torch.testing.assert_close(v.grad, v2.grad)
    torch.testing.assert_close(f.grad, f2.grad)
    torch.testing.assert_close(xs.grad, x2.grad)


@pytest.mark.parametrize("reduce", REDUCTIONS)
def test_gradcheck_and_gradgradcheck(reduce):
    A, x = operands(0.3, torch.sparse_coo, 7)
    A = A.coalesce()
    idx = A.indices()

    def fn(v, f, x):
        return torch.sparse.mm(sf.sparse_coo_tensor(idx, v, A.shape, fill_value=f), x, reduce)

    args = (A.values().detach().clone().requires_grad_(),
            torch.tensor(0.3, dtype=torch.float64, requires_grad=True),
            x.clone().requires_grad_())
    assert torch.autograd.gradcheck(fn, args)
    assert torch.autograd.gradgradcheck(fn, args)


def test_bad_arguments():
    A, x = operands(1.0, torch.sparse_csr, 8)
    with pytest.raises(RuntimeError, match="reduce must be one of"):
        torch.sparse.mm(A, x, "prod")
    assert_dense_equal(torch.sparse.mm(A, x, "max"), dense_reduce(A.to_dense(), x, "amax"))
    assert_dense_equal(torch.sparse.mm(A, x, "min"), dense_reduce(A.to_dense(), x, "amin"))
    with pytest.raises(NotImplementedError, match="strided mat2"):
        torch.sparse.mm(A, A.t(), "mean")
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.sparse.mm(A, x[:3], "amax")
    empty = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0), (2, 0),
                                 fill_value=1.)
    with pytest.raises(RuntimeError, match="over 0 columns"):
        torch.sparse.mm(empty, torch.zeros(0, 3), "amax")
    inf_fill = sf.sparse_coo_tensor([[0], [0]], [1.], (2, 2), fill_value=math.inf)
    with pytest.raises(NotImplementedError, match="non-finite fill"):
        torch.sparse.mm(inf_fill, torch.ones(2, 2, requires_grad=True), "amax")
