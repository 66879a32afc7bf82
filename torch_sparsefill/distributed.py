"""torch.distributed for SparseFillTensors (RFC.md section 13.5): the
collectives, data-parallel training (DistributedDataParallel, fully_shard,
or broadcast_module + all_reduce_gradients) and row-sharded matrices
(shard_rows, matmul_row_sharded, reduce_rows_sharded).

Each function is the torch.distributed collective of the same name applied
to the dense tensors, computed on the components: the ranks first exchange
a small description of their tensors (layout, shape, dtype, fill shape,
nse), which every rank checks, so mismatched shapes, dtypes or layouts raise
the same error on every rank instead of hanging; then the pattern, values
and fill travel as padded tensors of the largest nse. Nothing is densified.

The backend is whatever the process group uses: tested with gloo on the
CPU; with NCCL the components must be on the rank's GPU (untested: no GPU
was available).

torch.distributed's own functions take strided tensors only; call these
instead. Results are returned; an all_reduce or broadcast whose result
stores the input's pattern (every rank with the same pattern, as for the
gradients of a parameter) also writes it into the input in place, as the
dense collective does.

Example (on every rank)::

    >>> A = sf.sparse_coo_tensor([[rank]], [1.], (4,), fill_value=0.5)
    >>> sfd.all_reduce(A).to_dense()  # two ranks
    tensor([2., 2., 1., 1.])
"""
from __future__ import annotations

import functools
import inspect
import math
import sys

import torch
import torch.distributed as dist

from . import _compile, _elementwise
from ._tensor import SparseFillTensor, build

__all__ = ["broadcast", "all_gather", "all_reduce", "reduce_scatter", "send", "recv",
           "broadcast_module", "all_reduce_gradients", "DistributedDataParallel", "fully_shard", "row_range", "shard_rows",
           "matmul_row_sharded", "reduce_rows_sharded"]


# ---- descriptions and components --------------------------------------------------------

def _describe(A) -> tuple:
    if not isinstance(A, SparseFillTensor):
        raise TypeError(f"torch_sparsefill.distributed: expected a SparseFillTensor, got a "
                        f"{type(A).__name__}; use torch.distributed for strided tensors")
    C = A._coalesced()
    return (str(A.layout), tuple(A.shape), str(A.dtype), C.sparse_dim(),
            tuple(C._sf_fill.shape), C.nse())


def _check_same(descriptions, what, group):
    """Every rank's tensor must agree but for nse: the same error on every rank."""
    first = descriptions[0][:5]
    for rank, d in enumerate(descriptions):
        if d[:5] != first:
            names = ("layout", "shape", "dtype", "sparse_dim", "fill shape")
            diff = next(n for n, a, b in zip(names, d, first) if a != b)
            raise RuntimeError(
                f"torch_sparsefill.distributed.{what}: the tensors differ across ranks: "
                f"{diff} {dict(zip(names, d))[diff]} on rank {_global(rank, group)} vs "
                f"{dict(zip(names, first))[diff]} on rank {_global(0, group)}")


def _global(rank, group):
    return rank if group is None else dist.get_global_rank(group, rank)


def _gather_descriptions(A, what, group):
    out = [None] * dist.get_world_size(group)
    dist.all_gather_object(out, _describe(A), group=group)
    _check_same(out, what, group)
    return out


def _parts(A: SparseFillTensor, nse: int):
    """The pattern (COO indices, int64), values and fill, the first two padded to nse."""
    C = A._coalesced()
    indices, values = C._coo_indices().to(torch.int64), C._sf_values.detach()
    pad = nse - values.shape[0]
    if pad:
        indices = torch.cat([indices, indices.new_zeros(indices.shape[0], pad)], 1)
        values = torch.cat([values, values.new_zeros((pad,) + values.shape[1:])])
    return [indices.contiguous(), values.contiguous(), C._sf_fill.detach().contiguous()]


def _empty_parts(description, nse, device):
    layout, shape, dtype, sparse_dim, fill_shape, _ = description
    dtype = getattr(torch, dtype.split(".")[-1])
    dense = shape[sparse_dim:]
    return [torch.empty(sparse_dim, nse, dtype=torch.int64, device=device),
            torch.empty((nse,) + dense, dtype=dtype, device=device),
            torch.empty(fill_shape, dtype=dtype, device=device)]


