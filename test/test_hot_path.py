"""The hot path (RFC.md section 9.1): the fast handlers of plain operands
answer what dense torch answers, hand every other call to the routes, and
leave the exceptions' rules to them."""
import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from torch_sparsefill import _elementwise, _reductions, _routing
from torch_sparsefill._tensor import is_plain

FILLS = [0.5, float("inf"), float("-inf"), float("nan")]


def _plain(fill, layout=torch.sparse_coo, dtype=torch.float64):
    A = sf.sparse_coo_tensor([[0, 1, 3], [2, 0, 1]], [1.5, -2., 3.], (4, 3), fill_value=fill,
                             dtype=dtype)
    return A if layout == torch.sparse_coo else A.to_sparse_csr()


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=["coo", "csr"])
@pytest.mark.parametrize("fill", FILLS, ids=str)
def test_fast_results_equal_dense(fill, layout):
    A = _plain(fill, layout)
    B = A._with(A._sf_values * -3, A._sf_fill + 1)  # the same pattern (same index tensors)
    assert is_plain(A) and is_plain(B)
    D, E = A.to_dense(), B.to_dense()
    for func, args, dense_args in (
            (torch.exp, (A,), (D,)), (torch.Tensor.__neg__, (A,), (D,)),
            (torch.Tensor.__mul__, (A, 2), (D, 2)), (torch.Tensor.__rmul__, (A, 2.5), (D, 2.5)),
            (torch.Tensor.__rsub__, (A, 1), (D, 1)), (torch.Tensor.__truediv__, (A, 3), (D, 3)),
            (torch.add, (A, B), (D, E)), (torch.Tensor.__mul__, (A, B), (D, E)),
            (torch.maximum, (A, B), (D, E))):
        fast = _routing.FAST[func]
        out = fast(args)
        assert out is not None, func  # plain operands: the hot path answers
        assert out.layout == layout and out._sf_coalesced
        T.assert_dense_equal(out.to_dense(), func(*dense_args))
    total = _reductions.FAST[torch.Tensor.sum]((A,))
    T.assert_dense_equal(total, D.sum())


def test_not_plain_goes_to_the_routes():
    A = _plain(0.5)
    dense_part = sf.sparse_coo_tensor([[0]], [[1., 2.]], (3, 2), fill_value=0.5)
    per_slice = sf.sparse_coo_tensor([[0], [1]], [1.], (2, 2),
                                     fill_value=torch.tensor([[1.], [2.]]))
    uncoalesced = sf.sparse_coo_tensor([[1, 0]], [1., 2.], (3,), fill_value=0.5)
    grad_fill = _plain(0.5).requires_grad_()
    csc = A.to_sparse_csc()
    other_pattern = sf.sparse_coo_tensor([[0, 1, 3], [2, 0, 1]], [1., 2., 3.], (4, 3),
                                         fill_value=2., dtype=torch.float64)
    for X in (dense_part, per_slice, uncoalesced, grad_fill, csc):
        assert not is_plain(X)
        assert _routing.FAST[torch.exp]((X,)) is None
        T.assert_dense_equal(torch.exp(X).to_dense(), torch.exp(X.to_dense()))
    assert is_plain(grad_fill.detach())
    fast_mul = _routing.FAST[torch.Tensor.__mul__]
    # Equal patterns in other index tensors, numbers the route handles,
    # keywords: the routes answer, and as dense torch does.
    assert fast_mul((A, other_pattern)) is None
    T.assert_dense_equal((A * other_pattern).to_dense(), A.to_dense() * other_pattern.to_dense())
    assert fast_mul((A, True)) is None and _routing.FAST[torch.pow]((A, 2)) is None
    T.assert_dense_equal((A ** 2).to_dense(), A.to_dense() ** 2)
    T.assert_dense_equal(torch.add(A, A, alpha=2).to_dense(), torch.add(A.to_dense(),
                                                                        A.to_dense(), alpha=2))


def test_fill_gradient_through_the_route():
    A = _plain(0.5).requires_grad_()
    D = A.to_dense().detach().requires_grad_()
    (A * 3).sum().backward()
    (D * 3).sum().backward()
    T.assert_dense_equal(A.grad.to_dense(), D.grad)


def test_integer_division_by_a_dead_zero_fill_goes_to_the_route():
    # Every element stored: the zero fill divides nothing, which only the
    # route knows; the fast handler's error hands the call over.
    A = sf.sparse_coo_tensor([[0, 1, 2]], [6, 4, 2], (3,), fill_value=1)
    B = A._with(torch.tensor([3, 2, 1]), torch.tensor(0))
    assert _routing.FAST[torch.Tensor.__floordiv__]((A, B)) is None
    T.assert_dense_equal((A // B).to_dense(), A.to_dense() // B.to_dense())
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        sf.sparse_coo_tensor([[0]], [6], (3,), fill_value=1) // 0


def test_autocast_skips_the_hot_path(monkeypatch):
    def refuse(args):
        raise AssertionError("the hot path ran under autocast")
    monkeypatch.setitem(_routing.FAST, torch.exp, refuse)
    A = _plain(0.5, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, expected = torch.exp(A), torch.exp(A.to_dense())
    assert out.dtype == expected.dtype
    T.assert_dense_equal(out.to_dense(), expected)


def test_every_fast_callable_is_routed_by_its_family():
    for func in _elementwise.FAST:
        assert _routing.TABLE[func] is _elementwise.ROUTES[func]
    for func in _reductions.FAST:
        assert _routing.TABLE[func] is _reductions.ROUTES[func]
