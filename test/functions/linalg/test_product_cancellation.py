"""Products whose fill correction would cancel (docs/design.md#cancellation):
a row that stores most of the fill's mass (a fully stored row, a per-column
fill that is huge on the stored columns) keeps the dense sum's accuracy.
Each case against the dense product of `A.to_dense()`."""
from __future__ import annotations

import pytest
import torch

import torch_sparsefill as sf

LAYOUTS = ["coo", "csr", "csc", "bsr"]


def _as(layout, A):
    if layout == "coo":
        return A
    if layout == "bsr":
        return A.to_sparse_bsr((2, 2))
    return A.to_sparse_csr() if layout == "csr" else A.to_sparse_csc()


def _row_fully_stored(dtype, fill):
    """4 x 4: row 0 stores all its elements, row 1 two; the rest is the fill."""
    g = torch.Generator().manual_seed(0)
    idx = torch.tensor([[0, 0, 0, 0, 1, 1], [0, 1, 2, 3, 0, 3]])
    return sf.sparse_coo_tensor(idx, torch.randn(6, generator=g, dtype=dtype), (4, 4),
                                fill_value=fill)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_fully_stored_row_keeps_its_digits_under_a_large_fill(layout):
    # Before: row 0 of A @ W was [0, 16384] against dense [-6.07, -3.35]
    # (fill 1e20: the correction f * colsum(W) minus f * W over the row).
    A = _as(layout, _row_fully_stored(torch.float64, 1e20))
    D = A.to_dense()
    W = torch.randn(4, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(A @ W, D @ W, rtol=1e-12, atol=0)
    torch.testing.assert_close(A @ W[:, 0], D @ W[:, 0], rtol=1e-12, atol=0)
    torch.testing.assert_close(W.t() @ A.t(), W.t() @ D.t(), rtol=1e-12, atol=0)


def test_a_huge_per_column_fill_on_the_stored_columns_is_not_subtracted():
    # Fuzz seed 934622: a per-column fill of float32's largest (nan_to_num of
    # inf) on the columns row 1 stores, 1.5 on the one it leaves: dense -2.48,
    # was -1.53 (the non-subtracting path's finite part, a total minus the
    # stored part).
    big = torch.finfo(torch.float32).max
    A = sf.sparse_coo_tensor([[1, 1, 1], [0, 2, 3]], torch.tensor([-0.15, -1.62, 2.12]),
                             (2, 4), fill_value=torch.tensor([[big, 1.5, big, -big]]))
    W = torch.tensor([[0.3, 0.0], [-1.1, 0.4], [0.7, 0.0], [-0.2, 0.0]])
    torch.testing.assert_close((A @ W)[1], (A.to_dense() @ W)[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sparse_at_sparse_with_a_fully_stored_row_and_large_fills(dtype):
    A = _row_fully_stored(dtype, 1e20 if dtype == torch.float64 else 1e9)
    B = sf.to_sparse(torch.randn(4, 3, dtype=dtype, generator=torch.Generator().manual_seed(2)),
                     fill_value=0.5)
    want = A.to_dense().double() @ B.to_dense().double()
    got = (A @ B)
    got = got.to_dense() if isinstance(got, sf.SparseFillTensor) else got
    scale = A.to_dense().double().abs() @ B.to_dense().double().abs()
    eps = torch.finfo(dtype).eps
    assert ((got.double() - want).abs() <= 16 * eps * scale).all(), (got, want)


def test_a_sparse_row_keeps_the_fast_correction():
    # 1% of a 400 x 400 matrix with fill 5: no row is near the limit, and the
    # result is the dense product's (the rule does not fire on ordinary data).
    g = torch.Generator().manual_seed(3)
    idx = torch.randint(0, 400, (2, 1600), generator=g)
    A = sf.sparse_coo_tensor(idx, torch.randn(1600, generator=g, dtype=torch.float64),
                             (400, 400), fill_value=5.).coalesce()
    W = torch.randn(400, 8, generator=g, dtype=torch.float64)
    torch.testing.assert_close(A @ W, A.to_dense() @ W, rtol=1e-10, atol=1e-10)


def test_recomputing_a_row_leaves_the_operands_untouched():
    # The recomputed row is built from the fill: a (1, k) fill of a one-row
    # operand must not become that row (the stored values were written into
    # the fill itself, and the gradient's product then read them as the fill).
    f = torch.tensor([[0.5, 1.0, 2.0]], dtype=torch.float64)
    values = torch.tensor([1.0, 3.0], dtype=torch.float64)
    A = sf.sparse_coo_tensor([[0, 0], [0, 1]], values, (1, 3), fill_value=f)
    x = torch.tensor([[1.0, 2.0], [2.0, -1.0], [3.0, 0.5]], dtype=torch.float64)
    torch.testing.assert_close(A @ x, A.to_dense() @ x)
    assert f.tolist() == [[0.5, 1.0, 2.0]] and values.tolist() == [1.0, 3.0]
    torch.testing.assert_close(A._fill_value(), f)


def test_sparse_at_sparse_with_an_empty_per_column_fill():
    # Fuzz seed 1115839: B of shape (4, 0) has a per-column fill of shape
    # (1, 0); the cancellation bound's min |fill| of it raised amin()'s
    # "Expected reduction dim" where dense returns a (3, 0) result.
    A = sf.sparse_coo_tensor([[0], [1]], torch.tensor([2.0]), (3, 4), fill_value=1.5)
    B = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (4, 0),
                             fill_value=torch.zeros(1, 0))
    got = A @ B
    got = got.to_dense() if isinstance(got, sf.SparseFillTensor) else got
    torch.testing.assert_close(got, A.to_dense() @ B.to_dense())
