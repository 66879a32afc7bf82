"""Graph layers with a background weight (RFC.md#graph-layers): torch_geometric's
normalising layers computed with the fill.

PyG's ``GCNConv(normalize=True)`` (through ``gcn_norm``) and ``GATConv``
read ``crow_indices()``/``col_indices()``/``values()`` of a sparse adjacency
and build their own tensors from them, so they would see only the stored
values and compute as if the fill were 0. The two functions here take such a
layer (its parameters and options are read; torch_geometric itself is not
imported) and compute what the layer computes on the dense matrix:

- :func:`gcn_conv`: ``D^-1/2 (A + loop I) D^-1/2 (x W) + b`` with the
  degrees counting the fill, applied as ``dinv * (A @ (dinv * h))`` so A stays
  sparse (the normalised matrix itself would have a fill varying along both
  dims, i.e. be dense);
- :func:`gat_conv`: attention logits ``leaky_relu(a_dst . h_i + a_src . h_j)``
  plus the mask ``A[i, j]`` (an additive mask as in scaled_dot_product_attention:
  stored values are biases, 0 for a plain edge), softmax over j per head.
  With fill -inf (or a bool mask with fill False) only the stored positions
  are computed, O(nse * heads * C); any other fill lets every pair attend, so
  the computation is the dense one.

As in PyG, A is the transposed adjacency ``adj_t``: row i aggregates over
the columns j. A strided A gives the same results (the dense twin).

Example::

    >>> conv = torch_geometric.nn.GCNConv(3, 2)
    >>> A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 1.], (2, 2), fill_value=0.01)
    >>> sf.gcn_conv(conv, torch.randn(2, 3), A).shape
    torch.Size([2, 2])
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .functions import attention as _attention
from .ops.products import block_csr, row_softmax
from .tensor import SparseFillTensor, build

_ops = torch.ops.sparsefill

__all__ = ["gcn_conv", "gat_conv"]


def _adjacency(A, x, fname):
    if not isinstance(A, torch.Tensor) or (not isinstance(A, SparseFillTensor) and
                                           A.layout != torch.strided):
        raise TypeError(f"{fname}: A must be a SparseFillTensor or a strided tensor, got "
                        f"{type(A).__name__} with layout {getattr(A, 'layout', None)}")
    if A.dim() != 2 or A.shape[0] != A.shape[1] or A.shape[1] != x.shape[0]:
        raise RuntimeError(f"{fname}: A must be a square (n, n) matrix with n = x.shape[0] = "
                           f"{x.shape[0]}, got shape {tuple(A.shape)}")
    if isinstance(A, SparseFillTensor) and A.dense_dim() > 0:
        raise NotImplementedError(f"torch_sparsefill: {fname}: A is a hybrid tensor "
                                  f"(dense_dim={A.dense_dim()}); edge features are not supported")


def _dense(t):
    return t.to_dense() if isinstance(t, SparseFillTensor) else t


def gcn_conv(conv, x, A):
    """What torch_geometric's ``GCNConv`` `conv` computes on the dense
    adjacency ``A.to_dense()``: with ``conv.normalize``, the degrees (row
    sums plus the self-loop weight, 1 or 2 with ``conv.improved``) count the
    fill; without it, ``A @ (x W) + b``. ``conv.cached`` is ignored (nothing
    is cached). Differentiable in x, conv's parameters and A's values and fill.

    Example::

        >>> conv = torch_geometric.nn.GCNConv(4, 2)
        >>> A = sf.sparse_csr_tensor([0, 1, 2], [1, 0], [1., 1.], (2, 2), fill_value=0.1)
        >>> sf.gcn_conv(conv, torch.randn(2, 4), A).shape
        torch.Size([2, 2])
    """
    fname = "gcn_conv()"
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise TypeError(f"{fname}: x must be a 2-D tensor of node features")
    _adjacency(A, x, fname)
    h = conv.lin(x)
    if conv.normalize:
        loop = (2.0 if conv.improved else 1.0) if conv.add_self_loops else 0.0
        deg = _dense(A.sum(1)) + loop
        dinv = deg.pow(-0.5)
        dinv = torch.where(dinv == math.inf, torch.zeros_like(dinv), dinv).unsqueeze(1)
        y = dinv * h
        out = A @ y
        if loop:
            out = out + loop * y
        out = dinv * out
    else:
        out = A @ h
    if conv.bias is not None:
        out = out + conv.bias
    return out


def _gat_attention_logits(conv, x):
    """(h (n, H, C), a_src (n, H), a_dst (n, H)) of a GATConv on features x."""
    if getattr(conv, "lin", None) is None:
        raise NotImplementedError("torch_sparsefill: gat_conv(): a GATConv with separate source "
                                  "and target weights (bipartite in_channels) is not supported")
    H, C = conv.heads, conv.out_channels
    h = conv.lin(x).view(-1, H, C)
    return h, (h * conv.att_src).sum(-1), (h * conv.att_dst).sum(-1)


def _with_zero_diagonal(A: SparseFillTensor) -> SparseFillTensor:
    """A with every diagonal element stored as 0 (PyG's self-loops: an edge
    to itself with no bias), whatever was stored there before."""
    A = A._coalesced()
    idx = A._coo_indices()
    off = torch.nonzero(idx[0] != idx[1]).view(-1)
    n = A.shape[0]
    diag = torch.arange(n, device=idx.device).expand(2, n)
    values = A._sf_values.index_select(0, off)
    values = torch.cat([values, torch.zeros(n, dtype=values.dtype, device=values.device)])
    return build(torch.sparse_coo, A.shape, values, A._sf_fill,
                 indices=torch.cat([idx.index_select(1, off), diag], 1),
                 coalesced=False).coalesce()


def _additive(A: SparseFillTensor, dtype) -> SparseFillTensor:
    """A bool mask as an additive one: True -> 0, False -> -inf."""
    if A.dtype != torch.bool:
        return A
    zero = torch.zeros((), dtype=dtype, device=A._sf_values.device)
    return A._with(torch.where(A._sf_values, zero, zero - math.inf),
                   torch.where(A._sf_fill, zero, zero - math.inf))


def gat_conv(conv, x, A):
    """What torch_geometric's ``GATConv`` `conv` computes with the additive
    attention mask A (see the module doc): fill -inf (or a bool mask with
    fill False) attends to the stored positions only, in O(nse) memory; a
    finite fill lets every pair attend with that bias (the dense
    computation). With ``conv.add_self_loops`` the diagonal is an edge of
    bias 0. Dropout (``conv.dropout`` in training) drops attention weights.
    Differentiable in x, conv's parameters and A.

    Example::

        >>> conv = torch_geometric.nn.GATConv(4, 2, heads=2)
        >>> M = sf.sparse_coo_tensor([[0, 1], [1, 0]], [0., 0.], (2, 2),
        ...                          fill_value=float('-inf'))
        >>> sf.gat_conv(conv, torch.randn(2, 4), M).shape
        torch.Size([2, 4])
    """
    fname = "gat_conv()"
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise NotImplementedError(f"torch_sparsefill: {fname}: x must be one 2-D tensor of node "
                                  f"features (bipartite (x_src, x_dst) is not supported)")
    _adjacency(A, x, fname)
    if getattr(conv, "edge_dim", None) is not None:
        raise NotImplementedError(f"torch_sparsefill: {fname}: a GATConv with edge_dim (edge "
                                  f"features) is not supported")
    h, a_src, a_dst = _gat_attention_logits(conv, x)
    n, H, C = h.shape
    bias, sparse = (None, False)
    if isinstance(A, SparseFillTensor):
        if A.dtype != torch.bool and A.dtype != h.dtype:
            raise RuntimeError(f"{fname}: a float mask must have the features' dtype {h.dtype}, "
                               f"got {A.dtype}")
        if conv.add_self_loops:
            A = _with_zero_diagonal(_additive(A, h.dtype))
        bias, sparse = _attention._additive_mask(A, h.dtype)
    if sparse:
        out = _sparse_gat(conv, h, a_src, a_dst, A, bias)
    else:
        out = _dense_gat(conv, h, a_src, a_dst, A)
    out = out.reshape(n, H * C) if conv.concat else out.mean(1)
    if getattr(conv, "res", None) is not None:
        out = out + conv.res(x)
    if conv.bias is not None:
        out = out + conv.bias
    return out


def _sparse_gat(conv, h, a_src, a_dst, A, bias):
    """Attention over the stored positions: (n, H, C)."""
    n, H, C = h.shape
    _, r, c = _attention._positions(A)
    nse = r.numel()
    heads = torch.arange(H, device=r.device).repeat_interleave(nse)
    rr, cc = r.repeat(H), c.repeat(H)
    scores = F.leaky_relu(a_src.t().reshape(-1).index_select(0, heads * n + cc) +
                          a_dst.t().reshape(-1).index_select(0, heads * n + rr),
                          conv.negative_slope) + bias.repeat(H)
    crow, col, rows = block_csr(heads, rr, cc, H, n, n)
    weights = row_softmax(scores, rows, H * n)
    weights = F.dropout(weights, conv.dropout, conv.training)
    zero = torch.zeros((), dtype=weights.dtype, device=weights.device)
    out = _ops.spmm(crow, col, weights, zero, h.transpose(0, 1).reshape(H * n, C), H * n)
    return out.reshape(H, n, C).transpose(0, 1)


def _dense_gat(conv, h, a_src, a_dst, A):
    """The dense computation: every pair (i, j) with logit + A[i, j]."""
    n = h.shape[0]
    M = _dense(A)
    if M.dtype == torch.bool:
        M = torch.where(M, torch.zeros((), dtype=h.dtype), torch.full((), -math.inf,
                                                                     dtype=h.dtype))
    if conv.add_self_loops:
        M = M.clone()
        M.diagonal().zero_()
    scores = F.leaky_relu(a_src.t().unsqueeze(1) + a_dst.t().unsqueeze(2),
                          conv.negative_slope) + M  # (H, n_dst, n_src)
    with torch.no_grad():
        top = scores.amax(-1, keepdim=True)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(scores - top)
    total = e.sum(-1, keepdim=True)
    weights = e / torch.where(total == 0, torch.ones_like(total), total)
    weights = F.dropout(weights, conv.dropout, conv.training)
    return (weights @ h.transpose(0, 1)).transpose(0, 1)  # (n, H, C)
