"""Shape and indexing ops that keep the fill (RFC.md section 11): transpose,
permute, unsqueeze/squeeze, reshape/view/flatten, narrow/slicing, select,
index_select, ``A[...]``, cat/stack/hstack/vstack, expand, contiguous.

Every op is composed of index arithmetic on the coalesced COO (or CSR)
components and ATen ops on ``values`` and the fill, so autograd reaches
``values`` and the fill by itself; no op here writes a backward formula.

The fill is handled in one uniform way: it is first written as a full-rank
tensor ``F`` that broadcasts to the whole size (a dense-part fill of shape
``(3,)`` on a ``(5, 7, 3)`` tensor is ``(1, 1, 3)``; a per-slice fill already
is one), the op is applied to ``F`` the way it is applied to a dense tensor
(size-1 dims stay size 1: they broadcast), and the result is stored back in
the dense-part form whenever it no longer varies along a sparse dim
(RFC.md 1.5). So a per-slice fill is sliced, permuted and concatenated along
with the tensor.

Layouts: a COO input gives COO. A CSR input gives CSR when the result still
has two sparse dims (``A.t()`` included: the transposed pattern is re-sorted
into rows) and COO otherwise. When indexing removes the last sparse dim the
result is strided (a 0-d tensor for a single element), holding the fill where
the element is unspecified; its gradient reaches the fill.
"""
from __future__ import annotations

import numbers
import operator

import torch

from . import _routing
from ._tensor import SparseFillTensor, _prod

_ops = torch.ops.sparsefill
T = torch.Tensor

__all__: list = []


# ---- the working form: coalesced COO parts with a full-rank fill -------------

class _Parts:
    """Coalesced COO components of a tensor, its fill as a full-rank tensor
    ``F`` broadcasting to ``size``, and the layout the result should get."""

    __slots__ = ("indices", "values", "F", "size", "layout")

    def __init__(self, indices, values, F, size, layout):
        self.indices, self.values, self.F = indices, values, F
        self.size, self.layout = tuple(int(s) for s in size), layout

    @property
    def sparse_dim(self) -> int:
        return self.indices.shape[0]

    @property
    def dense_shape(self) -> tuple:
        return self.size[self.sparse_dim:]


def _full_fill(t: SparseFillTensor) -> torch.Tensor:
    """t's fill as a tensor of t's rank that broadcasts to t's size."""
    f = t._sf_fill
    if t._has_per_slice_fill():  # already full rank
        return f
    return f.reshape((1,) * (len(t._sf_size) - f.dim()) + tuple(f.shape))


def _parts(t: SparseFillTensor) -> _Parts:
    src = t._coalesced()
    return _Parts(src._coo_indices(), src._sf_values, _full_fill(t), t._sf_size, t.layout)


def _stored_fill(F: torch.Tensor, sparse_dim: int) -> torch.Tensor:
    """F in the form the tensor stores: the dense-part form (leading size-1
    dims dropped) unless it varies along a sparse dim (a per-slice fill)."""
    if any(s != 1 for s in F.shape[:sparse_dim]):
        return F
    shape = list(F.shape[sparse_dim:])
    while shape and shape[0] == 1:
        shape.pop(0)
    return F.reshape(shape)


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr() if t.numel() else 0


def _own(t: torch.Tensor, inputs) -> torch.Tensor:
    """t, or a copy of it when it shares memory with an input's values or
    fill. Results are never views: writing into one in place (an in-place op,
    ``_fill_value().fill_()``) must not change the input, whose fill covers
    elements the result does not have."""
    ptr = _storage(t)
    if ptr and any(ptr in (_storage(x._sf_values), _storage(x._sf_fill)) for x in inputs):
        return t.clone()
    return t


def _finish(p: _Parts, *inputs, values_view=False):
    """Build the result tensor from parts; CSR when asked for and possible.
    Values and fill that alias one of `inputs` are copied (see _own)."""
    fill = _own(_stored_fill(p.F, p.sparse_dim), inputs)
    values = p.values if values_view else _own(p.values, inputs)
    if p.layout == torch.sparse_csr and p.sparse_dim == 2:
        crow = _ops.crow_from_rows(p.indices[0].contiguous(), p.size[0])
        return SparseFillTensor(torch.sparse_csr, p.size, values, fill, crow=crow,
                                col=p.indices[1].contiguous())
    return SparseFillTensor(torch.sparse_coo, p.size, values, fill, indices=p.indices,
                            coalesced=True)


