"""Every op family on the CSC, BSR and BSC layouts, through CSR (
RFC.md#through-csr): the routing calls `call` for any routed torch function whose
arguments hold such a tensor (and for the transposes of a CSR tensor).

- The transposes of the two sparse dims are the O(1) swap CSR <-> CSC,
  BSR <-> BSC (`SparseFillTensor._swapped`).
- BSR or BSC @ strided and strided @ BSR or BSC: the block product
  `sparsefill::bsr_spmm` with the fill's correction (`functions/linalg/bsr.py`).
- Everything else: each CSC/BSR/BSC operand becomes CSR, the CSR op runs,
  and a CSR result goes back to the first such operand's layout (in place:
  written back into its components).
- Batched compressed operands (any of the four layouts, RFC.md#batched-compressed) become
  COO with a sparse dim per batch dim; a COO result with at least two
  sparse dims goes back to the layout, its leading sparse dims the batch.
"""
from __future__ import annotations

import torch

from .linalg import bsr as _bsr
from ..tensor.compressed import EXTRA
from ..tensor import SparseFillTensor
from ..tensor import args as _args

T = torch.Tensor

__all__ = ["needs", "call"]

_TRANSPOSES = {T.transpose, torch.transpose, T.swapaxes, torch.swapaxes, T.swapdims,
               torch.swapdims}
_SWAPS = _TRANSPOSES | {T.t, torch.t, T.T.__get__, T.mT.__get__, T.permute, torch.permute}
_MATMULS = {torch.matmul, T.matmul, T.__matmul__, torch.mm, T.mm}
# Handlers that work on any layout themselves: A.data = B takes B's
# components whatever they are (through CSR it would write into a copy).
_ANY_LAYOUT = {T.data.__set__}


def _extra(x) -> bool:
    return type(x) is SparseFillTensor and (x._sf_layout in EXTRA or (
        x._sf_layout == torch.sparse_csr and x._sf_crow.dim() > 1))


def _first_extra(args, kwargs):
    # Runs on every routed call: no list built, the plain case tested first.
    for group in (args, kwargs.values()) if kwargs else (args,):
        for a in group:
            if type(a) is SparseFillTensor:
                if _extra(a):  # CSC/BSR/BSC, or a batched CSR
                    return a
            elif isinstance(a, (list, tuple)):
                for b in a:
                    if _extra(b):
                        return b
    return None


def needs(func, args, kwargs) -> bool:
    """Whether `call` must handle this call: a CSC/BSR/BSC argument, or a
    transpose of a CSR tensor (which gives CSC in O(1)).

    Example: ``needs(torch.t, (csr_tensor,), {})`` is True.
    """
    if func in _ANY_LAYOUT:
        return False
    if func in _SWAPS and args and type(args[0]) is SparseFillTensor and \
            args[0]._sf_layout == torch.sparse_csr:
        return True
    return _first_extra(args, kwargs) is not None


def _swaps_sparse_dims(func, A, args, kwargs) -> bool:
    """Whether this transpose-like call exchanges exactly the two sparse dims."""
    ndim, dense, nb = A.dim(), A.dense_dim(), A._batch_dim()
    if func in (T.t, torch.t):
        return nb == 0  # torch refuses t() beyond 2 dims; the COO route says so
    if func == T.T.__get__:  # a new method-wrapper per access
        return dense == 0 and nb == 0
    if func == T.mT.__get__:
        return dense == 0
    if func in _TRANSPOSES:
        dims = list(args[1:3]) + [kwargs[k] for k in ("dim0", "dim1", "axis0", "axis1")
                                  if k in kwargs]
        if len(dims) != 2 or not all(isinstance(d, int) for d in dims):
            return False
        return sorted(d % ndim if -ndim <= d < ndim else -1 for d in dims) == [nb, nb + 1]
    dims = args[1:] if len(args) > 2 or (len(args) == 2 and isinstance(args[1], int)) else (
        args[1] if len(args) > 1 else kwargs.get("dims", ()))
    try:
        dims = [int(d) % ndim for d in dims]
    except (TypeError, ValueError, ZeroDivisionError):
        return False
    return dims == list(range(nb)) + [nb + 1, nb] + list(range(nb + 2, ndim))