def _assemble(description, parts) -> SparseFillTensor:
    layout, shape, _, _, _, nse = description
    indices, values, fill = parts
    layout = torch.sparse_csr if layout == str(torch.sparse_csr) else torch.sparse_coo
    return build(layout, shape, values[:nse], fill, indices=indices[:, :nse])


def _in_place_if_same_pattern(A: SparseFillTensor, result: SparseFillTensor):
    C = A._coalesced()
    if C is A and _elementwise.same_pattern(A, result.to(device=A.device)):
        with torch.no_grad():
            return A.copy_(result)
    return result


def _check_operands(what, group, **operands):
    """Every rank's description of the operands must agree (ranks' own
    parts, such as row counts, aside): the same error on every rank, never
    a collective of mismatched sizes."""
    mine = tuple(sorted(operands.items()))
    every = [None] * dist.get_world_size(group)
    dist.all_gather_object(every, mine, group=group)
    for rank, theirs in enumerate(every):
        if theirs != every[0]:
            name, a, b = next((n, a, b) for (n, a), (_, b) in zip(theirs, every[0]) if a != b)
            if isinstance(a, tuple) and isinstance(b, tuple):  # a list of tensors: the first
                a, b = next(((x, y) for x, y in zip(a, b) if x != y),
                            (f"{len(a)} entries", f"{len(b)}"))
            raise RuntimeError(f"torch_sparsefill.distributed.{what}: the operands differ "
                               f"across ranks: {name} {a} on rank {_global(rank, group)} vs "
                               f"{b} on rank {_global(0, group)}")


def _kind(t) -> tuple:
    """What must agree across ranks about a module's tensor."""
    return (type(t).__name__, str(t.layout), tuple(t.shape), str(t.dtype))


# ---- collectives ---------------------------------------------------------------------------

def broadcast(A: SparseFillTensor, src: int, group=None) -> SparseFillTensor:
    """Rank `src`'s tensor on every rank (written into A when A stores its pattern)."""
    descriptions = _gather_descriptions(A, "broadcast", group)
    src_local = dist.get_group_rank(group, src) if group is not None else src
    d = descriptions[src_local]
    mine = dist.get_rank() == src
    parts = _parts(A, d[5]) if mine else _empty_parts(d, d[5], A.device)
    for t in parts:
        dist.broadcast(t, src, group=group)
    if mine:
        return A
    return _in_place_if_same_pattern(A, _assemble(d, parts))


def all_gather(A: SparseFillTensor, group=None) -> list:
    """Every rank's tensor, in rank order, on every rank."""
    descriptions = _gather_descriptions(A, "all_gather", group)
    nse = max(d[5] for d in descriptions)
    mine = _parts(A, nse)
    gathered = []
    for k, t in enumerate(mine):
        bufs = [torch.empty_like(t) for _ in descriptions]
        dist.all_gather(bufs, t, group=group)
        gathered.append(bufs)
    return [_assemble(d, [gathered[0][r], gathered[1][r], gathered[2][r]])
            for r, d in enumerate(descriptions)]


_COMBINE = {
    dist.ReduceOp.SUM: torch.add, dist.ReduceOp.AVG: torch.add,
    dist.ReduceOp.MAX: torch.maximum, dist.ReduceOp.MIN: torch.minimum,
    dist.ReduceOp.PRODUCT: torch.mul,
}


def _reduce(tensors, op, what):
    if op not in _COMBINE:
        raise ValueError(f"torch_sparsefill.distributed.{what}: op {op} is not supported; "
                         f"SUM, AVG, MAX, MIN and PRODUCT are")
    out = tensors[0]
    for t in tensors[1:]:  # rank order: every rank computes the same result
        out = _COMBINE[op](out, t)
    return out / len(tensors) if op == dist.ReduceOp.AVG else out


def all_reduce(A: SparseFillTensor, op=dist.ReduceOp.SUM, group=None) -> SparseFillTensor:
    """The element-wise reduction of every rank's tensor: on the union of the
    patterns, the fills combined by the same op (written into A when the
    result stores A's pattern)."""
    if op not in _COMBINE:
        _reduce([A], op, "all_reduce")
    result = _reduce(all_gather(A, group), op, "all_reduce")
    return _in_place_if_same_pattern(A, result)


