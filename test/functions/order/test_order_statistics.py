"""Order statistics with the fill (torch_sparsefill/functions/order/,
RFC.md#order-statistics): every op against the dense op on A.to_dense() --
values, positions (equal, or selecting equal values where torch leaves ties
open), dtype, NaN -- over the named cases (every fill, hybrid, empty) and
every layout; gradients against dense autograd and gradcheck on values and
fill; a 10^7-long vector never materialised."""
from __future__ import annotations

import math
import subprocess
import sys

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from sf_testing.gradients import build, leaf_parts

CASES = [T.Case(p, f) for p in ("empty", "one", "random", "full", "hybrid") for f in T.FILLS]


def _ties(A):
    """A with some stored values equal to the fill and one NaN: the ties
    and the NaN order matter."""
    A = A.coalesce() if A.layout == torch.sparse_coo else A
    v = A.values().detach().clone()
    flat = v.flatten(1) if v.dim() > 1 else v.unsqueeze(1)
    if flat.shape[0] > 2 and flat.shape[1]:
        flat[::3] = A._fill_value().reshape(-1)[0]
        flat[1] = math.nan
    return A._with(v, A._fill_value().detach().clone())


def _dense(x):
    return x.to_dense() if isinstance(x, sf.SparseFillTensor) else x


def _same(a, b):
    T.assert_dense_equal(_dense(a), b, equal_nan=True, rtol=0, atol=0)
    assert _dense(a).dtype == b.dtype


def _picks(D, d, positions, expected):
    """positions select elements equal to the expected values (torch leaves
    which of equal elements open for topk, kthvalue, median)."""
    got = torch.gather(D, d, _dense(positions).reshape(expected.shape))
    T.assert_dense_equal(got, expected, equal_nan=True, rtol=0, atol=0)


def _tensors(case, layout):
    A = _ties(T.random_tensor(case.pattern, case.fill, layout, seed=3))
    return A, A.to_dense()


@pytest.mark.parametrize("layout", T.ALL_LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("case", CASES, ids=T.case_id)
def test_sort_family(case, layout):
    if layout in T.EXTRA_LAYOUTS and case not in T.EXTRA_CASES:
        pytest.skip("the extra layouts run their own cases")
    A, D = _tensors(case, layout)
    for d in range(A.dim()):
        for desc in (False, True):
            for stable in (False, True):
                v, i = torch.sort(A, dim=d, descending=desc, stable=stable)
                dv, di = torch.sort(D, dim=d, descending=desc, stable=True)
                _same(v, dv)
                _same(i, di)  # the stable answer, stable=False too
            _same(torch.argsort(A, d, descending=desc), di)
        for k in sorted({0, 1, 3, A.shape[d]}):
            for largest in (True, False):
                v, i = torch.topk(A, k, d, largest)
                dv, _ = torch.topk(D, k, d, largest)
                _same(v, dv)
                _picks(D, d, i, dv)
        for k in sorted({1, A.shape[d]}):
            v, i = torch.kthvalue(A, k, d, keepdim=True)
            dv, _ = torch.kthvalue(D, k, d, keepdim=True)
            _same(v, dv)
            _picks(D, d, i, dv)
        for fn in (torch.median, torch.nanmedian):
            v, i = fn(A, d, keepdim=True)
            dv, _ = fn(D, d, keepdim=True)
            _same(v, dv)
            _picks(D, d, i, dv)
        for fn in (torch.argmax, torch.argmin):
            _same(fn(A, d), fn(D, d))
            _same(fn(A, d, keepdim=True), fn(D, d, keepdim=True))
        for fn in (torch.quantile, torch.nanquantile):
            q = torch.tensor([0.0, 0.3, 0.5, 1.0], dtype=D.dtype)
            for mode in ("linear", "lower", "higher", "midpoint", "nearest"):
                T.assert_dense_equal(_dense(fn(A, q, d, interpolation=mode)),
                                     fn(D, q, d, interpolation=mode), equal_nan=True)
            T.assert_dense_equal(_dense(fn(A, 0.7, d, keepdim=True)),
                                 fn(D, 0.7, d, keepdim=True), equal_nan=True)
        _same(torch.aminmax(A, dim=d).max, torch.aminmax(D, dim=d).max)
    _same(torch.msort(A), torch.msort(D))
    if A.fill_value().unique().numel() > 1:  # no single block: refused (RFC)
        for fn in (torch.argmax, torch.median, lambda x: torch.quantile(x, 0.5)):
            with pytest.raises(NotImplementedError, match="per-slice fill"):
                fn(A)
    else:
        for fn in (torch.argmax, torch.argmin, torch.median, torch.nanmedian):
            _same(fn(A), fn(D))
        T.assert_dense_equal(torch.quantile(A, 0.3), torch.quantile(D, 0.3), equal_nan=True)
        _same(torch.aminmax(A).min, torch.aminmax(D).min)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.float16,
                                   torch.bfloat16])
