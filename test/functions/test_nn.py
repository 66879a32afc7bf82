"""SparseFillTensor parameters and buffers in torch.nn and torch.optim
(RFC.md#models): checkpoints, module conversions, the optimisers (foreach
on and off) against the equivalent parametrisation by components, gradient
accumulation and clipping, F.linear."""
import copy
import io
import math

import pytest
import torch
import torch.nn.functional as F

from torch_sparsefill.tensor import build

import sf_testing as T

SIZE = (4, 6)


def _tensor(layout, seed=0, fill=0.5, dtype=torch.float64):
    return T.random_tensor("random", fill, layout, seed=seed, size=SIZE, dtype=dtype)


class Holder(torch.nn.Module):
    """A sparse weight (parameter) and a sparse buffer, used as x @ W.T + B.sum(0)."""

    def __init__(self, layout, seed=0):
        super().__init__()
        self.weight = torch.nn.Parameter(_tensor(layout, seed))
        self.register_buffer("scale", _tensor(layout, seed + 1, fill=2.0))
        self.bias = torch.nn.Parameter(torch.zeros(SIZE[0], dtype=torch.float64))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias) * self.scale.sum()


@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_state_dict_round_trip_through_torch_save(layout):
    src, dst = Holder(layout, seed=0), Holder(layout, seed=0)
    with torch.no_grad():
        src.weight.mul_(3.0)
        src.scale.add_(1.0)
    weight, scale = dst.weight, dst.scale
    buf = io.BytesIO()
    torch.save(src.state_dict(), buf)
    buf.seek(0)
    result = dst.load_state_dict(torch.load(buf))  # weights_only=True, strict
    assert not result.missing_keys and not result.unexpected_keys
    # Copied in place: the objects an optimiser holds stay the module's.
    assert dst.weight is weight and dst.scale is scale
    T.assert_dense_equal(dst.weight.to_dense().detach(), src.weight.to_dense().detach())
    T.assert_dense_equal(dst.scale.to_dense(), src.scale.to_dense())
    assert dst.weight.requires_grad and dst.weight.is_leaf


@pytest.mark.parametrize("fill", [math.inf, -math.inf, math.nan])
def test_state_dict_keeps_non_finite_fills(fill):
    src, dst = Holder(torch.sparse_csr), Holder(torch.sparse_csr)
    with torch.no_grad():
        src.scale._fill_value().fill_(fill)
    buf = io.BytesIO()
    torch.save(src.state_dict(), buf)
    buf.seek(0)
    dst.load_state_dict(torch.load(buf))
    T.assert_dense_equal(dst.scale.to_dense(), src.scale.to_dense())
    assert torch.equal(dst.scale, src.scale) == (fill == fill)  # NaN never equals NaN


def test_load_state_dict_other_pattern_names_assign():
    src, dst = Holder(torch.sparse_coo, seed=0), Holder(torch.sparse_coo, seed=5)
    with pytest.raises(RuntimeError, match="assign=True"):
        dst.load_state_dict(src.state_dict())
    dst.load_state_dict(src.state_dict(), assign=True)
    T.assert_dense_equal(dst.weight.to_dense().detach(), src.weight.to_dense().detach())


def test_module_conversions_keep_the_parameter_objects():
    m = Holder(torch.sparse_coo)
    x = torch.randn(3, SIZE[1], dtype=torch.float64)
    m(x).sum().backward()
    weight, grad = m.weight, m.weight.grad.to_dense()
    m.float()
    assert m.weight is weight and m.weight.dtype == torch.float32
    assert m.weight._values().dtype == m.weight._fill_value().dtype == torch.float32
    assert m.scale.dtype == torch.float32
    T.assert_dense_equal(m.weight.grad.to_dense(), grad.float())
    m.half()
    assert m.weight is weight and m.weight._fill_value().dtype == torch.float16
    m.to(torch.bfloat16)
    assert m.weight is weight and m.scale.dtype == torch.bfloat16
    m.double()
    assert m.weight.dtype == torch.float64 and m.weight.is_leaf
    twin = copy.deepcopy(m)
    assert twin.weight is not m.weight
    T.assert_dense_equal(twin.weight.to_dense().detach(), m.weight.to_dense().detach())
    assert isinstance(twin.weight, torch.nn.Parameter) and twin.weight.requires_grad


# ---- optimisers ----------------------------------------------------------------------

