"""SparseFillTensor: constructors, conversions, metadata, printing, pickling,
autograd of construction/to_dense, and the no-silent-zero rule. The
reference is always the dense tensor."""
import copy
import io
import math
import pickle

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf

FILLS = T.FILLS


def example():
    return sf.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3., 4., 5.], (2, 3), fill_value=5.)


# ---- the walkthrough ------------------------------------------------

def test_readme_example():
    A = example()
    assert torch.equal(A.fill_value(), torch.tensor(5.))
    assert torch.equal(A.to_dense(), torch.tensor([[5., 5., 3.], [4., 5., 5.]]))
    assert A.layout == torch.sparse_coo and A.is_sparse
    C = A.to_sparse_csr()
    assert C.layout == torch.sparse_csr and C.is_sparse_csr and not C.is_sparse
    assert torch.equal(C.fill_value(), torch.tensor(5.))
    assert torch.equal(C.to_dense(), A.to_dense())
    assert sf.to_sparse(torch.ones(10), fill_value=1.)._nnz() == 0
    text = repr(A)
    # "tensor(5." and not "tensor(5.)": on CUDA the device follows the number.
    for part in ("indices=", "values=", "size=(2, 3)", "nse=3", "fill_value=tensor(5.",
                 "layout=torch.sparse_coo"):
        assert part in text, text
    assert "crow_indices=" in repr(C) and "fill_value=tensor(5." in repr(C)


def test_metadata():
    A = sf.sparse_coo_tensor([[0, 3]], [[.11, .12], [.31, .32]], (4, 2), fill_value=1.2)
    assert A.shape == (4, 2) and A.dtype == torch.float32
    assert A.device.type == torch.get_default_device().type  # conftest.py's device
    assert A.sparse_dim() == 1 and A.dense_dim() == 1 and A.dim() == 2
    assert A._nnz() == 2 and A.nse() == 2 and A.numel() == 8
    # public RFC point 6: specified fill vs dense-part fill
    assert A._fill_value().shape == () and A.fill_value().shape == (2,)
    assert torch.equal(A.fill_value(), torch.tensor([1.2, 1.2]))
    assert not A.is_coalesced()  # torch's flag: a new tensor is not, until coalesce()
    assert torch.equal(A.coalesce().indices(), torch.tensor([[0, 3]]))


# ---- constructors against the dense reference ------------------------------

@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("layout", T.LAYOUTS)
@pytest.mark.parametrize("pattern", ["empty", "one", "random", "full", "duplicates", "hybrid"])
def test_dense_round_trip(pattern, fill, layout):
    A = T.random_tensor(pattern, fill, layout, seed=1)
    D = A.to_dense()
    # Dense reference built independently from the components.
    ref = A.fill_value().expand(A.shape).clone()
    B = A.to_sparse_coo().coalesce()
    for k in range(B.nse()):
        ref[tuple(B.indices()[:, k].tolist())] = B.values()[k]
    T.assert_dense_equal(D, ref)
    back = sf.to_sparse(D, fill_value=A._fill_value(), layout=layout, dense_dim=A.dense_dim())
    T.assert_dense_equal(back.to_dense(), D)
    assert back.layout == layout
    if pattern != "duplicates":
        assert back.nse() == A.nse()


def test_duplicates_sum_and_ignore_fill():
    A = sf.sparse_coo_tensor([[1, 0, 1]], [1., 2., 3.], (3,), fill_value=10.)
    assert not A.is_coalesced()
    T.assert_dense_equal(A.to_dense(), torch.tensor([2., 4., 10.]))
    B = A.coalesce()
    assert B.is_coalesced() and torch.equal(B.indices(), torch.tensor([[0, 1]]))
    assert torch.equal(B.values(), torch.tensor([2., 4.]))
    with pytest.raises(RuntimeError, match="uncoalesced"):
        A.indices()


def test_hybrid_fill_shapes():
    idx = torch.tensor([[0, 2]])
    values = torch.arange(6.).view(2, 3)
    full_fill = sf.sparse_coo_tensor(idx, values, (4, 3), fill_value=torch.tensor([7., 8., 9.]))
    T.assert_dense_equal(full_fill.to_dense()[1], torch.tensor([7., 8., 9.]))
    scalar = sf.sparse_coo_tensor(idx, values, (4, 3), fill_value=7.)
    T.assert_dense_equal(scalar.to_dense()[3], torch.tensor([7., 7., 7.]))
    with pytest.raises(ValueError, match="fill_value of shape"):
        sf.sparse_coo_tensor(idx, values, (4, 3), fill_value=torch.ones(2))


