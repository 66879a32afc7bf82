"""Shared by the shape-op tests (test_shape.py, test_concat.py): an
independent dense reference (`dense_of`, computed here rather than with the
library's to_dense(), so per-slice fills are checked independently of its
conversions), the tensors every op runs on, and the canonical-form check."""
from __future__ import annotations

import math

import torch

import torch_sparsefill as sf
from sf_testing import random_tensor, rng

COO, CSR, CSC = torch.sparse_coo, torch.sparse_csr, torch.sparse_csc


def dense_of(A) -> torch.Tensor:
    """Strided equivalent of A, differentiable w.r.t. values and fill: the
    fill broadcast over the size, the (summed) stored values at their indices."""
    if not isinstance(A, sf.SparseFillTensor):
        return A
    size = tuple(A.shape)
    s = A.sparse_dim()
    if A.layout == CSC:  # the CSR of the transpose (RFC.md 15.1), read as such
        return dense_of(A._to_csr())
    values, fill = A._values(), A._fill_value()
    if A.layout == CSR:
        rows = torch.repeat_interleave(torch.arange(size[0]), A.crow_indices().diff())
        indices = torch.stack([rows, A.col_indices()])
    else:
        indices = A._indices()
    base = fill.expand(size) if fill.dim() > A.dense_dim() else \
        fill.expand(size[s:]).expand(size)
    if s == 0:
        if values.shape[0] == 0:
            return base.clone()
        return values.sum(0) + base * 0
    stored = torch.zeros(size[:s], dtype=torch.bool)
    stored[tuple(indices)] = True
    vals = torch.zeros(size, dtype=values.dtype).index_put(tuple(indices), values,
                                                           accumulate=True)
    return torch.where(stored.view(size[:s] + (1,) * (len(size) - s)), vals, base)


def with_fill(A, fill):
    """A's pattern and values with another fill (per-slice fills included)."""
    A = A.coalesce() if A.layout == COO else A
    return A._with(A._values(), fill.to(A.dtype))


def tensors():
    g = rng(5)
    coo = random_tensor("random", 1.5, COO, seed=1)
    csr = random_tensor("random", -2.0, CSR, seed=2)
    hyb = random_tensor("hybrid", 1.5, COO, seed=3)
    three = sf.to_sparse(torch.where(torch.rand(4, 5, 6, generator=g) < 0.3,
                                     torch.randn(4, 5, 6, generator=g, dtype=torch.float64),
                                     torch.tensor(2.0, dtype=torch.float64)), fill_value=2.0)
    return {
        "coo": coo,
        "coo_uncoalesced": random_tensor("duplicates", 0.5, COO, seed=4),
        "csr": csr,
        "csr_empty": random_tensor("empty", math.nan, CSR, seed=1),
        "coo_full": random_tensor("full", -math.inf, COO, seed=1),
        "hybrid_coo": hyb,
        "hybrid_csr": random_tensor("hybrid", -1.0, CSR, seed=5),
        "coo_3d": three,
        "rowfill_coo": with_fill(coo, torch.randn(5, 1, generator=g, dtype=torch.float64)),
        "colfill_csr": with_fill(csr, torch.randn(1, 7, generator=g, dtype=torch.float64)),
        "slicefill_hybrid": with_fill(hyb, torch.randn(5, 1, 3, generator=g,
                                                       dtype=torch.float64)),
    }


TENSORS = tensors()


def assert_canonical(out):
    """COO flagged coalesced really is (strictly increasing linear indices);
    CSR passes the constructor's validation."""
    if out.layout == CSC:  # a transpose of CSR: the CSR pattern of its own transpose
        torch.ops.sparsefill.csr_check(out.ccol_indices(), out.row_indices(),
                                       [out.shape[1], out.shape[0]])
        return
    if out.layout == CSR:
        torch.ops.sparsefill.csr_check(out.crow_indices(), out.col_indices(), list(out.shape))
    elif out.is_coalesced() and out.sparse_dim() > 0:
        linear = torch.ops.sparsefill.coo_linearize(out._indices(),
                                                    list(out.shape[:out.sparse_dim()]))
        assert bool((linear[1:] > linear[:-1]).all()), "flagged coalesced but not sorted"
    assert out._values().shape[0] == (out.col_indices() if out.layout == CSR
                                      else out._indices()).shape[-1]
