"""torch.func and forward-mode AD over SparseFillTensor programs: equal to
the reverse-mode (torch.autograd) result, or a clear error; never a wrong
value (issue 15, deliverable 5).

The element-wise ops and to_dense are CompositeImplicitAutograd over ATen
(RFC.md 12.2): programs made of them must give the right answer under
every transform (test_func_elementwise.py checks each kind of element-wise
op against dense). Products, softmax and reductions still have C++
torch::autograd::Functions, which functorch and forward AD refuse; their
checks accept the right answer or a RuntimeError. vmap over the components
works for all.
"""
import pytest
import torch

import torch_sparsefill as sf

pytestmark = pytest.mark.cpu_only(reason="transforms of CPU programs")

F64 = torch.float64
_CROW, _COL = torch.tensor([0, 2, 2, 4]), torch.tensor([0, 3, 1, 2])
_X = torch.linspace(-1.0, 1.0, 8, dtype=F64).reshape(4, 2)


def _csr(v, f):
    return sf.sparse_csr_tensor(_CROW, _COL, v, (3, 4), fill_value=f)


# Functions of (values, fill) returning a scalar.
PROGRAMS = {
    "elementwise": lambda v, f: (_csr(v, f) * 2 + 1).exp().to_dense().sum(),
    "product": lambda v, f: (_csr(v, f) @ _X).sin().sum(),
    "softmax": lambda v, f: (torch.softmax(_csr(v, f), -1).to_dense() * _X.reshape(2, 4)[:1]).sum(),
    "reduction": lambda v, f: _csr(v, f).to_sparse_coo().sum(0).to_dense().pow(2).sum(),
    "to_dense": lambda v, f: _csr(v, f).to_dense().pow(3).sum(),
}


# Programs made only of composite ops: a refusal is a failure.
COMPOSED = {"elementwise", "to_dense"}


def _inputs():
    return (torch.tensor([0.5, -0.25, 1.0, 0.75], dtype=F64), torch.tensor(0.3, dtype=F64))


def _reference_grad(fn):
    v, f = (t.clone().requires_grad_() for t in _inputs())
    return torch.autograd.grad(fn(v, f), (v, f))


def _right_or_refused(compute, expected, must_work=False):
    try:
        got = compute()
    except RuntimeError as e:
        if must_work:
            raise
        assert "functorch" in str(e) or "not implemented" in str(e) or "sparsefill" in str(e), e
        return "refused"
    for g, w in zip(got, expected):
        torch.testing.assert_close(g, w)
    return "equal"


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_func_grad_and_vjp(name):
    fn = PROGRAMS[name]
    want = _reference_grad(fn)
    must = name in COMPOSED
    _right_or_refused(lambda: torch.func.grad(fn, argnums=(0, 1))(*_inputs()), want, must)
    _right_or_refused(lambda: torch.func.jacrev(fn, argnums=(0, 1))(*_inputs()), want, must)
    _right_or_refused(lambda: torch.func.vjp(fn, *_inputs())[1](torch.tensor(1.0, dtype=F64)),
                      want, must)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_forward_mode(name):
    fn = PROGRAMS[name]
    gv, gf = _reference_grad(fn)
    tv, tf = torch.linspace(0.5, 2.0, 4, dtype=F64), torch.tensor(-0.7, dtype=F64)
    want = ((gv * tv).sum() + gf * tf,)  # the directional derivative
    must = name in COMPOSED
    _right_or_refused(lambda: (torch.func.jvp(fn, _inputs(), (tv, tf))[1],), want, must)

    def dual():
        import torch.autograd.forward_ad as fwAD
        with fwAD.dual_level():
            v, f = _inputs()
            out = fn(fwAD.make_dual(v, tv), fwAD.make_dual(f, tf))
            return (fwAD.unpack_dual(out).tangent,)

    _right_or_refused(dual, want, must)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_vmap_over_components(name):
    """vmap over a batch of values (the fill shared) equals a loop."""
    fn = PROGRAMS[name]
    v, f = _inputs()
    batch = torch.stack([v, v * 2, -v])
    want = torch.stack([fn(b, f) for b in batch])
    torch.testing.assert_close(torch.func.vmap(fn, in_dims=(0, None))(batch, f), want)


def test_vmap_over_a_sparsefill_tensor_refuses():
    # Our refusal (torch 2.13), or functorch's own assertion before our code
    # is reached (torch 2.14): a refusal either way, never a result.
    A = _csr(*_inputs())
    with pytest.raises((NotImplementedError, RuntimeError),
                       match="SparseFillTensor|INTERNAL ASSERT"):
        torch.func.vmap(lambda A: A.to_dense())(A)