def reduce_scatter(inputs, op=dist.ReduceOp.SUM, group=None) -> SparseFillTensor:
    """Rank r receives the reduction over ranks of every rank's ``inputs[r]``."""
    world = dist.get_world_size(group)
    if len(inputs) != world:
        raise ValueError(f"torch_sparsefill.distributed.reduce_scatter: inputs has "
                         f"{len(inputs)} tensors, the group has {world} ranks")
    me = dist.get_rank(group)
    mine = None
    for r, t in enumerate(inputs):
        gathered = all_gather(t, group)
        if r == me:
            mine = _reduce(gathered, op, "reduce_scatter")
    return mine


def send(A: SparseFillTensor, dst: int, group=None) -> None:
    """Send A to rank `dst` (which calls `recv`)."""
    d = _describe(A)
    dist.send_object_list([d], dst, group=group)
    for t in _parts(A, d[5]):
        dist.send(t, dst, group=group)


def recv(src: int, group=None, device=None) -> SparseFillTensor:
    """The SparseFillTensor rank `src` sends (on `device`, the CPU by default)."""
    box = [None]
    dist.recv_object_list(box, src, group=group)
    parts = _empty_parts(box[0], box[0][5], device or "cpu")
    for t in parts:
        dist.recv(t, src, group=group)
    return _assemble(box[0], parts)


# ---- data-parallel training --------------------------------------------------------------

