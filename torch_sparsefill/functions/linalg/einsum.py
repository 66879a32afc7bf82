"""``torch.einsum`` with SparseFillTensor operands (RFC.md#einsum).

An equation is carried out with the ops the package already has, so the
fill is exact wherever they are: each operand first sums out the indices
that only it has and that the result does not keep; then the operands are
contracted pairwise, left to right, and every pair is

- a product (``matmul``) when it shares an index that is summed: both
  operands are permuted to ``(batch, free, summed)`` /
  ``(batch, summed, free)``, their groups of indices merged by ``reshape``,
  multiplied, and split again;
- an element-wise product with broadcasting (``mul``) when it shares none
  ("ij,ij->ij", "ij,j->ij", "i,j->ij").

The last operand is summed and permuted into the output's order. Equations
with an ellipsis or a repeated index within one operand (a diagonal) are
refused naming einsum and the equation, as is the sublist form.

Example::

    >>> A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [2., 3.], (2, 2), fill_value=1.)
    >>> torch.einsum("ij,jk->ik", A, torch.eye(2))
    tensor([[1., 2.],
            [3., 1.]])
"""
from __future__ import annotations

import math

import torch

from ...tensor import SparseFillTensor

__all__: list = []


def _refuse(equation, why):
    return NotImplementedError(f"torch_sparsefill: torch.einsum({equation!r}) with a "
                               f"SparseFillTensor operand: {why}")


def _parse(equation, operands):
    """(input index strings, output index string, size of every index)."""
    if not isinstance(equation, str):
        raise _refuse(equation, "the sublist form is not supported; write the equation as a "
                                "string")
    eq = equation.replace(" ", "")
    if "." in eq:
        raise _refuse(equation, "an ellipsis is not supported; name every index")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise RuntimeError(f"einsum(): the equation {equation!r} names {len(terms)} operands, "
                           f"but {len(operands)} were given")
    sizes: dict = {}
    for term, x in zip(terms, operands):
        if not all(ch.isalpha() for ch in term) or not all(ch.isalpha() for ch in rhs):
            raise RuntimeError(f"einsum(): invalid subscript in {equation!r}: indices are "
                               f"letters")
        if len(term) != x.dim():
            raise RuntimeError(f"einsum(): the subscript {term!r} has {len(term)} indices "
                               f"for an operand with {x.dim()} dims")
        if len(set(term)) != len(term):
            raise _refuse(equation, f"the repeated index in {term!r} (a diagonal) is not "
                                    f"supported")
        for ch, n in zip(term, x.shape):
            if sizes.setdefault(ch, n) != n:
                raise RuntimeError(f"einsum(): index {ch!r} has sizes {sizes[ch]} and {n} in "
                                   f"{equation!r}")
    if not arrow:  # implicit output: the indices seen once, in alphabetical order
        rhs = "".join(sorted(ch for ch in sizes if lhs.count(ch) == 1))
    if len(set(rhs)) != len(rhs) or any(ch not in sizes for ch in rhs):
        raise RuntimeError(f"einsum(): the output subscript of {equation!r} must name distinct "
                           f"indices of the operands")
    return terms, rhs, sizes


def _sum_out(x, term, keep):
    """x with the indices of `term` not in `keep` summed out."""
    gone = [d for d, ch in enumerate(term) if ch not in keep]
    if not gone:
        return x, term
    x = x.sum(gone) if len(gone) < x.dim() else x.sum()
    return x, "".join(ch for ch in term if ch in keep)


def _arrange(x, term, order):
    """x permuted to `order` (a subsequence of order's indices that x has),
    with size-1 dims for the indices of `order` it lacks."""
    own = [ch for ch in order if ch in term]
    if own != list(term):
        x = x.permute([term.index(ch) for ch in own])
    for d, ch in enumerate(order):
        if ch not in term:
            x = x.unsqueeze(d)
    return x


def _pair(a, ta, b, tb, keep, sizes):
    """Contract two operands, keeping the indices in `keep`."""
    a, ta = _sum_out(a, ta, set(tb) | keep)
    b, tb = _sum_out(b, tb, set(ta) | keep)
    summed = [ch for ch in ta if ch in tb and ch not in keep]
    if not summed:  # an element-wise product, broadcast
        order = ta + "".join(ch for ch in tb if ch not in ta)
        return _arrange(a, ta, order) * _arrange(b, tb, order), order
    batch = [ch for ch in ta if ch in tb and ch in keep]
    free_a = [ch for ch in ta if ch not in tb]
    free_b = [ch for ch in tb if ch not in ta]
    nb = [sizes[ch] for ch in batch]

    def grouped(x, t, first, second):
        x = _arrange(x, t, "".join(batch + first + second))
        return x.reshape(nb + [math.prod(sizes[ch] for ch in first),
                               math.prod(sizes[ch] for ch in second)])

    out = torch.matmul(grouped(a, ta, free_a, summed), grouped(b, tb, summed, free_b))
    out = out.reshape(nb + [sizes[ch] for ch in free_a + free_b])
    return out, "".join(batch + free_a + free_b)


def _einsum(equation, *operands):
    """torch.einsum when an operand is a SparseFillTensor (see the module doc)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    terms, rhs, sizes = _parse(equation, operands)
    if not any(isinstance(x, SparseFillTensor) for x in operands):
        return torch.einsum(equation, *operands)
    x, tx = operands[0], terms[0]
    for i in range(1, len(operands)):
        keep = set(rhs).union(*terms[i + 1:])
        if not isinstance(x, SparseFillTensor) and not isinstance(operands[i], SparseFillTensor):
            eq = f"{tx},{terms[i]}->" + "".join(sorted(set(tx + terms[i]) & keep))
            x, tx = torch.einsum(eq, x, operands[i]), eq.split("->")[1]
        else:
            x, tx = _pair(x, tx, operands[i], terms[i], keep, sizes)
    x, tx = _sum_out(x, tx, set(rhs))
    if tx != rhs:
        x = x.permute([tx.index(ch) for ch in rhs])
    return x


ROUTES = {torch.einsum: _einsum}
