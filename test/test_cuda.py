"""The CUDA backend: every structural op's CUDA kernel against its CPU kernel,
and element-wise ops, conversions and gradients on CUDA tensors against the
CPU path and the dense reference.

Tests marked `gpu` need torch.cuda.is_available() and are skipped without a
GPU. test_cuda_kernels_registered runs everywhere: it checks which CUDA
kernels the build registered (none with a CPU-only torch; all of them in the
CUDA build, where `make cuda-build` sets SPARSEFILL_EXPECT_CUDA=1).
"""
import itertools
import math
import os

import pytest
import torch

import torch_sparsefill as sf
from torch_sparsefill import _generated_ops

pytestmark = pytest.mark.cpu_only("chooses CPU and CUDA explicitly")

ops = torch.ops.sparsefill

STRUCTURAL = ["coo_check", "csr_check", "coo_linearize", "coo_delinearize", "coalesce_plan",
              "rows_from_crow", "crow_from_rows", "union_plan", "gather_with_fill"]
# Matrix products (aten_ext/ops/products.h; CUDA kernels in ops/cuda/products.cpp).
PRODUCT_OPS = ["spmm", "csr_transpose", "sddmm", "spgemm"]
# Softmax and reductions (aten_ext/ops/reductions.h; CUDA kernels in ops/cuda/reductions.cpp).
REDUCTIONS = ["slice_plan", "seg_reduce", "seg_max", "seg_softmax", "seg_softmax_backward"]
# Element-wise ops that merge patterns: their kernel is registered per device.
UNION_OPS = [n for n, spec in _generated_ops.OPS.items() if spec["kind"] in ("binary", "ternary")]

gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                         reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
CUDA = "cuda"


def has_cuda_kernel(op):
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"sparsefill::{op}", "CUDA")


def test_cuda_kernels_registered():
    registered = {op: has_cuda_kernel(op)
                  for op in STRUCTURAL + UNION_OPS + PRODUCT_OPS + REDUCTIONS}
    if torch.version.cuda is None:
        # A CPU-only torch builds no CUDA parts: the extension imports and
        # claims no CUDA kernel.
        assert not any(registered.values()), registered
    elif os.environ.get("SPARSEFILL_EXPECT_CUDA") == "1":
        assert all(registered.values()), [op for op, r in registered.items() if not r]
    else:  # torch with CUDA, built either way: never half the ops
        assert len(set(registered.values())) == 1, registered
    # Value-only element-wise ops are device-agnostic (CompositeExplicitAutograd),
    # never a per-device kernel.
    assert not has_cuda_kernel("exp")


# ---- helpers ------------------------------------------------------------------

def both(fn, *args, rtol=0.0, atol=0.0):
    """fn on the CPU arguments and on their CUDA copies; both results, or both
    errors' first lines, must agree: integer and bool outputs (indices,
    counts, winners) exactly, floating ones within rtol/atol (default: exactly).
    Returns (cpu result, cuda result)."""
    def to(x, device):
        return x.to(device) if isinstance(x, torch.Tensor) else x

    try:
        expected = fn(*[to(a, "cpu") for a in args])
    except RuntimeError as e:
        with pytest.raises(RuntimeError) as got:
            fn(*[to(a, CUDA) for a in args])
        assert str(got.value).splitlines()[0] == str(e).splitlines()[0]
        return None, None
    actual = fn(*[to(a, CUDA) for a in args])
    flat_e = expected if isinstance(expected, tuple) else (expected,)
    flat_a = actual if isinstance(actual, tuple) else (actual,)
    assert len(flat_e) == len(flat_a)
    for e, a in zip(flat_e, flat_a):
        if not isinstance(e, torch.Tensor):
            assert a == e
            continue
        assert a.device.type == "cuda" and a.dtype == e.dtype and a.shape == e.shape
        if e.is_floating_point() or e.is_complex():
            torch.testing.assert_close(a.cpu(), e, equal_nan=True, rtol=rtol, atol=atol)
        else:
            assert torch.equal(a.cpu(), e)
    return expected, actual


def random_indices(g, size, nse, *, unique=False, sort=False):
    numel = math.prod(size)
    if unique:
        linear = torch.randperm(numel, generator=g)[:nse]
    else:
        linear = torch.randint(0, max(numel, 1), (nse,), generator=g)
    if sort:
        linear = linear.sort().values
    out = []
    for s in reversed(size):
        out.append(linear % s)
        linear = linear // s
    return torch.stack(out[::-1]) if size else torch.zeros(0, nse, dtype=torch.int64)


