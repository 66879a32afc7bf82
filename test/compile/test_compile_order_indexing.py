"""Order statistics, scans, indexing and the shape moves under torch.compile
(graph breaks around them), sf.compile (a clean refusal: their sizes depend
on the data) and torch.func.grad (equal to autograd, values and fill)."""
from __future__ import annotations

import pytest
import torch
from torch.func import grad

import torch_sparsefill as sf

IDX = [[0, 1, 2], [1, 0, 3]]


def _mixed(A):
    return (torch.topk(A, 2, 1).values * 2 + torch.cumsum(A, 1)[:, :2]
            + A[torch.tensor([0, 2]), torch.tensor([1, 3])].sum())


@pytest.mark.cpu_only("compiles for the CPU")
def test_torch_compile_breaks_around_them():
    A = sf.sparse_coo_tensor(IDX, [3.0, -1.0, 4.0], (3, 5), fill_value=2.0)
    torch._dynamo.reset()
    out = torch.compile(_mixed, backend="aot_eager")(A)
    torch.testing.assert_close(out, _mixed(A.to_dense()))


def test_sf_compile_refuses_cleanly():
    A = sf.sparse_coo_tensor(IDX, [3.0, -1.0, 4.0], (3, 5), fill_value=2.0)
    with pytest.raises(RuntimeError, match="cannot be traced as one graph"):
        sf.compile(_mixed)(A)


OPS = {
    "sort": lambda B: torch.sort(B, dim=1).values.to_dense(),
    "topk": lambda B: torch.topk(B, 2, 1).values,
    "median": lambda B: torch.median(B, 1).values,
    "quantile": lambda B: torch.quantile(B, 0.3, 1),
    "cumsum": lambda B: torch.cumsum(B, 1),
    "diff": lambda B: torch.diff(B).to_dense(),
    "A[rows, cols]": lambda B: B[torch.tensor([0, 2]), torch.tensor([1, 3])],
    "index_put": lambda B: B.index_put((torch.tensor([1]), torch.tensor([1])),
                                       torch.tensor(3.0, dtype=B.dtype)).to_dense(),
    "flip": lambda B: torch.flip(B, [1]).to_dense(),
}


@pytest.mark.parametrize("op", list(OPS))
def test_torch_func_grad_equals_autograd(op):
    v = torch.tensor([3.0, -1.0, 4.0], dtype=torch.float64)
    f = torch.tensor(2.0, dtype=torch.float64)

    def loss(v, f):
        return OPS[op](sf.sparse_coo_tensor(IDX, v, (3, 5), fill_value=f)).pow(2).sum()

    got = grad(loss, argnums=(0, 1))(v, f)
    vv, ff = v.clone().requires_grad_(), f.clone().requires_grad_()
    want = torch.autograd.grad(loss(vv, ff), (vv, ff))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