def broadcast_module(module: torch.nn.Module, src: int = 0, group=None) -> None:
    """Give every rank rank `src`'s parameters and buffers, SparseFillTensors
    (in place) and strided tensors alike; call once before training."""
    _check_operands("broadcast_module", group, tensors=tuple(
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
    _check_operands("all_reduce_gradients", group, parameters=tuple(
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
    its components, its values and fill (RFC.md 7.2), so those are what the
    reducer buckets and averages; SparseFillTensors are synchronised at
    construction and buffers before each forward with ``broadcast`` (rank 0's
    tensor, its pattern included). torch's own class refuses such modules
    (RFC.md 13.5 says why).

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
    (RFC.md 13.5 says why). Initialise the module identically on every rank
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
    _check_operands("fully_shard", group, parameters=tuple(  # their gradients are all_reduced
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


# ---- row-sharded tensors ------------------------------------------------------------------

def row_range(rows: int, group=None) -> tuple:
    """The rows [start, stop) this rank holds of a matrix of `rows` rows split
    into contiguous blocks, one per rank (sizes differing by at most one)."""
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    base, extra = divmod(rows, world)
    start = rank * base + min(rank, extra)
    return start, start + base + (rank < extra)


def shard_rows(A, group=None):
    """This rank's row block of `A` (a SparseFillTensor, CSR, same fill; or a
    strided tensor), per `row_range`.

    Example::

        >>> A_local = sfd.shard_rows(A)  # rank r of 2: rows r * m // 2 ...
    """
    start, stop = row_range(A.shape[0], group)
    block = A[start:stop]
    if isinstance(block, SparseFillTensor) and block.dim() == 2:
        block = block.to_sparse(layout=torch.sparse_csr)
    return block


class _GatherRows(torch.autograd.Function):
    """All ranks' row blocks concatenated; the backward sums the gradient
    over ranks (all_reduce) and keeps this rank's rows."""

    @staticmethod
    def forward(ctx, local, rows, group):
        ctx.group, ctx.span = group, row_range(rows, group)
        most = -(-rows // dist.get_world_size(group))
        padded = torch.cat([local, local.new_zeros((most - local.shape[0],) + local.shape[1:])])
        blocks = [torch.empty_like(padded) for _ in range(dist.get_world_size(group))]
        dist.all_gather(blocks, padded.contiguous(), group=group)
        base, extra = divmod(rows, len(blocks))
        return torch.cat([b[:base + (r < extra)] for r, b in enumerate(blocks)])

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        start, stop = ctx.span
        return grad[start:stop], None, None


def _owner_bounds(rows: int, world: int) -> list:
    """The first row of every rank's block (``row_range``), and `rows`."""
    base, extra = divmod(rows, world)
    return [r * base + min(r, extra) for r in range(world + 1)]


def _all_to_all(chunks: list, group, recv_sizes=None) -> list:
    """``chunks[r]`` (1-D, one dtype) to rank r; returns what each rank sent
    here, in rank order (one all_to_all_single with split sizes, after one
    of the sizes unless `recv_sizes` says them)."""
    send_sizes = [c.numel() for c in chunks]
    if recv_sizes is None:
        received = torch.empty(len(chunks), dtype=torch.int64)
        dist.all_to_all_single(received, torch.tensor(send_sizes, dtype=torch.int64),
                               group=group)
        recv_sizes = received.tolist()
    send = torch.cat(chunks)
    recv = send.new_empty(sum(recv_sizes))
    dist.all_to_all_single(recv, send, recv_sizes, send_sizes, group=group)
    return list(recv.split(recv_sizes))


class _ExchangeRows(torch.autograd.Function):
    """Rows `wanted` (sorted, unique global row numbers; each rank its own)
    of a row-sharded matrix, each fetched from its owner: the ranks tell the
    owners which rows they want (an all_to_all of row numbers), and the
    owners send exactly those (an all_to_all of rows). The backward sends
    the gradients of the received rows back the same way; each owner adds
    them into its block (rows several ranks wanted get the sum)."""

    @staticmethod
    def forward(ctx, local, wanted, rows, group):
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        bounds = _owner_bounds(rows, world)
        owner_split = torch.searchsorted(wanted, torch.tensor(bounds[1:-1], dtype=torch.int64))
        asked = _all_to_all(list(torch.tensor_split(wanted, owner_split)), group)
        sent = [local[a - bounds[rank]] for a in asked]  # the rows each rank asked for
        width = local.shape[1:]
        row_numel = math.prod(width)
        split = torch.diff(owner_split, prepend=torch.zeros(1, dtype=torch.int64),
                           append=torch.tensor([wanted.numel()])).tolist()
        got = _all_to_all([t.reshape(-1) for t in sent], group,
                          [c * row_numel for c in split])  # known: what was asked of each
        ctx.group, ctx.asked, ctx.start, ctx.shape = group, asked, bounds[rank], local.shape
        ctx.split = split
        return torch.cat(got).reshape((wanted.numel(),) + width)

    @staticmethod
    def backward(ctx, grad):
        width = grad.shape[1:]
        row_numel = math.prod(width)
        back = _all_to_all([g.reshape(-1) for g in grad.contiguous().split(ctx.split)],
                           ctx.group, [a.numel() * row_numel for a in ctx.asked])
        out = grad.new_zeros(ctx.shape)
        for asked, g in zip(ctx.asked, back):
            out.index_add_(0, asked - ctx.start, g.reshape((asked.numel(),) + width))
        return out, None, None, None


def matmul_row_sharded(A_local: SparseFillTensor, B_local: torch.Tensor, group=None):
    """The row block of ``A @ B`` this rank holds, for A and B (k x n, strided
    or a SparseFillTensor) both sharded by rows (``shard_rows``); strided.
    Differentiable with respect to A's values and fill and to B's blocks
    (their values and fill).

    With a finite fill, one per block or one per row: ``A @ B = S @ B + fill x
    colsum(B)``, S being the stored values minus the fill. The column sums
    of B are one all_reduce of ``1 x n``; S needs only the rows of B that
    its stored elements touch, which each rank fetches from their owners
    (two all_to_alls: the row numbers, then exactly those rows). Otherwise (a non-finite fill,
    whose correction would be inf - inf, or one per column) every rank
    gathers all of B and multiplies its block with the fill-aware product.

    Example::

        >>> out = sfd.matmul_row_sharded(sfd.shard_rows(A), sfd.shard_rows(B))
    """
    if not isinstance(A_local, SparseFillTensor) or A_local.dim() != 2:
        raise TypeError("matmul_row_sharded: A_local must be a 2-D SparseFillTensor row block")
    if not isinstance(B_local, torch.Tensor) or B_local.dim() != 2:
        raise TypeError("matmul_row_sharded: B_local must be a 2-D row block (strided or a "
                        "SparseFillTensor)")
    _check_operands("matmul_row_sharded", group, A_columns=A_local.shape[1],
                    A_dtype=str(A_local.dtype), A_layout=str(A_local.layout),
                    B_columns=B_local.shape[1], B_dtype=str(B_local.dtype),
                    B_layout=str(B_local.layout))
    if isinstance(B_local, SparseFillTensor):
        # the output block is dense (a fill reaches every element), and B's
        # block is no larger for k ~ m: densified here, differentiably
        B_local = B_local.to_dense()
    rows = torch.tensor([B_local.shape[0]], dtype=torch.int64)
    dist.all_reduce(rows, group=group)
    k = int(rows)
    start, stop = row_range(k, group)
    bad = torch.tensor([int(A_local.shape[1] != k or B_local.shape[0] != stop - start)])
    dist.all_reduce(bad, op=dist.ReduceOp.MAX, group=group)  # every rank raises, or none
    if int(bad):
        raise RuntimeError(f"matmul_row_sharded: A has {A_local.shape[1]} columns and B {k} "
                           f"rows over the ranks; every rank's B block must be its row_range "
                           f"(here {B_local.shape[0]} rows for {(start, stop)}): shard B with "
                           f"shard_rows")
    A = A_local.to_sparse(layout=torch.sparse_csr)
    fill = A._sf_fill
    per_row = fill.dim() == 2 and fill.shape[1] == 1
    lean = bool(torch.isfinite(fill).all()) and (fill.dim() == 0 or per_row)
    decided = torch.tensor([int(lean)], dtype=torch.int64)
    dist.all_reduce(decided, op=dist.ReduceOp.MIN, group=group)  # every rank the same way
    if not int(decided):
        return A_local @ _GatherRows.apply(B_local, k, group)
    crow, col = A._sf_crow, A._sf_col
    wanted, local_col = torch.unique(col.to(torch.int64), return_inverse=True)
    B_rows = _ExchangeRows.apply(B_local, wanted, k, group)
    colsum = _AllReduceSum.apply(B_local.sum(0), group)
    per_element = fill[torch.ops.sparsefill.rows_from_crow(crow), 0] if per_row else fill
    stored = build(torch.sparse_csr, (A.shape[0], wanted.numel()), A._sf_values - per_element,
                   torch.zeros((), dtype=A.dtype, device=A.device),
                   crow=crow, col=local_col.to(col.dtype))
    return stored @ B_rows + fill * colsum


class _AllReduceSum(torch.autograd.Function):
    """The sum over ranks; every rank's loss reads it, so the gradient of each
    rank's input is the sum over ranks of theirs."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        out = x.contiguous().clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


def reduce_rows_sharded(A_local: SparseFillTensor, op: str = "sum", group=None) -> torch.Tensor:
    """The reduction over all rows (dim 0) of a row-sharded matrix, on every
    rank: each rank reduces its block, then one collective of 1 x n vectors
    combines them (all_reduce for sum and mean; all_gather for amax and
    amin, whose NaN gloo's MAX/MIN would drop). `op`: "sum", "mean"
    (differentiable), "amax", "amin".

    Example::

        >>> sfd.reduce_rows_sharded(sfd.shard_rows(A), "mean")  # == A.to_dense().mean(0)
    """
    if op not in ("sum", "mean", "amax", "amin"):
        raise ValueError(f"reduce_rows_sharded: op must be sum, mean, amax or amin, got {op!r}")
    differentiable = A_local.requires_grad and torch.is_grad_enabled()
    _check_operands("reduce_rows_sharded", group, op=op, columns=tuple(A_local.shape[1:]),
                    dtype=str(A_local.dtype), layout=str(A_local.layout),
                    requires_grad=differentiable)
    if op in ("sum", "mean"):
        part = A_local.sum(0)
        part = part.to_dense() if isinstance(part, SparseFillTensor) else part
        total = _AllReduceSum.apply(part, group)
        if op == "sum":
            return total
        rows = torch.tensor([A_local.shape[0]], dtype=torch.int64)
        dist.all_reduce(rows, group=group)
        return total / int(rows)
    if op in ("amax", "amin"):
        if differentiable:
            raise NotImplementedError(f"reduce_rows_sharded({op!r}) is not differentiable yet; "
                                      f"call it under torch.no_grad() or on a detached tensor")
        part = getattr(torch, op)(A_local, 0)
        part = (part.to_dense() if isinstance(part, SparseFillTensor) else part).contiguous()
        # gathered and reduced here: gloo's MAX/MIN drop NaN, torch's amax keeps it
        parts = [torch.empty_like(part) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, part, group=group)
        return getattr(torch, op)(torch.stack(parts), 0)


# Loaded on demand, after the package hid its modules from Dynamo: hide this
# one too, so a compiled training step runs it eagerly like the rest (_compile.py).
_compile.hide_from_dynamo([sys.modules[__name__]], __package__)