def _strided(p: _Parts) -> torch.Tensor:
    """A tensor with no sparse dim left (0 or 1 stored element) as a strided
    tensor: the stored dense part, or the fill. gather_with_fill sends the
    gradient of an unspecified result to the fill."""
    assert p.sparse_dim == 0
    src = torch.tensor([0 if p.values.shape[0] else -1], dtype=torch.int64,
                       device=p.values.device)
    return _ops.gather_with_fill(p.values, p.F, src)[0]


def _sort(indices, values, size):
    """Indices (unique) and values brought into coalesced row-major order."""
    if indices.shape[0] <= 1 and values.shape[0] <= 1:
        return indices, values
    return _ops.coo_coalesce(indices, values, list(size[: indices.shape[0]]))


def _fill_index(F, d, fn):
    """Apply an indexing fn along dim d of F, unless F broadcasts there."""
    return F if F.shape[d] == 1 else fn(F)


# ---- argument checks ---------------------------------------------------------

def _dim(d, ndim: int, what: str, *, extra: int = 0) -> int:
    """Normalise a dim like torch (negative counts from the end); IndexError
    when out of range, naming the op."""
    if isinstance(d, torch.Tensor) or not isinstance(d, numbers.Integral):
        raise TypeError(f"{what}: dim must be an int, got {type(d).__name__}")
    n = ndim + extra
    if not -max(n, 1) <= d < max(n, 1):
        raise IndexError(f"{what}: dimension out of range (expected to be in range of "
                         f"[{-max(n, 1)}, {max(n, 1) - 1}], but got {d})")
    return int(d) % max(n, 1)


def _int(i, what) -> int:
    if isinstance(i, torch.Tensor):
        if i.numel() != 1 or i.dtype.is_floating_point or i.dtype.is_complex or \
                i.dtype == torch.bool:
            raise TypeError(f"{what}: expected an integer index, got a tensor of shape "
                            f"{tuple(i.shape)} and dtype {i.dtype}")
        return int(i.item())
    try:
        return operator.index(i)
    except TypeError:
        raise TypeError(f"{what}: expected an integer index, got {type(i).__name__}") from None


def _sft(x, what):
    if not isinstance(x, SparseFillTensor):
        raise TypeError(f"{what}: expected a SparseFillTensor, got {type(x).__name__}")
    return x


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
    a = _sft(input, "permute")
    if len(dims) == 1 and isinstance(dims[0], (list, tuple, torch.Size)):
        dims = tuple(dims[0])
    nd = a.dim()
    if len(dims) != nd:
        raise RuntimeError(f"permute(): number of dims don't match: the tensor has {nd} "
                           f"dims, got {len(dims)}")
    dims = [_dim(d, nd, "permute()") for d in dims]
    if sorted(dims) != list(range(nd)):
        raise RuntimeError(f"permute(): repeated dim in {tuple(dims)}")
    if dims == list(range(nd)):
        return a
    s = a.sparse_dim()
    if sorted(dims[:s]) != list(range(s)):
        raise RuntimeError(f"permute(): a SparseFillTensor cannot move dims between its "
                           f"{s} sparse and {nd - s} dense dims, got dims {tuple(dims)}")
    p = _parts(a)
    indices, values = p.indices, p.values
    if dims[:s] != list(range(s)):
        indices = indices[dims[:s]]
        indices, values = _sort(indices, values, [p.size[d] for d in dims])
    if dims[s:] != list(range(s, nd)):
        values = values.permute([0] + [d - s + 1 for d in dims[s:]])
    size = tuple(p.size[d] for d in dims)
    return _finish(_Parts(indices, values, p.F.permute(dims), size, p.layout), a)


def transpose(input, dim0, dim1):
    """Swap two dims (both sparse or both dense). A CSR tensor's transpose is
    CSR again (its pattern re-sorted into rows, O(nse)).

    Example::

        >>> A = sf.sparse_coo_tensor([[0], [2]], [1.], (2, 3), fill_value=4.)
        >>> A.t().shape
        torch.Size([3, 2])
    """
    a = _sft(input, "transpose")
    nd = a.dim()
    d0, d1 = _dim(dim0, nd, "transpose()"), _dim(dim1, nd, "transpose()")
    dims = list(range(nd))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    s = a.sparse_dim()
    if (d0 < s) != (d1 < s):
        raise RuntimeError(f"transpose(): cannot swap sparse dim {min(d0, d1)} with dense "
                           f"dim {max(d0, d1)} of a SparseFillTensor ({s} sparse dims)")
    return permute(a, dims)


