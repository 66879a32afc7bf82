"""Code written for torch.sparse runs unchanged on a SparseFillTensor. Each
check runs the same code on torch's sparse tensor and on ours with fill 0
and compares, then with other fills against the dense computation."""
import math
import pickle

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf

FILLS = T.FILLS
NONZERO_FILLS = [f for f in FILLS if f != 0.0]


def pair(indices, values, size, fill=0.0, **kw):
    """The same COO tensor in torch and in ours."""
    indices = torch.tensor(indices, dtype=torch.int64)
    values = torch.tensor(values, dtype=torch.float64)
    return (torch.sparse_coo_tensor(indices, values, size, **kw),
            sf.sparse_coo_tensor(indices, values, size, fill_value=fill, **kw))


def assert_same(ours, theirs):
    """Same layout, shape, dtype and elements (torch's to_dense is our oracle
    with fill 0)."""
    assert ours.layout == theirs.layout and ours.shape == theirs.shape
    T.assert_dense_equal(T.dense(ours, any_sparse=True), T.dense(theirs, any_sparse=True))


# ---- constructors with only a size -------------------------------------------------

def test_size_only_coo_like_torch():
    A, ref = sf.sparse_coo_tensor(size=(2, 3)), torch.sparse_coo_tensor(size=(2, 3))
    assert_same(A, ref)
    assert A.nse() == 0 and A.sparse_dim() == 2 and A.dtype == ref.dtype
    assert A.is_coalesced() == ref.is_coalesced()
    B = sf.sparse_coo_tensor(size=(2, 3), dtype=torch.float64, fill_value=4.)
    T.assert_dense_equal(B.to_dense(), torch.full((2, 3), 4., dtype=torch.float64))


def test_size_only_csr():
    A = sf.sparse_csr_tensor(size=(2, 3), fill_value=-1.)
    assert A.layout == torch.sparse_csr and A.nse() == 0
    T.assert_dense_equal(A.to_dense(), torch.full((2, 3), -1.))
    with pytest.raises(ValueError, match="2 dimensions"):
        sf.sparse_csr_tensor(size=(2, 3, 4))


def test_missing_components_named():
    with pytest.raises(TypeError, match="missing values"):
        sf.sparse_coo_tensor([[0]])
    with pytest.raises(TypeError, match="size alone"):
        sf.sparse_coo_tensor()
    with pytest.raises(TypeError, match="missing col_indices, values"):
        sf.sparse_csr_tensor([0, 1])


# ---- coalesced semantics (RFC.md#stored-elements) ------------------------------------------------

@pytest.mark.parametrize("indices", [[[0, 1]], [[1, 0]], [[1, 1]], [[2]], [[]]])
def test_is_coalesced_flag_like_torch(indices):
    values = [float(i + 1) for i in range(len(indices[0]))]
    ref, A = pair(indices, values, (3,))
    assert A.is_coalesced() == ref.is_coalesced()
    for get in (torch.Tensor.indices, torch.Tensor.values):
        if ref.is_coalesced():
            assert torch.equal(get(A), get(ref))
        else:
            with pytest.raises(RuntimeError, match="uncoalesced tensor, please call .coalesce"):
                get(A)
    assert torch.equal(A._indices(), ref._indices()) and torch.equal(A._values(), ref._values())
    C, Cref = A.coalesce(), ref.coalesce()
    assert C.is_coalesced() and torch.equal(C.indices(), Cref.indices())
    assert torch.equal(C.values(), Cref.values())
    assert C.coalesce() is C


def test_is_coalesced_argument():
    ref, A = pair([[0, 2]], [1., 2.], (3,), is_coalesced=True)
    assert A.is_coalesced() and ref.is_coalesced()
    assert torch.equal(A.indices(), ref.indices())
    with pytest.raises(ValueError, match="not sorted and unique"):
        sf.sparse_coo_tensor([[2, 0]], [1., 2.], (3,), is_coalesced=True)
    assert not sf.sparse_coo_tensor([[2]], [1.], (3,), is_coalesced=False).is_coalesced()


