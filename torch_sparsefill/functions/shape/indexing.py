"""Indexing that keeps the fill (RFC.md#indexing): narrow and slicing,
select, index_select, ``A[...]``, unbind, split, chunk. How they treat the
fill and the layouts: functions/shape/parts.py.
"""
from __future__ import annotations

import numbers

import torch

from ... import _C
from ...tensor import args as _args
from .parts import (Parts, fill_index, finish, full_fill, own, parts, sort, strided)
from .reshape import unsqueeze
from ..indexing import reads as _reads
from ...tensor import SparseFillTensor, build, is_plain

T = torch.Tensor
_CSR = torch.sparse_csr
_ops = torch.ops.sparsefill

__all__: list = []


# ---- narrow, slicing, select, index_select ---------------------------------------

def _slice(a: SparseFillTensor, d: int, start, stop, step):
    """a[..., start:stop:step, ...] along dim d (step > 0)."""
    n = a.shape[d]
    start, stop, step = slice(start, stop, step).indices(n)
    length = len(range(start, stop, step))
    if (start, length, step) == (0, n, 1):
        return a
    s = a.sparse_dim()
    if a.layout == torch.sparse_csr and d == 0:
        if step == 1:
            return _csr_rows(a, start, length)
        idx = torch.arange(start, start + step * length, step, device=a.device)
        return _csr_index_rows(a, idx)
    p = parts(a)
    size = p.size[:d] + (length,) + p.size[d + 1:]
    F = fill_index(p.F, d, lambda f: f[(slice(None),) * d + (slice(start, stop, step),)])
    if d >= s:
        values = p.values[(slice(None),) * (d - s + 1) + (slice(start, stop, step),)]
        return finish(Parts(p.indices, values, F, size, p.layout), a)
    c = p.indices[d]
    keep = (c >= start) & (c < start + step * length)
    if step != 1:
        keep &= (c - start) % step == 0
    keep = keep.nonzero().view(-1)
    indices = p.indices.index_select(1, keep)
    # A monotone map of one coordinate keeps row-major order: no re-sort.
    indices[d] = (indices[d] - start) // step
    return finish(Parts(indices, p.values.index_select(0, keep), F, size, p.layout), a)


def _csr_rows(a: SparseFillTensor, start: int, length: int):
    """Rows start..start+length of a CSR tensor: O(length + their elements),
    nothing proportional to the other rows (col is shared: indices are never
    written in place)."""
    crow = a._sf_crow[start: start + length + 1]
    lo, hi = int(crow[0]), int(crow[-1])
    F = full_fill(a)
    F = fill_index(F, 0, lambda f: f[start: start + length])
    size = (length,) + a._sf_size[1:]
    return build(torch.sparse_csr, size, a._sf_values[lo:hi].clone(), own(F, (a,)),
                 crow=crow - lo, col=a._sf_col[lo:hi])


def _count(t: torch.Tensor):
    """A 0-d count as a result's size: an int, or when traced an unbacked
    SymInt (the count is data: one graph serves every value)."""
    n = t.item()
    if torch.compiler.is_compiling():
        torch._check(n >= 0)
    return n


def _csr_index_rows(a: SparseFillTensor, index: torch.Tensor):
    """Rows `index` (in range, any order, repeats allowed) of a CSR tensor, in
    O(len(index) + elements of those rows)."""
    crow = a._sf_crow
    begin = crow.index_select(0, index)
    lengths = crow.index_select(0, index + 1) - begin
    new_crow = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])
    total = _count(new_crow[-1])
    src = torch.repeat_interleave(begin - new_crow[:-1], lengths, output_size=total) + \
        torch.arange(total, device=crow.device)
    F = fill_index(full_fill(a), 0, lambda f: f.index_select(0, index))
    size = (index.numel(),) + a._sf_size[1:]
    return build(torch.sparse_csr, size, a._sf_values.index_select(0, src), own(F, (a,)),
                 crow=new_crow, col=a._sf_col.index_select(0, src))