# ---- structural ops: CUDA kernel == CPU kernel ----------------------------------

SIZES = [(), (9,), (5, 7), (3, 4, 6), (300, 200)]


@gpu
@pytest.mark.parametrize("size", SIZES, ids=str)
@pytest.mark.parametrize("kind", ["coalesced", "unsorted", "duplicates", "empty"])
def test_coo_ops_match_cpu(size, kind):
    g = torch.Generator().manual_seed(len(size))
    numel = math.prod(size)
    nse = {"empty": 0, "coalesced": min(numel, 50)}.get(kind, 2 * numel if numel < 100 else 5000)
    if kind == "unsorted":
        nse = min(numel, nse)
    idx = random_indices(g, size, nse, unique=kind != "duplicates", sort=kind == "coalesced")
    both(ops.coo_check, idx, list(size))
    _, linear = both(ops.coo_linearize, idx, list(size))
    both(ops.coo_delinearize, linear if linear is not None else idx[0], list(size))
    both(ops.coalesce_plan, idx, list(size))


@gpu
@pytest.mark.parametrize("bad", [-1, 7, 100])
def test_coo_errors_match_cpu(bad):
    idx = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    idx[1, 2] = bad
    for op in (ops.coo_check, ops.coo_linearize, ops.coalesce_plan):
        with pytest.raises(RuntimeError):
            op(idx.to(CUDA), [5, 7])
        both(op, idx, [5, 7])
    both(ops.coo_delinearize, torch.tensor([0, 34, bad]), [5, 7])


@gpu
def test_coalesce_plan_large_matches_cpu():
    g = torch.Generator().manual_seed(1)
    idx = random_indices(g, (1000, 1000), 200_000)  # many blocks, many duplicates
    indices, segment = both(ops.coalesce_plan, idx, [1000, 1000])[0]
    assert indices.shape[1] < 200_000


def random_csr(g, nrows, ncols, density=0.3):
    mask = torch.rand(nrows, ncols, generator=g) < density
    rows, cols = mask.nonzero().t()
    crow = torch.zeros(nrows + 1, dtype=torch.int64)
    crow[1:] = torch.bincount(rows, minlength=nrows).cumsum(0)
    return crow, cols, rows


@gpu
@pytest.mark.parametrize("shape", [(0, 4), (4, 0), (1, 1), (6, 9), (500, 300)])
def test_csr_ops_match_cpu(shape):
    crow, col, rows = random_csr(torch.Generator().manual_seed(0), *shape)
    both(ops.csr_check, crow, col, list(shape))
    _, r = both(ops.rows_from_crow, crow)
    both(ops.crow_from_rows, rows, shape[0])


def malformed_csr(case):
    """A 3 x 5 CSR pattern (crow, col) broken in the named way."""
    crow = torch.tensor([0, 2, 2, 5])
    col = torch.tensor([1, 3, 0, 2, 4])
    if case == "crow_first":
        crow[0] = 1
    elif case == "decreasing":
        crow[2] = 1
    elif case == "last":
        crow[3] = 4
    elif case == "col_negative":
        col[3] = -2
    elif case == "col_range":
        col[4] = 5
    elif case == "col_unsorted":
        col[3] = 0
    elif case == "col_duplicate":
        col[1] = 1
    return crow, col


@gpu
@pytest.mark.parametrize("case", ["crow_first", "decreasing", "last", "col_negative",
                                  "col_range", "col_unsorted", "col_duplicate"])
def test_csr_errors_match_cpu(case):
    crow, col = malformed_csr(case)
    with pytest.raises(RuntimeError):
        ops.csr_check(crow.to(CUDA), col.to(CUDA), [3, 5])
    both(ops.csr_check, crow, col, [3, 5])
    both(ops.rows_from_crow, crow)


@gpu
@pytest.mark.parametrize("rows", [[0, 0, 2, 1], [0, -1], [0, 3], [2, 2, 2]])
def test_crow_from_rows_errors_match_cpu(rows):
    both(ops.crow_from_rows, torch.tensor(rows), 3)


