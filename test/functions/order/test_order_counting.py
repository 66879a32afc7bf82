"""Counting with the fill (torch_sparsefill/functions/order/counting.py):
mode, unique, unique_consecutive, bincount, histc, histogram, searchsorted,
bucketize against the dense ops on A.to_dense(), every fill and layout."""
from __future__ import annotations

import math

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf

CASES = [T.Case(p, f) for p in ("empty", "one", "random", "full", "hybrid") for f in T.FILLS]


def _eq(a, b):
    a = a.to_dense() if isinstance(a, sf.SparseFillTensor) else a
    assert a.dtype == b.dtype and a.shape == b.shape, (a, b)
    T.assert_dense_equal(a, b, equal_nan=True, rtol=0, atol=0)


def _rounded(case, layout):
    """Few distinct values (rounded), some equal to the fill: counts matter."""
    A = T.random_tensor(case.pattern, case.fill, layout, seed=4)
    A = A.coalesce() if A.layout == torch.sparse_coo else A
    v = (A.values() * 2).round() / 2
    return A._with(v, A._fill_value().clone())


@pytest.mark.parametrize("layout", T.LAYOUTS + [torch.sparse_csc], ids=T.layout_id)
@pytest.mark.parametrize("case", CASES, ids=T.case_id)
def test_counting(case, layout):
    A = _rounded(case, layout)
    D = A.to_dense()
    for d in range(A.dim()):
        if A.shape[d] == 0 or bool(D.isnan().any()):  # torch's mode meets NaN undefined
            continue
        v, i = torch.mode(A, d, keepdim=d == 0)
        dv, di = torch.mode(D, d, keepdim=d == 0)
        _eq(v, dv)
        _eq(i, di)
    one_fill = A.fill_value().unique().numel() == 1
    if not one_fill:
        with pytest.raises(NotImplementedError, match="fill is not one value"):
            torch.unique(A)
        return
    for got, want in zip(torch.unique(A, return_inverse=True, return_counts=True),
                         torch.unique(D, return_inverse=True, return_counts=True)):
        _eq(got, want)
    for got, want in zip(torch.unique_consecutive(A, return_inverse=True, return_counts=True),
                         torch.unique_consecutive(D, return_inverse=True, return_counts=True)):
        _eq(got, want)
    _eq(torch.histc(A, 7, -2.0, 3.0), torch.histc(D, 7, -2.0, 3.0))
    if bool(torch.isfinite(D).all()) and D.numel():
        _eq(torch.histc(A, 5), torch.histc(D, 5))
        h, e = torch.histogram(A, 4)
        dh, de = torch.histogram(D, 4)
        _eq(h, dh)
        _eq(e, de)
    w = torch.rand(A.shape, dtype=D.dtype, generator=T.rng(1))
    h, _ = torch.histogram(A, 3, range=(-1.0, 2.0), weight=w, density=True)
    T.assert_dense_equal(h, torch.histogram(D, 3, range=(-1.0, 2.0), weight=w, density=True)[0])
    x = torch.tensor([-math.inf, -2.0, -0.5, 0.0, 0.5, 1.5, 2.0, math.inf, math.nan],
                     dtype=D.dtype)
    for right in (False, True):
        _eq(torch.bucketize(A, x.sort().values[:-1], right=right),
            torch.bucketize(D, x.sort().values[:-1], right=right))
        _eq(torch.searchsorted(x.sort().values[:-1], A, right=right),
            torch.searchsorted(x.sort().values[:-1], D, right=right))


