"""CSC, BSR and BSC (RFC.md#compressed-layouts): constructors against torch's own
layouts, validation, conversions between every pair, the O(1) transposes,
and every op family through CSR, each against the dense computation. The
element-wise ops run on these layouts in test_elementwise_table.py
(sf_testing.LAYOUT_CASES)."""
import copy
import io
import math
import pickle

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from sf_testing import assert_dense_equal, random_tensor

ALL = T.ALL_LAYOUTS
FILLS = [1.5, -math.inf, math.nan]


# ---- construction and conversions ---------------------------------------------------

@pytest.mark.parametrize("layout", T.EXTRA_LAYOUTS, ids=T.layout_id)
def test_constructor_matches_torch(layout):
    """With fill 0 our tensor is torch's, component for component."""
    D = torch.randn(6, 9, dtype=torch.float64)
    D[D.abs() < 0.8] = 0
    native = D.to_sparse(layout=layout, blocksize=T.blocksize_for(layout))
    ours = sf.sparse_compressed_tensor(*T.compressed_indices(native), native.values(), native.shape,
                                       layout=layout)
    assert ours.layout == layout and ours.shape == native.shape
    assert ours.nse() == native._nnz() and ours.dense_dim() == 0 and ours.sparse_dim() == 2
    assert_dense_equal(ours.to_dense(), D)
    # and with a fill: stored elements stay, unspecified ones become the fill
    A = sf.to_sparse(native, fill_value=2.5)
    expected = native.to_dense().clone()
    stored = sf.to_sparse(native, fill_value=math.nan).to_dense().isnan().logical_not()
    expected[~stored] = 2.5
    assert_dense_equal(A.to_dense(), expected)


def test_named_constructors():
    A = sf.sparse_csc_tensor([0, 1, 1, 2], [1, 0], [7., 8.], (2, 3), fill_value=-1.)
    assert_dense_equal(A.to_dense(), torch.tensor([[-1., -1., 8.], [7., -1., -1.]]))
    B = sf.sparse_bsr_tensor([0, 1], [1], torch.ones(1, 2, 2), fill_value=5.)
    assert B.shape == (2, 4) and B.fill_value().shape == ()
    C = sf.sparse_bsc_tensor([0, 0, 1], [0], torch.arange(4.).view(1, 2, 2), (2, 4))
    assert_dense_equal(C.to_dense(), torch.tensor([[0., 0., 0., 1.], [0., 0., 2., 3.]]))


@pytest.mark.parametrize("target", ALL, ids=T.layout_id)
@pytest.mark.parametrize("source", ALL, ids=T.layout_id)
@pytest.mark.parametrize("fill", FILLS + [0.0])
@pytest.mark.parametrize("pattern", ["random", "hybrid", "empty", "full"])
def test_every_conversion(source, target, fill, pattern):
    A = random_tensor(pattern, fill, source, size=(6, 9))
    B = A.to_sparse(layout=target, blocksize=T.blocksize_for(target))
    assert B.layout == target and B.shape == A.shape
    assert_dense_equal(B.to_dense(), A.to_dense())
    assert_dense_equal(B.fill_value(), A.fill_value())
    if target in T.BLOCK_LAYOUTS:
        assert B.values().shape[1:3] == T.BLOCKSIZE
    # from strided, with the same fill
    C = sf.to_sparse(A.to_dense(), fill_value=A._fill_value(), layout=target,
                     blocksize=T.blocksize_for(target), dense_dim=A.dense_dim())
    assert_dense_equal(C.to_dense(), A.to_dense())


def test_block_conversion_fills_the_block_with_the_per_slice_fill():
    A = sf.sparse_coo_tensor([[0], [4]], [1.], (4, 6), fill_value=torch.arange(4.)[:, None])
    for layout in T.BLOCK_LAYOUTS:
        B = A.to_sparse(layout=layout, blocksize=2)
        assert B.nse() == 1
        assert_dense_equal(B.to_dense(), A.to_dense())
        C = sf.to_sparse(A.to_dense(), fill_value=A._fill_value(), layout=layout, blocksize=2)
        assert C.nse() == 1
        assert_dense_equal(C.to_dense(), A.to_dense())