def t(input):
    """Transpose of a tensor with at most 2 dims (like torch.t)."""
    a = _sft(input, "t")
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
    a = _sft(input, "unsqueeze")
    d = _dim(dim, a.dim(), "unsqueeze()", extra=1)
    p = _parts(a)
    s = p.sparse_dim
    size = p.size[:d] + (1,) + p.size[d:]
    if d <= s:
        zero = p.indices.new_zeros((1, p.indices.shape[1]))
        indices = torch.cat([p.indices[:d], zero, p.indices[d:]])
        return _finish(_Parts(indices, p.values, p.F.unsqueeze(d), size, p.layout), a)
    return _finish(_Parts(p.indices, p.values.unsqueeze(d - s + 1), p.F.unsqueeze(d), size,
                          p.layout), a)


def squeeze(input, dim=None):
    """Remove dims of size 1 (all, or those named by `dim`, an int or a tuple).
    Squeezing every sparse dim leaves a COO tensor with sparse_dim 0."""
    a = _sft(input, "squeeze")
    nd = a.dim()
    if dim is None:
        dims = [d for d in range(nd) if a.shape[d] == 1]
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        dims = sorted({_dim(d, nd, "squeeze()") for d in dims})
        dims = [d for d in dims if a.shape[d] == 1]
    if not dims:
        return a
    p = _parts(a)
    s = p.sparse_dim
    keep = [d for d in range(s) if d not in dims]
    dense_drop = tuple(d - s + 1 for d in dims if d >= s)
    values = p.values.squeeze(dense_drop) if dense_drop else p.values
    size = tuple(p.size[d] for d in range(nd) if d not in dims)
    F = p.F.squeeze(tuple(dims))
    return _finish(_Parts(p.indices[keep], values, F, size, p.layout), a)


# ---- reshape, view, flatten, expand, contiguous ----------------------------------

def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        shape = tuple(shape[0])
    return tuple(_int(s, "reshape()") for s in shape)


