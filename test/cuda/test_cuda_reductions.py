"""The CUDA softmax and reductions: the segment kernels against their CPU
kernels, then the public API on CUDA tensors against the dense computation.
Tests marked `gpu` skip without a GPU."""
import itertools
import math

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from sf_testing.cuda import CUDA, TIGHT, both, both_refuse, gpu, random_indices

pytestmark = pytest.mark.cpu_only("chooses CPU and CUDA explicitly")

ops = torch.ops.sparsefill


# ---- softmax and reductions: CUDA kernels == CPU kernels, API == dense ----------
# The segment ops of aten_ext/ops/reductions/ (slice_plan, seg_reduce, seg_max,
# seg_softmax, seg_softmax_backward) against their CPU kernels, then the public
# reductions on CUDA tensors against the dense computation, gradients included.
# Exact equality holds for slice_plan, for every integer output and for
# max/min (a selection: the same winner). Sums, products and softmax combine a
# segment's rows in tree order on the GPU and sequentially on the CPU, and
# CUDA's exp/log/pow are not the C library's: those agree to a tolerance.


def segments(seed, nseg, n, w, *, one_fill=False, dtype=torch.float64, ties=False):
    """Random segments: some empty, some full (s == n), the rest in between;
    values [nse, w], fill [nseg or 1, w], coord (increasing within a segment)."""
    g = torch.Generator().manual_seed(seed)
    counts = torch.randint(0, n + 1, (nseg,), generator=g)
    counts[::4] = 0
    counts[1::5] = n
    seg_ptr = torch.zeros(nseg + 1, dtype=torch.int64)
    seg_ptr[1:] = counts.cumsum(0)
    nse = int(seg_ptr[-1])
    values = torch.randn(nse, w, generator=g, dtype=torch.float64)
    fill = torch.randn(1 if one_fill else nseg, w, generator=g, dtype=torch.float64)
    if ties:
        values, fill = (values * 1.5).round(), (fill * 1.5).round()
    coord = torch.cat([torch.randperm(n, generator=g)[:c].sort().values for c in counts.tolist()]
                      + [torch.zeros(0, dtype=torch.int64)])
    return values.to(dtype), fill.to(dtype), seg_ptr, coord


# (nseg, n, w): every group size of the kernels (a thread per item for short
# segments or wide rows, a warp, a block for long segments; the choice is
# sf_cuda_reduce.cu's group_size), w == 0, no segment, n == 0.
SEG_SHAPES = [(7, 5, 1), (30, 200, 1), (60, 50, 3), (3, 20000, 1), (2, 9000, 2), (2000, 4, 40),
              (400, 3, 1), (9, 6, 0), (0, 5, 2), (4, 0, 1)]