@pytest.mark.parametrize("fill", [2.0, -1.0, 10.0, math.inf, math.nan], ids=T.fill_id)
def test_sorted_sparse_sequence(fill):
    """A sorted 1-D sparse sequence: the block is n - s equal elements."""
    n = 9
    idx = [[0, 1, 7, 8]]
    vals = [-3.0, -1.0, 10.0, math.nan] if fill <= 10.0 else [-3.0, -1.0, 5.0, 6.0]
    if fill == math.inf or math.isnan(fill):
        idx, vals = [[0, 1]], [-3.0, -1.0]
    S = sf.sparse_coo_tensor(idx, vals, (n,), fill_value=fill)
    D = S.to_dense()
    assert bool((D[:-1] <= D[1:]).logical_or(D[1:].isnan()).all())
    x = torch.tensor([-5.0, -3.0, -2.0, -1.0, 0.0, 2.0, 3.0, 10.0, 11.0, math.inf, math.nan])
    for right in (False, True):
        _eq(torch.searchsorted(S, x, right=right), torch.searchsorted(D, x, right=right))
        _eq(torch.searchsorted(S, x, side="right" if right else "left", out_int32=True),
            torch.searchsorted(D, x, right=right, out_int32=True))
        _eq(torch.bucketize(x, S, right=right), torch.bucketize(x, D, right=right))


