"""torch.masked on SparseFillTensors (torch_sparsefill/functions/masked.py):
mask=None is the dense op through the routes, a mask (strided or a
SparseFillTensor) computes on the dense forms, argmax/argmin/median are
refused by name; never the stored values alone."""
from __future__ import annotations

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf

m = torch.masked


def operand(fill=0.75, dtype=torch.float64):
    g = T.rng(11)
    keep = torch.rand(4, 5, generator=g) < 0.4
    keep[1] = False
    idx = keep.nonzero().t()
    values = torch.randn(idx.shape[1], generator=g, dtype=torch.float64).to(dtype)
    return sf.sparse_coo_tensor(idx, values, (4, 5), fill_value=fill)


MASK = torch.rand(4, 5, generator=T.rng(12)) > 0.4

CALLS = {
    "sum": lambda x, **k: m.sum(x, **k), "sum_dim": lambda x, **k: m.sum(x, 1, **k),
    "sum_keepdim": lambda x, **k: m.sum(x, (0,), keepdim=True, **k),
    "prod": lambda x, **k: m.prod(x, 1, **k), "amax": lambda x, **k: m.amax(x, 0, **k),
    "amin": lambda x, **k: m.amin(x, **k), "mean": lambda x, **k: m.mean(x, 1, **k),
    "var": lambda x, **k: m.var(x, 1, **k),
    "std": lambda x, **k: m.std(x, (0, 1), unbiased=False, **k),
    "norm": lambda x, **k: m.norm(x, 2.0, 1, **k), "norm3": lambda x, **k: m.norm(x, 3.0, **k),
    "logsumexp": lambda x, **k: m.logsumexp(x, 1, **k),
    "softmax": lambda x, **k: m.softmax(x, 1, **k),
    "log_softmax": lambda x, **k: m.log_softmax(x, 0, **k),
    "softmin": lambda x, **k: m.softmin(x, 1, **k),
    "normalize": lambda x, **k: m.normalize(x, 2.0, 1, **k),
    "cumsum": lambda x, **k: m.cumsum(x, 1, **k), "cumprod": lambda x, **k: m.cumprod(x, 0, **k),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_masked_ops_without_mask_are_the_dense_ops(name):
    """masked.sum(A) of a fill-0.75 tensor summed the stored values alone
    (OpInfo masked.sum: -7.58 where dense gives -12.41); the others raised
    torch's ValueError."""
    A = operand()
    T.assert_matches_dense(CALLS[name](A), CALLS[name](A.to_dense()))


@pytest.mark.parametrize("name", sorted(CALLS))
def test_masked_ops_with_a_strided_mask_combine_it_with_the_fill(name):
    A = operand()
    T.assert_matches_dense(CALLS[name](A, mask=MASK), CALLS[name](A.to_dense(), mask=MASK))


@pytest.mark.parametrize("name", ["sum_dim", "mean", "amax", "softmax"])
def test_masked_ops_with_a_sparsefill_mask(name):
    M = sf.to_sparse(MASK, fill_value=True)
    A = operand()
    T.assert_matches_dense(CALLS[name](A, mask=M), CALLS[name](A.to_dense(), mask=MASK))
    plain = A.to_dense()
    T.assert_matches_dense(CALLS[name](plain, mask=M), CALLS[name](plain, mask=MASK))


def test_masked_logaddexp():
    A, other = operand(), torch.randn(4, 5, dtype=torch.float64, generator=T.rng(3))
    T.assert_matches_dense(m.logaddexp(A, other), m.logaddexp(A.to_dense(), other))
    T.assert_matches_dense(m.logaddexp(A, other, input_mask=MASK, other_mask=MASK),
                           m.logaddexp(A.to_dense(), other, input_mask=MASK, other_mask=MASK))


@pytest.mark.parametrize("name", ["argmax", "argmin", "median"])
def test_masked_ops_without_a_route_are_refused_by_name(name):
    with pytest.raises(NotImplementedError, match=f"torch.masked.{name}"):
        getattr(m, name)(operand(), 1)
    # With a mask they compute on the dense form.
    T.assert_matches_dense(getattr(m, name)(operand(), 1, mask=MASK),
                           getattr(m, name)(operand().to_dense(), 1, mask=MASK))


def test_masked_gradients_reach_values_and_fill():
    A = operand()
    v = A.coalesce().values().detach().clone().requires_grad_()
    f = torch.tensor(0.75, dtype=torch.float64, requires_grad=True)

    def program(v, f):
        B = sf.sparse_coo_tensor(A.coalesce().indices(), v, A.shape, fill_value=f)
        return T.dense(m.softmax(B, 1)) * 1.0 + m.sum(B, 1)[:, None]
    assert torch.autograd.gradcheck(program, (v, f))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_masked_half_within_dense_error(dtype):
    A = operand(fill=100., dtype=dtype) * 10
    for name in ("sum", "mean", "var", "norm", "softmax"):
        ours, dense = T.dense(CALLS[name](A)), CALLS[name](A.to_dense())
        ref = CALLS[name](A.to_dense().double())
        assert ours.dtype == dense.dtype
        err, dense_err = (ours.double() - ref).abs().max(), (dense.double() - ref).abs().max()
        assert err <= 2 * dense_err + torch.finfo(dtype).eps * ref.abs().max().clamp_min(1)


def test_plain_calls_are_torchs_own():
    x = torch.randn(3, 4)
    assert torch.equal(m.sum(x, 1), m.sum.__wrapped__(x, 1))
    assert m.sum.__name__ == "sum"
