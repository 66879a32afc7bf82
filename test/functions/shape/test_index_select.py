"""index_select along a sparse dim other than the first (docs/design.md#index-select): one
threaded C pass (sparsefill::index_select_plan) gives the result's indices,
coalesced without a global sort, and each element's source; the values are
gathered by ATen, which carries the gradients. Checked against the dense
computation for every fill, against the same call on the dense tensor for
any index (repeats, unsorted, empty), on 1 and 2 threads (the same bits),
and on bad input (a clear error naming the argument)."""
import math

import pytest
import torch

import sf_testing as T
from sf_testing import dense_of
import torch_sparsefill as sf

ops = torch.ops.sparsefill
F64 = torch.float64


def _tensor(shape, density, fill, *, dense=(), seed=0, layout=torch.sparse_coo):
    g = torch.Generator().manual_seed(seed)
    indices = (torch.rand(shape, generator=g) < density).nonzero().t().contiguous()
    values = torch.randn((indices.shape[1],) + tuple(dense), generator=g, dtype=F64)
    A = sf.sparse_coo_tensor(indices, values, tuple(shape) + tuple(dense), fill_value=fill)
    return A.to_sparse(layout=layout) if layout != torch.sparse_coo else A


def _index(n, k, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, n, (k,), generator=g)


def _check(A, dim, index):
    out = A.index_select(dim, index)
    expected = dense_of(A).index_select(dim, index)
    T.assert_dense_equal(dense_of(out), expected)
    if out.layout == torch.sparse_coo:
        assert out.is_coalesced()
        indices = out._indices()
        # coalesced means strictly increasing row-major positions
        linear = torch.zeros(indices.shape[1], dtype=torch.int64)
        for d in range(indices.shape[0]):
            linear = linear * out.shape[d] + indices[d]
        assert bool((linear[1:] > linear[:-1]).all())
    return out