def narrow(input, dim, start, length):
    """``length`` elements of dim `dim` from `start`: CSR rows in O(rows + their
    elements), other sparse dims in O(nse).

    Example::

        >>> A = sf.sparse_coo_tensor([[1, 3]], [1., 2.], (4,), fill_value=9.)
        >>> A.narrow(0, 1, 2).to_dense()
        tensor([1., 9.])
    """
    a = _args.sparse(input, "narrow()")
    d = _args.dim(dim, a.dim(), "narrow()")
    n = a.shape[d]
    start, length = _args.integer(start, "narrow()"), _args.integer(length, "narrow()")
    if start < 0:
        start += n
    if not 0 <= start <= n:
        raise IndexError(f"narrow(): start ({start}) is out of bounds for dim {d} of size {n}")
    if length < 0 or start + length > n:
        raise RuntimeError(f"narrow(): start ({start}) + length ({length}) exceeds dimension "
                           f"size ({n}).")
    return _slice(a, d, start, start + length, 1)


def _select(a: SparseFillTensor, d: int, i: int):
    n = a._sf_size[d]  # (a.shape would be a trip through __torch_function__)
    if not -n <= i < n:
        raise IndexError(f"select(): index {i} out of range for tensor of size "
                         f"{tuple(a._sf_size)} at dimension {d}")
    i %= n
    s = a.sparse_dim()
    if a._sf_layout == torch.sparse_csr and d == 0:
        lo, hi = a._sf_crow[i: i + 2].tolist()  # one read of the row's bounds
        if not a._has_per_slice_fill():
            # One row, one fill: straight to the result (copies, never views,
            # of values and fill: see _parts.own).
            return build(torch.sparse_coo, a._sf_size[1:], a._sf_values[lo:hi].clone(),
                         a._sf_fill.clone(), indices=a._sf_col[lo:hi].unsqueeze(0))
        indices = a._sf_col[lo:hi].unsqueeze(0)
        values, F = a._sf_values[lo:hi], full_fill(a)
    else:
        p = parts(a)
        indices, values, F = p.indices, p.values, p.F
        if d < s:
            keep = (indices[d] == i).nonzero().view(-1)
            indices = torch.cat([indices[:d], indices[d + 1:]]).index_select(1, keep)
            values = values.index_select(0, keep)
        else:
            values = values.select(d - s + 1, i)
    F = F.select(d, 0 if F.shape[d] == 1 else i)
    size = a._sf_size[:d] + a._sf_size[d + 1:]
    out = Parts(indices, values, F, size, a.layout)
    return strided(out) if out.sparse_dim == 0 and s > 0 and d < s else finish(out, a)


def select(input, dim, index):
    """Select one index of dim `dim`, removing the dim. Removing the last
    sparse dim gives a strided tensor (the fill where nothing is stored, with
    the gradient going to the fill).

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 1], [2, 0]], [3., 4.], (2, 3), fill_value=5.)
        >>> A.select(0, 1).to_dense()
        tensor([4., 5., 5.])
        >>> A[0, 1]
        tensor(5.)
    """
    a = _args.sparse(input, "select()")
    return _select(a, _args.dim(dim, a.dim(), "select()"), _args.integer(index, "select()"))


def unbind(input, dim=0):
    """All slices along `dim` as a tuple (also what ``for row in A`` uses):
    one :func:`select` each, so O(nse) per slice except for CSR rows."""
    a = _args.sparse(input, "unbind()")
    d = _args.dim(dim, a.dim(), "unbind()")
    return tuple(_select(a, d, i) for i in range(a.shape[d]))