@pytest.mark.parametrize("layout", T.BLOCK_LAYOUTS, ids=T.layout_id)
def test_strided_to_blocks_is_differentiable(layout):
    x = torch.randn(4, 6, 2, dtype=torch.float64)
    x[:2] = 1.5
    assert sf.to_sparse(x, fill_value=1.5, layout=layout, blocksize=(2, 3), dense_dim=1).nse() == 2
    x = torch.randn(4, 6, 2, dtype=torch.float64, requires_grad=True)  # a stable pattern

    def fn(x):
        return sf.to_sparse(x, fill_value=1.5, layout=layout, blocksize=(2, 3),
                            dense_dim=1)._values() * 2
    torch.autograd.gradcheck(fn, (x,))
    torch.autograd.gradgradcheck(fn, (x,))


def test_conversion_gradients():
    """Conversions are differentiable in values and fill, first and second order."""
    def fn(v, f, target):
        A = sf.sparse_csr_tensor(crow, col, v, (4, 6), fill_value=f)
        B = A.to_sparse(layout=target, blocksize=T.blocksize_for(target) and (2, 3))
        return (B._values() ** 2).sum() + B.to_dense().sum() * 0.5

    crow, col = torch.tensor([0, 2, 2, 3, 3]), torch.tensor([1, 4, 5])
    v = torch.randn(3, dtype=torch.float64, requires_grad=True)
    f = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    for target in T.EXTRA_LAYOUTS:
        torch.autograd.gradcheck(lambda v, f: fn(v, f, target), (v, f))
        torch.autograd.gradgradcheck(lambda v, f: fn(v, f, target), (v, f))


@pytest.mark.parametrize("layout", T.EXTRA_LAYOUTS, ids=T.layout_id)
def test_gradients_reach_the_components(layout):
    A = random_tensor("random", 0.5, layout, size=(6, 9)).detach().requires_grad_()
    (torch.exp(A).to_dense() * torch.arange(54.).view(6, 9)).sum().backward()
    D = A.to_dense().detach().requires_grad_()
    (torch.exp(D) * torch.arange(54.).view(6, 9)).sum().backward()
    g = A.grad
    assert g.layout == layout
    pos = A._coo_indices()  # every element the layout stores, in CSR order
    torch.testing.assert_close(g._to_csr()._values(), D.grad[pos[0], pos[1]])


# ---- validation ------------------------------------------------------------------------

@pytest.mark.parametrize("args,kwargs,error,message", [
    (([0, 2, 1], [0, 1], [1., 2.], (2, 2)), {}, RuntimeError, "ccol_indices must be non-decreasing"),
    (([0, 1, 2], [2, 0], [1., 2.], (2, 2)), {}, RuntimeError, "row_indices[0] = 2 is out of range for 2 rows"),
    (([0, 2, 2], [1, 0], [1., 2.], (2, 2)), {}, RuntimeError, "strictly increasing within each column"),
    (([0, 1], [0], [1.], (2, 2)), {}, RuntimeError, "ccol_indices must have length columns + 1"),
    (([[0, 1]], [0], [1.], (1, 1)), {}, ValueError, "ccol_indices and row_indices must have the same batch shape"),
    (([0, 1], [0], [1., 2.], (1, 1)), {}, ValueError, "values has 2 rows but row_indices has 1"),
])
def test_csc_validation(args, kwargs, error, message):
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")
                       .replace("+", r"\+")):
        sf.sparse_csc_tensor(*args, **kwargs)


