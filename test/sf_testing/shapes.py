"""Shared by the shape-op tests (test_shape.py, test_concat.py): the tensors
every op runs on (TENSORS, built on import) and the canonical-form check.
Their dense reference is reference.dense_of, independent of the library's
to_dense().

    >>> from sf_testing.shapes import TENSORS, assert_canonical
    >>> assert_canonical(TENSORS["coo"].t())
"""
from __future__ import annotations

import math

import torch

import torch_sparsefill as sf

from .tensors import random_tensor, rng, with_fill

COO, CSR, CSC = torch.sparse_coo, torch.sparse_csr, torch.sparse_csc


def tensors():
    """name -> a SparseFillTensor: COO (coalesced or not), CSR, empty, full,
    hybrid, 3-D, and per-row, per-column and per-slice fills."""
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
    """assert_canonical(A.t()):
    COO flagged coalesced really is (strictly increasing linear indices);
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