@pytest.mark.parametrize("fill", FILLS)
def test_uncoalesced_ops_and_flag_travel(fill):
    A = sf.sparse_coo_tensor([[2, 0, 2]], [1., 2., 3.], (4,), fill_value=fill)
    D = A.to_dense()
    assert not A.is_coalesced()
    for out, ref in ((A * 2, D * 2), (torch.exp(A), torch.exp(D)), (A + A, D + D)):
        T.assert_dense_equal(out.to_dense(), ref)
    # clone/detach/a move keep torch's flag; pickling too.
    for B in (A.clone(), A.detach(), A.to(A.device), pickle.loads(pickle.dumps(A))):
        assert not B.is_coalesced()
        T.assert_dense_equal(B.to_dense().to(D.dtype), D)
    # A dtype cast sums the duplicates first (the dense element is their sum,
    # then cast), so its result is coalesced: where torch's differs, ours is
    # the dense tensor's cast.
    B = A.to(torch.float32 if A.dtype == torch.float64 else torch.float64)
    assert B.is_coalesced()
    T.assert_dense_equal(B.to_dense(), D.to(B.dtype))
    C = A.coalesce()
    assert pickle.loads(pickle.dumps(C)).is_coalesced() and C.clone().is_coalesced()


def test_native_flag_kept_by_to_sparse():
    ref = torch.sparse_coo_tensor([[1, 0]], [1., 2.], (3,))
    assert not sf.to_sparse(ref).is_coalesced()
    assert sf.to_sparse(ref.coalesce()).is_coalesced()


# ---- function forms of the metadata queries --------------------------------------

def test_metadata_function_forms():
    ref, A = pair([[0, 1], [1, 0]], [1., 2.], (2, 2), fill=3.)
    other = torch.zeros(2, 2)
    for f in (torch.is_floating_point, torch.is_complex, torch.is_signed):
        assert f(A) == f(ref)
    assert A.is_signed() == ref.is_signed()
    assert torch.is_same_size(A, other) and A.is_same_size(ref)
    assert not torch.is_same_size(A, torch.zeros(3))
    assert torch.is_tensor(A)
    one_ref, one = pair([[0]], [0.], (1,), fill=5.)
    assert torch.is_nonzero(one) is False and torch.is_nonzero(one) == torch.is_nonzero(one_ref)
    assert torch.is_nonzero(sf.full((1, 1), 5.))
    for x in (A, sf.zeros(0)):
        with pytest.raises(RuntimeError, match="ambiguous"):
            torch.is_nonzero(x)


# ---- *_like, new_*, empty ------------------------------------------------------------

@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_like_factories_follow_dense(fill, layout):
    A = T.random_tensor("random", fill, layout, seed=3)
    D = A.to_dense()
    for f in (torch.zeros_like, torch.empty_like, torch.ones_like,
              lambda x, **kw: torch.full_like(x, 2.5, **kw)):
        out = f(A)
        assert isinstance(out, sf.SparseFillTensor) and out.layout == layout and out.nse() == 0
        expected = torch.zeros_like(D) if f is torch.empty_like else f(D)
        T.assert_dense_equal(out.to_dense(), expected)
        T.assert_dense_equal(f(A, dtype=torch.float32).to_dense(),
                             expected.to(torch.float32))
    T.assert_dense_equal(torch.zeros_like(A, layout=torch.strided), torch.zeros_like(D))
    grad = torch.zeros_like(A, requires_grad=True)
    assert grad.requires_grad and grad.is_leaf