OPTIMISERS = {
    "sgd": lambda p, fe: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=0.01,
                                         foreach=fe),
    "sgd-nesterov": lambda p, fe: torch.optim.SGD(p, lr=0.05, momentum=0.5, nesterov=True,
                                                  foreach=fe),
    "adam": lambda p, fe: torch.optim.Adam(p, lr=0.05, weight_decay=0.01, foreach=fe),
    "adam-amsgrad": lambda p, fe: torch.optim.Adam(p, lr=0.05, amsgrad=True, foreach=fe),
    "adamw": lambda p, fe: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1, foreach=fe),
}


def _loss(A, x, target):
    return ((x @ A.t() - target) ** 2).sum() + (A * A).sum() * 0.01


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("name", sorted(OPTIMISERS))
@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_optimiser_matches_the_components(name, foreach, layout):
    """nn.Parameter(A) steps exactly like its components as parameters, the
    fill's gradient being the mean over the unspecified elements (RFC.md#parameters)."""
    g = T.rng(3)
    x = torch.randn(5, SIZE[1], generator=g, dtype=torch.float64)
    target = torch.randn(5, SIZE[0], generator=g, dtype=torch.float64)
    A0 = _tensor(layout)
    W = torch.nn.Parameter(A0.clone())
    coo = A0.to_sparse(layout=torch.sparse_coo)
    values = torch.nn.Parameter(coo._values().clone())
    fill = torch.nn.Parameter(coo._fill_value().clone())
    unspecified = A0.numel() - A0.nse()
    fill.register_hook(lambda grad: grad / unspecified)
    opt_w, opt_c = OPTIMISERS[name]([W], foreach), OPTIMISERS[name]([values, fill], foreach)
    for _ in range(4):
        for opt in (opt_w, opt_c):
            opt.zero_grad()
        _loss(W, x, target).backward()
        _loss(build(torch.sparse_coo, SIZE, values, fill, indices=coo._indices()),
              x, target).backward()
        opt_w.step()
        opt_c.step()
    got = W.to_sparse(layout=torch.sparse_coo)
    torch.testing.assert_close(got._values().detach(), values.detach())
    torch.testing.assert_close(got._fill_value().detach(), fill.detach())
    assert W.is_leaf and isinstance(W, torch.nn.Parameter)


@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_sgd_step_is_the_dense_step_projected_on_the_pattern(layout):
    A = _tensor(layout)
    D = A.to_dense().clone().requires_grad_()
    W = torch.nn.Parameter(A.clone())
    weights = torch.randn(SIZE, generator=T.rng(1), dtype=torch.float64)
    (W.to_dense() * weights).sum().backward()
    (D * weights).sum().backward()
    torch.optim.SGD([W], lr=0.1).step()
    stepped = (D - 0.1 * D.grad).detach()
    stored = A.to_dense() != A.fill_value()
    expected = torch.where(stored, stepped, stepped[~stored].mean())
    T.assert_dense_equal(W.to_dense().detach(), expected)


def test_gradients_accumulate_over_backward_passes():
    W = torch.nn.Parameter(_tensor(torch.sparse_csr))
    x1, x2 = torch.randn(2, 3, SIZE[1], generator=T.rng(4), dtype=torch.float64)
    F.linear(x1, W).pow(2).sum().backward()
    first = W.grad.to_dense()
    W.grad = None
    F.linear(x2, W).pow(2).sum().backward()
    second = W.grad.to_dense()
    F.linear(x1, W).pow(2).sum().backward()
    T.assert_dense_equal(W.grad.to_dense(), first + second)


@pytest.mark.parametrize("foreach", [None, False, True])
def test_clip_grad_norm_counts_unspecified_elements(foreach):
    m = Holder(torch.sparse_coo)
    x = torch.randn(3, SIZE[1], generator=T.rng(2), dtype=torch.float64)
    (m(x) ** 2).sum().backward()
    grads = [m.weight.grad.to_dense(), m.bias.grad.clone()]
    fill_grad = m.weight._fill_value().grad.clone()
    expected = torch.linalg.vector_norm(torch.cat([g.flatten() for g in grads]))
    total = torch.nn.utils.clip_grad_norm_(m.parameters(), max_norm=1.0, foreach=foreach)
    torch.testing.assert_close(total, expected)
    coef = 1.0 / (expected + 1e-6)
    T.assert_dense_equal(m.weight.grad.to_dense(), grads[0] * coef)
    T.assert_dense_equal(m.bias.grad, grads[1] * coef)
    # the clipping reached the component gradient an optimiser of components reads
    T.assert_dense_equal(m.weight._fill_value().grad, fill_grad * coef)


