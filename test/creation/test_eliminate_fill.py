"""eliminate_fill: the scipy "eliminate zeros" for any fill, NaN-aware."""
import math

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf


@pytest.mark.parametrize("layout", T.LAYOUTS)
@pytest.mark.parametrize("fill", [0.0, 2.0, math.nan, -math.inf])
def test_drops_exactly_the_elements_equal_to_the_fill(layout, fill):
    A = T.random_tensor("random", fill, layout, seed=3)
    v = A._values().clone()
    v[::2] = fill  # every other stored element now equals the fill
    B = A._with(v, A._fill_value())
    C = sf.eliminate_fill(B)
    assert C.layout == layout and C.nse() == B.nse() - len(range(0, B.nse(), 2))
    T.assert_dense_equal(C.to_dense(), B.to_dense())
    assert C.eliminate_fill().nse() == C.nse()


def test_hybrid_keeps_partly_equal_rows():
    A = sf.sparse_coo_tensor([[0, 1, 2]], [[1., 1.], [1., 3.], [4., 4.]], (4, 2), fill_value=1.)
    C = A.eliminate_fill()
    assert C.indices().tolist() == [[1, 2]]
    T.assert_dense_equal(C.to_dense(), A.to_dense())


def test_gradient_flows_through():
    v = torch.tensor([2., 5., 7.], dtype=torch.float64, requires_grad=True)
    f = torch.tensor(5., dtype=torch.float64, requires_grad=True)
    A = sf.sparse_coo_tensor([[0, 1, 2]], v, (4,), fill_value=f)
    (A.eliminate_fill().to_dense() * torch.tensor([1., 10., 100., 1000.], dtype=torch.float64)).sum().backward()
    assert v.grad.tolist() == [1., 0., 100.]   # the dropped element is now the fill's
    assert f.grad.item() == 1010.