@gpu
@pytest.mark.parametrize("size", [(6, 7), (3, 4, 5), (200, 300), (0, 4)], ids=str)
@pytest.mark.parametrize("compact", [False, True])
def test_slice_plan_matches_cpu(size, compact):
    g = torch.Generator().manual_seed(4)
    numel = math.prod(size)
    for nse in (0, min(numel, 7), numel // 3):
        idx = random_indices(g, size, nse, unique=True, sort=True)
        for r in range(1, len(size) + 1):
            for dims in itertools.combinations(range(len(size)), r):
                both(ops.slice_plan, idx, list(size), list(dims), compact)


@gpu
@pytest.mark.parametrize("compact", [False, True])
def test_slice_plan_errors_match_cpu(compact):
    unsorted = torch.tensor([[2, 0, 1], [0, 1, 2]])
    both_refuse(ops.slice_plan, unsorted, [3, 3], [1], compact)  # rows lead: must be sorted
    both(ops.slice_plan, unsorted, [3, 3], [0], compact)  # columns: sorted by the plan
    negative = torch.tensor([[0, 1, 2], [0, -1, 2]])
    both_refuse(ops.slice_plan, negative, [3, 3], [0], compact)
    three = torch.tensor([[0, 1], [0, 7], [1, 1]])  # out of range in a kept dim
    both_refuse(ops.slice_plan, three, [2, 3, 2], [2], compact)
    both_refuse(ops.slice_plan, three, [2, 3, 2], [5], compact)  # bad dims


@gpu
@pytest.mark.parametrize("shape", SEG_SHAPES, ids=str)
@pytest.mark.parametrize("one_fill", [False, True])
def test_seg_reduce_matches_cpu(shape, one_fill):
    values, fill, seg_ptr, _ = segments(0, *shape, one_fill=one_fill)
    n = shape[1]
    both(ops.seg_reduce, values, fill, seg_ptr, n, "sum", **TIGHT)
    # factors near 1: no overflow, whose place would depend on the order
    both(ops.seg_reduce, 1 + values / 1000, 1 + fill / 1000, seg_ptr, n, "prod", **TIGHT)
    both(ops.seg_reduce, (values * 10).long(), (fill * 10).long(), seg_ptr, n, "sum", **TIGHT)
    both(ops.seg_reduce, values.float(), fill.float(), seg_ptr, n, "sum",
               rtol=1e-6, atol=1e-6)
    for dtype in (torch.float16, torch.bfloat16):  # computed in float, rounded back
        both(ops.seg_reduce, values.to(dtype), fill.to(dtype), seg_ptr, n, "sum",
                   rtol=1e-2, atol=1e-2)
    nan_values = values.clone()
    nan_values[::7] = math.nan
    both(ops.seg_reduce, nan_values, fill, seg_ptr, n, "sum", **TIGHT)
    inf_fill = torch.full_like(fill, math.inf)  # a full segment never sees it
    both(ops.seg_reduce, values, inf_fill, seg_ptr, n, "sum", **TIGHT)


@gpu
@pytest.mark.parametrize("shape", SEG_SHAPES, ids=str)
@pytest.mark.parametrize("ties", [False, True])
def test_seg_max_matches_cpu(shape, ties):
    values, fill, seg_ptr, coord = segments(1, *shape, ties=ties)
    n = shape[1]
    nan_values = values.clone()
    nan_values[1::9] = math.nan
    nan_fill = fill.clone()
    nan_fill[::3] = math.nan
    for is_min in (False, True):
        for v, f in ((values, fill), (nan_values, fill), (values, nan_fill),
                     (nan_values, nan_fill), (values, fill[:1])):
            # a selection: values, winners and indices are all exact
            # (a shape with an empty slice is refused by both: "either")
            both(ops.seg_max, v, f, seg_ptr, coord, n, is_min, False, expect="either")
            both(ops.seg_max, v, f, seg_ptr, None, n, is_min, True)
        both(ops.seg_max, values.long(), fill.long(), seg_ptr, coord, n, is_min, False)
        both(ops.seg_max, values.float(), fill.float(), seg_ptr, coord, n, is_min, False)


@gpu
def test_seg_max_ties_go_to_the_first_position():
    # slice 0 stores 5 at coordinates 1 and 3 with fill 5: the fill (coord 0)
    # wins; slice 1 stores coordinates 0..2 (5, 5, 1), fill 5: the stored 0.
    values = torch.tensor([[5.0], [5.0], [5.0], [5.0], [1.0]])
    seg_ptr = torch.tensor([0, 2, 5])
    coord = torch.tensor([1, 3, 0, 1, 2])
    fill = torch.tensor([[5.0], [5.0]])
    out, winner, index = both(ops.seg_max, values, fill, seg_ptr, coord, 4, False, False)[0]
    assert winner.view(-1).tolist() == [-1, 2] and index.view(-1).tolist() == [0, 0]


@gpu
@pytest.mark.parametrize("shape", SEG_SHAPES, ids=str)
@pytest.mark.parametrize("log", [False, True])
def test_seg_softmax_matches_cpu(shape, log):
    values, fill, seg_ptr, _ = segments(2, *shape)
    n = shape[1]
    both(ops.seg_softmax, values, fill, seg_ptr, n, log, **TIGHT)
    both(ops.seg_softmax, values * 40, fill[:1] * 40, seg_ptr, n, log, **TIGHT)  # large shifts
    both(ops.seg_softmax, values, torch.full_like(fill, -math.inf), seg_ptr, n, log, **TIGHT)
    nan_values = values.clone()
    nan_values[::5] = math.nan
    both(ops.seg_softmax, nan_values, fill, seg_ptr, n, log, **TIGHT)
    both(ops.seg_softmax, values.float(), fill.float(), seg_ptr, n, log,
               rtol=1e-5, atol=1e-6)
    both(ops.seg_softmax, values.half(), fill.half(), seg_ptr, n, log,
               rtol=2e-3, atol=2e-3)


@gpu
@pytest.mark.parametrize("shape", SEG_SHAPES, ids=str)
@pytest.mark.parametrize("log", [False, True])
def test_seg_softmax_backward_matches_cpu(shape, log):
    values, fill, seg_ptr, _ = segments(3, *shape)
    n = shape[1]
    out, out_fill = ops.seg_softmax(values, fill, seg_ptr, n, log)
    g = torch.Generator().manual_seed(5)
    gv = torch.randn(out.shape, generator=g, dtype=out.dtype)
    gf = torch.randn(out_fill.shape, generator=g, dtype=out.dtype)
    both(ops.seg_softmax_backward, out, out_fill, gv, gf, seg_ptr, n, log, **TIGHT)
    both(ops.seg_softmax_backward, out.float(), out_fill.float(), gv.float(), gf.float(),
               seg_ptr, n, log, rtol=1e-5, atol=1e-5)


@gpu
def test_segment_errors_match_cpu():
    values = torch.randn(5, 2, dtype=torch.float64)
    fill = torch.randn(3, 2, dtype=torch.float64)
    coord = torch.tensor([0, 2, 1, 3, 4])
    bad_ptrs = [torch.tensor([1, 2, 4, 5]), torch.tensor([0, 2, 4, 6]),  # the ends
                torch.tensor([0, 3, 2, 5]),  # a decrease
                torch.tensor([0, 5, 5, 5])]  # more rows than the slice holds (n = 4)
    for seg_ptr in bad_ptrs:
        both_refuse(ops.seg_reduce, values, fill, seg_ptr, 4, "sum")
        both_refuse(ops.seg_max, values, fill, seg_ptr, None, 4, False, True)
        both_refuse(ops.seg_softmax, values, fill, seg_ptr, 4, False)
        both_refuse(ops.seg_softmax_backward, values, fill, values, fill, seg_ptr, 4, True)
    seg_ptr = torch.tensor([0, 2, 4, 5])
    both_refuse(ops.seg_max, values, fill, seg_ptr, coord, 4, False, False)  # coord[4] = 4 = n
    both_refuse(ops.seg_max, values, fill, seg_ptr, torch.tensor([0, 2, 3, 1, 0]), 4, True, False)
    both_refuse(ops.seg_max, values, fill, seg_ptr, torch.tensor([0, 2, 1, 3, 4]), 3, True, False)
    both_refuse(ops.seg_max, values, fill, seg_ptr, coord[:4], 4, False, False)  # too few
    both_refuse(ops.seg_max, values, fill, torch.tensor([0, 2, 9, 5]), coord[:4], 4, False, False)
    for bad in ([0, 100, 5], [0, -3, 5]):  # segments leaving [0, nse): coords unread
        both_refuse(ops.seg_max, values, fill[:2], torch.tensor(bad), coord, 4, False, False)
    both_refuse(ops.seg_max, values, fill, seg_ptr, None, 0, False, False)  # empty slices
    both_refuse(ops.seg_reduce, values, fill, seg_ptr, 4, "mean")
    both_refuse(ops.seg_softmax, values.long(), fill.long(), seg_ptr, 4, False)
    both_refuse(ops.seg_softmax_backward, values, fill[:1], values, fill[:1], seg_ptr, 4, False)


# ---- the public API on CUDA tensors against the dense computation -------------

def api_leaves(pattern, fill, layout, seed=0):
    """A SparseFillTensor on the GPU built from leaf components v, f."""
    from sf_testing import random_tensor
    A = random_tensor(pattern, fill, torch.sparse_coo, seed=seed).coalesce().to(CUDA)
    v = A._values().detach().clone().requires_grad_()
    f = A._fill_value().detach().clone().requires_grad_()
    X = sf.sparse_coo_tensor(A.indices(), v, A.shape, fill_value=f)
    return (X if layout == torch.sparse_coo else X.to_sparse(layout=layout)), v, f


def check_api(fn, X, v, f):
    """fn(X) on the GPU equals fn of the dense tensor (computed on the CPU,
    torch's reference semantics), and so do the gradients to v and f."""
    out = fn(X)
    got = T.dense(out)
    assert got.device.type == "cuda"
    ref = fn(X.to_dense().cpu())
    torch.testing.assert_close(got.cpu(), ref, equal_nan=True)
    if not got.is_floating_point():
        return
    w = torch.randn(ref.shape, generator=torch.Generator().manual_seed(6), dtype=ref.dtype)
    g_got = torch.autograd.grad((got * w.to(CUDA)).sum(), (v, f), retain_graph=True,
                                allow_unused=True)
    g_ref = torch.autograd.grad((ref * w).sum(), (v, f), allow_unused=True)
    for a, e in zip(g_got, g_ref):
        if a is None or e is None:  # unused (a fill that covers nothing): zero
            assert all(t is None or not t.any() for t in (a, e))
            continue
        assert a.device.type == "cuda"
        torch.testing.assert_close(a.cpu(), e.cpu(), equal_nan=True)


API_SOFTMAX = {
    "softmax0": lambda x: torch.softmax(x, 0), "softmax1": lambda x: torch.softmax(x, 1),
    "log_softmax0": lambda x: torch.log_softmax(x, 0),
    "log_softmax1": lambda x: F_log_softmax(x, 1),
}
API_REDUCE = {
    "sum": lambda x: x.sum(), "sum0": lambda x: x.sum(0), "sum1k": lambda x: x.sum(1, True),
    "mean1": lambda x: x.mean(1), "mean": lambda x: torch.mean(x),
    "amax0": lambda x: x.amax(0), "amin1": lambda x: x.amin(1), "amax": lambda x: x.amax(),
    "max": lambda x: x.max(), "max1": lambda x: x.max(1).values,
    "min0_idx": lambda x: torch.min(x, 0).indices, "max1_idx": lambda x: x.max(1).indices,
    "prod1": lambda x: x.prod(1), "prod": lambda x: x.prod(),
    "logsumexp1": lambda x: torch.logsumexp(x, 1), "logsumexp": lambda x: x.logsumexp((0, 1)),
    "norm": lambda x: x.norm(), "norm1": lambda x: torch.norm(x, dim=1),
    "var0": lambda x: x.var(0), "var": lambda x: x.var(), "std1": lambda x: x.std(1),
}


def F_log_softmax(x, d):
    return torch.nn.functional.log_softmax(x, d)


@gpu
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=str)
@pytest.mark.parametrize("pattern", ["random", "empty", "full", "hybrid"])
@pytest.mark.parametrize("fill", [1.5, -math.inf])
@pytest.mark.parametrize("name", list(API_SOFTMAX))
def test_softmax_api_on_cuda(name, fill, pattern, layout):
    X, v, f = api_leaves(pattern, fill, layout)
    check_api(API_SOFTMAX[name], X, v, f)


