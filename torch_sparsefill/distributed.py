"""torch.distributed collectives on SparseFillTensors (RFC.md section 13.5).

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

import sys

import torch
import torch.distributed as dist

from . import _compile, _elementwise
from ._tensor import SparseFillTensor, build

__all__ = ["broadcast", "all_gather", "all_reduce", "reduce_scatter", "send", "recv",
           "broadcast_module", "all_reduce_gradients", "row_range", "shard_rows",
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


class _GatherSelectedRows(torch.autograd.Function):
    """Rows `wanted` (sorted global row numbers, the same on every rank) of a
    row-sharded matrix: each rank contributes the wanted rows it owns (one
    all_gather, padded). The backward all_reduces the gradient of the
    gathered rows; each rank keeps those of its own rows."""

    @staticmethod
    def forward(ctx, local, wanted, rows, group):
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        base, extra = divmod(rows, world)
        bounds = [r * base + min(r, extra) for r in range(world + 1)]
        counts = [int(((wanted >= bounds[r]) & (wanted < bounds[r + 1])).sum())
                  for r in range(world)]
        mine = wanted[(wanted >= bounds[rank]) & (wanted < bounds[rank + 1])] - bounds[rank]
        most = max(counts)
        own = local[mine]
        padded = torch.cat([own, own.new_zeros((most - own.shape[0],) + own.shape[1:])])
        blocks = [torch.empty_like(padded) for _ in range(world)]
        dist.all_gather(blocks, padded.contiguous(), group=group)
        ctx.group, ctx.mine, ctx.shape = group, mine, local.shape
        ctx.offset, ctx.count = sum(counts[:rank]), counts[rank]
        return torch.cat([b[:c] for b, c in zip(blocks, counts)])

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, group=ctx.group)
        out = grad.new_zeros(ctx.shape)
        out[ctx.mine] = grad[ctx.offset:ctx.offset + ctx.count]
        return out, None, None, None


def _union_over_ranks(x: torch.Tensor, group) -> torch.Tensor:
    """The sorted union of every rank's 1-D int64 tensor `x`."""
    size = torch.tensor([x.numel()], dtype=torch.int64)
    sizes = [torch.empty_like(size) for _ in range(dist.get_world_size(group))]
    dist.all_gather(sizes, size, group=group)
    most = int(max(sizes))
    padded = torch.cat([x, x.new_full((most - x.numel(),), -1)])
    parts = [torch.empty_like(padded) for _ in sizes]
    dist.all_gather(parts, padded, group=group)
    joined = torch.cat(parts)
    return torch.unique(joined[joined >= 0])


def matmul_row_sharded(A_local: SparseFillTensor, B_local: torch.Tensor, group=None):
    """The row block of ``A @ B`` this rank holds, for A and B (k x n, strided)
    both sharded by rows (``shard_rows``). Differentiable with respect to A's
    values and fill and to B's blocks.

    With a finite fill, one per block or one per row: ``A @ B = S @ B + fill x
    colsum(B)``, S being the stored values minus the fill. The column sums
    of B are one all_reduce of ``1 x n``; S needs only the rows of B that
    stored elements touch, which the ranks exchange (one all_gather of the
    rows any rank needs, from their owners). Otherwise (a non-finite fill,
    whose correction would be inf - inf, or one per column) every rank
    gathers all of B and multiplies its block with the fill-aware product.

    Example::

        >>> out = sfd.matmul_row_sharded(sfd.shard_rows(A), sfd.shard_rows(B))
    """
    if not isinstance(A_local, SparseFillTensor):
        raise TypeError("matmul_row_sharded: A_local must be a SparseFillTensor row block")
    rows = torch.tensor([B_local.shape[0]], dtype=torch.int64)
    dist.all_reduce(rows, group=group)
    k = int(rows)
    if A_local.shape[1] != k:
        raise RuntimeError(f"matmul_row_sharded: A has {A_local.shape[1]} columns, B has "
                           f"{k} rows over the ranks")
    A = A_local.to_sparse(layout=torch.sparse_csr)
    fill = A._sf_fill
    per_row = fill.dim() == 2 and fill.shape[1] == 1
    lean = bool(torch.isfinite(fill).all()) and (fill.dim() == 0 or per_row)
    decided = torch.tensor([int(lean)], dtype=torch.int64)
    dist.all_reduce(decided, op=dist.ReduceOp.MIN, group=group)  # every rank the same way
    if not int(decided):
        return A_local @ _GatherRows.apply(B_local, k, group)
    crow, col = A._sf_crow, A._sf_col
    wanted = _union_over_ranks(torch.unique(col), group)
    B_rows = _GatherSelectedRows.apply(B_local, wanted, k, group)
    colsum = _AllReduceSum.apply(B_local.sum(0), group)
    per_element = fill[torch.ops.sparsefill.rows_from_crow(crow), 0] if per_row else fill
    stored = build(torch.sparse_csr, (A.shape[0], wanted.numel()), A._sf_values - per_element,
                   torch.zeros((), dtype=A.dtype, device=A.device),
                   crow=crow, col=torch.searchsorted(wanted, col))
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
        if A_local.requires_grad and torch.is_grad_enabled():
            raise NotImplementedError(f"reduce_rows_sharded({op!r}) is not differentiable yet; "
                                      f"call it under torch.no_grad() or on a detached tensor")
        part = getattr(torch, op)(A_local, 0)
        part = (part.to_dense() if isinstance(part, SparseFillTensor) else part).contiguous()
        # gathered and reduced here: gloo's MAX/MIN drop NaN, torch's amax keeps it
        parts = [torch.empty_like(part) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, part, group=group)
        return getattr(torch, op)(torch.stack(parts), 0)
    raise ValueError(f"reduce_rows_sharded: op must be sum, mean, amax or amin, got {op!r}")


# Loaded on demand, after the package hid its modules from Dynamo: hide this
# one too, so a compiled training step runs it eagerly like the rest (_compile.py).
_compile.hide_from_dynamo([sys.modules[__name__]], __package__)
