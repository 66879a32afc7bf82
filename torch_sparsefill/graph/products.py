"""Semiring products of indefinite tensors (RFC.md#indefinite-fill):
``sf.mxm`` (matrix-matrix, matrix-vector, vector-matrix), with GraphBLAS's
mask, complement, replace and accum.

The result is present exactly where some k has both ``A[i, k]`` and
``B[k, j]`` present (and the mask allows (i, j)); its value is the monoid
over those k only of ``op(A[i, k], B[k, j])``.

A vector result (matrix-vector, vector-matrix) of float32, float64 or int64
operands with a named monoid and op, and no gradient tracked, takes the
native kernels (``torch.ops.sparsefill.semiring_mv``: rows pulled on torch's
threads; ``semiring_vm``: the vector's rows pushed; on CUDA a thread per
output, the CPU's results bit for bit); a mask then filters the result.
A structural mask's product takes one too (``semiring_masked``). Everything else,
and every product whose gradient is tracked, is torch ops over the
components, in chunks of rows (or of mask entries) so that the terms of
one chunk are bounded:
  - expansion (no mask, or a complemented one): every stored A[i, k] meets
    row k of B; a mask drops the terms it forbids before they are reduced;
  - a mask (not complemented) with fewer terms by dots: each allowed (i, j)
    walks row i of A and looks B[k, j] up, so the unmasked product is never
    formed (masked SpGEMM).

Example::

    >>> A = sf.to_sparse(torch.tensor([[0., 1.], [float('nan'), 0.]]), fill_value=sf.indefinite)
    >>> sf.mxm(A, torch.tensor([0., 5.]), "min_plus").values()
    tensor([0., 5.])
"""
from __future__ import annotations

import torch

from ..ops import common as _common
from ..tensor import FACTS, SparseFillTensor
from .ewise import ewise_add
from .operands import Entries, entries, lookup, result, result_csr, scalar_result
from . import operators as _operators
from .operators import NATIVE_MONOIDS, NATIVE_OPS, binary, monoid_dtype, segment_reduce

__all__ = ["mxm", "CHUNK_TERMS"]

# The most product terms one chunk forms (a chunk holds a few int64 and value
# tensors of this length).
CHUNK_TERMS = 1 << 23


def _crow(rows: torch.Tensor, n: int) -> torch.Tensor:
    count = torch.bincount(rows, minlength=n)
    return torch.cat([count.new_zeros(1), torch.cumsum(count, 0)])


def _spans(work: torch.Tensor):
    """Consecutive ranges [s, e) of the items whose `work` sums to at most
    CHUNK_TERMS each (an item heavier than that alone)."""
    n = work.shape[0]
    if n == 0:
        return []
    total = torch.cumsum(work, 0)
    if int(total[-1]) <= CHUNK_TERMS:
        return [(0, n)]
    spans, start = [], 0
    while start < n:
        base = int(total[start - 1]) if start else 0
        end = int(torch.searchsorted(total, base + CHUNK_TERMS, right=True))
        end = max(end, start + 1)
        spans.append((start, end))
        start = end
    return spans


def _expand(owner_work: torch.Tensor, owner_start: torch.Tensor):
    """For items with `owner_work` terms each, starting at `owner_start` in
    some other list: (item of each term, position of each term)."""
    total = int(owner_work.sum())
    item = torch.repeat_interleave(torch.arange(owner_work.shape[0],
                                                device=owner_work.device), owner_work,
                                   output_size=total)
    first = torch.cumsum(owner_work, 0) - owner_work
    pos = owner_start[item] + (torch.arange(total, device=owner_work.device) - first[item])
    return item, pos


