"""Double backward of every differentiable registered op: exact or raising,
never silently wrong (issue 15, deliverable "gradgradcheck of every
differentiable registered op").

The ops are enumerated from the dispatcher's registry (every
`sparsefill::` op with an autograd kernel, or a composite one that
autograd differentiates through), so a new op joins by itself: the coverage
test fails until it has a sample here. Element-wise ops (every variant the
YAML generates: union, _same, _scalar, _dense, ternary) get their samples
from their schema and their YAML spec; the others from programs of the
public API that call them. float64, torch.autograd.gradgradcheck.
"""
import math

import pytest
import torch
from torch.autograd.gradcheck import GradcheckError
from torch.utils._python_dispatch import TorchDispatchMode

import sf_testing as T
import test_elementwise_generated as G
import torch_sparsefill as sf

pytestmark = pytest.mark.cpu_only(reason="float64 numerical checks; the CPU pass covers the math")

F64 = torch.float64
SPECS = {s.name: s for k, s in vars(G).items() if k.startswith("SPEC_")}


def _registry():
    """Every sparsefill op autograd differentiates: {name: dispatch key}."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    out = {}
    for qualified in torch._C._dispatch_get_all_op_names():
        if not qualified.startswith("sparsefill::"):
            continue
        for key in ("Autograd", "CompositeImplicitAutograd"):
            if has(qualified, key):
                out[qualified.split("::")[1]] = key
                break
    return out


REGISTRY = _registry()


# ---- element-wise: samples from the schema ---------------------------------------

def _base(name):
    for suffix in ("_same", "_scalar", "_dense"):
        if name.endswith(suffix) and name[: -len(suffix)] in SPECS:
            return name[: -len(suffix)], suffix
    return (name, "") if name in SPECS else (None, None)


def _leaf(t):
    return t.detach().clone().requires_grad_()


def _operand(seed, n, domain, mask=False):
    g = torch.Generator().manual_seed(seed)
    v = torch.rand(n, generator=g, dtype=F64) * 1.5 - 0.2
    f = torch.tensor(0.37 + 0.1 * seed, dtype=F64)
    if mask:
        return v > 0.5, torch.tensor(seed % 2 == 0)
    return _leaf(T._in_domain(v, domain)), _leaf(T._in_domain(f, domain))


SIZE = [3, 4]
INDICES = [torch.tensor([[0, 1, 2, 2], [1, 0, 0, 3]]), torch.tensor([[0, 1, 2], [1, 2, 3]]),
           torch.tensor([[1, 2], [0, 3]])]


def _elementwise_samples(name):
    """(function of float64 leaves returning float outputs, leaves) pairs."""
    base, suffix = _base(name)
    spec = SPECS[base]
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
            vb, fb = _leaf(-vb.detach() - 1), _leaf(-fb.detach() - 1)
            vc, fc = _leaf(vc.detach() + 2), _leaf(fc.detach() + 2)
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
        d = _leaf(T._in_domain(torch.tensor(1.3, dtype=F64), spec.domain))
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


# Real-valued ops: the complex, integer and boolean ones are checked by
# test_elementwise_generated.py (complex gradcheck; no gradient out of the
# others).
ELEMENTWISE = sorted(n for n in REGISTRY if _base(n)[0] is not None
                     and SPECS[_base(n)[0]].dtypes in ("float", "mask"))
NOT_REAL = sorted(n for n in REGISTRY if _base(n)[0] is not None and n not in ELEMENTWISE)


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
    except RuntimeError as e:  # a refusal: the error must say what is unsupported
        assert "sparsefill" in str(e) or "not" in str(e), e


@pytest.mark.parametrize("name", ELEMENTWISE)
def test_elementwise_double_backward(name):
    spec = SPECS[_base(name)[0]]
    for fn, inputs in _elementwise_samples(name):
        if not spec.differentiable and not any(o.requires_grad for o in fn(*inputs)):
            continue  # piecewise constant (floor_divide, ...): no gradient flows out
        # Differentiable, or piecewise constant with a gradient that must be 0 exactly.
        _exact_or_raising(fn, inputs)


# ---- the other ops: programs of the public API -------------------------------------

_g = torch.Generator().manual_seed(0)
_CROW, _COL = torch.tensor([0, 2, 2, 4]), torch.tensor([0, 3, 1, 2])
_V = torch.rand(4, generator=_g, dtype=F64) + 0.5
_FILL = torch.tensor(0.7, dtype=F64)
_X = torch.rand(4, 2, generator=_g, dtype=F64)
_Y = torch.rand(2, 3, generator=_g, dtype=F64)


def _csr(v, f):
    return sf.sparse_csr_tensor(_CROW, _COL, v, (3, 4), fill_value=f)


def _coo(v, f):
    return _csr(v, f).to_sparse_coo()


PROGRAMS = {
    "spmm": (lambda v, f, x: _csr(v, f) @ x, (_V, _FILL, _X), None),
    "dense_spmm": (lambda v, f, y: y @ _csr(v, f), (_V, _FILL, _Y), None),
    # BSR @ dense: 2 x 4 in 1 x 2 blocks, one per block row.
    "bsr_spmm": (lambda v, f, x: sf.sparse_bsr_tensor([0, 1, 2], [1, 0], v.view(2, 1, 2), (2, 4),
                                                      fill_value=f) @ x, (_V, _FILL, _X), None),
    "sparse_mm_sparse": (lambda v, f, w: (_csr(v, f) @ _csr(w, f * 2).t().to_sparse_csr())
                         .to_dense(), (_V, _FILL, _V.flip(0)), None),
    "spgemm": (lambda v, w: (_csr(v, 0.0) @ _csr(w, 0.0).t().to_sparse_csr()).to_dense(),
               (_V, _V.flip(0)), None),
    # X Y^T sampled on a pattern (sampled products, attention scores).
    "sddmm": (lambda x, y: sf.sampled_matmul(x, y, _csr(_V, 0.0), fill_value=0.5).to_dense(),
              (_X[:3].clone(), _Y[:, :1].expand(2, 4).clone() + _X[:2, :1]), None),
    # The fused attention op (SDPA with a -inf mask on the CPU); row 1 is empty.
    "sparse_attention": (lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=sf.sparse_csr_tensor(_CROW, _COL, _V - 1, (3, 4),
                                                fill_value=-math.inf)),
        (_X[:3].clone(), _X.flip(0).clone(), _X * 2), None),
    # No element of x equals the fill: at one that does, a perturbation
    # changes the pattern and the fill's one gradient is shared by the
    # unspecified elements (RFC.md section 7.4), which gradcheck cannot see.
    "from_dense": (lambda x: sf.to_sparse(x, fill_value=0.5).to_dense() ** 2,
                   (torch.tensor([[0.75, 1.25], [2.0, -1.0]], dtype=F64),), None),
    "sum-dim0": (lambda v, f: _coo(v, f).sum(0).to_dense(), (_V, _FILL), None),
    "sum-all": (lambda v, f: _coo(v, f).sum(), (_V, _FILL), None),
    "mean-dim1": (lambda v, f: _coo(v, f).mean(1).to_dense(), (_V, _FILL), None),
    "prod-dim1": (lambda v, f: _coo(v, f).prod(1).to_dense(), (_V, _FILL), None),
    "var-dim0": (lambda v, f: _coo(v, f).var(0).to_dense(), (_V, _FILL), None),
    "amax-dim0": (lambda v, f: _coo(v, f).amax(0).to_dense(), (_V, _FILL), None),
    "max-all": (lambda v, f: _coo(v, f).max(), (_V, _FILL), None),
    "logsumexp": (lambda v, f: torch.logsumexp(_coo(v, f), 1).to_dense(), (_V, _FILL), None),
    "softmax": (lambda v, f: torch.softmax(_csr(v, f), -1).to_dense(), (_V, _FILL), None),
    "log_softmax-dim0": (lambda v, f: torch.log_softmax(_coo(v, f), 0).to_dense(),
                         (_V, _FILL), None),
    "coalesce": (lambda v, f: sf.sparse_coo_tensor([[0, 0, 1, 2], [1, 1, 0, 3]], v, (3, 4),
                                                   fill_value=f).coalesce().to_dense(),
                 (_V, _FILL), None),
    "eliminate_fill": (lambda v, f: _coo(v, f).eliminate_fill().to_dense(), (_V, _FILL), None),
    "union-mul": (lambda v, f, w: (_coo(v, f) * sf.sparse_coo_tensor(
        [[0, 2], [1, 2]], w[:2], (3, 4), fill_value=f)).to_dense(), (_V, _FILL, _V.flip(0)), None),
    "to_dense": (lambda v, f: _coo(v, f).to_dense() ** 2, (_V, _FILL), None),
    "gather_with_fill": (lambda v, f: torch.ops.sparsefill.gather_with_fill(
        v, f, torch.tensor([2, -1, 0, -1, 3])) ** 2, (_V, _FILL), None),
}

# Composite ops decompose before a dispatch mode sees them: the program that
# calls each.
COMPOSITE_CALLERS = {"dense_spmm": "dense_spmm", "coo_coalesce": "coalesce",
                     "eliminate_fill": "eliminate_fill", "sparse_mm_dense": "sparse_mm_sparse",
                     "to_dense": "to_dense", "gather_with_fill": "gather_with_fill"}


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
        out = fn(*[_leaf(t) for t in inputs])
        if out.requires_grad:
            out.sum().backward()
    return rec.seen


@pytest.mark.parametrize("name", [pytest.param(n, marks=m) if m else n
                                  for n, (_, _, m) in PROGRAMS.items()])
def test_program_double_backward(name):
    fn, inputs, _ = PROGRAMS[name]
    _exact_or_raising(fn, tuple(_leaf(t) for t in inputs))


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
