"""Matrix products of SparseFillTensors (RFC.md#products).

Routes torch.mm, torch.matmul / ``@``, torch.addmm, torch.mv, torch.bmm,
torch.sparse.addmm and their Tensor methods (torch.sparse.mm, with its
reduce=, is sparse_mm.py's) to the fill-aware product ops (``torch.ops.sparsefill.spmm``, ``spgemm``, ...). A
product with a non-zero fill is dense in general, so its result is strided;
two fill-0 sparse operands give a sparse fill-0 result, as in torch. COO
operands are read through a CSR view of the same values (cached on the
tensor), never through a dense copy.

Example::

    >>> A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [3., 4.], (2, 2), fill_value=1.)
    >>> A @ torch.eye(2)
    tensor([[1., 3.],
            [4., 1.]])
"""
from __future__ import annotations

import itertools

import math

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ... import _C
from ..opmath import HALF, PRODUCTS, in_opmath
from ...tensor import args as _args
from ...tensor import fill as _fill
from ...creation.full import to_sparse
from ...tensor import SparseFillTensor, build, is_plain

_ops = torch.ops.sparsefill
T = torch.Tensor

__all__: list = []


# ---- operands ---------------------------------------------------------------------

def _as_operand(x, func):
    """A SparseFillTensor, a strided tensor, or an error. Native torch sparse
    tensors are read with fill 0, which is what torch assumes for them."""
    if isinstance(x, SparseFillTensor):
        if x.dense_dim() > 0:
            _check_matrix(x, func, "an operand")
        return x
    if isinstance(x, torch.Tensor):
        if x.layout in (torch.sparse_coo, torch.sparse_csr):
            return to_sparse(x)
        if x.layout == torch.strided:
            return x
    raise TypeError(f"{_args.name(func)}(): expected tensors, got {type(x).__name__} with layout "
                    f"{getattr(x, 'layout', None)}")


def _check_matrix(A: SparseFillTensor, func, what: str) -> None:
    if A.dense_dim() > 0:
        raise NotImplementedError(
            f"torch_sparsefill: {_args.name(func)}: {what} is a hybrid sparse tensor (dense_dim="
            f"{A.dense_dim()}); matrix products support sparse_dim 2 only, as torch's own "
            f"sparse products do")
    if A.dim() != 2:
        raise RuntimeError(f"{_args.name(func)}: {what} must be a matrix, got a {A.dim()}-D tensor")


def _fill2d(A: SparseFillTensor, func) -> torch.Tensor:
    """A's fill as the ops read it: scalar, per-row (m, 1) or per-column (1, k);
    0 where it covers no element (A coalesced): an unseen fill (nan_to_num's
    1.8e308 of an inf fill on a fully stored A) would otherwise enter the
    correction v - f, f * colsum and overflow into the result."""
    f = A._sf_fill
    m, k = A.shape
    nse = A._sf_values.shape[0]
    # A fill element is unseen only when its whole slice is stored: ask only then.
    # Under a tracer nse is symbolic: comparing it would guard (export refuses
    # a guard on nse), so a traced program keeps the fill as given (docs/design.md#trace-safety).
    if statically_known_true(nse >= (m * k if f.numel() == 1 else k if f.shape[0] == m and m != 1
                              else m)):
        if f.numel() != 1 and tuple(f.shape) in ((m, 1), (1, k)) and \
                A.layout in (torch.sparse_csr, torch.sparse_coo) and \
                not torch.compiler.is_compiling():
            covered = _covered_slices(A, f.shape[0] == m and m != 1)
            return f if covered is None else torch.where(covered, f, torch.zeros_like(f))
        f = A._live_fill(zero=True)
    if f.numel() == 1 or (f.dim() == 2 and tuple(f.shape) in ((m, 1), (1, k))):
        return f
    raise NotImplementedError(
        f"torch_sparsefill: {_args.name(func)}: a fill of shape {tuple(f.shape)} on a {m} x {k} "
        f"operand is not supported by matrix products (scalar, per-row ({m}, 1) or per-column "
        f"(1, {k}) fills are)")


