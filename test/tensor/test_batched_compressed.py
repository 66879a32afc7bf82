"""Batched compressed tensors (RFC.md#batched-compressed): CSR, CSC, BSR and BSC with
leading batch dims. Constructors against torch's own batched layouts,
validation, conversions to and from COO, strided and unbatched tensors,
padding to one nse per batch, the O(1) transposes, every op family and
gradients, each against the dense computation, over finite, non-finite and
per-batch fills. The element-wise ops run on these layouts in
test_elementwise_table.py (sf_testing.BATCHED_CASES)."""
import copy
import io
import math
import pickle

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from sf_testing import assert_dense_equal

COMPRESSED = [torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc]
# A per-batch fill (one fill per batch: shape (b, 1, 1)) is a list here.
FILLS = [1.5, 0.0, math.inf, -math.inf, math.nan, [2.0, -math.inf], [0.5, -3.0]]


def _strided(fill, batch=(2,), size=(4, 6), seed=0, density=0.3, dense_shape=()):
    """A strided tensor of fill-valued elements with some others: batch 1
    holds more of them than batch 0 (so conversions must pad)."""
    g = torch.Generator().manual_seed(seed)
    shape = tuple(batch) + tuple(size) + tuple(dense_shape)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    keep = torch.rand(shape[:len(batch) + 2], generator=g) < density
    keep.view(-1, *size)[-1, :2] = True
    f = _fill_tensor(fill, len(batch), len(dense_shape))
    x = torch.where(keep.reshape(keep.shape + (1,) * len(dense_shape)), x, f)
    return x


def _fill_tensor(fill, nb=1, dense_dim=0):
    if isinstance(fill, list):
        return torch.tensor(fill, dtype=torch.float64).reshape((-1,) + (1,) * (nb + 1 + dense_dim))
    return torch.tensor(fill, dtype=torch.float64)


def _batched(layout, fill, **kw):
    x = _strided(fill, **kw)
    nb = len(kw.get("batch", (2,)))
    dense_dim = len(kw.get("dense_shape", ()))
    A = sf.to_sparse(x, fill_value=_fill_tensor(fill, nb, dense_dim), layout=layout,
                     blocksize=T.blocksize_for(layout), dense_dim=dense_dim)
    return A, x


def _valid_for_torch(A):
    """torch accepts A's components as a batched tensor of its layout."""
    native = torch.sparse_compressed_tensor(*T.compressed_indices(A), A.values().detach(), A.shape,
                                            layout=A.layout, check_invariants=True)
    torch._validate_sparse_compressed_tensor_args(*T.compressed_indices(A), A.values().detach(),
                                                  A.shape, A.layout)
    return native


# ---- construction, validation, conversions --------------------------------------------

@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_constructor_matches_torch(layout):
    """With fill 0 our tensor is torch's, component for component (torch
    needs the same nse in every batch: the second is the first flipped)."""
    y = _strided(0.0, size=(6, 6))[0]
    x = torch.stack([y, y.flip(0, 1) * 2])
    native = x.to_sparse(layout=layout, blocksize=T.blocksize_for(layout))
    ours = sf.sparse_compressed_tensor(*T.compressed_indices(native), native.values(), native.shape,
                                       layout=layout)
    assert ours.layout == layout and ours.shape == native.shape
    assert (ours.sparse_dim(), ours.dense_dim()) == (native.sparse_dim(), native.dense_dim())
    assert ours.nse() == native._nnz()
    assert_dense_equal(ours.to_dense(), x)
    B = sf.to_sparse(native, fill_value=2.5)  # a native batched tensor, wrapped
    expected = torch.where(native.to_dense() == 0, 2.5, native.to_dense())
    expected[x != 0] = x[x != 0]
    stored = sf.to_sparse(native, fill_value=math.nan).to_dense().isnan().logical_not()
    assert_dense_equal(B.to_dense(), torch.where(stored, x, torch.tensor(2.5, dtype=x.dtype)))


def test_named_constructors_and_size_inference():
    A = sf.sparse_csr_tensor([[0, 1, 1], [0, 0, 1]], [[2], [0]], [[7.], [8.]], fill_value=-1.)
    assert A.shape == (2, 2, 3) and A.layout == torch.sparse_csr
    assert_dense_equal(A.to_dense(), torch.tensor([[[-1., -1., 7.], [-1., -1., -1.]],
                                                   [[-1., -1., -1.], [8., -1., -1.]]]))
    B = sf.sparse_bsc_tensor([[0, 1]], [[0]], torch.ones(1, 1, 2, 2), (1, 2, 2),
                             fill_value=3.)
    assert_dense_equal(B.to_dense(), torch.ones(1, 2, 2))
    C = sf.sparse_csc_tensor(torch.tensor([[0, 1, 1]]), torch.tensor([[1]]), torch.tensor([[5.]]),
                             (1, 2, 2), fill_value=torch.tensor([[[9.]]]))
    assert_dense_equal(C.to_dense(), torch.tensor([[[9., 9.], [5., 9.]]]))


