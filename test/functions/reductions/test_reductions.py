"""Softmax, log_softmax and reductions with a fill (RFC.md#reductions-and-softmax): every result
equals the dense computation, gradients included (fill gradients too)."""
import math

import pytest
import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

import torch_sparsefill as sf
from sf_testing import (CASES, LAYOUTS, MATRICES, assert_matches_dense, case_id, dense, leaves,
                        on_test_device, random_tensor, rng)


def tied(A):
    """Values and fill rounded, so that maxima tie (NaN fills stay)."""
    f = A._fill_value()
    return A._with(A._values().round(), torch.where(f.isnan(), f, f.round()))


def dims_of(A):
    out = [None, 0, 1, (0, 1), -1]
    if A.dense_dim():
        out += [2, (0, 2), (1, 2), (0, 1, 2)]
    return out


# ---- softmax --------------------------------------------------------------------

SOFTMAX_FUNCS = [torch.softmax, torch.log_softmax, F.softmax, F.log_softmax,
                 lambda x, d: x.softmax(d), lambda x, d: x.log_softmax(d)]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_softmax_dense_equivalence(case, layout):
    A = random_tensor(case.pattern, case.fill, layout)
    D = A.to_dense()
    for fn in SOFTMAX_FUNCS:
        for d in range(D.dim()):
            out = fn(A, d)
            assert isinstance(out, sf.SparseFillTensor) and out.layout == layout
            assert out.nse() == A.coalesce().nse() if layout == torch.sparse_coo else \
                out.nse() == A.nse()
            assert_matches_dense(out, fn(D, d))


def test_softmax_all_equal_values_and_fill():
    A = sf.sparse_coo_tensor([[0, 0, 1], [0, 2, 1]], [0.5, 0.5, 0.5], (3, 4), fill_value=0.5)
    for d in (0, 1):
        assert_matches_dense(torch.softmax(A, d), torch.softmax(A.to_dense(), d))


def test_softmax_rfc_point5_example():
    A = sf.sparse_coo_tensor([[0, 3]], [[.11, .12], [.31, .32]], (4, 2))
    S = torch.softmax(A, 0)
    torch.testing.assert_close(S.values(), torch.tensor([[0.2492, 0.2503], [0.3044, 0.3057]]),
                               atol=5e-5, rtol=0)
    torch.testing.assert_close(S.fill_value(), torch.tensor([0.2232, 0.2220]), atol=5e-5, rtol=0)
    assert S._fill_value().shape == (2,)  # constant over the sparse dim: the dense-part form


def test_softmax_per_row_fill_shape():
    A = random_tensor("random", 1.5, size=(5, 7))
    S = torch.softmax(A, 1)
    assert S._fill_value().shape == (5, 1)
    assert torch.softmax(A, 0)._fill_value().shape == (1, 7)
    H = random_tensor("hybrid", 1.5, size=(5, 7))
    assert torch.softmax(H, 1)._fill_value().shape == (5, 1, 3)
    assert torch.softmax(H, 2)._fill_value().shape == (3,)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_minus_inf_fill_reproduces_torch_sparse_softmax(layout, dim):
    g = rng(3)
    mask = torch.rand(6, 8, generator=g) < 0.4
    mask[:, 0] = mask[0, :] = True  # no empty slice along either dim
    N = (torch.randn(6, 8, generator=g, dtype=torch.float64) * mask).to_sparse().coalesce()
    N = torch.sparse_coo_tensor(N.indices(), N.values() + 3, N.shape, check_invariants=True).coalesce()
    A = sf.to_sparse(N, fill_value=-math.inf, layout=layout)
    for ours, theirs in ((torch.sparse.softmax, torch.sparse.softmax),
                         (torch.sparse.log_softmax, torch.sparse.log_softmax)):
        out = ours(A, dim)
        expected = theirs(N, dim).coalesce()
        assert torch.equal(out.to_sparse_coo()._coo_indices(), expected.indices())
        torch.testing.assert_close(out.to_sparse_coo().values(), expected.values())
        if ours is torch.sparse.softmax:
            assert torch.equal(out._fill_value(), torch.zeros_like(out._fill_value()))


def test_softmax_dtype_argument():
    A = random_tensor("random", 0.5, dtype=torch.float32)
    out = torch.softmax(A, 1, dtype=torch.float64)
    assert out.dtype == torch.float64
    assert_matches_dense(out, torch.softmax(A.to_dense(), 1, dtype=torch.float64))
    with pytest.raises(TypeError, match="needs dim"):
        F.softmax(A)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("pattern", ["random", "hybrid", "full", "empty"])
def test_softmax_gradcheck(pattern, layout):
    size = (3, 4) if pattern == "hybrid" else (4, 6)
    A, v, f = leaves(random_tensor(pattern, 0.7, layout, seed=5, size=size), coalesce=False)
    for fn in (torch.softmax, torch.log_softmax):
        for d in range(A.dim()):
            assert torch.autograd.gradcheck(lambda v, f: fn(A._with(v, f), d).to_dense(), (v, f))
        if pattern == "random":  # second derivatives (the composite backward)
            assert torch.autograd.gradgradcheck(
                lambda v, f: fn(A._with(v, f), 0).to_dense(), (v, f))
    # a per-slice input fill (softmax of a softmax) and gradients through it
    assert torch.autograd.gradcheck(
        lambda v, f: torch.log_softmax(torch.softmax(A._with(v, f), 1) * 3, 1).to_dense(), (v, f))


def test_softmax_gradients_equal_dense():
    A = random_tensor("random", -0.4, seed=9).coalesce().detach().requires_grad_()
    W = torch.randn(A.shape, dtype=torch.float64)
    for d in (0, 1):
        A.grad = None
        (torch.softmax(A, d).to_dense() * W).sum().backward()
        D = A.to_dense().detach().requires_grad_()
        (torch.softmax(D, d) * W).sum().backward()
        idx = A.indices()
        stored = torch.zeros(A.shape, dtype=torch.bool)
        stored[idx[0], idx[1]] = True
        torch.testing.assert_close(A._values().grad, D.grad[idx[0], idx[1]])
        torch.testing.assert_close(A._fill_value().grad, D.grad[~stored].sum())