def _covered_slices(A: SparseFillTensor, per_row: bool):
    """Which rows (`per_row`) or columns of a 2-D COO/CSR `A` have an
    unspecified element, shaped as the fill; None when all do. From the row
    pointers or one column count (a per-slot count through COO indices
    costs 30x the product), and kept on the tensor with the pattern it
    was read from (the components' versions: an edit in place reads again),
    so a product with a per-row or per-column fill costs what a scalar
    fill's does."""
    crow, col, _ = _csr(A)
    key = (crow, col, crow._version, col._version, per_row)
    cached = A.__dict__.get("_sf_covered_slices")
    if cached is not None and cached[0][0] is crow and cached[0][1] is col and \
            cached[0][2:] == key[2:]:
        return cached[1]
    m, k = A.shape
    stored = crow[1:] - crow[:-1] if per_row else torch.bincount(col, minlength=k)
    covered = (stored < (k if per_row else m)).view((m, 1) if per_row else (1, k))
    if torch._C._are_functorch_transforms_active():
        return covered  # no sync on a transform's tensors, and nothing kept
    covered = None if bool(covered.all()) else covered  # one sync per pattern
    A._sf_covered_slices = (key, covered)
    return covered


def _csr(A: SparseFillTensor):
    """(crow, col, values) of A's pattern in CSR order. COO: coalesced, with
    the row pointers cached on the tensor (the values are A's own)."""
    if A.layout == torch.sparse_csr:
        return A._sf_crow, A._sf_col, A._sf_values
    if not A._sf_coalesced:
        A = A.coalesce()
    cache = getattr(A, "_sf_csr_view", None)
    if cache is None or cache[0] is not A._sf_indices:
        crow = _ops.crow_from_rows(A._sf_indices[0].contiguous(), A.shape[0])
        cache = (A._sf_indices, crow, A._sf_indices[1].contiguous())
        A._sf_csr_view = cache
    return cache[1], cache[2], A._sf_values


def _check_dtypes(a, b, func):
    if a.dtype != b.dtype:
        raise RuntimeError(f"{_args.name(func)}: expected both operands to have the same dtype, but "
                           f"got: {a.dtype} != {b.dtype}")
    if a.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16):
        # NotImplementedError, not TypeError: `@` turns a TypeError into
        # Python's generic "unsupported operand type(s)".
        raise NotImplementedError(f"torch_sparsefill: {_args.name(func)}: matrix products support float32, "
                        f"float64, float16 and bfloat16, got {a.dtype}")


def _check_shapes(a, b, func):
    if a.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"{_args.name(func)}: mat1 and mat2 shapes cannot be multiplied "
                           f"({a.shape[-2]}x{a.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})")


def _zero_fill(A: SparseFillTensor) -> bool:
    """Is A's fill exactly 0 and outside autograd (so a sparse result is exact)?
    Under a tracer (sf.compile, export) the data cannot be read: no, and the
    product takes its general path (the same values, any fill)."""
    f = A._sf_fill
    if torch.compiler.is_compiling():
        return False
    return not f.requires_grad and not bool((f != 0).any())


# ---- the products -----------------------------------------------------------------

