"""Shape ops that keep the fill (RFC.md#shape-and-indexing): transpose, permute,
unsqueeze/squeeze, reshape/view/flatten, expand, contiguous. How they treat
the fill and the layouts: functions/shape/parts.py.
"""
from __future__ import annotations

import math

import torch

from ...tensor import args as _args
from .copies import broadcast_to
from .parts import Parts, finish, parts, sort

_ops = torch.ops.sparsefill
T = torch.Tensor

__all__: list = []


# ---- transpose and permute -------------------------------------------------

def permute(input, *dims):
    """Permute the dims; sparse dims stay sparse and dense dims dense, so a
    permutation must not mix them (as in torch).

    Example::

        >>> A = sf.sparse_coo_tensor([[0], [2]], [1.], (2, 3), fill_value=4.)
        >>> A.permute(1, 0).to_dense()
        tensor([[4., 4.],
                [4., 4.],
                [1., 4.]])
    """
    a = _args.sparse(input, "permute()")
    if len(dims) == 1 and isinstance(dims[0], (list, tuple, torch.Size)):
        dims = tuple(dims[0])
    nd = a.dim()
    if len(dims) != nd:
        raise RuntimeError(f"permute(): number of dims don't match: the tensor has {nd} "
                           f"dims, got {len(dims)}")
    dims = [_args.dim(d, nd, "permute()") for d in dims]
    if sorted(dims) != list(range(nd)):
        raise RuntimeError(f"permute(): repeated dim in {tuple(dims)}")
    if dims == list(range(nd)):
        return a
    s = a.sparse_dim()
    if sorted(dims[:s]) != list(range(s)):
        raise NotImplementedError(f"permute(): a SparseFillTensor cannot move dims between its "
                           f"{s} sparse and {nd - s} dense dims, got dims {tuple(dims)}")
    p = parts(a)
    indices, values = p.indices, p.values
    if dims[:s] != list(range(s)):
        indices = indices[dims[:s]]
        indices, values = sort(indices, values, [p.size[d] for d in dims])
    if dims[s:] != list(range(s, nd)):
        values = values.permute([0] + [d - s + 1 for d in dims[s:]])
    size = tuple(p.size[d] for d in dims)
    return finish(Parts(indices, values, p.F.permute(dims), size, p.layout), a)


def transpose(input, dim0, dim1):
    """Swap two dims (both sparse or both dense). A CSR tensor's transpose is
    CSR again (its pattern re-sorted into rows, O(nse)).

    Example::

        >>> A = sf.sparse_coo_tensor([[0], [2]], [1.], (2, 3), fill_value=4.)
        >>> A.t().shape
        torch.Size([3, 2])
    """
    a = _args.sparse(input, "transpose()")
    nd = a.dim()
    d0, d1 = _args.dim(dim0, nd, "transpose()"), _args.dim(dim1, nd, "transpose()")
    dims = list(range(nd))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    s = a.sparse_dim()
    if (d0 < s) != (d1 < s):
        raise NotImplementedError(f"transpose(): cannot swap sparse dim {min(d0, d1)} with dense "
                           f"dim {max(d0, d1)} of a SparseFillTensor ({s} sparse dims)")
    return permute(a, dims)


def t(input):
    """Transpose of a tensor with at most 2 dims (like torch.t)."""
    a = _args.sparse(input, "t()")
    if a.dim() > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a.dim()}D")
    return a if a.dim() < 2 else transpose(a, 0, 1)


def _mT(input):
    if input.dim() < 2:
        raise RuntimeError("tensor.mT is only supported on matrices or batches of matrices. "
                           f"Got {input.dim()}-D tensor.")
    return transpose(input, -2, -1)


def _T(input):
    return permute(input, list(range(input.dim()))[::-1])


# ---- unsqueeze and squeeze ----------------------------------------------------

def unsqueeze(input, dim):
    """Insert a dim of size 1 at `dim`: a sparse dim when ``dim <= sparse_dim()``
    (as torch does), otherwise a dense dim. A CSR input gives COO when the
    new dim is sparse (three sparse dims)."""
    a = _args.sparse(input, "unsqueeze()")
    d = _args.dim(dim, a.dim(), "unsqueeze()", extra=1)
    p = parts(a)
    s = p.sparse_dim
    size = p.size[:d] + (1,) + p.size[d:]
    if d <= s:
        zero = p.indices.new_zeros((1, p.indices.shape[1]))
        indices = torch.cat([p.indices[:d], zero, p.indices[d:]])
        return finish(Parts(indices, p.values, p.F.unsqueeze(d), size, p.layout), a)
    return finish(Parts(p.indices, p.values.unsqueeze(d - s + 1), p.F.unsqueeze(d), size,
                          p.layout), a)


