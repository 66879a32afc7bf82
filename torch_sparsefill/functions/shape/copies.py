"""Shape ops that copy elements or pick a diagonal (RFC.md#shape-moves):
diagonal, trace, diag, diag_embed, diagflat, repeat, tile,
repeat_interleave, broadcast_to, kron, block_diag, F.pad. Index arithmetic
on the coalesced COO components; see functions/shape/moves.py.
"""
from __future__ import annotations

import functools
import math
import numbers

import torch
import torch.nn.functional as F

from ...creation import full, sparse_coo_tensor
from ...tensor import args as _args
from ...tensor import SparseFillTensor
from ..order.lanes import all_sparse
from .moves import _dims
from .parts import Parts, finish, parts, sort

T = torch.Tensor

__all__: list = []


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal of dims `dim1`, `dim2` (shifted by `offset`) as a new
    last dim: the stored elements on it, the same fill.

    Example::

        >>> A = sf.sparse_coo_tensor([[1], [1]], [3.], (3, 3), fill_value=4.)
        >>> torch.diagonal(A).to_dense()
        tensor([4., 3., 4.])
    """
    a = _args.sparse(input, "diagonal()")
    d1, d2 = _dims([dim1, dim2], a.dim(), "diagonal()")
    if d1 == d2:
        raise RuntimeError("diagonal dimensions cannot be identical")
    if a.dense_dim():  # the diagonal dim comes last, after the dense dims
        a = all_sparse(a._coalesced())
    p = parts(a)
    n1, n2 = p.size[d1], p.size[d2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    c1, c2 = p.indices[d1], p.indices[d2]
    keep = ((c2 - c1) == offset).nonzero().view(-1)
    along = c1 if offset >= 0 else c2
    rest = [d for d in range(len(p.size)) if d not in (d1, d2)]
    indices = torch.cat([p.indices[rest].index_select(1, keep),
                         along.index_select(0, keep).unsqueeze(0)])
    values = p.values.index_select(0, keep)
    size = tuple(p.size[d] for d in rest) + (length,)
    Fr = p.F
    if Fr.shape[d1] != 1 or Fr.shape[d2] != 1:
        Fr = torch.diagonal(Fr.expand(tuple(p.size)), offset, d1, d2)
    else:
        Fr = Fr.reshape(tuple(Fr.shape[d] for d in rest) + (1,))
    indices, values = sort(indices, values, size)
    return finish(Parts(indices, values, Fr, size, p.layout), a)


def trace(input):
    """The sum of the main diagonal of a matrix, the fill counted.

    Example::

        >>> torch.trace(sf.sparse_coo_tensor([[1], [1]], [3.], (3, 3), fill_value=4.))
        tensor(11.)
    """
    a = _args.sparse(input, "trace()")
    if a.dim() != 2:
        raise RuntimeError("trace: expected a matrix")
    if a.dtype == torch.bool:  # as torch's kernel: no trace of bool
        raise NotImplementedError("\"trace\" not implemented for 'Bool'")
    return diagonal(a).sum()


def _embedded(values_dense, offset, lead_shape, n):
    """A tensor of fill 0 with `values_dense` ([..., n]) on the diagonal
    `offset` of its last two dims: every element stored (O(numel(values)))."""
    m = n + abs(offset)
    lead = math.prod(lead_shape)
    i = torch.arange(n, device=values_dense.device)
    rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
    grid = torch.arange(lead, device=values_dense.device)
    lead_idx = torch.ops.sparsefill.coo_delinearize(grid, list(lead_shape)) if lead_shape \
        else torch.zeros(0, lead, dtype=torch.int64, device=grid.device)
    indices = torch.cat([lead_idx.repeat_interleave(n, 1), rows.repeat(lead).unsqueeze(0),
                         cols.repeat(lead).unsqueeze(0)])
    zero = torch.zeros((), dtype=values_dense.dtype, device=values_dense.device)
    return sparse_coo_tensor(indices, values_dense.reshape(-1), tuple(lead_shape) + (m, m),
                             fill_value=zero).coalesce()


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """Matrices with the last dim on their diagonal `offset`, zeros
    elsewhere: fill 0, every input element stored.

    Example::

        >>> torch.diag_embed(sf.full((2,), 3.)).to_dense()
        tensor([[3., 0.],
                [0., 3.]])
    """
    a = _args.sparse(input, "diag_embed()")
    nd = a.dim() + 1
    if _dims([dim1, dim2], nd, "diag_embed()") != [nd - 2, nd - 1]:
        out = diag_embed(a, offset)
        d1, d2 = _dims([dim1, dim2], nd, "diag_embed()")
        rest = [d for d in range(nd) if d not in (d1, d2)]
        perm = [None] * nd
        for src, dst in zip(range(nd - 2), rest):
            perm[dst] = src
        perm[d1], perm[d2] = nd - 2, nd - 1
        return out.permute(perm)
    return _embedded(a.to_dense(), offset, tuple(a.shape[:-1]), a.shape[-1])


def diag(input, diagonal=0):
    """A vector's diagonal matrix (zeros off it: fill 0), or a matrix's
    diagonal (sparse, the same fill).

    Example::

        >>> torch.diag(sf.full((2,), 3.)).to_dense()
        tensor([[3., 0.],
                [0., 3.]])
    """
    a = _args.sparse(input, "diag()")
    if a.dim() == 1:
        return _embedded(a.to_dense(), diagonal, (), a.shape[0])
    if a.dim() == 2:
        return globals()["diagonal"](a, diagonal)
    raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{a.dim()}D")


def diagflat(input, offset=0):
    """:func:`diag` of the flattened tensor."""
    a = _args.sparse(input, "diagflat()")
    return _embedded(a.to_dense().reshape(-1), offset, (), a.numel())  # (every element)


def repeat(input, *sizes):
    """Copies of the tensor along each dim (new leading dims for extra
    sizes): the stored elements copied with shifted coordinates.

    Example::

        >>> sf.sparse_coo_tensor([[0]], [1.], (2,), fill_value=4.).repeat(2).to_dense()
        tensor([1., 4., 1., 4.])
    """
    a = _args.sparse(input, "repeat()")
    sizes = list(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (list, tuple,
                                                                         torch.Size)) \
        else list(sizes)
    if len(sizes) < a.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than "
                           "number of dimensions of tensor")
    extra = len(sizes) - a.dim()
    if extra:
        a = a.reshape((1,) * extra + tuple(a.shape))
    p = parts(a)
    sd = p.sparse_dim
    indices, values = p.indices, p.values
    for d in range(sd):
        r = sizes[d]
        if r != 1:
            n = p.size[d]
            copies = torch.arange(r, device=indices.device).repeat_interleave(indices.shape[1])
            indices = indices.repeat(1, r)
            indices[d] += copies * n
            values = values.repeat((r,) + (1,) * (values.dim() - 1))
    dense = [1] + sizes[sd:]
    values = values.repeat(dense) if any(s != 1 for s in dense) else values
    size = tuple(s * r for s, r in zip(p.size, sizes))
    Fr = p.F
    if any(Fr.shape[d] > 1 for d in range(len(size))):
        Fr = Fr.repeat([r if Fr.shape[d] > 1 else 1 for d, r in enumerate(sizes)])
    indices, values = sort(indices, values, size)
    return finish(Parts(indices, values, Fr, size, p.layout), a)


def tile(input, dims):
    """:func:`repeat` with leading ones for missing dims."""
    a = _args.sparse(input, "tile()")
    dims = list(dims)
    return repeat(a, [1] * (a.dim() - len(dims)) + dims)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element repeated along `dim` (the flattened tensor without):
    coordinate c goes to ``start[c] + j`` for j < repeats[c].

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (2,), fill_value=4.)
        >>> torch.repeat_interleave(A, 2).to_dense()
        tensor([1., 1., 4., 4.])
    """
    a = _args.sparse(input, "repeat_interleave()")
    if dim is None:
        try:
            flat = all_sparse(a._coalesced()).reshape(-1)
        except NotImplementedError as e:  # a per-slice fill with no flat form
            raise NotImplementedError(f"torch_sparsefill: repeat_interleave(): {e}") from None
        return repeat_interleave(flat, repeats, 0)
    d = _args.dim(dim, a.dim(), "repeat_interleave()")
    n = a.shape[d]
    reps = torch.as_tensor(repeats, device=a.device).reshape(-1).to(torch.int64)
    reps = reps.expand(n) if reps.numel() == 1 else reps
    if d >= a.sparse_dim():
        a = all_sparse(a._coalesced())
    p = parts(a)
    start = reps.cumsum(0) - reps
    c = p.indices[d]
    k = reps.index_select(0, c)
    total = int(k.sum())
    src = torch.repeat_interleave(torch.arange(c.shape[0], device=c.device), k,
                                  output_size=total)
    within = torch.arange(total, device=c.device) - (k.cumsum(0) - k).index_select(0, src)
    indices = p.indices.index_select(1, src)
    indices[d] = start.index_select(0, c.index_select(0, src)) + within
    values = p.values.index_select(0, src)
    size = p.size[:d] + (int(reps.sum()),) + p.size[d + 1:]
    Fr = p.F.repeat_interleave(reps, d) if p.F.shape[d] > 1 else p.F
    indices, values = sort(indices, values, size)
    return finish(Parts(indices, values, Fr, size, p.layout), a)


