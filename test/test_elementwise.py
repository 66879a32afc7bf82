"""Hand-written element-wise checks beyond the generated per-op tests: the
public RFC's examples, keyword arguments, type promotion, mixed layouts,
and the union-pattern gradient term."""
import math

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf


def test_rfc_point_9_union_example():
    # A = [[1, *], [3, *]] fill 2;  B = [[5, *], [*, 8]] fill 6
    A = sf.sparse_coo_tensor([[0, 1], [0, 0]], [1., 3.], (2, 2), fill_value=2.)
    B = sf.sparse_coo_tensor([[0, 1], [0, 1]], [5., 8.], (2, 2), fill_value=6.)
    C = A + B
    assert C.fill_value().item() == 8.
    assert torch.equal(C.indices(), torch.tensor([[0, 1, 1], [0, 0, 1]]))
    assert torch.equal(C.values(), torch.tensor([6., 9., 10.]))
    T.assert_dense_equal(C.to_dense(), torch.tensor([[6., 8.], [9., 10.]]))


def test_add_alpha_and_method_forms():
    A = T.random_tensor("random", 1.5, seed=1)
    B = T.random_tensor("random", -0.5, seed=2)
    expected = torch.add(A.to_dense(), B.to_dense(), alpha=-2)
    for out in (torch.add(A, B, alpha=-2), A.add(B, alpha=-2)):
        T.assert_dense_equal(out.to_dense(), expected)
    with pytest.raises(NotImplementedError, match="keyword 'out'"):
        torch.add(A, B, out=torch.empty(1))


def test_type_promotion_follows_torch():
    Ai = sf.sparse_coo_tensor([[0]], [2], (3,), fill_value=1)
    Bf = sf.sparse_coo_tensor([[1]], [0.5], (3,), fill_value=0.25)
    for out, ref in (((Ai + Bf), Ai.to_dense() + Bf.to_dense()),
                     ((Ai * 2.5), Ai.to_dense() * 2.5), ((Ai * 3), Ai.to_dense() * 3),
                     (torch.exp(Ai), torch.exp(Ai.to_dense())), (-Ai, -Ai.to_dense())):
        assert out.dtype == ref.dtype and out._fill_value().dtype == ref.dtype
        T.assert_dense_equal(out.to_dense(), ref)


def test_mixed_layouts_and_uncoalesced_operands():
    A = sf.sparse_coo_tensor([[1, 0, 1], [2, 0, 2]], [1., 2., 3.], (2, 3), fill_value=4.)
    B = T.random_tensor("random", -1., torch.sparse_csr, size=(2, 3))
    out = A + B
    assert out.layout == torch.sparse_coo
    T.assert_dense_equal(out.to_dense(), A.to_dense() + B.to_dense())
    out = B + A
    assert out.layout == torch.sparse_csr
    T.assert_dense_equal(out.to_dense(), B.to_dense() + A.to_dense())


def test_scalar_on_either_side():
    A = T.random_tensor("hybrid", 2.0)
    for out, ref in ((A * 3, A.to_dense() * 3), (3 * A, 3 * A.to_dense()),
                     (torch.mul(A, -1.5), A.to_dense() * -1.5)):
        T.assert_dense_equal(out.to_dense(), ref)
        assert out.nse() == A.nse()


def test_union_gradient_reaches_the_fill():
    # Positions stored only in B use A's fill: their gradient flows to A's fill.
    va = torch.tensor([1.], dtype=torch.float64, requires_grad=True)
    fa = torch.tensor(2., dtype=torch.float64, requires_grad=True)
    vb = torch.tensor([5., 7.], dtype=torch.float64, requires_grad=True)
    fb = torch.tensor(6., dtype=torch.float64, requires_grad=True)
    A = sf.sparse_coo_tensor([[0]], va, (4,), fill_value=fa)
    B = sf.sparse_coo_tensor([[1, 2]], vb, (4,), fill_value=fb)
    w = torch.tensor([1., 10., 100., 1000.], dtype=torch.float64)
    ((A + B).to_dense() * w).sum().backward()
    assert va.grad.tolist() == [1.]
    assert fa.grad.item() == 1110.   # elements 1, 2, 3 are A's fill
    assert vb.grad.tolist() == [10., 100.]
    assert fb.grad.item() == 1001.   # elements 0 and 3 are B's fill


def test_nan_and_inf_fills_propagate():
    A = sf.full((3,), math.inf)
    B = sf.sparse_coo_tensor([[1]], [1.], (3,), fill_value=-math.inf)
    out = A + B
    assert math.isnan(out.fill_value().item())
    T.assert_dense_equal(out.to_dense(), A.to_dense() + B.to_dense())