def _mm(a, b, func=torch.mm):
    a, b = _as_operand(a, func), _as_operand(b, func)
    sa, sb = isinstance(a, SparseFillTensor), isinstance(b, SparseFillTensor)
    for x, what in ((a, "mat1"), (b, "mat2")):
        if isinstance(x, SparseFillTensor):
            _check_matrix(x, func, what)
        elif x.dim() != 2:
            raise RuntimeError(f"{_args.name(func)}: {what} must be a matrix, got a {x.dim()}-D tensor")
    _check_dtypes(a, b, func)
    _check_shapes(a, b, func)
    a = a._coalesced() if sa else a  # the fill's coverage counts unique positions
    b = b._coalesced() if sb else b
    if sa and sb:
        return _sparse_sparse(a, b, func)
    if sa:
        crow, col, values = _csr(a)
        return _ops.spmm(crow, col, values, _fill2d(a, func), b, a.shape[1])
    if sb:
        crow, col, values = _csr(b)
        return _ops.dense_spmm(a, crow, col, values, _fill2d(b, func), b.shape[1])
    # Two strided matrices (e.g. addmm's with a SparseFillTensor bias): not
    # `func`, which may take other arguments (addmm's input).
    return torch.mm(a, b)


def _sparse_sparse(a, b, func):
    """A @ B of two coalesced sparse matrices. Both fills 0 and every stored
    value finite: the sparse product (SpGEMM), exact. Otherwise the general
    product over the fills, strided: it also applies RFC.md#non-finite-products
    (a stored NaN or inf meets the other operand's unspecified zeros:
    ``inf * 0`` is NaN, which SpGEMM, skipping them, would drop). Halves
    multiply in float64 and round once (functions/opmath.py's PRODUCTS)."""
    own = a._sf_values.dtype
    if own in HALF:
        wide = PRODUCTS["wide"]  # the products' rule for halves (functions/opmath.py)
        return _sparse_sparse(a.to(wide), b.to(wide), func).to(own)
    fa, fb = _fill2d(a, func), _fill2d(b, func)
    crow_a, col_a, va = _csr(a)
    crow_b, col_b, vb = _csr(b)
    m, n = a.shape[0], b.shape[1]
    if _zero_fill(a) and _zero_fill(b) and _all_finite(va) and _all_finite(vb):
        crow, col, values = _ops.spgemm(crow_a, col_a, va, crow_b, col_b, vb, n)
        zero = torch.zeros((), dtype=values.dtype, device=values.device)
        return build(a.layout, (m, n), values, zero, crow=crow, col=col)
    return _ops.sparse_mm_dense(crow_a, col_a, va, fa, crow_b, col_b, vb, fb, a.shape[1], n)


def _all_finite(values) -> bool:
    """Every stored value finite. Under a torch.func transform the values
    may be batched and cannot be read: no (the general product serves)."""
    if torch._C._are_functorch_transforms_active():
        return False
    return bool(torch.isfinite(values).all())


def _mv(a, x, func=torch.mv):
    a, x = _as_operand(a, func), _as_operand(x, func)
    if not isinstance(a, SparseFillTensor) or isinstance(x, SparseFillTensor):
        raise NotImplementedError(f"torch_sparsefill: {_args.name(func)}: supported for a sparse "
                                  f"matrix and a strided vector")
    if x.dim() != 1:
        raise RuntimeError(f"{_args.name(func)}: vec must be 1-D, got a {x.dim()}-D tensor")
    if a.dim() == 2 and a.shape[1] != x.shape[0]:
        raise RuntimeError(f"{_args.name(func)}: size mismatch, got input ({a.shape[0]}x{a.shape[1]}) "
                           f"and vec ({x.shape[0]})")
    return _mm(a, x.unsqueeze(1), func).squeeze(1)


