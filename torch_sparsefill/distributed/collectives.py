"""The collectives of torch.distributed for SparseFillTensors
(RFC.md#distributed; the rules they share are in this package's docstring):
each describes its tensors to the other ranks, checks that the descriptions
agree, then sends the pattern, values and fill as padded tensors.

Example (on every rank)::

    >>> A = sf.sparse_coo_tensor([[rank]], [1.], (4,), fill_value=0.5)
    >>> sfd.all_reduce(A).to_dense()  # two ranks
    tensor([2., 2., 1., 1.])
"""
from __future__ import annotations


import torch
import torch.distributed as dist

from ..functions.elementwise import handlers as _elementwise
from ..tensor import SparseFillTensor, build

__all__ = ["broadcast", "all_gather", "all_reduce", "reduce_scatter", "send", "recv"]


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
    # (the padded buffers sliced: contiguous copies, the components a tensor owns)
    return build(layout, shape, values[:nse].contiguous(), fill,
                 indices=indices[:, :nse].contiguous())


def _in_place_if_same_pattern(A: SparseFillTensor, result: SparseFillTensor):
    C = A._coalesced()
    if C is A and _elementwise.same_pattern(A, result.to(device=A.device)):
        with torch.no_grad():
            return A.copy_(result)
    return result


def check_operands(what, group, **operands):
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
