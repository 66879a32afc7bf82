"""torch.sparse.sum of a SparseFillTensor: the fill counted as the dense tensor
counts it."""
from __future__ import annotations

import math

import pytest
import torch

import torch_sparsefill as sf
from sf_testing import assert_dense_equal, rng


@pytest.mark.parametrize("fill", [0.0, 1.5, math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("dim", [None, 0, 1, (0, 2), (0, 1, 2)], ids=str)
def test_sparse_sum_matches_dense(dim, fill):
    g = rng(1)
    keep = torch.rand(3, 4, 5, generator=g) < 0.3
    idx = keep.nonzero().t()
    A = sf.sparse_coo_tensor(idx, torch.randn(idx.shape[1], generator=g, dtype=torch.float64),
                             (3, 4, 5), fill_value=fill)
    out = torch.sparse.sum(A) if dim is None else torch.sparse.sum(A, dim)
    expected = A.to_dense().sum() if dim is None else A.to_dense().sum(dim)
    if isinstance(out, sf.SparseFillTensor):
        out = out.to_dense()
    assert_dense_equal(out, expected)
    out = torch.sparse.sum(A, 1, dtype=torch.float32).to_dense()
    assert_dense_equal(out, A.to_dense().sum(1, dtype=torch.float32))
