"""The union of two patterns (docs/design.md#architecture): union_plan and the fused union_values,
whose chunks run on torch's threads. The element-wise ops take union_values
when nothing is differentiated or traced and union_plan with ATen gathers
otherwise; both must give the dense result, the same bits, and the same bits
on 1 and 2 threads."""
import math

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf

ops = torch.ops.sparsefill


def _pattern(shape, density, seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(shape, generator=g) < density).nonzero().t().contiguous()


def _values(n, dense=(), seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn((n,) + tuple(dense), generator=g, dtype=torch.float64).to(dtype)


def _same_bits(x, y):
    return x.dtype == y.dtype and x.shape == y.shape and torch.equal(
        x.view(-1).view(torch.uint8) if x.dtype != torch.bool else x,
        y.view(-1).view(torch.uint8) if y.dtype != torch.bool else y)


def _reference(ia, va, fa, ib, vb, fb, shape):
    """The union by dense masks: indices, and each operand's rows (its fill
    where it stores none)."""
    sd = ia.shape[0]
    dense = tuple(va.shape[1:])
    mask_a = torch.zeros(shape[:sd], dtype=torch.bool)
    mask_b = torch.zeros(shape[:sd], dtype=torch.bool)
    mask_a[tuple(ia)] = True
    mask_b[tuple(ib)] = True
    indices = (mask_a | mask_b).nonzero().t()

    def rows(i, v, f):
        full = f.to(v.dtype).expand(shape[:sd] + dense).clone()
        full[tuple(i)] = v
        return full[tuple(indices)]
    return indices, rows(ia, va, fa), rows(ib, vb, fb)


@pytest.mark.parametrize("shape, dense", [((40,), ()), ((6, 7), ()), ((3, 4, 5), ()),
                                          ((9, 8), (2,)), ((5, 6), (2, 3))])
@pytest.mark.parametrize("fills", [(0.0, 0.5), (math.inf, -math.inf), (math.nan, 0.0)])
def test_union_values_against_dense_masks(shape, dense, fills):
    sd = len(shape)
    ia, ib = _pattern(shape, 0.4, 1), _pattern(shape, 0.3, 2)
    va = _values(ia.shape[1], dense, 3)
    vb = _values(ib.shape[1], dense, 4, torch.float32)  # dtypes differ: each kept
    fa, fb = torch.tensor(fills[0]), torch.full(dense, fills[1])
    got = ops.union_values(ia, va, fa, ib, vb, fb, list(shape))
    want = _reference(ia, va, fa, ib, vb, fb, shape + dense)
    assert torch.equal(got[0], want[0])
    assert _same_bits(got[1], want[1]) and _same_bits(got[2], want[2])
    plan = ops.union_plan(ia, ib, list(shape))
    assert torch.equal(plan[0], got[0])
    assert _same_bits(ops.gather_with_fill(va, fa, plan[1]), got[1])
    assert _same_bits(ops.gather_with_fill(vb, fb.to(vb.dtype), plan[2]), got[2])
    assert got[0].shape[0] == sd


@pytest.mark.parametrize("na, nb", [(0, 0), (0, 5), (5, 0)])
def test_union_values_with_an_empty_operand(na, nb):
    ia = torch.arange(0, 2 * na, 2).view(1, -1)
    ib = (torch.arange(0, 2 * nb, 2) + 1).view(1, -1)
    va, vb = _values(na), _values(nb, seed=1)
    fa, fb = torch.tensor(-1.0, dtype=torch.float64), torch.tensor(7.0, dtype=torch.float64)
    got = ops.union_values(ia, va, fa, ib, vb, fb, [20])
    want = _reference(ia, va, fa, ib, vb, fb, (20,))
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_union_values_no_sparse_dims():
    one = torch.zeros(0, 1, dtype=torch.int64)
    got = ops.union_values(one, torch.tensor([[1.0, 2.0]]), torch.tensor(0.0),
                           torch.zeros(0, 0, dtype=torch.int64), torch.zeros(0, 2),
                           torch.tensor(3.0), [])
    assert got[0].shape == (0, 1)
    assert torch.equal(got[1], torch.tensor([[1.0, 2.0]]))
    assert torch.equal(got[2], torch.tensor([[3.0, 3.0]]))


def _big(sd, seed):
    shape = (400_000,) if sd == 1 else (800, 500)
    return shape, _pattern(shape, 0.5, seed)


@pytest.mark.parametrize("sd", [1, 2])
def test_one_and_two_threads_give_the_same_bits(sd):
    shape, ia = _big(sd, 1)
    _, ib = _big(sd, 2)
    va, vb = _values(ia.shape[1], seed=3), _values(ib.shape[1], seed=4)
    fa, fb = torch.tensor(0.5, dtype=torch.float64), torch.tensor(math.nan, dtype=torch.float64)
    A = sf.sparse_coo_tensor(ia, va, shape, fill_value=fa)
    B = sf.sparse_coo_tensor(ib, vb, shape, fill_value=fb)
    before = torch.get_num_threads()
    results = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append((ops.union_plan(ia, ib, list(shape)),
                            ops.union_values(ia, va, fa, ib, vb, fb, list(shape)),
                            torch.add(A, B)))
    finally:
        torch.set_num_threads(before)
    # add, whose result is exact: a transcendental op's ATen kernel may round
    # an element differently in its vector loop and its scalar tail, which
    # sit elsewhere on 2 threads (ATen's, not the merge's).
    (p1, u1, c1), (p2, u2, c2) = results
    for x, y in zip(p1 + u1, p2 + u2):
        assert _same_bits(x, y)
    assert torch.equal(c1.indices(), c2.indices()) and _same_bits(c1.values(), c2.values())
    assert torch.equal(u1[0], (torch.zeros(shape, dtype=torch.bool).index_put_(
        tuple(ia), torch.tensor(True)).index_put_(tuple(ib), torch.tensor(True))).nonzero().t())


@pytest.mark.parametrize("layout", T.LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("fill", T.FILLS)
@pytest.mark.parametrize("op", [torch.add, torch.mul, torch.atan2, torch.maximum, torch.div])
def test_fused_and_composite_paths_agree(op, fill, layout):
    """No gradient: union_values; values requiring grad: union_plan and
    ATen gathers. The same bits either way, and the dense result."""
    A = T.random_tensor("random", fill, layout, seed=1)
    B = T.random_tensor("random", -fill if fill == fill else 0.25, layout, seed=2)
    fused = op(A, B)
    A2 = A.detach().clone().requires_grad_()
    composite = op(A2, B)
    assert composite.requires_grad
    assert _same_bits(fused._sf_values, composite._sf_values.detach())
    assert _same_bits(fused._fill_value(), composite._fill_value().detach())
    T.assert_dense_equal(fused.to_dense(), op(A.to_dense(), B.to_dense()))


def _calls(fn):
    with torch.autograd.profiler.profile() as prof:
        fn()
    return {e.name for e in prof.function_events}


def test_the_fused_merge_is_taken_only_without_gradients():
    A = T.random_tensor("random", 1.5, seed=1)
    B = T.random_tensor("random", -2.0, seed=2)
    # atan2: an op without a C twin (add and the like merge in union_binop:
    # test_union_binop.py)
    names = _calls(lambda: torch.atan2(A, B))
    assert "sparsefill::union_values" in names and "sparsefill::union_plan" not in names
    A2 = A.detach().clone().requires_grad_()
    names = _calls(lambda: torch.atan2(A2, B))
    assert "sparsefill::union_plan" in names and "sparsefill::union_values" not in names
    with torch.no_grad():
        assert "sparsefill::union_values" in _calls(lambda: torch.atan2(A2, B))


def test_union_values_refuses_to_be_differentiated():
    idx = torch.tensor([[0, 2]])
    v = torch.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="union_values has no derivative"):
        ops.union_values(idx, v, torch.tensor(0.0), idx, v.detach(), torch.tensor(0.0), [3])
    with torch.no_grad():
        assert torch.equal(ops.union_values(idx, v, torch.tensor(0.0), idx, v.detach(),
                                            torch.tensor(0.0), [3])[1], v.detach())


def test_per_slice_fill_falls_back_to_the_gathers():
    A = T.random_tensor("random", 0.5, seed=1).coalesce()
    per_row = torch.arange(A.shape[0], dtype=A.dtype).view(-1, 1)
    P = sf.sparse_coo_tensor(A.indices(), A.values(), A.shape, fill_value=per_row)
    B = T.random_tensor("random", -1.0, seed=2).coalesce()
    names = _calls(lambda: P + B)
    assert "sparsefill::union_plan" in names
    T.assert_dense_equal((P + B).to_dense(), P.to_dense() + B.to_dense())
    with pytest.raises(RuntimeError, match="per-slice fill goes through union_plan"):
        ops.union_values(A.indices(), A.values(), per_row, B.indices(), B.values(),
                         B._fill_value(), list(A.shape))


@pytest.mark.parametrize("op", [ops.union_plan, lambda ia, ib, size: ops.union_values(
    ia, torch.zeros(ia.shape[1]), torch.tensor(0.0), ib, torch.zeros(ib.shape[1]),
    torch.tensor(0.0), size)], ids=["union_plan", "union_values"])
@pytest.mark.parametrize("threads", [1, 2])
def test_bad_indices_are_refused_in_any_chunk(op, threads):
    n = 200_000
    good = torch.arange(0, n, 2).view(1, -1)
    late = good.clone()
    late[0, -10], late[0, -9] = late[0, -9].item(), late[0, -10].item()  # unsorted near the end
    dup = good.clone()
    dup[0, 3] = dup[0, 2]
    out_of_range = good.clone()
    out_of_range[0, -1] = n
    negative = good.clone()
    negative[0, 0] = -1
    odd = torch.arange(1, n, 2).view(1, -1)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for bad, message in ((late, "coalesced"), (dup, "coalesced"),
                             (out_of_range, "out of range"), (negative, "negative")):
            for ia, ib in ((bad, odd), (odd, bad)):
                with pytest.raises(RuntimeError, match=message):
                    op(ia, ib, [n])
        with pytest.raises(RuntimeError, match="one row per sparse dimension"):
            op(good, odd, [n, 1])
    finally:
        torch.set_num_threads(before)