def _by_expansion(a: Entries, b: Entries, monoid, fn, n, mask_keys, complement):
    ar, ak = a.rows(), a.cols()
    crow_b = _crow(b.rows(), b.size[0])
    bc = b.cols()
    work = (crow_b[1:] - crow_b[:-1])[ak]
    # Chunks end on row boundaries: an output (i, j) gets all its terms in one.
    crow_a = _crow(ar, a.size[0])
    row_work = torch.zeros(a.size[0], dtype=work.dtype, device=work.device).index_add_(
        0, ar, work)
    keys_out, vals_out = [], []
    for r0, r1 in _spans(row_work):
        e0, e1 = int(crow_a[r0]), int(crow_a[r1])
        item, eb = _expand(work[e0:e1], crow_b[ak[e0:e1]])
        ea = item + e0
        key = ar[ea] * n + bc[eb]
        if mask_keys is not None:
            found, _ = lookup(key, mask_keys)
            keep = (~found if complement else found).nonzero().squeeze(1)
            ea, eb, key = ea[keep], eb[keep], key[keep]
        counts = None
        if n == 1:  # terms ordered by row already
            uniq, inv, counts = torch.unique_consecutive(key, return_inverse=True,
                                                         return_counts=True)
        else:
            uniq, inv = torch.unique(key, return_inverse=True)
        terms = fn(a.values.index_select(0, ea), b.values.index_select(0, eb))
        keys_out.append(uniq)
        vals_out.append(segment_reduce(monoid, terms, inv, uniq.shape[0], ak.index_select(0, ea),
                                       counts))
    return keys_out, vals_out


def _by_dots(a: Entries, b: Entries, monoid, fn, n, mask_keys):
    ar, ak = a.rows(), a.cols()
    crow_a = _crow(ar, a.size[0])
    mr = torch.div(mask_keys, n, rounding_mode="floor")
    mc = mask_keys % n
    work = (crow_a[1:] - crow_a[:-1])[mr]
    keys_out, vals_out = [], []
    for s0, s1 in _spans(work):
        item, ea = _expand(work[s0:s1], crow_a[mr[s0:s1]])
        k = ak[ea]
        found, pos = lookup(k * b.ncols + mc[s0:s1][item], b.keys)
        keep = found.nonzero().squeeze(1)
        item, ea, pos, k = item[keep], ea[keep], pos[keep], k[keep]
        uniq, inv, counts = torch.unique_consecutive(item, return_inverse=True,
                                                     return_counts=True)
        terms = fn(a.values.index_select(0, ea), b.values.index_select(0, pos))
        keys_out.append(mask_keys[s0:s1][uniq])
        vals_out.append(segment_reduce(monoid, terms, inv, uniq.shape[0], k, counts))
    return keys_out, vals_out


def _by_rows(a: Entries, x: torch.Tensor, monoid, fn, mask_keys, complement):
    """A @ x for a strided vector x (every element present): one term per
    stored A[i, k], reduced along each row (already contiguous)."""
    ar, ak, values = a.rows(), a.cols(), a.values
    if mask_keys is not None:
        found, _ = lookup(ar, mask_keys)
        keep = (~found if complement else found).nonzero().squeeze(1)
        ar, ak, values = ar.index_select(0, keep), ak.index_select(0, keep), \
            values.index_select(0, keep)
    uniq, inv, counts = torch.unique_consecutive(ar, return_inverse=True, return_counts=True)
    terms = fn(values, x.index_select(0, ak))
    return [uniq], [segment_reduce(monoid, terms, inv, uniq.shape[0], ak, counts)]


def _mask_keys(mask, size, structural: bool):
    """The sorted keys a mask allows (before complement)."""
    m = entries(mask, "mxm: mask")
    if m.size != tuple(size):
        raise ValueError(f"mxm: mask has shape {m.size}, the result {tuple(size)}")
    if structural and isinstance(mask, SparseFillTensor):
        return m.keys
    return m.keys[m.values.ne(0).nonzero().squeeze(1)]


