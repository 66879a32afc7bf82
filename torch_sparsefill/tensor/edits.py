"""Index components edited in place (RFC.md#edited-components).

The accessors hand out the stored index tensors (``A.crow_indices()``,
``A._indices()``, ...), and Python may write into them. A pattern made
invalid that way must never reach code that trusts a checked pattern
(ATen's CSR-to-COO conversion, the C kernels): that reads out of bounds.
Every SparseFillTensor remembers a stamp, the sum of its index components'
version counters when it was built or last checked (the counters only
grow, so the sum moves whenever one does). Before anything reads the
pattern, a moved stamp runs the constructors' checks again: an edited but
valid pattern is accepted and stamped anew, an invalid one raises naming
the component. Values may be edited freely and are never rechecked.

Example::

    >>> C = sf.sparse_csr_tensor([0, 1, 2], [0, 1], [1., 2.], (2, 2))
    >>> C.col_indices()[1] = 0      # still valid: accepted
    >>> C.to_dense()
    tensor([[1., 0.],
            [2., 0.]])
"""
from __future__ import annotations

import torch

from . import batched as _batched
from .compressed import BLOCK, NAMES, renamed

_ops = torch.ops.sparsefill

__all__ = ["stamp", "check_edits", "check_operands"]


def stamp(indices, crow, col):
    """The version stamp of a tensor's index components (COO `indices`, or
    compressed `crow` and `col`); None where they track no version
    (inference tensors: they cannot be edited outside inference mode).

    Example::

        >>> stamp(None, torch.tensor([0, 1]), torch.tensor([0]))
        0
    """
    try:
        if indices is not None:
            return indices._version
        return crow._version + col._version
    except RuntimeError:
        return None


def check_edits(A) -> None:
    """Raise RuntimeError naming the component when `A`'s index components
    were edited in place into an invalid pattern; accept (and stamp) a
    valid edit. Costs one stamp comparison when nothing was edited.

    Example::

        >>> C = sf.sparse_csr_tensor([0, 1, 2], [0, 1], [1., 2.], (2, 2))
        >>> C.crow_indices()[1] = 5
        >>> check_edits(C)
        Traceback (most recent call last):
        RuntimeError: ...crow_indices...
    """
    facts = A.__dict__  # one lookup: each attribute of the class costs more
    now = stamp(facts["_sf_indices"], facts["_sf_crow"], facts["_sf_col"])
    if now == facts["_sf_checked"] or torch.compiler.is_compiling():
        return
    try:
        _recheck(A)
    except (RuntimeError, ValueError, IndexError) as e:
        names = "indices" if A._sf_layout == torch.sparse_coo else " and ".join(
            NAMES[A._sf_layout])
        raise RuntimeError(
            f"torch_sparsefill: this SparseFillTensor's {names} were edited in place and no "
            f"longer form a valid {A._sf_layout} pattern of size {tuple(A._sf_size)}: "
            f"{str(e).splitlines()[0]} (values may be edited in place; to change the pattern, "
            f"build a new tensor with the constructor)") from None
    A._sf_checked = now


def _recheck(A) -> None:
    """The constructors' checks on A's components, against A's size,
    layout and blocksize (which cannot be edited); updates the COO
    coalesced facts, which an edit may change."""
    layout, size, values = A._sf_layout, A._sf_size, A._sf_values
    if layout == torch.sparse_coo:
        indices = A._sf_indices
        sparse_dim = len(size) - (values.dim() - 1)
        if indices.dim() != 2 or tuple(indices.shape) != (sparse_dim, values.shape[0]):
            raise ValueError(f"indices have shape {tuple(indices.shape)}, expected "
                             f"({sparse_dim}, {values.shape[0]}) (sparse_dim, nse)")
        if not indices.is_contiguous():
            raise ValueError("indices are no longer contiguous")
        coalesced = bool(_ops.coo_check(indices, list(size[:sparse_dim])))
        A._sf_coalesced = coalesced
        A._sf_coalesced_flag = A._sf_coalesced_flag and coalesced
        return
    crow, col, blocksize = A._sf_crow, A._sf_col, A._sf_blocksize
    cname, pname = NAMES[layout]
    if not (crow.is_contiguous() and col.is_contiguous()):
        raise ValueError(f"{cname} or {pname} are no longer contiguous")
    if crow.dim() > 1 or col.dim() > 1:
        _batched.check(layout, crow, col, values, size, (cname, pname), blocksize,
                       lambda message: renamed(message, layout))
        return
    if crow.dim() != 1 or col.dim() != 1:
        raise ValueError(f"{cname} and {pname} must be 1-D, got shapes {tuple(crow.shape)} "
                         f"and {tuple(col.shape)}")
    if col.shape[0] != values.shape[0]:
        raise ValueError(f"{pname} has {col.shape[0]} elements but values has "
                         f"{values.shape[0]}: they must match")
    r, c = blocksize or (1, 1)
    pattern = [size[0] // r, size[1] // c]
    if layout in (torch.sparse_csc, torch.sparse_bsc):
        pattern = pattern[::-1]
    _ops.csr_check(crow, col, pattern)


def check_operands(cls, args, kwargs) -> None:
    """check_edits on every SparseFillTensor among a call's arguments (and
    in its lists and tuples, as torch.cat's): the routing's entry, before
    any handler reads a pattern. `cls` is SparseFillTensor (defined above
    this module).

    Example: ``check_operands(SparseFillTensor, (A, [B, C]), {})`` checks A, B and C.
    """
    for group in (args, kwargs.values()):
        for a in group:
            if type(a) is cls:
                check_edits(a)
            elif type(a) in (list, tuple):
                for b in a:
                    if type(b) is cls:
                        check_edits(b)

