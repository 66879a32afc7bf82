"""The everyday tensor methods with their dense meaning (RFC.md#tensor-methods):
copy_, fill_, item/tolist/bool, isclose/allclose/equal, nbytes, type(),
share_memory_, pin_memory, numpy(), .data, out=."""
import math

import pytest
import torch

import torch_sparsefill as sf

import sf_testing as T

PATTERNS = ["empty", "random", "full", "hybrid"]


def _pair(fill, layout, pattern="random", seed=0):
    return T.random_tensor(pattern, fill, layout, seed=seed)


# ---- copy_ and fill_ -----------------------------------------------------------------

@pytest.mark.parametrize("fill", T.FILLS)
@pytest.mark.parametrize("src_layout", T.LAYOUTS)
@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_copy_same_pattern_in_place(layout, src_layout, fill):
    A = _pair(0.0, layout)
    src = (A * 3.0 + 1.0).to_sparse(layout=src_layout)
    src._fill_value().fill_(fill)
    values, fill_t = A._values(), A._fill_value()
    assert A.copy_(src) is A
    T.assert_dense_equal(A.to_dense(), src.to_dense())
    assert A._values() is values and A._fill_value() is fill_t


def test_copy_casts_and_broadcasts_the_fill():
    A = T.random_tensor("hybrid", 0.5, torch.sparse_coo, dtype=torch.float32)
    src = A.double() * 2
    src = sf.sparse_coo_tensor(src.indices(), src.values(), src.shape, fill_value=-1.)
    A.copy_(src)
    T.assert_dense_equal(A.to_dense(), src.to_dense().float())


def test_copy_refusals():
    A = _pair(1.0, torch.sparse_coo)
    with pytest.raises(RuntimeError, match="different pattern.*assign=True"):
        A.copy_(_pair(1.0, torch.sparse_coo, seed=3))
    with pytest.raises(RuntimeError, match="size"):
        A.copy_(sf.full((2, 2), 1., dtype=A.dtype))
    with pytest.raises(NotImplementedError, match="src must be a SparseFillTensor"):
        A.copy_(torch.ones(A.shape, dtype=A.dtype))


def test_dense_copy_from_a_sparse_fill_tensor():
    A = _pair(math.inf, torch.sparse_csr)
    D = torch.zeros(A.shape, dtype=A.dtype)
    D.copy_(A)
    T.assert_dense_equal(D, A.to_dense())


@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_fill_(layout):
    A = _pair(2.0, layout, "hybrid" if layout == torch.sparse_coo else "random")
    A.fill_(-3.5)
    T.assert_dense_equal(A.to_dense(), torch.full(A.shape, -3.5, dtype=A.dtype))
    A.fill_(torch.tensor(math.nan))
    assert A.to_dense().isnan().all()


def test_out_keyword_writes_into_a_sparse_fill_tensor():
    A, B = _pair(1.0, torch.sparse_coo), _pair(-1.0, torch.sparse_coo, seed=3)
    out = torch.zeros_like(A)
    assert torch.maximum(A, A * 2, out=out) is out
    T.assert_dense_equal(out.to_dense(), torch.maximum(A.to_dense(), 2 * A.to_dense()))
    assert torch.maximum(A, B, out=out) is out  # another pattern: out takes it (as torch)
    T.assert_dense_equal(out.to_dense(), torch.maximum(A.to_dense(), B.to_dense()))


# ---- to Python -------------------------------------------------------------------------

@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_item_tolist_and_python_numbers(layout):
    A = _pair(-2.0, layout, "hybrid" if layout == torch.sparse_coo else "random")
    assert A.tolist() == A.to_dense().tolist()
    one = sf.sparse_coo_tensor([[0]], [4.5], (1,), fill_value=0.)
    assert one.item() == 4.5 and float(one) == 4.5 and int(one) == 4 and bool(one)
    assert sf.full((1, 1), 3.).item() == 3.0 and not bool(sf.full((1,), 0.))
    with pytest.raises(RuntimeError, match="cannot be converted"):
        A.item()
    with pytest.raises(RuntimeError, match="cannot be converted"):
        bool(A)


# ---- comparisons --------------------------------------------------------------------------

def _close_pairs(layout):
    for fa in T.FILLS:
        for fb in (fa, 1.5, math.nan, math.inf):
            for pattern in PATTERNS:
                A = _pair(fa, layout, pattern)
                yield A, A.clone()
                yield A, _pair(fb, layout, pattern, seed=1)
                yield A, A * (1 + 1e-7)


