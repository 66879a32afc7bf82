"""sort and msort of a 2-D CSR matrix on the CPU by the native per-lane sort
(sparsefill::lane_sort_fill, functions/order/sort.py `_csr_sort`): rows read
as they are, columns as the rows of the transposed pattern. Against the
stable sort of the dense matrix: values, indices, dtype, NaN; per-lane and
single fills full of ties (NaN, +-inf, -0.0), empty and full lanes; and
gradients against dense autograd, gradcheck and gradgradcheck."""
from __future__ import annotations

import math

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from torch_sparsefill.functions.order import sort as sort_mod

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.int8, torch.uint8]


def _case(dtype, m, n, seed, fill_shape):
    """A CSR matrix with a fill of `fill_shape` ((m, 1) per row, (1, n) per
    column, () one) drawn from a pool full of ties, an empty and a full row
    and column, and its dense twin."""
    g = torch.Generator().manual_seed(seed)
    pool = torch.tensor([0., 1., -1., 5., math.inf, -math.inf, math.nan, -0.0]
                        if dtype.is_floating_point else [0, 1, 3, 5, 7], dtype=dtype)
    D = pool[torch.randint(0, len(pool), (m, n), generator=g)]
    mask = torch.rand(m, n, generator=g) < 0.5
    if n:  # a full column and an empty one, an empty row and a (near) full one
        mask[:, 0], mask[:, -1] = True, False
        mask[0], mask[-1, :-1] = False, True
    fill = pool[torch.randint(0, len(pool), fill_shape, generator=g)]
    A = sf.sparse_coo_tensor(mask.nonzero().T, D[mask], (m, n), fill_value=fill).to_sparse_csr()
    return A, torch.where(mask, D, fill)