def test_like_factories_fill0_like_torch():
    ref, A = pair([[0, 1], [1, 2]], [1., 2.], (2, 3))
    ref = ref.coalesce()
    for f in (torch.zeros_like, torch.empty_like):
        assert_same(f(A), f(ref))
        assert f(A).nse() == f(ref)._nnz()
    for name, args in (("new_zeros", ((3, 4),)), ("new_zeros", (3, 4)), ("new_empty", ((3, 4),))):
        out, expected = getattr(A, name)(*args), getattr(ref, name)(*args)
        assert_same(out, expected)
        assert out.sparse_dim() == expected.sparse_dim()
    T.assert_dense_equal(A.new_ones((2, 2)).to_dense(), torch.ones(2, 2, dtype=torch.float64))
    T.assert_dense_equal(A.new_full((2,), 7.).to_dense(), torch.full((2,), 7., dtype=torch.float64))
    T.assert_dense_equal(A.new_full((2,), fill_value=-1.).to_dense(),
                         torch.full((2,), -1., dtype=torch.float64))
    T.assert_dense_equal(torch.full_like(A, fill_value=math.inf).to_dense(),
                         torch.full_like(ref.to_dense(), math.inf))
    T.assert_dense_equal(A.new_tensor([1., 2.]), ref.new_tensor([1., 2.]))
    assert_same(sf.empty(2, 3), torch.empty((2, 3), layout=torch.sparse_coo))
    assert_same(sf.zeros((2, 3)), torch.zeros((2, 3), layout=torch.sparse_coo))
    assert sf.empty((2, 2), layout=torch.sparse_csr).layout == torch.sparse_csr
    with pytest.raises(NotImplementedError, match="rand_like"):
        torch.rand_like(A)


# ---- in-place ops that change the pattern ----------------------------------------------

