"""Matrix products (RFC.md#products): every entry point against the float64
dense product, on random and on every shared real matrix, with scalar,
per-row and per-column fills; float64 gradcheck on (values, fill, other
operand); result layouts; errors."""
from __future__ import annotations

import functools
import math
import warnings

import pytest
import scipy.io
import scipy.sparse
import torch

import torch_sparsefill as sf
from torch_sparsefill import SparseFillTensor

import sf_testing as T

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")

MATRICES = sorted(T.MATRICES.glob("*.mtx"))
FILLS = [0.0, 0.5, -3.0]


def test_matrices_present():
    assert len(MATRICES) >= 17, T.MATRICES


@functools.lru_cache(maxsize=None)
def _real(name):
    m = scipy.sparse.coo_array(scipy.io.mmread(str(T.MATRICES / f"{name}.mtx"))).astype("float64")
    return T.on_test_device(sf.from_scipy(m, fill_value=0.0))


def _random(m, k, fill, layout=torch.sparse_coo, *, density=0.3, seed=0, dtype=torch.float64):
    g = T.rng(seed)
    mask = torch.rand(m, k, generator=g) < density
    idx = mask.nonzero().t()
    values = torch.randn(idx.shape[1], generator=g, dtype=torch.float64).to(dtype)
    A = sf.sparse_coo_tensor(idx, values, (m, k), fill_value=fill)
    return A.to_sparse(layout=layout)


def _randn(*shape, seed=1, dtype=torch.float64):
    return torch.randn(*shape, generator=T.rng(seed), dtype=dtype)


# The products' results are finite here: a NaN anywhere fails.
_close = functools.partial(T.assert_dense_equal, equal_nan=False)


# ---- real matrices --------------------------------------------------------------------

@pytest.mark.parametrize("path", MATRICES, ids=lambda p: p.stem)
def test_real_matrix_products(path):
    """A @ B, B^T-side D @ A and A @ x on every shared matrix (rectangular ones
    included), fills {0, 0.5, -3}, n in {1, 7, 64}, against the dense product."""
    A0 = _real(path.stem)
    m, k = A0.shape
    for f_i, fill in enumerate(FILLS):
        layout = (torch.sparse_coo, torch.sparse_csr)[f_i % 2]
        A = T.with_fill(A0, fill).to_sparse(layout=layout)
        D = T.dense_of(A)
        scale = 1 + D.abs().max().item()
        for n in (1, 7, 64):
            B = _randn(k, n, seed=n)
            _close(A @ B, D @ B, rtol=1e-10, atol=1e-10 * scale * k)
        x = _randn(k, seed=2)
        _close(torch.mv(A, x), D @ x, rtol=1e-10, atol=1e-10 * scale * k)
        L = _randn(7, m, seed=3)
        _close(L @ A, L @ D, rtol=1e-10, atol=1e-10 * scale * m)


def test_skewed_tols4000_per_row_and_per_column_fills():
    A0 = _real("tols4000")
    m, k = A0.shape
    B = _randn(k, 7)
    for fill in (_randn(m, 1, seed=4), _randn(1, k, seed=5)):
        A = T.with_fill(A0, fill)
        D = T.dense_of(A)
        _close(A @ B, D @ B, rtol=1e-9, atol=1e-9 * (1 + D.abs().max().item()) * k)


# ---- random operands: fills, layouts, dtypes --------------------------------------------

FILL_FORMS = ["scalar", "row", "col", "zero"]


def _fill_of(form, m, k, seed=9):
    if form == "scalar":
        return -1.25
    if form == "zero":
        return 0.0
    return _randn(m, 1, seed=seed) if form == "row" else _randn(1, k, seed=seed)


