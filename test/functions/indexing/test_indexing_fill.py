"""Indexing reads and writes with the fill (torch_sparsefill/functions/indexing/):
advanced indexing, masks, masked_select, gather, take, take_along_dim,
nonzero; index_put, A[...] = v, index_add/copy/fill, scatter (every reduce,
include_self both ways), put, masked_scatter -- against dense torch on
A.to_dense() over every fill, pattern and layout (unique written positions:
torch leaves the winner of repeats open), gradients to values, fill and the
written source."""
from __future__ import annotations

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from sf_testing.gradients import build, leaf_parts
from torch_sparsefill.functions.indexing import reads

CASES = [T.Case(p, f) for p in ("empty", "one", "random", "full", "hybrid") for f in T.FILLS]


def _check(a, b):
    a = a.to_dense() if isinstance(a, sf.SparseFillTensor) else a
    assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
    T.assert_dense_equal(a, b, equal_nan=True)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _reads(A, D):
    n0, n1 = A.shape[0], A.shape[1]
    extra = tuple(A.shape[2:])
    r = torch.randint(-n0, n0, (4, 3), generator=_gen(1))
    c = torch.randint(-n1, n1, (3,), generator=_gen(2))
    ops = {
        "rows-cols": lambda x: x[r, c],
        "rows-int": lambda x: x[r[0], 2],
        "2-d index": lambda x: x[torch.tensor([[1, 0], [2, 2]])],
        "mask": lambda x: x[D > 0.5],
        "masked_select": lambda x: torch.masked_select(x, D > 0.3),
        "gather": lambda x: torch.gather(
            x, 1, torch.randint(0, n1, (n0, 4) + (2,) * len(extra), generator=_gen(3))),
        "take": lambda x: torch.take(x, torch.randint(-D.numel(), max(D.numel(), 1), (6,),
                                                      generator=_gen(4))),
        "take_along_dim": lambda x: torch.take_along_dim(
            x, torch.randint(0, n0, (1, n1) + (1,) * len(extra), generator=_gen(5)), 0),
        "nonzero": lambda x: torch.nonzero(x),
        "argwhere": lambda x: torch.argwhere(x),
        "nonzero-tuple": lambda x: torch.nonzero(x, as_tuple=True)[-1],
    }
    if extra:
        ops["into dense dims"] = lambda x: x[r, c, torch.tensor([0, 2, 1])]
    if D.numel() == 0:
        for k in ("take", "rows-cols", "rows-int", "2-d index", "gather", "take_along_dim"):
            ops.pop(k)
    return ops