def _infer(shape, numel, what):
    if sum(1 for s in shape if s == -1) > 1:
        raise RuntimeError(f"{what}: only one dimension can be inferred")
    if any(s < -1 for s in shape):
        raise RuntimeError(f"{what}: invalid shape dimension in {shape}")
    known = _prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"{what}: shape '{list(shape)}' is invalid for input of size "
                               f"{numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    if _prod(shape) != numel:
        raise RuntimeError(f"{what}: shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


def reshape(input, *shape):
    """Reshape where the result stays sparse: either the sparse dims are
    reshaped among themselves (the dense part unchanged; a per-slice fill is
    refused) or the dense dims among themselves (the sparse dims unchanged).
    A reshape that would merge sparse with dense dims raises
    NotImplementedError.

    Example::

        >>> A = sf.sparse_coo_tensor([[1], [2]], [1.], (2, 3), fill_value=4.)
        >>> A.reshape(6).to_dense()
        tensor([4., 4., 4., 4., 4., 1.])
    """
    a = _sft(input, "reshape")
    shape = _infer(_shape_arg(shape), a.numel(), "reshape()")
    if shape == tuple(a.shape):
        return a
    s, dd = a.sparse_dim(), a.dense_dim()
    dense = tuple(a.shape[s:])
    sparse = tuple(a.shape[:s])
    p = _parts(a)
    new_s = len(shape) - dd
    if new_s >= 0 and shape[new_s:] == dense and _prod(shape[:new_s]) == _prod(sparse):
        if any(x != 1 for x in p.F.shape[:s]):
            raise NotImplementedError(
                f"reshape(): reshaping the sparse dims of a tensor with a per-slice fill of "
                f"shape {tuple(a._sf_fill.shape)} is not supported; call .to_dense() first")
        if s == 1 and new_s == 1:
            indices = p.indices
        else:
            linear = _ops.coo_linearize(p.indices, list(sparse)) if s else \
                p.indices.new_zeros(p.indices.shape[1])
            indices = _ops.coo_delinearize(linear, list(shape[:new_s]))
        F = p.F.reshape((1,) * new_s + tuple(p.F.shape[s:]))
        return _finish(_Parts(indices, p.values, F, shape, p.layout), a)
    if shape[:s] == sparse and _prod(shape[s:]) == _prod(dense):
        new_dense = shape[s:]
        values = p.values.reshape((p.values.shape[0],) + new_dense)
        F = p.F.expand(tuple(p.F.shape[:s]) + dense).reshape(tuple(p.F.shape[:s]) + new_dense)
        return _finish(_Parts(p.indices, values, F, shape, p.layout), a)
    raise NotImplementedError(
        f"reshape(): a SparseFillTensor of size {tuple(a.shape)} ({s} sparse, {dd} dense dims) "
        f"can be reshaped among its sparse dims or among its dense dims, not to {list(shape)}, "
        f"which mixes them; call .to_dense() first")


def view(input, *shape):
    """Like :func:`reshape`. The result is a copy, not a view (RFC.md 11.5)."""
    if len(shape) == 1 and isinstance(shape[0], torch.dtype):
        raise NotImplementedError("view(dtype) is not supported on SparseFillTensor")
    return reshape(input, *shape)


def flatten(input, start_dim=0, end_dim=-1):
    """Flatten dims start_dim..end_dim (a reshape; see :func:`reshape`)."""
    a = _sft(input, "flatten")
    nd = a.dim()
    if nd == 0:
        return reshape(a, 1)
    sd, ed = _dim(start_dim, nd, "flatten()"), _dim(end_dim, nd, "flatten()")
    if sd > ed:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = tuple(a.shape[:sd]) + (_prod(a.shape[sd:ed + 1]),) + tuple(a.shape[ed + 1:])
    return reshape(a, shape)


def expand(input, *sizes, implicit=False):
    """Expand dense dims of size 1 (``values`` becomes an expanded view, which
    torch refuses to write into in place). Expanding a sparse dim or adding
    dims is refused: it would store a copy of every stored element per new
    position.

    Example::

        >>> A = sf.sparse_coo_tensor([[1]], [[2.]], (3, 1), fill_value=7.)
        >>> A.expand(3, 2).to_dense()
        tensor([[7., 7.],
                [2., 2.],
                [7., 7.]])
    """
    a = _sft(input, "expand")
    sizes = _shape_arg(sizes)
    nd, s = a.dim(), a.sparse_dim()
    if len(sizes) != nd:
        raise NotImplementedError(
            f"expand(): adding dims to a SparseFillTensor is not supported (size "
            f"{tuple(a.shape)} to {list(sizes)})")
    new = list(a.shape)
    for d, n in enumerate(sizes):
        if n == -1 or n == a.shape[d]:
            continue
        if d < s:
            raise NotImplementedError(
                f"expand(): sparse dim {d} of size {a.shape[d]} cannot be expanded to {n}; only "
                f"dense dims expand")
        if a.shape[d] != 1:
            raise RuntimeError(f"expand(): the expanded size of the tensor ({n}) must match the "
                               f"existing size ({a.shape[d]}) at non-singleton dimension {d}")
        new[d] = n
    if new == list(a.shape):
        return a
    p = _parts(a)
    values = p.values.expand((p.values.shape[0],) + tuple(new[s:]))
    # An expanded values tensor may stay a view: torch refuses in-place
    # writes into it. The fill is copied.
    return _finish(_Parts(p.indices, values, p.F, new, p.layout), a, values_view=True)


def _expand_as(input, other):
    return expand(input, tuple(other.shape))


def contiguous(input, memory_format=torch.contiguous_format):
    """The tensor itself (a sparse tensor has no memory layout to change)."""
    return input


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
    p = _parts(a)
    size = p.size[:d] + (length,) + p.size[d + 1:]
    F = _fill_index(p.F, d, lambda f: f[(slice(None),) * d + (slice(start, stop, step),)])
    if d >= s:
        values = p.values[(slice(None),) * (d - s + 1) + (slice(start, stop, step),)]
        return _finish(_Parts(p.indices, values, F, size, p.layout), a)
    c = p.indices[d]
    keep = (c >= start) & (c < start + step * length)
    if step != 1:
        keep &= (c - start) % step == 0
    keep = keep.nonzero().view(-1)
    indices = p.indices.index_select(1, keep)
    # A monotone map of one coordinate keeps row-major order: no re-sort.
    indices[d] = (indices[d] - start) // step
    return _finish(_Parts(indices, p.values.index_select(0, keep), F, size, p.layout), a)


def _csr_rows(a: SparseFillTensor, start: int, length: int):
    """Rows start..start+length of a CSR tensor: O(length + their elements),
    nothing proportional to the other rows (col is shared: indices are never
    written in place)."""
    crow = a._sf_crow[start: start + length + 1]
    lo, hi = int(crow[0]), int(crow[-1])
    F = _full_fill(a)
    F = _fill_index(F, 0, lambda f: f[start: start + length])
    size = (length,) + a._sf_size[1:]
    return SparseFillTensor(torch.sparse_csr, size, a._sf_values[lo:hi].clone(),
                            _own(_stored_fill(F, 2), (a,)), crow=crow - lo,
                            col=a._sf_col[lo:hi])


def _csr_index_rows(a: SparseFillTensor, index: torch.Tensor):
    """Rows `index` (in range, any order, repeats allowed) of a CSR tensor, in
    O(len(index) + elements of those rows)."""
    crow = a._sf_crow
    begin = crow.index_select(0, index)
    lengths = crow.index_select(0, index + 1) - begin
    new_crow = torch.cat([lengths.new_zeros(1), lengths.cumsum(0)])
    total = int(new_crow[-1])
    src = torch.repeat_interleave(begin - new_crow[:-1], lengths, output_size=total) + \
        torch.arange(total, device=crow.device)
    F = _fill_index(_full_fill(a), 0, lambda f: f.index_select(0, index))
    size = (index.numel(),) + a._sf_size[1:]
    return SparseFillTensor(torch.sparse_csr, size, a._sf_values.index_select(0, src),
                            _own(_stored_fill(F, 2), (a,)), crow=new_crow,
                            col=a._sf_col.index_select(0, src))


def narrow(input, dim, start, length):
    """``length`` elements of dim `dim` from `start`: CSR rows in O(rows + their
    elements), other sparse dims in O(nse).

    Example::

        >>> A = sf.sparse_coo_tensor([[1, 3]], [1., 2.], (4,), fill_value=9.)
        >>> A.narrow(0, 1, 2).to_dense()
        tensor([1., 9.])
    """
    a = _sft(input, "narrow")
    d = _dim(dim, a.dim(), "narrow()")
    n = a.shape[d]
    start, length = _int(start, "narrow()"), _int(length, "narrow()")
    if start < 0:
        start += n
    if not 0 <= start <= n:
        raise IndexError(f"narrow(): start ({start}) is out of bounds for dim {d} of size {n}")
    if length < 0 or start + length > n:
        raise RuntimeError(f"narrow(): start ({start}) + length ({length}) exceeds dimension "
                           f"size ({n}).")
    return _slice(a, d, start, start + length, 1)


def _select(a: SparseFillTensor, d: int, i: int):
    n = a.shape[d]
    if not -n <= i < n:
        raise IndexError(f"select(): index {i} out of range for tensor of size "
                         f"{tuple(a.shape)} at dimension {d}")
    i %= n
    s = a.sparse_dim()
    if a.layout == torch.sparse_csr and d == 0:
        lo, hi = int(a._sf_crow[i]), int(a._sf_crow[i + 1])
        indices = a._sf_col[lo:hi].unsqueeze(0)
        values, F = a._sf_values[lo:hi], _full_fill(a)
    else:
        p = _parts(a)
        indices, values, F = p.indices, p.values, p.F
        if d < s:
            keep = (indices[d] == i).nonzero().view(-1)
            indices = torch.cat([indices[:d], indices[d + 1:]]).index_select(1, keep)
            values = values.index_select(0, keep)
        else:
            values = values.select(d - s + 1, i)
    F = F.select(d, 0 if F.shape[d] == 1 else i)
    size = a._sf_size[:d] + a._sf_size[d + 1:]
    out = _Parts(indices, values, F, size, a.layout)
    return _strided(out) if out.sparse_dim == 0 and s > 0 and d < s else _finish(out, a)


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
    a = _sft(input, "select")
    return _select(a, _dim(dim, a.dim(), "select()"), _int(index, "select()"))


def unbind(input, dim=0):
    """All slices along `dim` as a tuple (also what ``for row in A`` uses):
    one :func:`select` each, so O(nse) per slice except for CSR rows."""
    a = _sft(input, "unbind")
    d = _dim(dim, a.dim(), "unbind()")
    return tuple(_select(a, d, i) for i in range(a.shape[d]))


def split(input, split_size_or_sections, dim=0):
    """Pieces of `split_size` along `dim` (the last may be smaller), or of the
    listed sizes, as torch.split; each is a :func:`narrow`.

    Example::

        >>> A = sf.sparse_coo_tensor([[1, 3]], [1., 2.], (5,), fill_value=9.)
        >>> [p.to_dense() for p in A.split(2)]
        [tensor([9., 1.]), tensor([9., 2.]), tensor([9.])]
    """
    a = _sft(input, "split")
    d = _dim(dim, a.dim(), "split()")
    n = a.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sizes = [_int(x, "split()") for x in split_size_or_sections]
        if sum(sizes) != n or any(x < 0 for x in sizes):
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {d}), but got "
                               f"split_sizes={sizes}")
    else:
        size = _int(split_size_or_sections, "split()")
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
    a = _sft(input, "chunk")
    chunks = _int(chunks, "chunk()")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = a.shape[_dim(dim, a.dim(), "chunk()")]
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
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= n):
        bad = index[(index < 0) | (index >= n)][0]
        raise IndexError(f"{what}: index {int(bad)} is out of bounds for a dim of size {n}")
    return index.to(device)  # a CPU index tensor may select from a CUDA tensor