def mxm(A, B, semiring="plus_times", mask=None, complement=False, replace=False, accum=None,
        out=None, *, structural=True):
    """The semiring product ``A ⊕.⊗ B`` of indefinite (or strided) tensors;
    either may be 1-D (vector-matrix, matrix-vector; both: a scalar, or
    ``sf.indefinite`` when no term is present).

    Args:
        semiring: ``"<monoid>_<op>"`` (monoids plus times min max lor land any;
            ops as :data:`~torch_sparsefill.graph.operators.BINARY`), e.g.
            ``"min_plus"``, ``"plus_pair"``, ``"lor_land"``; or ``(monoid, op)``
            with a callable op. ``any`` takes the term of the smallest k.
        mask: an indefinite tensor of the result's shape: only the positions
            it stores are computed (``structural=False``: those whose stored
            value is nonzero; a strided mask is always by value);
            ``complement=True`` computes the others instead.
        accum, out, replace: GraphBLAS's ``C<M> = accum(C, T)`` into ``out``
            (an indefinite tensor, written in place and returned): where the
            mask allows, C becomes ``ewise_add(C, T, accum)`` (T alone without
            accum); elsewhere C keeps its elements, or loses them with
            ``replace=True``.

    Differentiable with respect to both operands' values for every monoid but
    any/lor/land (min and max send the gradient to the terms that attain
    them, split among ties as torch.amin splits it).

    Example::

        >>> A = sf.to_sparse(torch.tensor([[1., 2.], [float('nan'), 3.]]),
        ...                  fill_value=sf.indefinite)
        >>> sf.mxm(A, A, "min_plus").to_dense(fill=float('inf'))
        tensor([[2., 3.],
                [inf, 6.]])
    """
    monoid, op = _operators.semiring(semiring)
    fn = binary(op)
    if mask is not None and out is None and not complement and structural:
        native = _native_masked(A, B, mask, monoid, op, fn)
        if native is not None:
            return native
    native = _native_vector(A, B, monoid, op, fn)
    if native is not None:
        if (complement or replace) and mask is None:
            raise ValueError("mxm: complement and replace need a mask")
        size, keys, vals = native
        mask_keys = None if mask is None else _mask_keys(mask, size, structural)
        if mask_keys is not None:
            found, _ = lookup(keys, mask_keys)
            keep = (found ^ complement).nonzero().squeeze(1)
            keys, vals = keys.index_select(0, keep), vals.index_select(0, keep)
        return _finish(result(size, keys, vals), out, mask_keys, complement, replace, accum)
    a, b = entries(A, "mxm: A"), entries(B, "mxm: B")
    vec_a, vec_b = len(a.size) == 1, len(b.size) == 1
    if vec_a:
        a = Entries((1, a.size[0]), a.keys, a.values, a.layout)
    if vec_b:
        b = Entries((b.size[0], 1), b.keys, b.values, b.layout)
    if a.size[1] != b.size[0]:
        raise ValueError(f"mxm: inner dimensions differ: A {tuple(A.shape)}, B {tuple(B.shape)}")
    m, n = a.size[0], b.size[1]
    size = ((m,) if not vec_a else ()) + ((n,) if not vec_b else ())
    if (complement or replace) and mask is None:
        raise ValueError("mxm: complement and replace need a mask")
    mask_keys = None if mask is None else _mask_keys(mask, size, structural)
    if not size:  # a dot product: one output, no mask possible
        if mask is not None:
            raise ValueError("mxm: a scalar result takes no mask")
    if vec_b and isinstance(B, torch.Tensor) and not isinstance(B, SparseFillTensor):
        keys, vals = _by_rows(a, B, monoid, fn, mask_keys, complement)
    elif mask_keys is not None and not complement and _dots_cheaper(
            _crow(a.rows(), m), a.cols(), _crow(b.rows(), b.size[0]),
            _crow(torch.div(mask_keys, n, rounding_mode="floor"), m)):
        keys, vals = _by_dots(a, b, monoid, fn, n, mask_keys)
    else:
        keys, vals = _by_expansion(a, b, monoid, fn, n, mask_keys, complement)
    keys = torch.cat(keys) if keys else a.keys.new_zeros(0)
    vals = torch.cat(vals) if vals else _empty_values(a, b, monoid, fn)
    if not size:
        if out is not None or accum is not None:
            raise ValueError("mxm: a scalar result takes no out or accum")
        return scalar_result(vals)
    T = result(size, keys, vals, a.layout if not vec_a else torch.sparse_coo)
    return _finish(T, out, mask_keys, complement, replace, accum)


def _finish(T, out, mask_keys, complement, replace, accum):
    """The product T, or T folded into `out` (GraphBLAS's C<M> = accum(C, T))."""
    if out is None:
        if accum is not None:
            raise ValueError("mxm: accum folds the result into out: give out")
        return T
    return _write(out, T, mask_keys, complement, replace, accum)


# The element types of the C semiring kernels (sparsefill_core.h).
_NATIVE_DTYPES = (torch.float32, torch.float64, torch.int64)
# The devices with a native kernel: the CPU always; CUDA where this build
# registered the CUDA kernels (a CPU-only build beside a CUDA torch keeps the
# torch route on the GPU rather than failing in the dispatcher).
_NATIVE_DEVICES = ("cpu",) + (("cuda",) if torch._C._dispatch_has_kernel_for_dispatch_key(
    "sparsefill::semiring_mv", "CUDA") else ())


