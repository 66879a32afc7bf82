"""torch_geometric with a SparseFillTensor adjacency. PyG's layers that
aggregate with ``torch.sparse.mm`` (GCNConv with normalize=False, GraphConv,
...) reach our product and compute with the fill; ``gcn_norm``
(normalize=True) reads ``crow_indices()``/``values()`` and rebuilds its own
tensor, so it sees only the stored values: the route for a background weight
normalises outside the layer (README, "Graph layers")."""
from __future__ import annotations

import math
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


# ---- sf.gcn_conv / sf.gat_conv: PyG's normalising layers with the fill ----------

from torch_geometric.nn import GATConv  # noqa: E402


def with_diagonal(n, fill, seed):
    """An adjacency with a few stored diagonal elements (PyG adds its loops to them)."""
    A = adjacency(n, fill, seed, torch.sparse_coo)
    keep = A.indices()[0] != A.indices()[1]
    keep[:3] = True
    return sf.sparse_coo_tensor(A.indices()[:, keep], A.values()[keep], A.shape,
                                fill_value=fill).coalesce()


def gcn_dense(conv, x, D):
    """GCNConv on a dense adjacency, written out: D^-1/2 (A + loop I) D^-1/2 x W + b."""
    loop = (2.0 if conv.improved else 1.0) if conv.add_self_loops else 0.0
    Ahat = D + loop * torch.eye(D.shape[0], dtype=D.dtype)
    dinv = Ahat.sum(1).pow(-0.5)
    dinv = torch.where(torch.isinf(dinv), torch.zeros_like(dinv), dinv)
    return (dinv[:, None] * Ahat * dinv[None, :]) @ conv.lin(x) + conv.bias


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr])
@pytest.mark.parametrize("options", [{}, {"improved": True}, {"add_self_loops": False}], ids=str)
def test_gcn_conv_equals_pyg_without_background(options, layout):
    torch.manual_seed(1)
    conv = GCNConv(5, 3, **options).double()
    A = with_diagonal(12, 0.0, 5)
    x = torch.randn(12, 5, generator=rng(6), dtype=torch.float64)
    expected = conv(x, A.to_sparse_csr())  # PyG's COO path calls _coalesced_, refused
    A = A.to_sparse_csr() if layout == torch.sparse_csr else A
    assert_dense_equal(sf.gcn_conv(conv, x, A), expected)


@pytest.mark.parametrize("fill", [0.01, 0.5, -0.02])
@pytest.mark.parametrize("options", [{}, {"improved": True}, {"normalize": False}], ids=str)
def test_gcn_conv_with_a_background_weight(options, fill):
    torch.manual_seed(2)
    conv = GCNConv(5, 3, **options).double()
    A = with_diagonal(12, fill, 7)
    idx = A.indices()
    v = A.values().detach().clone().requires_grad_()
    f = torch.tensor(fill, dtype=torch.float64, requires_grad=True)
    x = torch.randn(12, 5, generator=rng(8), dtype=torch.float64, requires_grad=True)
    out = sf.gcn_conv(conv, x, sf.sparse_coo_tensor(idx, v, A.shape, fill_value=f).to_sparse_csr())
    v2, f2 = v.detach().clone().requires_grad_(), f.detach().clone().requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    D = sf.sparse_coo_tensor(idx, v2, A.shape, fill_value=f2).to_dense()
    expected = gcn_dense(conv, x2, D) if conv.normalize else D @ conv.lin(x2) + conv.bias
    assert_dense_equal(out, expected)
    w = torch.randn(out.shape, generator=rng(9), dtype=torch.float64)
    (out * w).sum().backward()
    weight_grad = conv.lin.weight.grad.clone()
    conv.zero_grad()
    (expected * w).sum().backward()
    for got, want in ((v.grad, v2.grad), (f.grad, f2.grad), (x.grad, x2.grad),
                      (weight_grad, conv.lin.weight.grad)):
        torch.testing.assert_close(got, want)


def edge_mask(n, seed, fill=-math.inf, biases=False):
    A = adjacency(n, 0.0, seed, torch.sparse_coo)
    idx = A.indices()
    g = rng(seed + 1)
    v = torch.randn(idx.shape[1], generator=g, dtype=torch.float64) if biases else \
        torch.zeros(idx.shape[1], dtype=torch.float64)
    return sf.sparse_coo_tensor(idx, v, A.shape, fill_value=fill).coalesce()


@pytest.mark.parametrize("options", [{}, {"concat": False}, {"add_self_loops": False}], ids=str)
def test_gat_conv_equals_pyg_on_the_edges(options):
    torch.manual_seed(3)
    conv = GATConv(5, 3, heads=2, **options).double().eval()
    M = edge_mask(12, 10)
    M = sf.sparse_coo_tensor(M.indices()[:, 4:], M.values()[4:], M.shape, fill_value=-math.inf)
    x = torch.randn(12, 5, generator=rng(11), dtype=torch.float64)
    # PyG's own layer on the edge list (the transposed adjacency: column -> row)
    edge_index = M.coalesce().indices().flip(0)
    expected = conv(x, edge_index)
    assert_dense_equal(sf.gat_conv(conv, x, M), expected)
    assert_dense_equal(sf.gat_conv(conv, x, M.to_sparse_csr()), expected)
    assert_dense_equal(sf.gat_conv(conv, x, M.to_dense()), expected)  # the dense twin


