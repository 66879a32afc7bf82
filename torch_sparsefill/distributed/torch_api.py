"""torch.distributed's own collectives called on a SparseFillTensor
(RFC.md#distributed): ``dist.all_reduce(A)`` and the rest reach the
routing (c10d's Python functions ask ``__torch_function__`` first), and
compute what they compute on the dense tensors, in place as torch's do,
through this package's collectives (collectives.py). The package's
``__init__`` wires ROUTES into the routing table (functions/ cannot import
this layer).

Example (on every rank)::

    >>> A = sf.sparse_coo_tensor([[rank]], [1.], (4,), fill_value=0.5)
    >>> dist.all_reduce(A)      # two ranks; None, as torch's
    >>> A.to_dense()
    tensor([2., 2., 1., 1.])
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ..tensor import SparseFillTensor
from . import collectives as _c

__all__: list = []


def _sync(name, async_op):
    if async_op:
        raise NotImplementedError(
            f"torch_sparsefill: torch.distributed.{name}(async_op=True) is not supported for "
            f"SparseFillTensor (its collectives exchange descriptions first, synchronously); "
            f"call it with async_op=False")


def _into(target, result, name):
    """Write `result` into `target` in place (a SparseFillTensor takes its
    pattern; a strided tensor, its dense elements), as torch's collectives
    write their outputs."""
    if isinstance(target, SparseFillTensor):
        with torch.no_grad():
            target._adopt(result, f"torch.distributed.{name}()", bump=True)
    elif isinstance(target, torch.Tensor):
        with torch.no_grad():
            target.copy_(result.to_dense())
    else:
        raise TypeError(f"torch.distributed.{name}: an output must be a tensor, got "
                        f"{type(target).__name__}")


def _sparse_input(tensor, name, what="tensor"):
    if not isinstance(tensor, SparseFillTensor):
        raise NotImplementedError(
            f"torch_sparsefill: torch.distributed.{name} with a strided {what} and "
            f"SparseFillTensor outputs is not supported; pass a SparseFillTensor {what}")
    return tensor


def all_reduce(tensor, op=dist.ReduceOp.SUM, group=None, async_op=False):
    """``dist.all_reduce`` of a SparseFillTensor: every rank's tensor reduced
    element-wise (the fills by the same op), written into `tensor`."""
    _sync("all_reduce", async_op)
    _into(tensor, _c.all_reduce(tensor, op, group), "all_reduce")


def broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    """``dist.broadcast`` of a SparseFillTensor: rank `src`'s tensor, written
    into `tensor` on every rank."""
    _sync("broadcast", async_op)
    if group_src is not None:
        src = dist.get_global_rank(group, group_src)
    if src is None:
        raise ValueError("torch.distributed.broadcast: give src or group_src")
    _into(tensor, _c.broadcast(tensor, src, group), "broadcast")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """``dist.all_gather``: rank r's tensor written into ``tensor_list[r]``."""
    _sync("all_gather", async_op)
    gathered = _c.all_gather(_sparse_input(tensor, "all_gather"), group)
    if len(tensor_list) != len(gathered):
        raise ValueError(f"torch.distributed.all_gather: tensor_list has {len(tensor_list)} "
                         f"tensors, the group has {len(gathered)} ranks")
    for target, result in zip(tensor_list, gathered):
        _into(target, result, "all_gather")


def reduce_scatter(output, input_list, op=dist.ReduceOp.SUM, group=None, async_op=False):
    """``dist.reduce_scatter``: rank r's `output` receives every rank's
    ``input_list[r]`` reduced."""
    _sync("reduce_scatter", async_op)
    inputs = [_sparse_input(t, "reduce_scatter", "input") for t in input_list]
    _into(output, _c.reduce_scatter(inputs, op, group), "reduce_scatter")


def send(tensor, dst=None, group=None, tag=0, group_dst=None):
    """``dist.send`` of a SparseFillTensor to rank `dst`, which receives it
    with ``dist.recv`` into a SparseFillTensor."""
    if tag != 0:
        raise NotImplementedError("torch_sparsefill: torch.distributed.send(tag=...) is not "
                                  "supported for SparseFillTensor")
    if group_dst is not None:
        dst = dist.get_global_rank(group, group_dst)
    _c.send(tensor, dst, group)


def recv(tensor, src=None, group=None, tag=0, group_src=None):
    """``dist.recv`` into a SparseFillTensor from rank `src` (given: the
    description comes first, so any-source receives are refused)."""
    if group_src is not None:
        src = dist.get_global_rank(group, group_src)
    if src is None or tag != 0:
        raise NotImplementedError("torch_sparsefill: torch.distributed.recv of a SparseFillTensor "
                                  "needs src (and no tag)")
    _into(tensor, _c.recv(src, group, tensor.device), "recv")
    return src


def _gather_single(*args, **kwargs):
    raise NotImplementedError(
        "torch_sparsefill: torch.distributed.all_gather_into_tensor / all_gather_single "
        "concatenate flat buffers, which a SparseFillTensor is not; call "
        "torch.distributed.all_gather(tensor_list, A) (or sfd.all_gather(A))")


ROUTES = {
    dist.all_reduce: all_reduce, dist.broadcast: broadcast, dist.all_gather: all_gather,
    dist.reduce_scatter: reduce_scatter, dist.send: send, dist.recv: recv,
    dist.all_gather_into_tensor: _gather_single,
}
if hasattr(dist, "all_gather_single"):
    ROUTES[dist.all_gather_single] = _gather_single