INDEXES = {
    "random": lambda n: _index(n, 2 * n, seed=1),  # repeats, any order
    "sorted": lambda n: torch.sort(_index(n, n, seed=2)).values,
    "reversed": lambda n: torch.arange(n - 1, -1, -1),
    "one_repeated": lambda n: torch.full((5,), n // 2, dtype=torch.int64),
    "empty": lambda n: torch.empty(0, dtype=torch.int64),
    "long": lambda n: _index(n, 60, seed=3),  # > 24 pairs in a row: the heap sort
}


@pytest.mark.parametrize("fill", T.FILLS)
@pytest.mark.parametrize("index", list(INDEXES))
def test_columns_of_a_matrix(fill, index):
    A = _tensor((30, 20), 0.3, fill)
    _check(A, 1, INDEXES[index](20))


@pytest.mark.parametrize("fill", [0.0, 0.5, math.inf, math.nan])
@pytest.mark.parametrize("dim", [1, 2])
@pytest.mark.parametrize("index", ["random", "sorted", "one_repeated", "empty"])
def test_three_sparse_dims(fill, dim, index):
    A = _tensor((6, 7, 8), 0.3, fill, seed=4)
    _check(A, dim, INDEXES[index](A.shape[dim]))


@pytest.mark.parametrize("fill", [0.5, -math.inf])
def test_hybrid_and_csr(fill):
    H = _tensor((9, 8), 0.4, fill, dense=(3,), seed=5)
    _check(H, 1, INDEXES["random"](8))
    C = _tensor((9, 8), 0.4, fill, seed=6, layout=torch.sparse_csr)
    assert _check(C, 1, INDEXES["random"](8)).layout == torch.sparse_csr


def test_per_slice_fill_follows_the_index():
    A = _tensor((5, 6), 0.4, 0.0, seed=7)
    fill = torch.arange(6, dtype=F64).reshape(1, 6)  # one fill per column
    B = sf.sparse_coo_tensor(A._indices(), A._values(), A.shape, fill_value=fill)
    _check(B, 1, torch.tensor([5, 0, 5, 2]))


def test_empty_tensor_and_all_stored():
    _check(_tensor((4, 5), 0.0, 2.0), 1, torch.tensor([4, 4, 1]))
    _check(_tensor((4, 5), 1.0, 2.0), 1, torch.tensor([4, 4, 1]))


def test_getitem_with_an_index_tensor():
    A = _tensor((8, 9), 0.3, 1.5, seed=8)
    idx = torch.tensor([8, -1, 0, 3])
    T.assert_dense_equal(dense_of(A[:, idx]), dense_of(A)[:, idx])


@pytest.mark.parametrize("fill", [0.5, math.inf])
def test_gradients(fill):
    A = _tensor((5, 6), 0.4, fill, seed=9)
    v = A._values().clone().requires_grad_()
    f = torch.tensor(fill if math.isfinite(fill) else 0.25, dtype=F64, requires_grad=True)
    index = torch.tensor([5, 1, 1, 3])

    def run(v, f):
        B = sf.sparse_coo_tensor(A._indices(), v, A.shape, fill_value=f)
        return dense_of(B.index_select(1, index))

    assert torch.autograd.gradcheck(run, (v, f))
    assert torch.autograd.gradgradcheck(run, (v, f))


def test_gradients_equal_dense_gradients():
    A = _tensor((7, 8), 0.4, 0.5, seed=10)
    index = torch.tensor([7, 2, 2, 0, 5])
    weight = torch.randn(7, 5, dtype=F64)
    v = A._values().clone().requires_grad_()
    f = torch.tensor(0.5, dtype=F64, requires_grad=True)
    B = sf.sparse_coo_tensor(A._indices(), v, A.shape, fill_value=f)
    (dense_of(B.index_select(1, index)) * weight).sum().backward()
    D = dense_of(A).clone().requires_grad_()
    (D.index_select(1, index) * weight).sum().backward()
    stored = torch.zeros(7, 8, dtype=torch.bool)
    stored[tuple(A._indices())] = True
    torch.testing.assert_close(v.grad, D.grad[tuple(A._indices())])
    torch.testing.assert_close(f.grad, D.grad[~stored].sum())


@pytest.mark.parametrize("shape,dim", [((400, 300), 1), ((40, 50, 40), 2), ((40, 50, 40), 1)])
def test_one_and_two_threads_give_the_same_result(shape, dim):
    """Enough elements (> 65,536) for one chunk per thread."""
    A = _tensor(shape, 0.8, 0.5, seed=11)
    index = _index(shape[dim], shape[dim] // 2, seed=12)
    before = torch.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            torch.set_num_threads(threads)
            results.append(ops.index_select_plan(A._indices(), index, dim, list(shape)))
    finally:
        torch.set_num_threads(before)
    for one, two in zip(*results):
        assert torch.equal(one, two)
    _check(A, dim, index)


def test_negative_index_is_refused_naming_the_argument():
    A = _tensor((4, 5), 0.5, 1.0)
    with pytest.raises(IndexError, match="index.*-1.*out of bounds"):
        A.index_select(1, torch.tensor([0, -1]))
    with pytest.raises(IndexError, match="index.*5.*out of bounds"):
        A.index_select(1, torch.tensor([5]))
    with pytest.raises(IndexError, match=r"index\[1\] = -1 is out of bounds"):
        ops.index_select_plan(A._indices(), torch.tensor([0, -1]), 1, [4, 5])


@pytest.mark.parametrize("threads", [1, 2])
def test_op_refuses_bad_indices(threads):
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        unsorted = torch.tensor([[0, 0, 1], [2, 1, 0]])
        with pytest.raises(RuntimeError, match="coalesced"):
            ops.index_select_plan(unsorted, torch.tensor([1]), 1, [2, 3])
        duplicate = torch.tensor([[0, 0], [1, 1]])
        with pytest.raises(RuntimeError, match="coalesced"):
            ops.index_select_plan(duplicate, torch.tensor([1]), 1, [2, 3])
        with pytest.raises(RuntimeError, match=r"indices\[0, 1\] = 5 is out of range"):
            ops.index_select_plan(torch.tensor([[0, 5], [1, 1]]), torch.tensor([1]), 1, [2, 3])
        # an error in the second chunk (> 65,536 elements: two on 2 threads)
        big = _tensor((400, 300), 0.8, 0.0, seed=13)._indices().clone()
        big[1, -1] = -3
        with pytest.raises(RuntimeError, match="is negative"):
            ops.index_select_plan(big, torch.tensor([1]), 1, [400, 300])
        with pytest.raises(RuntimeError, match="not a sparse dimension"):
            ops.index_select_plan(unsorted, torch.tensor([1]), 2, [2, 3])
        with pytest.raises(RuntimeError, match="index must be 1-D"):
            ops.index_select_plan(duplicate, torch.tensor([[1]]), 1, [2, 3])
    finally:
        torch.set_num_threads(before)


def test_plan_sources_match_a_sort():
    """The plan against the definition: every element once per position of
    its coordinate in the index, sorted (the sources follow their columns)."""
    A = _tensor((12, 10, 9), 0.3, 0.0, seed=14)
    index = _index(10, 25, seed=15)
    indices, src = ops.index_select_plan(A._indices(), index, 1, [12, 10, 9])
    old = A._indices()
    expect_cols, expect_src = [], []
    for e in range(old.shape[1]):
        for p in (index == old[1, e]).nonzero().view(-1).tolist():
            expect_cols.append((int(old[0, e]), p, int(old[2, e])))
            expect_src.append(e)
    order = sorted(range(len(expect_cols)), key=lambda t: expect_cols[t])
    assert indices.t().tolist() == [list(expect_cols[t]) for t in order]
    assert src.tolist() == [expect_src[t] for t in order]
