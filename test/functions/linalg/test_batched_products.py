"""Batched and broadcasting matrix products: matmul / bmm / baddbmm with any
number of batch dims, either operand sparse, checked against the same
product of the dense tensors."""
from __future__ import annotations

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from sf_testing import assert_dense_equal, rng

# Finite fills: each batch here is one 2-D product, whose non-finite fills
# crosscutting/test_regressions.py checks.
FILLS = [0.0, 1.5, -2.0]


def sparse(shape, fill, seed, density=0.3):
    """A COO SparseFillTensor of `shape` (all dims sparse): random stored values."""
    g = rng(seed)
    dense = torch.randn(shape, generator=g, dtype=torch.float64)
    keep = torch.rand(shape, generator=g) < density
    idx = keep.nonzero().t()
    return sf.sparse_coo_tensor(idx, dense[keep], shape, fill_value=fill)


def strided(shape, seed):
    return torch.randn(shape, generator=rng(seed), dtype=torch.float64)


SHAPES = [  # (a shape, b shape): torch.matmul's broadcasting
    ((5, 5, 5), (1, 5, 5)),
    ((1, 5, 5), (5, 5, 5)),
    ((2, 3, 4, 5), (2, 3, 5, 6)),
    ((2, 1, 4, 5), (1, 3, 5, 6)),
    ((3, 4, 5), (5, 6)),
    ((4, 5), (2, 3, 5, 6)),
    ((2, 3, 4, 5), (5,)),
    ((5,), (2, 5, 3)),
]


# (shapes, which operands are sparse); a 1-D sparse operand is refused (below).
COMBOS = [(shapes, which) for shapes in SHAPES for which in ("a", "b", "both")
          if not (len(shapes[0]) == 1 and which != "b") and not (len(shapes[1]) == 1 and which != "a")]


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("shapes,which", COMBOS, ids=str)
def test_matmul_broadcasts_like_dense(shapes, which, fill):
    sa, sb = shapes
    a = sparse(sa, fill, 1) if which in ("a", "both") else strided(sa, 1)
    b = sparse(sb, -fill, 2) if which in ("b", "both") else strided(sb, 2)
    expected = torch.matmul(*(T.dense(x)
                              for x in (a, b)))
    out = a @ b
    if isinstance(out, sf.SparseFillTensor):
        out = out.to_dense()
    assert_dense_equal(out, expected)


def test_batched_fill_varies_per_batch_and_row():
    # A per-slice fill along the batch dim and the rows (e.g. after a concatenation).
    a = sparse((3, 4, 5), 0.0, 3).coalesce()  # indices() needs the coalesced flag (as torch)
    fill = torch.arange(12, dtype=torch.float64).reshape(3, 4, 1)
    a = sf.sparse_coo_tensor(a.indices(), a.values(), a.shape, fill_value=fill)
    b = strided((1, 5, 2), 4)
    assert_dense_equal(a @ b, a.to_dense() @ b)


@pytest.mark.parametrize("fill", [0.0, 2.0])
def test_bmm_and_baddbmm(fill):
    a, b = sparse((3, 4, 5), fill, 5), strided((3, 5, 2), 6)
    assert_dense_equal(torch.bmm(a, b), torch.bmm(a.to_dense(), b))
    c = strided((3, 4, 2), 7)
    assert_dense_equal(torch.baddbmm(c, a, b, beta=0.5, alpha=2.0),
                       torch.baddbmm(c, a.to_dense(), b, beta=0.5, alpha=2.0))
    with pytest.raises(RuntimeError, match="same number of batches"):
        torch.bmm(a, strided((1, 5, 2), 8))


def test_zero_fill_operands_stay_sparse():
    a, b = sparse((2, 4, 5), 0.0, 9), sparse((2, 5, 3), 0.0, 10)
    out = torch.matmul(a, b)
    assert isinstance(out, sf.SparseFillTensor)
    assert_dense_equal(out.to_dense(), a.to_dense() @ b.to_dense())


def test_attention_shapes_gradients():
    # (B, H, S, S) sparse @ (B, H, S, D): gradients equal the dense ones.
    a = sparse((2, 2, 4, 4), 0.5, 11).coalesce()
    v = a.values().detach().clone().requires_grad_()
    f = a._fill_value().detach().clone().requires_grad_()
    x = strided((2, 2, 4, 3), 12).requires_grad_()
    A = sf.sparse_coo_tensor(a.indices(), v, a.shape, fill_value=f)
    (A @ x).pow(2).sum().backward()
    D = a.to_dense().detach().requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    (D @ x2).pow(2).sum().backward()
    idx = a.indices()
    torch.testing.assert_close(v.grad, D.grad[tuple(idx)])
    stored = torch.zeros(a.shape, dtype=torch.bool)
    stored[tuple(idx)] = True
    torch.testing.assert_close(f.grad, D.grad[~stored].sum())
    torch.testing.assert_close(x.grad, x2.grad)


def test_refusals_name_the_problem():
    a = sparse((2, 4, 5), 1.0, 13)
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        a @ strided((2, 4, 5), 14)
    with pytest.raises(NotImplementedError, match="1-D SparseFillTensor"):
        sparse((5,), 1.0, 15) @ strided((2, 5, 3), 16)
    hybrid = sf.sparse_coo_tensor([[0], [1]], torch.ones(1, 5), (2, 4, 5), fill_value=1.0)
    with pytest.raises(NotImplementedError, match="hybrid"):
        hybrid @ strided((2, 5, 3), 17)