def _no_lanes(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("the CSR path built lanes")
    monkeypatch.setattr(sort_mod, "Lanes", fail)


def _same(a, b):
    a = a.to_dense() if isinstance(a, sf.SparseFillTensor) else a
    T.assert_dense_equal(a, b, equal_nan=True, rtol=0, atol=0)
    assert a.dtype == b.dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sort_csr_rows_and_columns_natively(dtype, monkeypatch):
    """sort along dims 1, -1 (per-row fill or one) and 0 (per-column fill or
    one), both directions, stable or not: the values and indices of the
    dense stable sort (ties with the fill by position), with no lanes
    built; short rows (insertion) and long (heapsort)."""
    _no_lanes(monkeypatch)
    for m, n in ((7, 9), (3, 1), (1, 13), (45, 50), (2, 0)):
        for d, fill_shape in ((1, (m, 1)), (-1, ()), (0, (1, n)), (0, ())):
            A, D = _case(dtype, m, n, m * n + d, fill_shape)
            for desc in (False, True):
                for stable in (False, True):
                    v, i = torch.sort(A, dim=d, descending=desc, stable=stable)
                    dv, di = torch.sort(D, dim=d, descending=desc, stable=True)
                    assert v.layout == torch.sparse_csr
                    _same(v, dv)
                    assert torch.equal(i, di), (m, n, d, desc)
                    assert torch.equal(torch.argsort(A, d, descending=desc), di)
            if d == 0:
                _same(torch.msort(A), torch.msort(D))


def test_sort_csr_leaves_the_input_alone():
    """The result owns its pattern: editing it leaves A's as it was."""
    A, D = _case(torch.float64, 6, 7, 1, (6, 1))
    v = torch.sort(A, 1).values
    v.crow_indices().zero_()
    _same(A, D)


def _grad_case(fill, full):
    m, n = 5, 6
    g = torch.Generator().manual_seed(2)
    mask = torch.ones(m, n, dtype=torch.bool) if full else torch.rand(m, n, generator=g) < 0.5
    vals = torch.linspace(-3.1, 3.3, int(mask.sum()), dtype=torch.float64)
    vals[::4] = 0.7  # ties with the 0.7 fill
    return mask, vals, torch.tensor(fill, dtype=torch.float64)


def _run(op, mask, v, f):
    A = sf.sparse_coo_tensor(mask.nonzero().T, v, mask.shape, fill_value=f).to_sparse_csr()
    if op == "msort":
        return torch.msort(A).to_dense()
    return torch.sort(A, 1, descending=op == "sort-desc").values.to_dense()


def _dense_run(op, D):
    if op == "msort":
        return torch.msort(D)
    return torch.sort(D, dim=1, descending=op == "sort-desc", stable=True).values


@pytest.mark.parametrize("fill", [0.7, -2.0, math.inf, -math.inf, math.nan], ids=str)
@pytest.mark.parametrize("op", ["sort", "sort-desc", "msort"])
def test_sort_csr_gradients(op, fill):
    """The gradient reaches the stored values and the fill as dense
    autograd's (the stable sort's elements); a fill that covers no element
    gets 0, never NaN, even +-inf or NaN; gradcheck and gradgradcheck where
    the fill is finite."""
    for full in (False, True):
        mask, vals, f0 = _grad_case(fill, full)
        v, f = vals.clone().requires_grad_(), f0.clone().requires_grad_()
        if math.isfinite(fill) and not full:
            # no ties here: a finite difference across one moves elements
            u = (torch.linspace(-3.1, 3.3, vals.shape[0], dtype=torch.float64) + 0.0123
                 ).requires_grad_()
            torch.autograd.gradcheck(lambda u, f: _run(op, mask, u, f), (u, f))
            torch.autograd.gradgradcheck(lambda u, f: _run(op, mask, u, f), (u, f))
        w = torch.randn(mask.shape, generator=torch.Generator().manual_seed(5),
                        dtype=torch.float64)
        gv, gf = torch.autograd.grad((_run(op, mask, v, f) * w).sum(), (v, f))
        dv, df = vals.clone().requires_grad_(), f0.clone().requires_grad_()
        D = torch.where(mask, torch.zeros(mask.shape, dtype=torch.float64).index_put(
            tuple(mask.nonzero().T), dv), df)
        wv, wf = torch.autograd.grad((_dense_run(op, D) * w).sum(), (dv, df))
        assert torch.equal(gv, wv)
        torch.testing.assert_close(gf, wf, rtol=0, atol=1e-12)
        if full:
            assert torch.equal(gf, torch.zeros_like(gf))


def test_lane_sort_fill_refuses_bad_input_by_name():
    """The native sort's bad input: an exception naming the argument."""
    op = torch.ops.sparsefill.lane_sort_fill
    crow, col, v, f = torch.tensor([0, 2]), torch.tensor([0, 3]), torch.zeros(2), torch.tensor(1.)
    perm, slot, idx = op(crow, col, v, f, 4, True, True)
    assert perm.shape == slot.shape == (2,) and idx.shape == (1, 4)
    assert op(crow, col, v, f, 4, True, False)[2].shape == (1, 0)
    for args, match in [((crow, col, v, f, -1, True, True), "n must be non-negative"),
                        ((crow, torch.tensor([3, 0]), v, f, 4, True, True), "col_indices"),
                        ((crow, torch.tensor([0, 4]), v, f, 4, True, True), "col_indices"),
                        ((crow, torch.tensor([-1, 2]), v, f, 4, True, True), "col_indices"),
                        ((crow, col[:1], v, f, 4, True, True), "col_indices"),
                        ((torch.tensor([0, 3]), col, v, f, 4, True, True), "crow_indices"),
                        ((torch.tensor([0, 2, 1]), col, v, f, 4, True, True), "crow_indices"),
                        ((torch.tensor([[0, 2]]), col, v, f, 4, True, True), "crow_indices"),
                        ((crow, col, v, torch.zeros(3), 4, True, True), "fill"),
                        ((crow, col, v, f.double(), 4, True, True), "fill"),
                        ((crow, col, v.reshape(2, 1), f, 4, True, True), "values"),
                        ((crow, col, v.bool(), f.bool(), 4, True, True), "values")]:
        with pytest.raises(RuntimeError, match=match):
            op(*args)


def test_no_rows_with_a_fill_per_row():
    """A CSR matrix of no rows with a per-row fill (of no values): topk and
    sort answer torch's empty results (the native ops read no fill)."""
    A = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0), (0, 5),
                             fill_value=torch.zeros(0, 1)).to_sparse_csr()
    D = A.to_dense()
    for got, want in ((torch.topk(A, 2, 1), torch.topk(D, 2, 1)),
                      (torch.sort(A, 1), torch.sort(D, 1))):
        for g, w in zip(got, want):
            g = g.to_dense() if isinstance(g, sf.SparseFillTensor) else g
            assert g.shape == w.shape and g.dtype == w.dtype