@gpu
@pytest.mark.parametrize("size", [(50,), (6, 8), (100_000,), (300, 400)], ids=str)
@pytest.mark.parametrize("nse", [(0, 0), (0, 7), (9, 0), (30, 30), (2000, 500)], ids=str)
def test_union_plan_matches_cpu(size, nse):
    g = torch.Generator().manual_seed(2)
    numel = math.prod(size)
    na, nb = (min(n, numel) for n in nse)
    ia = random_indices(g, size, na, unique=True, sort=True)
    ib = random_indices(g, size, nb, unique=True, sort=True)
    both(ops.union_plan, ia, ib, list(size))


@gpu
def test_union_plan_unsorted_is_an_error():
    ia = torch.tensor([[3, 1, 4]])
    ib = torch.tensor([[0, 2]])
    both(ops.union_plan, ia, ib, [9])
    both(ops.union_plan, ib, ia, [9])
    with pytest.raises(RuntimeError, match="coalesced"):
        ops.union_plan(ia.to(CUDA), ib.to(CUDA), [9])


@gpu
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bool,
                                   torch.int8, torch.complex128])
@pytest.mark.parametrize("dense", [(), (3,), (2, 5)], ids=str)
def test_gather_with_fill_matches_cpu(dtype, dense):
    g = torch.Generator().manual_seed(3)
    values = (torch.randn((6,) + dense, generator=g) * 4).to(dtype)
    fill = torch.ones(dense[-1:] if dense else ()).to(dtype)
    src = torch.tensor([5, -1, 0, 0, -1, 3, 2])
    both(ops.gather_with_fill, values, fill, src)
    both(ops.gather_with_fill, values, fill, torch.tensor([1, 6]))  # out of range


# ---- through the tensor: element-wise, conversions, gradients ------------------

def pair(pattern, fill, layout=torch.sparse_coo, seed=0, **kw):
    from sf_testing import random_tensor
    A = random_tensor(pattern, fill, layout, seed=seed, **kw)
    return A, A.to(CUDA)


def same(cuda_result, cpu_result, dense_expected=None):
    assert cuda_result.device.type == "cuda"
    d = cuda_result.to_dense()
    assert d.device.type == "cuda"
    torch.testing.assert_close(d.cpu(), cpu_result.to_dense(), equal_nan=True)
    if dense_expected is not None:
        torch.testing.assert_close(d, dense_expected, equal_nan=True)


FILLS = [0.0, 1.5, math.inf, math.nan]


@gpu
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=str)
@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("pattern", ["empty", "random", "duplicates", "hybrid"])
def test_elementwise_matches_cpu_and_dense(layout, fill, pattern):
    A, Ac = pair(pattern, fill, layout, seed=0)
    B, Bc = pair(pattern, -fill if not math.isnan(fill) else 2.0, layout, seed=1)
    D, Dc = A.to_dense(), Ac.to_dense()
    Ec = Bc.to_dense()
    same(torch.exp(Ac), torch.exp(A), torch.exp(Dc))
    same(Ac * 2 + 1, A * 2 + 1, Dc * 2 + 1)
    same(Ac + Bc, A + B, Dc + Ec)
    same(torch.mul(Ac, Bc), torch.mul(A, B), Dc * Ec)
    same(torch.maximum(Ac, Bc), torch.maximum(A, B), torch.maximum(Dc, Ec))
    same(Ac > Bc, A > B, Dc > Ec)
    same(torch.where(Ac > 0, Ac, Bc), torch.where(A > 0, A, B), torch.where(Dc > 0, Dc, Ec))
    same(Ac + Dc.mean(), A + D.mean(), Dc + Dc.mean())


@gpu
@pytest.mark.parametrize("fill", [0.0, -2.0, math.nan])
def test_conversions_match_cpu(fill):
    A, Ac = pair("duplicates", fill, torch.sparse_coo)
    same(Ac.coalesce(), A.coalesce())
    assert Ac.coalesce().is_coalesced()
    same(Ac.to_sparse_csr(), A.to_sparse_csr())
    same(Ac.to_sparse_csr().to_sparse_coo(), A.to_sparse_csr().to_sparse_coo())
    D = A.to_dense()
    same(sf.to_sparse(D.to(CUDA), fill_value=fill), sf.to_sparse(D, fill_value=fill), D.to(CUDA))
    same(sf.to_sparse(D.to(CUDA), fill_value=fill, layout=torch.sparse_csr),
         sf.to_sparse(D, fill_value=fill, layout=torch.sparse_csr))
    same(sf.eliminate_fill(Ac * 0 + fill), sf.eliminate_fill(A * 0 + fill))


