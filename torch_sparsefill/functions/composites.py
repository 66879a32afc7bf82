"""The fourth source of the decomposition route (functions/decompositions.py):
torch functions whose only decomposition is a C++ CompositeImplicitAutograd
kernel, which calls aten ops below the torch-function level and so never
routes (docs/design.md#decomposition-route). Each entry here restates that
kernel's formula in torch calls that route again, one line or a few; the
coverage run and test/functions/test_decompositions.py hold each to the
dense result.

Example::

    >>> A = sf.to_sparse(torch.tensor([0., 3.]), fill_value=0.)
    >>> torch.outer(A, torch.ones(2))
    tensor([[0., 0.],
            [3., 3.]])
"""
from __future__ import annotations

import functools

import torch

__all__: list = []

_REDUCTION = {0: "none", 1: "mean", 2: "sum"}


def _reduce(loss, reduction):
    reduction = _REDUCTION.get(reduction, reduction)
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def l1_loss(input, target, reduction=1):
    """aten.l1_loss: |input - target|, reduced."""
    return _reduce((input - target).abs(), reduction)


def kl_div(input, target, reduction=1, log_target=False):
    """aten.kl_div: target * (log target - input) point by point, reduced."""
    if log_target:
        loss = torch.exp(target) * (target - input)
    else:
        loss = torch.xlogy(target, target) - target * input
    return _reduce(loss, reduction)


def inner(input, other):
    """aten.inner: the product over the last dim of both (a product with a number for 0-dim)."""
    if input.dim() == 0 or other.dim() == 0:
        return input * other
    return torch.tensordot(input, other, dims=([-1], [-1]))


def outer(input, vec2):
    """aten.outer: input as a column times vec2."""
    return input.reshape(-1, 1) * vec2


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """aten.nanmean: the sum of the non-NaN elements over their count."""
    count = (~torch.isnan(input)).sum(dim=dim, keepdim=keepdim)
    return torch.nansum(input, dim=dim, keepdim=keepdim, dtype=dtype) / count


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """aten.cosine_similarity: each operand divided by its norm (at least
    eps) along dim, then the sum of their product along dim."""
    n1 = torch.linalg.vector_norm(x1, dim=dim, keepdim=True).clamp_min(eps)
    n2 = torch.linalg.vector_norm(x2, dim=dim, keepdim=True).clamp_min(eps)
    return ((x1 / n1) * (x2 / n2)).sum(dim)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    """aten.layer_norm: the first result of native_layer_norm."""
    return torch.native_layer_norm(input, normalized_shape, weight, bias, eps)[0]


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    """aten.group_norm: the first result of native_group_norm over (N, C, the rest)."""
    n, c = input.shape[0], input.shape[1]
    hxw = 1
    for s in input.shape[2:]:
        hxw *= s
    return torch.native_group_norm(input, weight, bias, n, c, hxw, num_groups, eps)[0]


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """F.normalize: input over its p-norm along dim (at least eps). torch's
    Python body expands the norm to input's shape first, which a sparse dim
    of size 1 cannot do; division broadcasts it per slice instead."""
    if out is not None:
        raise NotImplementedError("torch_sparsefill: torch.nn.functional.normalize with out= "
                                  "is not implemented for SparseFillTensor")
    return input / input.norm(p, dim, keepdim=True).clamp_min(eps)


def multi_dot(tensors, *, out=None):
    """linalg.multi_dot: the products left to right (ATen picks the cheapest
    order; the values differ by rounding only)."""
    if out is not None:
        raise NotImplementedError("torch_sparsefill: linalg.multi_dot with out= is not "
                                  "implemented for SparseFillTensor")
    return functools.reduce(torch.matmul, tensors)


COMPOSITES = {
    torch._C._nn.l1_loss: l1_loss,
    torch.kl_div: kl_div,
    torch.inner: inner,
    torch.Tensor.inner: inner,
    torch.outer: outer,
    torch.ger: outer,
    torch.Tensor.outer: outer,
    torch.Tensor.ger: outer,
    torch.nanmean: nanmean,
    torch.Tensor.nanmean: nanmean,
    torch.cosine_similarity: cosine_similarity,
    torch.layer_norm: layer_norm,
    torch.group_norm: group_norm,
    torch.linalg.multi_dot: multi_dot,
    torch.nn.functional.normalize: normalize,
}
# Entries that replace a Python body of torch's, and why (the rest restate
# C++-only kernels).
REPLACES_PYTHON_BODY = {
    torch.nn.functional.normalize: "its body expands a size-1 sparse dim; division broadcasts",
}
