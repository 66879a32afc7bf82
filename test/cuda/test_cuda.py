"""The CUDA backend: every structural op's CUDA kernel against its CPU kernel,
and element-wise ops, conversions and gradients on CUDA tensors against the
CPU path and the dense reference.

Tests marked `gpu` need torch.cuda.is_available() and are skipped without a
GPU. test_cuda_kernels_registered runs everywhere: it checks which CUDA
kernels the build registered (none with a CPU-only torch; all of them in the
CUDA build, where `make cuda-build` sets SPARSEFILL_EXPECT_CUDA=1).
"""
import math
import os

import pytest
import torch

import torch_sparsefill as sf
from torch_sparsefill.ops import elementwise as _generated_ops
from sf_testing.cuda import CUDA, both, both_refuse, gpu, malformed_csr, random_indices

pytestmark = pytest.mark.cpu_only("chooses CPU and CUDA explicitly")

ops = torch.ops.sparsefill

STRUCTURAL = ["coo_check", "csr_check", "coo_linearize", "coo_delinearize", "coalesce_plan",
              "rows_from_crow", "crow_from_rows", "union_plan"]
# Matrix products (aten_ext/ops/products/; their CUDA halves).
PRODUCT_OPS = ["spmm", "csr_transpose", "sddmm", "spgemm",
               "semiring_mv", "semiring_vm", "semiring_masked"]
# Softmax and reductions (aten_ext/ops/reductions/; their CUDA halves).
REDUCTIONS = ["slice_plan", "seg_reduce", "seg_max", "seg_softmax", "seg_softmax_backward"]
# Element-wise ops that merge patterns: composite over union_plan and ATen
# (docs/design.md#composite-elementwise), as is gather_with_fill; no per-device kernel.
UNION_OPS = [n for n, spec in _generated_ops.OPS.items() if spec["kind"] in ("binary", "ternary")]

def has_cuda_kernel(op):
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"sparsefill::{op}", "CUDA")


def test_cuda_kernels_registered():
    registered = {op: has_cuda_kernel(op)
                  for op in STRUCTURAL + PRODUCT_OPS + REDUCTIONS}
    if torch.version.cuda is None:
        # A CPU-only torch builds no CUDA parts: the extension imports and
        # claims no CUDA kernel.
        assert not any(registered.values()), registered
    elif os.environ.get("SPARSEFILL_EXPECT_CUDA") == "1":
        assert all(registered.values()), [op for op, r in registered.items() if not r]
    else:  # torch with CUDA, built either way: never half the ops
        assert len(set(registered.values())) == 1, registered
    # Element-wise ops are device-agnostic (CompositeImplicitAutograd), never
    # a per-device kernel.
    assert not any(has_cuda_kernel(op) for op in ["exp", "gather_with_fill"] + UNION_OPS)



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
        both_refuse(op, idx, [5, 7])
    # 7 is in range of the linear size 35: a value; -1 and 100 are refused
    both(ops.coo_delinearize, torch.tensor([0, 34, bad]), [5, 7], expect="either")


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




@gpu
@pytest.mark.parametrize("case", ["crow_first", "decreasing", "last", "col_negative",
                                  "col_range", "col_unsorted", "col_duplicate"])
def test_csr_errors_match_cpu(case):
    crow, col = malformed_csr(case)
    with pytest.raises(RuntimeError):
        ops.csr_check(crow.to(CUDA), col.to(CUDA), [3, 5])
    both_refuse(ops.csr_check, crow, col, [3, 5])
    both(ops.rows_from_crow, crow, expect="either")  # reads crow only: col cases are valid


@gpu
@pytest.mark.parametrize("rows", [[0, 0, 2, 1], [0, -1], [0, 3], [2, 2, 2]])
def test_crow_from_rows_errors_match_cpu(rows):
    # [2, 2, 2] is valid (sorted, in range): its value is compared
    both(ops.crow_from_rows, torch.tensor(rows), 3, expect="either")


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
    both_refuse(ops.union_plan, ia, ib, [9])
    both_refuse(ops.union_plan, ib, ia, [9])
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
    both_refuse(ops.gather_with_fill, values, fill, torch.tensor([1, 6]))  # out of range


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
