"""The CUDA products (spmm, sddmm, spgemm, csr_transpose): each kernel against
its CPU kernel, then the public products on CUDA tensors against the dense
computation, gradients included. Tests marked `gpu` skip without a GPU."""
import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from sf_testing.cuda import CUDA, TIGHT, both, both_refuse, gpu, malformed_csr
from torch_sparsefill import SparseFillTensor

pytestmark = pytest.mark.cpu_only("chooses CPU and CUDA explicitly")

ops = torch.ops.sparsefill


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
    both_refuse(ops.csr_transpose, crow, col, 5)
    both_refuse(ops.spmm, crow, col, values, torch.tensor(0.5, dtype=torch.float64), b, 5)
    both_refuse(ops.spmm, crow, col, values, torch.tensor(0.5, dtype=torch.float64), b[:, :1], 5)
    if case not in ("crow_first", "last"):
        # sddmm reads only the row spans (no first/last rule; the CPU leaves
        # elements outside every row unwritten, so those cases don't compare).
        both_refuse(ops.sddmm, crow, col, 5, torch.ones(3, 4, dtype=torch.float64),
             torch.ones(5, 4, dtype=torch.float64))
    good_crow, good_col = torch.tensor([0, 1, 3, 3, 4, 5]), torch.tensor([0, 0, 1, 1, 0])
    both_refuse(ops.spgemm, crow, col, values, good_crow, good_col, _vals(5, 2), 2)
    # As the second operand: A reaches every row of B (the CPU checks only
    # the rows of B that A's columns reach; the CUDA kernel checks all of B).
    a_crow, a_col = torch.tensor([0, 1, 3, 4]), torch.tensor([0, 0, 1, 2])
    both_refuse(ops.spgemm, a_crow, a_col, _vals(4, 2), crow, col, values, 5)


@gpu
def test_product_argument_errors_match_cpu():
    crow, col = torch.tensor([0, 1, 2]), torch.tensor([0, 1])
    v, f = _vals(2, 1), torch.tensor(1.0, dtype=torch.float64)
    b = torch.ones(2, 3, dtype=torch.float64)
    both_refuse(ops.spmm, crow, col, v, f, torch.ones(3, 3, dtype=torch.float64), 2)  # shape
    both_refuse(ops.spmm, crow, col, v, torch.ones(3, 1, dtype=torch.float64), b, 2)  # fill shape
    both_refuse(ops.spmm, crow, col, v.float(), f, b, 2)  # dtypes
    both_refuse(ops.spmm, crow, col, v[:1], f, b, 2)  # values vs columns
    both_refuse(ops.sddmm, crow, col, 2, torch.ones(2, 3), torch.ones(2, 4))
    both_refuse(ops.spgemm, crow, col, v, crow, col, v.float(), 2)


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
        dense.append(T.dense_of(T.rebuild(A, vd, fd)))
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
    dense = T.dense_of(T.rebuild(A, vad, zero)) @ T.dense_of(T.rebuild(B, vbd, zero))
    (dense * w).sum().backward()
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