@pytest.mark.parametrize("fill", [0.0, math.inf, math.nan, [2.0, -math.inf]], ids=T.fill_id)
@pytest.mark.parametrize("target", COMPRESSED + [torch.sparse_coo, "strided"], ids=str)
@pytest.mark.parametrize("source", COMPRESSED, ids=T.layout_id)
def test_every_conversion(source, target, fill):
    A, x = _batched(source, fill, size=(6, 6))
    assert A.layout == source and A.shape == x.shape
    _valid_for_torch(A)
    assert_dense_equal(A.to_dense(), x)
    if target == "strided":
        return
    B = A.to_sparse(layout=target, blocksize=T.blocksize_for(target))
    assert B.layout == target and B.shape == x.shape
    assert_dense_equal(B.to_dense(), x)
    assert_dense_equal(B.fill_value().expand(x.shape) if B._has_per_slice_fill()
                       else B.fill_value(), A.fill_value().expand(x.shape)
                       if A._has_per_slice_fill() else A.fill_value())
    if target != torch.sparse_coo:
        _valid_for_torch(B)
    else:
        assert B.sparse_dim() == 3
        back = B.to_sparse(layout=source, blocksize=T.blocksize_for(source))
        assert back.layout == source
        assert_dense_equal(back.to_dense(), x)


@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_padding_stores_fill_valued_elements(layout):
    """Batches storing different numbers of elements are padded with the
    fill at their first unspecified units, so every batch has one nse and no
    element changes (RFC.md#batched-compressed)."""
    fill = torch.tensor([4.0, -math.inf], dtype=torch.float64).reshape(2, 1, 1)
    x = fill.expand(2, 6, 6).clone()
    x[0, 0, 0] = 1.0
    x[1, 2:5, 3] = 2.0
    A = sf.to_sparse(x, fill_value=fill, layout=layout, blocksize=T.blocksize_for(layout))
    _valid_for_torch(A)
    assert_dense_equal(A.to_dense(), x)
    assert A.values().shape[0] == 2
    # Batch 0 stores fewer elements of its own: the rest of its nse is padding
    # holding its fill, explicitly stored.
    v0 = A.values()[0]
    assert bool((v0 == 4.0).any()) and bool(torch.isin(v0, torch.tensor([1.0, 4.0],
                                                                       dtype=v0.dtype)).all())


@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_two_batch_dims_and_hybrid(layout):
    A, x = _batched(layout, -math.inf, batch=(2, 3), size=(6, 6), dense_shape=(2,))
    assert (A.dense_dim(), A.sparse_dim(), A._batch_dim()) == (1, 2, 2)
    assert T.compressed_indices(A)[0].shape[:2] == (2, 3)
    _valid_for_torch(A)
    assert_dense_equal(A.to_dense(), x)
    T.assert_matches_dense(A * 2, x * 2)
    T.assert_matches_dense(A.sum((0, 2)), x.sum((0, 2)))


@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_from_batched_coo_and_to_unbatched(layout):
    A, x = _batched(layout, 1.5, size=(6, 6))
    C = sf.to_sparse(x, fill_value=1.5)  # COO with 3 sparse dims
    B = C.to_sparse(layout=layout, blocksize=T.blocksize_for(layout))
    assert B.layout == layout and B._batch_dim() == 1
    assert_dense_equal(B.to_dense(), x)
    if layout == torch.sparse_csr:
        assert_dense_equal(C.to_sparse_csr().to_dense(), x)
    # indexing one batch gives an unbatched tensor of the layout
    one = A[1]
    assert isinstance(one, sf.SparseFillTensor) and one.layout == layout
    assert one._batch_dim() == 0
    assert_dense_equal(one.to_dense(), x[1])
    # and stacking unbatched ones gives a batched one back
    S = torch.stack([A[0], A[1]])
    assert_dense_equal(S.to_dense(), x)