def test_other_dtypes(dtype):
    A = T.random_tensor("random", 2.0, torch.sparse_csr, seed=5).to(dtype)
    D = A.to_dense()
    for d in (0, 1):
        v, i = torch.sort(A, dim=d, stable=True)
        dv, di = torch.sort(D, dim=d, stable=True)
        _same(v, dv)
        _same(i, di)
        _same(torch.topk(A, 2, d).values, torch.topk(D, 2, d).values)
        _same(torch.argmax(A, d), torch.argmax(D, d))
        _same(torch.median(A, d).values, torch.median(D, d).values)


def test_empty_and_scalar():
    A = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0), (0, 4),
                             fill_value=1.0)
    _same(torch.sort(A, dim=0).values, torch.sort(A.to_dense(), dim=0).values)
    _same(torch.topk(A, 0, 1).values, torch.topk(A.to_dense(), 0, 1).values)
    with pytest.raises(RuntimeError, match="k"):
        torch.topk(A, 5, 1)
    with pytest.raises(IndexError):
        torch.kthvalue(A, 1, 0)
    with pytest.raises(RuntimeError, match="complex"):
        torch.sort(A.to(torch.complex64))


def _grad_ops():
    return {
        "sort": lambda A, D: torch.sort(A, dim=1, stable=True).values,
        "sort0-desc": lambda A, D: torch.sort(A, dim=0, descending=True).values,
        "msort": lambda A, D: torch.msort(A),
        "topk": lambda A, D: torch.topk(A, 3, 1).values,
        "topk-smallest0": lambda A, D: torch.topk(A, 2, 0, largest=False).values,
        "kthvalue": lambda A, D: torch.kthvalue(A, 2, 1).values,
        "median": lambda A, D: torch.median(A, 0).values,
        "median-all": lambda A, D: torch.median(A),
        "nanmedian": lambda A, D: torch.nanmedian(A, 1).values,
        "quantile": lambda A, D: torch.quantile(A, torch.tensor([0.2, 0.9], dtype=A.dtype), 1),
        "nanquantile-all": lambda A, D: torch.nanquantile(A, 0.4),
    }


