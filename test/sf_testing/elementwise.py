"""Shared test machinery: random SparseFillTensors over named cases, the dense
reference checks, gradchecks and opchecks that the generated per-op tests call.

The oracle is always the dense computation: op(A).to_dense() == op(A.to_dense()),
and gradients equal the dense computation's (fill gradient = sum of the dense
gradient over the unspecified elements).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

import torch_sparsefill as sf

LAYOUTS = [torch.sparse_coo, torch.sparse_csr]
# The compressed layouts beyond CSR (RFC.md section 15). random_tensor makes
# them (block layouts with BLOCKSIZE, non-square so that a swapped block
# shows); the generated tests run them over EXTRA_CASES. A shared test
# covers them by parametrizing over ALL_LAYOUTS (or LAYOUT_CASES) and
# building its operands with random_tensor / leaf_parts + build_leaf.
EXTRA_LAYOUTS = [torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc]
ALL_LAYOUTS = LAYOUTS + EXTRA_LAYOUTS
BLOCK_LAYOUTS = (torch.sparse_bsr, torch.sparse_bsc)
BLOCKSIZE = (2, 3)
FILLS = [0.0, 1.5, -2.0, math.inf, -math.inf, math.nan]
# Real matrices from the SuiteSparse collection, kept in the repository
# (test/data/README.md); override with SPARSEFILL_MATRICES. Tests that use
# them fail, never skip, when missing.
MATRICES = Path(os.environ.get("SPARSEFILL_MATRICES",
                               Path(__file__).resolve().parent / "data" / "matrices"))


def rng(seed: int) -> torch.Generator:
    """A seeded generator on the device the tests run on (see conftest.py):
    random inputs are drawn there, so the CUDA pass draws other numbers than
    the CPU pass, both deterministic."""
    return torch.Generator(device=torch.get_default_device()).manual_seed(seed)


def on_test_device(x):
    """x (a tensor or SparseFillTensor built on the CPU, e.g. from scipy) moved
    to the device the tests run on."""
    return x.to(torch.get_default_device())


@dataclass(frozen=True)
class Case:
    pattern: str  # empty | one | random | full | duplicates | hybrid
    fill: float


CASES = [Case(p, f) for p in ("empty", "one", "random", "full", "duplicates", "hybrid")
         for f in FILLS]


# Fewer cases per extra layout: the conversions to CSR are tested in full
# elsewhere, so each op sees every pattern kind and every non-finite fill.
EXTRA_CASES = [Case("random", f) for f in FILLS] + [
    Case("hybrid", 1.5), Case("hybrid", -math.inf), Case("empty", math.nan),
    Case("one", -2.0), Case("full", 0.0)]


@dataclass(frozen=True)
class Batched:
    """A batched compressed layout in the test matrices (RFC.md 15.4):
    random_tensor makes a tensor of `layout` with a leading batch dim of 2
    whose batches have different patterns (so they are padded), with one fill
    per batch when `per_batch` (the case's fill and 0.25)."""
    layout: torch.layout
    per_batch: bool = False


BATCHED_LAYOUTS = [Batched(torch.sparse_csr), Batched(torch.sparse_csc, per_batch=True),
                   Batched(torch.sparse_bsr, per_batch=True), Batched(torch.sparse_bsc)]
# Each batched layout sees a finite and a non-finite fill; together they see
# every non-finite fill, a hybrid tensor and per-batch fills.
BATCHED_CASES = [
    (Case("random", 1.5), BATCHED_LAYOUTS[0]), (Case("hybrid", math.nan), BATCHED_LAYOUTS[0]),
    (Case("random", -math.inf), BATCHED_LAYOUTS[1]), (Case("random", -2.0), BATCHED_LAYOUTS[2]),
    (Case("random", math.inf), BATCHED_LAYOUTS[2]), (Case("random", 0.0), BATCHED_LAYOUTS[3]),
    (Case("hybrid", math.inf), BATCHED_LAYOUTS[3])]
LAYOUT_CASES = [(c, lay) for lay in LAYOUTS for c in CASES] + \
    [(c, lay) for lay in EXTRA_LAYOUTS for c in EXTRA_CASES] + BATCHED_CASES


def case_id(case: Case) -> str:
    return f"{case.pattern}-fill{case.fill}"


def layout_id(layout) -> str:
    if isinstance(layout, Batched):
        return "batched-" + layout_id(layout.layout) + ("-per-batch" if layout.per_batch else "")
    return str(layout).split("_")[-1]


def base_layout(layout) -> torch.layout:
    """The torch layout of a test layout (a Batched one's own)."""
    return layout.layout if isinstance(layout, Batched) else layout


def layout_case_id(x) -> str:
    return layout_id(x) if isinstance(x, (torch.layout, Batched)) else case_id(x)


def size_for_layout(size, layout):
    """`size` rounded up to multiples of BLOCKSIZE for a block layout."""
    if layout not in BLOCK_LAYOUTS:
        return tuple(size)
    return tuple(-(-s // b) * b for s, b in zip(size, BLOCKSIZE))


def random_tensor(pattern: str, fill, layout=torch.sparse_coo, *, dtype=torch.float64,
                  seed: int = 0, size=(5, 7), domain: str = "real",
                  requires_grad: bool = False) -> sf.SparseFillTensor:
    """A SparseFillTensor of a named pattern. Stored values never equal the
    fill, so the pattern survives round trips through dense."""
    if isinstance(layout, Batched):
        return _batched_random_tensor(pattern, fill, layout, dtype=dtype, seed=seed, size=size,
                                      domain=domain, requires_grad=requires_grad)
    g = rng(seed)
    rows, cols = size_for_layout(size, layout)
    dense_shape = (3,) if pattern == "hybrid" else ()
    if pattern == "empty":
        idx = torch.zeros(2, 0, dtype=torch.int64)
    elif pattern == "one":
        idx = torch.tensor([[rows // 2], [cols - 1]])
    elif pattern == "full":
        idx = torch.cartesian_prod(torch.arange(rows), torch.arange(cols)).t()
    else:
        mask = torch.rand(rows, cols, generator=g) < 0.35
        idx = mask.nonzero().t()
    nse = idx.shape[1]
    values = torch.randn((nse,) + dense_shape, generator=g, dtype=torch.float64)
    if domain == "positive":
        values = values.abs() + 0.1
    values = values.to(dtype)
    if pattern == "duplicates" and layout == torch.sparse_coo and nse > 1:
        # Repeat some entries, shuffled: the tensor is uncoalesced.
        extra = idx[:, : nse // 2]
        idx = torch.cat([idx, extra], 1)
        values = torch.cat([values, torch.randn(extra.shape[1], generator=g,
                                                dtype=torch.float64).to(dtype)])
        perm = torch.randperm(idx.shape[1], generator=g)
        idx, values = idx[:, perm], values[perm]
    fill_t = torch.full(dense_shape[-1:] if pattern == "hybrid" else (), fill, dtype=dtype)
    if pattern == "hybrid":
        fill_t[0] = 0.5 if not math.isnan(fill) else fill
    if domain == "positive" and not (fill > 0):
        fill_t = torch.full_like(fill_t, 0.75)
    A = sf.sparse_coo_tensor(idx, values, (rows, cols) + dense_shape, fill_value=fill_t,
                             requires_grad=requires_grad)
    return A.to_sparse(layout=layout, blocksize=BLOCKSIZE if layout in BLOCK_LAYOUTS else None)


def _batched_random_tensor(pattern, fill, layout: Batched, *, dtype, seed, size, domain,
                           requires_grad):
    """Two batches of random_tensor's patterns (seeds `seed` and `seed` + 11)
    as one batched tensor of `layout` (through strided: the padding of
    RFC.md 15.4 makes the batches' nse equal)."""
    parts = [random_tensor(pattern, fill, layout.layout, dtype=dtype, seed=seed + 11 * b,
                           size=size, domain=domain) for b in range(2)]
    x = torch.stack([p.to_dense() for p in parts])
    f = parts[0]._fill_value()
    dense_dim = parts[0].dense_dim()
    if layout.per_batch:
        f = torch.stack([f.expand(parts[0]._dense_shape()),
                         torch.full(parts[0]._dense_shape(), 0.25, dtype=f.dtype)])
        f = f.reshape((2, 1, 1) + tuple(f.shape[1:]))
        v, f1 = parts[1]._values(), parts[1]._fill_value()
        stored = parts[1]._with(torch.zeros_like(v), torch.ones_like(f1)).to_dense() == 0
        x[1] = torch.where(stored, x[1], f[1])
    A = sf.to_sparse(x, fill_value=f, layout=layout.layout, dense_dim=dense_dim,
                     blocksize=BLOCKSIZE if layout.layout in BLOCK_LAYOUTS else None)
    return A.detach().requires_grad_() if requires_grad else A


def assert_dense_equal(actual: torch.Tensor, expected: torch.Tensor, **kw):
    assert not isinstance(actual, sf.SparseFillTensor)
    assert actual.layout == torch.strided
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    torch.testing.assert_close(actual, expected, equal_nan=True, **kw)


# ---- element-wise checks used by the generated tests ------------------------

@dataclass(frozen=True)
class OpSpec:
    """What the generated tests need to know about one YAML op."""
    name: str
    func: object
    kind: str
    domain: str = "real"
    dtypes: str = "float"
    scalars: tuple = (2.5, -3, 0)
    test_args: tuple = ()
    reflected: tuple = ()
    differentiable: bool = True
    smooth: bool = False
    number: bool = True


def _retype(A: sf.SparseFillTensor, dtypes: str, domain: str) -> sf.SparseFillTensor:
    """A test tensor of the op's dtype family and input domain."""
    v, f = A._values().detach(), A._fill_value().detach()
    if dtypes == "bool":
        v, f = v > 0, torch.nan_to_num(f, nan=1.0) != 0
    elif dtypes == "int":
        v = (v * 5).round().to(torch.int64)
        f = torch.nan_to_num(f, nan=5.0, posinf=3.0, neginf=-3.0).round().to(torch.int64)
    elif dtypes == "complex":
        v = torch.complex(v, v.flip(0) if v.shape[0] else v)
        f = torch.complex(f, torch.full_like(f, 0.5))
    else:
        v = _in_domain(v, domain)
    return A._with(v, f)


def _in_domain(v, domain):
    if domain == "positive":
        return v.abs() + 0.1
    if domain == "unit":
        return torch.tanh(v) * 0.9
    if domain == "unit01":
        return torch.sigmoid(v) * 0.8 + 0.1
    if domain == "ge1":
        return v.abs() + 1.1
    return v


def _operand(case: Case, layout, spec: OpSpec, seed=0):
    A = random_tensor(case.pattern, case.fill, layout, seed=seed)
    return _retype(A.coalesce() if layout == torch.sparse_coo and case.pattern != "duplicates"
                   else A, spec.dtypes, spec.domain)


def _second_operands(A: sf.SparseFillTensor, case: Case, layout, spec: OpSpec):
    """Second operands of a binary op: other patterns, the same pattern, numbers,
    and strided tensors over the dense part and over everything."""
    pattern = case.pattern if case.pattern != "duplicates" else "random"
    if spec.dtypes == "mask":
        def mask(seed, fill):
            M = random_tensor(pattern, fill, layout, seed=seed)
            return M._with(M._values() > 0, M._fill_value() != 0)
        B = [mask(1, 1.0), mask(2, 0.0)]
        dense = A.to_dense() > 0.3
        return B + [dense, dense[(0,) * A.sparse_dim()]]
    out = []
    for seed, fill in ((1, 6.0), (2, case.fill), (3, -math.inf)):
        out.append(_retype(random_tensor(pattern, fill, layout, seed=seed), spec.dtypes,
                           spec.domain))
    base = A.coalesce() if layout == torch.sparse_coo else A
    out.append(_retype(base._with(base._values().flip(0), base._fill_value() * 0.5 + 1),
                       spec.dtypes, spec.domain))
    out += list(spec.scalars)
    dense = out[0].to_dense()
    out.append(dense[(0,) * A.sparse_dim()].clone())  # over the dense part
    out.append(dense)                                  # over everything: a dense result
    return out


def _dense(x):
    return x.to_dense() if isinstance(x, sf.SparseFillTensor) else x


def _compare(out, expected):
    if isinstance(out, sf.SparseFillTensor):
        out = out.to_dense()
    assert_dense_equal(out, expected)


def _ternary_operands(A, case, layout, spec):
    """Operand triples for a ternary op: SparseFillTensors of other patterns,
    numbers, dense-part tensors, and a strided tensor covering everything."""
    pattern = case.pattern if case.pattern != "duplicates" else "random"
    B = _retype(random_tensor(pattern, 6.0, layout, seed=1), "float", spec.domain)
    C = _retype(random_tensor(pattern, -1.0, layout, seed=2), "float", spec.domain)
    if spec.dtypes == "mask":  # where(condition, input, other)
        M = random_tensor(pattern, 1.0, layout, seed=3)
        M = M._with(M._values() > 0, M._fill_value() != 0)
        part = C.to_dense()[(0,) * A.sparse_dim()]
        return [(M, A, B), (M, A, 2.5), (M, -1.0, B), (M, A, part), (M.to_dense(), A, B)]
    part = C.to_dense()[(0,) * A.sparse_dim()].clone()
    return [(A, B, C), (A, 2.5, C), (A, part, C), (A, C.to_dense(), B),
            (A, torch.tensor(-0.5, dtype=A.dtype), C)]


def check_op(spec: OpSpec, case: Case, layout):
    A = _operand(case, layout, spec)
    if spec.kind == "ternary":
        for ops in _ternary_operands(A, case, layout, spec):
            try:
                expected = spec.func(*[_dense(o) for o in ops])
            except (TypeError, RuntimeError):
                with pytest.raises((TypeError, RuntimeError, NotImplementedError)):
                    spec.func(*ops)
                continue
            _compare(spec.func(*ops), expected)
        return
    if spec.kind == "unary":
        out = spec.func(A, *spec.test_args)
        assert isinstance(out, sf.SparseFillTensor) and out.layout == base_layout(layout)
        _compare(out, spec.func(A.to_dense(), *spec.test_args))
        assert_dense_equal(out.fill_value(), spec.func(A.fill_value(), *spec.test_args))
        return
    for B in _second_operands(A, case, layout, spec):
        _compare_or_raise(spec.func, A, B, spec.test_args)
        if _is_number(B) or isinstance(B, sf.SparseFillTensor):
            for r in spec.reflected:  # number op A, B op A
                _compare_or_raise(r, A, B, spec.test_args)


def _compare_or_raise(func, A, B, args):
    """Ours equals torch's dense result, or raises where torch raises."""
    try:
        expected = func(A.to_dense(), _dense(B), *args)
    except (TypeError, RuntimeError):
        with pytest.raises((TypeError, RuntimeError, NotImplementedError)):
            func(A, B, *args)
        return
    _compare(func(A, B, *args), expected)


def _takes_numbers(func, args) -> bool:
    try:
        func(torch.ones(2, dtype=torch.float64), 1.75, *args)
    except (TypeError, RuntimeError):
        return False
    return True


def _is_number(x):
    return isinstance(x, (int, float, bool, complex)) and not isinstance(x, torch.Tensor)


def check_route(spec: OpSpec, func):
    case = Case("random", 1.5)
    A = _operand(case, torch.sparse_coo, spec)
    if spec.kind == "unary":
        _compare(func(A, *spec.test_args), func(A.to_dense(), *spec.test_args))
    elif spec.kind == "ternary":
        ops = _ternary_operands(A, case, torch.sparse_coo, spec)[0]
        _compare(func(*ops), func(*[_dense(o) for o in ops]))
    else:
        B = _second_operands(A, case, torch.sparse_coo, spec)[0]
        _compare(func(A, B, *spec.test_args), func(A.to_dense(), B.to_dense(), *spec.test_args))


# ---- gradients ------------------------------------------------------------------

def _leaf_parts(seed, fill, layout, domain, pattern="random"):
    A = random_tensor(pattern, fill, layout, seed=seed, domain=domain)
    if layout in (torch.sparse_csr, torch.sparse_bsr):
        idx = (A.crow_indices(), A.col_indices())
    elif layout in (torch.sparse_csc, torch.sparse_bsc):
        idx = (A.ccol_indices(), A.row_indices())
    else:
        A = A.coalesce()
        idx = (A.indices(),)
    v = A.values().detach().clone().requires_grad_()
    f = A._fill_value().detach().clone().requires_grad_()
    return idx, v, f, A.shape


def _build(layout, idx, v, f, size):
    if layout != torch.sparse_coo:
        return sf.sparse_compressed_tensor(*idx, v, size, layout=layout, fill_value=f)
    return sf.sparse_coo_tensor(*idx, v, size, fill_value=f)


def check_dense_gradients(fn_sparse, fn_dense, A: sf.SparseFillTensor):
    """Gradients through the sparse path equal the dense computation's:
    values get the dense gradient at their positions, the fill gets its sum
    over the unspecified elements, and A.grad.to_dense() is the dense
    gradient when that is constant over the unspecified elements."""
    A = (A.coalesce() if A.layout == torch.sparse_coo else A).detach().requires_grad_()
    fn_sparse(A).to_dense().sum().backward()
    D = A.to_dense().detach().requires_grad_()
    fn_dense(D).sum().backward()
    stored = torch.zeros(A.shape[:2], dtype=torch.bool)
    idx = A._coo_indices()
    stored[idx[0], idx[1]] = True
    grad = A._values().grad
    if A.layout in EXTRA_LAYOUTS:  # the gradient in CSR order, like idx
        grad = A._with(grad, torch.zeros_like(A._fill_value()))._to_csr()._values()
    torch.testing.assert_close(grad, D.grad[idx[0], idx[1]])
    expected_fill = D.grad[~stored].sum(0)
    torch.testing.assert_close(A._fill_value().grad.expand_as(expected_fill), expected_fill)


def _leaf(seed, fill, layout, spec, pattern="random"):
    idx, v, f, size = _leaf_parts(seed, fill, layout, "real", pattern)
    v = _in_domain(v.detach(), spec.domain).requires_grad_()
    f = _in_domain(f.detach(), spec.domain).requires_grad_()
    return idx, v, f, size


def check_gradients(spec: OpSpec, layout):
    """float64 gradcheck on (values, fill) [and the other operand], the dense
    gradients, and gradgradcheck for smooth ops. Non-differentiable ops must
    give results that do not require grad or whose gradient is zero."""
    args = spec.test_args
    if spec.differentiable and spec.dtypes == "complex":
        return _check_complex_gradients(spec, layout)
    if not spec.differentiable or spec.dtypes in ("bool", "int"):
        return _check_not_differentiable(spec, layout)
    ia, va, fa, size = _leaf(7, 0.7, layout, spec)
    if spec.kind == "ternary":
        return _check_ternary_gradients(spec, layout, ia, va, fa, size)
    if spec.kind == "unary":
        fns = [(lambda v, f: spec.func(_build(layout, ia, v, f, size), *args).to_dense(), (va, fa))]
        dense_check = (lambda t: spec.func(t, *args), lambda t: spec.func(t, *args))
    else:
        ib, vb, fb, _ = _leaf(8, 1.3, layout, spec)
        if spec.dtypes == "mask":
            m = random_tensor("random", 1.0, layout, seed=8)
            M = m._with(m._values() > 0, m._fill_value() != 0)
            fns = [(lambda va, fa: spec.func(_build(layout, ia, va, fa, size), M, *args).to_dense(),
                    (va, fa))]
            dense_check = (lambda t: spec.func(t, M, *args), lambda t: spec.func(t, M.to_dense(), *args))
        else:
            vb2 = _in_domain(torch.rand_like(va) + 0.5, spec.domain).requires_grad_()
            dense_other = _in_domain(torch.rand(size[2:], dtype=torch.float64) + 0.5,
                                     spec.domain).requires_grad_()
            fns = [
                (lambda va, fa, vb, fb: spec.func(_build(layout, ia, va, fa, size),
                                                  _build(layout, ib, vb, fb, size), *args).to_dense(),
                 (va, fa, vb, fb)),
                (lambda va, fa, vb, fb: spec.func(_build(layout, ia, va, fa, size),
                                                  _build(layout, ia, vb, fb, size), *args).to_dense(),
                 (va, fa, vb2, fb)),
                (lambda va, fa, d: spec.func(_build(layout, ia, va, fa, size), d, *args).to_dense(),
                 (va, fa, dense_other)),
            ]
            if _takes_numbers(spec.func, args):
                fns.append((lambda va, fa: spec.func(_build(layout, ia, va, fa, size), 1.75,
                                                     *args).to_dense(), (va, fa)))
            for r in spec.reflected:
                fns.append((lambda va, fa, r=r: r(_build(layout, ia, va, fa, size), 1.75, *args)
                            .to_dense(), (va, fa)))
            B = _retype(random_tensor("random", -0.5, layout, seed=9), "float", spec.domain)
            B = B._with(B._values(), _in_domain(B._fill_value(), spec.domain))
            dense_check = (lambda t: spec.func(t, B, *args),
                           lambda t: spec.func(t, B.to_dense(), *args))
    for fn, inputs in fns:
        assert torch.autograd.gradcheck(fn, inputs)
        if spec.smooth:
            assert torch.autograd.gradgradcheck(fn, inputs)
    A = _retype(random_tensor("random", 0.7, layout, seed=4), "float", spec.domain)
    A = A._with(A._values(), _in_domain(A._fill_value(), spec.domain))
    check_dense_gradients(*dense_check, A)


def _check_ternary_gradients(spec, layout, ia, va, fa, size):
    ib, vb, fb, _ = _leaf(8, -1.3, layout, spec)
    ic, vc, fc, _ = _leaf(9, 1.4, layout, spec)
    # bounds-like operands: b below c everywhere (clamp's min <= max)
    vb = (-(vb.detach().abs() + 0.5)).requires_grad_()
    vc = (vc.detach().abs() + 0.5).requires_grad_()
    if spec.dtypes == "mask":
        m = random_tensor("random", 1.0, layout, seed=5)
        M = m._with(m._values() > 0, m._fill_value() != 0)
        fn = (lambda vb, fb, vc, fc: spec.func(M, _build(layout, ib, vb, fb, size),
                                               _build(layout, ic, vc, fc, size)).to_dense())
        inputs = (vb, fb, vc, fc)
        dense_check = (lambda t: spec.func(M, t, -2.0), lambda t: spec.func(M.to_dense(), t, -2.0))
    else:
        fn = (lambda va, fa, vb, fb, vc, fc: spec.func(
            _build(layout, ia, va, fa, size), _build(layout, ib, vb, fb, size),
            _build(layout, ic, vc, fc, size)).to_dense())
        inputs = (va, fa, vb, fb, vc, fc)
        lo = _build(layout, ib, vb.detach(), fb.detach(), size)
        hi = _build(layout, ic, vc.detach(), fc.detach(), size)
        dense_check = (lambda t: spec.func(t, lo, hi),
                       lambda t: spec.func(t, lo.to_dense(), hi.to_dense()))
    assert torch.autograd.gradcheck(fn, inputs)
    if spec.smooth:
        assert torch.autograd.gradgradcheck(fn, inputs)
    A = _retype(random_tensor("random", 0.7, layout, seed=4), "float", spec.domain)
    check_dense_gradients(*dense_check, A)


def _check_complex_gradients(spec, layout):
    """gradcheck with complex values and fill (torch checks both Wirtinger
    derivatives numerically)."""
    idx, v, f, size = _leaf_parts(6, 0.7, layout, "real")
    v = torch.complex(v.detach(), v.detach().flip(0) + 0.25).requires_grad_()
    f = torch.complex(f.detach(), torch.tensor(0.3, dtype=torch.float64)).requires_grad_()
    fn = lambda v, f: spec.func(_build(layout, idx, v, f, size), *spec.test_args).to_dense()  # noqa: E731
    assert torch.autograd.gradcheck(fn, (v, f))


def _check_not_differentiable(spec, layout):
    A = _operand(Case("random", 1.5), layout, spec)
    out = spec.func(A, *spec.test_args) if spec.kind == "unary" else \
        spec.func(A, A, *spec.test_args)
    assert not out.dtype.is_floating_point or not out.requires_grad


# ---- opcheck ---------------------------------------------------------------------

def opcheck_op(spec: OpSpec):
    """torch.library.opcheck on every op the YAML entry generates."""
    ops = torch.ops.sparsefill
    grad = spec.differentiable and spec.dtypes not in ("bool", "int")
    case = Case("random", 1.5)
    A = _operand(case, torch.sparse_coo, spec).coalesce()
    va, fa = A.values().detach().clone(), A._fill_value().detach().clone()
    if spec.dtypes in ("float", "mask"):
        fa = _in_domain(fa, spec.domain)
    if grad:
        wide = torch.complex128 if va.is_complex() else torch.float64
        va, fa = va.to(wide).requires_grad_(), fa.to(wide).requires_grad_()
    extra = tuple(spec.test_args)
    if spec.kind == "unary":
        torch.library.opcheck(getattr(ops, spec.name), (va, fa) + extra)
        return
    if spec.kind == "ternary":
        B = random_tensor("random", -2.0, seed=12).coalesce()
        C = random_tensor("random", 0.5, seed=13).coalesce()
        parts = []
        for k, T_ in enumerate((A, B, C)):
            v, f = T_.values().detach().clone(), T_._fill_value().detach().clone()
            if k == 0 and spec.dtypes == "mask":
                v, f = v > 0, f != 0
            elif grad:
                v, f = v.to(torch.float64).requires_grad_(), f.to(torch.float64).requires_grad_()
            parts += [T_.indices(), v, f]
        torch.library.opcheck(getattr(ops, spec.name), tuple(parts) + (list(A.shape),))
        return
    if spec.dtypes == "mask":
        B = random_tensor("random", 1.0, seed=12).coalesce()
        vb, fb = B.values() > 0, B._fill_value() != 0
    else:
        B = _retype(random_tensor("random", -2.0, seed=12), spec.dtypes, spec.domain).coalesce()
        vb, fb = B.values().detach().clone(), B._fill_value().detach().clone()
        if spec.dtypes == "float":
            fb = _in_domain(fb, spec.domain)
        if grad:
            vb, fb = vb.to(torch.float64).requires_grad_(), fb.to(torch.float64).requires_grad_()
    torch.library.opcheck(getattr(ops, spec.name),
                          (A.indices(), va, fa, B.indices(), vb, fb, list(A.shape)) + extra)
    same_b = vb[:1].expand(va.shape[0]).clone().detach().requires_grad_(vb.requires_grad)
    torch.library.opcheck(getattr(ops, spec.name + "_same"), (va, fa, same_b, fb) + extra)
    torch.library.opcheck(getattr(ops, spec.name + "_dense"), (va, fa, fb.detach().clone(), False) + extra)
    if not spec.number:
        return
    number = True if spec.dtypes in ("bool", "mask") else 3
    torch.library.opcheck(getattr(ops, spec.name + "_scalar"), (va, fa, number, False) + extra)
    if spec.reflected:
        torch.library.opcheck(getattr(ops, spec.name + "_scalar"), (va, fa, number, True) + extra)