def _csr_of(M):
    """(crow, col, values) of an indefinite 2-D operand of a native dtype on
    a native device, or None (the torch route takes it: a strided matrix,
    another device, dense or batch dims)."""
    if not _native_matrix(M):
        return None
    if M.layout != torch.sparse_csr:
        M = M.to_sparse_csr()
    return M._sf_crow, M._sf_col, M._sf_values


def _native_matrix(M) -> bool:
    return (isinstance(M, SparseFillTensor) and M.is_indefinite() and M.dim() == 2
            and not M.dense_dim() and not M._batch_dim()
            and M.device.type in _NATIVE_DEVICES and M.dtype in _NATIVE_DTYPES)


def _csr_of_transposed(M):
    """(crow, col, values) of M^T as _csr_of gives M's: a CSC M's own
    components, else M's CSR transposed (a counting sort)."""
    if not _native_matrix(M):
        return None
    if M.layout == torch.sparse_csc:
        return M._sf_crow, M._sf_col, M._sf_values
    crow, col, values = _csr_of(M)
    crow_t, col_t, perm = torch.ops.sparsefill.csr_transpose(crow, col, M.shape[1])
    return crow_t, col_t, values.index_select(0, perm)


def _vector_of(v, n: int):
    """(keys, values) of a 1-D operand of n elements, a native dtype and a
    native device (a strided vector: every key), or None."""
    if isinstance(v, SparseFillTensor):
        if not (v.is_indefinite() and v.dim() == 1 and not v.dense_dim()
                and v.device.type in _NATIVE_DEVICES and v.shape[0] == n):
            return None
        e = entries(v, "mxm: vector")
        return e.keys, e.values
    if isinstance(v, torch.Tensor) and v.layout == torch.strided and v.dim() == 1 \
            and v.device.type in _NATIVE_DEVICES and v.shape[0] == n:
        return None if v.dtype not in _NATIVE_DTYPES else (None, v)
    return None


def _native_codes(monoid, op, fn, values_a, values_b):
    """(result dtype, monoid code, op code) when a C kernel computes what
    torch computes on these values, or None: a named op and monoid with C
    twins, no gradient tracked (the torch route differentiates; the kernels
    have no derivative), terms in the operands' dtype or bool (an integer
    div is a float in torch)."""
    if not (isinstance(op, str) and op in NATIVE_OPS and monoid in NATIVE_MONOIDS):
        return None
    if not _common.untracked(values_a, values_b):
        return None
    term = fn(values_a[:0], values_b[:0]).dtype
    if term not in (values_a.dtype, torch.bool):
        return None
    return monoid_dtype(monoid, term), NATIVE_MONOIDS[monoid], NATIVE_OPS[op]


def _native_masked(A, B, mask, monoid, op, fn):
    """The masked product C<M> = A B (structural mask, no complement, no
    out) by the native kernel, by dots or by rows as _dots_cheaper says, as
    CSR, or None where the torch route serves
    (see _native_codes; the first operand COO, whose result is COO; a mask
    that is not an indefinite matrix of the result's shape; shapes that do
    not match, which the torch route names)."""
    if not (isinstance(A, torch.Tensor) and isinstance(B, torch.Tensor)
            and A.dim() == 2 and B.dim() == 2 and A.dtype == B.dtype
            and A.device == B.device and A.shape[1] == B.shape[0]
            and A.layout != torch.sparse_coo):
        return None
    size = (A.shape[0], B.shape[1])
    if not (isinstance(mask, SparseFillTensor) and mask.is_indefinite()
            and tuple(mask.shape) == size and not mask.dense_dim() and not mask._batch_dim()
            and mask.device == A.device):
        return None
    a, b = _csr_of(A), _csr_of(B)
    if a is None or b is None:
        return None
    codes = _native_codes(monoid, op, fn, a[2], b[2])
    if codes is None:
        return None
    dtype, *codes = codes
    M = mask if mask.layout == torch.sparse_csr else mask.to_sparse_csr()
    crow_m, col_m = M._sf_crow, M._sf_col  # the pattern only: structural
    by_dots = _dots_cheaper(a[0], a[1], b[0], crow_m)
    if by_dots:  # each (i, j) walks column j of B: B^T's rows
        b = _csr_of_transposed(B)
    crow, col, values = torch.ops.sparsefill.semiring_masked(crow_m, col_m, *a, *b, size[1],
                                                             *codes, by_dots)
    return result_csr(size, crow, col, values.to(dtype))


