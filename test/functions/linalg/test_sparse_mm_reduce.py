"""torch.sparse.mm(A, x, reduce=...) of a SparseFillTensor (RFC.md#stored-only-ops):
'sum' is the product at any fill; 'mean', 'amax' and 'amin', documented over
the stored elements, are refused on a defined fill, naming the dense call
and the indefinite fill."""
from __future__ import annotations

import pytest
import torch

import torch_sparsefill as sf
from sf_testing import FILLS, LAYOUTS, assert_dense_equal, layout_id, rng


def operands(fill, layout, seed, m=6, k=7, d=3):
    """A (m, k) with an empty row and a full row, and x (k, d)."""
    g = rng(seed)
    keep = torch.rand(m, k, generator=g) < 0.4
    keep[1] = False
    keep[2] = True
    idx = keep.nonzero().t()
    values = torch.randn(idx.shape[1], generator=g, dtype=torch.float64)
    x = torch.randn(k, d, generator=g, dtype=torch.float64)
    A = sf.sparse_coo_tensor(idx, values, (m, k), fill_value=fill).coalesce()
    return (A.to_sparse_csr() if layout == torch.sparse_csr else A), x


@pytest.mark.parametrize("layout", LAYOUTS, ids=layout_id)
@pytest.mark.parametrize("fill", FILLS)
def test_sum_is_the_product(fill, layout):
    A, x = operands(fill, layout, 1)
    assert_dense_equal(torch.sparse.mm(A, x, "sum"), A.to_dense() @ x)
    assert_dense_equal(torch.sparse.mm(A, x), A.to_dense() @ x)


@pytest.mark.parametrize("fill", [0.0, 1.5, float("-inf")])
@pytest.mark.parametrize("reduce", ["mean", "amax", "amin", "max", "min"])
def test_sparse_mm_reduce_mean_amax_amin_refused_on_a_defined_fill(reduce, fill):
    # Fill 0 too: torch's mean runs over the stored neighbours, the dense
    # mean over all n (SAGEConv(aggr='mean') would silently differ).
    A, x = operands(fill, torch.sparse_csr, 2)
    with pytest.raises(NotImplementedError) as info:
        torch.sparse.mm(A, x, reduce)
    message = str(info.value)
    assert "specified elements" in message and "A.to_indefinite()" in message
    assert ("A @ x" if reduce == "mean" else "along a dim") in message


def test_bad_arguments():
    A, x = operands(1.0, torch.sparse_csr, 8)
    with pytest.raises(RuntimeError, match="reduce must be one of"):
        torch.sparse.mm(A, x, "prod")
    with pytest.raises(NotImplementedError, match="strided mat2"):
        torch.sparse.mm(A, A.t(), "mean")
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        torch.sparse.mm(A, x[:3], "sum")