@pytest.mark.parametrize("fill", [-math.inf, 0.5, -1.0, math.nan, "bool"])
@pytest.mark.parametrize("self_loops", [True, False])
def test_gat_conv_matches_its_dense_twin(fill, self_loops):
    torch.manual_seed(4)
    conv = GATConv(5, 3, heads=2, add_self_loops=self_loops).double().eval()
    if fill == "bool":
        M = edge_mask(10, 12, 0.0)
        M = sf.sparse_coo_tensor(M.indices(), torch.ones(M._nnz(), dtype=torch.bool), M.shape,
                                 fill_value=False)
    else:
        M = edge_mask(10, 12, fill, biases=True)
    x = torch.randn(10, 5, generator=rng(13), dtype=torch.float64, requires_grad=True)
    out = sf.gat_conv(conv, x, M)
    x2 = x.detach().clone().requires_grad_()
    expected = sf.gat_conv(conv, x2, M.to_dense())
    assert_dense_equal(out, expected)
    if fill in (0.5, -1.0):  # every pair attends: the plain softmax, written out
        h = conv.lin(x2).view(10, 2, 3)
        D = M.to_dense().clone()
        if self_loops:
            D.diagonal().zero_()
        logits = torch.nn.functional.leaky_relu(
            (h * conv.att_src).sum(-1).t()[:, None, :] + (h * conv.att_dst).sum(-1).t()[:, :, None],
            0.2) + D
        written = (torch.softmax(logits, -1) @ h.transpose(0, 1)).transpose(0, 1)
        assert_dense_equal(expected, written.reshape(10, 6) + conv.bias)
    if fill == "bool" or not math.isnan(fill):  # a nan mask: nan everywhere, checked above
        w = torch.randn(out.shape, generator=rng(14), dtype=torch.float64)
        (out * w).sum().backward()
        (expected * w).sum().backward()
        torch.testing.assert_close(x.grad, x2.grad)


def test_adapters_refuse_what_they_cannot_do():
    conv = GATConv(5, 3, edge_dim=2).double()
    M = edge_mask(6, 15)
    x = torch.randn(6, 5, dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="edge_dim"):
        sf.gat_conv(conv, x, M)
    with pytest.raises(RuntimeError, match="square"):
        sf.gcn_conv(GCNConv(5, 3).double(), x, edge_mask(7, 15))


@pytest.mark.parametrize("layout", [torch.sparse_csr, torch.sparse_coo], ids=["csr", "coo"])
@pytest.mark.parametrize("fill", [0.3, -0.5, math.nan])
def test_gcnconv_normalize_and_gatconv_on_a_nonzero_fill_refuse_naming_the_adapters(fill,
                                                                                     layout):
    """GCNConv(normalize=True) and GATConv called on a SparseFillTensor with a
    non-zero fill computed as if the fill were 0 (gcn_norm rebuilds the
    tensor from crow_indices()/values()): differences 0.2-2.0 on 40 nodes."""
    from torch_geometric.nn import GATConv
    torch.manual_seed(0)
    A = adjacency(40, fill, 7, layout)
    x = torch.randn(40, 5, generator=rng(8), dtype=torch.float64)
    for conv in (GCNConv(5, 3).double(), GATConv(5, 3).double()):
        with pytest.raises(NotImplementedError, match=r"sf\.gcn_conv.*sf\.gat_conv"):
            conv(x, A)


def test_gcnconv_normalize_at_fill_zero_still_computes():
    """The components are the whole tensor at fill 0: PyG's own path stays."""
    torch.manual_seed(0)
    A = adjacency(12, 0.0, 9)
    x = torch.randn(12, 5, generator=rng(10), dtype=torch.float64)
    conv = GCNConv(5, 3).double()
    assert_dense_equal(conv(x, A), conv(x, A.to_dense().to_sparse_csr()))


def test_sageconv_mean_refuses_instead_of_averaging_over_all_nodes():
    """SAGEConv(aggr='mean') calls torch.sparse.mm(A, x, 'mean'): torch
    averages over the stored neighbours, ours did over all n."""
    from torch_geometric.nn import SAGEConv
    A = adjacency(12, 0.0, 11)
    x = torch.randn(12, 5, generator=rng(12), dtype=torch.float64)
    with pytest.raises(NotImplementedError, match="A.to_indefinite"):
        SAGEConv(5, 3).double()(x, A)


def test_user_code_reads_components_as_always():
    A = adjacency(6, 0.3, 13)
    assert A.values().shape[0] == A._nnz() and A.crow_indices().shape == (7,)