@pytest.mark.parametrize("layout", T.LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("fill", [0.7, -2.0], ids=T.fill_id)
@pytest.mark.parametrize("op", list(_grad_ops()))
def test_gradients(op, fill, layout):
    """gradcheck and gradgradcheck in float64 on values and fill (distinct
    values: ties are where torch's choice of element is open), and the
    gradients equal dense autograd's."""
    fn = _grad_ops()[op]
    idx, v, f, size = leaf_parts(11, fill, layout, "real")
    with torch.no_grad():  # distinct values, none equal to the fill
        v.copy_(torch.linspace(-3.1, 3.3, v.numel(), dtype=v.dtype).reshape(v.shape))

    def run(v, f):
        return _dense(fn(build(layout, idx, v, f, size), None))

    torch.autograd.gradcheck(run, (v, f))
    torch.autograd.gradgradcheck(run, (v, f))
    A = build(layout, idx, v, f, size)
    out = run(v, f)
    g = torch.randn(out.shape, dtype=out.dtype, generator=torch.Generator().manual_seed(2))
    gv, gf = torch.autograd.grad(out, (v, f), g)
    D = A.to_dense().detach().requires_grad_()
    (gd,) = torch.autograd.grad(_dense(fn(D, None)), D, g)
    stored = T.stored_mask(A)
    torch.testing.assert_close(gf, gd[~stored].sum())
    torch.testing.assert_close(gv, gd[stored])


def test_ties_with_the_fill_share_as_torch():
    """A stored value equal to the fill: the sort's gradient goes where the
    stable order puts it (interleaved by index), as dense autograd's."""
    v = torch.tensor([1.0, 2.0, 1.0], dtype=torch.float64, requires_grad=True)
    f = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    A = sf.sparse_coo_tensor([[1, 3, 4]], v, (6,), fill_value=f)
    D = A.to_dense().detach().requires_grad_()
    g = torch.arange(6, dtype=torch.float64)
    sv = torch.sort(A, stable=True).values.to_dense()
    gv, gf = torch.autograd.grad(sv, (v, f), g)
    (gd,) = torch.autograd.grad(torch.sort(D, stable=True).values, D, g)
    torch.testing.assert_close(gv, gd[[1, 3, 4]])
    torch.testing.assert_close(gf, gd[[0, 2, 5]].sum())


_MEMORY = r"""
import resource, torch, torch_sparsefill as sf
torch.manual_seed(0)
n, s = 10**7, 10**3
idx = torch.randperm(n)[:s].sort().values.unsqueeze(0)
A = sf.sparse_coo_tensor(idx, torch.randn(s), (n,), fill_value=0.5)
for f in (lambda: torch.topk(A, 5), lambda: torch.argmax(A), lambda: torch.kthvalue(A, 7),
          lambda: torch.median(A), lambda: torch.quantile(A, 0.9), lambda: torch.argmin(A)):
    f()  # warm: the first call loads code
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
for f in (lambda: torch.topk(A, 5), lambda: torch.argmax(A), lambda: torch.kthvalue(A, n - 3),
          lambda: torch.median(A), lambda: torch.quantile(A, 0.9), lambda: torch.argmin(A),
          lambda: torch.nanmedian(A)):
    f()
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


@pytest.mark.cpu_only("peak resident memory of a CPU process")
def test_small_answers_never_materialise_the_lane():
    """topk, argmax, kthvalue, median, quantile of a 10^7-long vector with
    10^3 stored grow the peak memory by a few MB (the dense vector: 40 MB)."""
    out = subprocess.run([sys.executable, "-c", _MEMORY], capture_output=True, text=True,
                         check=True)
    assert int(out.stdout.strip()) < 8, out.stdout


def test_values_equal_dense_on_10e7():
    n = 10**7
    A = sf.sparse_coo_tensor([[3, 9_999_998]], [5.0, -1.0], (n,), fill_value=0.5)
    assert torch.topk(A, 3).indices.tolist() == [3, 0, 1]
    assert int(torch.argmin(A)) == 9_999_998
    assert int(torch.kthvalue(A, n).indices) == 3
    assert torch.median(A).item() == 0.5


def test_along_a_dense_dim_with_nothing_stored():
    """torch refuses some ops on an empty input (quantile): the empty
    values of a tensor storing nothing must not reach it (a fuzzer find)."""
    A = sf.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.int64), torch.zeros(0, 3), (4, 3),
                             fill_value=torch.tensor([1.0, 2.0, 3.0]))
    for fn in (lambda x: torch.nanquantile(x, 0.5, 1), lambda x: torch.median(x, 1).values,
               lambda x: torch.topk(x, 2, 1).values):
        _same(fn(A), fn(A.to_dense()))


def test_nanmedian_of_an_all_nan_fill_along_a_dense_dim():
    """torch's nanmedian misreads an expanded all-NaN input (uninitialised
    values): the fill is made contiguous first (a fuzzer find)."""
    A = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0, 2),
                             (1, 1, 2), fill_value=float("nan"))
    v, i = torch.nanmedian(A, -1)
    dv, di = torch.nanmedian(A.to_dense(), -1)
    _same(v, dv)
    _same(i, di)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16,
                                   torch.int64, torch.int32, torch.int8, torch.uint8])
def test_topk_picks_the_stable_sort_s_first_k(dtype):
    """topk's values and indices are the first k of the stable sort of the
    dense lane (ties, NaN and the fill's block in index order), for every k,
    both directions, along rows, columns and a single lane: it reads each
    lane's k-th best stored value instead of sorting them all, and a wrong
    choice among ties would show here (torch's own topk leaves ties open)."""
    g = torch.Generator().manual_seed(7)
    pool = torch.tensor([0., 1., -1., 2., math.inf, -math.inf, math.nan, -0.0] if dtype.is_floating_point
                        else [0, 1, 3, 2, 7] if dtype == torch.uint8 else [0, 1, -1, 2, 7],
                        dtype=dtype)
    for m, n in ((5, 12), (1, 30), (6, 1)):
        for fill in pool.tolist():
            D = pool[torch.randint(0, len(pool), (m, n), generator=g)]
            mask = torch.rand(m, n, generator=g) < 0.6
            A = sf.sparse_coo_tensor(mask.nonzero().T, D[mask], (m, n), fill_value=fill)
            dense = torch.where(mask, D, torch.tensor(fill, dtype=dtype))
            for X in (A, A.to_sparse_csr()):
                for d in (0, 1):
                    for largest in (True, False):
                        sv, si = torch.sort(dense, dim=d, descending=largest, stable=True)
                        for k in range(dense.shape[d] + 1):
                            v, i = torch.topk(X, k, d, largest)
                            assert torch.equal(i, si.narrow(d, 0, k))
                            _same(v, sv.narrow(d, 0, k))


def test_topk_native_lanes_long_and_short_with_gradient():
    """The native per-lane selection (CPU): one long lane among short ones
    (where a padded matrix would be mostly padding), ties everywhere, and
    the gradient reaching the stored values and the fill as the dense
    topk's does."""
    g = torch.Generator().manual_seed(11)
    m, n = 40, 300
    D = torch.randint(-3, 4, (m, n), generator=g).to(torch.float64)
    mask = torch.rand(m, n, generator=g) < 0.02
    mask[5] = torch.rand(n, generator=g) < 0.9  # the long lane
    for fill in (0.0, 2.0, -5.0):
        for largest in (True, False):
            for k in (1, 3, 17):
                vals = D[mask].clone().requires_grad_()
                f = torch.tensor(fill, dtype=torch.float64, requires_grad=True)
                A = sf.sparse_coo_tensor(mask.nonzero().T, vals, (m, n), fill_value=f)
                for X in (A, A.to_sparse_csr()):
                    v, i = torch.topk(X, k, 1, largest)
                    dense = torch.where(mask, D, torch.tensor(fill, dtype=torch.float64))
                    sv, si = torch.sort(dense, dim=1, descending=largest, stable=True)
                    assert torch.equal(i, si[:, :k])
                    _same(v, sv[:, :k])
                w = torch.randn(m, k, generator=g, dtype=torch.float64)
                gv, gf = torch.autograd.grad((torch.topk(A, k, 1, largest).values * w).sum(),
                                             (vals, f))
                dv = torch.zeros(m, n, dtype=torch.float64).index_put_(
                    (torch.arange(m).repeat_interleave(k), si[:, :k].reshape(-1)),
                    w.reshape(-1), accumulate=True)
                assert torch.equal(gv, dv[mask])
                assert torch.allclose(gf, dv[~mask].sum(), rtol=1e-12, atol=1e-12)  # a sum


def _rows_case(dtype, m, n, seed):
    """A CSR matrix with a per-row fill drawn from a pool full of ties
    (NaN, +-inf and -0.0 for floats), empty and full rows, and its dense twin."""
    g = torch.Generator().manual_seed(seed)
    floating = dtype.is_floating_point
    pool = torch.tensor([0., 1., -1., 5., math.inf, -math.inf, math.nan, -0.0] if floating
                        else [0, 1, 3, 5, 7], dtype=dtype)
    D = pool[torch.randint(0, len(pool), (m, n), generator=g)]
    mask = torch.rand(m, n, generator=g) < 0.5
    mask[0], mask[-1] = False, True  # an empty row, a full one
    fill = pool[torch.randint(0, len(pool), (m, 1), generator=g)]
    A = sf.sparse_coo_tensor(mask.nonzero().T, D[mask], (m, n), fill_value=fill).to_sparse_csr()
    return A, torch.where(mask, D, fill), mask


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16,
                                   torch.int64, torch.int32, torch.int8, torch.uint8])
