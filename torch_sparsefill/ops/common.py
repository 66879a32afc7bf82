"""What the op families of the Python half share (as aten_ext/ops/common/
does for the C++ half): the kernel of an op's ``<op>_autograd`` twin, and
the helpers of several families' fake kernels and Functions.

An op with a derivative of its own has an Autograd kernel in C++
(generated from tools/codegen/native.yaml) that calls the op below autograd when no gradient
is tracked (no Python on that path); otherwise it calls the op's twin
``<op>_autograd``, whose one kernel is registered here by :func:`register`
and applies the family module's Function:

- ``backward`` in differentiable ops (the library's ops and ATen), so a
  double backward is exact; the fill's gradient is always included;
- ``jvp``: forward-mode AD (``torch.autograd.forward_ad``, ``torch.func.jvp``);
- torch.func (``grad``, ``vjp``, ``jacrev``, ``jacfwd``, ``vmap`` of those):
  the Function is applied at the transform's level, as
  ``torch._functorch.autograd_function`` applies an ``autograd.Function``
  (one level at a time, ``_SingleLevelFunction``): the Autograd kernel runs
  inside the transform, below the point where ``Function.apply`` could hand
  it to functorch. ``vmap`` of the op itself goes through functorch's
  batching fallback (a loop over the batch).

Example::

    >>> import torch, torch_sparsefill as sf
    >>> A = sf.sparse_csr_tensor([0, 1, 2], [1, 0], [2., 3.], (2, 2), fill_value=1.)
    >>> W = torch.ones(2, 2, requires_grad=True)
    >>> torch.func.grad(lambda W: (A @ W).sum())(W)
    tensor([[4., 4.],
            [3., 3.]])
"""
import contextlib

import torch
import torch.autograd.forward_ad as fwAD
from torch._C import _functorch

_LIB = torch.library.Library("sparsefill", "IMPL")


def below(op, *args):
    """The op's own kernel (below its Autograd kernel): a Function's forward.
    Inside a torch.func transform the call goes on to the levels below this
    one, which record it (their own Function) as they would any op: with
    gradients on there, as torch._functorch.autograd_function's forward does
    (a Function's forward runs with them off)."""
    if not torch._C._are_functorch_transforms_active():
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)
    with torch.enable_grad(), fwAD._set_fwd_grad_enabled(True), \
            torch._C._AutoDispatchBelowAutograd():
        return op(*args)




@contextlib.contextmanager
def _at_this_level():
    # A Function applied inside a torch.func transform records at the
    # transform's level only (functorch allows it while the flag is set).
    if not torch._C._are_functorch_transforms_active():
        yield
        return
    before = _functorch.get_single_level_autograd_function_allowed()
    _functorch.set_single_level_autograd_function_allowed(True)
    try:
        yield
    finally:
        _functorch.set_single_level_autograd_function_allowed(before)



def register(name, function):
    """Register `function` (a ``_SingleLevelFunction``) as the kernel of the
    op's twin ``sparsefill::<name>_autograd``."""
    def kernel(*args):
        with _at_this_level():
            return function.apply(*args)
    kernel.__name__ = f"{name}_autograd"
    _LIB.impl(f"{name}_autograd", kernel, "CompositeImplicitAutograd")


def register_backward_only(name, setup_context, backward, instead):
    """The Autograd kernel of ``sparsefill::<name>``, an op whose derivative
    is a backward only: backward (double too, where `backward` uses
    differentiable ops), torch.func.grad/vjp/jacrev work; forward AD and
    torch.func.jvp/jacfwd raise, naming `instead`. torch.library's
    register_autograd would drop a forward-mode tangent silently (a zero
    jvp) and refuse torch.func.grad.

    Example::

        >>> register_backward_only("bsr_spmm", _setup, _backward,
        ...                        "multiply the SparseFillTensor instead: A @ x")
    """
    op = getattr(torch.ops.sparsefill, name).default

    def jvp(ctx, *tangents):
        raise RuntimeError(f"sparsefill::{name} has no forward-mode derivative (forward AD, "
                           f"torch.func.jvp, jacfwd); {instead}")
    function = type(f"_{name}", (torch.autograd.function._SingleLevelFunction,), {
        "forward": staticmethod(lambda *args: below(op, *args)),
        "setup_context": staticmethod(setup_context),
        "backward": staticmethod(backward), "jvp": staticmethod(jvp)})

    def kernel(*args):
        with _at_this_level():
            return function.apply(*args)
    kernel.__name__ = f"{name}_autograd_kernel"
    _LIB.impl(name, kernel, "Autograd")


def differentiated():
    """Whether what a backward computes may itself be differentiated (a
    graph recorded, a forward-mode tangent, a torch.func transform): then it
    must use differentiable ops, not a C-core kernel without a derivative."""
    return (torch.is_grad_enabled() or torch._C._are_functorch_transforms_active()
            or fwAD._current_level >= 0)



def untracked(*tensors) -> bool:
    """Whether no gradient of these tensors is tracked (the rule of
    ops/common/tracking.h, for Python routes to a native kernel without a
    derivative): no torch.func transform, no forward-mode level, and grad
    mode off or none of them requiring grad.

    Example::

        >>> untracked(torch.ones(2, requires_grad=True))
        False
    """
    if transformed():
        return False
    return not (torch.is_grad_enabled() and any(t.requires_grad for t in tensors))


def transformed():
    """Whether a torch.func transform or forward-mode AD is active: then an
    op with a backward only (:func:`register_backward_only`: no jvp) must
    not be called; the callers take ops
    with an ``<op>_autograd`` twin instead.

    Example::

        >>> with torch.autograd.forward_ad.dual_level():
        ...     transformed()
        True
    """
    return torch._C._are_functorch_transforms_active() or fwAD._current_level >= 0


def zero_or(t, like):
    """t, or zeros like `like` where a gradient is None."""
    return torch.zeros_like(like) if t is None else t


def dynamic_size():
    """A fake kernel's data-dependent size (an unbacked SymInt)."""
    return torch.library.get_ctx().new_dynamic_size()


def rows_of_segments(seg_ptr, nse):
    """The segment of each stored row (seg_ptr a CSR row pointer), sized by
    nse so that traced shapes stay those of the values."""
    p = seg_ptr.long()
    return torch.repeat_interleave(torch.arange(p.shape[0] - 1, device=p.device),
                                   p[1:] - p[:-1], output_size=nse)
