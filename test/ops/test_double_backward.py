"""Double backward of every differentiable registered op: exact or raising,
never silently wrong.

The ops are enumerated from the dispatcher's registry (every
`sparsefill::` op with an autograd kernel, or a composite one that
autograd differentiates through), so a new op joins by itself: the coverage
test fails until it has a sample here. Element-wise ops (every variant the
YAML generates: union, _same, _scalar, _dense, ternary) get their samples
from their schema and their YAML spec; the others from programs of the
public API that call them. float64, torch.autograd.gradgradcheck.
"""

import re

import pytest
import torch
from torch.autograd.gradcheck import GradcheckError
from torch.utils._python_dispatch import TorchDispatchMode

import sf_testing as T
from sf_testing.elementwise import OPS, in_domain
from sf_testing.native import (COMPOSITE_CALLERS, ELEMENTWISE, NOT_REAL, PROGRAMS, REGISTRY,
                               variant_of)

pytestmark = pytest.mark.cpu_only(reason="float64 numerical checks; the CPU pass covers the math")

F64 = torch.float64


# ---- element-wise: samples from the schema ---------------------------------------

def _operand(seed, n, domain, mask=False):
    g = torch.Generator().manual_seed(seed)
    v = torch.rand(n, generator=g, dtype=F64) * 1.5 - 0.2
    f = torch.tensor(0.37 + 0.1 * seed, dtype=F64)
    if mask:
        return v > 0.5, torch.tensor(seed % 2 == 0)
    return T.leaf(in_domain(v, domain)), T.leaf(in_domain(f, domain))


SIZE = [3, 4]
INDICES = [torch.tensor([[0, 1, 2, 2], [1, 0, 0, 3]]), torch.tensor([[0, 1, 2], [1, 2, 3]]),
           torch.tensor([[1, 2], [0, 3]])]


def _elementwise_samples(name):
    """(function of float64 leaves returning float outputs, leaves) pairs."""
    base, suffix = variant_of(name)
    spec = OPS[base]
    op = getattr(torch.ops.sparsefill, name).default
    args = tuple(spec.test_args)
    mask_b = spec.dtypes == "mask" and spec.kind == "binary"
    mask_a = spec.dtypes == "mask" and spec.kind == "ternary"
    va, fa = _operand(1, 4, spec.domain, mask=mask_a)
    if spec.kind == "unary":
        return [(lambda va, fa: op(va, fa, *args), (va, fa))]
    if spec.kind == "ternary":
        vb, fb = _operand(2, 3, spec.domain)
        vc, fc = _operand(3, 2, spec.domain)
        if base == "clamp_tensor":  # min below max everywhere
            vb, fb = T.leaf(-vb.detach() - 1), T.leaf(-fb.detach() - 1)
            vc, fc = T.leaf(vc.detach() + 2), T.leaf(fc.detach() + 2)
        ia, ib, ic = INDICES

        def ternary(*leaves):
            it = iter(leaves)
            parts = []
            for idx, v, f in ((ia, va, fa), (ib, vb, fb), (ic, vc, fc)):
                if v.dtype == torch.bool:
                    parts += [idx, v, f]
                else:
                    parts += [idx, next(it), next(it)]
            return op(*parts, SIZE)[:2]

        leaves = tuple(t for t in (va, fa, vb, fb, vc, fc) if t.dtype != torch.bool)
        return [(ternary, leaves)]
    n_b = 4 if suffix == "_same" else 3
    vb, fb = _operand(2, n_b, spec.domain, mask=mask_b)
    if suffix == "_scalar":
        return [(lambda va, fa, r=r: op(va, fa, 1.75, r, *args), (va, fa)) for r in (False, True)]
    if suffix == "_dense":
        d = T.leaf(in_domain(torch.tensor(1.3, dtype=F64), spec.domain))
        if mask_b:
            return [(lambda va, fa: op(va, fa, torch.tensor(True), False, *args), (va, fa))]
        return [(lambda va, fa, d, r=r: op(va, fa, d, r, *args), (va, fa, d))
                for r in (False, True)]
    if mask_b:
        if suffix == "_same":
            return [(lambda va, fa: op(va, fa, vb, fb, *args), (va, fa))]
        return [(lambda va, fa: op(INDICES[0], va, fa, INDICES[1], vb, fb, SIZE, *args)[:2],
                 (va, fa))]
    if suffix == "_same":
        return [(lambda va, fa, vb, fb: op(va, fa, vb, fb, *args), (va, fa, vb, fb))]
    return [(lambda va, fa, vb, fb: op(INDICES[0], va, fa, INDICES[1], vb, fb, SIZE, *args)[:2],
             (va, fa, vb, fb))]