@pytest.mark.parametrize("layout", T.ALL_LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("case", CASES, ids=T.case_id)
def test_reads(case, layout):
    if layout in T.EXTRA_LAYOUTS and case not in T.EXTRA_CASES:
        pytest.skip("the extra layouts run their own cases")
    A = T.random_tensor(case.pattern, case.fill, layout, seed=2)
    D = A.to_dense()
    for name, fn in _reads(A, D).items():
        _check(fn(A), fn(D))
    assert torch.equal(A[A > 0.5], D[D > 0.5])


def _writes(A, D):
    n0, n1 = A.shape[0], A.shape[1]
    extra = tuple(A.shape[2:])
    rows = torch.randperm(n0, generator=_gen(1))[:3]
    cols = torch.randperm(n1, generator=_gen(2))[:3]
    v = torch.randn((3,) + extra, dtype=D.dtype, generator=_gen(3))

    def src(shape, seed=6):
        return torch.randn(shape, dtype=D.dtype, generator=_gen(seed))

    scat = torch.randint(0, n1, (n0, 4) + extra, generator=_gen(5))
    ops = {
        "index_put": lambda x: x.index_put((rows, cols), v),
        "index_put-accumulate": lambda x: x.index_put((rows, cols), v, accumulate=True),
        "index_put-rows": lambda x: x.index_put((rows,), torch.tensor(2.5, dtype=D.dtype)),
        "index_put-mask": lambda x: x.index_put((D > 0.5,), torch.tensor(-1.0, dtype=D.dtype)),
        "index_add": lambda x: x.index_add(1, cols, src((n0, 3) + extra), alpha=2),
        "index_copy": lambda x: x.index_copy(0, rows, src((3,) + tuple(A.shape[1:]))),
        "index_fill": lambda x: x.index_fill(1, cols, 7.0),
        "scatter-value": lambda x: x.scatter(1, torch.zeros((2, 1) + extra, dtype=torch.int64),
                                             3.0),
        "scatter_add": lambda x: x.scatter_add(1, scat, src((n0, 4) + extra)),
        "put": lambda x: x.put(torch.randperm(D.numel(), generator=_gen(7))[:5],
                               torch.arange(5, dtype=D.dtype)),
        "put-accumulate": lambda x: x.put(torch.tensor([0, 0, 3]), torch.arange(3, dtype=D.dtype),
                                          accumulate=True),
        "masked_scatter": lambda x: x.masked_scatter(D > 0.5, torch.arange(D.numel(),
                                                                           dtype=D.dtype)),
    }
    for red in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            ops[f"scatter_reduce-{red}-{inc}"] = (
                lambda red, inc: lambda x: x.scatter_reduce(1, scat, src((n0, 4) + extra), red,
                                                            include_self=inc))(red, inc)
    return ops


@pytest.mark.parametrize("layout", T.ALL_LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("case", [c for c in CASES if c.pattern != "empty"], ids=T.case_id)
def test_writes(case, layout):
    if layout in T.EXTRA_LAYOUTS and case not in T.EXTRA_CASES:
        pytest.skip("the extra layouts run their own cases")
    A = T.random_tensor(case.pattern, case.fill, layout, seed=2)
    D = A.to_dense()
    for name, fn in _writes(A, D).items():
        _check(fn(A), fn(D))
    if layout in T.BLOCK_LAYOUTS:
        return  # in place, the written pattern need not fit the blocks (refused there)
    B, E = A.clone(), D.clone()
    rows, cols = torch.tensor([0, 2]), torch.tensor([1, 3])
    for step in (lambda x: x.__setitem__((1, 2), 4.0),
                 lambda x: x.__setitem__(slice(1, 3), 0.5),
                 lambda x: x.__setitem__((rows, cols), torch.tensor(-2.0, dtype=D.dtype)),
                 lambda x: x.__setitem__(E > 1, 9.0),
                 lambda x: x.index_add_(0, rows, torch.ones((2,) + tuple(A.shape[1:]),
                                                            dtype=D.dtype)),
                 lambda x: x.scatter_(1, torch.zeros((1, 1) + tuple(A.shape[2:]),
                                                     dtype=torch.int64), 5.0)):
        step(B)
        step(E)
        _check(B, E)
    if not A.dense_dim():  # (a write names elements: a hybrid tensor's dense dims become sparse)
        assert B.layout == A.layout


def test_write_adds_stored_elements():
    A = sf.sparse_coo_tensor([[0]], [1.0], (10**6,), fill_value=3.0)
    A[5] = 3.0
    assert A._nnz() == 2  # the pattern grows, as torch's sparse in-place ops


@pytest.mark.parametrize("layout", T.LAYOUTS, ids=T.layout_id)
def test_gradients(layout):
    idx, v, f, size = leaf_parts(13, 0.7, layout, "real")
    rows, cols = torch.tensor([0, 2, 4]), torch.tensor([1, 1, 6])
    s = torch.randn(3, dtype=v.dtype, generator=_gen(0), requires_grad=True)
    src = torch.randn(size[0], 2, dtype=v.dtype, generator=_gen(1), requires_grad=True)
    ops = [lambda A, s, src: A[rows, cols],
           lambda A, s, src: torch.gather(A, 1, torch.tensor([[0, 3]] * size[0])),
           lambda A, s, src: torch.masked_select(A, A.to_dense().detach() > 0),
           lambda A, s, src: A.index_put((rows, cols), s),
           lambda A, s, src: A.index_put((rows, cols), s, accumulate=True),
           lambda A, s, src: A.scatter_reduce(1, torch.tensor([[0, 0]] * size[0]), src, "prod"),
           lambda A, s, src: A.scatter_reduce(1, torch.tensor([[2, 5]] * size[0]), src, "amax",
                                              include_self=False),
           lambda A, s, src: A.index_add(1, torch.tensor([0, 2]), src)]
    for fn in ops:
        def run(v, f, s, src):
            out = fn(build(layout, idx, v, f, size), s, src)
            return out.to_dense() if isinstance(out, sf.SparseFillTensor) else out
        torch.autograd.gradcheck(run, (v, f, s, src))


def test_nonzero_refuses_above_its_limit(monkeypatch):
    monkeypatch.setattr(reads, "NONZERO_LIMIT", 10)
    A = sf.sparse_coo_tensor([[1]], [0.0], (20,), fill_value=1.0)
    with pytest.raises(NotImplementedError, match="nonzero"):
        torch.nonzero(A)
    Z = sf.sparse_coo_tensor([[1, 4]], [0.0, 2.0], (20,), fill_value=0.0)
    _check(torch.nonzero(Z), torch.nonzero(Z.to_dense()))  # a zero fill: never refused


def test_mixed_slices_and_tensors_refuse():
    A = sf.sparse_coo_tensor([[1], [2]], [2.0], (3, 4), fill_value=1.0)
    with pytest.raises(NotImplementedError, match="__getitem__"):
        A[:, torch.tensor([[0, 1]])]
    with pytest.raises(NotImplementedError, match="__setitem__"):
        A[:, torch.tensor([0, 1])] = 1.0


@pytest.mark.parametrize("threads", [1, 2])
def test_many_lookups(threads):
    """Many queries: COO's are sorted first (lookup._search); CSR's are
    searched in groups, in ranges over the threads (sf_csr_find), rows of
    very different lengths (row 0 full, some empty), negative indices."""
    g = _gen(9)
    m = 300
    lin = torch.randperm(m * m, generator=g)[:9000]
    lin = torch.cat([torch.arange(m), lin[lin >= 40 * m]]).unique()
    A = sf.sparse_coo_tensor(torch.stack(torch.unravel_index(lin, (m, m))),
                             torch.randn(lin.numel(), generator=g), (m, m), fill_value=5.0)
    r, c = (torch.randint(-m, m, (40000,), generator=g) for _ in range(2))
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for X in (A, A.to_sparse_csr()):
            assert torch.equal(X[r, c], A.to_dense()[r, c])
    finally:
        torch.set_num_threads(old)


def test_broadcasting_reads_and_index_forms():
    """Coverage finds: a mask or indices that broadcast the tensor, int32 and
    sparse index tensors, block_diag of three blocks."""
    A = sf.sparse_coo_tensor([[0, 1], [0, 0], [1, 0]], [3.0, -1.0], (2, 1, 2), fill_value=2.0)
    D = A.to_dense()
    mask = torch.tensor([[True, False], [False, True], [True, True]])
    _check(torch.masked_select(A, mask), torch.masked_select(D, mask))
    idx = torch.tensor([[[1, 0]], [[0, 0]]])
    _check(torch.take_along_dim(A, idx.expand(2, 3, 2), 2),
           torch.take_along_dim(D, idx.expand(2, 3, 2), 2))
    B = sf.sparse_coo_tensor([[0], [1]], [3.0], (2, 3), fill_value=2.0)
    i32 = torch.tensor([[2, 1], [0, 0]], dtype=torch.int32)
    _check(torch.gather(B, 1, i32), torch.gather(B.to_dense(), 1, i32))
    si = sf.to_sparse(i32.long(), fill_value=0)
    _check(torch.gather(B, 1, si), torch.gather(B.to_dense(), 1, i32.long()))
    blocks = [B, B.to_dense()[:1], sf.full((1,), 4.0)]
    _check(torch.block_diag(*blocks), torch.block_diag(*[b.to_dense() if
                                                         isinstance(b, sf.SparseFillTensor)
                                                         else b for b in blocks]))


@pytest.mark.parametrize("fill", [0.0, 2.5, float("inf"), float("nan")])
def test_masked_fill_with_a_tensor_value(fill):
    """masked_fill with a 0-d tensor value (torch's other overload): dense
    and sparse masks, out of place and in place, the value cast to A's
    dtype, gradients to the value, the stored values and the fill."""
    g = _gen(11)
    idx = torch.tensor([[0, 1, 3], [1, 2, 0]])
    m = torch.rand(4, 3, generator=g) > 0.5
    M = sf.to_sparse(m, fill_value=False)
    vals = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    A = sf.sparse_coo_tensor(idx, vals, (4, 3), fill_value=fill)
    for mask in (m, M):
        for value in (torch.tensor(7.0), torch.tensor(3, dtype=torch.int64)):
            _check(torch.masked_fill(A, mask, value), A.to_dense().masked_fill(m, value))
            _check(A.masked_fill(mask, value), A.to_dense().masked_fill(m, value))
    B = A.clone()
    B.masked_fill_(M, torch.tensor(9.0))
    _check(B, A.to_dense().masked_fill(m, 9.0))
    with pytest.raises(NotImplementedError, match="densify"):
        A.clone().masked_fill_(m, torch.tensor(9.0))
    with pytest.raises(RuntimeError, match="0-dimensional value tensor"):
        A.masked_fill(m, torch.ones(2))
    if fill == fill and abs(fill) != float("inf"):
        def f(v, fv, value):
            X = sf.sparse_coo_tensor(idx, v, (4, 3), fill_value=fv)
            out = X.masked_fill(M, value)
            return out.to_dense() if isinstance(out, sf.SparseFillTensor) else out
        args = (vals.clone().requires_grad_(), torch.tensor(fill, dtype=torch.float64,
                                                            requires_grad=True),
                torch.tensor(7.0, dtype=torch.float64, requires_grad=True))
        torch.autograd.gradcheck(f, args)
        torch.autograd.gradgradcheck(f, args)