@gpu
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=str)
def test_gradients_match_cpu(layout):
    grads = []
    for device in ("cpu", CUDA):
        A, _ = pair("random", 1.5, layout, seed=0)
        B, _ = pair("random", -0.5, layout, seed=1)
        A = A.coalesce() if layout == torch.sparse_coo else A
        B = B.coalesce() if layout == torch.sparse_coo else B
        A, B = A.to(device).detach().requires_grad_(), B.to(device).detach().requires_grad_()
        (torch.sin(A) * B + A).to_dense().pow(2).sum().backward()
        grads.append([t.grad.cpu() for t in (A._values(), A._fill_value(), B._values(),
                                             B._fill_value())])
    for c, g in zip(*grads):
        torch.testing.assert_close(g, c)


@gpu
def test_gradcheck_on_cuda():
    A, Ac = pair("random", 1.5, torch.sparse_coo)
    B, Bc = pair("random", -2.0, torch.sparse_coo, seed=1)
    Ac, Bc = Ac.coalesce(), Bc.coalesce()
    ia, ib = Ac.indices(), Bc.indices()

    def f(va, fa, vb, fb):
        X = sf.sparse_coo_tensor(ia, va, A.shape, fill_value=fa)
        Y = sf.sparse_coo_tensor(ib, vb, B.shape, fill_value=fb)
        return (X * Y + torch.exp(X)).to_dense()

    inputs = [t.detach().clone().requires_grad_() for t in
              (Ac._values(), Ac._fill_value(), Bc._values(), Bc._fill_value())]
    assert torch.autograd.gradcheck(f, inputs)


@gpu
def test_device_mismatch_is_an_error():
    A, Ac = pair("random", 1.5)
    with pytest.raises(RuntimeError):
        ops.union_plan(A.coalesce().indices(), Ac.coalesce().indices(), list(A.shape))


@gpu
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=str)
def test_shape_ops_match_cpu(layout):
    A, Ac = pair("random", 1.5, layout)
    same(Ac[[0, 2]], A[[0, 2]])  # a Python list index lands on the tensor's device
    same(Ac.index_select(0, torch.tensor([3, 0, 3])), A.index_select(0, torch.tensor([3, 0, 3])))
    mask = torch.tensor([True, False, True, True, False])
    same(Ac[mask], A[mask])
    same(Ac.t(), A.t())
    same(torch.cat([Ac, Ac * 2]), torch.cat([A, A * 2]))


# ==== matrix products: spmm, csr_transpose, sddmm, spgemm (ops/cuda/products.cpp) ====
# Each CUDA kernel against the CPU kernel, then the public API on CUDA tensors
# against the dense product, gradients included. Exact equality holds for the
# index outputs (transpose, the SpGEMM pattern); values are sums in another
# order (cuSPARSE's, shuffle reductions, ATen's column sums), so they are
# compared with a tolerance.

from torch_sparsefill import SparseFillTensor  # noqa: E402

PRODUCT_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16]
PRODUCT_FILLS = ["scalar", "row", "col"]


def _tol(dtype):
    return {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-4, atol=1e-4),
            torch.float16: dict(rtol=1e-2, atol=2e-2), torch.bfloat16: dict(rtol=3e-2, atol=8e-2)}[dtype]


def _csr_pattern(m, k, density, seed, empty_row=True):
    """crow, col of a random m x k pattern (sorted columns); row 1 stores nothing."""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(m, k, generator=g) < density
    if empty_row and m > 2:
        mask[1] = False
    rows, cols = mask.nonzero().t()
    crow = torch.zeros(m + 1, dtype=torch.int64)
    if m:
        crow[1:] = torch.bincount(rows, minlength=m).cumsum(0)
    return crow, cols


def _prod_fill(form, m, k, seed=7, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    shape = {"scalar": (), "row": (m, 1), "col": (1, k)}[form]
    return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype)


def _vals(n, seed, dtype=torch.float64):
    return torch.randn(n, generator=torch.Generator().manual_seed(seed),
                       dtype=torch.float64).to(dtype)