def split(input, split_size_or_sections, dim=0):
    """Pieces of `split_size` along `dim` (the last may be smaller), or of the
    listed sizes, as torch.split; each is a :func:`narrow`.

    Example::

        >>> A = sf.sparse_coo_tensor([[1, 3]], [1., 2.], (5,), fill_value=9.)
        >>> [p.to_dense() for p in A.split(2)]
        [tensor([9., 1.]), tensor([9., 2.]), tensor([9.])]
    """
    a = _args.sparse(input, "split()")
    d = _args.dim(dim, a.dim(), "split()")
    n = a.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [_args.integer(x, "split()") for x in split_size_or_sections]
        if sum(sizes) != n or any(x < 0 for x in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {d}), but got "
                               f"split_sizes={sizes}")
    else:
        size = _args.integer(split_size_or_sections, "split()")
        if size <= 0 and n > 0 or size < 0:
            raise RuntimeError(f"split(): split_size must be positive, got {size}")
        sizes = [min(size, n - start) for start in range(0, n, size)] if n else [0]
    out, start = [], 0
    for size in sizes:
        out.append(_slice(a, d, start, start + size, 1))
        start += size
    return tuple(out)


def chunk(input, chunks, dim=0):
    """torch.chunk: pieces of ceil(size / chunks) along `dim`."""
    a = _args.sparse(input, "chunk()")
    chunks = _args.integer(chunks, "chunk()")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = a.shape[_args.dim(dim, a.dim(), "chunk()")]
    return split(a, max(-(-n // chunks), 1), dim)


def _index_arg(index, n, what, *, device, wrap=False):
    if not isinstance(index, torch.Tensor):
        index = torch.as_tensor(index, device=device)
    if isinstance(index, SparseFillTensor) or index.layout != torch.strided:
        raise TypeError(f"{what}: index must be a strided tensor")
    if index.dim() > 1:
        raise NotImplementedError(f"{what}: index tensors of more than one dim (shape "
                                  f"{tuple(index.shape)}) are not supported on SparseFillTensor")
    if index.dtype == torch.bool:
        if index.dim() != 1 or index.numel() != n:
            raise IndexError(f"{what}: a boolean index must be 1-D of the dim's size {n}, got "
                             f"shape {tuple(index.shape)}")
        return index.nonzero().view(-1).to(device)
    if index.dtype.is_floating_point or index.dtype.is_complex:
        raise TypeError(f"{what}: index must be an integer tensor, got dtype {index.dtype}")
    index = index.reshape(-1).to(torch.int64)
    if wrap:
        index = torch.where(index < 0, index + n, index)
    if torch.compiler.is_compiling():  # traced: checked when the graph runs, no branch on data
        torch._assert_async(((index >= 0) & (index < n)).all(),
                            f"{what}: an index is out of bounds for a dim of size {n}")
    elif index.numel() and (int(index.min()) < 0 or int(index.max()) >= n):
        bad = index[(index < 0) | (index >= n)][0]
        raise IndexError(f"{what}: index {int(bad)} is out of bounds for a dim of size {n}")
    return index.to(device)  # a CPU index tensor may select from a CUDA tensor


def _index_select(a: SparseFillTensor, d: int, index: torch.Tensor):
    s = a.sparse_dim()
    if a.layout == torch.sparse_csr and d == 0:
        return _csr_index_rows(a, index)
    p = parts(a)
    size = p.size[:d] + (index.numel(),) + p.size[d + 1:]
    F = fill_index(p.F, d, lambda f: f.index_select(d, index))
    if d >= s:
        values = p.values.index_select(d - s + 1, index)
        return finish(Parts(p.indices, values, F, size, p.layout), a)
    c = p.indices[d]
    if d > 0 and c.device.type == "cpu":
        # One threaded C pass (docs/design.md#hot-path): the result's indices come out
        # coalesced (ordered within each group of equal leading coordinates,
        # no global sort), with each element's source; the values are
        # gathered here, so autograd goes through ATen's index_select.
        indices, src = _ops.index_select_plan(p.indices, index, d, list(p.size[:s]))
        # (the gathered values are new: no alias check)
        return finish(Parts(indices, p.values.index_select(0, src), F, size, p.layout), a,
                      values_view=True)
    arange = torch.arange
    if d == 0:
        # Coalesced order sorts the elements by their first coordinate: a
        # binary search finds each selected coordinate's run, and taking the
        # runs in turn is already the result's order. O(k log nse + result).
        begin = torch.searchsorted(c, index)
        taken = torch.searchsorted(c, index, right=True) - begin
        total = _count(taken.sum())
        j = torch.repeat_interleave(arange(index.numel(), device=c.device), taken,
                                    output_size=total)
        within = arange(total, device=c.device) - (taken.cumsum(0) - taken).index_select(0, j)
        src = begin.index_select(0, j) + within
    else:
        # Copy each stored element once per position of its coordinate in
        # `index` (positions grouped by value: a sort of the index, not of the
        # nse elements), then sort only the result.
        by_value = torch.sort(index, stable=True).indices
        sel = torch.bincount(index, minlength=p.size[d])
        first = sel.cumsum(0) - sel
        copies = sel.index_select(0, c)
        kept = copies.nonzero().view(-1)  # the rest of the work is O(result)
        copies = copies.index_select(0, kept)
        total = _count(copies.sum())
        slot = torch.repeat_interleave(arange(kept.numel(), device=c.device), copies,
                                       output_size=total)
        src = kept.index_select(0, slot)
        within = arange(total, device=c.device) - (copies.cumsum(0) - copies).index_select(0, slot)
        j = by_value.index_select(0, first.index_select(0, c.index_select(0, src)) + within)
    indices = p.indices.index_select(1, src)
    indices[d] = j
    values = p.values.index_select(0, src)
    # An increasing index maps coordinates monotonically, so the result is
    # already sorted; so does a non-decreasing one on the last sparse dim.
    # A repeated coordinate on an earlier dim is not: the copies of one
    # element come out together, before the next element's lower coordinates
    # (index [0, 0]: (0, 1, 0) before (0, 0, 1)).
    if d > 0:
        steps = index[1:] - index[:-1]
        if torch.compiler.is_compiling() or \
                not bool((steps > 0).all() if d < s - 1 else (steps >= 0).all()):
            indices, values = sort(indices, values, size)  # (traced: no branch on data)
    return finish(Parts(indices, values, F, size, p.layout), a)


def index_select(input, dim, index):
    """Elements at positions `index` (1-D integer tensor, repeats allowed)
    along `dim`. On CSR rows: O(len(index) + elements of the selected rows);
    COO's first dim: O(len(index) log nse + result); other sparse dims:
    O(nse + size of the dim + result), one threaded C pass on the CPU.
    Unspecified selected elements keep the fill (and send it their
    gradient).

    Example::

        >>> A = sf.sparse_coo_tensor([[1, 3]], [1., 2.], (4,), fill_value=9.)
        >>> A.index_select(0, torch.tensor([3, 0, 3])).to_dense()
        tensor([2., 9., 2.])
    """
    a = _args.sparse(input, "index_select()")
    d = _args.dim(dim, a.dim(), "index_select()")
    if isinstance(index, torch.Tensor) and index.dtype == torch.bool:
        raise TypeError("index_select(): index must be an integer tensor, got dtype torch.bool")
    return _index_select(a, d, _index_arg(index, a.shape[d], "index_select()", device=a.device))


# ---- A[...] --------------------------------------------------------------------

def _is_int(x) -> bool:
    if isinstance(x, torch.Tensor):
        return not isinstance(x, SparseFillTensor) and x.dim() == 0 and \
            not (x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool)
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _is_index_tensor(x) -> bool:
    return isinstance(x, (torch.Tensor, list)) and not _is_int(x)


def _multi_dim(x) -> bool:
    """An index that is not one 1-D list of positions: a tensor of another
    rank, a boolean mask over several dims, a sparse mask."""
    if isinstance(x, SparseFillTensor):
        return True
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(x)
    return t.dim() != 1


def getitem(input, index):
    """``A[index]`` with ints, slices (positive step), None, Ellipsis and one
    1-D integer or boolean index tensor (or list), on sparse and dense dims.
    The result keeps the fill; an index that leaves no sparse dim gives a
    strided tensor.

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 1], [2, 0]], [3., 4.], (2, 3), fill_value=5.)
        >>> A[1, 1:].to_dense()
        tensor([5., 5.])
    """
    a = _args.sparse(input, "__getitem__()")
    if type(index) is int and a._sf_size:  # A[i] (one row: the hot path), as the loop below
        return _select(a, 0, index)
    items = index if isinstance(index, tuple) else (index,)
    if any(isinstance(x, bool) for x in items):
        raise NotImplementedError("A[True]/A[False] is not supported on SparseFillTensor")
    if sum(1 for x in items if x is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    tensors = [k for k, x in enumerate(items) if _is_index_tensor(x)]
    if len(tensors) > 1 or any(_multi_dim(items[k]) for k in tensors):
        # several index tensors, a mask of any rank, an index of several dims
        return _reads.advanced(a, items)
    consuming = [x for x in items if x is not None and x is not Ellipsis]
    if len(consuming) > len(a._sf_size):
        raise IndexError(f"too many indices for tensor of dimension {len(a._sf_size)}")
    if tensors:
        # torch moves the index tensor's dim to the front when the advanced
        # indices (ints and the tensor) are not adjacent; indexing one dim at
        # a time puts it in place, which agrees only in the cases let through.
        adv = [k for k, x in enumerate(items) if _is_int(x) or k == tensors[0]]
        if adv != list(range(adv[0], adv[-1] + 1)) and \
                any(not _is_int(x) for x in items[:tensors[0]]):
            raise NotImplementedError("mixing an index tensor with integers separated by "
                                      "slices is not supported on SparseFillTensor")
    cur, d = a, 0
    for k, x in enumerate(items):
        if not isinstance(cur, SparseFillTensor):  # no sparse dim left
            return cur[(slice(None),) * d + tuple(items[k:])]
        if x is None:
            cur, d = unsqueeze(cur, d), d + 1
        elif x is Ellipsis:
            after = sum(1 for y in items[k + 1:] if y is not None and y is not Ellipsis)
            d = cur.dim() - after
        elif _is_int(x):
            cur = _select(cur, d, _args.integer(x, "__getitem__"))
        elif isinstance(x, slice):
            step = 1 if x.step is None else _args.integer(x.step, "__getitem__")
            if step <= 0:
                raise ValueError("step must be greater than zero")
            start = None if x.start is None else _args.integer(x.start, "__getitem__")
            stop = None if x.stop is None else _args.integer(x.stop, "__getitem__")
            cur, d = _slice(cur, d, start, stop, step), d + 1
        elif _is_index_tensor(x):
            idx = _index_arg(x, cur.shape[d], "__getitem__", wrap=True, device=cur.device)
            cur, d = _index_select(cur, d, idx), d + 1
        else:
            raise TypeError(f"SparseFillTensor indices must be ints, slices, None, Ellipsis or "
                            f"an index tensor, got {type(x).__name__}")
    return cur



def _fast_row(args):
    """The hot path of ``A[i]`` (docs/design.md#hot-path): row i of a plain CSR
    matrix in one C call (_C.hot_row), the tensor _select makes; None for
    any other call, and where hot_row answers None (the route then says
    what is wrong, or reads the row's bounds itself)."""
    if len(args) != 2 or type(i := args[1]) is not int or not is_plain(a := args[0]) \
            or a._sf_layout is not _CSR or len(a._sf_size) != 2:
        return None
    out = _C.hot_row(a._sf_crow, a._sf_col, a._sf_values, a._sf_fill, i)
    if out is None:
        return None
    indices, values, fill = out
    return build(torch.sparse_coo, a._sf_size[1:], values, fill, indices=indices)


ROUTES = {
    T.narrow: narrow, torch.narrow: narrow,
    T.narrow_copy: narrow, torch.narrow_copy: narrow,  # results are copies anyway
    T.select: select, torch.select: select,
    T.index_select: index_select, torch.index_select: index_select,
    T.__getitem__: getitem,
    T.unbind: unbind, torch.unbind: unbind, T.split: split, torch.split: split,
    T.chunk: chunk, torch.chunk: chunk,
}
# Callables whose calls without keywords the routing tries here first.
FAST = {T.__getitem__: _fast_row}
