"""The fill rules, one home for each (RFC.md#the-fill and RFC.md#per-slice-fills).

A tensor stores its fill in one of two forms:

- the dense-part form: a tensor that broadcasts to the dense part
  ``values.shape[1:]`` (rank at most ``dense_dim``), one fill for every
  sparse position;
- the per-slice form: a tensor of the tensor's full rank that broadcasts to
  its size and varies along at least one sparse dim (e.g. shape ``(m, 1)``:
  one fill per row).

Every function here works on component tensors (fill, values, COO indices)
and plain sizes, so it serves the wrapper, the constructors and every op
module alike; this module imports nothing of the package.
"""
from __future__ import annotations

import torch

__all__: list = []


def prod(xs) -> int:
    """The product of some ints (1 for none), as a Python int."""
    out = 1
    for x in xs:
        out *= int(x)
    return out


def is_per_slice(fill: torch.Tensor, dense_dim: int) -> bool:
    """Whether a stored fill is in the per-slice form: more dims than the
    dense part has (the detection rule of RFC.md#per-slice-fills)."""
    return fill.dim() > dense_dim


def varies_along(fill: torch.Tensor, dense_dim: int, dims) -> bool:
    """Whether a stored fill differs between positions along any of the
    sparse `dims` (only a per-slice fill can)."""
    return is_per_slice(fill, dense_dim) and any(fill.shape[d] != 1 for d in dims)


def canonical(fill: torch.Tensor, sparse_dim: int, dense_dim: int) -> torch.Tensor:
    """`fill` in the form a tensor stores: a full-rank fill that does not vary
    along any sparse dim becomes the smallest dense-part form that broadcasts
    the same way (its sparse dims dropped, then its leading size-1 dims);
    any other fill is returned as it is."""
    if not is_per_slice(fill, dense_dim) or varies_along(fill, dense_dim, range(sparse_dim)):
        return fill
    shape = list(fill.shape[sparse_dim:])
    while shape and shape[0] == 1:
        shape.pop(0)
    return fill.reshape(shape)


def full_rank(fill: torch.Tensor, ndim: int) -> torch.Tensor:
    """The fill as a tensor of rank `ndim` that broadcasts to the tensor's
    size: the dense-part form gets leading size-1 dims; a per-slice fill
    already has that rank."""
    return fill.reshape((1,) * (ndim - fill.dim()) + tuple(fill.shape))


def slots(fill: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """For a per-slice fill: the row of the fill's flattened sparse part that
    covers each stored element at coalesced COO `indices` (sparse_dim, nse)."""
    sparse_dim = indices.shape[0]
    fshape = fill.shape[:sparse_dim]
    coef, stride = [0] * sparse_dim, 1
    for d in range(sparse_dim - 1, -1, -1):
        coef[d] = 0 if fshape[d] == 1 else stride
        stride *= fshape[d]
    coef = torch.tensor(coef, dtype=indices.dtype, device=indices.device)
    return (indices * coef[:, None]).sum(0)


def unspecified_per_element(fill: torch.Tensor, size, indices: torch.Tensor) -> torch.Tensor:
    """How many unspecified elements each element of the stored `fill` stands
    for (an int64 tensor of the fill's shape), for a tensor of `size` whose
    coalesced COO `indices` (sparse_dim, nse) say where its elements are."""
    sparse_dim, nse = indices.shape
    dense_dim = len(size) - sparse_dim
    if not is_per_slice(fill, dense_dim):
        return torch.full(fill.shape, unspecified_per_dense_part_element(fill, size, sparse_dim, nse),
                          dtype=torch.int64, device=fill.device)
    fshape = fill.shape[:sparse_dim]
    covered = prod(s for s, f in zip(size[:sparse_dim], fshape) if f == 1)
    stored = torch.bincount(slots(fill, indices), minlength=prod(fshape))
    per_slot = (covered - stored).view(tuple(fshape) + (1,) * dense_dim)
    dense_factor = prod(s for s, f in zip(size[sparse_dim:], fill.shape[sparse_dim:]) if f == 1)
    return per_slot.expand(fill.shape) * dense_factor


def unspecified_per_dense_part_element(fill: torch.Tensor, size, sparse_dim: int,
                                       nse: int) -> int:
    """For a fill in the dense-part form: how many unspecified elements each
    of its elements stands for in a coalesced tensor of `size` with `nse`
    stored elements (the same number for every element of the fill)."""
    unspecified_positions = prod(size[:sparse_dim]) - nse
    return unspecified_positions * (prod(size[sparse_dim:]) // max(fill.numel(), 1))


def at(fill: torch.Tensor, indices: torch.Tensor, dense_shape) -> torch.Tensor:
    """For a per-slice fill: the fill at each position of coalesced COO
    `indices` (sparse_dim, n), shape ``(n, *dense_shape)``; differentiable
    with respect to the fill."""
    sparse_dim = indices.shape[0]
    rows = fill.reshape((-1,) + tuple(fill.shape[sparse_dim:])).index_select(
        0, slots(fill, indices))
    return rows.expand((rows.shape[0],) + tuple(dense_shape))



def live(fill: torch.Tensor, size, sparse_dim: int, nse: int, indices=None,
         zero: bool = False) -> torch.Tensor:
    """`fill` with autograd cut at every element that covers no unspecified
    element of a coalesced tensor of `size` with `nse` stored elements (a
    per-slice fill also needs their COO `indices`, (sparse_dim, nse)). Such
    a fill element is in no element of the dense tensor, so its gradient is
    0, which the chain rule through it could turn into nan (0 * inf, as in
    log's backward at a fill of 0). With `zero`, those elements also become
    0 (for a reduction, whose arithmetic would otherwise meet an unseen inf
    or nan); otherwise the values are unchanged.

    Example (both elements of a 1 x 2 tensor stored: no gradient reaches the fill)::

        >>> f = torch.tensor(0., requires_grad=True)
        >>> torch.autograd.grad(torch.log(live(f, (1, 2), 2, 2)), f)
        (tensor(0.),)
    """
    if not (fill.requires_grad or zero):
        return fill
    if not is_per_slice(fill, len(size) - sparse_dim):
        count = unspecified_per_dense_part_element(fill, size, sparse_dim, nse)
        if isinstance(count, torch.SymInt):
            # A traced nse: comparing it would guard (an unbacked one, from a
            # data-dependent size, cannot be), so the count becomes data.
            covered = torch.full((), count, dtype=torch.int64, device=fill.device) > 0
        elif count > 0:
            return fill
        else:
            covered = torch.zeros((), dtype=torch.bool, device=fill.device)
    else:
        covered = unspecified_per_element(fill, size, indices).to(fill.device) > 0
        # The early return is a shortcut; a tracer (export, compile) or vmap
        # cannot read the data and takes the where below: the same values.
        if not (torch.compiler.is_compiling() or torch._C._are_functorch_transforms_active()) \
                and bool(covered.all()):
            return fill
    # A where, not a detach: the result stays in the graph (as the dense
    # tensor does) and its backward sends exactly 0 to the cut elements.
    return torch.where(covered, fill, torch.zeros_like(fill) if zero else fill.detach())