@gpu
@pytest.mark.parametrize("shape", [(0, 4), (4, 0), (1, 1), (6, 9), (500, 300)], ids=str)
@pytest.mark.parametrize("density", [0.0, 0.02, 0.3])
def test_csr_transpose_matches_cpu(shape, density):
    crow, col = _csr_pattern(*shape, density, seed=11)
    both(ops.csr_transpose, crow, col, shape[1])


@gpu
@pytest.mark.parametrize("case", ["crow_first", "decreasing", "last", "col_negative", "col_range"])
def test_product_index_errors_match_cpu(case):
    crow, col = malformed_csr(case)
    values, b = _vals(5, 1), torch.ones(5, 2, dtype=torch.float64)
    both(ops.csr_transpose, crow, col, 5)
    both(ops.spmm, crow, col, values, torch.tensor(0.5, dtype=torch.float64), b, 5)
    both(ops.spmm, crow, col, values, torch.tensor(0.5, dtype=torch.float64), b[:, :1], 5)
    if case not in ("crow_first", "last"):
        # sddmm reads only the row spans (no first/last rule; the CPU leaves
        # elements outside every row unwritten, so those cases don't compare).
        both(ops.sddmm, crow, col, 5, torch.ones(3, 4, dtype=torch.float64),
             torch.ones(5, 4, dtype=torch.float64))
    good_crow, good_col = torch.tensor([0, 1, 3, 3, 4, 5]), torch.tensor([0, 0, 1, 1, 0])
    both(ops.spgemm, crow, col, values, good_crow, good_col, _vals(5, 2), 2)
    # As the second operand: A reaches every row of B (the CPU checks only
    # the rows of B that A's columns reach; the CUDA kernel checks all of B).
    a_crow, a_col = torch.tensor([0, 1, 3, 4]), torch.tensor([0, 0, 1, 2])
    both(ops.spgemm, a_crow, a_col, _vals(4, 2), crow, col, values, 5)


@gpu
def test_product_argument_errors_match_cpu():
    crow, col = torch.tensor([0, 1, 2]), torch.tensor([0, 1])
    v, f = _vals(2, 1), torch.tensor(1.0, dtype=torch.float64)
    b = torch.ones(2, 3, dtype=torch.float64)
    both(ops.spmm, crow, col, v, f, torch.ones(3, 3, dtype=torch.float64), 2)  # shape
    both(ops.spmm, crow, col, v, torch.ones(3, 1, dtype=torch.float64), b, 2)  # fill shape
    both(ops.spmm, crow, col, v.float(), f, b, 2)  # dtypes
    both(ops.spmm, crow, col, v[:1], f, b, 2)  # values vs columns
    both(ops.sddmm, crow, col, 2, torch.ones(2, 3), torch.ones(2, 4))
    both(ops.spgemm, crow, col, v, crow, col, v.float(), 2)


@gpu
@pytest.mark.parametrize("dtype", PRODUCT_DTYPES, ids=str)
@pytest.mark.parametrize("form", PRODUCT_FILLS)
@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (1, 1), (7, 5), (300, 200)], ids=str)
@pytest.mark.parametrize("n", [0, 1, 7, 64])
def test_spmm_matches_cpu(dtype, form, shape, n):
    m, k = shape
    crow, col = _csr_pattern(m, k, 0.3, seed=3)
    values = _vals(col.numel(), 4, dtype)
    fill = _prod_fill(form, m, k, dtype=dtype)
    b = _vals(k * n, 5, dtype).view(k, n)
    both(ops.spmm, crow, col, values, fill, b, k, **_tol(dtype))
    if n > 1:  # a strided dense operand (its transpose's view)
        both(ops.spmm, crow, col, values, fill, b.t().contiguous().t(), k, **_tol(dtype))


@gpu
@pytest.mark.parametrize("dtype", PRODUCT_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (1, 1), (7, 5), (300, 200)], ids=str)
@pytest.mark.parametrize("n", [0, 1, 3, 33, 100])
def test_sddmm_matches_cpu(dtype, shape, n):
    m, k = shape
    crow, col = _csr_pattern(m, k, 0.3, seed=6)
    x = _vals(m * n, 7, dtype).view(m, n)
    y = _vals(k * n, 8, dtype).view(k, n)
    both(ops.sddmm, crow, col, k, x, y, **_tol(dtype))


@gpu
@pytest.mark.parametrize("dtype", PRODUCT_DTYPES, ids=str)
@pytest.mark.parametrize("sizes", [(0, 3, 4), (3, 0, 4), (3, 4, 0), (1, 1, 1), (6, 5, 7),
                                   (200, 150, 120)], ids=str)