# ---- reductions ------------------------------------------------------------------

REDUCTIONS = {
    "sum": lambda x, d, k: torch.sum(x, d, k) if d is not None else torch.sum(x),
    "mean": lambda x, d, k: torch.mean(x, d, k) if d is not None else x.mean(),
    "amax": lambda x, d, k: torch.amax(x, d if d is not None else (), k),
    "amin": lambda x, d, k: x.amin(d if d is not None else (), k),
    "logsumexp": lambda x, d, k: torch.logsumexp(x, d if d is not None else tuple(range(x.dim())),
                                                 k),
    "norm1": lambda x, d, k: torch.norm(x, 1, d, k),
    "norm2": lambda x, d, k: x.norm(2, d, k),
    "norminf": lambda x, d, k: torch.norm(x, math.inf, d, k),
    "var": lambda x, d, k: torch.var(x, d, keepdim=k),
    "std0": lambda x, d, k: torch.std(x, d, correction=0, keepdim=k),
    "all": lambda x, d, k: torch.all(x, d, k) if isinstance(d, int) else
    (torch.all(x) if d is None else x.all(d, keepdim=k)),
    "any": lambda x, d, k: x.any(d, k) if isinstance(d, int) else
    (x.any() if d is None else torch.any(x, d, keepdim=k)),
    "count_nonzero": lambda x, d, k: torch.count_nonzero(x, d),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_reductions_dense_equivalence(case, layout):
    A = random_tensor(case.pattern, case.fill, layout)
    D = A.to_dense()
    for name, fn in REDUCTIONS.items():
        for d in dims_of(A):
            for keepdim in (False, True):
                expected = fn(D, d, keepdim)
                out = fn(A, d, keepdim)
                reduced = set(range(D.dim())) if d is None else \
                    {e % D.dim() for e in ([d] if isinstance(d, int) else d)}
                no_sparse_left = {0, 1} <= reduced
                if no_sparse_left and not keepdim:
                    assert not isinstance(out, sf.SparseFillTensor), (name, d)
                assert_matches_dense(out, expected)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_prod_max_min_dense_equivalence(case, layout):
    A = random_tensor(case.pattern, case.fill, layout)
    D = A.to_dense()
    assert_matches_dense(torch.prod(A), torch.prod(D))
    T = tied(A)
    E = T.to_dense()
    for d in range(D.dim()):
        for keepdim in (False, True):
            assert_matches_dense(A.prod(d, keepdim), D.prod(d, keepdim))
            for fn in (torch.max, torch.min):
                values, indices = fn(T, d, keepdim)
                ev, ei = fn(E, d, keepdim)
                assert_matches_dense(values, ev)
                assert torch.equal(dense(indices), ei), (fn, d, keepdim)
    assert_matches_dense(torch.max(T), torch.max(E))
    assert_matches_dense(T.min(), E.min())


def test_max_first_occurrence_counts_unspecified_positions():
    # row 0: stored 5 at column 2, fill 5 first at column 0; row 1: 9 at column 1
    A = sf.sparse_csr_tensor([0, 1, 2], [2, 1], [5.0, 9.0], (2, 4), fill_value=5.0)
    values, indices = torch.max(A, 1)
    assert torch.equal(dense(indices), torch.tensor([0, 1]))
    assert torch.equal(dense(values), torch.tensor([5.0, 9.0]))


def test_reduction_dtype_arguments_and_integers():
    A = random_tensor("random", 2.0, dtype=torch.float32)
    assert_matches_dense(torch.sum(A, 1, dtype=torch.float64), torch.sum(A.to_dense(), 1, dtype=torch.float64))
    assert_matches_dense(A.mean(0, dtype=torch.float64), A.to_dense().mean(0, dtype=torch.float64))
    I = A._with((A._values() * 4).round().to(torch.int64), torch.tensor(3))
    assert_matches_dense(I.sum(1), I.to_dense().sum(1))
    assert_matches_dense(I.sum(), I.to_dense().sum())
    assert_matches_dense(I.amax(0), I.to_dense().amax(0))
    assert_matches_dense(torch.max(I, 1).values, torch.max(I.to_dense(), 1).values)
    B = I > 0
    assert_matches_dense(B.sum(0), B.to_dense().sum(0))
    assert_matches_dense(B.any(1), B.to_dense().any(1))
    assert_matches_dense(B.all(), B.to_dense().all())
    with pytest.raises(RuntimeError, match="could not infer output dtype"):
        I.mean()


def test_reduction_results_keep_sparse_dims_with_reduced_fill():
    A = sf.sparse_coo_tensor([[0, 2], [1, 1]], [3.0, 4.0], (3, 4), fill_value=1.5)
    S = A.sum(1)
    assert isinstance(S, sf.SparseFillTensor) and S.nse() == 2
    assert S.fill_value() == 6.0  # n * fill for a slice with nothing stored
    P = A.prod(0)
    assert P.fill_value() == 1.5 ** 3
    K = A.sum(1, keepdim=True)
    assert K.shape == (3, 1) and K.sparse_dim() == 2
    C = A.to_sparse_csr().sum(1, keepdim=True)
    assert C.layout == torch.sparse_csr
    assert_matches_dense(C, A.to_dense().sum(1, keepdim=True))


def test_reductions_of_per_slice_fills():
    A = random_tensor("random", 0.5, size=(5, 7))
    S = torch.softmax(A, 1)  # per-row fill
    D = S.to_dense()
    assert_matches_dense(S.sum(1), torch.ones(5, dtype=torch.float64))
    assert_matches_dense(S.sum(0), D.sum(0))          # the fill varies along dim 0: the linear path
    assert_matches_dense(S.sum(), D.sum())
    assert_matches_dense(S.mean(0, keepdim=True), D.mean(0, keepdim=True))
    assert_matches_dense(S.amax(1), D.amax(1))
    assert_matches_dense(S.logsumexp(1), D.logsumexp(1))
    with pytest.raises(NotImplementedError, match="per-slice fill"):
        S.amax(0)
    A, v, f = leaves(random_tensor("random", 0.3, torch.sparse_coo, seed=5, size=(4, 6)),
                     coalesce=False)
    assert torch.autograd.gradcheck(lambda v, f: torch.softmax(A._with(v, f), 1).sum(0).to_dense(),
                                    (v, f))
    assert torch.autograd.gradcheck(lambda v, f: torch.log_softmax(A._with(v, f), 0).var(0)
                                    .to_dense(), (v, f))


GRAD_REDUCTIONS = ["sum", "mean", "amax", "amin", "logsumexp", "norm1", "norm2", "norminf", "var",
                   "std0"]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("pattern", ["random", "hybrid", "full", "empty"])
def test_reductions_gradcheck(pattern, layout):
    size = (3, 4) if pattern in ("hybrid", "full") else (4, 6)
    A, v, f = leaves(random_tensor(pattern, 0.7, layout, seed=5, size=size), coalesce=False)
    dims = [None, 0, 1] + ([(0, 2), 2] if pattern == "hybrid" else [])
    for name in GRAD_REDUCTIONS:
        fn = REDUCTIONS[name]
        for d in dims:
            assert torch.autograd.gradcheck(lambda v, f: dense(fn(A._with(v, f), d, False)),
                                            (v, f)), (name, d)
    for d in (None, 0, 1):
        assert torch.autograd.gradcheck(
            lambda v, f: dense(torch.prod(A._with(v, f), d) if d is not None else
                               torch.prod(A._with(v, f))), (v, f))
    for fn in (torch.max, torch.min):
        assert torch.autograd.gradcheck(lambda v, f: dense(fn(A._with(v, f), 1).values), (v, f))
    if pattern == "random":
        for fn in (lambda X: X.sum(0), lambda X: X.var(1), lambda X: X.logsumexp(0)):
            assert torch.autograd.gradgradcheck(lambda v, f: dense(fn(A._with(v, f))), (v, f))


def test_prod_gradient_with_zeros():
    A = sf.sparse_coo_tensor([[0, 0, 1, 2, 2], [0, 1, 0, 0, 2]], [0.0, 2.0, 0.0, 0.0, 3.0],
                             (3, 3), fill_value=0.0, dtype=torch.float64)
    for fill in (0.0, 1.5):
        A = A._with(A._values(), torch.tensor(fill, dtype=torch.float64))
        for d in (None, 0, 1):
            X = A.detach().requires_grad_()
            out = X.prod() if d is None else X.prod(d)
            dense(out).sum().backward()
            Dn = A.to_dense().requires_grad_()
            (Dn.prod() if d is None else Dn.prod(d)).sum().backward()
            idx = A.coalesce().indices()
            stored = torch.zeros(3, 3, dtype=torch.bool)
            stored[idx[0], idx[1]] = True
            torch.testing.assert_close(X._values().grad, Dn.grad[idx[0], idx[1]])
            torch.testing.assert_close(X._fill_value().grad, Dn.grad[~stored].sum())


def test_amax_ties_split_the_gradient_like_torch():
    A = sf.sparse_coo_tensor([[0, 1, 1], [0, 0, 2]], [2.0, 2.0, -1.0], (2, 3), fill_value=2.0,
                             dtype=torch.float64)
    for red in (lambda x: x.amax(), lambda x: x.amax(1), lambda x: x.amax(0), lambda x: torch.max(x)):
        X = A.detach().requires_grad_()
        dense(red(X)).sum().backward()
        Dn = A.to_dense().requires_grad_()
        red(Dn).sum().backward()
        idx = A._indices()
        stored = torch.zeros(2, 3, dtype=torch.bool)
        stored[idx[0], idx[1]] = True
        torch.testing.assert_close(X._values().grad, Dn.grad[idx[0], idx[1]])
        torch.testing.assert_close(X._fill_value().grad, Dn.grad[~stored].sum())


def test_max_dim_gradient_goes_to_the_returned_index():
    A = sf.sparse_csr_tensor([0, 1, 2], [2, 1], [5.0, 9.0], (2, 4), fill_value=5.0,
                             dtype=torch.float64)
    X = A.detach().requires_grad_()
    torch.max(X, 1).values.to_dense().sum().backward()
    Dn = A.to_dense().requires_grad_()
    torch.max(Dn, 1).values.sum().backward()
    assert torch.equal(X._values().grad, torch.tensor([0.0, 1.0], dtype=torch.float64))
    assert X._fill_value().grad == Dn.grad[0, 0] == 1.0


def test_reduction_errors():
    A = random_tensor("random", 1.0)
    with pytest.raises(IndexError):
        A.sum(5)
    with pytest.raises(RuntimeError, match="multiple times"):
        A.sum((0, 0))
    with pytest.raises(NotImplementedError, match="norm"):
        torch.norm(A, "nuc")


# ---- real matrices ---------------------------------------------------------------------

def _real_matrices():
    paths = sorted(MATRICES.glob("*.mtx"), key=lambda p: p.stat().st_size)  # smallest first
    assert paths, f"no .mtx matrices under {MATRICES}"
    return paths


def _load_mtx(path, limit=60000):
    import scipy.io

    m = scipy.io.mmread(str(path)).tocsr()
    if m.nnz > limit:  # keep the test quick: the leading rows
        rows = int(m.indptr.searchsorted(limit))
        m = m[:max(rows, 1)]
    return m


@pytest.mark.parametrize("path", _real_matrices()[:4], ids=lambda p: p.stem)
def test_real_matrices(path):
    m = _load_mtx(path)
    for fill in (0.0, -1.0, 2.5):
        A = on_test_device(sf.from_scipy(m, fill_value=fill, layout=torch.sparse_csr,
                                         dtype=torch.float64))
        D = A.to_dense()
        for d in (0, 1):
            assert_matches_dense(torch.softmax(A, d), torch.softmax(D, d))
            assert_matches_dense(A.sum(d), D.sum(d))
            assert_matches_dense(A.amax(d), D.amax(d))
            assert_matches_dense(A.var(d), D.var(d))
        assert_matches_dense(A.mean(), D.mean())
        assert_matches_dense(torch.logsumexp(A, (0, 1)), torch.logsumexp(D, (0, 1)))


@pytest.mark.cpu_only("CPU thread counts")
def test_one_thread_and_two_agree():
    A = random_tensor("random", 0.5, torch.sparse_csr, size=(3000, 200), seed=2)  # several chunks
    old = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append([dense(torch.softmax(A, 1)), dense(A.sum(1)), dense(A.amax(0)),
                            dense(torch.log_softmax(A, 0)), dense(A.sum(0)),
                            dense(A.to_sparse_coo().mean(0))])
    finally:
        torch.set_num_threads(old)
    for x, y in zip(*results):
        assert torch.equal(x, y)


def test_half_precision_computes_in_float():
    A = random_tensor("random", 0.5, dtype=torch.float16)
    D = A.to_dense().float()
    assert_matches_dense(torch.softmax(A, 1), torch.softmax(D, 1).half(), atol=1e-3, rtol=1e-3)
    assert_matches_dense(A.sum(0), D.sum(0).half(), atol=1e-2, rtol=1e-3)
    assert_matches_dense(A.amax(1), D.amax(1).half())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reductions_compact_plan_for_many_empty_slices(layout):
    """Far more kept positions than stored elements: one segment per
    non-empty slice only (the compact plan)."""
    g = rng(0)
    for shape, dense_shape in (((1000, 3), ()), ((3, 1000), ()), ((400, 2), (2,))):
        idx = torch.stack([torch.randint(0, shape[0], (12,), generator=g),
                           torch.randint(0, shape[1], (12,), generator=g)])
        v = torch.randn((12,) + dense_shape, generator=g, dtype=torch.float64)
        A = sf.sparse_coo_tensor(idx, v, shape + dense_shape, fill_value=0.5).coalesce()
        A = A.to_sparse(layout=layout)
        D = A.to_dense()
        for dim in (0, 1):
            for keepdim in (False, True):
                for name in ("sum", "amax", "var", "logsumexp", "prod", "mean"):
                    assert_matches_dense(getattr(torch, name)(A, dim, keepdim=keepdim),
                          getattr(torch, name)(D, dim, keepdim=keepdim))
        B = A.to_sparse_coo()
        vv = B.values().detach().clone().requires_grad_()
        ff = B._fill_value().detach().clone().requires_grad_()
        # Fast mode: one random projection of the Jacobian instead of a
        # backward per output (1000 outputs made this test 50 s).
        assert torch.autograd.gradcheck(lambda vv, ff: dense(B._with(vv, ff).var(1)), (vv, ff),
                                        fast_mode=True)


@pytest.mark.parametrize("seg_ptr", [[0, 100, 5], [0, -3, 5]])
def test_seg_max_malformed_seg_ptr_with_coord_is_an_error(seg_ptr):
    # The coordinates of a segment that leaves [0, nse) are never read: the
    # segments check names the error.
    values = torch.randn(5, 1, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="invalid segments"):
        torch.ops.sparsefill.seg_max(values, torch.zeros(2, 1, dtype=torch.float64),
                                     torch.tensor(seg_ptr), torch.arange(5), 4, False, False)


@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_max_gradient_when_nothing_is_stored(layout):
    """Every maximum is the fill's: its gradient goes to the fill alone."""
    v = torch.zeros(0, requires_grad=True)
    f = torch.tensor(1.5, requires_grad=True)
    A = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), v, (3, 4), fill_value=f)
    A.to_sparse(layout=layout).max(1).values.sum().backward()
    assert f.grad.item() == 3.0 and v.grad.shape == (0,)