@gpu
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=str)
@pytest.mark.parametrize("pattern", ["random", "empty", "full", "hybrid"])
@pytest.mark.parametrize("name", list(API_REDUCE))
def test_reductions_api_on_cuda(name, pattern, layout):
    X, v, f = api_leaves(pattern, 1.5, layout, seed=1)
    check_api(API_REDUCE[name], X, v, f)


@gpu
def test_reductions_api_on_cuda_hybrid_dims():
    X, v, f = api_leaves("hybrid", 0.5, torch.sparse_coo, seed=2)
    for fn in (lambda x: x.sum((0, 2)), lambda x: x.amax((1, 2)), lambda x: x.mean(2),
               lambda x: torch.softmax(x, 2), lambda x: x.var((0, 1)), lambda x: x.prod(0)):
        check_api(fn, X, v, f)


@gpu
def test_per_slice_fill_reductions_on_cuda():
    idx = torch.tensor([[0, 0, 2, 3], [1, 3, 0, 2]], device=CUDA)
    v = torch.tensor([1.0, -2.0, 3.5, 4.0], dtype=torch.float64, device=CUDA).requires_grad_()
    f = torch.tensor([[0.5], [-1.0], [2.0], [7.0]], dtype=torch.float64,
                     device=CUDA).requires_grad_()
    X = sf.sparse_coo_tensor(idx, v, (4, 5), fill_value=f)  # one fill per row
    for fn in (lambda x: torch.softmax(x, 1), lambda x: torch.log_softmax(x, 1),
               lambda x: x.sum(1), lambda x: x.sum(0), lambda x: x.mean(), lambda x: x.amax(1),
               lambda x: x.max(1).values, lambda x: x.logsumexp(1)):
        check_api(fn, X, v, f)


@gpu
def test_softmax_with_minus_inf_fill_is_torch_sparse_softmax_on_cuda():
    from sf_testing import random_tensor
    A = random_tensor("random", -math.inf, seed=3).coalesce().to(CUDA)
    plain = torch.sparse_coo_tensor(A.indices(), A._values(), A.shape,
                                    check_invariants=True).coalesce()
    for d in (0, 1):
        out = torch.sparse.softmax(A, d)
        assert out._fill_value().eq(0).all()
        torch.testing.assert_close(out._values(), torch.sparse.softmax(plain, d).values())
