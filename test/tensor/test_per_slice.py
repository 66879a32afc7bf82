"""Per-slice fills (RFC.md#per-slice-fills): a fill of the tensor's full rank with size 1
in the dims it does not vary along. Every data-model operation either
handles one exactly (checked against the dense tensor) or refuses it."""
import copy
import io
import pickle

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from sf_testing import LAYOUTS, assert_dense_equal

IDX = torch.tensor([[0, 0, 2, 3], [1, 3, 0, 2]])
VALS = torch.tensor([1.0, -2.0, 3.5, 4.0], dtype=torch.float64)


def per_row(layout=torch.sparse_coo, requires_grad=False):
    fill = torch.tensor([[0.5], [-1.0], [2.0], [7.0]], dtype=torch.float64)
    A = sf.sparse_coo_tensor(IDX, VALS, (4, 5), fill_value=fill, requires_grad=requires_grad)
    return A.to_sparse(layout=layout)


def per_col(layout=torch.sparse_coo):
    fill = torch.arange(5, dtype=torch.float64).view(1, 5) - 2
    return sf.sparse_coo_tensor(IDX[:, [1, 2]], VALS[[1, 2]] * 3, (4, 5),
                                fill_value=fill).to_sparse(layout=layout)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_per_slice_to_dense_and_accessors(layout):
    A = per_row(layout)
    assert A._has_per_slice_fill()
    assert A.fill_value().shape == (4, 1)  # returned as stored
    expected = torch.tensor([[0.5, 1.0, 0.5, -2.0, 0.5], [-1.0] * 5, [3.5, 2.0, 2.0, 2.0, 2.0],
                             [7.0, 7.0, 4.0, 7.0, 7.0]], dtype=torch.float64)
    assert_dense_equal(A.to_dense(), expected)
    assert_dense_equal(T.dense_of(A), expected)


def test_per_slice_fill_constant_over_sparse_dims_is_stored_dense_part():
    A = sf.sparse_coo_tensor([[0]], [[1.0, 2.0]], (3, 2), fill_value=torch.tensor([[5.0, 6.0]]))
    assert A._fill_value().shape == (2,)
    assert not A._has_per_slice_fill()
    assert_dense_equal(A.to_dense(), torch.tensor([[1.0, 2.0], [5.0, 6.0], [5.0, 6.0]]))


@pytest.mark.parametrize("fill_shape", [(4, 2), (5, 1), (4, 5, 1), (2, 1)])
def test_per_slice_bad_shapes_are_refused(fill_shape):
    with pytest.raises(ValueError, match="fill_value of shape"):
        sf.sparse_coo_tensor(IDX, VALS, (4, 5), fill_value=torch.zeros(fill_shape,
                                                                       dtype=torch.float64))


def test_per_slice_conversions_and_coalesce():
    A = per_row()
    C = A.to_sparse_csr()
    assert C._fill_value().shape == (4, 1)
    assert_dense_equal(C.to_dense(), A.to_dense())
    assert_dense_equal(C.to_sparse_coo().to_dense(), A.to_dense())
    # uncoalesced COO with a per-row fill
    U = sf.sparse_coo_tensor([[3, 0, 3], [2, 1, 2]], [1.0, 2.0, 3.0], (4, 5),
                             fill_value=A._fill_value())
    assert not U.is_coalesced()
    assert_dense_equal(U.coalesce().to_dense(), U.to_dense())
    assert U.to_dense()[3, 2] == 4.0 and U.to_dense()[3, 0] == 7.0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_per_slice_pickle_save_deepcopy_repr(layout):
    A = per_row(layout)
    for B in (pickle.loads(pickle.dumps(A)), copy.deepcopy(A)):
        assert B._fill_value().shape == (4, 1)
        assert_dense_equal(B.to_dense(), A.to_dense())
    buf = io.BytesIO()
    torch.save(A, buf)
    buf.seek(0)
    assert_dense_equal(torch.load(buf).to_dense(), A.to_dense())
    assert "fill_value=tensor([[ 0.5000]" in repr(A)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_per_slice_elementwise(layout):
    A, B = per_row(layout), per_col(layout)
    D, E = A.to_dense(), B.to_dense()
    assert_dense_equal(torch.exp(A).to_dense(), torch.exp(D))
    assert_dense_equal((A * 2 - 1).to_dense(), D * 2 - 1)
    assert_dense_equal((2 ** A).to_dense(), 2 ** D)
    assert_dense_equal((A + A).to_dense(), D + D)               # same pattern
    out = A + B                                                 # union: per-row + per-column
    assert out._fill_value().shape == (4, 5)
    assert_dense_equal(out.to_dense(), D + E)
    assert_dense_equal(torch.maximum(A, B).to_dense(), torch.maximum(D, E))
    Z = sf.sparse_coo_tensor([[1, 2], [1, 4]], torch.tensor([9.0, -9.0], dtype=torch.float64),
                             (4, 5), fill_value=0.25).to_sparse(layout=layout)
    assert_dense_equal((A * Z).to_dense(), D * Z.to_dense())    # per-slice with a scalar fill
    assert_dense_equal((Z - A).to_dense(), Z.to_dense() - D)
    assert_dense_equal(torch.where(A > 0, A, Z).to_dense(),
                       torch.where(D > 0, D, Z.to_dense()))
    x = A.clone()
    x.mul_(3)
    assert_dense_equal(x.to_dense(), D * 3)