def broadcast_to(input, size):
    """The tensor broadcast to `size`: size-1 dims (sparse ones included)
    copied, as :func:`repeat` does.

    Example::

        >>> sf.sparse_coo_tensor([[0], [1]], [1.], (1, 2), fill_value=4.).broadcast_to(
        ...     (2, 2)).to_dense()
        tensor([[4., 1.],
                [4., 1.]])
    """
    a = _args.sparse(input, "broadcast_to()")
    size = list(size)
    if len(size) < a.dim():
        raise RuntimeError(f"expand(): the number of sizes provided ({len(size)}) must be "
                           f"greater or equal to the number of dimensions in the tensor "
                           f"({a.dim()})")
    lead = len(size) - a.dim()
    shape = [1] * lead + list(a.shape)
    size = [s if t == -1 else t for s, t in zip(shape, size)]
    for d, (s, t) in enumerate(zip(shape, size)):
        if s != t and s != 1:  # torch's message
            raise RuntimeError(f"The expanded size of the tensor ({t}) must match the existing "
                               f"size ({s}) at non-singleton dimension {d}.  Target sizes: "
                               f"{size}.  Tensor sizes: {list(a.shape)}")
    a = a.reshape(shape)
    return repeat(a, [t if s == 1 else 1 for s, t in zip(shape, size)])


