"""Reshapes of a tensor with a per-slice fill: dims merged or split together
with the fill when it varies along all or none of the dims merged into one,
e.g. attention weights (B*H, S, S) <-> (B, H, S, S); the result equals the
dense reshape."""
from __future__ import annotations

import math

import pytest
import torch

import torch_sparsefill as sf
from sf_testing import assert_dense_equal, rng


def with_fill(shape, fill_shape, seed):
    g = rng(seed)
    keep = torch.rand(shape, generator=g) < 0.3
    idx = keep.nonzero().t()
    fill = torch.randn(fill_shape, generator=g, dtype=torch.float64)
    return sf.sparse_coo_tensor(idx, torch.randn(idx.shape[1], generator=g, dtype=torch.float64),
                                shape, fill_value=fill)


@pytest.mark.parametrize("shape,fill_shape,new", [
    ((6, 4, 5), (6, 4, 1), (2, 3, 4, 5)),   # split the batch of a per-row fill
    ((6, 4, 5), (6, 1, 1), (2, 3, 4, 5)),
    ((6, 4, 5), (1, 4, 1), (2, 3, 4, 5)),
    ((2, 3, 4, 5), (2, 3, 4, 1), (6, 4, 5)),  # merge (B, H): the fill varies along both
    ((2, 3, 4, 5), (1, 1, 4, 1), (6, 4, 5)),
    ((2, 3, 4, 5), (2, 3, 1, 1), (6, 20)),    # merge rows and columns of a per-head fill
    ((2, 3, 4, 5), (2, 3, 1, 1), (3, 2, 20)),  # a group (2, 3) -> (3, 2) with the fill on both
    ((6, 1, 4, 5), (6, 1, 4, 1), (2, 3, 1, 4, 5)),  # size-1 dims
], ids=str)
def test_matches_dense(shape, fill_shape, new):
    A = with_fill(shape, fill_shape, 1)
    out = A.reshape(new)
    assert out._fill_value().dim() == len(new)
    assert_dense_equal(out.to_dense(), A.to_dense().reshape(new))
    back = out.reshape(shape)
    assert_dense_equal(back.to_dense(), A.to_dense())


@pytest.mark.parametrize("shape,fill_shape,new", [
    ((2, 3, 4, 5), (2, 1, 4, 1), (6, 4, 5)),  # varies along B, not H
    ((4, 5), (4, 1), (20,)),                  # rows and columns of a per-row fill
    ((4, 6), (4, 1), (8, 3)),
])
def test_fill_varying_along_part_of_a_merge_is_refused(shape, fill_shape, new):
    A = with_fill(shape, fill_shape, 2)
    with pytest.raises(NotImplementedError, match="varies along some"):
        A.reshape(new)


@pytest.mark.parametrize("fill", [-1.0, -math.inf])
def test_softmax_output_round_trip(fill):
    # softmax along the keys gives a per-row fill (finite fill) or fill 0.
    g = rng(4)
    keep = torch.rand(2, 3, 4, 5, generator=g) < 0.4
    idx = keep.nonzero().t()
    S = sf.sparse_coo_tensor(idx, torch.randn(idx.shape[1], generator=g, dtype=torch.float64),
                             (2, 3, 4, 5), fill_value=fill)
    W = torch.softmax(S, -1)
    flat = W.reshape(6, 4, 5)
    assert_dense_equal(flat.to_dense(), torch.softmax(S.to_dense(), -1).reshape(6, 4, 5))
    assert_dense_equal(flat.reshape(2, 3, 4, 5).to_dense(), W.to_dense())


def test_gradient_reaches_the_fill():
    A = with_fill((6, 4, 5), (6, 4, 1), 5).coalesce()
    v = A.values().detach().clone().requires_grad_()
    f = A._fill_value().detach().clone().requires_grad_()
    w = torch.randn(2, 3, 4, 5, generator=rng(6), dtype=torch.float64)
    out = sf.sparse_coo_tensor(A.indices(), v, A.shape, fill_value=f).reshape(2, 3, 4, 5)
    (out.to_dense() * w).sum().backward()
    v2, f2 = v.detach().clone().requires_grad_(), f.detach().clone().requires_grad_()
    D = sf.sparse_coo_tensor(A.indices(), v2, A.shape, fill_value=f2).to_dense()
    (D.reshape(2, 3, 4, 5) * w).sum().backward()
    torch.testing.assert_close(v.grad, v2.grad)
    torch.testing.assert_close(f.grad, f2.grad)