def test_topk_csr_rows_read_crow_and_col(dtype, monkeypatch):
    """topk of a CSR matrix along its rows (dim 1 and -1) with a per-row
    fill and with one fill: the first k of the stable sort of each dense row,
    every k from 0 to n, both directions, by the native merge alone (no
    lanes are built: sort.Lanes is made to fail)."""
    from torch_sparsefill.functions.order import sort as sort_mod

    def no_lanes(*a, **k):
        raise AssertionError("the CSR rows path built lanes")
    for m, n in ((7, 9), (3, 1), (1, 13), (3, 45)):  # k > 32: the heap, not the sorted array
        A, dense, mask = _rows_case(dtype, m, n, m * n)
        one = A._with(A._sf_values, A._sf_fill.reshape(-1)[0].clone())
        for X, Xd in ((A, dense), (one, torch.where(mask, dense, one._sf_fill))):
            with monkeypatch.context() as mp:
                mp.setattr(sort_mod, "Lanes", no_lanes)
                for largest in (True, False):
                    sv, si = torch.sort(Xd, dim=1, descending=largest, stable=True)
                    for k in range(n + 1) if n < 20 else (0, 1, 32, 33, 40, n):
                        for d in (1, -1):
                            v, i = torch.topk(X, k, d, largest)
                            assert torch.equal(i, si[:, :k]), (k, largest)
                            _same(v, sv[:, :k])


