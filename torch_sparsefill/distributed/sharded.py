"""Row-sharded SparseFillTensors (RFC.md#distributed): each rank holds a
contiguous block of rows; products and reductions over the whole matrix
exchange only what they need.
"""
from __future__ import annotations

import math

import torch
import torch.distributed as dist

from ..tensor import SparseFillTensor, build
from .collectives import check_operands

__all__ = ["row_range", "shard_rows", "matmul_row_sharded", "reduce_rows_sharded"]


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
    if dist.get_world_size(group) == 1:
        # One rank holds every row: the product itself. The checks across
        # ranks, the exchange of rows and the column sums' all_reduce were
        # the whole difference (7x the product on one process).
        return A_local @ (B_local.to_dense() if isinstance(B_local, SparseFillTensor)
                          else B_local)
    check_operands("matmul_row_sharded", group, A_columns=A_local.shape[1],
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
    wanted, local_col = _columns_used(col, k)
    B_rows = _ExchangeRows.apply(B_local, wanted, k, group)
    colsum = _AllReduceSum.apply(B_local.sum(0), group)
    per_element = fill[torch.ops.sparsefill.rows_from_crow(crow), 0] if per_row else fill
    stored = build(torch.sparse_csr, (A.shape[0], wanted.numel()), A._sf_values - per_element,
                   torch.zeros((), dtype=A.dtype, device=A.device),
                   crow=crow, col=local_col.to(col.dtype))
    return (stored @ B_rows).add_(fill * colsum)  # in place: the block is written once


def _columns_used(col: torch.Tensor, k: int):
    """(the sorted columns `col` uses, each element's place among them):
    torch.unique(col, return_inverse=True) by a mark per column, O(k + nse)
    instead of a sort (the sort was 80% of a one-process product)."""
    used = torch.zeros(k, dtype=torch.bool, device=col.device)
    used[col] = True
    place = torch.cumsum(used, 0) - 1
    return used.nonzero().view(-1), place.index_select(0, col.to(torch.int64))


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
    check_operands("reduce_rows_sharded", group, op=op, columns=tuple(A_local.shape[1:]),
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