@pytest.mark.parametrize("fill", [0, 2, 5])
def test_bincount(fill):
    B = sf.sparse_coo_tensor([[0, 3, 4]], [3, 0, 7], (9,), fill_value=fill)
    D = B.to_dense()
    _eq(torch.bincount(B), torch.bincount(D))
    _eq(torch.bincount(B, minlength=12), torch.bincount(D, minlength=12))
    w = torch.rand(9, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    T.assert_dense_equal(torch.bincount(B, w), torch.bincount(D, w))
    full = sf.sparse_coo_tensor([[0, 1]], [1, 1], (2,), fill_value=fill)
    _eq(torch.bincount(full), torch.bincount(full.to_dense()))
    with pytest.raises(RuntimeError):
        torch.bincount(sf.sparse_coo_tensor([[0]], [1], (3,), fill_value=-1))


def test_mode_gradient_goes_to_the_chosen_element():
    v = torch.tensor([4.0, 4.0, 1.0], dtype=torch.float64, requires_grad=True)
    f = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    for fill in (1.0, 7.0):
        A = sf.sparse_coo_tensor([[0, 1, 6]], v, (8,), fill_value=f * fill)
        D = A.to_dense().detach().requires_grad_()
        gv, gf = torch.autograd.grad(torch.mode(A).values, (v, f))
        (gd,) = torch.autograd.grad(torch.mode(D).values, D)
        torch.testing.assert_close(gv, gd[[0, 1, 6]])
        torch.testing.assert_close(gf, gd[[2, 3, 4, 5, 7]].sum() * fill)


def test_a_sorter_of_another_size_raises_as_dense():
    A = sf.sparse_coo_tensor([[0]], [1.0], (3,), fill_value=2.0)
    for seq in (A, A.to_dense()):
        with pytest.raises(RuntimeError, match="boundary and sorter must have the same size"):
            torch.searchsorted(seq, torch.tensor([1.0]), sorter=torch.tensor([0]))


def test_uncoalesced_duplicates_sum_before_bucketize():
    """bucketize is not linear: duplicates must be summed first (a fuzzer find)."""
    A = sf.sparse_coo_tensor([[0, 0, 1]], [1.0, 2.0, 0.5], (3,), fill_value=1.5)
    b = torch.tensor([0.0, 2.0, 2.5])
    _eq(torch.bucketize(A, b, right=True), torch.bucketize(A.to_dense(), b, right=True))
    _eq(torch.searchsorted(b, A), torch.searchsorted(b, A.to_dense()))


@pytest.mark.parametrize("layout", T.LAYOUTS)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_unique_and_runs_of_slices(case, layout):
    """unique / unique_consecutive with dim=: the distinct slices (sparse),
    the inverse and counts equal torch's on the dense tensor, NaN fills too
    (each slice holding a NaN is its own), dense-part fills too."""
    A = _rounded(case, layout)
    D = A.to_dense()
    for d in range(-D.dim(), D.dim()):
        for fn, kw in ((torch.unique, {"sorted": True}), (torch.unique, {"sorted": False}),
                       (torch.unique_consecutive, {})):
            got = fn(A, dim=d, return_inverse=True, return_counts=True, **kw)
            want = fn(D, dim=d, return_inverse=True, return_counts=True, **kw)
            assert isinstance(got[0], sf.SparseFillTensor)
            for g, w in zip(got, want):
                _eq(g, w)
        _eq(torch.unique(A, dim=d), torch.unique(D, dim=d))


@pytest.mark.parametrize("shape,fill_shape", [
    ((6, 4), (6, 1)), ((6, 4), (1, 4)), ((6, 4), (6, 4)), ((5, 3, 4), (5, 1, 1)),
    ((5, 3, 4), (1, 3, 1)), ((5, 3, 4), (5, 3, 1)), ((8,), (8,)), ((0, 3), (1, 3))], ids=str)
@pytest.mark.parametrize("share", [0.0, 0.3, 1.0])
def test_unique_slices_with_a_per_slice_fill(shape, fill_shape, share):
    """A fill that varies across or along the slices: positions no slice
    stores still tell slices apart (by the fill of each), values in {0, 1}
    so that groups form; a NaN in the fill keeps its slices apart."""
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        idx = (torch.rand(shape, generator=g) < share).nonzero().t()
        fill = torch.randint(0, 2, fill_shape, generator=g).double()
        if seed == 3 and fill.numel():
            fill.view(-1)[0] = math.nan
        A = sf.sparse_coo_tensor(idx, torch.randint(0, 2, (idx.shape[1],), generator=g).double(),
                                 shape, fill_value=fill)
        D = A.to_dense()
        for d in range(len(shape)):
            if 0 in shape[:d] + shape[d + 1:]:
                continue  # torch refuses: a zero-sized dim not selected
            for fn, kw in ((torch.unique, {"sorted": True}), (torch.unique_consecutive, {})):
                got = fn(A, dim=d, return_inverse=True, return_counts=True, **kw)
                for x, w in zip(got, fn(D, dim=d, return_inverse=True, return_counts=True, **kw)):
                    _eq(x, w)


def test_unique_slices_stay_in_the_graph_as_dense_unique_does():
    """torch's unique(dim=) has no derivative but keeps its result in the
    graph (backward raises): so does ours, per-slice fill included."""
    idx = torch.tensor([[0, 2, 3], [1, 1, 0]])
    v = torch.tensor([0.5, 0.25, 2.0], dtype=torch.float64, requires_grad=True)
    fill = torch.tensor([[1.0], [3.0], [1.0], [3.5]], dtype=torch.float64, requires_grad=True)
    A = sf.sparse_coo_tensor(idx, v, (4, 3), fill_value=fill)
    got, want = torch.unique(A, dim=0), torch.unique(A.to_dense(), dim=0)
    _eq(got, want)
    for out in (got.to_dense(), want):
        assert out.requires_grad
        with pytest.raises(NotImplementedError, match="unique_dim"):
            out.sum().backward()


def test_unique_slices_compare_on_stored_positions_only():
    """Slices equal off their stored positions: two rows that store at
    different columns but agree densely are one slice."""
    A = sf.sparse_coo_tensor([[0, 1, 2], [0, 3, 3]], [5., 5., 7.], (3, 4), fill_value=5.)
    u, inv, counts = torch.unique(A, dim=0, return_inverse=True, return_counts=True)
    assert torch.equal(u.to_dense(), torch.tensor([[5., 5., 5., 5.], [5., 5., 5., 7.]]))
    assert inv.tolist() == [0, 0, 1] and counts.tolist() == [2, 1]
    with pytest.raises(IndexError):
        torch.unique(A, dim=2)


@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_with_a_sorter(right):
    """sorter=: a sparse sequence read through its sorter, or a sparse input
    searched in a strided sequence with one; equal to dense torch."""
    seq = sf.sparse_coo_tensor([[1, 3, 4]], [9., -2., 1.], (6,), fill_value=1.)
    d = seq.to_dense()
    sorter = torch.argsort(d, stable=True)
    x = torch.tensor([0., 1., 5., -3., 10., 1.])
    _eq(torch.searchsorted(seq, x, sorter=sorter, right=right),
        torch.searchsorted(d, x, sorter=sorter, right=right))
    X = sf.sparse_coo_tensor([[0, 2]], [5., -3.], (4,), fill_value=1.)
    _eq(torch.searchsorted(d, X, sorter=sorter, right=right),
        torch.searchsorted(d, X.to_dense(), sorter=sorter, right=right))