@pytest.mark.parametrize("density", [0.0, 0.05, 0.3])
def test_spgemm_matches_cpu(dtype, sizes, density):
    m, k, n = sizes
    crow_a, col_a = _csr_pattern(m, k, density, seed=1)
    crow_b, col_b = _csr_pattern(k, n, density, seed=2)
    va, vb = _vals(col_a.numel(), 3, dtype), _vals(col_b.numel(), 4, dtype)
    both(ops.spgemm, crow_a, col_a, va, crow_b, col_b, vb, n, **_tol(dtype))


@gpu
def test_spgemm_without_matching_inner_indices():
    # A's columns meet only B's empty rows: nothing stored, on both devices.
    crow_a, col_a = torch.tensor([0, 1, 2]), torch.tensor([0, 0])
    crow_b, col_b = torch.tensor([0, 0, 2]), torch.tensor([0, 2])
    both(ops.spgemm, crow_a, col_a, _vals(2, 1), crow_b, col_b, _vals(2, 2), 3)


# ---- the public API on CUDA tensors -------------------------------------------------

def _sf_operand(m, k, form, layout, seed, density=0.3, zero_fill=False):
    """A SparseFillTensor (float64, CPU) with a row without stored elements."""
    crow, col = _csr_pattern(m, k, density, seed)
    rows = torch.repeat_interleave(torch.arange(m), crow.diff())
    values = _vals(col.numel(), seed + 100)
    fill = torch.zeros((), dtype=torch.float64) if zero_fill else _prod_fill(form, m, k, seed + 200)
    if layout == torch.sparse_csr:
        return SparseFillTensor(torch.sparse_csr, (m, k), values, fill, crow=crow, col=col)
    return SparseFillTensor(torch.sparse_coo, (m, k), values, fill,
                            indices=torch.stack([rows, col]), coalesced=True)


def _leaves(A):
    """(values, fill) leaves of A on CUDA and A rebuilt from them."""
    v = A._sf_values.detach().to(CUDA).requires_grad_()
    f = A._sf_fill.detach().to(CUDA).requires_grad_()
    if A.layout == torch.sparse_coo:
        B = SparseFillTensor(torch.sparse_coo, A.shape, v, f, indices=A._sf_indices.to(CUDA),
                             coalesced=True)
    else:
        B = SparseFillTensor(torch.sparse_csr, A.shape, v, f, crow=A._sf_crow.to(CUDA),
                             col=A._sf_col.to(CUDA))
    return B, v, f


def _dense_ref(A, v, f):
    """The oracle's dense A from (values, fill) on the CPU, differentiable."""
    A = A.coalesce() if A.layout == torch.sparse_coo else A
    idx = A._coo_indices()
    return f.expand(A.shape).clone().index_put(tuple(idx), v)


def _grads_agree(result_fn, dense_fn, operands, others=()):
    """result_fn(*cuda operands, *cuda others) vs dense_fn(*dense cpu operands,
    *cpu others): values and the gradients of every operand's values and fill
    and of every strided operand."""
    built, leaves, dense_leaves, dense = [], [], [], []
    for A in operands:
        Ac, v, f = _leaves(A)
        built.append(Ac)
        leaves += [v, f]
        vd = A._sf_values.detach().clone().requires_grad_()
        fd = A._sf_fill.detach().clone().requires_grad_()
        dense_leaves += [vd, fd]
        dense.append(_dense_ref(A, vd, fd))
    oc = [o.detach().to(CUDA).requires_grad_() for o in others]
    od = [o.detach().clone().requires_grad_() for o in others]
    out = result_fn(*built, *oc)
    ref = dense_fn(*dense, *od)
    out_dense = out.to_dense() if isinstance(out, SparseFillTensor) else out
    assert out_dense.device.type == "cuda"
    torch.testing.assert_close(out_dense.cpu(), ref, rtol=1e-9, atol=1e-9)
    w = torch.randn(ref.shape, generator=torch.Generator().manual_seed(5), dtype=ref.dtype)
    (out_dense * w.to(CUDA)).sum().backward()
    (ref * w).sum().backward()
    for c, d in zip(leaves + oc, dense_leaves + od):
        assert c.grad is not None and d.grad is not None
        torch.testing.assert_close(c.grad.cpu(), d.grad, rtol=1e-9, atol=1e-9)


