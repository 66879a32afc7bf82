"""What torch.nn and torch.optim call on parameters, buffers and their
gradients (RFC.md#models): ``F.linear``, the ``addcmul``/``addcdiv`` and
``torch._foreach_*`` ops the optimisers step with, the whole-tensor
``torch.linalg.vector_norm`` that gradient clipping takes, and ``is_sparse``.

Every ``torch._foreach_<op>`` over a list holding a SparseFillTensor runs
``<op>`` tensor by tensor, so ``foreach=True`` and ``foreach=False`` compute
the same thing through the same routed ops.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..tensor import args as _args
from .opmath import PRODUCTS, in_opmath
from . import decompositions as _decompositions
from .elementwise import handlers as _elementwise
from ..tensor import SparseFillTensor

T = torch.Tensor

__all__: list = []


# ---- modules ----------------------------------------------------------------------

@in_opmath(**PRODUCTS)  # x @ W.T + b rounded once, as ATen's addmm
def linear(input, weight, bias=None):
    """``F.linear(x, W, b)`` (``x @ W.T + b``) with a SparseFillTensor weight
    or input, through the fill-aware products; any leading dims of ``x``.

    Example::

        >>> W = sf.sparse_coo_tensor([[0], [1]], [2.], (2, 3), fill_value=1.)
        >>> F.linear(torch.ones(4, 3), W).shape
        torch.Size([4, 2])
    """
    if isinstance(weight, SparseFillTensor) and weight.dim() != 2:
        raise RuntimeError(f"linear(): weight must be a matrix, got a {weight.dim()}-D tensor")
    lead = tuple(input.shape[:-1])
    x = input.reshape(-1, input.shape[-1]) if input.dim() != 2 else input
    if isinstance(x, SparseFillTensor) and input.dim() != 2:
        raise NotImplementedError("torch_sparsefill: linear(): a SparseFillTensor input must be "
                                  "a matrix (batch, in_features)")
    out = torch.matmul(x, weight.t())
    if isinstance(out, SparseFillTensor) and bias is not None:
        out = out.to_dense()  # a bias over every row: the result is dense
    if bias is not None:
        out = out + (bias.to_dense() if isinstance(bias, SparseFillTensor) else bias)
    return out.reshape(*lead, out.shape[-1]) if input.dim() != 2 else out


# ---- the optimisers' arithmetic --------------------------------------------------------

@in_opmath(operands=3)
def addcmul(input, tensor1, tensor2, *, value=1):
    """``torch.addcmul``: ``input + value * tensor1 * tensor2`` element-wise
    (halves in float32, rounded once, as ATen's kernel)."""
    return input + (tensor1 * tensor2) * value


@in_opmath(operands=3)
def addcdiv(input, tensor1, tensor2, *, value=1):
    """``torch.addcdiv``: ``input + value * tensor1 / tensor2`` element-wise
    (halves in float32, rounded once, as ATen's kernel)."""
    return input + (tensor1 / tensor2) * value


def _in_place(out_of_place, func):
    def update(self, *args, **kwargs):
        # As the element-wise in-place ops: into the components when the
        # pattern stays, else the tensor adopts the result's (optimiser state
        # made by zeros_like stores nothing until its first update).
        if not isinstance(self, SparseFillTensor):
            raise NotImplementedError(f"torch_sparsefill: {_args.name(func)} into a strided "
                                      f"tensor from SparseFillTensor operands is not supported; "
                                      f"pass them .to_dense()")
        out = out_of_place(self, *args, **kwargs)
        if not isinstance(out, SparseFillTensor):
            # A strided operand that covers the sparse dims makes the result dense.
            raise NotImplementedError(f"torch_sparsefill: in-place {_args.name(func)} with a "
                                      f"strided operand that covers the sparse dims would "
                                      f"densify; use the out-of-place form")
        return _elementwise._assign(self, out, func)
    update.__doc__ = f"``{_args.name(func)}`` in place."
    return update


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    """``torch.linalg.vector_norm`` of a whole SparseFillTensor: every
    unspecified element counts as one copy of the fill (as ``torch.norm``)."""
    if out is not None:
        raise NotImplementedError("torch_sparsefill: linalg.vector_norm(out=...) is not "
                                  "supported for SparseFillTensor")
    if isinstance(ord, (int, float)) and not isinstance(ord, bool):
        # torch.norm's route, as dense's norms: the reference counts ord 0
        # with a boolean sum, cut from the graph (dense's count stays in it,
        # a zero gradient), and differentiates the root and the powers at 0
        # into NaN where dense's backward gives a zero norm, or a zero
        # element with ord < 1, the gradient 0 (clip_grad_norm_'s
        # _foreach_norm; fuzz seeds 204909, 205623, 314122)
        return torch.norm(x if dtype is None else x.to(dtype), p=ord, dim=dim, keepdim=keepdim)
    # torch's reference decomposition, each step routed: it accumulates a
    # half input in float32 as dense does (a float16 sum of squares overflows)
    return _decompositions.decompose(torch.linalg.vector_norm, (x, ord, dim, keepdim),
                                     {"dtype": dtype})


# ---- torch._foreach_* ---------------------------------------------------------------------

def _element(arg, i):
    """Argument `arg` of a foreach call for the i-th tensor: lists are zipped,
    anything else is the same for every tensor."""
    return arg[i] if isinstance(arg, (list, tuple)) else arg


def _scalars(value, i):
    """addcmul/addcdiv's `scalars`: a number, a list, or a 1-D tensor of numbers."""
    if isinstance(value, torch.Tensor) and not isinstance(value, SparseFillTensor) and \
            value.dim() == 1:
        return value[i].item()
    return _element(value, i)


def _foreach(func, method):
    value_arg = func.__name__.startswith(("_foreach_addcmul", "_foreach_addcdiv"))

    def each(*args, **kwargs):
        if value_arg and len(args) == 4:  # positional `scalars`: the methods' keyword `value`
            args, kwargs = args[:3], {**kwargs, "value": args[3]}
        n = len(next(a for a in args if isinstance(a, (list, tuple))))
        results = [method(*[_element(a, i) for a in args],
                          **{k: (_scalars(v, i) if value_arg and k == "value" else
                                 _element(v, i)) for k, v in kwargs.items()})
                   for i in range(n)]
        return None if func.__name__.endswith("_") else results
    each.__doc__ = f"``{_args.name(func)}``: ``{method.__name__}`` tensor by tensor."
    return each


def _norm(x, ord=2, dtype=None):
    return vector_norm(x, ord, dtype=dtype) if isinstance(x, SparseFillTensor) else \
        torch.linalg.vector_norm(x, ord, dtype=dtype)


def _foreach_routes() -> dict:
    routes = {torch._foreach_norm: _foreach(torch._foreach_norm, _norm)}
    for name in dir(torch):
        op = name[len("_foreach_"):]
        if not name.startswith("_foreach_") or name == "_foreach_norm":
            continue
        func = getattr(torch, name)
        if hasattr(T, op):
            routes[func] = _foreach(func, getattr(T, op))
        elif op.endswith("_") and hasattr(T, op[:-1]):  # maximum_: no method, the function
            routes[func] = _foreach(func, _in_place(getattr(T, op[:-1]), func))
    return routes


def non_finite_check_and_unscale_(grads, found_inf, inv_scale):
    """``GradScaler.unscale_``'s op: every gradient times ``inv_scale`` in
    place; ``found_inf`` set to 1 when any element of any gradient (a fill
    included) is inf or NaN."""
    for g in grads:
        if isinstance(g, SparseFillTensor):
            if not bool(torch.isfinite(g).all()):
                found_inf.fill_(1.0)
            g.mul_(inv_scale.to(g._sf_values.device))
        else:
            torch._amp_foreach_non_finite_check_and_unscale_([g], found_inf, inv_scale)


def is_sparse(self) -> bool:
    """``A.is_sparse``: True for the COO layout, as torch says; False for a
    gradient read from ``A.grad``, which has a value at every element: torch's
    optimisers read ``is_sparse`` gradients as masked (unspecified = no
    gradient) and refuse them (Adam) or step them differently (RFC.md#parameters)."""
    return self.layout == torch.sparse_coo and self._sf_grad_sink is None


ROUTES = {
    F.linear: linear,
    torch.addcmul: addcmul, T.addcmul: addcmul, T.addcmul_: _in_place(addcmul, T.addcmul_),
    torch.addcdiv: addcdiv, T.addcdiv: addcdiv, T.addcdiv_: _in_place(addcdiv, T.addcdiv_),
    torch.linalg.vector_norm: vector_norm,
    T.is_sparse.__get__: is_sparse,
    torch._amp_foreach_non_finite_check_and_unscale_: non_finite_check_and_unscale_,
    **_foreach_routes(),
}
