"""scipy.sparse and pydata sparse interop: round trips on every shared matrix
(the fill travels), and a differential test against pydata sparse, the one
other library with fill values: the same element-wise ops on the same data
give the same values and fill."""
import math

import numpy as np
import pytest
import scipy.io
import scipy.sparse
import torch

import sf_testing as T
import torch_sparsefill as sf

try:
    import sparse
except ImportError:  # pydata sparse is a test dependency, absent on some machines (a GPU box)
    sparse = None
needs_pydata = pytest.mark.skipif(sparse is None, reason="pydata sparse is not installed")

pytestmark = pytest.mark.cpu_only("scipy and pydata sparse hold host memory; from_scipy and "
                                  "from_pydata build on the CPU unless given device=")

MATRICES = sorted(T.MATRICES.glob("*.mtx"))


def test_matrices_present():
    assert len(MATRICES) >= 17


@pytest.mark.parametrize("path", MATRICES, ids=lambda p: p.stem)
def test_round_trips_on_real_matrices(path):
    m = scipy.io.mmread(str(path))
    m = scipy.sparse.coo_array(m)
    dense = m.toarray()
    layouts = {"coo": torch.sparse_coo, "csr": torch.sparse_csr, "csc": torch.sparse_csc}
    for fmt, layout in layouts.items():
        A = sf.from_scipy(m.asformat(fmt), fill_value=-1.5)
        assert A.layout == layout  # kept both ways
        expected = np.where(_stored_mask(m), dense, -1.5)
        np.testing.assert_array_equal(A.to_dense().numpy(), expected)
        back, fill = A.to_scipy()
        assert fill == -1.5 and back.format == fmt
        np.testing.assert_array_equal(back.toarray(), _summed(m).toarray())


def test_scipy_bsr_keeps_its_layout_and_blocksize_both_ways():
    """from_scipy of a BSR matrix gave COO and to_scipy of BSR gave CSR. A
    stored block is stored whole (its zeros are elements, not the fill), as
    scipy keeps it."""
    dense = np.array([[1., 0., 0., 0.], [0., 0., 0., 0.], [0., 0., 3., 4.], [0., 0., 5., 0.]])
    m = scipy.sparse.bsr_array(dense, blocksize=(2, 2))
    A = sf.from_scipy(m, fill_value=-1.)
    assert A.layout == torch.sparse_bsr and A.values().shape == (2, 2, 2)
    expected = np.where(np.kron([[1, 0], [0, 1]], np.ones((2, 2))) > 0, dense, -1.)
    np.testing.assert_array_equal(A.to_dense().numpy(), expected)
    back, fill = A.to_scipy()
    assert fill == -1. and back.format == "bsr" and back.blocksize == (2, 2)
    np.testing.assert_array_equal(back.toarray(), dense)
    assert A.to_scipy(format="csr")[0].format == "csr"


@needs_pydata
@pytest.mark.parametrize("path", MATRICES, ids=lambda p: p.stem)
def test_pydata_round_trips_on_real_matrices(path):
    m = scipy.sparse.coo_array(scipy.io.mmread(str(path)))
    for fmt in ("coo", "csr"):
        A = sf.from_scipy(m.asformat(fmt), fill_value=-1.5)
        expected = np.where(_stored_mask(m), m.toarray(), -1.5)
        P = A.to_pydata()
        assert P.fill_value == -1.5
        np.testing.assert_array_equal(P.todense(), expected)
        B = sf.from_pydata(P)
        assert B.layout == A.layout
        torch.testing.assert_close(B.to_dense(), A.to_dense())


def _stored_mask(m):
    mask = np.zeros(m.shape, dtype=bool)
    mask[m.row, m.col] = True
    return mask


def _summed(m):
    s = m.copy()
    s.sum_duplicates()
    return s


def test_uncanonical_scipy_csr_is_summed_and_sorted():
    m = scipy.sparse.csr_array((np.array([1., 2., 3.]), np.array([2, 0, 2]), np.array([0, 3])),
                               shape=(1, 3))
    assert not m.has_canonical_format
    A = sf.from_scipy(m, fill_value=7.)
    np.testing.assert_array_equal(A.to_dense().numpy(), [[2., 7., 4.]])


def test_scipy_errors():
    with pytest.raises(TypeError, match="scipy.sparse"):
        sf.from_scipy(np.ones((2, 2)))
    with pytest.raises(NotImplementedError, match="hybrid"):
        sf.sparse_coo_tensor([[0]], [[1., 2.]], (2, 2)).to_scipy()
    with pytest.raises(NotImplementedError, match="2-D"):
        sf.full((2, 2, 2), 1.).to_scipy()


def _pydata_pair(seed, fill, shape=(6, 5), density=0.3):
    rng = np.random.default_rng(seed)
    dense = rng.standard_normal(shape)
    dense[rng.random(shape) > density] = fill
    return sparse.COO.from_numpy(dense, fill_value=fill)


@needs_pydata
@pytest.mark.parametrize("fill", [0.0, 2.5, -1.0, math.inf])
@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_differential_against_pydata(fill, layout):
    s1, s2 = _pydata_pair(1, fill), _pydata_pair(2, -0.5)
    A, B = sf.from_pydata(s1, layout=layout), sf.from_pydata(s2, layout=layout)
    cases = [
        (np.exp(s1), torch.exp(A)),
        (-s1, -A),
        (s1 * 3.0, A * 3.0),
        (s1 + s2, A + B),
        # reductions: pydata also keeps the fill of a reduced slice (n * fill for a sum)
        (s1.sum(axis=1), A.sum(1)),
        (s1.max(axis=0), A.amax(0)),
        (s1.prod(axis=1), A.prod(1)),
    ]
    for expected, ours in cases:
        np.testing.assert_allclose(ours.to_dense().numpy(), expected.todense(), rtol=1e-12)
        np.testing.assert_allclose(ours.fill_value().item(), expected.fill_value, rtol=1e-12)
        back = ours.to_pydata()
        np.testing.assert_allclose(back.todense(), expected.todense(), rtol=1e-12)