def _native_vector(A, B, monoid, op, fn):
    """(size, keys, values) of a matrix-vector or vector-matrix product by
    the native kernels, or None where the torch route serves: a tracked gradient
    (the torch route differentiates; the kernels have no derivative), an op
    or monoid without a C twin, operands of two dtypes or another dtype, a
    shape mismatch (the torch route names it), a dot product or a matrix
    result."""
    if not (isinstance(A, torch.Tensor) and isinstance(B, torch.Tensor)):
        return None
    if (A.dim() == 1) == (B.dim() == 1) or A.dtype != B.dtype or A.device != B.device:
        return None
    matrix, vector = (A, B) if B.dim() == 1 else (B, A)
    csr = _csr_of(matrix)
    if csr is None:
        return None
    crow, col, values = csr
    m, n = matrix.shape
    v = _vector_of(vector, n if vector is B else m)
    if v is None:
        return None
    keys, vvals = v
    codes = _native_codes(monoid, op, fn, values, vvals)
    if codes is None:
        return None
    dtype, *codes = codes
    if vector is B:  # A (op) x: rows pulled; a sparse x as a dense one and its presence
        x, present = vvals, None
        if keys is not None:
            x = vvals.new_zeros(n).index_copy_(0, keys, vvals)
            present = torch.zeros(n, dtype=torch.bool, device=x.device).index_fill_(0, keys, True)
        acc, arg = torch.ops.sparsefill.semiring_mv(crow, col, values, x, present, *codes)
        size = (m,)
    else:  # u (op) A: u's rows of A pushed
        if keys is None:
            keys = torch.arange(m, device=values.device)
        acc, arg = torch.ops.sparsefill.semiring_vm(crow, col, values, keys, vvals, n, *codes)
        size = (n,)
    present_keys = (arg >= 0).nonzero().squeeze(1)
    return size, present_keys, acc.index_select(0, present_keys).to(dtype)


def _dots_cheaper(crow_a, col_a, crow_b, crow_m) -> bool:
    """Whether a masked product forms fewer terms by dots (each element of
    the mask, row pointers crow_m, walks row i of A) than by expansion (each
    A[i, k] meets row k of B): the choice of both routes, torch's and C's."""
    dots = int(((crow_a[1:] - crow_a[:-1]) * (crow_m[1:] - crow_m[:-1])).sum())
    expansion = int((crow_b[1:] - crow_b[:-1]).index_select(0, col_a).sum())
    return dots < expansion


def _empty_values(a, b, monoid, fn):
    t = fn(a.values[:0], b.values[:0])
    return t.new_zeros(0, dtype=monoid_dtype(monoid, t.dtype))


def _write(out, T, mask_keys, complement, replace, accum):
    """GraphBLAS's C<M, replace> = accum(C, T), written into `out`."""
    if not (isinstance(out, SparseFillTensor) and out.is_indefinite()):
        raise TypeError("mxm: out must be an indefinite SparseFillTensor")
    if tuple(out.shape) != tuple(T.shape):
        raise ValueError(f"mxm: out has shape {tuple(out.shape)}, the result {tuple(T.shape)}")
    Z = T if accum is None else ewise_add(out, T, accum)
    if mask_keys is not None:
        z, c = entries(Z, "mxm: result"), entries(out, "mxm: out")
        z_in, _ = lookup(z.keys, mask_keys)
        keep_z = (z_in ^ complement).nonzero().squeeze(1)
        keys, vals = z.keys[keep_z], z.values[keep_z]
        if not replace:  # C keeps what the mask does not allow
            c_in, _ = lookup(c.keys, mask_keys)
            keep_c = (~(c_in ^ complement)).nonzero().squeeze(1)
            keys = torch.cat([keys, c.keys[keep_c]])
            vals = torch.cat([vals.to(out.dtype), c.values[keep_c].to(out.dtype)])
            keys, order = torch.sort(keys)
            vals = vals[order]
        Z = result(T.shape, keys, vals.to(out.dtype), out.layout)
    new = Z.to(out.dtype)
    new = new.to_sparse(layout=out.layout) if out.layout != new.layout else new
    for name in FACTS:  # in place: out's wrapper keeps its size, dtype and layout
        setattr(out, name, getattr(new, name))
    return out