def kron(input, other):
    """Kronecker product of two tensors of the same rank: each operand
    broadcast over the other's dims (copies of the stored elements), then
    multiplied with the fills counted.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [2.], (2,), fill_value=1.)
        >>> torch.kron(A, sf.full((2,), 3.)).to_dense()
        tensor([6., 6., 3., 3.])
    """
    a = input if isinstance(input, SparseFillTensor) else sparse_coo_tensor(
        torch.ones(input.shape, dtype=torch.bool).nonzero().t(), input.reshape(-1), input.shape,
        fill_value=torch.zeros((), dtype=input.dtype))
    b = other if isinstance(other, SparseFillTensor) else sparse_coo_tensor(
        torch.ones(other.shape, dtype=torch.bool).nonzero().t(), other.reshape(-1), other.shape,
        fill_value=torch.zeros((), dtype=other.dtype))
    nd = max(a.dim(), b.dim())
    a = a.reshape((1,) * (nd - a.dim()) + tuple(a.shape))
    b = b.reshape((1,) * (nd - b.dim()) + tuple(b.shape))
    inter = [x for pair in zip(a.shape, b.shape) for x in pair]
    ai = a.reshape([x for s in a.shape for x in (s, 1)])
    bi = b.reshape([x for s in b.shape for x in (1, s)])
    prod = broadcast_to(ai, inter) * broadcast_to(bi, inter)
    return prod.reshape([sa * sb for sa, sb in zip(a.shape, b.shape)])


def block_diag(*tensors):
    """Blocks on the diagonal, zeros elsewhere: fill 0; a block whose fill
    is not 0 stores every one of its elements.

    Example::

        >>> torch.block_diag(sf.full((1,), 2.), sf.full((1,), 3.)).to_dense()
        tensor([[2., 0.],
                [0., 3.]])
    """
    blocks = []
    for t in tensors:
        t = t if t.dim() == 2 else t.reshape(1, -1) if t.dim() == 1 else t.reshape(1, 1)
        blocks.append(t)
    dtype = functools.reduce(torch.promote_types, [t.dtype for t in blocks]) if blocks \
        else torch.float32
    rows, cols, vals, r0, c0 = [], [], [], 0, 0
    for t in blocks:
        if isinstance(t, SparseFillTensor) and not t._has_per_slice_fill() and \
                not bool((t._fill_value() != 0).any()):
            tc = t._coalesced()
            idx, v = tc._coo_indices(), tc._sf_values
        else:
            D = t.to_dense() if isinstance(t, SparseFillTensor) else t
            idx = torch.ones(D.shape, dtype=torch.bool).nonzero().t()
            v = D.reshape(-1)
        rows.append(idx[0] + r0)
        cols.append(idx[1] + c0)
        vals.append(v.to(dtype))
        r0, c0 = r0 + t.shape[0], c0 + t.shape[1]
    indices = torch.stack([torch.cat(rows), torch.cat(cols)]) if blocks else \
        torch.zeros(2, 0, dtype=torch.int64)
    values = torch.cat(vals) if blocks else torch.zeros(0, dtype=dtype)
    return sparse_coo_tensor(indices, values, (r0, c0),
                             fill_value=torch.zeros((), dtype=dtype)).coalesce()