def _batch_slices(A: SparseFillTensor, func) -> list:
    """2-D SparseFillTensors, one per batch in row-major order, of a COO A
    whose leading sparse dims are batch dims (views of its values; each
    slice's fill is A's fill at that batch, so fills may vary per batch)."""
    if A.layout != torch.sparse_coo or A.sparse_dim() != A.dim():
        raise NotImplementedError(
            f"torch_sparsefill: {_args.name(func)}: a batched sparse operand must be a COO tensor "
            f"whose dims are all sparse (batch dims, rows, columns), got layout {A.layout} with "
            f"sparse_dim {A.sparse_dim()} of {A.dim()} dims")
    A = A.coalesce()
    batch, (m, k) = tuple(A.shape[:-2]), tuple(A.shape[-2:])
    idx = A._sf_indices
    nb = _fill.prod(batch)
    linear = torch.zeros(idx.shape[1], dtype=idx.dtype, device=idx.device)
    for d, size in enumerate(batch):  # coalesced order: the batch number is sorted
        linear = linear * size + idx[d]
    starts = torch.arange(nb + 1, dtype=idx.dtype, device=idx.device)
    bounds = torch.searchsorted(linear.contiguous(), starts).tolist()
    f = _fill.full_rank(A._sf_fill, A.dim())
    out = []
    for i in range(nb):
        lo, hi = bounds[i], bounds[i + 1]
        at, rest = [], i
        for size in reversed(batch):
            at.append(rest % size)
            rest //= size
        at = tuple(reversed(at))
        fi = f[tuple(a if fs > 1 else 0 for a, fs in zip(at, f.shape))]
        out.append(build(torch.sparse_coo, (m, k), A._sf_values[lo:hi], fi,
                         indices=idx[-2:, lo:hi]))
    return out


def _batched(a, b, func):
    """a @ b with batch dims (a: (..., m, k), b: (..., k, n), both at least
    2-D, one of them more) broadcast as torch.matmul does. A 2-D operand
    against a batched strided one is one product (the batch folded into the
    strided operand's rows or columns); otherwise one product per batch."""
    sa, sb = isinstance(a, SparseFillTensor), isinstance(b, SparseFillTensor)
    if not (sa or sb):  # only a bias (baddbmm's input) is sparse
        return torch.matmul(a, b)
    _check_dtypes(a, b, func)
    _check_shapes(a, b, func)
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    batch = torch.broadcast_shapes(tuple(a.shape[:-2]), tuple(b.shape[:-2]))
    if sa and not sb and a.dim() == 2:  # (m, k) @ (..., k, n): columns (k, ... n)
        # sizes counted, not -1: with a 0 among them -1 is ambiguous
        cols = b.expand(batch + (k, n)).movedim(-2, 0).reshape(k, math.prod(batch) * n)
        return _mm(a, cols, func).reshape((m,) + batch + (n,)).movedim(0, -2)
    if sb and not sa and b.dim() == 2:  # (..., m, k) @ (k, n): rows (... m, k)
        return _mm(a.expand(batch + (m, k)).reshape(math.prod(batch) * m, k), b,
                   func).reshape(batch + (m, n))

    def slices(x):
        own = tuple(x.shape[:-2])
        if isinstance(x, SparseFillTensor):
            if x.dim() == 2:
                return lambda at: x
            parts = _batch_slices(x, func)
        else:
            flat = x.reshape((math.prod(own),) + tuple(x.shape[-2:])) if own else x.unsqueeze(0)
            parts = list(flat.unbind(0))
        strides, acc = [], 1
        for size in reversed(own):
            strides.append(acc)
            acc *= size
        strides = list(reversed(strides))
        lead = len(batch) - len(own)

        def pick(at):
            j = sum((at[lead + d] if size > 1 else 0) * st
                    for d, (size, st) in enumerate(zip(own, strides)))
            return parts[j]
        return pick

    pick_a, pick_b = slices(a), slices(b)
    results = []
    for at in itertools.product(*(range(s) for s in batch)):
        results.append(_mm(pick_a(at), pick_b(at), func))
    if not results:
        return torch.empty(batch + (m, n), dtype=a.dtype, device=a.device)
    if all(isinstance(r, SparseFillTensor) for r in results):
        return torch.stack(results).reshape(batch + (m, n))
    dense = [r.to_dense() if isinstance(r, SparseFillTensor) else r for r in results]
    return torch.stack(dense).reshape(batch + (m, n))