def squeeze(input, dim=None):
    """Remove dims of size 1 (all, or those named by `dim`, an int or a tuple).
    Squeezing every sparse dim leaves a COO tensor with sparse_dim 0."""
    a = _args.sparse(input, "squeeze()")
    nd = a.dim()
    if dim is None:
        dims = [d for d in range(nd) if a.shape[d] == 1]
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        dims = sorted({_args.dim(d, nd, "squeeze()") for d in dims})
        dims = [d for d in dims if a.shape[d] == 1]
    if not dims:
        return a
    p = parts(a)
    s = p.sparse_dim
    keep = [d for d in range(s) if d not in dims]
    dense_drop = tuple(d - s + 1 for d in dims if d >= s)
    values = p.values.squeeze(dense_drop) if dense_drop else p.values
    size = tuple(p.size[d] for d in range(nd) if d not in dims)
    F = p.F.squeeze(tuple(dims))
    return finish(Parts(p.indices[keep], values, F, size, p.layout), a)


# ---- reshape, view, flatten, expand, contiguous ----------------------------------

def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        shape = tuple(shape[0])
    return tuple(_args.integer(s, "reshape()") for s in shape)


def _infer(shape, numel, what):
    if sum(1 for s in shape if s == -1) > 1:
        raise RuntimeError(f"{what}: only one dimension can be inferred")
    if any(s < -1 for s in shape):
        raise RuntimeError(f"{what}: invalid shape dimension in {shape}")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"{what}: shape '{list(shape)}' is invalid for input of size "
                               f"{numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if math.prod(shape) != numel:
        raise RuntimeError(f"{what}: shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def _reshaped_fill(F, old, new, stored_shape):
    """The full-rank fill F of sparse dims `old` reshaped to sparse dims
    `new`. The dims fall into groups that map onto each other (a merge
    (B, H) -> B*H, a split, or a copy); a per-slice fill must vary along all
    or none of a group's old dims, so that the group's fill reshapes as the
    tensor does: (B*H, S, S) <-> (B, H, S, S) with a fill per (batch, head,
    row) is fine, merging the rows and columns of a per-row fill is not."""
    s, dense = len(old), tuple(F.shape[len(old):])
    if all(f == 1 for f in F.shape[:s]):
        return F.reshape((1,) * len(new) + dense)
    if math.prod(old) == 0:
        raise NotImplementedError(
            f"reshape(): reshaping an empty tensor with a per-slice fill of shape "
            f"{stored_shape} is not supported; call .to_dense() first")
    olds = [d for d in range(s) if old[d] != 1]
    news = [d for d in range(len(new)) if new[d] != 1]
    fshape = [1] * len(new)
    i = j = 0
    while i < len(olds):
        group_old, group_new = [olds[i]], [news[j]]
        po, pn = old[olds[i]], new[news[j]]
        while po != pn:
            if po < pn:
                i += 1
                group_old.append(olds[i])
                po *= old[olds[i]]
            else:
                j += 1
                group_new.append(news[j])
                pn *= new[news[j]]
        i, j = i + 1, j + 1
        varies = [F.shape[d] != 1 for d in group_old]
        if all(varies):
            for d in group_new:
                fshape[d] = new[d]
        elif any(varies):
            raise NotImplementedError(
                f"reshape(): the per-slice fill of shape {stored_shape} varies along some of "
                f"the dims {tuple(old[d] for d in group_old)} that become "
                f"{tuple(new[d] for d in group_new)}, but not all, so it has no such shape; "
                f"call .to_dense() first")
    return F.reshape(tuple(fshape) + dense)


def reshape(input, *shape):
    """Reshape where the result stays sparse: either the sparse dims are
    reshaped among themselves (the dense part unchanged; a per-slice fill
    reshapes with them when it varies along all or none of the dims merged
    into one, see `_reshaped_fill`) or the dense dims among themselves (the
    sparse dims unchanged).
    A reshape that would merge sparse with dense dims raises
    NotImplementedError.

    Example::

        >>> A = sf.sparse_coo_tensor([[1], [2]], [1.], (2, 3), fill_value=4.)
        >>> A.reshape(6).to_dense()
        tensor([4., 4., 4., 4., 4., 1.])
    """
    a = _args.sparse(input, "reshape()")
    shape = _infer(_shape_arg(shape), a.numel(), "reshape()")
    if shape == tuple(a.shape):
        return a
    s, dd = a.sparse_dim(), a.dense_dim()
    dense = tuple(a.shape[s:])
    sparse = tuple(a.shape[:s])
    p = parts(a)
    new_s = len(shape) - dd
    if new_s >= 0 and shape[new_s:] == dense and math.prod(shape[:new_s]) == math.prod(sparse):
        F = _reshaped_fill(p.F, sparse, shape[:new_s], tuple(a._sf_fill.shape))
        if s == 1 and new_s == 1:
            indices = p.indices
        else:
            linear = _ops.coo_linearize(p.indices, list(sparse)) if s else \
                p.indices.new_zeros(p.indices.shape[1])
            indices = _ops.coo_delinearize(linear, list(shape[:new_s]))
        return finish(Parts(indices, p.values, F, shape, p.layout), a)
    if shape[:s] == sparse and math.prod(shape[s:]) == math.prod(dense):
        new_dense = shape[s:]
        values = p.values.reshape((p.values.shape[0],) + new_dense)
        F = p.F.expand(tuple(p.F.shape[:s]) + dense).reshape(tuple(p.F.shape[:s]) + new_dense)
        return finish(Parts(p.indices, values, F, shape, p.layout), a)
    raise NotImplementedError(
        f"reshape(): a SparseFillTensor of size {tuple(a.shape)} ({s} sparse, {dd} dense dims) "
        f"can be reshaped among its sparse dims or among its dense dims, not to {list(shape)}, "
        f"which mixes them; call .to_dense() first")


def view(input, *shape):
    """Like :func:`reshape`. The result is a copy, not a view (RFC.md#shape-layouts-and-cost)."""
    if len(shape) == 1 and isinstance(shape[0], torch.dtype):
        raise NotImplementedError("view(dtype) is not supported on SparseFillTensor")
    return reshape(input, *shape)


def flatten(input, start_dim=0, end_dim=-1):
    """Flatten dims start_dim..end_dim (a reshape; see :func:`reshape`)."""
    a = _args.sparse(input, "flatten()")
    nd = a.dim()
    if nd == 0:
        return reshape(a, 1)
    sd, ed = _args.dim(start_dim, nd, "flatten()"), _args.dim(end_dim, nd, "flatten()")
    if sd > ed:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = tuple(a.shape[:sd]) + (math.prod(a.shape[sd:ed + 1]),) + tuple(a.shape[ed + 1:])
    return reshape(a, shape)


def expand(input, *sizes, implicit=False):
    """Expand dims of size 1. Dense dims: ``values`` becomes an expanded
    view, which torch refuses to write into in place. A sparse dim or new
    leading dims: copies of the stored elements (functions/shape/copies.py's
    broadcast_to), O(output stored), not a view.

    Example::

        >>> A = sf.sparse_coo_tensor([[1]], [[2.]], (3, 1), fill_value=7.)
        >>> A.expand(3, 2).to_dense()
        tensor([[7., 7.],
                [2., 2.],
                [7., 7.]])
    """
    a = _args.sparse(input, "expand()")
    sizes = _shape_arg(sizes)
    nd, s = a.dim(), a.sparse_dim()
    grows_sparse = len(sizes) != nd or any(
        n not in (-1, a.shape[d]) for d, n in enumerate(sizes[len(sizes) - nd:]) if d < s)
    if grows_sparse:
        # new leading dims or a sparse dim of size 1: copies of the stored
        # elements (not a view), as broadcast_to makes them
        return broadcast_to(a, sizes)
    new = list(a.shape)
    for d, n in enumerate(sizes):
        if n == -1 or n == a.shape[d]:
            continue
        if a.shape[d] != 1:
            raise RuntimeError(f"expand(): the expanded size of the tensor ({n}) must match the "
                               f"existing size ({a.shape[d]}) at non-singleton dimension {d}")
        new[d] = n
    if new == list(a.shape):
        return a
    if a.layout != torch.sparse_coo and new[:s] != list(a.shape[:s]):
        return expand(a.to_sparse_coo(), *sizes).to_sparse(layout=a.layout)
    p = parts(a)
    indices, values = p.indices, p.values
    for d in range(s):
        if new[d] != a.shape[d]:  # the pattern once per position along d (index 0 there)
            n, nse = new[d], indices.shape[1]
            coord = torch.arange(n, device=indices.device).repeat_interleave(nse)
            indices = torch.cat([indices[:d].repeat(1, n), coord[None],
                                 indices[d + 1:].repeat(1, n)])
            values = values.repeat((n,) + (1,) * (values.dim() - 1))
    if indices is not p.indices:
        indices, values = sort(indices, values, new)
    values = values.expand((values.shape[0],) + tuple(new[s:]))
    # An expanded values tensor may stay a view: torch refuses in-place
    # writes into it. The fill is copied.
    return finish(Parts(indices, values, p.F, new, p.layout), a, values_view=True)


def _expand_as(input, other):
    return expand(input, tuple(other.shape))


def contiguous(input, memory_format=torch.contiguous_format):
    """The tensor itself (a sparse tensor has no memory layout to change)."""
    return input



ROUTES = {
    T.permute: permute, torch.permute: permute,
    T.transpose: transpose, torch.transpose: transpose,
    T.swapaxes: transpose, torch.swapaxes: transpose,
    T.swapdims: transpose, torch.swapdims: transpose,
    T.t: t, torch.t: t, T.mT.__get__: _mT, T.T.__get__: _T,
    T.unsqueeze: unsqueeze, torch.unsqueeze: unsqueeze,
    T.squeeze: squeeze, torch.squeeze: squeeze,
    T.reshape: reshape, torch.reshape: reshape, T.view: view,
    T.flatten: flatten, torch.flatten: flatten,
    T.expand: expand, T.expand_as: _expand_as, T.contiguous: contiguous,
}