def _padded_positions(a, pad, mode):
    """Per padded dim (last first), the input position each output position
    reads under `mode` (reflect, replicate, circular: each dim's map is its
    own), found by torch's F.pad on an arange along that dim alone; torch's
    own checks of the shape, pad and dtype run first on tensors of one
    element per dim or on the meta device, so every refusal is torch's."""
    nd = a.dim()
    F.pad(torch.empty(tuple(a.shape), device="meta", dtype=a.dtype), pad, mode=mode)
    F.pad(torch.zeros((1,) * nd, dtype=a.dtype), [0] * len(pad), mode=mode)
    maps = []
    for i in range(len(pad) // 2):
        d = nd - 1 - i
        shape = [1] * nd
        shape[d] = a.shape[d]
        one = [0] * len(pad)
        one[2 * i], one[2 * i + 1] = pad[2 * i], pad[2 * i + 1]
        at = torch.arange(a.shape[d], dtype=torch.float64).reshape(shape)  # exact below 2**53
        maps.append((d, F.pad(at, one, mode=mode).reshape(-1).to(torch.int64)))
    return maps


def pad(input, pad, mode="constant", value=None):
    """F.pad. Constant mode: the padding is joined as blocks of nothing
    stored whose fill is `value` (a `value` equal to the fill: an index
    shift; another: a per-slice fill); negative pads crop. reflect,
    replicate and circular: every output element is a copy of an input one,
    so each padded dim is an index_select of its positions (the stored
    elements copied where they are read twice, the fill kept).

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (2,), fill_value=4.)
        >>> F.pad(A, (1, 1), value=4.).to_dense()
        tensor([4., 1., 4., 4.])
        >>> F.pad(A.reshape(1, 2), (1, 1), mode="reflect").to_dense()
        tensor([[4., 1., 4., 1.]])
    """
    a = _args.sparse(input, "pad()")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        raise NotImplementedError(f"torch_sparsefill: pad() with mode={mode!r} is not "
                                  f"supported on SparseFillTensor; call it on A.to_dense()")
    if mode != "constant":
        if value:  # torch's own message and class
            raise RuntimeError(f"Padding mode \"{mode}\" doesn't take in value argument")
        out = a
        for d, positions in _padded_positions(a, pad, mode):
            if not torch.equal(positions, torch.arange(a.shape[d])):
                out = out.index_select(d, positions.to(a.device))
        return out
    if len(pad) % 2 or len(pad) // 2 > a.dim():
        raise RuntimeError("Padding length must be divisible by 2 and at most twice the rank")
    value = 0 if value is None else value
    out = all_sparse(a._coalesced()) if a.dense_dim() else a  # (the padding blocks are all-sparse)
    for i in range(len(pad) // 2):
        d = a.dim() - 1 - i
        lo, hi = int(pad[2 * i]), int(pad[2 * i + 1])
        if lo < 0:
            out = out.narrow(d, -lo, out.shape[d] + lo)
            lo = 0
        if hi < 0:
            out = out.narrow(d, 0, out.shape[d] + hi)
            hi = 0
        pieces = []
        for n in (lo, hi):
            shape = list(out.shape)
            shape[d] = n
            pieces.append(full(tuple(shape), value, dtype=a.dtype, device=a.device,
                               layout=torch.sparse_coo) if n else None)
        parts_ = [x for x in (pieces[0], out, pieces[1]) if x is not None]
        out = torch.cat(parts_, d) if len(parts_) > 1 else out
    return out


ROUTES = {
    torch.diagonal: diagonal, T.diagonal: diagonal, torch.trace: trace, T.trace: trace,
    torch.diag: diag, T.diag: diag, torch.diag_embed: diag_embed, T.diag_embed: diag_embed,
    torch.diagflat: diagflat, T.diagflat: diagflat, T.repeat: repeat, torch.tile: tile,
    T.tile: tile, torch.repeat_interleave: repeat_interleave,
    T.repeat_interleave: repeat_interleave, torch.broadcast_to: broadcast_to,
    T.broadcast_to: broadcast_to, torch.kron: kron, T.kron: kron,
    torch.block_diag: block_diag, F.pad: pad,
}