def _index_select(a: SparseFillTensor, d: int, index: torch.Tensor):
    s = a.sparse_dim()
    if a.layout == torch.sparse_csr and d == 0:
        return _csr_index_rows(a, index)
    p = _parts(a)
    size = p.size[:d] + (index.numel(),) + p.size[d + 1:]
    F = _fill_index(p.F, d, lambda f: f.index_select(d, index))
    if d >= s:
        values = p.values.index_select(d - s + 1, index)
        return _finish(_Parts(p.indices, values, F, size, p.layout), a)
    c = p.indices[d]
    arange = torch.arange
    if d == 0:
        # Coalesced order sorts the elements by their first coordinate: a
        # binary search finds each selected coordinate's run, and taking the
        # runs in turn is already the result's order. O(k log nse + result).
        begin = torch.searchsorted(c, index)
        taken = torch.searchsorted(c, index, right=True) - begin
        total = int(taken.sum())
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
        total = int(copies.sum())
        slot = torch.repeat_interleave(arange(kept.numel(), device=c.device), copies,
                                       output_size=total)
        src = kept.index_select(0, slot)
        within = arange(total, device=c.device) - (copies.cumsum(0) - copies).index_select(0, slot)
        j = by_value.index_select(0, first.index_select(0, c.index_select(0, src)) + within)
    indices = p.indices.index_select(1, src)
    indices[d] = j
    values = p.values.index_select(0, src)
    # A non-decreasing index maps coordinates monotonically (copies of one
    # element come out in increasing j), so the result is already sorted.
    if d > 0 and not bool((index[1:] >= index[:-1]).all()):
        indices, values = _sort(indices, values, size)
    return _finish(_Parts(indices, values, F, size, p.layout), a)


