"""Element-wise ops that ATen computes from each operand's own dtype, not
from the common dtype of both (the table's binary rule promotes first):
routed by hand as ATen's own kernels compute them, in torch calls that
route again (RFC.md#with-a-strided-tensor).

- ``other / A``: torch's ``Tensor.__rtruediv__``, ``A.reciprocal() * other``;
- ``torch.float_power``: each operand cast to float64 (complex128) alone;
- ``torch.ldexp`` / ``Tensor.ldexp_``: std::ldexp in A's dtype for an
  integer exponent, else ``A * 2 ** e`` with the power in e's dtype.

Example::

    >>> torch.ldexp(sf.full((2,), 3.), torch.tensor(2)).to_dense()
    tensor([12., 12.])
"""
from __future__ import annotations

import torch

__all__: list = []


def _rtruediv(input, other):
    """``other / input`` as torch's own ``Tensor.__rtruediv__`` computes it:
    ``input.reciprocal() * other``, so a bool or integer input gives the
    default float dtype even against a float64 0-d tensor, and the value is
    the product's rounding, as dense's (fuzz seed 339959). ``torch.div`` keeps
    the division (the YAML's reflected div), as torch's does.

    Example::

        >>> (3 / sf.full((2,), True)).to_dense()
        tensor([3., 3.])
    """
    return torch.reciprocal(input) * other


def _float_power(input, exponent, *, out=None):
    """``torch.float_power(A, e)`` as ATen computes it: each operand cast to
    float64 (complex128 if either is complex) on its own, then ``pow``; the
    table's common promotion would first round a float16 exponent of 150.5
    into a bfloat16 base's dtype (150: fuzz seed 772537).

    Example::

        >>> torch.float_power(sf.full((2,), 2., dtype=torch.bfloat16),
        ...                   torch.tensor(0.5, dtype=torch.float16)).to_dense()
        tensor([1.4142, 1.4142], dtype=torch.float64)
    """
    if out is not None:
        raise NotImplementedError("torch_sparsefill: float_power with out= is not implemented "
                                  "for SparseFillTensor; use out.copy_(torch.float_power(...))")
    complex_ = any(isinstance(t, complex) or (isinstance(t, torch.Tensor) and t.is_complex())
                   for t in (input, exponent))
    dtype = torch.complex128 if complex_ else torch.float64
    return torch.pow(*(t.to(dtype) if isinstance(t, torch.Tensor) else t
                       for t in (input, exponent)))


def _int_exponent(input, other) -> bool:
    """Whether ATen takes ldexp's integer-exponent kernel (std::ldexp: input's
    dtype, one rounding); else it computes ``input * 2 ** other``."""
    return input.dtype.is_floating_point and not other.dtype.is_floating_point \
        and not other.dtype.is_complex


def _power_of_two(input, other):
    """ATen's ldexp factor: ``2 ** other`` in float64 for an integer
    exponent (exact for every exponent in [-1074, 1023], clamped there: no
    float32 or half input comes back finite, or non-zero, from beyond, so
    the product rounds once, as std::ldexp does; a float64 input beyond it
    is the one case that can differ); else ATen's ``_pow2``: the power in
    other's dtype for an integer or float32 input, in input's dtype
    promoted with other's for the others (complex ones too: a float16
    exponent makes it complex32, which torch refuses)."""
    if _int_exponent(input, other):
        if other.dtype == torch.bool:  # ATen's kernel has no bool exponent
            torch.ldexp(torch.ones(1, dtype=input.dtype), torch.ones(1, dtype=torch.bool))
        return torch.pow(2.0, other.clamp(-1074, 1023).to(torch.float64))
    if not (input.dtype.is_floating_point or input.dtype.is_complex) \
            or input.dtype == torch.float32:
        return torch.pow(2.0, other)
    return torch.pow(torch.full((), 2.0, dtype=input.dtype, device=input.device), other)


def _ldexp(input, other, *, out=None):
    """``torch.ldexp(A, e)`` as ATen computes it (torch 2.13): with an integer
    exponent, A times 2 ** e in A's dtype, rounded once; else ``A * 2 ** e``
    with the power in e's dtype (a float16 exponent of 20 overflows to inf
    before the product promotes, as dense's does: fuzz seed 510512). The
    operands' own types decide, so the table's promote-first rule cannot
    route it.

    Example::

        >>> torch.ldexp(sf.full((2,), 3.), torch.tensor(2)).to_dense()
        tensor([12., 12.])
    """
    if out is not None:
        raise NotImplementedError("torch_sparsefill: ldexp with out= is not implemented for "
                                  "SparseFillTensor; use out.copy_(torch.ldexp(input, other))")
    factor = _power_of_two(input, other)
    if _int_exponent(input, other):
        return (input.to(torch.float64) * factor).to(input.dtype)
    return torch.mul(input, factor)


def _ldexp_(input, other):
    """``A.ldexp_(e)``: A times ``2 ** e`` in place (the product in the
    factor's dtype, then A's, as ATen's ldexp_out).

    Example::

        >>> sf.full((2,), 3.).ldexp_(torch.tensor(2.)).to_dense()
        tensor([12., 12.])
    """
    return input.mul_(_power_of_two(input, other))


def tensor_value(name: str, by_number):
    """``masked_fill`` with a 0-d tensor ``value`` (the table's rule takes a
    number): ``torch.where(mask, value, A)`` in A's dtype, which routes
    again, broadcasts as torch does and differentiates to the value; a
    number still goes to the table's ``by_number``. ``name`` ends in ``_``
    for the in-place method.

    Example::

        >>> A = sf.full((3,), 1.)
        >>> A.masked_fill(torch.tensor([True, False, True]), torch.tensor(2.)).to_dense()
        tensor([2., 1., 2.])
    """
    def handler(input, mask, value):
        if not isinstance(value, torch.Tensor):
            return by_number(input, mask, value)
        if value.dim() != 0:
            raise RuntimeError(f"{name} only supports a 0-dimensional value tensor, but got "
                               f"tensor with {value.dim()} dimension(s).")
        out = torch.where(mask, value.to(input.dtype), input)
        if not name.endswith("_"):
            return out
        if not isinstance(out, type(input)):  # as the number's rule refuses it
            raise NotImplementedError(f"torch_sparsefill: in-place {name} with a strided "
                                      f"mask would densify; use the out-of-place form")
        return input._adopt(out, name)
    return handler


ROUTES = {
    torch.Tensor.__rtruediv__: _rtruediv,
    torch.float_power: _float_power, torch.Tensor.float_power: _float_power,
    torch.ldexp: _ldexp, torch.Tensor.ldexp: _ldexp, torch.Tensor.ldexp_: _ldexp_,
}
