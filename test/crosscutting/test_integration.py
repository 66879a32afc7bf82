"""Op families composed: per-slice fills made by one family (softmax, cat,
reductions) consumed by another (products, shape ops, element-wise ops), with
gradients. Each chain is checked against the same chain on the dense tensor.
"""
import pytest
import torch

from sf_testing import (ALL_LAYOUTS, BATCHED_LAYOUTS, LAYOUTS, assert_dense_equal, dense, layout_id,
                        leaves, random_tensor, rebuild)


# Dims counted from the end and mT for the transpose: the same chains on 2-D
# tensors and on batched compressed ones (RFC.md#batched-compressed), whose batch dim leads.
CHAINS = {
    # softmax gives a per-row fill; the product reads it as F * colsum(B)
    "softmax_then_mm": lambda X, B: torch.softmax(X, -1) @ B,
    # the transpose of a per-row fill is a per-column fill: F^T B in the product
    "softmax_t_then_mm": lambda X, B: torch.softmax(X, -1).mT @ B[: X.shape[-2]],
    # per-slice fills through element-wise ops and a reduction
    "log_softmax_exp_sum": lambda X, B: torch.exp(torch.log_softmax(X, -2)).sum(-1),
    # cat of two different fills: a per-row fill, then a row reduction and a product
    "cat_then_mm": lambda X, B: torch.cat([X, X * 2 + 1], -2) @ B,
    "cat_then_amax": lambda X, B: torch.cat([X, X - 3], -2).amax(-1),
    # slicing a per-slice fill, then softmax of the slice along the rows again
    "softmax_slice_softmax": lambda X, B: torch.softmax(torch.softmax(X, -1)[..., 1:4, :], -1),
    # sparse @ sparse with fills: the second operand is a transposed per-column fill
    "mm_sparse_sparse": lambda X, B: X @ (X.mT * 0.5 + 0.25),
}


@pytest.mark.parametrize("layout", ALL_LAYOUTS + BATCHED_LAYOUTS, ids=layout_id)
@pytest.mark.parametrize("name", sorted(CHAINS))
def test_chain_matches_dense(name, layout):
    chain = CHAINS[name]
    # block layouts: (6, 9), see random_tensor
    A, values, fill = leaves(random_tensor("random", 1.5, layout, seed=3), coalesce=False)
    A = rebuild(A, values, fill)  # differentiable in the leaves
    B = torch.randn(A.shape[-1], 4, dtype=torch.float64, requires_grad=True)
    out = dense(chain(A, B))
    D = rebuild(A, values, fill).to_dense().detach().requires_grad_()
    expected = chain(D, B)
    assert_dense_equal(out.detach(), expected.detach())
    # gradients: values and fill get what the dense computation gives them
    w = torch.randn_like(expected)
    gv, gf = torch.autograd.grad((out * w).sum(), (values, fill))
    gD, = torch.autograd.grad((expected * w).sum(), D)
    stored = torch.zeros(A.shape, dtype=torch.bool)
    idx = tuple(A.to_sparse_coo()._coo_indices())
    stored[idx] = True
    # the values' gradient in COO order, like idx
    gv = A._with(gv, torch.zeros_like(gf)).to_sparse_coo()._values()
    torch.testing.assert_close(gv, gD[idx])
    if gf.dim() == 0:
        torch.testing.assert_close(gf, gD[~stored].sum())
    else:  # one fill per batch: each gets its batch's unspecified elements
        per = torch.where(stored, torch.zeros_like(gD), gD).sum((1, 2)).reshape(gf.shape)
        torch.testing.assert_close(gf, per)


@pytest.mark.parametrize("layout", LAYOUTS, ids=["coo", "csr"])
def test_gradcheck_softmax_mm(layout):
    A, values, fill = leaves(random_tensor("random", -0.5, layout, seed=1, size=(4, 5)),
                             coalesce=False)
    B = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)

    def f(v, fl, b):
        return torch.softmax(A._with(v, fl), 1) @ b

    assert torch.autograd.gradcheck(f, (values, fill, B))


def test_softmax_across_a_varying_fill_is_refused():
    """RFC.md#not-supported: softmax along a dim where a per-slice fill varies raises
    rather than computing a wrong result."""
    A = rebuild(*leaves(random_tensor("random", 1.5, torch.sparse_coo), coalesce=False))
    S = torch.softmax(A, 1)
    with pytest.raises(NotImplementedError, match="per-slice fill"):
        torch.softmax(S, 0)
