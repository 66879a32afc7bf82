"""torch.cat and torch.stack of SparseFillTensors (RFC.md#shape-and-indexing): equal to the
same op on the dense tensors, gradients included, with shared, differing and
per-slice fills on COO, CSR and hybrid inputs."""
from __future__ import annotations

import math

import pytest
import torch

import torch_sparsefill as sf
from sf_testing import random_tensor
from sf_testing import dense_of
from sf_testing.shapes import COO, CSR, TENSORS, assert_canonical


# ---- cat and stack ---------------------------------------------------------------

def _pieces(layout=COO, fills=(1.5, 1.5, 1.5), hybrid=False):
    pattern = "hybrid" if hybrid else "random"
    out = []
    for k, (rows, f) in enumerate(zip((5, 2, 4), fills)):
        A = random_tensor(pattern, f, layout, seed=10 + k, size=(rows, 7))
        out.append(A)
    return out


@pytest.mark.parametrize("layout", [COO, CSR])
@pytest.mark.parametrize("hybrid", [False, True])
@pytest.mark.parametrize("fills", [(1.5, 1.5, 1.5), (1.5, -2.0, math.nan)])
def test_cat_rows(layout, hybrid, fills):
    parts = _pieces(layout, fills, hybrid)
    out = torch.cat(parts)
    assert_canonical(out)
    torch.testing.assert_close(dense_of(out), torch.cat([dense_of(p) for p in parts]),
                               equal_nan=True, rtol=0, atol=0)
    assert out.layout == layout
    if fills[0] == fills[1] == fills[2]:
        assert out._fill_value().shape == parts[0]._fill_value().shape  # one fill
    else:
        assert out._fill_value().shape[:2] == (11, 1)  # per-row fill


@pytest.mark.parametrize("layout", [COO, CSR])
@pytest.mark.parametrize("fills", [(1.5, 1.5), (1.5, -2.0)])
def test_cat_cols_and_dense(layout, fills):
    A = random_tensor("hybrid", fills[0], layout, seed=1)
    B = random_tensor("hybrid", fills[1], layout, seed=2)
    for dim in (1, 2, -1):
        out = torch.cat([A, B], dim=dim)
        assert_canonical(out)
        torch.testing.assert_close(dense_of(out), torch.cat([dense_of(A), dense_of(B)], dim),
                                   rtol=0, atol=0)
        assert out.layout == layout
    out = torch.cat([A, B], 2)
    assert_canonical(out)
    assert out._fill_value().dim() <= out.dense_dim()  # along a dense dim: dense-part fill


def test_cat_per_slice_inputs_and_stack():
    A, B = TENSORS["rowfill_coo"], TENSORS["coo"]
    for dim in (0, 1):
        out = torch.cat([A, B, A], dim)
        assert_canonical(out)
        torch.testing.assert_close(dense_of(out), torch.cat([dense_of(A), dense_of(B),
                                                             dense_of(A)], dim), rtol=0, atol=0)
    for dim in (0, 1, 2, -1):
        out = torch.stack([A, B], dim)
        assert_canonical(out)
        torch.testing.assert_close(dense_of(out), torch.stack([dense_of(A), dense_of(B)], dim),
                                   rtol=0, atol=0)
    C, D = TENSORS["csr"], TENSORS["colfill_csr"]
    for fn in (torch.hstack, torch.vstack, torch.dstack, lambda ts: torch.concat(ts, dim=1),
               lambda ts: torch.concatenate(ts, axis=0)):
        out = fn([C, D])
        assert_canonical(out)
        torch.testing.assert_close(dense_of(out), fn([dense_of(C), dense_of(D)]),
                                   equal_nan=True, rtol=0, atol=0)
    v, w = sf.full((3,), 2.), sf.sparse_coo_tensor([[1]], [4.], (4,), fill_value=-1.)
    for fn in (torch.hstack, torch.vstack, torch.dstack):
        if fn is not torch.hstack:
            w = w[:3]
        torch.testing.assert_close(dense_of(fn([v, w])), fn([dense_of(v), dense_of(w)]))


def test_cat_shared_fill_stays_one_and_dtype_promotion():
    f = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    A = sf.sparse_coo_tensor([[0, 1], [2, 0]], torch.tensor([3., 4.], dtype=torch.float64), (2, 3),
                             fill_value=f)
    B = sf.sparse_coo_tensor([[0], [1]], torch.tensor([6.], dtype=torch.float64), (1, 3),
                             fill_value=f)
    out = torch.cat([A, B])
    assert_canonical(out)
    assert out._fill_value().shape == ()  # one fill, not per-row
    dense_of(out).sum().backward()
    assert f.grad.item() == 6.  # 4 + 2 unspecified elements
    F = sf.full((2, 3), 3, dtype=torch.float32)
    out = torch.cat([A.detach(), F])
    assert_canonical(out)
    assert out.dtype == torch.float64
    torch.testing.assert_close(dense_of(out), torch.cat([dense_of(A), dense_of(F).double()]))


def test_cat_gradients_keep_fills_apart():
    fa = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    fb = torch.tensor(1.0, dtype=torch.float64, requires_grad=True)
    A = sf.full((2, 3), fa)
    B = sf.full((1, 3), fb)
    dense_of(torch.cat([A, B])).sum().backward()
    assert fa.grad.item() == 6. and fb.grad.item() == 3.
