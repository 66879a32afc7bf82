"""Shape ops that move, copy or pick elements (RFC.md#shape-moves): flip,
roll, rot90, movedim, ravel, unflatten, atleast_nd, tensor_split and the
h/v/dsplits, column_stack, diagonal, trace, diag, diag_embed, diagflat,
repeat, tile, repeat_interleave, broadcast_to, kron, block_diag, F.pad.

Each is index arithmetic on the coalesced COO components plus ATen on the
values and the fill (a per-slice fill moves with the elements: it is a
full-rank tensor ``F`` indexed the same way; functions/shape/parts.py).
Results whose elements outside the input's are not the fill (diag,
diag_embed, block_diag: zeros) have fill 0 and store every element that
came from the input.
"""
from __future__ import annotations

import math
import numbers

import torch

from ...tensor import args as _args
from ...tensor import SparseFillTensor
from ..order.lanes import all_sparse
from .parts import Parts, finish, parts, sort

T = torch.Tensor

__all__: list = []


def _dims(dims, nd, what):
    dims = [dims] if isinstance(dims, numbers.Integral) else list(dims)
    return [_args.dim(d, nd, what) for d in dims]


def _linear(idx, size):
    return torch.ops.sparsefill.coo_linearize(idx, list(size)) if len(size) > 1 else idx[0]


def _moved(a, p: Parts, coord_fn, dense_fn, fill_fn, size=None):
    """The result of mapping p's coordinates (coord_fn(indices) -> indices),
    dense parts (dense_fn(values)) and full-rank fill (fill_fn(F))."""
    indices = coord_fn(p.indices.clone())
    values = dense_fn(p.values)
    indices, values = sort(indices, values, size or p.size)
    return finish(Parts(indices, values, fill_fn(p.F), size or p.size, p.layout), a)


def flip(input, dims):
    """Reverse the order along `dims`: coordinates ``n - 1 - c``.

    Example::

        >>> torch.flip(sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=4.), [0]).to_dense()
        tensor([4., 4., 1.])
    """
    a = _args.sparse(input, "flip()")
    ds = _dims(dims, a.dim(), "flip()")
    p = parts(a)
    sd = p.sparse_dim

    def coords(idx):
        for d in ds:
            if d < sd:
                idx[d] = p.size[d] - 1 - idx[d]
        return idx
    dense = [d - sd + 1 for d in ds if d >= sd]
    return _moved(a, p, coords, lambda v: v.flip(dense) if dense else v,
                  lambda f: f.flip([d for d in ds if f.shape[d] > 1]) if any(
                      f.shape[d] > 1 for d in ds) else f)


def fliplr(input):
    """:func:`flip` of dim 1."""
    return flip(input, [1])


def flipud(input):
    """:func:`flip` of dim 0."""
    return flip(input, [0])


