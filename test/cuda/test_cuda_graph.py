"""The graph functions on CUDA tensors against the CPU (skipped without a
GPU; `make gpu-check` runs them): semiring products (mxv, vxm, mxm, the
masked product by dots and by expansion), element-wise modes and
reductions; patterns exactly, values within fp64 rounding."""
import pytest
import torch

import sf_testing.graph as G
import torch_sparsefill as sf
from sf_testing.cuda import TIGHT, both, gpu

pytestmark = [gpu]


def _parts(R):
    C = R.to_sparse_coo()._coalesced()
    return C._sf_indices, C._sf_values


def _graph(shape, seed, density=0.4):
    v, p = G.random_graph(shape, seed=seed, density=density)
    return v.masked_fill(~p, float("nan"))  # NaN: absent (sf.to_sparse's rule)


def _indef(x):
    return sf.to_sparse(x, fill_value=sf.indefinite)


@pytest.mark.parametrize("semiring", ["min_plus", "plus_times", "max_times", "plus_pair",
                                      "any_pair", "lor_land", "min_second"])
def test_products(semiring):
    A, B, x = _graph((40, 30), 1), _graph((30, 20), 2), _graph((30,), 3, 0.6)
    both(lambda a, b: _parts(sf.mxm(_indef(a), _indef(b), semiring)), A, B, **TIGHT)
    both(lambda a, v: _parts(sf.mxm(_indef(a), _indef(v), semiring)), A, x, **TIGHT)
    both(lambda v, a: _parts(sf.mxm(_indef(v), _indef(a), semiring)), x[:30], B, **TIGHT)


@pytest.mark.parametrize("dots", [True, False])
@pytest.mark.parametrize("complement", [False, True])
def test_masked_products(dots, complement, monkeypatch):
    monkeypatch.setattr(sf.graph.products, "_dots_cheaper", lambda *a: dots)
    A, M = _graph((50, 50), 4), _graph((50, 50), 5, 0.1)
    both(lambda a, m: _parts(sf.mxm(_indef(a), _indef(a), "plus_pair", mask=_indef(m),
                                    complement=complement)), A, M, **TIGHT)


@pytest.mark.parametrize("op", ["min", "plus", "first"])
def test_elementwise_and_reductions(op):
    A, B = _graph((30, 40), 6), _graph((30, 40), 7)
    for f in (sf.ewise_add, sf.ewise_mult):
        both(lambda a, b: _parts(f(_indef(a), _indef(b), op)), A, B, **TIGHT)
    both(lambda a, b: _parts(sf.ewise_union(_indef(a), _indef(b), op, 0., 1.)), A, B, **TIGHT)
    for monoid in ("plus", "min", "max", "any"):
        both(lambda a: _parts(sf.reduce(_indef(a), 1, monoid)), A, **TIGHT)
        both(lambda a: _parts(sf.reduce(_indef(a), 0, monoid)), A, **TIGHT)


def test_gradients_of_min_plus():
    def grads(a, x):
        a = a.clone().requires_grad_()
        x = x.clone().requires_grad_()
        sf.mxm(_indef(a), x, "min_plus").values().sum().backward()
        return torch.nan_to_num(a.grad), x.grad
    both(grads, _graph((40, 30), 8), torch.randn(30, dtype=torch.float64), **TIGHT)