def _bmm(a, b, func=torch.bmm):
    a, b = _as_operand(a, func), _as_operand(b, func)
    if a.dim() != 3 or b.dim() != 3:
        raise RuntimeError(f"{_args.name(func)}: batch1 and batch2 must be 3-D tensors, got "
                           f"{a.dim()}-D and {b.dim()}-D")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"{_args.name(func)}: batch1 and batch2 must have the same number of "
                           f"batches, got {a.shape[0]} and {b.shape[0]}")
    return _batched(a, b, func)


# a half input + product rounds once, as ATen (a product that overflows the
# half type plus a bias of -inf is -inf, not NaN), from float64 (PRODUCTS)
@in_opmath(**PRODUCTS)
def _baddbmm(input, batch1, batch2, *, beta=1, alpha=1, func=torch.baddbmm):
    """beta * input + alpha * (batch1 @ batch2) for 3-D batches; input is
    ignored when beta == 0."""
    return _add_scaled(input, _bmm(batch1, batch2, func), beta, alpha, func)


def _matmul(a, b, func=torch.matmul):
    a, b = _as_operand(a, func), _as_operand(b, func)
    da, db = a.dim(), b.dim()
    if da == 2 and db == 2:
        return _mm(a, b, func)
    if da == 2 and db == 1:
        return _mv(a, b, func)
    if da == 1 and db == 2 and not isinstance(a, SparseFillTensor):
        if a.shape[0] != b.shape[0]:
            raise RuntimeError(f"{_args.name(func)}: size mismatch, got vec ({a.shape[0]}) and "
                               f"matrix ({b.shape[0]}x{b.shape[1]})")
        return _mm(a.unsqueeze(0), b, func).squeeze(0)
    if da == 0 or db == 0:
        raise RuntimeError(f"{_args.name(func)}: both arguments need at least 1 dimension, got "
                           f"{da}-D and {db}-D tensors")
    for x, d in ((a, da), (b, db)):
        if d == 1 and isinstance(x, SparseFillTensor):
            raise NotImplementedError(
                f"torch_sparsefill: {_args.name(func)} of a 1-D SparseFillTensor with a batched "
                f"operand is not supported; unsqueeze it to a matrix first")
    if db == 1:  # (..., m, k) @ (k,): a column that is dropped after
        return _batched(a, b.unsqueeze(1), func).squeeze(-1)
    if da == 1:
        return _batched(a.unsqueeze(0), b, func).squeeze(-2)
    return _batched(a, b, func)


def _add_scaled(input, out, beta, alpha, func):
    """beta * input + alpha * out; input is ignored when beta == 0 (but must
    broadcast to out's shape)."""
    if not (_args.is_number(beta) and _args.is_number(alpha)):
        raise TypeError(f"{_args.name(func)}(): beta and alpha must be numbers")
    if alpha != 1:
        out = out * alpha
    if beta == 0:
        shape = torch.broadcast_shapes(tuple(input.shape), tuple(out.shape))
        if shape != tuple(out.shape):
            raise RuntimeError(f"{_args.name(func)}: input of shape {tuple(input.shape)} does not "
                               f"broadcast to the product's shape {tuple(out.shape)}")
        return out
    if tuple(input.shape) != tuple(out.shape) and isinstance(input, SparseFillTensor) and \
            not isinstance(out, SparseFillTensor):
        # a bias broadcast over a strided product (attention's mask): the sum is dense
        input = input.to_dense()
    if tuple(input.shape) != tuple(out.shape) and isinstance(input, SparseFillTensor):
        raise RuntimeError(f"{_args.name(func)}: a sparse input must have the product's shape "
                           f"{tuple(out.shape)}, got {tuple(input.shape)}")
    scaled = input if beta == 1 else input * beta
    return out + scaled


@in_opmath(**PRODUCTS)  # as _baddbmm
def _addmm(input, mat1, mat2, *, beta=1, alpha=1, func=torch.addmm):
    """beta * input + alpha * (mat1 @ mat2); input is ignored when beta == 0."""
    return _add_scaled(input, _mm(mat1, mat2, func), beta, alpha, func)