def index_select(input, dim, index):
    """Elements at positions `index` (1-D integer tensor) along `dim`. On CSR
    rows: O(len(index) + elements of the selected rows); COO's first dim:
    O(len(index) log nse + result); other sparse dims: O(nse + size of the
    dim + result). Unspecified selected elements keep
    the fill (and send it their gradient).

    Example::

        >>> A = sf.sparse_coo_tensor([[1, 3]], [1., 2.], (4,), fill_value=9.)
        >>> A.index_select(0, torch.tensor([3, 0, 3])).to_dense()
        tensor([2., 9., 2.])
    """
    a = _sft(input, "index_select")
    d = _dim(dim, a.dim(), "index_select()")
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
    a = _sft(input, "__getitem__")
    items = index if isinstance(index, tuple) else (index,)
    if any(isinstance(x, bool) for x in items):
        raise NotImplementedError("A[True]/A[False] is not supported on SparseFillTensor")
    if sum(1 for x in items if x is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    tensors = [k for k, x in enumerate(items) if _is_index_tensor(x)]
    if len(tensors) > 1:
        raise NotImplementedError("indexing a SparseFillTensor with more than one index tensor "
                                  "is not supported; index one dim at a time")
    consuming = [x for x in items if x is not None and x is not Ellipsis]
    if len(consuming) > a.dim():
        raise IndexError(f"too many indices for tensor of dimension {a.dim()}")
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
            cur = _select(cur, d, _int(x, "__getitem__"))
        elif isinstance(x, slice):
            step = 1 if x.step is None else _int(x.step, "__getitem__")
            if step <= 0:
                raise ValueError("step must be greater than zero")
            start = None if x.start is None else _int(x.start, "__getitem__")
            stop = None if x.stop is None else _int(x.stop, "__getitem__")
            cur, d = _slice(cur, d, start, stop, step), d + 1
        elif _is_index_tensor(x):
            idx = _index_arg(x, cur.shape[d], "__getitem__", wrap=True, device=cur.device)
            cur, d = _index_select(cur, d, idx), d + 1
        else:
            raise TypeError(f"SparseFillTensor indices must be ints, slices, None, Ellipsis or "
                            f"an index tensor, got {type(x).__name__}")
    return cur


# ---- cat and stack -------------------------------------------------------------------

def _same(x: torch.Tensor, y: torch.Tensor) -> bool:
    if x.shape != y.shape:
        return False
    return bool(((x == y) | (x.isnan() & y.isnan())).all())


def _cat_fill(fulls, sources, sizes, d):
    """The fill of cat(tensors, d): one of them when all are the same tensor,
    or equal and not requiring grad; otherwise the fills expanded along d and
    concatenated (a per-slice fill when d is sparse), which keeps each
    input's fill gradient separate."""
    shape = list(torch.broadcast_shapes(*[tuple(f.shape[i] if i != d else 1
                                                for i in range(f.dim())) for f in fulls]))
    if all(f.shape[d] == 1 for f in fulls):
        first = fulls[0].expand(shape)
        if all(f is sources[0] for f in sources) or (
                not any(f.requires_grad for f in fulls) and
                all(_same(f.expand(shape), first) for f in fulls[1:])):
            return fulls[0] if list(fulls[0].shape) == shape else first.contiguous()
    parts = []
    for f, n in zip(fulls, sizes):
        target = list(shape)
        target[d] = n
        parts.append(f.expand(target))
    return torch.cat(parts, d)


def _union_values(ps, s):
    """Values of each of ps on the union of their patterns (unspecified
    positions take that tensor's fill there) and the union's indices."""
    sparse = list(ps[0].size[:s])
    if s == 0:
        linears = [p.indices.new_zeros(p.indices.shape[1]) for p in ps]
    else:
        linears = [_ops.coo_linearize(p.indices, sparse) for p in ps]
    union = torch.unique(torch.cat(linears))  # sorted
    if s == 0:
        indices = union.new_zeros((0, union.numel()))
    else:
        indices = _ops.coo_delinearize(union, sparse)
    out = []
    for p, lin in zip(ps, linears):
        src = torch.full((union.numel(),), -1, dtype=torch.int64, device=union.device)
        src[torch.searchsorted(union, lin)] = torch.arange(lin.numel(), device=lin.device)
        if all(x == 1 for x in p.F.shape[:s]):
            dense_fill = p.F.reshape(p.F.shape[s:])
            out.append(_ops.gather_with_fill(p.values, dense_fill, src))
        else:  # per-slice fill: the fill at each union position
            at = tuple(indices[k] if p.F.shape[k] > 1 else torch.zeros_like(indices[k])
                       for k in range(s))
            fill_rows = p.F[at].expand((union.numel(),) + tuple(p.dense_shape))
            taken = p.values.index_select(0, src.clamp(min=0))
            mask = (src >= 0).view((-1,) + (1,) * len(p.dense_shape))
            out.append(torch.where(mask, taken, fill_rows))
    return indices, out


def cat(tensors, dim=0):
    """Concatenate SparseFillTensors along `dim`. Equal fills stay one fill;
    different fills become a per-slice fill varying along `dim` (RFC.md 11.4),
    so the result is never densified. The result has the first tensor's
    layout when it has two sparse dims, else COO.

    Example::

        >>> A = sf.full((2,), 1.)
        >>> B = sf.full((3,), 7.)
        >>> torch.cat([A, B]).to_dense()
        tensor([1., 1., 7., 7., 7.])
    """
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("cat(): expected a non-empty list of tensors")
    for x in tensors:
        if not isinstance(x, SparseFillTensor):
            raise TypeError(f"cat(): all tensors must be SparseFillTensors, got "
                            f"{type(x).__name__}; convert with .to_dense() or sf.to_sparse()")
    a = tensors[0]
    nd, s = a.dim(), a.sparse_dim()
    if nd == 0:
        raise RuntimeError("cat(): zero-dimensional tensor cannot be concatenated")
    d = _dim(dim, nd, "cat()")
    for k, x in enumerate(tensors[1:], 1):
        if x.dim() != nd or x.sparse_dim() != s:
            raise RuntimeError(f"cat(): tensor {k} has {x.sparse_dim()} sparse and "
                               f"{x.dense_dim()} dense dims, tensor 0 has {s} and {nd - s}")
        for i in range(nd):
            if i != d and x.shape[i] != a.shape[i]:
                raise RuntimeError(f"cat(): sizes of tensors must match except in dimension "
                                   f"{d}; tensor {k} has size {x.shape[i]} at dim {i}, "
                                   f"tensor 0 has {a.shape[i]}")
    dtype = a.dtype
    for x in tensors[1:]:
        dtype = torch.promote_types(dtype, x.dtype)
    if len(tensors) == 1:
        return a.to(dtype)
    ps = [_parts(x.to(dtype)) for x in tensors]
    sizes = [x.shape[d] for x in tensors]
    size = a._sf_size[:d] + (sum(sizes),) + a._sf_size[d + 1:]
    F = _cat_fill([p.F for p in ps], [x._sf_fill for x in tensors], sizes, d)
    layout = a.layout
    if d < s:
        pieces, offset = [], 0
        for p, n in zip(ps, sizes):
            idx = p.indices.clone()
            idx[d] += offset
            pieces.append(idx)
            offset += n
        indices = torch.cat(pieces, 1)
        values = torch.cat([p.values for p in ps])
        if d > 0:
            indices, values = _sort(indices, values, size)
        return _finish(_Parts(indices, values, F, size, layout), *tensors)
    indices, values = _union_values(ps, s)
    return _finish(_Parts(indices, torch.cat(values, d - s + 1), F, size, layout), *tensors)


def concatenate(tensors, axis=0):
    return cat(tensors, axis)


def stack(tensors, dim=0):
    """Stack SparseFillTensors along a new dim (unsqueeze each, then cat)."""
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack(): expected a non-empty list of tensors")
    for x in tensors:
        _sft(x, "stack")
        if x.shape != tensors[0].shape:
            raise RuntimeError(f"stack(): expects each tensor to be equal size, but got "
                               f"{tuple(tensors[0].shape)} and {tuple(x.shape)}")
    d = _dim(dim, tensors[0].dim(), "stack()", extra=1)
    return cat([unsqueeze(x, d) for x in tensors], d)


def dstack(tensors):
    """torch.dstack: 1-D (n,) becomes (1, n, 1), 2-D (m, n) becomes (m, n, 1),
    then cat along dim 2."""
    tensors = [_sft(x, "dstack") for x in tensors]
    shaped = []
    for x in tensors:
        if x.dim() == 1:
            x = unsqueeze(x, 0)
        if x.dim() == 2:
            x = unsqueeze(x, 2)
        shaped.append(x)
    return cat(shaped, 2)


def hstack(tensors):
    """torch.hstack: cat along dim 1, or dim 0 for 1-D tensors."""
    tensors = [_sft(x, "hstack") for x in tensors]
    return cat(tensors, 0 if tensors and tensors[0].dim() == 1 else 1)


def vstack(tensors):
    """torch.vstack: 1-D tensors become rows (1, n), then cat along dim 0."""
    tensors = [_sft(x, "vstack") for x in tensors]
    return cat([unsqueeze(x, 0) if x.dim() == 1 else x for x in tensors], 0)


# ---- routes ----------------------------------------------------------------------

_ROUTES = {
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
    T.narrow: narrow, torch.narrow: narrow,
    T.narrow_copy: narrow, torch.narrow_copy: narrow,  # results are copies anyway
    T.select: select, torch.select: select,
    T.index_select: index_select, torch.index_select: index_select,
    T.__getitem__: getitem,
    T.unbind: unbind, torch.unbind: unbind, T.split: split, torch.split: split,
    T.chunk: chunk,
    torch.chunk: chunk,
    torch.cat: cat, torch.concat: cat, torch.concatenate: concatenate,
    torch.stack: stack, torch.hstack: hstack, torch.vstack: vstack, torch.dstack: dstack,
}
_routing.METHODS.update(_ROUTES)