def _to_csr(x):
    if _extra(x):
        return x.to_sparse_coo() if x._batch_dim() else x._to_csr()
    if isinstance(x, (list, tuple)) and any(_extra(b) for b in x):
        return type(x)(_to_csr(b) for b in x)
    return x


def _back(out, like: SparseFillTensor):
    """A CSR result in the layout of `like` where its shape allows; for a
    batched `like`, a COO result with at least 2 sparse dims too."""
    if type(out) is SparseFillTensor and (out._sf_layout == torch.sparse_csr or (
            like._batch_dim() and out._sf_layout == torch.sparse_coo
            and out.sparse_dim() >= 2)):
        bs = like._sf_blocksize
        # the matrix dims follow the batch dims (a batched CSR result's too)
        nb = out.sparse_dim() - 2 if out._sf_layout == torch.sparse_coo else out._batch_dim()
        if bs and (out.shape[nb] % bs[0] or out.shape[nb + 1] % bs[1]):
            return out
        return out._to_layout(like._sf_layout, bs)
    if type(out) in (list, tuple):
        return type(out)(_back(o, like) for o in out)
    return out


def call(func, handler, args, kwargs):
    """`handler` (the routed CSR/COO implementation of `func`) applied with
    the rules of RFC.md#through-csr."""
    A = args[0] if args else None
    if func in _SWAPS and type(A) is SparseFillTensor and _swaps_sparse_dims(func, A, args,
                                                                              kwargs):
        return A._swapped()
    if func in _MATMULS and len(args) == 2 and not kwargs:
        out = _bsr.matmul(args[0], args[1], vectors=func not in (torch.mm, T.mm))
        if out is not None:
            return out
    like = _first_extra(args, kwargs)
    if like is None:  # a CSR transpose of dense dims: nothing to convert
        return handler(*args, **kwargs)
    new_args = [_to_csr(a) for a in args]
    new_kwargs = {k: _to_csr(v) for k, v in kwargs.items()}
    out = handler(*new_args, **new_kwargs)
    if args and _args.in_place(func):
        # The op wrote into the CSR copies of its first argument (a tensor,
        # or the list of a _foreach_*_ call): write each back into its own.
        if _extra(A):
            return _write_back(A, new_args[0], func) if out is new_args[0] else out
        if isinstance(A, (list, tuple)):
            for a, b in zip(A, new_args[0]):
                if _extra(a):
                    _write_back(a, b, func)
            return out
    if args and _extra(A) and out is new_args[0]:  # the op returned its input (contiguous, ...)
        return A
    return _back(out, like)


def _write_back(A: SparseFillTensor, out: SparseFillTensor, func) -> SparseFillTensor:
    """A becomes `out` (the in-place op's CSR result) in A's layout: into A's
    components when the pattern and fill shape stay and autograd is not
    recording (an optimiser holding them sees the update), else A adopts new
    components (RFC.md#in-place). A transpose (t_) takes the transposed blocksize."""
    name = getattr(func, "__name__", str(func))
    bs = A._sf_blocksize
    nb = out.sparse_dim() - 2  # batch dims: a batched operand ran as COO
    rows, cols = out.shape[nb], out.shape[nb + 1]
    if bs and (rows % bs[0] or cols % bs[1]):
        bs = (bs[1], bs[0])
        if rows % bs[0] or cols % bs[1]:
            raise NotImplementedError(
                f"torch_sparsefill: {name}: the result's sizes {(rows, cols)} are not "
                f"divisible by the blocksize {A._sf_blocksize} this tensor keeps; use the "
                f"out-of-place form")
    back = out._to_layout(A._sf_layout, bs)
    graph = torch.is_grad_enabled() and (back.requires_grad or A.requires_grad)
    same = (back._sf_size == A._sf_size and back._sf_blocksize == A._sf_blocksize
            and back._sf_fill.shape == A._sf_fill.shape
            and back._sf_values.shape == A._sf_values.shape
            and torch.equal(back._sf_crow, A._sf_crow) and torch.equal(back._sf_col, A._sf_col))
    if same and not graph:
        A._sf_values.copy_(back._sf_values)
        A._sf_fill.copy_(back._sf_fill)
        torch.autograd.graph.increment_version(A)
        A._after_inplace()
        return A
    return A._adopt(back, name + "()")