BAD = [
    ("crow_indices and col_indices must have the same batch shape",
     lambda: sf.sparse_csr_tensor(torch.tensor([[0, 1]]), torch.tensor([0]),
                                  torch.tensor([[1.]]), (1, 1, 1))),
    ("values of shape", lambda: sf.sparse_csr_tensor(torch.tensor([[0, 1]]),
                                                     torch.tensor([[0]]), torch.tensor([1.]),
                                                     (1, 1, 1))),
    (r"`crow_indices\[..., -1\] == nse`",
     lambda: sf.sparse_csr_tensor(torch.tensor([[0, 1], [0, 0]]), torch.tensor([[0], [0]]),
                                  torch.tensor([[1.], [2.]]), (2, 1, 1))),
    (r"`ccol_indices\[..., 0\] == 0`",
     lambda: sf.sparse_csc_tensor(torch.tensor([[1, 1]]), torch.tensor([[0]]),
                                  torch.tensor([[1.]]), (1, 1, 1))),
    ("ccol_indices.shape", lambda: sf.sparse_csc_tensor(torch.tensor([[0, 1]]),
                                                        torch.tensor([[0]]),
                                                        torch.tensor([[1.]]), (1, 1, 3))),
    ("row_indices", lambda: sf.sparse_csc_tensor(torch.tensor([[0, 2]]), torch.tensor([[1, 0]]),
                                                 torch.tensor([[1., 2.]]), (1, 2, 1))),
    ("size", lambda: sf.sparse_csr_tensor(torch.tensor([[0, 1]]), torch.tensor([[0]]),
                                          torch.tensor([[1.]]), (2, 1, 1))),
    ("fill_value", lambda: sf.sparse_csr_tensor(torch.tensor([[0, 1]]), torch.tensor([[0]]),
                                                torch.tensor([[1.]]), (1, 1, 1),
                                                fill_value=torch.ones(3, 1, 1))),
    ("blocksize", lambda: sf.sparse_bsr_tensor(torch.tensor([[0, 1]]), torch.tensor([[0]]),
                                               torch.ones(1, 1, 2, 2), (1, 3, 2))),
]


@pytest.mark.parametrize("message,make", BAD, ids=[m for m, _ in BAD])
def test_validation_names_the_argument(message, make):
    with pytest.raises((ValueError, RuntimeError, TypeError), match=message):
        make()


@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_print_pickle_deepcopy(layout):
    A, x = _batched(layout, [1.0, math.nan], size=(6, 6))
    text = repr(A)
    assert "size=(2, 6, 6)" in text and str(layout) in text
    for B in (pickle.loads(pickle.dumps(A)), copy.deepcopy(A)):
        assert B.layout == layout and B.shape == A.shape
        assert_dense_equal(B.to_dense(), x)
    buf = io.BytesIO()
    torch.save(A, buf)
    buf.seek(0)
    assert_dense_equal(torch.load(buf, weights_only=False).to_dense(), x)


# ---- the O(1) transposes --------------------------------------------------------------

@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_transpose_of_the_sparse_dims_swaps_the_layout(layout):
    A, x = _batched(layout, [0.5, math.inf], size=(6, 6))
    for B in (A.transpose(-2, -1), A.mT, A.transpose(2, 1), A.permute(0, 2, 1)):
        assert B.layout == {torch.sparse_csr: torch.sparse_csc,
                            torch.sparse_csc: torch.sparse_csr,
                            torch.sparse_bsr: torch.sparse_bsc,
                            torch.sparse_bsc: torch.sparse_bsr}[layout]
        assert B._values().data_ptr() == A._values().data_ptr()  # shared, O(1)
        assert_dense_equal(B.to_dense(), x.transpose(-2, -1))
    C = A.transpose(0, 1)  # a batch dim with a sparse one: a conversion
    assert C.layout == layout
    assert_dense_equal(C.to_dense(), x.transpose(0, 1))


# ---- op families, equal to dense ------------------------------------------------------

@pytest.mark.parametrize("fill", FILLS, ids=T.fill_id)
@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_elementwise(layout, fill):
    A, x = _batched(layout, fill, size=(6, 6), seed=1)
    B, y = _batched(layout, 2.0, size=(6, 6), seed=2)  # another pattern: the union
    for out, expected in ((torch.exp(A), torch.exp(x)), (A * 3, x * 3), (-A, -x),
                          (A + B, x + y), (A * B, x * y), (A * A, x * x),
                          (torch.where(A > 0, A, B), torch.where(x > 0, x, y)),
                          (A + y[0], x + y[0])):
        if isinstance(out, sf.SparseFillTensor):
            assert out.layout == layout
        T.assert_matches_dense(out, expected)


