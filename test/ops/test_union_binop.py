"""The binary rule of two SparseFillTensors in one native merge
(functions/elementwise/merged.py: union_binop for COO, ewise_merge for two
CSR operands): the dense computation exactly (values, dtype, NaN positions),
the structural union pattern, the route's bits, and the route wherever the
merge does not serve."""
import math

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf

ops = torch.ops.sparsefill
OPS = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}


def _keys(shape, density, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) < density).nonzero().t().contiguous()


def _operand(indices, fill, dtype, layout, seed, shape):
    g = torch.Generator().manual_seed(seed)
    n = indices.shape[1]
    if dtype == torch.int64:
        values = torch.randint(-9, 10, (n,), generator=g)
    else:
        values = torch.randn(n, generator=g, dtype=torch.float64).to(dtype)
        values[:3] = torch.tensor([0.0, -0.0, math.nan])[:min(3, n)].to(dtype)
    A = sf.sparse_coo_tensor(indices, values, shape, fill_value=torch.tensor(fill, dtype=dtype))
    return A if layout == torch.sparse_coo else A.to_sparse_csr()


def _calls(fn):
    with torch.autograd.profiler.profile() as prof:
        out = fn()
    return out, {e.name for e in prof.function_events}


def _check(op, A, B):
    """op(A, B) by the merge against the dense computation, the union pattern
    and the route (A's values requiring grad) bit for bit."""
    out, names = _calls(lambda: OPS[op](A, B))
    # (one pattern in both, e.g. both empty: the values-only <op>_same)
    assert {"sparsefill::union_binop", "sparsefill::ewise_merge",
            f"sparsefill::{op}_same"} & names, names
    dense = OPS[op](A.to_dense(), B.to_dense())
    got = out.to_dense()
    assert got.dtype == dense.dtype and out.layout == A.layout
    T.assert_dense_equal(got, dense, rtol=0, atol=0)
    assert torch.equal(got.isnan(), dense.isnan())
    fill = OPS[op](A._fill_value(), B._fill_value())
    assert torch.equal(out._fill_value().isnan(), fill.isnan())
    assert out._fill_value().isnan() or torch.equal(out._fill_value(), fill)
    mask = A.to_sparse_coo().to_dense(fill=0).new_zeros(A.shape, dtype=torch.bool)
    for M in (A, B):
        mask[tuple(M.to_sparse_coo().coalesce().indices())] = True
    assert torch.equal(out.to_sparse_coo().coalesce().indices(), mask.nonzero().t())
    if A.dtype.is_floating_point:
        route = OPS[op](A.detach().clone().requires_grad_(), B)
        assert torch.equal(out.to_sparse_coo().values().view(torch.uint8),
                           route.detach().to_sparse_coo().values().view(torch.uint8))