@pytest.mark.parametrize("fill", [0.5, math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("dims", [0, (0, 2), 1])
def test_sum_along_non_leading_kept_dims(fill, dims):
    # The slices lie across the stored order (kept dims not leading): the
    # counting pass + scatter-add path, against dense, with non-finite fills,
    # fully stored slices (no fill term there) and empty ones.
    g = torch.Generator().manual_seed(7)
    D = torch.randn(5, 4, 3, dtype=torch.float64, generator=g)
    keep = torch.rand(5, 4, 3, generator=g) < 0.5
    keep[:, 0, :] = True  # slices stored in full
    keep[:, 1, :] = False  # slices with nothing stored
    D = torch.where(keep, D, torch.tensor(fill, dtype=torch.float64))
    A = sf.to_sparse(D, fill_value=fill)
    for keepdim in (False, True):
        assert_matches_dense(A.sum(dims, keepdim=keepdim), D.sum(dims, keepdim=keepdim))
        assert_matches_dense(A.mean(dims, keepdim=keepdim), D.mean(dims, keepdim=keepdim))


def test_sum_along_columns_gradients():
    A = random_tensor("random", 0.5, torch.sparse_coo, size=(6, 5), seed=3)
    v = A._values().detach().requires_grad_()
    f = A._fill_value().detach().clone().requires_grad_()

    def column_sums(v, f):
        X = sf.sparse_coo_tensor(A._indices(), v, A.shape, fill_value=f)
        return X.sum(0).to_dense() * torch.arange(1., 6., dtype=torch.float64)

    assert torch.autograd.gradcheck(column_sums, (v, f))
    assert torch.autograd.gradgradcheck(column_sums, (v, f))


# ---- reductions by slot (slot_reduce: no reordering of the stored elements) -------

SLOT_REDUCTIONS = ("sum", "mean", "prod", "amax", "amin")


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("fill", [0.0, 0.5, math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_slot_reductions_along_non_leading_dims(layout, fill, dtype):
    """sum, mean, prod, amax, amin along dim 0 (the slots are the columns),
    with full columns (the fill never counts there), empty ones (the result's
    fill) and a dense part, against dense."""
    g = torch.Generator().manual_seed(11)
    for dense_shape in ((), (2,)):
        D = torch.randn((9, 6) + dense_shape, dtype=torch.float64, generator=g)
        keep = torch.rand(9, 6, generator=g) < 0.4
        keep[:, 0] = True
        keep[:, 1] = False
        mask = keep.reshape(keep.shape + (1,) * len(dense_shape))
        D = torch.where(mask, D, torch.tensor(fill, dtype=torch.float64)).to(dtype)
        A = sf.to_sparse(D, fill_value=fill, layout=layout, dense_dim=len(dense_shape))
        for name in SLOT_REDUCTIONS:
            for keepdim in (False, True):
                assert_matches_dense(getattr(A, name)(0, keepdim=keepdim), getattr(D, name)(0, keepdim=keepdim),
                      rtol=1e-5 if dtype == torch.float32 else None,
                      atol=1e-5 if dtype == torch.float32 else None)


@pytest.mark.parametrize("fill", [0.5, math.inf, math.nan])
def test_slot_reductions_of_batched_coo(fill):
    """A 3-D COO reduced along dim 1 or dims (0, 2): the kept dims are
    linearised into slots."""
    g = torch.Generator().manual_seed(5)
    D = torch.randn(3, 8, 4, dtype=torch.float64, generator=g)
    D = torch.where(torch.rand(3, 8, 4, generator=g) < 0.5, D, fill)
    A = sf.to_sparse(D, fill_value=fill)
    for name in SLOT_REDUCTIONS:
        for dims in (1, (0, 2), 0):
            if name == "prod" and isinstance(dims, tuple):
                continue  # torch's prod takes one dim
            assert_matches_dense(getattr(A, name)(dims), getattr(D, name)(dims))


def test_slot_reductions_one_thread_and_two_agree():
    """Three partials (210K stored; the partition depends on the sizes only): bit for
    bit the same on 1 and 2 threads, for every reduction."""
    A = random_tensor("random", 0.5, torch.sparse_coo, size=(6000, 100), seed=4,
                      dtype=torch.float32)
    A = A._with(A._values() * 0.01 + 1, A._fill_value())  # products stay finite
    old = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append([dense(getattr(A, name)(0)) for name in SLOT_REDUCTIONS])
    finally:
        torch.set_num_threads(old)
    for x, y in zip(*results):
        assert torch.equal(x, y)
    assert_matches_dense(results[0][0], A.to_dense().sum(0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("fill", [0.5, math.inf, -math.inf, math.nan])
def test_slot_sum_gradients_include_the_fill(fill, dim):
    """sum and mean by slot (dim 0: scattered slots; dim 1: sorted slots, the
    run pass): backward in differentiable ops (gradgradcheck), forward-mode
    too; the fill's gradient counts its unspecified elements, also where the
    fill is infinite or NaN (as dense autograd)."""
    A = random_tensor("random", fill, torch.sparse_coo, size=(7, 5), seed=8 + 2 * dim)
    v = A._values().detach().clone().requires_grad_()
    f = torch.tensor(0.25 if not math.isfinite(fill) else fill, dtype=torch.float64,
                     requires_grad=True)
    weights = torch.arange(1., A.shape[1 - dim] + 1, dtype=torch.float64)

    def reduced(v, f, name):
        X = sf.sparse_coo_tensor(A._indices(), v, A.shape, fill_value=f)
        return getattr(X, name)(dim).to_dense() * weights

    for name in ("sum", "mean"):
        assert torch.autograd.gradcheck(lambda v, f: reduced(v, f, name), (v, f))
        assert torch.autograd.gradgradcheck(lambda v, f: reduced(v, f, name), (v, f))
        # forward-mode AD itself (torch.func transforms take the segment ops)
        with fwAD.dual_level():
            tangent = fwAD.unpack_dual(reduced(
                fwAD.make_dual(v.detach(), torch.ones_like(v)),
                fwAD.make_dual(f.detach(), torch.ones_like(f)), name)).tangent
        dense_tangent = torch.func.jvp(
            lambda v, f: getattr(sf.sparse_coo_tensor(A._indices(), v, A.shape, fill_value=f)
                                 .to_dense(), name)(dim) * weights,
            (v.detach(), f.detach()), (torch.ones_like(v), torch.ones_like(f)))[1]
        assert_matches_dense(tangent, dense_tangent)
    # A non-finite fill: the gradients equal dense autograd's.
    fi = torch.tensor(fill, dtype=torch.float64, requires_grad=True)
    reduced(v, fi, "sum").sum().backward()
    fd = torch.tensor(fill, dtype=torch.float64, requires_grad=True)
    vd = v.detach().clone().requires_grad_()
    (sf.sparse_coo_tensor(A._indices(), vd, A.shape, fill_value=fd).to_dense().sum(dim)
     * weights).sum().backward()
    assert_matches_dense(fi.grad, fd.grad)
    assert_matches_dense(v.grad, vd.grad)


def test_tracked_prod_and_amax_take_the_segment_path():
    """slot_reduce differentiates sums only: a tracked prod or amax goes
    through seg_reduce / seg_max, with their gradients (fill included)."""
    A = random_tensor("random", 1.5, torch.sparse_coo, size=(6, 4), seed=9, domain="positive")
    v = A._values().detach().clone().requires_grad_()
    f = A._fill_value().detach().clone().requires_grad_()
    for name in ("prod", "amax", "amin"):
        def reduced(v, f):
            return getattr(sf.sparse_coo_tensor(A._indices(), v, A.shape, fill_value=f),
                           name)(0).to_dense()
        assert torch.autograd.gradcheck(reduced, (v, f))


def test_slot_reduce_rejects_bad_arguments():
    ops = torch.ops.sparsefill
    v = torch.randn(3, 1, dtype=torch.float64)
    f = torch.zeros(1, 1, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="reduce must be"):
        ops.slot_reduce(v, torch.tensor([0, 1, 0]), f, 2, 4, "median")
    with pytest.raises(RuntimeError, match="slot must be 1-D"):
        ops.slot_reduce(v, torch.tensor([0, 1]), f, 2, 4, "sum")
    with pytest.raises(RuntimeError, match="fill must be"):
        ops.slot_reduce(v, torch.tensor([0, 1, 0]), torch.zeros(2, 1, dtype=torch.float64), 2,
                        4, "sum")
    with pytest.raises(RuntimeError, match="out of range|outside"):
        ops.slot_reduce(v, torch.tensor([0, 2, 0]), f, 2, 4, "sum")
    with pytest.raises(RuntimeError, match="coalesced"):
        ops.slot_reduce(v, torch.tensor([0, 0, 0]), f, 2, 2, "sum")  # 3 rows, slices of 2
    with pytest.raises(RuntimeError, match="non-negative"):
        ops.slot_reduce(v, torch.tensor([0, 1, 0]), f, -1, 4, "sum")
    with pytest.raises(RuntimeError, match="does not support dtype"):
        ops.slot_reduce(v.long(), torch.tensor([0, 1, 0]), f.long(), 2, 4, "prod")


@pytest.mark.parametrize("fill", [0.0, 0.5, math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("layout", LAYOUTS, ids=str)
def test_float32_softmax_matches_dense(layout, fill):
    """The float32 kernel of one value per element (its own vectorized exp):
    values spread wide enough that some exponentials underflow, NaN and
    infinite values among them, against torch's dense softmax."""
    g = torch.Generator().manual_seed(3)
    D = torch.randn(40, 30, generator=g) * 40
    D[3, 4], D[5, 6], D[7, 8] = math.nan, math.inf, -math.inf
    D[9, :] = -math.inf  # a row of -inf values
    keep = torch.rand(40, 30, generator=g) < 0.6
    keep[:, 2] = True
    keep[11, :] = True  # a row stored in full
    D = torch.where(keep, D, torch.tensor(fill))
    A = sf.to_sparse(D, fill_value=fill, layout=layout)
    for d in (0, 1):
        for fn in (torch.softmax, torch.log_softmax):
            assert_matches_dense(fn(A, d), fn(D, d), rtol=1e-5, atol=1e-6)


# ---- sorted slots (kept dims leading: slot_reduce in one pass of whole runs) ------

@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("fill", [0.0, 0.5, math.inf, -math.inf, math.nan])
def test_slot_reductions_along_trailing_dims_of_coo(fill, dtype):
    """COO reduced along trailing sparse dims (the kept dims lead, so the slots
    come sorted): rows stored in full (the fill never counts there), empty
    rows, a dense part, one or two kept dims, against dense."""
    g = torch.Generator().manual_seed(13)
    for shape, dims in (((9, 6), 1), ((4, 3, 5), 2), ((4, 3, 5), (1, 2))):
        for dense_shape in ((), (2,)):
            D = torch.randn(shape + dense_shape, dtype=torch.float64, generator=g)
            keep = torch.rand(shape, generator=g) < 0.4
            keep[0] = True
            keep[1] = False
            keep[-1] = False  # empty slots after the last run, too
            mask = keep.reshape(keep.shape + (1,) * len(dense_shape))
            D = torch.where(mask, D, torch.tensor(fill, dtype=torch.float64)).to(dtype)
            D[0, 1] = math.nan  # a stored NaN (row 0 is stored in full): it wins max and min
            A = sf.to_sparse(D, fill_value=fill, dense_dim=len(dense_shape))
            for name in SLOT_REDUCTIONS:
                if name == "prod" and isinstance(dims, tuple):
                    continue  # torch's prod takes one dim
                for keepdim in (False, True):
                    assert_matches_dense(getattr(A, name)(dims, keepdim=keepdim),
                          getattr(D, name)(dims, keepdim=keepdim),
                          rtol=1e-5 if dtype == torch.float32 else None,
                          atol=1e-5 if dtype == torch.float32 else None)


def test_sorted_slots_one_thread_and_two_agree():
    """Sorted slots are cut into one range per thread (300K stored): bit for bit
    the same on 1 and 2 threads, every reduction, integers too."""
    A = random_tensor("random", 0.5, torch.sparse_coo, size=(3000, 200), seed=6,
                      dtype=torch.float32)
    A = A._with(A._values() * 0.01 + 1, A._fill_value())  # products stay finite
    I = A._with((A._values() * 100).long(), torch.tensor(3))
    old = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append([dense(getattr(A, name)(1)) for name in SLOT_REDUCTIONS] +
                           [dense(I.sum(1)), dense(I.amax(1))])
    finally:
        torch.set_num_threads(old)
    for x, y in zip(*results):
        assert torch.equal(x, y)
    assert_matches_dense(results[0][0], A.to_dense().sum(1), rtol=1e-5, atol=1e-4)
    assert_matches_dense(results[0][-2], I.to_dense().sum(1))


def test_slot_reduce_any_slot_order():
    """slot_reduce takes the slots in any order: sorted ones in one pass of
    runs, others through per-part partials; both give the dense sums (values
    that add exactly, so any order gives the same bits), and both name bad
    slots."""
    ops = torch.ops.sparsefill
    g = torch.Generator().manual_seed(2)
    slot = torch.sort(torch.randint(0, 500, (100_000,), generator=g)).values
    slot = slot[torch.cat([torch.ones(1, dtype=torch.bool), slot[1:] != slot[:-1]]) |
                (torch.rand(slot.shape, generator=g) < 0.9)]
    values = torch.randint(-8, 8, (slot.shape[0], 1), generator=g).double()
    fill = torch.tensor([[0.5]], dtype=torch.float64)
    n = 1000
    expected = torch.zeros(600, 1, dtype=torch.float64).index_add_(0, slot, values)
    counts = torch.bincount(slot, minlength=600)
    expected += (n - counts).unsqueeze(1) * 0.5
    perm = torch.randperm(slot.shape[0], generator=g)
    for s, v in ((slot, values), (slot[perm], values[perm])):
        for threads in (1, 2):
            old = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                out, count = ops.slot_reduce(v, s, fill, 600, n, "sum")
            finally:
                torch.set_num_threads(old)
            assert torch.equal(out, expected) and torch.equal(count, counts)
    bad = slot.clone()
    bad[-1] = 600
    with pytest.raises(RuntimeError, match="out of range|outside"):
        ops.slot_reduce(values, bad, fill, 600, n, "sum")
    with pytest.raises(RuntimeError, match="coalesced"):  # more rows than a slice holds
        ops.slot_reduce(values, slot, fill, 600, 3, "sum")


# ---- softmax by slot (kept dims not leading: slot_softmax in stored order) --------

def _sparsefill_ops(fn):
    """The sparsefill ops that fn() calls (below autograd)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.namespace == "sparsefill":
                seen.add(func._schema.name.split("::")[1])
            return func(*args, **(kwargs or {}))
    seen = set()
    with Recorder():
        fn()
    return seen


def _columns_case(fill, dtype, dense_shape=(), seed=21, size=(9, 6)):
    """size with a full column 0, an empty column 1, stored NaN, inf, -inf and
    a column of -inf values among random ones; every unstored element the fill."""
    g = torch.Generator().manual_seed(seed)
    D = torch.randn(size + dense_shape, dtype=torch.float64, generator=g) * 3
    keep = torch.rand(size, generator=g) < 0.5
    keep[:, 0], keep[:, 1] = True, False
    keep[0, 2] = keep[1, 3] = keep[2, 4] = keep[3, 5] = True
    D[0, 2], D[1, 3], D[2, 4] = math.nan, math.inf, -math.inf
    D[:, 5] = -math.inf
    mask = keep.reshape(keep.shape + (1,) * len(dense_shape))
    D = torch.where(mask, D, torch.tensor(fill, dtype=torch.float64)).to(dtype)
    return D, sf.to_sparse(D, fill_value=fill, dense_dim=len(dense_shape))


@pytest.mark.cpu_only("slot_softmax is the CPU path")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=str)
@pytest.mark.parametrize("fill", [0.0, 0.5, math.inf, -math.inf, math.nan])
def test_slot_softmax_along_non_leading_dims(fill, dtype):
    """softmax and log_softmax along COO dim 0 (the slots are the columns) and
    along dims 0 and 1 of a 3-D COO (kept dims linearised), with a full column
    (its fill covers nothing), an empty one, stored NaN and infinities, a dense
    part: no slice plan, the same result as dense."""
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else {}
    for dense_shape in ((), (2,)):
        D, A = _columns_case(fill, dtype, dense_shape)
        for fn in (torch.softmax, torch.log_softmax):
            assert _sparsefill_ops(lambda: fn(A, 0)) >= {"slot_softmax"}
            assert "slice_plan" not in _sparsefill_ops(lambda: fn(A, 0))
            assert_matches_dense(fn(A, 0), fn(D, 0), **tol)
    g = torch.Generator().manual_seed(2)
    D3 = torch.randn(4, 5, 3, dtype=torch.float64, generator=g)
    D3 = torch.where(torch.rand(4, 5, 3, generator=g) < 0.5, D3, fill).to(dtype)
    A3 = sf.to_sparse(D3, fill_value=fill)
    for d in (0, 1):
        assert "slot_softmax" in _sparsefill_ops(lambda: torch.softmax(A3, d))
        for fn in (torch.softmax, torch.log_softmax):
            assert_matches_dense(fn(A3, d), fn(D3, d), **tol)


@pytest.mark.cpu_only("slot_softmax is the CPU path")
@pytest.mark.parametrize("fill", [0.5, math.inf, math.nan])
def test_slot_softmax_of_csr_columns_and_per_column_fills(fill):
    """CSR along dim 0 (the slots are col_indices); a per-column fill (one
    fill row per slot), also with a dense part; a per-row fill along dim 0
    varies inside the slices and stays refused."""
    D, A = _columns_case(fill, torch.float64)
    C = A.to_sparse_csr()
    assert "slot_softmax" in _sparsefill_ops(lambda: torch.softmax(C, 0))
    assert_matches_dense(torch.softmax(C, 0), torch.softmax(D, 0))
    assert_matches_dense(torch.log_softmax(C, 0), torch.log_softmax(D, 0))
    for dense_shape in ((), (2,)):
        D, A = _columns_case(0.0, torch.float64, dense_shape, seed=3)
        per_col = torch.tensor([fill, -1.0, 2.0, fill, -math.inf, 0.25], dtype=torch.float64)
        f = per_col.reshape((1, 6) + (1,) * len(dense_shape)).expand((1, 6) + dense_shape)
        B = A._with(A._values(), f.contiguous())
        assert B._has_per_slice_fill()
        Dp = B.to_dense()
        for fn in (torch.softmax, torch.log_softmax):
            assert_matches_dense(fn(B, 0), fn(Dp, 0))
    rowfill = A._with(A._values(), torch.arange(9, dtype=torch.float64).reshape(9, 1, 1)
                      .expand(9, 1, 2).contiguous())
    with pytest.raises(NotImplementedError, match="varies along"):
        torch.softmax(rowfill, 0)


@pytest.mark.cpu_only("CPU thread counts")
def test_slot_softmax_one_thread_and_two_agree():
    """Several parts (300K stored; the partition depends on the sizes only):
    softmax, log_softmax and their backward bit for bit the same on 1 and 2
    threads."""
    A = random_tensor("random", 0.5, torch.sparse_coo, size=(3000, 300), seed=6,
                      dtype=torch.float32)
    g = torch.randn(A._nnz(), generator=torch.Generator().manual_seed(1))
    old = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            run = []
            for fn in (torch.softmax, torch.log_softmax):
                v = A._values().clone().requires_grad_()
                f = A._fill_value().clone().requires_grad_()
                out = fn(A._with(v, f), 0)
                (out._values() * g).sum().add(out._fill_value().sum()).backward()
                run += [out._values(), out._fill_value(), v.grad, f.grad]
            results.append(run)
    finally:
        torch.set_num_threads(old)
    for x, y in zip(*results):
        assert torch.equal(x, y)
    # against float64 (torch's float32 softmax over 3000 elements is off by 3e-5)
    reference = torch.softmax(A.to_dense().double(), 0)[tuple(A._indices())].float()
    assert_matches_dense(results[0][0], reference, rtol=2e-6, atol=1e-9)


@pytest.mark.cpu_only("slot_softmax is the CPU path")
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize("fill", [0.5, math.inf, -math.inf, math.nan])
def test_slot_softmax_gradients_include_the_fill(fill, log):
    """Backward from the C core, the differentiable formula (gradgradcheck),
    forward-mode AD; the fill's gradient counts its unspecified elements; a
    non-finite fill gives dense autograd's gradients."""
    fn = torch.log_softmax if log else torch.softmax
    for dense_shape in ((), (2,)):
        D, A = _columns_case(0.5, torch.float64, dense_shape, seed=13, size=(5, 6))
        A = A._with(A._values().nan_to_num(1.0, 2.0, -2.0), A._fill_value())
        v = A._values().detach().clone().requires_grad_()
        f = torch.tensor(0.25 if not math.isfinite(fill) else fill, dtype=torch.float64,
                         requires_grad=True)
        w = torch.linspace(-1, 2, math.prod(D.shape), dtype=torch.float64).reshape(D.shape)

        def through(v, f):
            X = sf.sparse_coo_tensor(A._indices(), v, A.shape, fill_value=f)
            return fn(X, 0).to_dense() * w

        assert torch.autograd.gradcheck(through, (v, f))
        assert torch.autograd.gradgradcheck(through, (v, f))
        with fwAD.dual_level():
            tangent = fwAD.unpack_dual(through(fwAD.make_dual(v.detach(), torch.ones_like(v)),
                                               fwAD.make_dual(f.detach(), torch.ones_like(f)))
                                       ).tangent
        dense_tangent = torch.func.jvp(
            lambda v, f: fn(sf.sparse_coo_tensor(A._indices(), v, A.shape, fill_value=f)
                            .to_dense(), 0) * w,
            (v.detach(), f.detach()), (torch.ones_like(v), torch.ones_like(f)))[1]
        assert_matches_dense(tangent, dense_tangent)
        # the fill itself non-finite: gradients as dense autograd gives them
        grads = []
        for to_dense_first in (False, True):
            vi = v.detach().clone().requires_grad_()
            fi = torch.tensor(fill, dtype=torch.float64, requires_grad=True)
            X = sf.sparse_coo_tensor(A._indices(), vi, A.shape, fill_value=fi)
            out = fn(X.to_dense(), 0) if to_dense_first else fn(X, 0).to_dense()
            (out.nan_to_num(0.0, 0.0, 0.0) * w).sum().backward()
            grads.append((vi.grad, fi.grad))
        assert_matches_dense(grads[0][0], grads[1][0])
        assert_matches_dense(grads[0][1], grads[1][1])


def test_slot_softmax_rejects_bad_arguments():
    ops = torch.ops.sparsefill
    v = torch.randn(3, 1, dtype=torch.float64)
    f = torch.zeros(1, 1, dtype=torch.float64)
    slot = torch.tensor([0, 1, 0])
    with pytest.raises(RuntimeError, match="slot must be 1-D"):
        ops.slot_softmax(v, torch.tensor([0, 1]), f, 2, 4, False)
    with pytest.raises(RuntimeError, match="fill must be"):
        ops.slot_softmax(v, slot, torch.zeros(3, 1, dtype=torch.float64), 2, 4, False)
    with pytest.raises(RuntimeError, match="out of range|outside"):
        ops.slot_softmax(v, torch.tensor([0, 2, 0]), f, 2, 4, False)
    with pytest.raises(RuntimeError, match="coalesced"):
        ops.slot_softmax(v, torch.tensor([0, 0, 0]), f, 2, 2, False)  # 3 rows, slices of 2
    with pytest.raises(RuntimeError, match="non-negative"):
        ops.slot_softmax(v, slot, f, -1, 4, False)
    with pytest.raises(RuntimeError, match="floating|dtype"):
        ops.slot_softmax(v.long(), slot, f.long(), 2, 4, False)
    out, out_fill = ops.slot_softmax(v, slot, f, 2, 4, True)
    with pytest.raises(RuntimeError, match="gradient shape"):
        ops.slot_softmax_backward(out, out_fill, out[:2], out_fill, slot, 4, True)
    with pytest.raises(RuntimeError, match="coalesced"):
        ops.slot_softmax_backward(out, out_fill, out, out_fill, torch.tensor([0, 0, 0]), 2, True)
