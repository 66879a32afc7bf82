"""Block-sparse @ strided products (RFC.md#through-csr) through the op
``sparsefill::bsr_spmm``: BSR @ dense, BSC @ dense, dense @ BSR, dense @
BSC, matrices and vectors, every fill (non-finite included) and non-finite
dense operands, each against the dense product; gradients (first and
second order) against gradcheck, and against dense autograd where the fill
is not finite; the op's own argument errors; threads do not change a bit.
"""
import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import sf_testing as T
import torch_sparsefill as sf
from sf_testing import assert_dense_equal

F64 = torch.float64
BLOCK = (torch.sparse_bsr, torch.sparse_bsc)
_ops = torch.ops.sparsefill


class _Ops(TorchDispatchMode):
    """The sparsefill ops a program calls."""

    def __init__(self):
        super().__init__()
        self.names = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "sparsefill":
            self.names.add(func._schema.name.split("::")[1])
        return func(*args, **(kwargs or {}))


def _block_matrix(rows, cols, blocksize, fill, seed, share=0.4, dtype=F64):
    """A dense matrix whose blocks are either random or all `fill`."""
    g = T.rng(seed)
    r, c = blocksize
    keep = (torch.rand(rows // r, cols // c, generator=g) < share)
    keep = keep.repeat_interleave(r, 0).repeat_interleave(c, 1)
    D = torch.randn(rows, cols, generator=g, dtype=dtype)
    return torch.where(keep, D, torch.tensor(fill, dtype=dtype))


def _block_tensor(D, layout, blocksize, fill):
    return sf.to_sparse(D, layout=layout, blocksize=blocksize, fill_value=fill)


@pytest.mark.parametrize("layout", BLOCK, ids=T.layout_id)
@pytest.mark.parametrize("fill", T.FILLS)
@pytest.mark.parametrize("blocksize", [(2, 3), (4, 4), (1, 5)])
def test_products_equal_dense(layout, fill, blocksize):
    r, c = blocksize
    D = _block_matrix(4 * r, 3 * c, blocksize, fill, seed=r * 10 + c)
    A = _block_tensor(D, layout, blocksize, fill)
    X = torch.randn(3 * c, 5, dtype=F64)
    Y = torch.randn(2, 4 * r, dtype=F64)
    rec = _Ops()
    with rec:
        pairs = [(A @ X, D @ X), (torch.mm(A, X), D @ X), (torch.matmul(A, X), D @ X),
                 (Y @ A, Y @ D), (torch.mm(Y, A), Y @ D), (A @ X[:, 1], D @ X[:, 1]),
                 (Y[0] @ A, Y[0] @ D), (A.t() @ Y.t(), D.t() @ Y.t()),
                 (X.t() @ A.t(), X.t() @ D.t())]
    assert "bsr_spmm" in rec.names
    for got, want in pairs:
        assert_dense_equal(got, want)


@pytest.mark.parametrize("layout", BLOCK, ids=T.layout_id)
@pytest.mark.parametrize("fill", [0.0, 1.5, math.inf, math.nan])
@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_nonfinite_dense_operand(layout, fill, bad):
    """inf, -inf or nan in the strided operand, inside and outside the
    columns that meet stored blocks: no inf - inf where dense has none."""
    D = _block_matrix(6, 8, (2, 2), fill, seed=3)
    A = _block_tensor(D, layout, (2, 2), fill)
    X = torch.randn(8, 4, dtype=F64)
    X[0, 1], X[5, 2], X[7, 0] = bad, bad, -bad if not math.isnan(bad) else 0.0
    assert_dense_equal(A @ X, D @ X)
    Y = X.t()[:, :6].contiguous()
    assert_dense_equal(Y @ A, Y @ D)


@pytest.mark.parametrize("layout", BLOCK, ids=T.layout_id)
@pytest.mark.parametrize("side", ["left", "right"])
def test_gradients(layout, side):
    """gradcheck and gradgradcheck (float64) of values, fill and the dense
    operand, both sides of the product."""
    (crow, col), v, f, size = T.leaf_parts(5, 0.5, layout, "real")
    if side == "left":
        X = torch.randn(size[1], 3, dtype=F64, requires_grad=True)

        def fn(v, f, X):
            return sf.sparse_compressed_tensor(crow, col, v, size, layout=layout, fill_value=f) @ X
    else:
        X = torch.randn(3, size[0], dtype=F64, requires_grad=True)

        def fn(v, f, X):
            return X @ sf.sparse_compressed_tensor(crow, col, v, size, layout=layout, fill_value=f)
    rec = _Ops()
    with rec:
        fn(v, f, X).sum().backward()
    assert "bsr_spmm" in rec.names
    torch.autograd.gradcheck(fn, (v, f, X))
    torch.autograd.gradgradcheck(fn, (v, f, X))


@pytest.mark.parametrize("layout", BLOCK, ids=T.layout_id)
@pytest.mark.parametrize("fill", [math.inf, -math.inf, math.nan, 0.0])
def test_gradients_match_dense_autograd(layout, fill):
    """Where gradcheck cannot go (a non-finite fill), the gradients of the
    values and of the dense operand against those of the dense product."""
    (crow, col), v, f, size = T.leaf_parts(7, fill, layout, "real")
    X = torch.randn(size[1], 4, dtype=F64, requires_grad=True)
    G = torch.randn(size[0], 4, dtype=F64)
    A = sf.sparse_compressed_tensor(crow, col, v, size, layout=layout, fill_value=f)
    grads = torch.autograd.grad(A @ X, (v, X), G)
    v2, X2 = v.detach().clone().requires_grad_(), X.detach().clone().requires_grad_()
    D = sf.sparse_compressed_tensor(crow, col, v2, size, layout=layout,
                                    fill_value=f.detach()).to_dense()
    want = torch.autograd.grad(D @ X2, (v2, X2), G)
    for got, exp in zip(grads, want):
        assert_dense_equal(got, exp)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_reduced_precision(dtype):
    D = _block_matrix(8, 12, (4, 4), 0.25, seed=11, dtype=dtype)
    A = _block_tensor(D, torch.sparse_bsr, (4, 4), 0.25)
    X = torch.randn(12, 6, dtype=dtype)
    out = A @ X
    assert out.dtype == dtype
    torch.testing.assert_close(out.float(), D.float() @ X.float(), rtol=2e-2, atol=5e-2)


def test_per_slice_fill_takes_the_general_route():
    """A per-row fill is not the op's (one fill element): the result still
    equals dense, through CSR."""
    D = _block_matrix(6, 6, (2, 2), 1.0, seed=1)
    X = torch.randn(6, 3, dtype=F64)
    per_row = torch.arange(6, dtype=F64).view(6, 1)
    B = sf.to_sparse(D, layout=torch.sparse_bsr, blocksize=(2, 2), fill_value=per_row)
    rec = _Ops()
    with rec:
        out = B @ X
    assert "bsr_spmm" not in rec.names
    assert_dense_equal(out, B.to_dense() @ X)


@pytest.mark.cpu_only(reason="thread counts are the CPU kernel's")
def test_threads_do_not_change_a_bit():
    D = _block_matrix(512, 256, (16, 16), 0.5, seed=2, share=0.2, dtype=torch.float32)
    A = _block_tensor(D, torch.sparse_bsr, (16, 16), 0.5)
    X = torch.randn(256, 64)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = A @ X
        torch.set_num_threads(max(2, threads))
        many = A @ X
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, many)
    torch.testing.assert_close(one, D @ X, rtol=1e-4, atol=1e-3)


def _args():
    crow, col = torch.tensor([0, 1, 2]), torch.tensor([1, 0])
    values = torch.randn(2, 2, 3, dtype=F64)
    return crow, col, values, torch.tensor(0.5, dtype=F64), torch.randn(6, 4, dtype=F64), 6


@pytest.mark.parametrize("change,message", [
    (lambda a: a.__setitem__(2, a[2].float()), "same dtype"),
    (lambda a: a.__setitem__(2, a[2].reshape(2, 6)), r"values must be \(nblocks, r, c\)"),
    (lambda a: a.__setitem__(3, torch.zeros(2, dtype=F64)), "fill must be one element"),
    (lambda a: a.__setitem__(5, 5), "multiple of the block's columns"),
    (lambda a: a.__setitem__(4, torch.randn(3, 4, dtype=F64)), "2-D with 6 rows"),
    (lambda a: a.__setitem__(1, torch.tensor([1, 2])), "out of range"),
    (lambda a: a.__setitem__(0, torch.tensor([1, 1, 2])), r"crow_indices\[0\] must be 0"),
    (lambda a: a.__setitem__(0, torch.tensor([0, 1, 3])), r"crow_indices\[-1\] must equal"),
    (lambda a: a.__setitem__(1, torch.tensor([0])), "block column indices but 2 blocks"),
])
def test_op_errors(change, message):
    args = list(_args())
    change(args)
    with pytest.raises(RuntimeError, match=message):
        _ops.bsr_spmm(*args)


def test_op_matches_its_definition():
    crow, col, values, fill, X, ncols = _args()
    D = torch.full((4, 6), 0.5, dtype=F64)
    D[0:2, 3:6], D[2:4, 0:3] = values[0], values[1]
    assert_dense_equal(_ops.bsr_spmm(crow, col, values, fill, X, ncols), D @ X)
    torch.library.opcheck(_ops.bsr_spmm.default,
                          (crow, col, values.requires_grad_(), fill.requires_grad_(),
                           X.requires_grad_(), ncols))


def test_docstring_example():
    import doctest

    from torch_sparsefill.functions.linalg import bsr as _bsr
    result = doctest.testmod(_bsr, extraglobs={"sf": sf, "torch": torch, "_bsr": _bsr})
    assert result.attempted >= 2 and result.failed == 0
