"""Data-parallel training of modules holding SparseFillTensors (
RFC.md#distributed): DistributedDataParallel, fully_shard, or broadcast_module +
all_reduce_gradients by hand. Gradients are averaged on the components.
"""
from __future__ import annotations

import functools
import inspect

import torch
import torch.distributed as dist

from ..tensor import SparseFillTensor
from .collectives import broadcast, check_operands

__all__ = ["broadcast_module", "all_reduce_gradients", "DistributedDataParallel", "fully_shard"]


def _kind(t) -> tuple:
    """What must agree across ranks about a module's tensor."""
    return (type(t).__name__, str(t.layout), tuple(t.shape), str(t.dtype))


# ---- data-parallel training --------------------------------------------------------------

def broadcast_module(module: torch.nn.Module, src: int = 0, group=None) -> None:
    """Give every rank rank `src`'s parameters and buffers, SparseFillTensors
    (in place) and strided tensors alike; call once before training."""
    check_operands("broadcast_module", group, tensors=tuple(
        (name, _kind(t)) for name, t in list(module.named_parameters())
        + list(module.named_buffers())))
    with torch.no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            if isinstance(t, SparseFillTensor):
                out = broadcast(t, src, group)
                if out is not t:
                    raise RuntimeError(f"broadcast_module: a SparseFillTensor has another "
                                       f"pattern on rank {src}; build the module identically "
                                       f"on every rank")
            else:
                dist.broadcast(t.data, src, group=group)


def all_reduce_gradients(module: torch.nn.Module, group=None) -> None:
    """Average every parameter's gradient over the ranks, after backward:
    what DistributedDataParallel does, for modules with SparseFillTensor
    parameters (their value and fill gradients are averaged as components,
    their patterns being the same on every rank)."""
    world = dist.get_world_size(group)
    check_operands("all_reduce_gradients", group, parameters=tuple(
        (name, _kind(p), tuple(p._sf_values.shape) if isinstance(p, SparseFillTensor) else ())
        for name, p in module.named_parameters()))
    grads = []
    for p in module.parameters():
        parts = [p._sf_values, p._sf_fill] if isinstance(p, SparseFillTensor) else [p]
        for t in parts:
            if t.grad is None:
                t.grad = torch.zeros_like(t)
            grads.append(t.grad)
    by_dtype: dict = {}
    for g in grads:
        by_dtype.setdefault(g.dtype, []).append(g)
    for same in by_dtype.values():  # one all_reduce per dtype
        flat = torch.cat([g.reshape(-1) for g in same])
        dist.all_reduce(flat, group=group)
        flat /= world
        offset = 0
        for g in same:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()


# ---- DistributedDataParallel ------------------------------------------------------------

def _take(A: SparseFillTensor, result: SparseFillTensor) -> None:
    """A becomes `result` in place: its components when they store A's
    pattern, otherwise its pattern too (``A.data = result``; A's value and
    fill leaves stay the same objects)."""
    if result is not A:
        with torch.no_grad():
            A.data = result


class DistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
    """torch's ``DistributedDataParallel`` for a module holding SparseFillTensor
    parameters or buffers (and strided ones): the same arguments and behaviour
    (bucketed all_reduce overlapping backward, gradients averaged, ``no_sync``,
    comm hooks, ``find_unused_parameters``, buffers broadcast from rank 0
    before each forward). A SparseFillTensor parameter's gradients live on
    its components, its values and fill (RFC.md#gradient-convention), so those are what the
    reducer buckets and averages; SparseFillTensors are synchronised at
    construction and buffers before each forward with ``broadcast`` (rank 0's
    tensor, its pattern included). torch's own class refuses such modules
    (RFC.md#distributed says why).

    Example (on every rank, after ``init_process_group``)::

        >>> model = sfd.DistributedDataParallel(model)  # instead of torch's
        >>> F.mse_loss(model(x), y).backward()  # gradients averaged over ranks
        >>> opt.step()
    """

    def __init__(self, module, *args, **kwargs):
        base = torch.nn.parallel.DistributedDataParallel
        bound = inspect.signature(base.__init__).bind(None, module, *args, **kwargs)
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        arguments.pop("self")
        ignored = set(getattr(module, "_ddp_params_and_buffers_to_ignore", ()))
        sparse = {n for n, t in list(module.named_parameters()) + list(module.named_buffers())
                  if isinstance(t, SparseFillTensor) and n not in ignored}
        if sparse and arguments.get("mixed_precision") is not None:
            raise NotImplementedError(
                "torch_sparsefill.distributed.DistributedDataParallel: mixed_precision is not "
                "supported with SparseFillTensor parameters or buffers; use torch.autocast")
        if arguments.get("init_sync", True) and sparse:
            group = arguments.get("process_group")
            if group is None and arguments.get("device_mesh") is not None:
                group = arguments["device_mesh"].get_group(mesh_dim=0)
            buffers = (arguments.get("forward_sync_buffers") is not None
                       or arguments.get("broadcast_buffers") is not False)
            _sync_initial_state(module, group, ignored, buffers)
            arguments["init_sync"] = False  # done above, SparseFillTensors included
        super().__init__(**arguments)

    def _build_params_for_reducer(self):
        """torch's list with each SparseFillTensor parameter replaced by its
        component leaves (values, fill): the tensors its gradients reach."""
        parameters, expect_sparse_gradient = super()._build_params_for_reducer()
        out, expect = [], []
        for p, e in zip(parameters, expect_sparse_gradient):
            parts = _components(p) if isinstance(p, SparseFillTensor) else [p]
            out += parts
            expect += [e] * len(parts)
        return out, expect

    def _build_debug_param_to_name_mapping(self, parameters):
        index = {id(t): i for i, t in enumerate(parameters)}
        names = {}
        for name, p in self.module.named_parameters():
            parts = ([(name + "._values", p._sf_values), (name + "._fill_value", p._sf_fill)]
                     if isinstance(p, SparseFillTensor) else [(name, p)])
            for part_name, t in parts:
                if id(t) in index:
                    names[index[id(t)]] = part_name
        return names

    def _assign_modules_buffers(self):
        """torch's broadcast covers the strided buffers; the SparseFillTensor
        ones are kept apart for `broadcast` (`_sync_module_buffers`)."""
        super()._assign_modules_buffers()
        self._sparse_buffers = [b for b in self.modules_buffers
                                if isinstance(b, SparseFillTensor)]
        if self._sparse_buffers:
            self.named_module_buffers = {n: b for n, b in self.named_module_buffers.items()
                                         if not isinstance(b, SparseFillTensor)}
            self.modules_buffers = list(self.named_module_buffers.values())

    def will_sync_module_buffers(self):
        return (self.require_forward_param_sync and self.forward_sync_buffers
                and bool(self.modules_buffers or self._sparse_buffers))

    def _sync_module_buffers(self, authoritative_rank):
        if self.modules_buffers:
            super()._sync_module_buffers(authoritative_rank)
        for b in self._sparse_buffers:
            _take(b, broadcast(b, authoritative_rank, self.process_group))