def test_grad_is_not_a_masked_sparse_gradient():
    W = torch.nn.Parameter(_tensor(torch.sparse_coo))
    W.sum().backward()
    assert W.is_sparse and not W.grad.is_sparse
    assert W.grad.layout == torch.sparse_coo


@pytest.mark.parametrize("layout", T.LAYOUTS)
@pytest.mark.parametrize("fill", [0.0, -1.5])
def test_linear_with_a_sparse_weight(layout, fill):
    W = _tensor(layout, fill=fill).requires_grad_()
    x = torch.randn(2, 3, SIZE[1], generator=T.rng(5), dtype=torch.float64)
    b = torch.randn(SIZE[0], dtype=torch.float64)
    T.check_dense_gradients(lambda A: F.linear(x, A, b), lambda D: F.linear(x, D, b), W)


@pytest.mark.cpu_only(reason="the CPU GradScaler")
@pytest.mark.parametrize("growth", [False, True])
def test_grad_scaler_unscales_and_skips_non_finite_steps(growth):
    g = T.rng(6)
    x = torch.randn(5, SIZE[1], generator=g, dtype=torch.float64)
    target = torch.randn(5, SIZE[0], generator=g, dtype=torch.float64)
    W, V = torch.nn.Parameter(_tensor(torch.sparse_csr)), torch.nn.Parameter(_tensor(torch.sparse_csr))
    opt_w, opt_v = torch.optim.SGD([W], lr=0.01), torch.optim.SGD([V], lr=0.01)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale(_loss(W, x, target)).backward()
    _loss(V, x, target).backward()
    scaler.unscale_(opt_w)
    T.assert_dense_equal(W.grad.to_dense(), V.grad.to_dense())
    torch.testing.assert_close(W._fill_value().grad, V._fill_value().grad)
    scaler.step(opt_w)
    opt_v.step()
    scaler.update()
    T.assert_dense_equal(W.to_dense().detach(), V.to_dense().detach())
    if growth:  # an inf in the fill's gradient: the step is skipped
        before = W.to_dense().detach().clone()
        opt_w.zero_grad()
        scaler.scale(W.sum() * float("inf")).backward()
        scaler.step(opt_w)
        T.assert_dense_equal(W.to_dense().detach(), before)


@pytest.mark.parametrize("foreach", [False, True])
def test_zero_grad_without_set_to_none(foreach):
    m = Holder(torch.sparse_coo)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, foreach=foreach)
    x = torch.randn(3, SIZE[1], dtype=torch.float64)
    m(x).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert not m.weight._values().grad.any() and not m.weight._fill_value().grad.any()
    m(x).sum().backward()
    first = m.weight.grad.to_dense()
    opt.zero_grad(set_to_none=False)
    m(x).sum().backward()
    T.assert_dense_equal(m.weight.grad.to_dense(), first)


def test_foreach_ops_run_tensor_by_tensor():
    A, B = _tensor(torch.sparse_coo), _tensor(torch.sparse_csr, seed=1)
    x = torch.randn(3, dtype=torch.float64)
    tensors = [A.clone(), B.clone(), x.clone()]
    torch._foreach_addcmul_(tensors, tensors, tensors, torch.tensor([2., -1., 0.5]))
    expected = [A + 2. * A * A, B - B * B, x + 0.5 * x * x]
    for got, want in zip(tensors, expected):
        T.assert_dense_equal(got.to_dense(), want.to_dense())
    norms = torch._foreach_norm([A, x], 3)
    torch.testing.assert_close(norms[0], torch.linalg.vector_norm(A.to_dense(), 3))
    torch.testing.assert_close(norms[1], torch.linalg.vector_norm(x, 3))
    maxed = [A.clone()]
    torch._foreach_maximum_(maxed, [A * 2])
    T.assert_dense_equal(maxed[0].to_dense(), torch.maximum(A.to_dense(), 2 * A.to_dense()))


def test_saving_a_parameter_keeps_it_a_parameter():
    W = torch.nn.Parameter(_tensor(torch.sparse_coo))
    buf = io.BytesIO()
    torch.save({"w": W, "plain": _tensor(torch.sparse_csr)}, buf)
    buf.seek(0)
    loaded = torch.load(buf)  # weights_only=True
    assert isinstance(loaded["w"], torch.nn.Parameter) and loaded["w"].requires_grad
    assert not isinstance(loaded["plain"], torch.nn.Parameter)
    T.assert_dense_equal(loaded["w"].to_dense().detach(), W.to_dense().detach())