def test_block_validation():
    with pytest.raises(ValueError, match="shape \\(nblocks, r, c, ...\\)"):
        sf.sparse_bsr_tensor([0, 1], [0], torch.ones(1, 2), (2, 2))
    with pytest.raises(ValueError, match="not divisible by blocksize"):
        sf.sparse_bsr_tensor([0, 1], [0], torch.ones(1, 2, 2), (3, 2))
    with pytest.raises(RuntimeError, match="block pattern.*col_indices\\[0\\] = 3"):
        sf.sparse_bsr_tensor([0, 1], [3], torch.ones(1, 2, 2), (2, 4))
    with pytest.raises(RuntimeError, match="block pattern.*row_indices"):
        sf.sparse_bsc_tensor([0, 2], [0, 0], torch.ones(2, 2, 2), (4, 2))
    with pytest.raises(ValueError, match="layout must be one of"):
        sf.sparse_compressed_tensor([0], [], [], (0, 0), layout=torch.sparse_coo)
    A = random_tensor("random", 1.0, torch.sparse_csr, size=(5, 7))
    with pytest.raises(RuntimeError, match="not divisible by blocksize \\(2, 2\\)"):
        A.to_sparse_bsr(2)
    with pytest.raises(TypeError, match="needs a blocksize"):
        A.to_sparse(layout=torch.sparse_bsc)
    with pytest.raises(RuntimeError, match="crow_indices\\(\\): expected"):
        A.to_sparse_csc().crow_indices()


# ---- printing, saving, copying ------------------------------------------------------

@pytest.mark.parametrize("layout", T.EXTRA_LAYOUTS, ids=T.layout_id)
def test_pickle_save_deepcopy_repr(layout):
    A = random_tensor("hybrid", -math.inf, layout, size=(6, 9))
    for B in (pickle.loads(pickle.dumps(A)), copy.deepcopy(A)):
        assert B.layout == layout
        assert_dense_equal(B.to_dense(), A.to_dense())
    buf = io.BytesIO()
    torch.save(A, buf)
    buf.seek(0)
    assert_dense_equal(torch.load(buf).to_dense(), A.to_dense())
    text = repr(A)
    assert f"layout={layout}" in text
    assert ("ccol_indices" in text) == (layout in (torch.sparse_csc, torch.sparse_bsc))


# ---- the O(1) transposes ---------------------------------------------------------------

@pytest.mark.parametrize("layout", ALL[1:], ids=T.layout_id)
def test_t_swaps_layouts_in_constant_time(layout):
    A = random_tensor("random", -2.0, layout, size=(6, 9))
    swapped = {torch.sparse_csr: torch.sparse_csc, torch.sparse_csc: torch.sparse_csr,
               torch.sparse_bsr: torch.sparse_bsc, torch.sparse_bsc: torch.sparse_bsr}[layout]
    for B in (A.t(), torch.t(A), A.T, A.mT, A.transpose(0, 1), A.transpose(-1, -2),
              A.permute(1, 0), torch.swapaxes(A, 0, 1)):
        assert B.layout == swapped
        assert B._values().data_ptr() == A._values().data_ptr()  # shared, as in torch
        assert_dense_equal(B.to_dense(), A.to_dense().t())
    assert A.t().t().layout == layout


def test_t_of_native_matches_torch_layouts():
    D = torch.randn(4, 6)
    for layout in (torch.sparse_bsr, torch.sparse_bsc):
        native = D.to_sparse(layout=layout, blocksize=(2, 3))
        ours = sf.to_sparse(native)
        assert ours.t().layout == native.t().layout
        torch.testing.assert_close(ours.t()._values(), native.t().values())


def test_t_of_per_row_fill_is_per_column():
    A = sf.sparse_csr_tensor([0, 1, 1], [2], [5.], (2, 3), fill_value=torch.tensor([[1.], [2.]]))
    assert_dense_equal(A.t().to_dense(), A.to_dense().t())
    assert_dense_equal(A.t().to_sparse_csr().to_dense(), A.to_dense().t())


def test_hybrid_transposes():
    A = random_tensor("hybrid", 1.5, torch.sparse_csc, size=(6, 9))
    assert A.transpose(0, 1).layout == torch.sparse_csr
    assert_dense_equal(A.transpose(0, 1).to_dense(), A.to_dense().transpose(0, 1))
    with pytest.raises(RuntimeError):
        A.transpose(0, 2)  # a sparse dim with a dense dim, which torch refuses too


# ---- every family through CSR -------------------------------------------------------

