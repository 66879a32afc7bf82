"""Batching SparseFillTensor samples for torch.utils.data (RFC.md#data-loading).

`collate` stacks samples of one shape into one tensor with a leading batch
dim; each sample keeps its fill (a per-slice fill when they differ). The
package registers it for SparseFillTensor in torch's
``default_collate_fn_map``, so ``default_collate`` and a plain
``DataLoader`` batch SparseFillTensors, alone or inside tuples and dicts.
"""
from __future__ import annotations

import torch

from ..tensor import SparseFillTensor

__all__: list = []


def collate(batch) -> SparseFillTensor:
    """Stack SparseFillTensor samples of one shape along a new dim 0.

    Example::

        >>> a = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=0.)
        >>> b = sf.sparse_coo_tensor([[2]], [2.], (3,), fill_value=9.)
        >>> sf.collate([a, b]).to_dense()
        tensor([[1., 0., 0.],
                [9., 9., 2.]])
    """
    batch = list(batch)
    if not batch:
        raise ValueError("collate(): the batch is empty")
    for i, sample in enumerate(batch):
        if not isinstance(sample, SparseFillTensor):
            raise TypeError(f"collate(): sample {i} is a {type(sample).__name__}, expected a "
                            f"SparseFillTensor like sample 0")
        if sample.shape != batch[0].shape:
            raise RuntimeError(f"collate(): sample {i} has shape {tuple(sample.shape)}, sample 0 "
                               f"has {tuple(batch[0].shape)}; samples of one batch must have one "
                               f"shape (pad them, or batch with a custom collate_fn)")
    return torch.stack(batch)


def collate_fn(batch, *, collate_fn_map=None):
    """The entry of ``default_collate_fn_map`` (its calling convention)."""
    return collate(batch)