def _gradgradcheck(fn, inputs):
    # First order, then second: a failure says which.
    assert torch.autograd.gradcheck(fn, inputs), "first order"
    assert torch.autograd.gradgradcheck(fn, inputs), "second order"


def _exact_or_raising(fn, inputs):
    """gradgradcheck passes, or the double backward raises a clear error
    (never a numerical mismatch: that is a silently wrong result)."""
    try:
        _gradgradcheck(fn, inputs)
    except GradcheckError:
        raise
    except RuntimeError as e:
        # A refusal is ours and says what is unsupported. "does not require
        # grad" / "does not have a grad_fn" is what a double backward that
        # lost its graph gives: never a refusal.
        assert is_refusal(str(e)), e


BROKEN_GRAPH = ("does not require grad", "does not have a grad_fn")
# torch's own refusal of a derivative it lacks (hardsigmoid's second order,
# floor_divide's first; derivatives.yaml's not_implemented("igamma: input"),
# zeta's in its first operand): dense torch refuses the same program.
TORCH_REFUSES = re.compile(r"^(derivative for aten::\w+ is not implemented|"
                           r"the derivative for '[\w: ]+' is not implemented\.)$")


def is_refusal(message: str) -> bool:
    """Whether a double backward's error is a refusal (the package's, naming
    sparsefill, or torch's own missing derivative) rather than a graph that
    was cut."""
    if any(b in message for b in BROKEN_GRAPH):
        return False
    return "sparsefill" in message or bool(TORCH_REFUSES.match(message.strip()))


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_double_backward(name):
    spec = OPS[variant_of(name)[0]]
    for fn, inputs in _elementwise_samples(name):
        if not spec.differentiable and not any(o.requires_grad for o in fn(*inputs)):
            continue  # piecewise constant (floor_divide, ...): no gradient flows out
        # Differentiable, or piecewise constant with a gradient that must be 0 exactly.
        _exact_or_raising(fn, inputs)


# ---- the other ops: programs of the public API -------------------------------------

class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "sparsefill":
            self.seen.add(func._schema.name.split("::")[1])
        return func(*args, **(kwargs or {}))


def _ops_called(name):
    """The ops a program calls, forward and first-order backward: an op only
    a backward calls (sparse_attention_backward, which refuses its own
    gradient; test_attention.py checks the refusal) is covered by the
    program whose gradcheck runs it and whose double backward records
    differentiable ops instead."""
    fn, inputs, _ = PROGRAMS[name]
    with _Recorder() as rec:
        out = fn(*[T.leaf(t) for t in inputs])
        if out.requires_grad:
            out.sum().backward()
    return rec.seen


@pytest.mark.parametrize("name", [pytest.param(n, marks=m) if m else n
                                  for n, (_, _, m) in PROGRAMS.items()])
def test_program_double_backward(name):
    fn, inputs, _ = PROGRAMS[name]
    _exact_or_raising(fn, tuple(T.leaf(t) for t in inputs))


def test_every_differentiable_op_is_covered():
    """Enumerated from the registry: an op with a derivative and no sample
    here fails this test."""
    covered = set(ELEMENTWISE) | set(NOT_REAL) | set(COMPOSITE_CALLERS)
    for name in PROGRAMS:
        covered |= _ops_called(name)
    # An op's `<op>_autograd` twin (what its Autograd kernel calls to record,
    # torch_sparsefill/_autograd.py) is what the op's samples differentiate.
    covered |= {f"{name}_autograd" for name in covered}
    missing = sorted(set(REGISTRY) - covered)
    assert not missing, f"differentiable ops without a double-backward sample: {missing}"
    for op, program in COMPOSITE_CALLERS.items():
        assert REGISTRY.get(op) == "CompositeImplicitAutograd", op
        assert program in PROGRAMS