@pytest.mark.parametrize("layout", T.LAYOUTS, ids=["coo", "csr"])
@pytest.mark.parametrize("form", FILL_FORMS)
def test_sparse_dense_entry_points(layout, form):
    m, k, n = 9, 6, 4
    A = T.with_fill(_random(m, k, 0.0, layout), _fill_of(form, m, k))
    D = T.dense_of(A)
    B, x, L = _randn(k, n), _randn(k, seed=2), _randn(3, m, seed=3)
    M = _randn(m, n, seed=4)
    _close(torch.mm(A, B), D @ B)
    _close(A.mm(B), D @ B)
    _close(torch.matmul(A, B), D @ B)
    _close(A.matmul(B), D @ B)
    _close(torch.sparse.mm(A, B), D @ B)
    _close(A @ x, D @ x)
    _close(A.mv(x), D @ x)
    _close(L @ A, L @ D)                 # __rmatmul__ / dense @ sparse
    _close(torch.mm(L, A), L @ D)
    _close(torch.matmul(L[0], A), L[0] @ D)  # 1-D @ 2-D
    _close(torch.addmm(M, A, B), torch.addmm(M, D, B))
    _close(torch.addmm(M, A, B, beta=0.5, alpha=-2.0), torch.addmm(M, D, B, beta=0.5, alpha=-2.0))
    _close(M.addmm(A, B, alpha=3), M.addmm(D, B, alpha=3))
    _close(torch.sparse.addmm(M, A, B, beta=2.0), torch.addmm(M, D, B, beta=2.0))
    _close(torch.addmm(M[0], A, B), torch.addmm(M[0], D, B))  # broadcast input
    nan_input = torch.full((m, n), float("nan"), dtype=torch.float64)
    _close(torch.addmm(nan_input, A, B, beta=0), D @ B)  # beta=0 ignores input, as torch


def test_sparse_input_of_addmm():
    A = _random(5, 4, 2.0)
    B = _randn(4, 3)
    M = _random(5, 3, -1.0, seed=7)
    _close(torch.addmm(M, A, B, beta=0.5), torch.addmm(M.to_dense(), A.to_dense(), B, beta=0.5))