def test_per_slice_hybrid_union():
    fill = torch.tensor([[[1.0, 2.0]], [[3.0, 4.0]], [[5.0, 6.0]]], dtype=torch.float64)  # (3,1,2)
    A = sf.sparse_coo_tensor([[0, 2], [1, 0]], torch.randn(2, 2, dtype=torch.float64), (3, 2, 2),
                             fill_value=fill)
    B = sf.sparse_coo_tensor([[1], [1]], torch.randn(1, 2, dtype=torch.float64), (3, 2, 2),
                             fill_value=torch.tensor([0.5, -0.5], dtype=torch.float64))
    assert_dense_equal((A * B).to_dense(), A.to_dense() * B.to_dense())
    assert_dense_equal((A + torch.tensor([1.0, 2.0], dtype=torch.float64)).to_dense(),
                       A.to_dense() + torch.tensor([1.0, 2.0], dtype=torch.float64))


def _components(layout):
    A = per_row(layout)
    v = A._values().detach().clone().requires_grad_()
    f = A._fill_value().detach().clone().requires_grad_()
    return A, v, f


@pytest.mark.parametrize("layout", LAYOUTS)
def test_per_slice_gradients(layout):
    A, v, f = _components(layout)
    B = per_col(layout)

    def build(v, f):
        return A._with(v, f)

    assert torch.autograd.gradcheck(lambda v, f: build(v, f).to_dense(), (v, f))
    assert torch.autograd.gradcheck(lambda v, f: torch.sin(build(v, f)).to_dense(), (v, f))
    assert torch.autograd.gradcheck(lambda v, f: (build(v, f) * B).to_dense(), (v, f))
    assert torch.autograd.gradcheck(lambda v, f: (B - build(v, f)).to_dense(), (v, f))
    w = torch.rand(B._values().shape, dtype=torch.float64, requires_grad=True)
    g = torch.rand(B._fill_value().shape, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda v, f, w, g: (build(v, f) / (B._with(w, g) + 3)).to_dense(),
                                    (v, f, w, g))


def test_per_slice_grad_property_is_the_per_element_mean():
    A = per_row(requires_grad=True)
    W = torch.arange(20, dtype=torch.float64).view(4, 5)
    (A.to_dense() * W).sum().backward()
    G = A.grad.to_dense()
    # stored elements get W there; the fill of row i the mean of W over its unspecified elements
    D = torch.tensor([[0, 1, 0, 1, 0], [0] * 5, [1, 0, 0, 0, 0], [0, 0, 1, 0, 0]], dtype=torch.bool)
    for i in range(4):
        torch.testing.assert_close(G[i][D[i]], W[i][D[i]])
        torch.testing.assert_close(G[i][~D[i]], W[i][~D[i]].mean().expand(int((~D[i]).sum())))


def test_per_slice_eliminate_fill():
    fill = torch.tensor([[1.0], [2.0]])
    A = sf.sparse_coo_tensor([[0, 0, 1], [0, 1, 1]], [1.0, 2.0, 2.0], (2, 3), fill_value=fill)
    E = A.eliminate_fill()
    assert E.nse() == 1
    assert_dense_equal(E.to_dense(), A.to_dense())


def test_per_slice_to_sparse_from_strided_with_gradient():
    x = torch.tensor([[1.0, 1.0, 5.0], [2.0, 7.0, 2.0]], dtype=torch.float64, requires_grad=True)
    fill = torch.tensor([[1.0], [2.0]], dtype=torch.float64)
    A = sf.to_sparse(x, fill_value=fill)
    assert A.nse() == 2 and A._fill_value().shape == (2, 1)
    assert_dense_equal(A.to_dense(), x.detach())
    # RFC.md#to-sparse-gradient: stored positions get their gradient; each fill element's
    # gradient is shared equally by the unspecified elements it covers.
    W = torch.tensor([[1.0, 3.0, 10.0], [4.0, 20.0, 8.0]], dtype=torch.float64)
    (A.to_dense() * W).sum().backward()
    torch.testing.assert_close(x.grad, torch.tensor([[2.0, 2.0, 10.0], [6.0, 20.0, 6.0]],
                                                    dtype=torch.float64))


def test_per_slice_interop_refuses():
    with pytest.raises(NotImplementedError, match="per-slice fill"):
        per_row().to_scipy()
