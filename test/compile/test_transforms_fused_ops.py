"""Forward-mode AD and torch.func on the two routes whose native op has a
backward only (``register_backward_only``: sparse_attention behind
SDPA with a sparse mask, bsr_spmm behind BSR products): under a transform
the routes take ops with a jvp (RFC.md#torch-func), and every tangent and
gradient equals dense torch's, in float64 to rounding.
"""
import math

import pytest
import torch
import torch.autograd.forward_ad as fwAD
from torch.func import grad, jacfwd, jacrev, jvp, vjp

import sf_testing as T
import torch_sparsefill as sf

F = torch.nn.functional
TOL = dict(rtol=1e-10, atol=1e-12)


def _mask():
    return sf.sparse_coo_tensor([[0, 1, 2, 0], [0, 1, 2, 1]], [0., 0., 0., 0.5], (3, 3),
                                fill_value=float("-inf")).double()


def _qkv(seed):
    g = T.rng(seed)
    return [torch.randn(2, 3, 4, generator=g, dtype=torch.float64) for _ in range(3)]


def _attention_pair():
    M = _mask()
    _, k, v = _qkv(1)
    D = M.to_dense()

    def dense(q):
        # SDPA's math, written out: torch 2.14's CPU kernel for the dense
        # call (flash attention) has no forward-mode derivative
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + D
        return torch.softmax(scores, -1) @ v
    return lambda q: F.scaled_dot_product_attention(q, k, v, attn_mask=M), dense


def _bsr(fill=0.5):
    values = torch.randn(2, 2, 2, generator=T.rng(2), dtype=torch.float64)
    return sf.sparse_bsr_tensor([0, 1, 2], [1, 0], values, (4, 4), fill_value=fill)


def _bsr_pairs():
    B = _bsr()
    return {"bsr_at_dense": (lambda X: B @ X, lambda X: B.to_dense() @ X),
            "dense_at_bsr": (lambda X: X.t() @ B, lambda X: X.t() @ B.to_dense()),
            "bsc_at_dense": (lambda X: B.to_sparse_bsc((2, 2)) @ X, lambda X: B.to_dense() @ X)}


def _pairs():
    pairs = {"sdpa_sparse_mask": _attention_pair()}
    pairs.update(_bsr_pairs())
    return pairs


def _input(name):
    if name == "sdpa_sparse_mask":
        return _qkv(0)[0]
    return torch.randn(4, 3, generator=T.rng(3), dtype=torch.float64)


TRANSFORMS = {
    "jvp": lambda f, x, t: jvp(f, (x,), (t,))[1],
    "jacfwd": lambda f, x, t: jacfwd(f)(x),
    "jacrev": lambda f, x, t: jacrev(f)(x),
    "grad": lambda f, x, t: grad(lambda y: (f(y) * t[..., :1].sum()).sum())(x),
    "vjp": lambda f, x, t: vjp(f, x)[1](torch.ones_like(f(x)))[0],
}


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("name", list(_pairs()))
def test_torch_func_equals_dense(name, transform):
    sparse, dense = _pairs()[name]
    x = _input(name)
    t = torch.randn(x.shape, generator=T.rng(4), dtype=torch.float64)
    got = TRANSFORMS[transform](sparse, x, t)
    want = TRANSFORMS[transform](dense, x, t)
    torch.testing.assert_close(got, want, **TOL)
    assert got.abs().sum() > 0  # a zero tangent would be the old silent failure


@pytest.mark.parametrize("name", list(_pairs()))
def test_forward_ad_dual_numbers_equal_dense(name):
    sparse, dense = _pairs()[name]
    x = _input(name)
    t = torch.randn(x.shape, generator=T.rng(5), dtype=torch.float64)
    tangents = []
    for fn in (sparse, dense):
        with fwAD.dual_level():
            tangents.append(fwAD.unpack_dual(fn(fwAD.make_dual(x, t))).tangent)
    assert tangents[0] is not None
    torch.testing.assert_close(tangents[0], tangents[1], **TOL)


def test_jvp_through_the_bsr_values_and_fill():
    B = _bsr()
    X = _input("bsr_at_dense")

    def product(values, fill, to_dense):
        A = sf.sparse_bsr_tensor(B.crow_indices(), B.col_indices(), values, (4, 4),
                                 fill_value=fill)
        return (A.to_dense() if to_dense else A) @ X

    primals = (B.values().clone(), torch.tensor(0.5, dtype=torch.float64))
    tangents = (torch.randn(2, 2, 2, generator=T.rng(6), dtype=torch.float64),
                torch.tensor(-1.5, dtype=torch.float64))
    got = jvp(lambda v, f: product(v, f, False), primals, tangents)[1]
    want = jvp(lambda v, f: product(v, f, True), primals, tangents)[1]
    torch.testing.assert_close(got, want, **TOL)


def test_eager_keeps_the_fused_ops():
    """Outside a transform the routes still call the fused ops."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Seen(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.add(func._schema.name)
            return func(*args, **(kwargs or {}))

    sdpa, _ = _attention_pair()
    bsr, _ = _bsr_pairs()["bsr_at_dense"]
    with Seen() as seen:
        sdpa(_input("sdpa_sparse_mask"))
        bsr(_input("bsr_at_dense"))
    assert {"sparsefill::sparse_attention", "sparsefill::bsr_spmm"} <= seen.names