def test_empty_rows_empty_matrix_and_zero_sizes():
    A = _random(8, 5, 1.5, density=0.2)
    A = T.with_fill(A, 1.5)
    assert (A._coo_indices()[0].bincount(minlength=8) == 0).any()  # has empty rows
    B = _randn(5, 3)
    _close(A @ B, T.dense_of(A) @ B)
    E = sf.full((4, 5), 2.5, dtype=torch.float64)
    _close(E @ B, torch.full((4, 5), 2.5, dtype=torch.float64) @ B)
    _close(E.to_sparse_csr() @ B[:, 0], torch.full((4, 5), 2.5, dtype=torch.float64) @ B[:, 0])
    Z = sf.full((0, 5), 2.5, dtype=torch.float64)
    assert (Z @ B).shape == (0, 3)
    W = sf.full((3, 0), 2.5, dtype=torch.float64)
    _close(W @ torch.zeros(0, 4, dtype=torch.float64), torch.zeros(3, 4, dtype=torch.float64))
    _close(A @ torch.zeros(5, 0, dtype=torch.float64), torch.zeros(8, 0, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_low_precision_dtypes(dtype):
    A = _random(20, 30, 0.5, dtype=dtype)
    B = _randn(30, 8, dtype=dtype)
    out = A @ B
    assert out.dtype == dtype
    expected = (T.dense_of(A).double() @ B.double())
    tol = {torch.float32: 1e-5, torch.float16: 2e-2, torch.bfloat16: 5e-2}[dtype]
    torch.testing.assert_close(out.double(), expected, rtol=tol, atol=tol * 10)
    out_v = A @ B[:, 0]
    torch.testing.assert_close(out_v.double(), expected[:, 0], rtol=tol, atol=tol * 10)


@pytest.mark.cpu_only("CPU thread counts")
def test_multithreaded_split_matches_dense():
    """Large enough for the row ranges to be split across threads."""
    A = _random(600, 500, -0.75, density=0.05, seed=3)
    B = _randn(500, 40)
    D = T.dense_of(A)
    with_threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        _close(A @ B, D @ B)
        _close(A @ B[:, 0], D @ B[:, 0])
    finally:
        torch.set_num_threads(with_threads)


# ---- sparse @ sparse -------------------------------------------------------------------

@pytest.mark.parametrize("layout", T.LAYOUTS, ids=["coo", "csr"])
def test_sparse_sparse_fill_zero_gives_sparse(layout):
    A = _random(12, 9, 0.0, layout, seed=1)
    B = _random(9, 10, 0.0, layout, seed=2)
    C = A @ B
    assert isinstance(C, SparseFillTensor) and C.layout == layout
    assert float(C.fill_value()) == 0.0
    _close(C.to_dense(), A.to_dense() @ B.to_dense())
    # torch.sparse.mm and mixed layouts: the first operand's layout
    C2 = torch.sparse.mm(A, B.to_sparse(layout=torch.sparse_csr))
    assert C2.layout == layout
    _close(C2.to_dense(), A.to_dense() @ B.to_dense())
    # the pattern is structural, as in torch: same stored positions
    N = (A.to_dense() != 0).double() @ (B.to_dense() != 0).double()
    assert C.nse() == int((N != 0).sum())


@pytest.mark.parametrize("fa,fb", [("scalar", "zero"), ("zero", "scalar"), ("scalar", "scalar"),
                                   ("row", "col"), ("col", "row"), ("row", "row"),
                                   ("col", "col"), ("zero", "col")])
def test_sparse_sparse_with_fills_is_dense(fa, fb):
    m, k, n = 7, 6, 5
    A = T.with_fill(_random(m, k, 0.0, seed=1), _fill_of(fa, m, k, seed=11))
    B = T.with_fill(_random(k, n, 0.0, torch.sparse_csr, seed=2), _fill_of(fb, k, n, seed=12))
    if fa == "zero" and fb == "zero":
        pytest.skip("covered by the fill-0 test")
    C = A @ B
    _close(C, T.dense_of(A) @ T.dense_of(B))


def test_sparse_sparse_scalar_identity_has_abk_once():
    """RFC.md#products: the a b K term appears once (the public RFC's 10.2 form double counts)."""
    A = sf.full((3, 4), 2.0, dtype=torch.float64)
    B = sf.full((4, 5), 3.0, dtype=torch.float64)
    _close(A @ B, torch.full((3, 5), 2.0 * 3.0 * 4, dtype=torch.float64))


def test_native_torch_sparse_operand_reads_fill_zero():
    A = _random(5, 4, 1.0)
    N = torch.eye(4, dtype=torch.float64).to_sparse()
    _close(A @ N, T.dense_of(A))


# ---- batched ---------------------------------------------------------------------------

def _batched(nb, m, k, fill, seed=0):
    g = T.rng(seed)
    mask = torch.rand(nb, m, k, generator=g) < 0.3
    mask[1] = False  # one batch stores nothing
    idx = mask.nonzero().t()
    values = torch.randn(idx.shape[1], generator=g, dtype=torch.float64)
    A = sf.sparse_coo_tensor(idx, values, (nb, m, k), fill_value=fill)
    return A


def test_batched():
    A = _batched(3, 5, 4, 0.75)
    B = _randn(3, 4, 6)
    D = A.to_dense()
    _close(torch.bmm(A, B), torch.bmm(D, B))
    _close(A.bmm(B), torch.bmm(D, B))
    _close(A @ B, D @ B)
    L = _randn(3, 2, 5, seed=4)
    _close(torch.bmm(L, A), torch.bmm(L, D))
    # a fill per batch (b, 1, 1) and per batch-row (b, m, 1)
    for fill in (_randn(3, 1, 1, seed=5), _randn(3, 5, 1, seed=6)):
        P = T.with_fill(A, fill)
        _close(torch.bmm(P, B), torch.bmm(T.dense_of(P), B))


# ---- gradients -------------------------------------------------------------------------

@pytest.mark.parametrize("layout", T.LAYOUTS, ids=["coo", "csr"])
@pytest.mark.parametrize("form", ["scalar", "row", "col"])
def test_gradcheck_sparse_dense(layout, form):
    m, k, n = 6, 5, 3
    A, v, f = T.leaves(T.with_fill(_random(m, k, 0.0, layout, seed=2), _fill_of(form, m, k)))
    B = _randn(k, n).requires_grad_()
    x = _randn(k, seed=3).requires_grad_()
    L = _randn(2, m, seed=4).requires_grad_()
    M = _randn(m, n, seed=5).requires_grad_()
    checks = [
        (lambda v, f, B: torch.mm(T.rebuild(A, v, f), B), (v, f, B)),
        (lambda v, f, x: torch.mv(T.rebuild(A, v, f), x), (v, f, x)),
        (lambda v, f, L: L @ T.rebuild(A, v, f), (v, f, L)),
        (lambda v, f, M, B: torch.addmm(M, T.rebuild(A, v, f), B, beta=0.5, alpha=2.0),
         (v, f, M, B)),
        (lambda v, f, B: torch.sparse.mm(T.rebuild(A, v, f), B), (v, f, B)),
    ]
    for fn, inputs in checks:
        assert torch.autograd.gradcheck(fn, inputs)
    # and the gradients equal the dense computation's
    W = _randn(m, n, seed=6)
    ours = torch.autograd.grad((torch.mm(T.rebuild(A, v, f), B) * W).sum(), (v, f, B))
    dense = torch.autograd.grad((torch.mm(T.dense_of(T.rebuild(A, v, f)), B) * W).sum(), (v, f, B))
    for a, b in zip(ours, dense):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("fa,fb", [("scalar", "scalar"), ("row", "col"), ("col", "row"),
                                   ("zero", "scalar")])
def test_gradcheck_sparse_sparse_with_fills(fa, fb):
    m, k, n = 5, 4, 6
    A, va, fa_t = T.leaves(T.with_fill(_random(m, k, 0.0, seed=1), _fill_of(fa, m, k, seed=3)))
    B, vb, fb_t = T.leaves(T.with_fill(_random(k, n, 0.0, torch.sparse_csr, seed=2),
                                   _fill_of(fb, k, n, seed=4)))
    assert torch.autograd.gradcheck(
        lambda va, fa_t, vb, fb_t: T.rebuild(A, va, fa_t) @ T.rebuild(B, vb, fb_t),
        (va, fa_t, vb, fb_t))


def test_gradcheck_spgemm_fill_zero():
    A, va, _ = T.leaves(_random(6, 5, 0.0, seed=1))
    B, vb, _ = T.leaves(_random(5, 7, 0.0, torch.sparse_csr, seed=2))
    zero = torch.zeros((), dtype=torch.float64)
    out = T.rebuild(A, va, zero) @ T.rebuild(B, vb, zero)
    assert isinstance(out, SparseFillTensor)
    assert torch.autograd.gradcheck(
        lambda va, vb: (T.rebuild(A, va, zero) @ T.rebuild(B, vb, zero)).to_dense(), (va, vb))


def test_fill_zero_that_requires_grad_gives_dense_result_with_fill_gradient():
    """A zero fill in autograd: the product's unspecified elements depend on it,
    so the result is dense and the fill gets its gradient."""
    A, va, fa = T.leaves(_random(4, 3, 0.0, seed=1))
    B, vb, fb = T.leaves(_random(3, 5, 0.0, seed=2))
    C = T.rebuild(A, va, fa) @ T.rebuild(B, vb, fb)
    assert not isinstance(C, SparseFillTensor)
    C.sum().backward()
    Dv = T.dense_of(T.rebuild(A, va.detach(), fa.detach().requires_grad_()))
    Dv2 = Dv @ T.dense_of(T.rebuild(B, vb.detach(), fb.detach()))
    (g,) = torch.autograd.grad(Dv2.sum(), Dv)
    assert fa.grad is not None
    assert torch.isclose(fa.grad, g[~T.stored_mask(A)].sum())


def test_gradcheck_batched():
    A, v, f = T.leaves(_batched(2, 4, 3, 0.5))
    B = _randn(2, 3, 2).requires_grad_()
    assert torch.autograd.gradcheck(lambda v, f, B: torch.bmm(T.rebuild(A, v, f), B), (v, f, B))


def test_grad_on_real_matrix_equals_dense():
    A, v, f = T.leaves(T.with_fill(_real("west0479"), -3.0))
    B = _randn(A.shape[1], 7).requires_grad_()
    W = _randn(A.shape[0], 7, seed=8)
    ours = torch.autograd.grad((T.rebuild(A, v, f) @ B * W).sum(), (v, f, B))
    dense = torch.autograd.grad((T.dense_of(T.rebuild(A, v, f)) @ B * W).sum(), (v, f, B))
    for a, b in zip(ours, dense):
        torch.testing.assert_close(a, b)


def test_opcheck():
    A = T.with_fill(_random(6, 5, 0.0, torch.sparse_csr), -1.5)
    v = A._sf_values.detach().clone().requires_grad_()
    f = A._sf_fill.detach().clone().requires_grad_()
    B = _randn(5, 3).requires_grad_()
    torch.library.opcheck(torch.ops.sparsefill.spmm, (A._sf_crow, A._sf_col, v, f, B, 5))
    for fill in (_randn(6, 1), _randn(1, 5)):  # per-row, per-column
        torch.library.opcheck(torch.ops.sparsefill.spmm,
                              (A._sf_crow, A._sf_col, v, fill.requires_grad_(), B, 5))
    torch.library.opcheck(torch.ops.sparsefill.sddmm, (A._sf_crow, A._sf_col, 5, _randn(6, 3),
                                                       _randn(5, 3)))
    torch.library.opcheck(torch.ops.sparsefill.csr_transpose, (A._sf_crow, A._sf_col, 5))


# ---- errors ------------------------------------------------------------------------------

def test_errors():
    A = _random(4, 3, 1.0)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        A @ _randn(4, 2)
    with pytest.raises(RuntimeError, match="same dtype"):
        A @ _randn(3, 2, dtype=torch.float32)
    Ai = sf.sparse_coo_tensor([[0], [1]], [2], (4, 3), fill_value=1)
    with pytest.raises(NotImplementedError, match="float32, float64"):
        Ai @ torch.ones(3, 2, dtype=torch.int64)
    with pytest.raises(RuntimeError, match="size mismatch"):
        torch.mv(A, _randn(4))
    with pytest.raises(RuntimeError, match="1-D"):
        torch.mv(A, _randn(3, 1))
    with pytest.raises(RuntimeError, match="reduce"):  # the others: test_sparse_mm_reduce.py
        torch.sparse.mm(A, _randn(3, 2), "prod")
    full_fill = T.with_fill(A, _randn(4, 3))
    with pytest.raises(NotImplementedError, match=r"fill of shape \(4, 3\)"):
        full_fill @ _randn(3, 2)
    H = sf.sparse_coo_tensor([[0], [1]], [[1., 2.]], (4, 3, 2), fill_value=0.5)
    with pytest.raises(NotImplementedError, match="hybrid"):
        H @ _randn(3, 2)
    with pytest.raises(RuntimeError):  # torch refuses hybrid sparse in mm too
        torch.sparse_coo_tensor([[0], [1]], [[1., 2.]], (4, 3, 2)) @ torch.randn(3, 2)
    B4 = _randn(2, 2, 3, 2)  # batched: broadcast as torch.matmul does (test_batched_products.py)
    torch.testing.assert_close(A @ B4, A.to_dense() @ B4)
    with pytest.raises(RuntimeError, match="same number of batches"):
        torch.bmm(_batched(3, 5, 4, 0.5), _randn(2, 4, 6))
    with pytest.raises(RuntimeError, match="mat1 must be a matrix"):
        torch.mm(_batched(3, 5, 4, 0.5), _randn(4, 6))


def test_ops_refuse_malformed_components():
    ops = torch.ops.sparsefill
    v = torch.ones(2, dtype=torch.float64)
    f = torch.tensor(0.5, dtype=torch.float64)
    B = torch.ones(3, 2, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="out of range"):
        ops.spmm(torch.tensor([0, 1, 2]), torch.tensor([0, 7]), v, f, B, 3)
    with pytest.raises(RuntimeError, match="crow_indices"):
        ops.spmm(torch.tensor([0, 5, 2]), torch.tensor([0, 1]), v, f, B, 3)
    with pytest.raises(RuntimeError, match="crow_indices\\[-1\\]"):
        ops.spmm(torch.tensor([0, 1, 3]), torch.tensor([0, 1]), v, f, B, 3)
    with pytest.raises(RuntimeError, match="rows"):
        ops.spmm(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), v, f, B, 4)


def test_coo_csr_view_is_cached():
    A = _random(6, 5, 1.0).coalesce()
    B = _randn(5, 2)
    A @ B
    first = A._sf_csr_view[1]
    A @ B
    assert A._sf_csr_view[1] is first


def test_dense_operands_with_one_row_take_any_row_stride():
    """torch leaves the stride of a size-1 dim arbitrary (a transposed column,
    an expanded scalar): the product must not read it as B's row stride."""
    one_row = sf.sparse_csr_tensor([0, 2], [0, 2], [2., -1.], (1, 3), fill_value=0.5)
    one_col = sf.sparse_csr_tensor([0, 1, 1], [0], [2.], (2, 1), fill_value=0.5)
    cases = [
        (one_col, torch.randn(4, 1).t()),             # B (1, 4) with strides (1, 1)
        (one_col, torch.tensor(3.).expand(1, 1)),     # strides (0, 0)
        (one_col, torch.tensor(3.).expand(1, 4)),     # column stride 0 as well
        (torch.randn(4, 1), one_row),                 # dense @ sparse: B^T has one row
    ]
    for a, b in cases:
        da = a.to_dense() if isinstance(a, SparseFillTensor) else a
        db = b.to_dense() if isinstance(b, SparseFillTensor) else b
        _close(a @ b, da @ db)
    v = torch.tensor([2., -1.], requires_grad=True)
    A = sf.sparse_csr_tensor([0, 2], [0, 2], v, (1, 3), fill_value=0.5)
    W = torch.randn(3, 2, requires_grad=True)
    (A @ W).sum().backward()  # the backward's A^T @ g has a one-row g
    torch.testing.assert_close(W.grad, torch.tensor([[2.], [0.5], [-1.]]).expand(3, 2))


# ---- the hot path and the range test read in the kernel's pass -------------------------

HOT_FILLS = [0.0, 0.5, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("layout", T.LAYOUTS, ids=["coo", "csr"])
@pytest.mark.parametrize("fill", HOT_FILLS)
def test_hot_path_product_is_the_routes(fill, layout):
    """The fast handlers of `@`, matmul, mv and mm on a plain matrix call the
    op the route calls: the same bits, equal to dense (inf/-inf/nan fills
    included), and None for what they leave to the route."""
    from torch_sparsefill.functions import routing as _routing
    from torch_sparsefill.functions.linalg import products as _products
    A = T.with_fill(_random(9, 6, 0.0, layout, seed=5), fill)
    D = T.dense_of(A)
    x, B = _randn(6, seed=2), _randn(6, 3, seed=3)
    x[1] = 0.0  # inf * 0 in the dense sum
    for func, b, want in ((torch.Tensor.__matmul__, x, D @ x), (torch.matmul, B, D @ B),
                          (torch.mv, x, D @ x), (torch.Tensor.mm, B, D @ B)):
        got = _routing.FAST[func]((A, b))
        assert got is not None, func
        torch.testing.assert_close(got, want, equal_nan=True)
        route = _products._matmul(A, b)
        assert torch.equal(got.isnan(), route.isnan()) and torch.equal(got.nan_to_num(), route.nan_to_num())
    fast_mv = _routing.FAST[torch.mv]
    assert fast_mv((A, B)) is None  # mv of a matrix: the route raises
    assert fast_mv((A, x[:5])) is None  # a size mismatch: the route raises
    assert fast_mv((A, x.float())) is None  # a dtype mismatch: the route raises
    assert fast_mv((A, torch.nn.Parameter(x))) is None  # a subclass
    assert _routing.FAST[torch.mm]((A, x)) is None
    full = sf.to_sparse(torch.full((3, 2), 7.0, dtype=torch.float64), fill_value=fill)
    full = full.to_sparse(layout=layout)
    assert full._nnz() == 6
    assert fast_mv((full, x[:2])) is None  # fully stored: the route's fill of 0
    with pytest.raises(RuntimeError, match="size mismatch"):
        torch.mv(A, x[:5])


def _fell_back(args):
    return "fell back"


@pytest.mark.cpu_only("the C handler serves CPU operands")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
@pytest.mark.parametrize("fill", HOT_FILLS)
def test_hot_product_in_c_is_the_op(fill, dtype):
    """The C fast handler (_C.hot_product) serves a plain CSR matrix times a
    vector or a matrix itself (its fallback is never called) with the bits
    of the op the route calls, equal to dense, inf/-inf/nan fills included;
    a vector's result is 1-D without a reshape around the op."""
    from torch_sparsefill import _C
    from torch_sparsefill.functions.linalg import products as _products
    A = T.with_fill(_random(9, 6, 0.0, torch.sparse_csr, seed=5, dtype=dtype), fill)
    D = T.dense_of(A)
    x, B = _randn(6, seed=2, dtype=dtype), _randn(6, 3, seed=3, dtype=dtype)
    x[1] = 0.0  # inf * 0 in the dense sum
    crow, col, values = _products._csr(A)
    ops = torch.ops.sparsefill
    for vector, matrix in ((True, True), (True, False), (False, True)):
        handler = _C.hot_product(_fell_back, vector, matrix)
        for b in ((x,) if vector else ()) + ((B,) if matrix else ()):
            got = handler((A, b))
            assert isinstance(got, torch.Tensor) and got.dtype == dtype, (vector, matrix, b.dim())
            op = ops.spmm(crow, col, values, A._sf_fill, b if b.dim() == 2 else b.unsqueeze(1), 6)
            op = op if b.dim() == 2 else op.squeeze(1)
            assert got.shape == op.shape
            assert torch.equal(got.isnan(), op.isnan()) and torch.equal(got.nan_to_num(), op.nan_to_num())
            torch.testing.assert_close(got.double(), (D.double() @ b.double()).to(dtype).double(),
                                       equal_nan=True, **({} if dtype != torch.bfloat16 else
                                                          dict(atol=0.1, rtol=0.05)))


@pytest.mark.cpu_only("the C handler serves CPU operands")
def test_hot_product_in_c_leaves_the_rest_to_its_fallback():
    """What the C handler does not serve goes to its fallback (the Python
    handler, then the route): COO, gradients on any component or on b, a
    tensor carrying a cache, a subclass, wrong shapes or dtypes, a fully
    stored matrix, a dispatch mode, keywords-free calls of other arity."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch_sparsefill import _C
    handler = _C.hot_product(_fell_back, True, True)
    A = T.with_fill(_random(9, 6, 0.0, torch.sparse_csr, seed=5), 0.5)
    x, B = _randn(6, seed=2), _randn(6, 3, seed=3)
    assert isinstance(handler((A, x)), torch.Tensor)
    coo = T.with_fill(_random(9, 6, 0.0, seed=5), 0.5)
    grad_values = T.with_fill(A, 0.5)
    grad_values._sf_values = grad_values._sf_values.clone().requires_grad_()
    grad_fill = T.with_fill(A, torch.tensor(0.5, dtype=torch.float64, requires_grad=True))
    cached = T.with_fill(A, 0.5)
    cached.note = 1
    full = sf.to_sparse(torch.full((3, 2), 7.0, dtype=torch.float64), fill_value=0.5)
    full = full.to_sparse(layout=torch.sparse_csr)
    for args in ((coo, x), (grad_values, x), (grad_fill, x), (cached, x),
                 (A, x.clone().requires_grad_()), (A, torch.nn.Parameter(x)), (A, x[:5]),
                 (A, x.float()), (A, torch.randn(6, 3, 2, dtype=torch.float64)),
                 (A, x.to_sparse()), (full, x[:2]), (A,), (A, x, x), (x, A)):
        assert handler(args) == "fell back", args
    assert _C.hot_product(_fell_back, False, True)((A, x)) == "fell back"
    assert _C.hot_product(_fell_back, True, False)((A, B)) == "fell back"

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    with Mode():
        assert handler((A, x)) == "fell back"
    with pytest.raises(TypeError, match="hot_product"):
        _C.hot_product(_fell_back, 1, True)


@pytest.mark.cpu_only("CPU thread counts")
@pytest.mark.parametrize("case", ["finite", "huge value in the last rows", "nan value",
                                  "inf fill"])
def test_range_test_over_row_ranges_is_exact_with_1_and_2_threads(case):
    """The fast path's range facts are read in each row range's own pass and
    combined: a value that breaks the test in the last range (another
    thread's) still sends the product to the exact path, and results are
    bit-identical with 1 and 2 threads."""
    m, k = 3000, 400
    g = T.rng(8)
    rows = torch.arange(m).repeat_interleave(12)
    cols = torch.randint(0, k, (m * 12,), generator=g)
    values = torch.randn(m * 12, generator=g, dtype=torch.float64)
    fill = -0.5
    scale_x = 1.0
    if case == "huge value in the last rows":
        # Only max|v| fails the test (v - f overflows; 2 max|f| and k max|x|
        # are small): a range that lost it would give inf where dense is finite.
        big = torch.finfo(torch.float64).max
        values[-1] = 0.95 * big
        fill = -0.1 * big
        scale_x = 1e-10
    elif case == "nan value":
        values[-1] = math.nan
    elif case == "inf fill":
        fill = math.inf
    A = sf.sparse_coo_tensor(torch.stack([rows, cols]), values, (m, k), fill_value=fill).coalesce()
    A = A.to_sparse_csr()
    D = A.to_dense()
    x, B = _randn(k, seed=4) * scale_x, _randn(k, 3, seed=5) * scale_x
    with_threads = torch.get_num_threads()
    outs = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            outs.append((A @ x, A @ B))
    finally:
        torch.set_num_threads(with_threads)
    for (y1, c1), (y2, c2) in [outs]:
        assert torch.equal(y1.nan_to_num(), y2.nan_to_num()) and torch.equal(y1.isnan(), y2.isnan())
        assert torch.equal(c1.nan_to_num(), c2.nan_to_num()) and torch.equal(c1.isnan(), c2.isnan())
    for got, want in ((outs[0][0], D @ x), (outs[0][1], D @ B)):
        if case == "huge value in the last rows":
            assert torch.isfinite(want).all()
            scale = want.abs().max()
            torch.testing.assert_close(got / scale, want / scale)
        else:
            torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.cpu_only("CPU thread counts")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_spgemm_with_far_more_products_than_elements_grows_its_buffers(dtype):
    """Rows whose products collide much (about 30 products per element of
    the result): the one-pass SpGEMM's first buffers are too small and
    grow; the result is dense's, with 1 and 2 threads the same bits."""
    A = _random(300, 200, 0.0, torch.sparse_csr, density=0.4, seed=21, dtype=dtype)
    B = _random(200, 250, 0.0, torch.sparse_csr, density=0.4, seed=22, dtype=dtype)
    products = int(B.crow_indices().diff()[A.col_indices()].sum())
    assert products > 4 * (A._nnz() + B._nnz()) * 2  # beyond the first buffers' size
    with_threads = torch.get_num_threads()
    outs = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            outs.append(A @ B)
    finally:
        torch.set_num_threads(with_threads)
    one, two = outs
    assert one.layout == torch.sparse_csr and one._nnz() < products
    for part in ("crow_indices", "col_indices", "values"):
        assert torch.equal(getattr(one, part)(), getattr(two, part)()), part
    _close(one.to_dense().double(), A.to_dense().double() @ B.to_dense().double(),
           **({} if dtype == torch.float64 else dict(atol=1e-4, rtol=1e-4)))


@pytest.mark.cpu_only("CPU thread counts")
@pytest.mark.parametrize("layout", T.LAYOUTS, ids=["coo", "csr"])
def test_spgemm_rows_split_over_threads_are_bit_identical(layout):
    """The fill-0 SpGEMM at a size its row ranges run on two threads (rows of
    about one column per word of the bitmap): the same pattern and bits as on
    one thread, sorted within rows, equal to dense."""
    A = _random(2500, 2500, 0.0, layout, density=0.003, seed=11)
    B = _random(2500, 2500, 0.0, layout, density=0.003, seed=12)
    with_threads = torch.get_num_threads()
    outs = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            outs.append((A @ B).to_sparse_csr())
    finally:
        torch.set_num_threads(with_threads)
    one, two = outs
    for part in ("crow_indices", "col_indices", "values"):
        assert torch.equal(getattr(one, part)(), getattr(two, part)()), part
    crow, col = one.crow_indices(), one.col_indices()
    rows = torch.repeat_interleave(torch.arange(2500), crow.diff())
    assert bool((rows[1:] > rows[:-1]).logical_or(col[1:] > col[:-1]).all())  # sorted
    _close(one.to_dense(), A.to_dense() @ B.to_dense())