def test_fill_changes_in_place():
    A = example()
    A._fill_value().fill_(1.2)
    assert A.to_dense()[0, 0].item() == pytest.approx(1.2)
    A.fill_value().fill_(-1.)  # non-hybrid: the same tensor (public RFC point 7)
    assert A.to_dense()[0, 0].item() == -1.


@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_full_zeros_ones(layout):
    for t, value in ((sf.full((3, 4), 2.5, layout=layout), 2.5),
                     (sf.zeros(3, 4, layout=layout), 0.),
                     (sf.ones((3, 4), layout=layout), 1.)):
        assert t.nse() == 0 and t.layout == layout
        T.assert_dense_equal(t.to_dense(), torch.full((3, 4), value))
    assert sf.full((2,), 3).dtype == torch.int64
    assert sf.full((2,), True).dtype == torch.bool


def test_to_sparse_nan_fill_and_dense_dim():
    x = torch.tensor([[math.nan, 1.], [math.nan, math.nan]])
    A = sf.to_sparse(x, fill_value=math.nan)
    assert A.nse() == 1
    T.assert_dense_equal(A.to_dense(), x)
    H = sf.to_sparse(torch.tensor([[1., 2.], [0., 0.], [0., 3.]]), dense_dim=1)
    assert H.nse() == 2 and H.dense_dim() == 1


def test_to_sparse_wraps_native_without_copy():
    native = torch.tensor([[0., 2.], [3., 0.]]).to_sparse()
    A = sf.to_sparse(native)
    assert A._values().data_ptr() == native._values().data_ptr()
    T.assert_dense_equal(A.to_dense(), native.to_dense())
    B = sf.to_sparse(native, fill_value=-math.inf)
    assert B.to_dense()[0, 0].item() == -math.inf
    csr = sf.to_sparse(native.to_sparse_csr(), fill_value=1.)
    assert csr.layout == torch.sparse_csr
    T.assert_dense_equal(csr.to_dense(), torch.tensor([[1., 2.], [3., 1.]]))
    assert torch.equal(sf.fill_value(native), torch.tensor(0.))
    assert torch.equal(sf.fill_value(example()), torch.tensor(5.))


def test_int32_csr_indices_and_inferred_size():
    A = sf.sparse_csr_tensor(torch.tensor([0, 1, 2], dtype=torch.int32),
                             torch.tensor([1, 0], dtype=torch.int32), [1., 2.], fill_value=4.)
    assert A.shape == (2, 2)
    T.assert_dense_equal(A.to_dense(), torch.tensor([[4., 1.], [2., 4.]]))
    B = sf.sparse_coo_tensor([[0, 4], [1, 2]], [1., 2.])
    assert B.shape == (5, 3)


def test_dtype_and_device_arguments():
    A = sf.sparse_coo_tensor([[0]], [1], (2,), fill_value=3, dtype=torch.float64)
    assert A.dtype == torch.float64 and A._fill_value().dtype == torch.float64
    B = A.to(torch.float32)
    assert B.dtype == torch.float32 and B._fill_value().dtype == torch.float32
    assert A.float().dtype == torch.float32 and A.half().dtype == torch.float16
    assert sf.sparse_coo_tensor([[0]], [True], (2,), fill_value=0).dtype == torch.bool


# ---- real matrices ----------------------------------------------------------

def _read_mtx(path):
    import numpy as np
    import scipy.io

    m = scipy.io.mmread(str(path)).tocoo()
    idx = torch.from_numpy(np.stack([m.row, m.col]).astype(np.int64))
    return T.on_test_device(idx), T.on_test_device(torch.tensor(m.data, dtype=torch.float64)), m.shape


def test_real_matrices_are_present():
    assert len(list(T.MATRICES.glob("*.mtx"))) >= 17, f"shared matrices missing at {T.MATRICES}"