# ---- the hot path (docs/design.md#hot-path) ----------------------------------------------

_PRODUCT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


def _fast_product(a, b, vector: bool, matrix: bool):
    """``a @ b`` for a plain 2-D SparseFillTensor `a` (not fully stored) and
    a strided torch.Tensor `b`, 1-D if `vector`, 2-D if `matrix`, of a's
    dtype and matching size: the very op call the route makes (_mm, _mv),
    without its argument checks and the operand conversions; None for
    anything else (the route then handles the call and its errors)."""
    if not is_plain(a, per_slice=True) or type(b) is not torch.Tensor or \
            b.layout is not torch.strided:
        return None
    size = a._sf_size
    if len(size) != 2 or b.dtype is not a._sf_values.dtype or b.dtype not in _PRODUCT_DTYPES:
        return None
    nse, (m, k) = a._sf_values.shape[0], size
    # a fully stored a: the route gives the op a fill of 0 (_fill2d); a
    # symbolic nse (a tracer): the route decides without guarding.
    if type(nse) is not int or nse >= m * k:
        return None
    d = b.dim()
    if not ((d == 1 and vector) or (d == 2 and matrix)) or b.shape[0] != k:
        return None
    fill = a._sf_fill
    if fill.dim():  # per row or per column: 0 over the slices stored whole, as _fill2d
        if fill.shape not in ((m, 1), (1, k)) or torch.compiler.is_compiling():
            return None
        covered = _covered_slices(a, fill.shape[0] == m and m != 1)
        fill = fill if covered is None else torch.where(covered, fill, torch.zeros_like(fill))
    crow, col, values = _csr(a)
    if d == 1:
        return _ops.spmm(crow, col, values, fill, b.unsqueeze(1), k).squeeze(1)
    return _ops.spmm(crow, col, values, fill, b, k)


def _fast(vector: bool, matrix: bool):
    def fast(args):
        return _fast_product(args[0], args[1], vector, matrix) if len(args) == 2 else None
    return fast


def _with_func(fn, func):
    return lambda *args, **kwargs: fn(*args, func=func, **kwargs)


ROUTES = {
    torch.mm: _with_func(_mm, torch.mm),
    T.mm: _with_func(_mm, T.mm),
    torch.matmul: _with_func(_matmul, torch.matmul),
    T.matmul: _with_func(_matmul, T.matmul),
    T.__matmul__: _with_func(_matmul, T.__matmul__),
    T.__rmatmul__: lambda self, other: _matmul(other, self, func=T.__rmatmul__),
    torch.mv: _with_func(_mv, torch.mv),
    T.mv: _with_func(_mv, T.mv),
    torch.bmm: _with_func(_bmm, torch.bmm),
    T.bmm: _with_func(_bmm, T.bmm),
    torch.baddbmm: _with_func(_baddbmm, torch.baddbmm),
    T.baddbmm: _with_func(_baddbmm, T.baddbmm),
    torch.addmm: _with_func(_addmm, torch.addmm),
    T.addmm: _with_func(_addmm, T.addmm),
    torch.sparse.addmm: _with_func(_addmm, torch.sparse.addmm),
}
# Callables whose calls without keywords the routing tries here first: a
# plain sparse matrix times a strided vector or matrix.
# A plain CSR matrix is served by one C call (_C.hot_product), the rest by
# the Python handler it falls back to.
_FAST_MATMUL, _FAST_MV, _FAST_MM = (_C.hot_product(_fast(v, m), v, m)
                                    for v, m in ((True, True), (True, False), (False, True)))
FAST = {T.__matmul__: _FAST_MATMUL, torch.matmul: _FAST_MATMUL, T.matmul: _FAST_MATMUL,
        torch.mv: _FAST_MV, T.mv: _FAST_MV, torch.mm: _FAST_MM, T.mm: _FAST_MM}
