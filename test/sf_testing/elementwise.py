"""The element-wise op table's checks: every op of
tools/codegen/elementwise.yaml (read through the generator's own loader, so
the YAML stays the one source) against the dense computation.

    >>> spec = OPS["exp"]
    >>> check_op(spec, Case("random", 1.5), torch.sparse_csr)   # values and fill
    >>> check_route(spec, torch.Tensor.exp)                     # a routed callable
    >>> check_gradients(spec, torch.sparse_coo)                 # gradcheck, dense gradients
    >>> opcheck_op(spec)                                        # torch.library.opcheck
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

import torch_sparsefill as sf

from .compare import assert_dense_equal, assert_matches_dense
from .gradients import build, check_dense_gradients, leaf_parts
from .reference import dense, dense_of
from .repo import tool
from .tensors import LAYOUTS, Case, base_layout, random_tensor


@dataclass(frozen=True)
class OpSpec:
    """What the checks need to know about one YAML op (`OPS[name]`):
    `func` is its first torch callable, `routes` every one it is routed
    from with its YAML name (reflected ones last).

        >>> OPS["add"].func is torch.add
        True
    """
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
    routes: tuple = ()  # (YAML name, callable), e.g. ("torch.Tensor.exp", torch.Tensor.exp)


def resolve(name: str):
    """The torch callable a YAML entry names, e.g. resolve("torch.Tensor.__abs__")."""
    parts = name.split(".")
    if parts[0] != "torch":
        raise ValueError(f"elementwise.yaml: callable {name!r} is not under torch")
    obj = torch
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


def _op_spec(op: dict) -> OpSpec:
    routes = tuple((f, resolve(f)) for f in op["torch"] + op["reflected"])
    return OpSpec(op["name"], routes[0][1], kind=op["kind"], domain=op["domain"],
                  dtypes=op["dtypes"], scalars=tuple(op["scalars"]),
                  test_args=tuple(op["test_args"]),
                  reflected=tuple(resolve(f) for f in op["reflected"]),
                  differentiable=op["differentiable"], smooth=op["smooth"],
                  number=op["number"], routes=routes)


# name -> OpSpec, in the YAML's order
OPS = {op["name"]: _op_spec(op) for op in tool("codegen/gen_elementwise.py").load_spec()}


def route_id(name: str) -> str:
    """A routed callable's test id, its YAML name without "torch.":
    route_id("torch.Tensor.__abs__") == "Tensor.__abs__"."""
    return name.removeprefix("torch.")


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
        v = in_domain(v, domain)
    return A._with(v, f)


def in_domain(v, domain):
    """v mapped into an op's input domain (YAML `domain`: real, positive,
    unit, unit01, ge1), e.g. in_domain(torch.randn(3), "positive") > 0."""
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
        strided = A.to_dense() > 0.3
        return B + [strided, strided[(0,) * A.sparse_dim()]]
    out = []
    for seed, fill in ((1, 6.0), (2, case.fill), (3, -math.inf)):
        out.append(_retype(random_tensor(pattern, fill, layout, seed=seed), spec.dtypes,
                           spec.domain))
    base = A.coalesce() if layout == torch.sparse_coo else A
    out.append(_retype(base._with(base._values().flip(0), base._fill_value() * 0.5 + 1),
                       spec.dtypes, spec.domain))
    out += list(spec.scalars)
    strided = out[0].to_dense()
    out.append(strided[(0,) * A.sparse_dim()].clone())  # over the dense part
    out.append(strided)                                # over everything: a dense result
    return out


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
    """The op on a tensor of `case` and `layout` (and, binary or ternary, on
    every kind of other operand) equals the op on the dense tensors, values
    and fill; where dense torch raises, ours raises too:
    check_op(OPS["exp"], Case("random", 1.5), torch.sparse_csr)."""
    A = _operand(case, layout, spec)
    if spec.kind == "ternary":
        for ops in _ternary_operands(A, case, layout, spec):
            try:
                expected = spec.func(*[dense(o) for o in ops])
            except (TypeError, RuntimeError):
                with pytest.raises((TypeError, RuntimeError, NotImplementedError)):
                    spec.func(*ops)
                continue
            assert_matches_dense(spec.func(*ops), expected)
        return
    if spec.kind == "unary":
        out = spec.func(A, *spec.test_args)
        assert isinstance(out, sf.SparseFillTensor) and out.layout == base_layout(layout)
        assert_matches_dense(out, spec.func(A.to_dense(), *spec.test_args))
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
        expected = func(A.to_dense(), dense(B), *args)
    except (TypeError, RuntimeError):
        with pytest.raises((TypeError, RuntimeError, NotImplementedError)):
            func(A, B, *args)
        return
    assert_matches_dense(func(A, B, *args), expected)


def _takes_numbers(func, args) -> bool:
    try:
        func(torch.ones(2, dtype=torch.float64), 1.75, *args)
    except (TypeError, RuntimeError):
        return False
    return True


def _is_number(x):
    return isinstance(x, (int, float, bool, complex)) and not isinstance(x, torch.Tensor)


def check_route(spec: OpSpec, func):
    """A torch callable routed to the op gives the dense result:
    check_route(OPS["abs"], torch.Tensor.__abs__)."""
    case = Case("random", 1.5)
    A = _operand(case, torch.sparse_coo, spec)
    if spec.kind == "unary" and func in spec.reflected:  # torch.polygamma(n, input)
        assert_matches_dense(func(*spec.test_args, A), func(*spec.test_args, A.to_dense()))
    elif spec.kind == "unary":
        assert_matches_dense(func(A, *spec.test_args), func(A.to_dense(), *spec.test_args))
    elif spec.kind == "ternary":
        ops = _ternary_operands(A, case, torch.sparse_coo, spec)[0]
        assert_matches_dense(func(*ops), func(*[dense(o) for o in ops]))
    else:
        B = _second_operands(A, case, torch.sparse_coo, spec)[0]
        assert_matches_dense(func(A, B, *spec.test_args), func(A.to_dense(), B.to_dense(), *spec.test_args))


# ---- gradients ------------------------------------------------------------------

def _leaf_parts_in_domain(seed, fill, layout, spec, pattern="random"):
    idx, v, f, size = leaf_parts(seed, fill, layout, "real", pattern)
    v = in_domain(v.detach(), spec.domain).requires_grad_()
    f = in_domain(f.detach(), spec.domain).requires_grad_()
    return idx, v, f, size


def _fast(layout) -> bool:
    """gradcheck's fast mode (one random projection of the Jacobian, numerical
    against analytical) for CSC, BSR and BSC: their ops run through CSR
    (RFC.md#through-csr), whose Jacobian COO and CSR check entry by entry."""
    return layout not in LAYOUTS


def check_gradients(spec: OpSpec, layout):
    """float64 gradcheck on (values, fill) [and the other operand], the dense
    gradients, and gradgradcheck for smooth ops. Non-differentiable ops must
    give results that do not require grad or whose gradient is zero."""
    args = spec.test_args
    if spec.differentiable and spec.dtypes == "complex":
        return _check_complex_gradients(spec, layout)
    if not spec.differentiable or spec.dtypes in ("bool", "int"):
        return _check_not_differentiable(spec, layout)
    ia, va, fa, size = _leaf_parts_in_domain(7, 0.7, layout, spec)
    if spec.kind == "ternary":
        return _check_ternary_gradients(spec, layout, ia, va, fa, size)
    if spec.kind == "unary":
        fns = [(lambda v, f: spec.func(build(layout, ia, v, f, size), *args).to_dense(), (va, fa))]
        dense_check = (lambda t: spec.func(t, *args), lambda t: spec.func(t, *args))
    else:
        ib, vb, fb, _ = _leaf_parts_in_domain(8, 1.3, layout, spec)
        if spec.dtypes == "mask":
            m = random_tensor("random", 1.0, layout, seed=8)
            M = m._with(m._values() > 0, m._fill_value() != 0)
            fns = [(lambda va, fa: spec.func(build(layout, ia, va, fa, size), M, *args).to_dense(),
                    (va, fa))]
            dense_check = (lambda t: spec.func(t, M, *args), lambda t: spec.func(t, M.to_dense(), *args))
        else:
            vb2 = in_domain(torch.rand_like(va) + 0.5, spec.domain).requires_grad_()
            dense_other = in_domain(torch.rand(size[2:], dtype=torch.float64) + 0.5,
                                     spec.domain).requires_grad_()
            fns = [
                (lambda va, fa, vb, fb: spec.func(build(layout, ia, va, fa, size),
                                                  build(layout, ib, vb, fb, size), *args).to_dense(),
                 (va, fa, vb, fb)),
                (lambda va, fa, vb, fb: spec.func(build(layout, ia, va, fa, size),
                                                  build(layout, ia, vb, fb, size), *args).to_dense(),
                 (va, fa, vb2, fb)),
                (lambda va, fa, d: spec.func(build(layout, ia, va, fa, size), d, *args).to_dense(),
                 (va, fa, dense_other)),
            ]
            if _takes_numbers(spec.func, args):
                fns.append((lambda va, fa: spec.func(build(layout, ia, va, fa, size), 1.75,
                                                     *args).to_dense(), (va, fa)))
            for r in spec.reflected:
                fns.append((lambda va, fa, r=r: r(build(layout, ia, va, fa, size), 1.75, *args)
                            .to_dense(), (va, fa)))
            B = _retype(random_tensor("random", -0.5, layout, seed=9), "float", spec.domain)
            B = B._with(B._values(), in_domain(B._fill_value(), spec.domain))
            dense_check = (lambda t: spec.func(t, B, *args),
                           lambda t: spec.func(t, B.to_dense(), *args))
    for fn, inputs in fns:
        assert torch.autograd.gradcheck(fn, inputs, fast_mode=_fast(layout))
        if spec.smooth:
            assert torch.autograd.gradgradcheck(fn, inputs, fast_mode=_fast(layout))
    A = _retype(random_tensor("random", 0.7, layout, seed=4), "float", spec.domain)
    A = A._with(A._values(), in_domain(A._fill_value(), spec.domain))
    check_dense_gradients(*dense_check, A)


def _check_ternary_gradients(spec, layout, ia, va, fa, size):
    ib, vb, fb, _ = _leaf_parts_in_domain(8, -1.3, layout, spec)
    ic, vc, fc, _ = _leaf_parts_in_domain(9, 1.4, layout, spec)
    # bounds-like operands: b below c everywhere (clamp's min <= max)
    vb = (-(vb.detach().abs() + 0.5)).requires_grad_()
    vc = (vc.detach().abs() + 0.5).requires_grad_()
    if spec.dtypes == "mask":
        m = random_tensor("random", 1.0, layout, seed=5)
        M = m._with(m._values() > 0, m._fill_value() != 0)
        fn = (lambda vb, fb, vc, fc: spec.func(M, build(layout, ib, vb, fb, size),
                                               build(layout, ic, vc, fc, size)).to_dense())
        inputs = (vb, fb, vc, fc)
        dense_check = (lambda t: spec.func(M, t, -2.0), lambda t: spec.func(M.to_dense(), t, -2.0))
    else:
        fn = (lambda va, fa, vb, fb, vc, fc: spec.func(
            build(layout, ia, va, fa, size), build(layout, ib, vb, fb, size),
            build(layout, ic, vc, fc, size)).to_dense())
        inputs = (va, fa, vb, fb, vc, fc)
        lo = build(layout, ib, vb.detach(), fb.detach(), size)
        hi = build(layout, ic, vc.detach(), fc.detach(), size)
        dense_check = (lambda t: spec.func(t, lo, hi),
                       lambda t: spec.func(t, lo.to_dense(), hi.to_dense()))
    assert torch.autograd.gradcheck(fn, inputs, fast_mode=_fast(layout))
    if spec.smooth:
        assert torch.autograd.gradgradcheck(fn, inputs, fast_mode=_fast(layout))
    A = _retype(random_tensor("random", 0.7, layout, seed=4), "float", spec.domain)
    check_dense_gradients(*dense_check, A)


def _check_complex_gradients(spec, layout):
    """gradcheck with complex values and fill (torch checks both Wirtinger
    derivatives numerically)."""
    idx, v, f, size = leaf_parts(6, 0.7, layout, "real")
    v = torch.complex(v.detach(), v.detach().flip(0) + 0.25).requires_grad_()
    f = torch.complex(f.detach(), torch.tensor(0.3, dtype=torch.float64)).requires_grad_()
    fn = lambda v, f: spec.func(build(layout, idx, v, f, size), *spec.test_args).to_dense()  # noqa: E731
    assert torch.autograd.gradcheck(fn, (v, f))


def _check_not_differentiable(spec, layout):
    """A non-differentiable op on operands whose values and fill require
    grad (where their dtype can): the result requires grad exactly when
    dense torch's does, and then its gradient is dense torch's (zero). Bool
    and integer operands cannot require grad: the result must then be of a
    dtype that carries no gradient either."""
    A = _operand(Case("random", 1.5), layout, spec)
    v, f = A._values().detach(), A._fill_value().detach()

    def call(x):
        return spec.func(x, *spec.test_args) if spec.kind == "unary" else \
            spec.func(x, x, *spec.test_args)
    if not (v.dtype.is_floating_point or v.dtype.is_complex):
        out = call(A)
        assert not (out.dtype.is_floating_point or out.dtype.is_complex) and \
            not out.requires_grad
        return
    v, f = v.clone().requires_grad_(), f.clone().requires_grad_()
    A = A._with(v, f)
    out, want = call(A), call(dense_of(A))
    assert out.requires_grad == want.requires_grad, (out.requires_grad, want.requires_grad)
    if want.requires_grad:
        try:
            want_grads = torch.autograd.grad(want.sum(), (v, f), allow_unused=True)
        except RuntimeError:  # torch has no derivative (floor_divide): zero, or refused too
            want_grads = (None, None)
        try:
            got_grads = torch.autograd.grad(dense(out).sum(), (v, f), allow_unused=True)
        except RuntimeError:
            assert want_grads == (None, None), "refused a gradient dense torch computes"
            return
        for g, w, like in zip(got_grads, want_grads, (v, f)):
            g = torch.zeros_like(like) if g is None else g
            w = torch.zeros_like(like) if w is None else w
            assert torch.equal(g, w), (g, w)


# ---- opcheck ---------------------------------------------------------------------

def opcheck_op(spec: OpSpec):
    """torch.library.opcheck on every op the YAML entry generates (NAME,
    NAME_same, NAME_dense, NAME_scalar): opcheck_op(OPS["mul"])."""
    ops = torch.ops.sparsefill
    grad = spec.differentiable and spec.dtypes not in ("bool", "int")
    case = Case("random", 1.5)
    A = _operand(case, torch.sparse_coo, spec).coalesce()
    va, fa = A.values().detach().clone(), A._fill_value().detach().clone()
    if spec.dtypes in ("float", "mask"):
        fa = in_domain(fa, spec.domain)
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
            fb = in_domain(fb, spec.domain)
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