@pytest.mark.parametrize("path", sorted(T.MATRICES.glob("*.mtx")), ids=lambda p: p.stem)
def test_real_matrix_round_trips(path):
    idx, values, shape = _read_mtx(path)
    for fill in (2.5, -1.0):
        A = sf.sparse_coo_tensor(idx, values, shape, fill_value=fill).coalesce()
        D = A.to_dense()
        ref = torch.full(shape, fill, dtype=torch.float64)
        ref.index_put_((idx[0], idx[1]), values, accumulate=False)
        # mmread output has no duplicates; explicit zeros stay stored
        T.assert_dense_equal(D, ref)
        C = A.to_sparse_csr()
        T.assert_dense_equal(C.to_dense(), D)
        T.assert_dense_equal(C.to_sparse_coo().to_dense(), D)
        native = torch.sparse_coo_tensor(idx, values, shape, check_invariants=True).coalesce()
        native = native.to_sparse_csr()
        assert torch.equal(C.crow_indices(), native.crow_indices())
        assert torch.equal(C.col_indices(), native.col_indices())
        S = sf.to_sparse(D, fill_value=fill, layout=torch.sparse_csr)
        T.assert_dense_equal(S.to_dense(), D)


# ---- pickling, copying --------------------------------------------------------

@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_save_load_deepcopy_keep_the_fill(layout):
    A = T.random_tensor("hybrid", -1.5, layout)
    buf = io.BytesIO()
    torch.save(A, buf)
    buf.seek(0)
    for B in (torch.load(buf), pickle.loads(pickle.dumps(A)), copy.deepcopy(A), A.clone()):
        assert isinstance(B, sf.SparseFillTensor) and B.layout == layout
        T.assert_dense_equal(B.to_dense(), A.to_dense())
        assert torch.equal(B._fill_value(), A._fill_value())
    G = T.random_tensor("random", 1.0, layout, requires_grad=True)
    assert copy.deepcopy(G).requires_grad and G.detach().requires_grad is False


OLD_HOMES = [b"torch_sparsefill._factories", b"torch_sparsefill._tensor"]
SAVED_BY_FLAT_LAYOUT = T.DATA / "saved_by_flat_layout.pt"


@pytest.mark.parametrize("weights_only", [True, False])
@pytest.mark.parametrize("old_home", OLD_HOMES)
def test_load_file_naming_an_old_home_of_the_rebuild_function(old_home, weights_only):
    """Files written when the rebuild function lived in an older module still
    load, with torch.load's default weights_only=True and without it."""
    import zipfile

    A = T.random_tensor("random", 0.5, torch.sparse_coo)
    buf = io.BytesIO()
    torch.save(A, buf)
    old, src = io.BytesIO(), zipfile.ZipFile(io.BytesIO(buf.getvalue()))
    now = b"torch_sparsefill.creation.serialization\n_rebuild_sparsefill"
    with zipfile.ZipFile(old, "w") as dst:
        for name in src.namelist():
            data = src.read(name)
            if name.endswith("data.pkl"):
                assert now in data
                data = data.replace(now, old_home + b"\n_rebuild_sparsefill")
            dst.writestr(name, data)
    old.seek(0)
    T.assert_dense_equal(torch.load(old, weights_only=weights_only).to_dense(), A.to_dense())


@pytest.mark.parametrize("weights_only", [True, False])
def test_load_file_saved_by_the_flat_package(weights_only):
    """test/data/saved_by_flat_layout.pt was written by torch.save before the
    package had subpackages (COO, CSR, BSR and a parameter)."""
    saved = torch.load(SAVED_BY_FLAT_LAYOUT, weights_only=weights_only)
    assert saved["coo"].to_dense().tolist() == [[5., 5., 3.], [4., 5., 5.]]
    assert saved["csr"].dtype == torch.float64
    assert saved["csr"].to_dense().tolist() == [[-1., 2.], [3., -1.]]
    assert saved["bsr"].layout == torch.sparse_bsr and saved["bsr"].to_dense().eq(2).all()
    assert saved["param"].to_dense().tolist() == [1., .5, .5]


# ---- autograd of construction and to_dense --------------------------------------

@pytest.mark.parametrize("layout", T.LAYOUTS)
@pytest.mark.parametrize("pattern", ["random", "hybrid", "empty", "full"])
def test_gradcheck_construction_to_dense(layout, pattern):
    idx, v, f, size = T.leaf_parts(0, 1.5, layout, "real", pattern=pattern)
    assert torch.autograd.gradcheck(lambda v, f: T.build(layout, idx, v, f, size).to_dense(),
                                    (v, f))
    assert torch.autograd.gradgradcheck(
        lambda v, f: T.build(layout, idx, v, f, size).to_dense().pow(2), (v, f))