@gpu
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=["coo", "csr"])
@pytest.mark.parametrize("form", PRODUCT_FILLS)
def test_products_api_on_cuda_match_dense(layout, form):
    m, k, n = 9, 6, 4
    A = _sf_operand(m, k, form, layout, seed=1)
    W, L, x = _vals(k * n, 2).view(k, n), _vals(3 * m, 3).view(3, m), _vals(k, 4)
    M = _vals(m * n, 5).view(m, n)
    _grads_agree(lambda A, W: A @ W, lambda D, W: D @ W, [A], [W])
    _grads_agree(lambda A, L: L @ A, lambda D, L: L @ D, [A], [L])
    _grads_agree(lambda A, x: torch.mv(A, x), lambda D, x: D @ x, [A], [x])
    _grads_agree(lambda A, x: A @ x, lambda D, x: D @ x, [A], [x])
    _grads_agree(lambda A, M, W: torch.addmm(M, A, W, beta=0.5, alpha=2.0),
                 lambda D, M, W: torch.addmm(M, D, W, beta=0.5, alpha=2.0), [A], [M, W])
    B = _sf_operand(k, n, form, layout, seed=2)
    _grads_agree(lambda A, B: A @ B, lambda D, E: D @ E, [A, B])


@gpu
@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=["coo", "csr"])
def test_sparse_sparse_fill0_on_cuda(layout):
    A = _sf_operand(30, 20, "scalar", layout, seed=3, zero_fill=True)
    B = _sf_operand(20, 25, "scalar", layout, seed=4, zero_fill=True)
    Ac, Bc = A.to(CUDA), B.to(CUDA)
    C = Ac @ Bc
    assert isinstance(C, SparseFillTensor) and C.layout == layout and C.device.type == "cuda"
    assert float(C._sf_fill) == 0.0
    torch.testing.assert_close(C.to_dense().cpu(), (A @ B).to_dense(), **TIGHT)
    torch.testing.assert_close(C.to_dense().cpu(), A.to_dense() @ B.to_dense())
    # Gradients of the values (the fills stay 0 and outside autograd).
    va = Ac._sf_values.detach().requires_grad_()
    vb = Bc._sf_values.detach().requires_grad_()

    def rebuild(X, v):
        if X.layout == torch.sparse_coo:
            return SparseFillTensor(torch.sparse_coo, X.shape, v, X._sf_fill,
                                    indices=X._sf_indices, coalesced=True)
        return SparseFillTensor(torch.sparse_csr, X.shape, v, X._sf_fill, crow=X._sf_crow,
                                col=X._sf_col)

    out = (rebuild(Ac, va) @ rebuild(Bc, vb)).to_dense()
    w = torch.randn(out.shape, generator=torch.Generator().manual_seed(1), dtype=out.dtype)
    (out * w.to(CUDA)).sum().backward()
    vad = A._sf_values.detach().clone().requires_grad_()
    vbd = B._sf_values.detach().clone().requires_grad_()
    zero = torch.zeros((), dtype=torch.float64)
    ((_dense_ref(A, vad, zero) @ _dense_ref(B, vbd, zero)) * w).sum().backward()
    torch.testing.assert_close(va.grad.cpu(), vad.grad, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(vb.grad.cpu(), vbd.grad, rtol=1e-9, atol=1e-9)


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_products_low_precision_on_cuda(dtype):
    A = _sf_operand(40, 30, "row", torch.sparse_csr, seed=5)
    A = SparseFillTensor(torch.sparse_csr, A.shape, A._sf_values.to(dtype), A._sf_fill.to(dtype),
                         crow=A._sf_crow, col=A._sf_col)
    W = _vals(30 * 8, 6, dtype).view(30, 8)
    out = A.to(CUDA) @ W.to(CUDA)
    assert out.dtype == dtype
    torch.testing.assert_close(out.cpu(), A @ W, **_tol(dtype))


@gpu
def test_bmm_on_cuda_matches_dense():
    g = torch.Generator().manual_seed(8)
    nb, m, k, n = 3, 5, 4, 6
    mask = torch.rand(nb, m, k, generator=g) < 0.4
    mask[1] = False  # a batch without stored elements
    idx = mask.nonzero().t()
    values = torch.randn(idx.shape[1], generator=g, dtype=torch.float64)
    A = sf.sparse_coo_tensor(idx, values, (nb, m, k), fill_value=0.75).coalesce()
    B = torch.randn(nb, k, n, generator=g, dtype=torch.float64)
    v = A._sf_values.detach().to(CUDA).requires_grad_()
    f = A._sf_fill.detach().to(CUDA).requires_grad_()
    Bc = B.to(CUDA).requires_grad_()
    Ac = SparseFillTensor(torch.sparse_coo, A.shape, v, f, indices=A._sf_indices.to(CUDA),
                          coalesced=True)
    out = torch.bmm(Ac, Bc)
    vd, fd = A._sf_values.detach().clone().requires_grad_(), A._sf_fill.detach().clone().requires_grad_()
    Bd = B.clone().requires_grad_()
    D = fd.expand(A.shape).clone().index_put(tuple(A._sf_indices), vd)
    ref = torch.bmm(D, Bd)
    torch.testing.assert_close(out.cpu(), ref.detach(), rtol=1e-9, atol=1e-9)
    out.sum().backward()
    ref.sum().backward()
    for c, d in ((v, vd), (f, fd), (Bc, Bd)):
        torch.testing.assert_close(c.grad.cpu(), d.grad, rtol=1e-9, atol=1e-9)


# ---- softmax and reductions: CUDA kernels == CPU kernels, API == dense ----------
# The segment ops of ops/reductions.h (slice_plan, seg_reduce, seg_max,
# seg_softmax, seg_softmax_backward) against their CPU kernels, then the public
# reductions on CUDA tensors against the dense computation, gradients included.
# Exact equality holds for slice_plan, for every integer output and for
# max/min (a selection: the same winner). Sums, products and softmax combine a
# segment's rows in tree order on the GPU and sequentially on the CPU, and
# CUDA's exp/log/pow are not the C library's: those agree to a tolerance.

# fp64 sums in another order: equal to rounding.
TIGHT = dict(rtol=1e-10, atol=1e-10)


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
    both(ops.slice_plan, unsorted, [3, 3], [1], compact)  # rows lead: must be sorted
    both(ops.slice_plan, unsorted, [3, 3], [0], compact)  # columns: sorted by the plan
    negative = torch.tensor([[0, 1, 2], [0, -1, 2]])
    both(ops.slice_plan, negative, [3, 3], [0], compact)
    three = torch.tensor([[0, 1], [0, 7], [1, 1]])  # out of range in a kept dim
    both(ops.slice_plan, three, [2, 3, 2], [2], compact)
    both(ops.slice_plan, three, [2, 3, 2], [5], compact)  # bad dims


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
            both(ops.seg_max, v, f, seg_ptr, coord, n, is_min, False)
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
        both(ops.seg_reduce, values, fill, seg_ptr, 4, "sum")
        both(ops.seg_max, values, fill, seg_ptr, None, 4, False, True)
        both(ops.seg_softmax, values, fill, seg_ptr, 4, False)
        both(ops.seg_softmax_backward, values, fill, values, fill, seg_ptr, 4, True)
    seg_ptr = torch.tensor([0, 2, 4, 5])
    both(ops.seg_max, values, fill, seg_ptr, coord, 4, False, False)  # coord[4] = 4 = n
    both(ops.seg_max, values, fill, seg_ptr, torch.tensor([0, 2, 3, 1, 0]), 4, True, False)
    both(ops.seg_max, values, fill, seg_ptr, torch.tensor([0, 2, 1, 3, 4]), 3, True, False)
    both(ops.seg_max, values, fill, seg_ptr, coord[:4], 4, False, False)  # too few
    both(ops.seg_max, values, fill, torch.tensor([0, 2, 9, 5]), coord[:4], 4, False, False)
    for bad in ([0, 100, 5], [0, -3, 5]):  # segments leaving [0, nse): coords unread
        both(ops.seg_max, values, fill[:2], torch.tensor(bad), coord, 4, False, False)
    both(ops.seg_max, values, fill, seg_ptr, None, 0, False, False)  # empty slices
    both(ops.seg_reduce, values, fill, seg_ptr, 4, "mean")
    both(ops.seg_softmax, values.long(), fill.long(), seg_ptr, 4, False)
    both(ops.seg_softmax_backward, values, fill[:1], values, fill[:1], seg_ptr, 4, False)


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
    got = out.to_dense() if isinstance(out, sf.SparseFillTensor) else out
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