@pytest.mark.parametrize("layouts", [(torch.sparse_coo,) * 2, (torch.sparse_csr,) * 2,
                                     (torch.sparse_csr, torch.sparse_coo),
                                     (torch.sparse_coo, torch.sparse_csr)],
                         ids=["coo", "csr", "csr-coo", "coo-csr"])
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("fills", [(1.0, 2.0), (0.0, -0.0), (math.inf, -math.inf),
                                   (math.nan, 0.0), (0.0, 0.0)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_floats_against_dense(dtype, fills, op, layouts):
    shape = (9, 11)
    ia, ib = _keys(shape, 0.4, 1), _keys(shape, 0.3, 2)
    A = _operand(ia, fills[0], dtype, layouts[0], 3, shape)
    B = _operand(ib, fills[1], dtype, layouts[1], 4, shape)
    _check(op, A, B)
    _check(op, B, A)


@pytest.mark.parametrize("layout", T.LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
@pytest.mark.parametrize("fills", [(1, 2), (0, -7), (2**62, 2**62)])  # the last wraps, as torch
def test_int64_against_dense(fills, op, layout):
    shape = (8, 6)
    A = _operand(_keys(shape, 0.5, 5), fills[0], torch.int64, layout, 6, shape)
    B = _operand(_keys(shape, 0.5, 7), fills[1], torch.int64, layout, 8, shape)
    _check(op, A, B)


@pytest.mark.parametrize("layout", T.LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("case", ["empty-a", "empty-both", "disjoint", "identical", "full"])
def test_pattern_corners(case, layout):
    shape = (7, 5)
    every = _keys(shape, 2.0, 0)
    ia, ib = {"empty-a": (every[:, :0], _keys(shape, 0.4, 1)),
              "empty-both": (every[:, :0], every[:, :0]),
              "disjoint": (every[:, ::2], every[:, 1::2]),
              "identical": (_keys(shape, 0.4, 1), _keys(shape, 0.4, 1)),
              "full": (every, _keys(shape, 0.4, 1))}[case]
    A = _operand(ia, 1.5, torch.float64, layout, 2, shape)
    B = _operand(ib, -2.0, torch.float64, layout, 3, shape)
    _check("add", A, B)
    _check("sub", B, A)


def test_an_uncoalesced_operand_is_coalesced_first():
    idx = torch.tensor([[2, 0, 2, 1], [1, 3, 1, 0]])  # (2, 1) twice, unsorted
    A = sf.sparse_coo_tensor(idx, torch.tensor([1.0, 2.0, 3.0, 4.0]), (3, 4), fill_value=0.5)
    B = _operand(_keys((3, 4), 0.5, 1), -1.0, torch.float32, torch.sparse_coo, 2, (3, 4))
    _check("add", A, B)
    _check("mul", B, A)


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_give_the_same_bits(threads):
    shape = (300, 400)
    A = _operand(_keys(shape, 0.3, 1), 1.0, torch.float64, torch.sparse_coo, 2, shape)
    B = _operand(_keys(shape, 0.3, 3), 2.0, torch.float64, torch.sparse_coo, 4, shape)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        _check("add", A, B)
    finally:
        torch.set_num_threads(before)


def _wide(ncols, nse, fill, seed, layout):
    """A 5 x ncols operand of about nse stored elements in random columns."""
    g = torch.Generator().manual_seed(seed)
    key = torch.unique(torch.randint(0, 5 * ncols, (nse,), generator=g))
    values = torch.randn(key.numel(), generator=g, dtype=torch.float64)
    A = sf.sparse_coo_tensor(torch.stack([key // ncols, key % ncols]), values, (5, ncols),
                             fill_value=fill, is_coalesced=True)
    return A if layout == torch.sparse_coo else A.to_sparse_csr()


# The count pass marks columns where the column count is small next to the
# elements (ops/common/union_rows.h) and merges elsewhere: both ways give the
# union exactly (no dense view here: ncols up to 3,000,000) and refuse a
# column out of range or out of order.
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=["coo", "csr"])
@pytest.mark.parametrize("ncols, nse", [(64, 200), (100_000, 20_000), (100_000, 300),
                                        (3_000_000, 5_000)], ids=["marks", "marks-wide",
                                                                 "merge-sparse", "merge-wide"])
def test_marks_and_merge_give_the_union(ncols, nse, layout):
    A = _wide(ncols, nse, 1.5, 1, layout)
    # ncols 64: B's positions a subset of A's (the same draws, fewer), many shared
    B = _wide(ncols, nse // 2, -2.0, 1 if ncols == 64 else 2, layout)
    out, names = _calls(lambda: A + B)
    assert {"sparsefill::union_binop", "sparsefill::ewise_merge"} & names, names

    def stored(M):
        C = M.to_sparse_coo()
        return dict(zip(map(tuple, C.indices().t().tolist()), C.values().tolist()))

    a, b = stored(A), stored(B)
    got = stored(out)
    assert list(got) == sorted(set(a) | set(b))
    # where both store, a + b; where one does, its value + the other's fill
    assert list(got.values()) == [a.get(k, 1.5) + b.get(k, -2.0) for k in got]
    assert out._fill_value().item() == -0.5
    if layout == torch.sparse_coo:
        idx = A.to_sparse_coo().indices()
        for bad, message in ((idx.flip(1), "indices_a"), (idx * torch.tensor([[1], [ncols]]),
                                                          "out of range")):
            args = [bad, A.values(), A._fill_value(), B.indices(), B.values(), B._fill_value(),
                    [5, ncols], 0]
            with pytest.raises(RuntimeError, match=message):
                ops.union_binop(*args)
    else:
        col = A.col_indices().clone()
        col[[0, 1]] = col[[1, 0]]  # two columns of row 0 swapped
        with pytest.raises(RuntimeError, match="ewise_merge operands"):
            ops.ewise_merge(A.crow_indices(), col, A.values(), B.crow_indices(),
                            B.col_indices(), B.values(), ncols, 0, None, None)


def test_the_route_serves_the_rest():
    shape = (6, 7)
    A = _operand(_keys(shape, 0.4, 1), 1.0, torch.float64, torch.sparse_coo, 2, shape)
    B = _operand(_keys(shape, 0.4, 3), 2.0, torch.float64, torch.sparse_coo, 4, shape)
    Ai = _operand(_keys(shape, 0.4, 1), 3, torch.int64, torch.sparse_coo, 2, shape)
    Bi = _operand(_keys(shape, 0.4, 3), 2, torch.int64, torch.sparse_coo, 4, shape)
    for fn in (lambda: A.detach().clone().requires_grad_() + B,  # a gradient tracked
               lambda: torch.add(A, B, alpha=2.0),  # alpha: a fused multiply ATen owns
               lambda: A + B.to(torch.float32),  # dtypes differ: torch's promotion
               lambda: torch.maximum(A, B),  # no exact twin listed
               lambda: torch.div(A, B, rounding_mode="floor"),
               lambda: Ai / Bi):  # an int64 true division gives floats
        out, names = _calls(fn)
        assert "sparsefill::union_binop" not in names and "sparsefill::ewise_merge" not in names
        T.assert_dense_equal(out.detach().to_dense(), fn().detach().to_dense())
    (A.detach().clone().requires_grad_() + B).sum()  # still differentiable
    x = A.detach().clone().requires_grad_()
    (x + B).to_dense().sum().backward()
    assert torch.equal(x.grad.to_dense(), torch.ones(shape, dtype=torch.float64))


def _args(**change):
    idx = torch.tensor([[0, 1, 1], [2, 0, 3]])
    args = dict(indices_a=idx, values_a=torch.tensor([1.0, 2.0, 3.0]), fill_a=torch.tensor(0.5),
                indices_b=torch.tensor([[1, 2], [0, 1]]), values_b=torch.tensor([4.0, 5.0]),
                fill_b=torch.tensor(-1.0), size=[3, 4], binop=0)
    args.update(change)
    return list(args.values())


def test_union_binop_direct():
    indices, values = ops.union_binop(*_args())
    assert torch.equal(indices, torch.tensor([[0, 1, 1, 2], [2, 0, 3, 1]]))
    assert torch.equal(values, torch.tensor([0.0, 6.0, 2.0, 5.5]))


@pytest.mark.parametrize("change, message", [
    (dict(binop=20), "binop must be a code of sf_binop"),
    (dict(values_a=torch.tensor([1, 2, 3]), values_b=torch.tensor([4, 5]),
          fill_a=torch.tensor(0), fill_b=torch.tensor(1), binop=4), "int64 division"),
    (dict(values_b=torch.tensor([4.0, 5.0], dtype=torch.float64)), "values_b must be"),
    (dict(fill_a=torch.tensor([0.5, 1.0])), "fill_a and fill_b must be one element"),
    (dict(values_a=torch.tensor([1.0, 2.0])), "one per stored element"),
    (dict(size=[3, 4, 1]), "size must be 2-D"),
    (dict(indices_a=torch.tensor([[1, 0, 1], [2, 0, 3]])), "indices_a"),
    (dict(indices_a=torch.tensor([[0, 1, 1], [2, 3, 0]])), "coalesced"),
    (dict(indices_a=torch.tensor([[0, 1, 1], [2, 0, 0]])), "coalesced"),
    (dict(indices_b=torch.tensor([[1, 2], [0, 4]])), "out of range"),
    (dict(indices_b=torch.tensor([[1, 3], [0, 1]])), "indices_b"),
])
def test_union_binop_refuses_bad_arguments(change, message):
    with pytest.raises(RuntimeError, match=message):
        ops.union_binop(*_args(**change))


def test_union_binop_refuses_to_be_differentiated():
    with pytest.raises(RuntimeError, match="union_binop has no derivative"):
        ops.union_binop(*_args(values_a=torch.tensor([1.0, 2.0, 3.0], requires_grad=True)))
