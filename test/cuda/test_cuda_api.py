"""The public API on CUDA tensors, one table across every op family:
each function runs on a SparseFillTensor on the CPU and on its CUDA copy,
with the CPU as torch's default device. The CUDA result must live on the
GPU (so no step of the op made a tensor on the default device instead of
its input's), equal the CPU result, and give the same gradients for values
and fill.

The rest of the suite also runs on CUDA where there is a GPU (conftest.py),
with CUDA as the default device; this file is the check that the library
never relies on that default. Skipped without a GPU.
"""
import math

import pytest
import torch
import torch.nn.functional as F

import sf_testing as T
import torch_sparsefill as sf
from sf_testing import random_tensor

pytestmark = [
    pytest.mark.cpu_only("chooses CPU and CUDA explicitly"),
    pytest.mark.skipif(not torch.cuda.is_available(),
                       reason="needs a CUDA GPU (torch.cuda.is_available() is False)"),
]

COO, CSR = torch.sparse_coo, torch.sparse_csr


def _w(A, n=3):
    """A dense right operand for A, on A's device, the same numbers on every device."""
    g = torch.Generator().manual_seed(7)
    return torch.randn(A.shape[-1], n, generator=g, dtype=A.dtype).to(A.device)


# name -> (layout, fill, function of A). The functions build every extra
# tensor from A (its device), as user code does.
CASES = {
    # element-wise and conversions
    "exp": (COO, 1.5, torch.exp),
    "affine": (CSR, -0.5, lambda A: A * 2 + 1),
    "add_self_t": (COO, 0.25, lambda A: A + A.t().t() * A),
    "where": (CSR, 1.5, lambda A: torch.where(A > 0, A, -A)),
    "to_csr_coo": (COO, 2.0, lambda A: A.to_sparse_csr().to_sparse_coo()),
    "eliminate_fill": (COO, 0.0, lambda A: sf.eliminate_fill(A * 0)),
    # shape and indexing
    "t": (CSR, 1.5, lambda A: A.t()),
    "rows": (CSR, 1.5, lambda A: A[1:4]),
    "index_select": (COO, -1.0, lambda A: A.index_select(
        1, torch.tensor([6, 0, 6], device=A.device))),
    "cat": (COO, 1.5, lambda A: torch.cat([A, A * 2], 1)),
    "reshape": (COO, 0.5, lambda A: A.reshape(7, 5)),
    "unsqueeze_select": (CSR, 0.5, lambda A: A.unsqueeze(0).select(0, 0)),
    # products
    "spmm": (CSR, 1.5, lambda A: A @ _w(A)),
    "spmm_coo": (COO, -0.5, lambda A: torch.mm(A, _w(A))),
    "dense_spmm": (CSR, 1.5, lambda A: _w(A.t(), 4).t() @ A),
    "mv": (CSR, 0.75, lambda A: A @ _w(A, 1)[:, 0]),
    "addmm": (CSR, 0.75, lambda A: torch.addmm(torch.ones(5, 3, device=A.device, dtype=A.dtype),
                                               A, _w(A), beta=0.5)),
    "spgemm": (CSR, 0.0, lambda A: A @ A.t()),
    "spgemm_fills": (CSR, 1.5, lambda A: A @ (A.t() * 2)),
    # softmax and reductions
    "softmax1": (CSR, -0.3, lambda A: torch.softmax(A, 1)),
    "softmax0": (COO, -math.inf, lambda A: torch.sparse.softmax(A, 0)),
    "log_softmax": (COO, 0.5, lambda A: F.log_softmax(A, -1)),
    "sum_all": (COO, 1.5, lambda A: A.sum()),
    "sum0": (CSR, 1.5, lambda A: A.sum(0)),
    "mean1": (COO, -2.0, lambda A: A.mean(1, keepdim=True)),
    "amax": (CSR, 0.0, lambda A: A.amax(1)),
    "max_values": (COO, 0.5, lambda A: A.max(0).values),
    "prod": (COO, 1.1, lambda A: A.prod(1)),
    "logsumexp": (CSR, 0.5, lambda A: torch.logsumexp(A, 1)),
    "norm": (COO, 0.5, lambda A: A.norm()),
    "var": (CSR, 0.5, lambda A: A.var(0)),
    # chains across families
    "softmax_mm": (CSR, -0.3, lambda A: torch.softmax(A, 1) @ _w(A)),
    "cat_amax": (COO, 1.5, lambda A: torch.cat([A, A.exp()]).amax(1)),
}


def _run(fn, A):
    out = fn(A)
    return out, T.dense(out)


@pytest.mark.parametrize("name", sorted(CASES))
def test_public_api_on_cuda_matches_cpu(name):
    layout, fill, fn = CASES[name]
    results, grads = [], []
    for device in ("cpu", "cuda"):
        A = random_tensor("random", fill, layout, seed=0).to(device)
        A = A.coalesce() if layout == COO else A
        A = A.detach().requires_grad_()
        out, dense = _run(fn, A)
        assert dense.device.type == device, f"{name}: result on {dense.device} for a {device} input"
        results.append(dense.detach().cpu())
        if dense.is_floating_point():
            # A fixed random cotangent, the same on both devices.
            g = torch.Generator().manual_seed(1)
            cot = torch.randn(dense.shape, generator=g, dtype=dense.dtype).to(device)
            finite = torch.isfinite(dense.detach())
            (dense.where(finite, 0) * cot).sum().backward()
            grads.append([None if t.grad is None else t.grad.cpu()
                          for t in (A._values(), A._fill_value())])
    torch.testing.assert_close(results[1], results[0], equal_nan=True)
    if grads:
        for cpu_grad, cuda_grad in zip(*grads):
            assert (cpu_grad is None) == (cuda_grad is None), name
            if cpu_grad is not None:
                torch.testing.assert_close(cuda_grad, cpu_grad, equal_nan=True)


@pytest.mark.parametrize("layout", [COO, CSR], ids=str)
def test_per_slice_fill_on_cuda_matches_cpu(layout):
    """A per-row fill (RFC.md#per-slice-fills) through softmax, a product and a reduction."""
    outs = []
    for device in ("cpu", "cuda"):
        A = random_tensor("random", 0.0, COO, seed=2).coalesce()
        fill = torch.linspace(-1, 1, A.shape[0], dtype=A.dtype).view(-1, 1)
        B = sf.sparse_coo_tensor(A.indices(), A.values(), A.shape, fill_value=fill)
        B = B.to_sparse(layout=layout).to(device)
        outs.append([T.dense(f(B)).cpu() for f in (
            lambda X: torch.softmax(X, 1), lambda X: X @ _w(X), lambda X: X.sum(0),
            lambda X: X.t().amax(0))])
    for c, g in zip(*outs):
        torch.testing.assert_close(g, c)


def test_cuda_and_cpu_methods_move_every_component():
    A = random_tensor("random", 1.5, CSR, seed=0)
    for moved in (A.cuda(), A.cuda(0), A.to("cuda")):
        assert moved.device.type == "cuda"
        assert all(t.device.type == "cuda" for t in (moved.crow_indices(), moved.col_indices(),
                                                      moved.values(), moved._fill_value()))
        torch.testing.assert_close(moved.cpu().to_dense(), A.to_dense())
