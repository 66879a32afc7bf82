"""torch_geometric with a SparseFillTensor adjacency (issue 17, deliverable
6). PyG's layers that aggregate with ``torch.sparse.mm`` (GCNConv with
normalize=False, GraphConv, ...) reach our product and compute with the fill;
``gcn_norm`` (normalize=True) reads ``crow_indices()``/``values()`` and
rebuilds its own tensor, so it sees only the stored values: the route for a
background weight normalises outside the layer (README, "Graph layers")."""
from __future__ import annotations

import warnings

import pytest
import torch

import torch_sparsefill as sf
from sf_testing import assert_dense_equal, rng

pyg = pytest.importorskip("torch_geometric", reason="torch-geometric is not installed "
                          "(requirements-dev.txt installs it)")
from torch_geometric.nn import GCNConv, GraphConv  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def adjacency(n, fill, seed, layout=torch.sparse_csr):
    g = rng(seed)
    keep = torch.rand(n, n, generator=g) < 0.2
    keep |= keep.t().clone()
    keep |= torch.eye(n, dtype=torch.bool)
    idx = keep.nonzero().t()
    A = sf.sparse_coo_tensor(idx, torch.rand(idx.shape[1], generator=g, dtype=torch.float64) + 0.5,
                             (n, n), fill_value=fill).coalesce()
    return A.to_sparse_csr() if layout == torch.sparse_csr else A


@pytest.mark.parametrize("fill", [0.0, 0.01, -0.3])
def test_aggregation_layers_use_the_fill(fill):
    torch.manual_seed(0)
    A = adjacency(12, fill, 1)
    x = torch.randn(12, 5, generator=rng(2), dtype=torch.float64)
    conv = GCNConv(5, 3, normalize=False).double()
    expected = A.to_dense() @ (x @ conv.lin.weight.t()) + conv.bias
    assert_dense_equal(conv(x, A), expected)
    graph = GraphConv(5, 3).double()
    expected = graph.lin_rel(A.to_dense() @ x) + graph.lin_root(x)
    assert_dense_equal(graph(x, A), expected)


@pytest.mark.parametrize("fill", [0.0, 0.01])
def test_gcn_with_a_background_weight(fill):
    # D^-1/2 A D^-1/2 X W with the background counted in the degrees: the
    # scaling outside the layer, the product inside (normalize=False).
    torch.manual_seed(0)
    A = adjacency(12, fill, 3)
    x = torch.randn(12, 5, generator=rng(4), dtype=torch.float64, requires_grad=True)
    conv = GCNConv(5, 3, normalize=False, bias=False).double()
    dinv = A.sum(1).to_dense().pow(-0.5).unsqueeze(1)
    out = dinv * conv(dinv * x, A)
    D = A.to_dense()
    d = D.sum(1).pow(-0.5)
    x2 = x.detach().clone().requires_grad_()
    expected = (d[:, None] * D * d[None, :]) @ (x2 @ conv.lin.weight.t())
    assert_dense_equal(out, expected)
    out.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)
    if fill == 0.0:  # PyG's own normalisation agrees where there is no background
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pyg_conv = GCNConv(5, 3, add_self_loops=False, bias=False).double()
        pyg_conv.lin.weight.data.copy_(conv.lin.weight.data)
        assert_dense_equal(pyg_conv(x2.detach(), A), expected.detach())
