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


# ---- in-place forms ----------------------------------------------------------------

@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_inplace_forms_update_values_and_fill(layout):
    import torch.nn.functional as F

    A = T.random_tensor("random", 0.5, layout, seed=1)
    B = A._with(A._values() * 2, A._fill_value() + 1)   # same pattern
    D = A.to_dense()
    for f_inplace, f_dense in ((lambda t: t.exp_(), torch.exp),
                               (lambda t: t.mul_(3), lambda d: d * 3),
                               (lambda t: t.add_(B, alpha=2), lambda d: d + 2 * B.to_dense()),
                               (lambda t: t.clamp_(-0.5, 0.5), lambda d: d.clamp(-0.5, 0.5)),
                               (lambda t: F.relu(t, inplace=True), torch.relu)):
        C = A.clone()
        values_storage = C._values().data_ptr()
        out = f_inplace(C)
        assert out is C and C._values().data_ptr() == values_storage
        T.assert_dense_equal(C.to_dense(), f_dense(D))
    C = A.clone()
    C += B
    T.assert_dense_equal(C.to_dense(), D + B.to_dense())


def test_inplace_refusals_match_torch():
    A = sf.sparse_coo_tensor([[0, 2]], [1, 2], (4,), fill_value=3)
    with pytest.raises(RuntimeError, match="can't be cast"):
        A.exp_()                                        # int tensor, float result
    leaf = sf.sparse_coo_tensor([[0]], [1.], (4,), fill_value=0., requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf"):
        leaf.exp_()


# ---- dtypes: integer division, complex ------------------------------------------------

def test_integer_division_rules():
    A = sf.sparse_coo_tensor([[0, 2]], [7, -7], (4,), fill_value=5)
    B = sf.sparse_coo_tensor([[1, 2]], [2, 2], (4,), fill_value=2)
    for out, ref in ((A / B, A.to_dense() / B.to_dense()),
                     (A // B, A.to_dense() // B.to_dense()),
                     (torch.div(A, B, rounding_mode="trunc"),
                      torch.div(A.to_dense(), B.to_dense(), rounding_mode="trunc")),
                     (A % B, A.to_dense() % B.to_dense()), (A / 2, A.to_dense() / 2)):
        assert out.dtype == ref.dtype
        T.assert_dense_equal(out.to_dense(), ref)


def test_complex_values_and_fill():
    A = sf.sparse_coo_tensor([[0, 2]], torch.tensor([1 + 2j, -1j]), (4,), fill_value=0.5 + 0.5j)
    B = sf.sparse_coo_tensor([[1]], torch.tensor([3j]), (4,), fill_value=-1 + 0j)
    for out, ref in ((A * B, A.to_dense() * B.to_dense()), (torch.exp(A), torch.exp(A.to_dense())),
                     (torch.conj(A), torch.conj(A.to_dense())), (A.abs(), A.to_dense().abs()),
                     (torch.real(A), torch.real(A.to_dense())), (torch.angle(A), torch.angle(A.to_dense()))):
        T.assert_dense_equal(out.to_dense(), ref.resolve_conj())


def test_comparisons_give_bool_fill():
    A = T.random_tensor("random", 1.5)
    out = A > 1.0
    assert out.dtype == torch.bool and out._fill_value().dtype == torch.bool
    assert out.fill_value().item() is True


def test_where_method_form():
    A = T.random_tensor("random", 1.5, seed=1)
    B = T.random_tensor("random", -0.5, seed=2)
    cond = A > 0.2
    T.assert_dense_equal(A.where(cond, B).to_dense(),
                         A.to_dense().where(cond.to_dense(), B.to_dense()))