IN_PLACE = {
    "add_": (lambda x, y: x.add_(y), torch.add),
    "sub_": (lambda x, y: x.sub_(y), torch.sub),
    "mul_": (lambda x, y: x.mul_(y), torch.mul),
    "iadd": (lambda x, y: x.__iadd__(y), torch.add),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_in_place_new_pattern_like_torch(name):
    inplace, _ = IN_PLACE[name]
    ref, A = pair([[0, 1], [1, 2]], [1., 2.], (2, 3))
    oref, other = pair([[1, 0], [0, 2]], [3., 4.], (2, 3))
    ref, oref = ref.coalesce(), oref.coalesce()
    version = A._version
    out = inplace(A, other)
    assert out is A and A._version > version
    assert_same(A, inplace(ref, oref))


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("layout", T.LAYOUTS)
@pytest.mark.parametrize("name", sorted(IN_PLACE))
def test_in_place_new_pattern_dense(name, layout, fill):
    inplace, op = IN_PLACE[name]
    A = T.random_tensor("random", fill, layout, seed=1)
    B = T.random_tensor("random", 1.25, layout, seed=2)
    expected = op(A.to_dense(), B.to_dense())
    assert inplace(A, B) is A and A.layout == layout
    T.assert_dense_equal(A.to_dense(), expected)


def test_in_place_autograd():
    A = T.random_tensor("random", 0.5, requires_grad=True, seed=4)
    B = T.random_tensor("random", -1.0, seed=5)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        A.add_(B)
    C = A * 2  # not a leaf: in place is fine, and gradients flow through it
    C.add_(B)
    C.mul_(B)
    C.to_dense().sum().backward()
    Ad = A.to_dense().detach().requires_grad_()
    ((Ad * 2 + B.to_dense()) * B.to_dense()).sum().backward()
    # RFC.md#gradient-convention: values get the dense gradient at their positions, the fill
    # its sum over the unspecified elements.
    stored = torch.zeros(A.shape, dtype=torch.bool)
    stored[tuple(A._indices())] = True
    T.assert_dense_equal(A._values().grad, Ad.grad[stored])
    T.assert_dense_equal(A._fill_value().grad, Ad.grad[~stored].sum())
    with torch.no_grad():  # an optimiser-style update: stays a leaf that requires grad
        A.add_(B)
    assert A.is_leaf and A.requires_grad


def test_zero_():
    ref, A = pair([[0, 1], [1, 2]], [1., 2.], (2, 3), fill=math.nan)
    version = A._version
    assert A.zero_() is A and A._version > version
    assert_same(A, ref.zero_())
    assert A.nse() == 0


@pytest.mark.parametrize("fill", FILLS)
def test_transpose_in_place(fill):
    A = T.random_tensor("random", fill, seed=6, size=(3, 5))
    D = A.to_dense()
    A.mul_(1.)  # a version to keep across the size change (a new TensorImpl)
    version = A._version
    assert A.t_() is A and A.shape == (5, 3) and A._version > version
    T.assert_dense_equal(A.to_dense(), D.t())
    A.transpose_(0, 1)
    assert A.shape == (3, 5)
    T.assert_dense_equal(A.to_dense(), D)
    ref, B = pair([[0, 1], [1, 2]], [1., 2.], (2, 3))
    assert_same(B.t_(), ref.t_())


def test_detach_():
    A = T.random_tensor("random", 2.0, seed=7, requires_grad=True)
    B = A * 3
    assert B.detach_() is B and not B.requires_grad and B.is_leaf
    T.assert_dense_equal(B.to_dense(), (A.to_dense() * 3).detach())


@pytest.mark.parametrize("fill", FILLS)
def test_sparse_resize(fill):
    ref, A = pair([[0, 1], [1, 2]], [1., 2.], (2, 3), fill=fill)
    A.sparse_resize_((4, 5), 2, 0)
    ref.sparse_resize_((4, 5), 2, 0)
    assert A.shape == (4, 5) and A.nse() == 2
    expected = ref.to_dense().masked_fill(ref.to_dense() == 0, fill)
    T.assert_dense_equal(A.to_dense(), expected)
    with pytest.raises(RuntimeError, match="shrinking"):
        A.sparse_resize_((1, 5), 2, 0)
    A.sparse_resize_and_clear_((2, 2), 2, 0)
    assert A.shape == (2, 2) and A.nse() == 0
    T.assert_dense_equal(A.to_dense(), torch.full((2, 2), fill, dtype=torch.float64))
    B = sf.sparse_coo_tensor([[0]], [1.], (1,), fill_value=fill)
    B.resize_as_(torch.sparse_coo_tensor([[0]], [1.], (3,)))
    T.assert_dense_equal(B.to_dense(), torch.tensor([1., fill, fill]))
    with pytest.raises(NotImplementedError, match="only sparse COO"):
        sf.sparse_csr_tensor(size=(2, 2)).sparse_resize_((3, 3), 2, 0)
    with pytest.raises(NotImplementedError, match="dense dimensions"):
        sf.sparse_coo_tensor([[0]], [[1., 2.]], (2, 2), fill_value=fill).sparse_resize_(
            (2, 3), 1, 1)


def test_sparse_resize_fill0_like_torch():
    ref, A = pair([[0, 1], [1, 2]], [1., 2.], (2, 3))
    assert_same(A.sparse_resize_((3, 4), 2, 0), ref.sparse_resize_((3, 4), 2, 0))
    assert_same(A.sparse_resize_and_clear_((2, 2, 2), 3, 0),
                ref.sparse_resize_and_clear_((2, 2, 2), 3, 0))


# ---- smm, hspmm, sspaddmm -----------------------------------------------------------------

def _mat(seed, shape=(7, 4)):
    return torch.randn(shape, generator=T.rng(seed), dtype=torch.float64)


def test_products_fill0_like_torch():
    A = T.random_tensor("random", 0.0, seed=8)
    ref = torch.sparse_coo_tensor(A._indices(), A._values(), A.shape)
    D = _mat(9)
    for ours, theirs in ((torch.smm(A, D), torch.smm(ref, D)), (A.smm(D), ref.smm(D)),
                         (torch.hspmm(A, D), torch.hspmm(ref, D))):
        assert_same(ours, theirs)
        theirs = theirs.coalesce()
        assert ours.sparse_dim() == theirs.sparse_dim() and ours.nse() == theirs._nnz()
        assert ours.fill_value().abs().sum() == 0
    S = T.random_tensor("random", 0.0, seed=10, size=(5, 4))
    Sref = torch.sparse_coo_tensor(S._indices(), S._values(), S.shape)
    assert_same(torch.sspaddmm(S, A, D, beta=0.5, alpha=2.),
                torch.sspaddmm(Sref, ref, D, beta=0.5, alpha=2.))
    assert_same(S.sspaddmm(A, D), Sref.sspaddmm(ref, D))


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_products_with_fill(fill, layout):
    A = T.random_tensor("random", fill, layout, seed=11)
    D = _mat(12)
    S = T.random_tensor("random", -0.5, seed=13, size=(5, 4))
    expected = A @ D  # exact against the dense product (test_products.py)
    if math.isfinite(fill):
        T.assert_dense_equal(expected, A.to_dense() @ D)
    out = torch.smm(A, D)
    assert out.layout == torch.sparse_coo and out.sparse_dim() == 2
    T.assert_dense_equal(out.to_dense(), expected)
    hybrid = torch.hspmm(A, D)
    assert hybrid.sparse_dim() == 1 and hybrid.dense_dim() == 1
    T.assert_dense_equal(hybrid.to_dense(), expected)
    T.assert_dense_equal(torch.sspaddmm(S, A, D, beta=2., alpha=-1.).to_dense(),
                         2. * S.to_dense() - expected)


def test_products_per_row_fill_and_gradients():
    fill = torch.arange(5.).reshape(5, 1).double()
    A = sf.sparse_coo_tensor([[0, 3], [1, 2]], [1., 2.], (5, 7), fill_value=fill,
                             dtype=torch.float64)
    D = _mat(14)
    T.assert_dense_equal(torch.smm(A, D).to_dense(), A.to_dense() @ D)
    T.assert_dense_equal(torch.hspmm(A, D).to_dense(), A.to_dense() @ D)

    idx = torch.tensor([[0, 3, 3], [1, 2, 6]])

    def f(values, fill, mat):
        A = sf.sparse_coo_tensor(idx, values, (5, 7), fill_value=fill)
        return torch.smm(A, mat).to_dense(), torch.hspmm(A, mat).to_dense()

    values = torch.randn(3, dtype=torch.float64, requires_grad=True)
    for fill in (torch.tensor(0.7, dtype=torch.float64, requires_grad=True),
                 torch.randn(1, 7, dtype=torch.float64, requires_grad=True)):
        torch.autograd.gradcheck(f, (values, fill, _mat(15).requires_grad_()))


# ---- low-rank solvers ----------------------------------------------------------------------

@pytest.mark.parametrize("fill", [0.0, 1.5, -2.0])
def test_lowrank(fill):
    g = T.rng(16)
    A = sf.to_sparse(torch.where(torch.rand(30, 20, generator=g) < 0.3,
                                 torch.randn(30, 20, generator=g, dtype=torch.float64),
                                 torch.tensor(fill, dtype=torch.float64)), fill_value=fill)
    D = A.to_dense()
    exact = torch.linalg.svdvals(D)
    torch.manual_seed(0)
    U, S, V = torch.svd_lowrank(A, q=20, niter=4)
    torch.testing.assert_close(S, exact)
    torch.testing.assert_close(U @ torch.diag(S) @ V.T, D)
    torch.manual_seed(0)
    U, S, V = torch.pca_lowrank(A, q=20, niter=4)
    centred = D - D.mean(0, keepdim=True)
    torch.testing.assert_close(S, torch.linalg.svdvals(centred))
    torch.manual_seed(0)
    S = sf.to_sparse(D @ D.T, fill_value=0.)
    S = sf.to_sparse(S.to_dense() + fill, fill_value=fill)
    E, X = torch.lobpcg(S, k=2, largest=True, niter=100, tol=1e-10)
    torch.testing.assert_close(E, torch.linalg.eigvalsh(S.to_dense())[-2:].flip(0))
    with pytest.raises(NotImplementedError, match="requires grad"):
        torch.lobpcg(S.detach().requires_grad_(), k=2)