@pytest.mark.parametrize("layout", T.EXTRA_LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("fill", FILLS)
def test_union_and_same_pattern(layout, fill):
    A = random_tensor("random", fill, layout, seed=1, size=(6, 9))
    B = random_tensor("random", 2.0, layout, seed=2, size=(6, 9))
    for out, expected in ((A + B, A.to_dense() + B.to_dense()),
                          (A * A, A.to_dense() ** 2),
                          (torch.maximum(A, B), torch.maximum(A.to_dense(), B.to_dense())),
                          (A + B.to_dense(), A.to_dense() + B.to_dense())):
        if isinstance(out, sf.SparseFillTensor):
            assert out.layout == layout
            out = out.to_dense()
        assert_dense_equal(out, expected)


@pytest.mark.parametrize("layout", T.EXTRA_LAYOUTS, ids=T.layout_id)
def test_in_place_writes_into_the_components(layout):
    A = random_tensor("random", 1.5, layout, size=(6, 9))
    expected = A.to_dense() * 2 + 1
    values = A._values()
    A.mul_(2).add_(1)
    A += 0.5
    assert A.layout == layout and A._values() is values
    assert_dense_equal(A.to_dense(), expected + 0.5)
    # an op that returns its input is no write
    L = random_tensor("random", 1.5, layout, size=(6, 9)).detach().requires_grad_()
    assert L.contiguous() is L


# Finite fills: products with non-finite ones are checked on COO and CSR
# (crosscutting/test_regressions.py), which these layouts go through.
@pytest.mark.parametrize("layout", T.EXTRA_LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("fill", [1.5, 0.0, -2.0])
def test_products(layout, fill):
    A = random_tensor("random", fill, layout, size=(6, 9))
    X = torch.randn(9, 4, dtype=torch.float64)
    Y = torch.randn(3, 6, dtype=torch.float64)
    for out, expected in ((A @ X, A.to_dense() @ X), (torch.mm(A, X), A.to_dense() @ X),
                          (Y @ A, Y @ A.to_dense()), (A.t() @ Y.t(), A.to_dense().t() @ Y.t()),
                          (A @ X[:, 0], A.to_dense() @ X[:, 0])):
        assert_dense_equal(out, expected)
    B = random_tensor("random", 0.5, layout, seed=3, size=(9, 12))
    B = B if B.shape[0] == 9 else B.to_sparse(layout=torch.sparse_coo)[:9].to_sparse(
        layout=torch.sparse_csr)
    assert_dense_equal((A @ B).to_dense(), A.to_dense() @ B.to_dense())


@pytest.mark.parametrize("fill", [0.0, 1.5, -3.0])
@pytest.mark.parametrize("blocksize", [(2, 2), (3, 3), (2, 3)])
def test_bsr_matmul_shortcut(fill, blocksize):
    """BSR @ dense through sparsefill::bsr_spmm, any block shape, in both
    dtypes (test_bsr_products.py has every fill and direction)."""
    A = random_tensor("random", fill, torch.sparse_coo, size=(6, 12)).to_sparse_bsr(blocksize)
    X = torch.randn(12, 5, dtype=torch.float64)
    assert_dense_equal(A @ X, A.to_dense() @ X)
    Af = A.float()
    torch.testing.assert_close(Af @ X.float(), Af.to_dense() @ X.float(), equal_nan=True)


@pytest.mark.parametrize("layout", T.EXTRA_LAYOUTS, ids=T.layout_id)
def test_product_gradients(layout):
    (crow, col), v, f, size = T.leaf_parts(3, 0.5, layout, "real")
    X = torch.randn(size[1], 3, dtype=torch.float64, requires_grad=True)

    def fn(v, f, X):
        return sf.sparse_compressed_tensor(crow, col, v, size, layout=layout, fill_value=f) @ X
    # first order: double backward of sparse @ dense fails on CSR today
    torch.autograd.gradcheck(fn, (v, f, X))


@pytest.mark.parametrize("layout", T.EXTRA_LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("dim", [0, 1, -1, None])
def test_reductions_and_softmax(layout, fill, dim):
    A = random_tensor("random", fill, layout, size=(6, 9))
    D = A.to_dense()
    for name in ("sum", "mean", "amax", "amin", "prod"):
        args = () if dim is None else (dim,)
        out = getattr(torch, name)(A, *args)
        out = T.dense(out)
        assert_dense_equal(out, getattr(torch, name)(D, *args))
    if dim is not None:
        for fn in (torch.softmax, torch.log_softmax):
            out = fn(A, dim)
            assert_dense_equal(out.to_dense(), fn(D, dim))


@pytest.mark.parametrize("layout", T.EXTRA_LAYOUTS, ids=T.layout_id)
def test_shape_and_indexing(layout):
    A = random_tensor("hybrid", -math.inf, layout, size=(6, 9))
    D = A.to_dense()
    checks = [(A[1], D[1]), (A[:, 2], D[:, 2]), (A[2:4], D[2:4]), (A[:, torch.tensor([0, 3])],
                                                                   D[:, torch.tensor([0, 3])]),
              (A.narrow(1, 3, 3), D.narrow(1, 3, 3)), (A.unsqueeze(0), D.unsqueeze(0)),
              (torch.cat([A, A], 0), torch.cat([D, D], 0)),
              (A.reshape(3, 18, 3), D.reshape(3, 18, 3)),
              (A.select(2, 1), D.select(2, 1))]
    for out, expected in checks:
        out = T.dense(out)
        assert_dense_equal(out, expected)
    assert torch.cat([A, A], 0).layout == layout


@pytest.mark.parametrize("layout", T.EXTRA_LAYOUTS, ids=T.layout_id)
def test_scipy_and_pydata(layout):
    A = random_tensor("random", 2.5, layout, size=(6, 9))
    m, fill = A.to_scipy()
    kept = {torch.sparse_csc: "csc", torch.sparse_bsr: "bsr"}  # scipy has no BSC
    assert fill == 2.5 and m.format == kept.get(layout, "csr")
    idx = A._coo_indices()
    expected = torch.full(A.shape, 2.5, dtype=A.dtype)
    expected[idx[0], idx[1]] = torch.as_tensor(m.toarray())[idx[0], idx[1]]
    assert_dense_equal(expected, A.to_dense())
    assert_dense_equal(torch.as_tensor(A.to_pydata().todense()), A.to_dense())


# ---- factories ----------------------------------------------------------------------------

@pytest.mark.parametrize("fill", [2.5, -math.inf, math.nan])
@pytest.mark.parametrize("size", [(4, 6), (3, 4, 6)], ids=["unbatched", "batched"])
@pytest.mark.parametrize("layout", ALL, ids=T.layout_id)
def test_full_every_layout(layout, size, fill):
    """sf.full/zeros/ones in every layout (BSR/BSC with blocksize=; leading
    dims of a compressed layout are batch dims, RFC.md#batched-compressed): nothing stored."""
    A = sf.full(size, fill, layout=layout, blocksize=T.blocksize_for(layout) and (2, 3),
                dtype=torch.float64)
    assert A.layout == layout and A.shape == size and A.nse() == 0
    assert_dense_equal(A.to_dense(), torch.full(size, fill, dtype=torch.float64))
    if layout in T.BLOCK_LAYOUTS:
        assert A.values().shape[-2:] == (2, 3)
    if layout != torch.sparse_coo:
        assert A._batch_dim() == len(size) - 2
    Z = sf.zeros(*size, layout=layout, blocksize=T.blocksize_for(layout) and 2)
    assert_dense_equal(Z.to_dense(), torch.zeros(size))
    assert_dense_equal((Z + sf.ones(size, layout=layout, blocksize=T.blocksize_for(layout) and 2))
                       .to_dense(), torch.ones(size))


@pytest.mark.parametrize("kwargs,error,message", [
    ({"layout": torch.sparse_bsr}, TypeError, "needs blocksize="),
    ({"layout": torch.sparse_bsc, "blocksize": 4}, RuntimeError, "not divisible by blocksize"),
    ({"layout": torch.sparse_csr, "blocksize": 2}, ValueError, "blocksize is only for"),
    ({"layout": torch.strided}, ValueError, "layout must be"),
])
def test_full_refuses(kwargs, error, message):
    with pytest.raises(error, match=message):
        sf.full((4, 6), 1., **kwargs)