@pytest.mark.parametrize("equal_nan", [False, True])
@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_isclose_allclose_equal_match_dense(layout, equal_nan):
    for A, B in _close_pairs(layout):
        DA, DB = A.to_dense(), B.to_dense()
        got = torch.isclose(A, B, equal_nan=equal_nan)
        assert isinstance(got, sf.SparseFillTensor)
        T.assert_dense_equal(got.to_dense(), torch.isclose(DA, DB, equal_nan=equal_nan))
        assert torch.allclose(A, B, equal_nan=equal_nan) == \
            torch.allclose(DA, DB, equal_nan=equal_nan)
        assert A.allclose(B, rtol=0.1, atol=0.) == torch.allclose(DA, DB, rtol=0.1, atol=0.)
        assert torch.equal(A, B) == torch.equal(DA, DB)
        # a strided operand: the same answers
        assert torch.allclose(A, DB, equal_nan=equal_nan) == \
            torch.allclose(DA, DB, equal_nan=equal_nan)
        assert A.equal(DB) == torch.equal(DA, DB)


def test_comparison_arguments():
    A = _pair(0.5, torch.sparse_coo)
    assert not torch.equal(A, sf.full((2, 2), 0.5, dtype=A.dtype))
    with pytest.raises(RuntimeError, match="sizes"):
        torch.allclose(A, sf.full((2, 2), 0.5, dtype=A.dtype))
    with pytest.raises(RuntimeError, match="dtype"):
        torch.isclose(A, A.float())


# ---- metadata and memory ------------------------------------------------------------------

@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_nbytes_counts_the_components(layout):
    A = _pair(1.0, layout)
    parts = [A._values(), A._fill_value()] + (
        [A.crow_indices(), A.col_indices()] if layout == torch.sparse_csr else [A._indices()])
    assert A.nbytes == sum(p.numel() * p.element_size() for p in parts)
    assert sf.full((1000, 1000), 2., layout=layout).nbytes == 4 + (
        1001 * 8 if layout == torch.sparse_csr else 0)  # the fill (and CSR's row pointers)


def test_type():
    A = _pair(1.0, torch.sparse_coo)
    native = A.to_dense().to_sparse()
    assert A.type() == native.type()
    assert A.float().type() == native.float().type()
    with pytest.raises(RuntimeError) as native_error:  # torch has no type name for CSR
        A.to_dense().to_sparse_csr().type()
    with pytest.raises(RuntimeError, match=str(native_error.value)):
        A.to_sparse(layout=torch.sparse_csr).type()
    B = A.type(torch.float32)
    assert isinstance(B, sf.SparseFillTensor) and B.dtype == torch.float32
    assert A.type("torch.sparse.FloatTensor").dtype == torch.float32
    T.assert_dense_equal(B.to_dense(), A.to_dense().float())


def test_share_memory_and_pin_memory():
    A = _pair(1.0, torch.sparse_csr)
    assert not A.is_shared()
    assert A.share_memory_() is A and A.is_shared()
    try:
        torch.ones(1).pin_memory()
    except RuntimeError as dense_error:  # no accelerator: refused like a dense tensor
        with pytest.raises(RuntimeError, match=str(dense_error)[:20]):
            A.pin_memory()
    else:
        P = A.pin_memory()
        assert P.is_pinned() and not A.is_pinned()
        T.assert_dense_equal(P.to_dense(), A.to_dense())


def test_numpy_is_refused_with_the_way_out():
    with pytest.raises(TypeError, match=r"to_dense\(\).numpy\(\)"):
        _pair(1.0, torch.sparse_coo).numpy()


def test_data():
    A = _pair(1.0, torch.sparse_coo).requires_grad_()
    D = A.data
    assert isinstance(D, sf.SparseFillTensor) and not D.requires_grad
    T.assert_dense_equal(D.to_dense(), A.to_dense().detach())
    values = A._values()
    B = _pair(2.0, torch.sparse_coo, seed=4)
    A.data = B
    assert A._values() is values and A.requires_grad
    T.assert_dense_equal(A.to_dense().detach(), B.to_dense())
    with pytest.raises(RuntimeError, match="shape"):
        A.data = sf.full((2,), 1., dtype=A.dtype)