def test_gradcheck_coalesce_and_to_sparse():
    idx = torch.tensor([[2, 0, 2, 1]])
    v = torch.randn(4, dtype=torch.float64, requires_grad=True)
    f = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(
        lambda v, f: sf.sparse_coo_tensor(idx, v, (5,), fill_value=f).to_dense(), (v, f))
    x = torch.tensor([[0., 1.], [2., 0.]], dtype=torch.float64, requires_grad=True)
    # Differentiable w.r.t. x; the fill's gradient is shared by the unspecified elements.
    A = sf.to_sparse(x, fill_value=0.)
    torch.exp(A).to_dense().sum().backward()
    torch.testing.assert_close(x.grad, torch.exp(x.detach()))


@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_leaf_grad_is_a_sparsefill_tensor(layout):
    A = T.random_tensor("random", 0.7, layout, requires_grad=True)
    assert A.requires_grad and A.is_leaf
    loss = (torch.exp(A * 2.0) + A).to_dense().pow(2).sum()
    loss.backward()
    D = A.detach().to_dense().requires_grad_()
    (torch.exp(D * 2.0) + D).pow(2).sum().backward()
    assert isinstance(A.grad, sf.SparseFillTensor) and A.grad.layout == layout
    T.assert_dense_equal(A.grad.to_dense(), D.grad)
    # parameter gradients: fill gets the sum over unspecified elements
    unspecified = A.to_dense() == A.fill_value()
    torch.testing.assert_close(A._fill_value().grad, D.grad[unspecified].sum())
    A.grad = None
    assert A.grad is None


def test_leaf_grad_projection_when_not_constant():
    A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=2., requires_grad=True)
    w = torch.tensor([1., 2., 4.])
    (A.to_dense() * w).sum().backward()
    # the fill's parameter gradient is exact, A.grad's fill is the mean share
    assert A._fill_value().grad.item() == 6.
    T.assert_dense_equal(A.grad.to_dense(), torch.tensor([1., 3., 3.]))


# ---- nothing computes as if the fill were 0 --------------------------------------

# Once refused, now routed (order statistics, scans, moves): each equals the
# dense call, the unspecified elements counted as the fill.
@pytest.mark.parametrize("call", [
    lambda A: torch.cumsum(A, 0), lambda A: A.median(), lambda A: torch.kron(A, A),
    lambda A: torch.argmax(A), lambda A: A.flip(0), lambda A: torch.nonzero(A),
    lambda A: torch.cumprod(A, 0), lambda A: torch.trace(A), lambda A: A.sort(),
    lambda A: torch.cummax(A, 0), lambda A: torch.roll(A, 1, 0),
])
def test_once_refused_functions_equal_dense(call):
    A = example()
    got, want = call(A), call(A.to_dense())
    got, want = (tuple(got), tuple(want)) if isinstance(want, tuple) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        T.assert_dense_equal(T.dense(g), w)


@pytest.mark.parametrize("call", [
    lambda A: A.renorm_(2, 0, 1.), lambda A: A.tril_(), lambda A: A.fill_diagonal_(1.),
    lambda A: A.cumsum_(0), lambda A: torch.histogramdd(A.reshape(-1, 1), bins=3),
    lambda A: torch.geqrf(A),
])
def test_unsupported_functions_raise(call):
    with pytest.raises(NotImplementedError, match="torch_sparsefill"):
        call(example())


def test_unsupported_function_is_named():
    with pytest.raises(NotImplementedError, match=r"torch\.histogramdd"):
        torch.histogramdd(example().reshape(-1, 1), bins=3)
    with pytest.raises(NotImplementedError, match="to_dense"):
        example().to_dense(masked_grad=True)


def test_cuda_method_moves_like_a_strided_tensor():
    """A.cuda() is a device move (never refused): it fails only where a
    strided tensor's .cuda() fails, with the same error."""
    A = sf.full((2, 3), 1.5)
    try:
        expected = torch.zeros(1).cuda().device
    except (AssertionError, RuntimeError) as e:
        with pytest.raises(type(e)):
            A.cuda()
    else:
        assert A.cuda().device == expected and A.cuda().cpu().device.type == "cpu"