def roll(input, shifts, dims=None):
    """Shift the elements cyclically along `dims` (the flattened tensor
    without dims): coordinates ``(c + shift) mod n``.

    Example::

        >>> torch.roll(sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=4.), 1).to_dense()
        tensor([4., 1., 4.])
    """
    a = _args.sparse(input, "roll()")
    shifts = [shifts] if isinstance(shifts, numbers.Integral) else list(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError("roll(): shifts must be one int without dims")
        # the flattened tensor: linear coordinates shifted mod numel
        b = all_sparse(a._coalesced())
        p = parts(b)
        n = max(b.numel(), 1)

        def coords(idx):
            lin = (_linear(idx, p.size) + shifts[0]) % n
            return torch.ops.sparsefill.coo_delinearize(lin, list(p.size)) if len(p.size) > 1 \
                else lin.unsqueeze(0)

        def fill(f):  # a fill that varies: rolled as the whole tensor (O(numel))
            if f.numel() == 1:
                return f
            return f.expand(p.size).reshape(-1).roll(shifts[0]).reshape(p.size)
        return _moved(b, p, coords, lambda v: v, fill)
    ds = _dims(dims, a.dim(), "roll()")
    if len(ds) != len(shifts):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                           f"dims:{len(ds)}")
    p = parts(a)
    sd = p.sparse_dim

    def coords(idx):
        for s, d in zip(shifts, ds):
            if d < sd and p.size[d]:
                idx[d] = (idx[d] + s) % p.size[d]
        return idx

    def dense(v):
        for s, d in zip(shifts, ds):
            if d >= sd:
                v = v.roll(s, d - sd + 1)
        return v

    def fill(f):
        for s, d in zip(shifts, ds):
            if f.shape[d] > 1:
                f = f.roll(s, d)
        return f
    return _moved(a, p, coords, dense, fill)


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees `k` times in the plane of `dims` (flips and a transpose).

    Example::

        >>> A = sf.sparse_coo_tensor([[0], [1]], [1.], (2, 2), fill_value=4.)
        >>> torch.rot90(A).to_dense()
        tensor([[1., 4.],
                [4., 4.]])
    """
    a = _args.sparse(input, "rot90()")
    d0, d1 = _dims(dims, a.dim(), "rot90()")
    if d0 == d1:
        raise RuntimeError("rot90(): dims must be different")
    k %= 4
    if k == 1:
        return flip(a, [d1]).transpose(d0, d1)
    if k == 2:
        return flip(a, [d0, d1])
    if k == 3:
        return flip(a, [d0]).transpose(d0, d1)
    return a.clone()


def movedim(input, source, destination):
    """Move dims `source` to `destination` (a permute).

    Example::

        >>> torch.movedim(sf.full((2, 3, 4), 1.), 0, -1).shape
        torch.Size([3, 4, 2])
    """
    a = _args.sparse(input, "movedim()")
    src, dst = _dims(source, a.dim(), "movedim()"), _dims(destination, a.dim(), "movedim()")
    if len(src) != len(dst):
        raise RuntimeError("movedim: Invalid source or destination dims")
    order = [None] * a.dim()
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(a.dim()) if d not in src)
    perm = [o if o is not None else next(rest) for o in order]
    sd = a.sparse_dim()
    if any((p < sd) != (d < sd) for d, p in enumerate(perm)):
        a = all_sparse(a._coalesced())  # a dense dim moves among the sparse ones
    return a.permute(perm)


def ravel(input):
    """The flattened tensor (``reshape(-1)``)."""
    a = _args.sparse(input, "ravel()")
    try:
        return (all_sparse(a._coalesced()) if a.dense_dim() else a).reshape(-1)
    except NotImplementedError as e:  # a per-slice fill with no flat form
        raise NotImplementedError(f"torch_sparsefill: ravel(): {e}") from None


def unflatten(input, dim, sizes):
    """Split dim `dim` into `sizes` (one may be -1): a reshape."""
    a = _args.sparse(input, "unflatten()")
    d = _args.dim(dim, a.dim(), "unflatten()")
    sizes = list(sizes)
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        sizes[sizes.index(-1)] = a.shape[d] // max(known, 1)
    return a.reshape(tuple(a.shape[:d]) + tuple(sizes) + tuple(a.shape[d + 1:]))


def _atleast(n, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_atleast(n, t) if isinstance(t, SparseFillTensor) else
                     getattr(torch, f"atleast_{n}d")(t) for t in tensors[0])
    if len(tensors) > 1:
        return tuple(_atleast(n, (t,)) for t in tensors)
    a = tensors[0]
    if not isinstance(a, SparseFillTensor):
        return getattr(torch, f"atleast_{n}d")(a)
    shape = tuple(a.shape)
    if a.dim() >= n:
        return a
    if n == 1 or a.dim() == 0:
        shape = (1,) * n
    elif n == 2:
        shape = (1,) + shape
    else:
        shape = (1,) + shape + (1,) if a.dim() == 1 else shape + (1,)
    return a.reshape(shape)


def atleast_1d(*tensors):
    """The tensor with at least 1 dim (a reshape)."""
    return _atleast(1, tensors)


def atleast_2d(*tensors):
    """The tensor with at least 2 dims (a reshape, as torch: (n,) -> (1, n))."""
    return _atleast(2, tensors)


def atleast_3d(*tensors):
    """The tensor with at least 3 dims (a reshape, as torch: (n,) -> (1, n, 1))."""
    return _atleast(3, tensors)


def tensor_split(input, indices_or_sections, dim=0):
    """Pieces along `dim` at the given indices, or `sections` nearly equal
    ones (the first ``n % sections`` one longer), each a narrow.

    Example::

        >>> [p.shape[0] for p in torch.tensor_split(sf.full((7,), 1.), 3)]
        [3, 2, 2]
    """
    a = _args.sparse(input, "tensor_split()")
    d = _args.dim(dim, a.dim(), "tensor_split()")
    n = a.shape[d]
    x = indices_or_sections
    if isinstance(x, torch.Tensor) and x.dim() == 0:
        x = int(x)
    if isinstance(x, numbers.Integral):
        if x <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {x}")
        q, r = divmod(n, x)
        bounds = [0]
        for i in range(x):
            bounds.append(bounds[-1] + q + (1 if i < r else 0))
    else:
        bounds = [0] + [min(max(int(i) if int(i) >= 0 else n + int(i), 0), n) for i in x] + [n]
    return tuple(a.narrow(d, lo, max(hi - lo, 0)) if hi >= lo else a.narrow(d, lo, 0)
                 for lo, hi in zip(bounds[:-1], bounds[1:]))


def _dsplit(a, sections, d, what):
    if isinstance(sections, numbers.Integral):
        if sections == 0 or a.shape[d] % sections:
            raise RuntimeError(f"torch.{what} attempted to split along dimension {d}, but the "
                               f"size of the dimension {a.shape[d]} is not divisible by the "
                               f"split_size {sections}!")
    return tensor_split(a, sections, d)


def hsplit(input, sections):
    """tensor_split along dim 1 (dim 0 of a vector)."""
    a = _args.sparse(input, "hsplit()")
    return _dsplit(a, sections, 1 if a.dim() > 1 else 0, "hsplit")


def vsplit(input, sections):
    """tensor_split along dim 0."""
    a = _args.sparse(input, "vsplit()")
    if a.dim() < 2:
        raise RuntimeError("torch.vsplit requires a tensor with at least 2 dimension")
    return _dsplit(a, sections, 0, "vsplit")


def dsplit(input, sections):
    """tensor_split along dim 2."""
    a = _args.sparse(input, "dsplit()")
    if a.dim() < 3:
        raise RuntimeError("torch.dsplit requires a tensor with at least 3 dimension")
    return _dsplit(a, sections, 2, "dsplit")


def split_with_sizes(input, split_sizes, dim=0):
    """torch.split with a list of sizes."""
    return _args.sparse(input, "split_with_sizes()").split(list(split_sizes), dim)


def column_stack(tensors):
    """Vectors as columns (and matrices as they are), joined along dim 1."""
    cols = [t.reshape(-1, 1) if t.dim() <= 1 else t for t in tensors]
    return torch.cat(cols, 1)


ROUTES = {
    torch.flip: flip, T.flip: flip, torch.fliplr: fliplr, T.fliplr: fliplr,
    torch.flipud: flipud, T.flipud: flipud, torch.roll: roll, T.roll: roll,
    torch.rot90: rot90, T.rot90: rot90, torch.movedim: movedim, T.movedim: movedim,
    torch.moveaxis: movedim, T.moveaxis: movedim, torch.ravel: ravel, T.ravel: ravel,
    torch.unflatten: unflatten, T.unflatten: unflatten, torch.atleast_1d: atleast_1d,
    torch.atleast_2d: atleast_2d, torch.atleast_3d: atleast_3d,
    torch.tensor_split: tensor_split, T.tensor_split: tensor_split,
    torch.hsplit: hsplit, T.hsplit: hsplit, torch.vsplit: vsplit, T.vsplit: vsplit,
    torch.dsplit: dsplit, T.dsplit: dsplit, torch.split_with_sizes: split_with_sizes,
    T.split_with_sizes: split_with_sizes, torch.column_stack: column_stack,
}