@pytest.mark.parametrize("fill", [0.7, -2.0, math.inf, -math.inf, math.nan], ids=str)
@pytest.mark.parametrize("per_row", [False, True], ids=["one-fill", "per-row-fill"])
def test_topk_csr_rows_gradients(fill, per_row):
    """The CSR rows path's gradient reaches the stored values and the fill
    as dense autograd's (the stable sort's elements); a fill that no slot
    takes (largest=False, each row storing k small values) gets 0, never
    NaN, even when it is +-inf or NaN; gradcheck and gradgradcheck where the
    fill is finite."""
    m, n, k = 5, 8, 3
    g = torch.Generator().manual_seed(4)
    mask = torch.rand(m, n, generator=g) < 0.5
    mask[:, :k] = True
    mask[2] = False
    mask[2, :k] = True
    vals = torch.linspace(-3.1, 3.3, int(mask.sum()), dtype=torch.float64)
    f0 = torch.full((m, 1) if per_row else (), fill, dtype=torch.float64)

    def run(v, f, largest):
        A = sf.sparse_coo_tensor(mask.nonzero().T, v, (m, n), fill_value=f).to_sparse_csr()
        return torch.topk(A, k, 1, largest).values

    if math.isfinite(fill):
        v, f = vals.clone().requires_grad_(), f0.clone().requires_grad_()
        for largest in (True, False):
            torch.autograd.gradcheck(lambda v, f: run(v, f, largest), (v, f))
            torch.autograd.gradgradcheck(lambda v, f: run(v, f, largest), (v, f))
    for largest in (True, False):
        v, f = vals.clone().requires_grad_(), f0.clone().requires_grad_()
        w = torch.randn(m, k, generator=g, dtype=torch.float64)
        gv, gf = torch.autograd.grad((run(v, f, largest) * w).sum(), (v, f))
        dense = torch.where(mask, torch.zeros(m, n, dtype=torch.float64).index_put(
            tuple(mask.nonzero().T), vals), f0)
        si = torch.sort(dense, dim=1, descending=largest, stable=True).indices[:, :k]
        want = torch.zeros(m, n, dtype=torch.float64).index_put_(
            (torch.arange(m).repeat_interleave(k), si.reshape(-1)), w.reshape(-1))
        assert torch.equal(gv, want[mask])
        want_f = torch.where(mask, 0.0, want).sum(1, keepdim=True)
        torch.testing.assert_close(gf, want_f if per_row else want_f.sum(), rtol=0, atol=1e-12)
        if not largest and fill == fill:  # inf, -inf: the ascending slots are all stored
            assert not torch.isnan(gf).any()
        if not largest and fill > 3.3:
            assert torch.equal(gf, torch.zeros_like(gf))


def test_lane_topk_fill_refuses_bad_input_by_name():
    """The native merge's bad input: an exception naming the argument."""
    op = torch.ops.sparsefill.lane_topk_fill
    crow, col, v, f = torch.tensor([0, 2]), torch.tensor([0, 3]), torch.zeros(2), torch.tensor(1.)
    assert op(crow, col, v, f, 4, 4, True)[0].shape == (1, 4)
    for args, match in [((crow, col, v, f, 4, 5, True), "k must be in"),
                        ((crow, col, v, f, -1, 0, True), "n must be non-negative"),
                        ((crow, torch.tensor([3, 0]), v, f, 4, 1, True), "col_indices"),
                        ((crow, torch.tensor([0, 4]), v, f, 4, 1, True), "col_indices"),
                        ((crow, torch.tensor([-1, 2]), v, f, 4, 1, True), "col_indices"),
                        ((crow, col[:1], v, f, 4, 1, True), "col_indices"),
                        ((torch.tensor([0, 3]), col, v, f, 4, 1, True), "crow_indices"),
                        ((crow, col, v, torch.zeros(3), 4, 1, True), "fill"),
                        ((crow, col, v, f.double(), 4, 1, True), "fill"),
                        ((crow, col, v.bool(), f.bool(), 4, 1, True), "values")]:
        with pytest.raises(RuntimeError, match=match):
            op(*args)