@pytest.mark.parametrize("fill", FILLS, ids=T.fill_id)
@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_products(layout, fill):
    A, x = _batched(layout, fill, size=(6, 6), seed=3)
    g = torch.Generator().manual_seed(4)
    X = torch.randn(2, 6, 3, generator=g, dtype=torch.float64)
    Y = torch.randn(5, 6, generator=g, dtype=torch.float64)
    T.assert_matches_dense(A @ X, x @ X)
    T.assert_matches_dense(torch.bmm(A, X), torch.bmm(x, X))
    T.assert_matches_dense(A @ X[0], x @ X[0])
    T.assert_matches_dense(Y @ A, Y @ x)


@pytest.mark.parametrize("fill", FILLS, ids=T.fill_id)
@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_softmax_and_reductions(layout, fill):
    A, x = _batched(layout, fill, size=(6, 6), seed=5)
    per_batch = isinstance(fill, list)
    for dim in (0, 1, 2, -1):
        for op in (torch.sum, torch.softmax, torch.log_softmax, torch.amax):
            if per_batch and dim == 0:
                # A per-slice fill varying along the reduced dim: the COO
                # families compute it or refuse (RFC.md#reductions-and-softmax), never silently wrong.
                _close_or_refused(lambda t: op(t, dim), A, x)
            else:
                T.assert_matches_dense(op(A, dim), op(x, dim))
    _close_or_refused(torch.sum, A, x)
    T.assert_matches_dense(A.mean((1, 2)), x.mean((1, 2)))


def _close_or_refused(fn, A, x):
    try:
        out = fn(A)
    except NotImplementedError as e:
        assert "per-slice fill" in str(e)
        return
    T.assert_matches_dense(out, fn(x))


@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_shape_ops(layout):
    A, x = _batched(layout, -math.inf, size=(6, 6), seed=6)
    T.assert_matches_dense(A[:, 1:5], x[:, 1:5])
    T.assert_matches_dense(torch.cat([A, A]), torch.cat([x, x]))
    T.assert_matches_dense(A.narrow(2, 1, 3), x.narrow(2, 1, 3))
    T.assert_matches_dense(A.sum(0, keepdim=True), x.sum(0, keepdim=True))
    T.assert_matches_dense(A.unsqueeze(0), x.unsqueeze(0))
    out = A.clone()
    out.mul_(2)
    T.assert_matches_dense(out, x * 2)
    out += A
    T.assert_matches_dense(out, x * 3)


# ---- gradients ------------------------------------------------------------------------

@pytest.mark.parametrize("fill", [1.5, [0.5, -2.0]], ids=T.fill_id)
@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_gradients_first_and_second_order(layout, fill):
    A, v, f = T.leaves(_batched(layout, fill, size=(4, 3), seed=7, density=0.4)[0])
    X = torch.randn(2, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(8))

    def run(v, f):
        B = sf.sparse_compressed_tensor(*T.compressed_indices(A), v, A.shape, layout=layout,
                                        fill_value=f)
        out = torch.softmax(torch.sin(B) * 2, -1) @ X + B.sum(0).to_dense()[None, :, :1]
        return T.dense(out)

    torch.autograd.gradcheck(run, (v, f))
    if layout in (torch.sparse_csr, torch.sparse_bsc):  # second order: the two extremes
        torch.autograd.gradgradcheck(run, (v, f))


@pytest.mark.parametrize("fill", [1.5, -math.inf, [0.5, math.nan]], ids=T.fill_id)
@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_gradients_equal_dense(layout, fill):
    A, x = _batched(layout, fill, size=(6, 6), seed=9)
    A = A.detach().requires_grad_()
    out = (torch.exp(A * 0.5) + A).sum((1, 2))
    (T.dense(out)).sum().backward()
    D = x.clone().requires_grad_()
    (torch.exp(D * 0.5) + D).sum((1, 2)).sum().backward()
    g = A.grad
    assert g.layout == layout
    assert_dense_equal(g.to_dense(), D.grad)


@pytest.mark.parametrize("layout", COMPRESSED, ids=T.layout_id)
def test_interop(layout):
    """pydata sparse gets the batched tensor as an N-d COO with the fill;
    scipy (2-D only) refuses it by name."""
    import sparse
    A, x = _batched(layout, -1.5, size=(6, 6))
    P = A.to_pydata()
    assert isinstance(P, sparse.COO) and P.fill_value == -1.5
    assert_dense_equal(torch.from_numpy(P.todense()), x)
    with pytest.raises(NotImplementedError, match="scipy.sparse is 2-D"):
        A.to_scipy()