def _components(p: SparseFillTensor) -> list:
    return [t for t in (p._sf_values, p._sf_fill) if t.requires_grad]


def _sync_initial_state(module, group, ignored, buffers):
    """What DDP's construction does (parameter shapes checked across ranks,
    rank 0's parameters and buffers everywhere), SparseFillTensors included:
    they are broadcast first (a layout, shape or dtype mismatch raises on
    every rank), so the shapes torch then checks are rank 0's."""
    from torch.distributed.utils import _sync_module_states, _verify_param_shape_across_processes
    named = list(module.named_parameters()) + (list(module.named_buffers()) if buffers else [])
    for name, t in named:
        if isinstance(t, SparseFillTensor) and name not in ignored:
            _take(t, broadcast(t, 0, group))
    strided = [p for n, p in module.named_parameters()
               if n not in ignored and not isinstance(p, SparseFillTensor)]
    components = [c for n, p in module.named_parameters()
                  if n not in ignored and isinstance(p, SparseFillTensor) for c in _components(p)]
    group = group if group is not None else dist.distributed_c10d._get_default_group()
    _verify_param_shape_across_processes(group, strided + components)
    skip = ignored | {n for n, t in named if isinstance(t, SparseFillTensor)}
    _sync_module_states(module, group, 250 * 1024 * 1024, 0, skip, broadcast_buffers=buffers)


# ---- FSDP -------------------------------------------------------------------------------

def fully_shard(module: torch.nn.Module, **kwargs):
    """torch's FSDP2 ``fully_shard`` for a module holding SparseFillTensor
    parameters: the strided parameters are sharded as torch does; the
    SparseFillTensor ones stay whole on every rank (passed to torch as
    ``ignored_params``) and their value and fill gradients are averaged over
    the ranks as each finishes accumulating in backward, so they train as
    under DistributedDataParallel. The other arguments are torch's; the mesh
    must be one-dimensional. torch's ``fully_shard`` refuses such a module
    (RFC.md#distributed says why). Initialise the module identically on every rank
    (FSDP does not broadcast); call it on submodules and then the root, as
    with torch's.

    Example (on every rank, after ``init_process_group``)::

        >>> sfd.fully_shard(model)  # model.lin.weight: a DTensor; model.w: whole
        >>> F.mse_loss(model(x), y).backward(); opt.step()
    """
    from torch.distributed.fsdp import fully_shard as torch_fully_shard
    mesh = kwargs.get("mesh")
    if mesh is not None and mesh.ndim != 1:
        raise NotImplementedError(f"torch_sparsefill.distributed.fully_shard: a "
                                  f"{mesh.ndim}-D mesh; only a 1-D mesh is supported")
    group = mesh.get_group() if mesh is not None else None
    named = [(n, p) for n, p in module.named_parameters() if isinstance(p, SparseFillTensor)]
    check_operands("fully_shard", group, parameters=tuple(  # their gradients are all_reduced
        (n, _kind(p), tuple(p._sf_values.shape)) for n, p in named))
    sparse = {p for _, p in named}
    kwargs["ignored_params"] = set(kwargs.get("ignored_params") or ()) | sparse
    out = torch_fully_shard(module, **kwargs)
    for p in sparse:
        for t in _components(p):
            if not getattr(t, "_sf_fsdp_hooked", False):  # a second call: hooked once
                t.register_post_accumulate_grad_hook(functools.partial(_average, group=group))
                t._sf_fsdp_hooked = True
    return out


def _average(leaf, group):
    """The gradient, averaged over the ranks. After a second backward it
    holds the averaged first plus this one's own: averaging that again is
    the average of both, so accumulation over several backward passes is exact."""
    dist.all_reduce(leaf.grad, group=group)
    leaf.grad /= dist.get_world_size(group)
