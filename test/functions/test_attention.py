"""Sampled products, masks and sparse attention: every result against the
dense computation, gradients included."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import sf_testing as T
import torch_sparsefill as sf
from torch_sparsefill.functions import attention as _attention
from torch_sparsefill.ops import products as _attention_ops
from sf_testing import assert_dense_equal, rng

LAYOUTS = [torch.sparse_coo, torch.sparse_csr]
FILLS = [0.0, 1.5, math.inf, -math.inf, math.nan]


def pattern(shape, seed, density=0.4, layout=torch.sparse_coo, fill=0.0, values=None):
    g = rng(seed)
    keep = torch.rand(shape, generator=g) < density
    idx = keep.nonzero().t()
    v = torch.randn(idx.shape[1], generator=g, dtype=torch.float64) if values is None else \
        values(idx.shape[1], g)
    A = sf.sparse_coo_tensor(idx, v, shape, fill_value=fill)
    return A.to_sparse_csr() if layout == torch.sparse_csr else A.coalesce()


def randn(*shape, seed, grad=False):
    return torch.randn(shape, generator=rng(seed), dtype=torch.float64).requires_grad_(grad)


# ---- sampled_matmul and sparse_mask ------------------------------------------------

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fill", FILLS)
def test_sampled_matmul_matches_dense(layout, fill):
    P = pattern((5, 6), 1, layout=layout, fill=3.0)  # P's values and fill are not read
    x, y = randn(5, 4, seed=2), randn(4, 6, seed=3)
    out = sf.sampled_matmul(x, y, P, fill_value=fill)
    assert out.layout == layout
    expected = torch.where(T.stored_mask(P), x @ y, torch.tensor(fill, dtype=torch.float64))
    assert_dense_equal(out.to_dense(), expected)


def test_sampled_matmul_batched_and_broadcast():
    P = pattern((3, 5, 6), 4)
    x, y = randn(3, 5, 4, seed=5), randn(4, 6, seed=6)  # y broadcasts over the batch
    out = sf.sampled_matmul(x, y, P, fill_value=-math.inf)
    expected = torch.where(T.stored_mask(P), x @ y, torch.tensor(-math.inf, dtype=torch.float64))
    assert_dense_equal(out.to_dense(), expected)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_sampled_matmul_gradients(layout):
    P = pattern((4, 5), 7, layout=layout)
    x, y = randn(4, 3, seed=8, grad=True), randn(3, 5, seed=9, grad=True)

    def f(x, y):
        return sf.sampled_matmul(x, y, P, fill_value=2.0).values()
    torch.autograd.gradcheck(f, (x, y))
    torch.autograd.gradgradcheck(f, (x, y))
    # against the dense masked product
    gx, gy = torch.autograd.grad(sf.sampled_matmul(x, y, P, fill_value=2.0).to_dense().pow(2).sum(),
                                 (x, y))
    m = T.stored_mask(P)
    ex, ey = torch.autograd.grad(torch.where(m, x @ y, 2.0).pow(2).sum(), (x, y))
    torch.testing.assert_close(gx, ex)
    torch.testing.assert_close(gy, ey)


def test_sampled_matmul_refusals():
    P = pattern((4, 5), 10)
    with pytest.raises(RuntimeError, match="pattern's matrix shape"):
        sf.sampled_matmul(randn(4, 3, seed=1), randn(3, 6, seed=1), P, fill_value=0.)
    with pytest.raises(TypeError, match="pattern must be a sparse tensor"):
        sf.sampled_matmul(randn(4, 3, seed=1), randn(3, 5, seed=1), torch.ones(4, 5),
                          fill_value=0.)
    with pytest.raises(RuntimeError, match="does not broadcast"):
        sf.sampled_matmul(randn(2, 4, 3, seed=1), randn(3, 5, seed=1), pattern((3, 4, 5), 1),
                          fill_value=0.)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fill", FILLS)
def test_sparse_mask_matches_dense(layout, fill):
    P = pattern((5, 6), 11, layout=layout)
    x = randn(5, 6, seed=12, grad=True)
    out = sf.sparse_mask(x, P, fill_value=fill)
    expected = torch.where(T.stored_mask(P), x, torch.tensor(fill, dtype=torch.float64))
    assert_dense_equal(out.to_dense(), expected)
    out.values().sum().backward()
    assert_dense_equal(x.grad, T.stored_mask(P).to(torch.float64))


def test_tensor_sparse_mask_is_torchs_meaning():
    P = pattern((5, 6), 13, fill=7.0)
    x = randn(5, 6, seed=14)
    # torch: x on the pattern, 0 elsewhere
    native = x.sparse_mask(torch.sparse_coo_tensor(P.indices(), P.values(), P.shape,
                                                  check_invariants=True))
    out = x.sparse_mask(P)
    assert isinstance(out, sf.SparseFillTensor)
    assert_dense_equal(out.to_dense(), torch.where(T.stored_mask(P), x, 0.0))
    assert_dense_equal(out.to_dense(), native.to_dense())


@pytest.mark.parametrize("fill", [0.0, 1.5, -math.inf])
@pytest.mark.parametrize("beta,alpha", [(1.0, 1.0), (0.5, 2.0), (0.0, 1.0)])
def test_sampled_addmm(fill, beta, alpha):
    A = pattern((5, 6), 15, layout=torch.sparse_csr, fill=fill)
    x, y = randn(5, 4, seed=16), randn(4, 6, seed=17)
    out = torch.sparse.sampled_addmm(A, x, y, beta=beta, alpha=alpha)
    m = T.stored_mask(A)
    D = A.to_dense()
    base = torch.zeros_like(D) if beta == 0 else beta * D
    expected = torch.where(m, base + alpha * (x @ y), base)
    assert_dense_equal(out.to_dense(), expected)
    if fill == 0.0:  # torch's own on the same fill-0 CSR tensor
        native = torch.sparse.sampled_addmm(D.to_sparse_csr(), x, y, beta=beta, alpha=alpha)
        assert_dense_equal(out.to_dense(), native.to_dense())


# ---- dropout -------------------------------------------------------------------------

def test_dropout_keeps_a_fill_zero_pattern():
    A = pattern((40, 50), 18)
    torch.manual_seed(0)
    out = F.dropout(A, 0.5)
    assert out._nnz() == A._nnz()
    v, w = A.values(), out.values()
    assert bool(((w == 0) | torch.isclose(w, 2 * v)).all())
    assert 0 < int((w == 0).sum()) < A._nnz()
    assert F.dropout(A, 0.5, training=False) is A


def test_dropout_refuses_a_nonzero_fill():
    with pytest.raises(NotImplementedError, match="non-zero fill"):
        F.dropout(pattern((4, 5), 19, fill=1.0), 0.2)


# ---- scaled_dot_product_attention -------------------------------------------------------

def attention_mask(shape, seed, density=0.3, values="zero", empty_row=False):
    """A -inf-fill mask; stored biases are 0, random, or some -inf."""
    def make(n, g):
        if values == "zero":
            return torch.zeros(n, dtype=torch.float64)
        v = torch.randn(n, generator=g, dtype=torch.float64)
        if values == "with_inf":
            v[::3] = -math.inf
        return v
    A = pattern(shape, seed, density=density, fill=-math.inf, values=make)
    if empty_row:  # drop every element of row 1
        idx, v = A.indices(), A.values()
        keep = idx[-2] != 1
        A = sf.sparse_coo_tensor(idx[:, keep], v[keep], A.shape, fill_value=-math.inf)
    return A


def check_sdpa(q, k, v, A, **kw):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    A = A.coalesce() if A.layout == torch.sparse_coo else A
    av = A.values().detach().clone().requires_grad_()
    As = sf.sparse_coo_tensor(A.indices(), av, A.shape, fill_value=A._fill_value()) \
        if A.layout == torch.sparse_coo else \
        sf.sparse_csr_tensor(A.crow_indices(), A.col_indices(), av, A.shape,
                             fill_value=A._fill_value())
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=As, **kw)
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    D = A.to_dense().detach().requires_grad_()
    expected = F.scaled_dot_product_attention(q2, k2, v2, attn_mask=D, **kw)
    assert_dense_equal(out, expected)
    g = torch.randn(out.shape, generator=rng(99), dtype=out.dtype)
    ok = ~torch.isnan(expected)
    (out.where(ok, 0) * g).sum().backward()
    (expected.where(ok, 0) * g).sum().backward()
    for a, b in ((q, q2), (k, k2), (v, v2)):
        torch.testing.assert_close(a.grad, b.grad, equal_nan=True)
    idx = tuple(A.to_sparse_coo()._coo_indices())
    Dg = D.grad.expand(A.shape) if D.grad is not None else torch.zeros(A.shape,
                                                                      dtype=torch.float64)
    torch.testing.assert_close(av.grad, Dg[idx], equal_nan=True)


@pytest.mark.parametrize("mask_shape", [(6, 7), (2, 3, 6, 7), (2, 1, 6, 7), (3, 6, 7)], ids=str)
@pytest.mark.parametrize("values", ["zero", "random", "with_inf"])
def test_sdpa_minus_inf_mask_is_exact(mask_shape, values):
    q, k, v = randn(2, 3, 6, 4, seed=20), randn(2, 3, 7, 4, seed=21), randn(2, 3, 7, 5, seed=22)
    check_sdpa(q, k, v, attention_mask(mask_shape, 23, values=values))


def test_sdpa_one_pattern_for_all_heads_broadcast_operands():
    # One pattern for every head, key and value broadcast over the batch.
    q, k, v = randn(2, 3, 6, 4, seed=50), randn(1, 3, 7, 4, seed=51), randn(3, 7, 5, seed=52)
    check_sdpa(q, k, v, attention_mask((1, 1, 6, 7), 53, values="with_inf", empty_row=True))


def test_sdpa_csr_mask_scale_and_empty_rows():
    q, k, v = randn(3, 6, 4, seed=24), randn(3, 7, 4, seed=25), randn(3, 7, 5, seed=26)
    A = attention_mask((6, 7), 27, values="random", empty_row=True)
    check_sdpa(q, k, v, A, scale=0.3)
    check_sdpa(q, k, v, A.to_sparse_csr())


@pytest.mark.parametrize("fill", [0.0, -2.0, math.inf, math.nan])
def test_sdpa_other_fills_give_the_dense_result(fill):
    q, k, v = randn(2, 6, 4, seed=28), randn(2, 7, 4, seed=29), randn(2, 7, 5, seed=30)
    check_sdpa(q, k, v, pattern((6, 7), 31, fill=fill))


def test_sdpa_bool_mask():
    q, k, v = randn(2, 6, 4, seed=32), randn(2, 7, 4, seed=33), randn(2, 7, 5, seed=34)
    keep = torch.rand(6, 7, generator=rng(35)) < 0.4
    keep[:, 0] = True
    A = sf.to_sparse(keep, fill_value=False)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=A)
    assert_dense_equal(out, F.scaled_dot_product_attention(q, k, v, attn_mask=keep))


def test_sdpa_second_order():
    A = attention_mask((4, 5), 36, values="random")
    q, k, v = randn(2, 4, 3, seed=37, grad=True), randn(2, 5, 3, seed=38, grad=True), \
        randn(2, 5, 2, seed=39, grad=True)
    D = A.to_dense()

    def sparse_fn(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=A)
    torch.autograd.gradcheck(sparse_fn, (q, k, v))
    torch.autograd.gradgradcheck(sparse_fn, (q, k, v))
    # the dense second derivative, at one direction
    gs = torch.autograd.grad(sparse_fn(q, k, v).pow(2).sum(), q, create_graph=True)[0]
    gd = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=D).pow(2).sum(),
                             q, create_graph=True)[0]
    torch.testing.assert_close(torch.autograd.grad(gs.sum(), k)[0],
                               torch.autograd.grad(gd.sum(), k)[0])


def test_sdpa_composed_path_is_exact(monkeypatch):
    # The path dropout (and CUDA) take: sddmm, a row softmax and spmm.
    monkeypatch.setattr(_attention, "_fused", lambda q, p: False)
    q, k, v = randn(2, 3, 6, 4, seed=60), randn(2, 3, 7, 4, seed=61), randn(2, 3, 7, 5, seed=62)
    check_sdpa(q, k, v, attention_mask((2, 1, 6, 7), 63, values="with_inf", empty_row=True))


def test_fused_op_gradients_of_both_outputs():
    # out and the log-sum-exp, first and second order, bias included.
    A = attention_mask((5, 6), 64, density=0.6, values="random").to_sparse_csr()
    crow, col = A.crow_indices(), A.col_indices()
    assert bool((crow[1:] > crow[:-1]).all())  # no empty row: lse stays finite

    def fn(bias, q, k, v):
        return torch.ops.sparsefill.sparse_attention(crow, col, bias, q, k, v, 0.6)
    args = (A.values().detach().clone().requires_grad_(), randn(5, 3, seed=65, grad=True),
            randn(6, 3, seed=66, grad=True), randn(6, 2, seed=67, grad=True))
    out, lse = fn(*args)
    D = A.to_dense()
    scores = 0.6 * args[1] @ args[2].t() + D
    torch.testing.assert_close(out, torch.softmax(scores, -1) @ args[3])
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1))
    torch.autograd.gradcheck(fn, args)
    torch.autograd.gradgradcheck(fn, args)


# ---- the fused op's backward kernel -----------------------------------------------------

_ops = torch.ops.sparsefill


def fused_problem(nb, m, n, e, dv, seed, bias="common", values="random"):
    """A CSR pattern (row 1 empty) with q, k, v for `nb` batch members (None:
    2-D operands) and a bias: one per stored element for every batch member
    ("common"), one row per batch member ("per_batch") or none."""
    A = attention_mask((m, n), seed, density=0.5, values=values, empty_row=True).to_sparse_csr()
    lead = () if nb is None else (nb,)
    b = {"common": A.values().detach().clone(), "none": None,
         "per_batch": randn(*lead, A.values().numel(), seed=seed + 1)}[bias]
    return (A.crow_indices(), A.col_indices(), b, randn(*lead, m, e, seed=seed + 2),
            randn(*lead, n, e, seed=seed + 3), randn(*lead, n, dv, seed=seed + 4))


def dense_attention(crow, col, bias, q, k, v, scale):
    """(out, lse, dense bias) of the same attention with a dense (..., m, n)
    bias that is -inf off the pattern; a row of -inf only gets weights 0 and
    lse -inf (as the op), with finite gradients."""
    m, n = q.shape[-2], k.shape[-2]
    rows = torch.repeat_interleave(torch.arange(m), crow.diff())
    D = torch.full(q.shape[:-2] + (m, n), -math.inf, dtype=q.dtype)
    D[..., rows, col] = 0.0 if bias is None else bias.detach()
    D.requires_grad_()
    s = scale * q @ k.transpose(-2, -1) + D
    empty = (s == -math.inf).all(-1, keepdim=True)
    s = torch.where(empty, 0.0, s)
    out = (torch.softmax(s, -1) * ~empty) @ v
    lse = torch.where(empty[..., 0], -math.inf, torch.logsumexp(s, -1))
    return out, lse, D, (rows, col)


@pytest.mark.parametrize("nb,bias", [(None, "common"), (None, "none"), (3, "common"),
                                     (3, "per_batch"), (2, "none")], ids=str)
@pytest.mark.parametrize("with_lse", [False, True])
@pytest.mark.parametrize("values", ["random", "with_inf"])
def test_backward_kernel_matches_dense(nb, bias, with_lse, values):
    crow, col, b, q, k, v = fused_problem(nb, 6, 7, 4, 3, 70, bias=bias, values=values)
    out, lse = _ops.sparse_attention(crow, col, b, q, k, v, 0.7)
    g = randn(*out.shape, seed=71)
    gl = randn(*lse.shape, seed=72) if with_lse else None
    dq, dk, dv, ds = _ops.sparse_attention_backward(crow, col, b, q, k, v, lse, g, gl, 0.7)
    q2, k2, v2 = (t.detach().clone().requires_grad_() for t in (q, k, v))
    out2, lse2, D, (rows, cols) = dense_attention(crow, col, b, q2, k2, v2, 0.7)
    assert_dense_equal(out, out2)
    assert_dense_equal(lse, lse2)
    loss = (out2 * g).sum() + ((lse2.where(lse2 > -math.inf, 0) * gl).sum() if with_lse else 0)
    want = torch.autograd.grad(loss, (q2, k2, v2, D))
    for got, w in zip((dq, dk, dv), want):
        torch.testing.assert_close(got, w)
    torch.testing.assert_close(ds, want[3][..., rows, cols])


def test_plain_backward_takes_the_kernel_double_backward_the_composed_ops(monkeypatch):
    calls = []
    composed = _attention_ops._composed_backward
    monkeypatch.setattr(_attention_ops, "_composed_backward",
                        lambda *a: calls.append(1) or composed(*a))
    kernel = []
    real = _ops.sparse_attention_backward

    class Spy:  # counts the backward kernel's calls
        def __call__(self, *a):
            kernel.append(1)
            return real(*a)
    monkeypatch.setattr(_attention_ops, "_ops", type("Ops", (), {
        "__getattr__": lambda self, name: Spy() if name == "sparse_attention_backward"
        else getattr(_ops, name)})())
    A = attention_mask((6, 7), 73, values="random")
    q, k, v = (randn(2, 3, L, 4, seed=74 + L, grad=True) for L in (6, 7, 7))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=A)
    out.sum().backward()
    assert kernel == [1] and calls == []
    gq, = torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, attn_mask=A).pow(2).sum(),
                              q, create_graph=True)
    assert calls and kernel == [1]  # recorded: the composed ops only
    dense = torch.softmax(q @ k.transpose(-2, -1) / 2 + A.to_dense(), -1) @ v  # scale 1/sqrt(4)
    gd, = torch.autograd.grad(dense.pow(2).sum(), q, create_graph=True)
    torch.testing.assert_close(torch.autograd.grad(gq.sum(), v)[0],
                               torch.autograd.grad(gd.sum(), v)[0])


def test_backward_kernel_refuses_its_own_gradient():
    crow, col, b, q, k, v = fused_problem(2, 5, 6, 3, 2, 80)
    out, lse = _ops.sparse_attention(crow, col, b, q, k, v, 0.5)
    dq, *_ = _ops.sparse_attention_backward(crow, col, b, q.requires_grad_(), k, v, lse,
                                            torch.ones_like(out), None, 0.5)
    with pytest.raises(RuntimeError, match="sparse_attention_backward is not differentiable"):
        dq.sum().backward()


def test_backward_kernel_is_deterministic_with_threads():
    crow, col, b, q, k, v = fused_problem(4, 64, 64, 16, 16, 81, bias="per_batch")
    out, lse = _ops.sparse_attention(crow, col, b, q, k, v, 0.3)
    g = randn(*out.shape, seed=82)
    threads = torch.get_num_threads()
    try:
        results = []
        for t in (1, max(threads, 2)):
            torch.set_num_threads(t)
            results.append(_ops.sparse_attention_backward(crow, col, b, q, k, v, lse, g, lse,
                                                          0.3))
    finally:
        torch.set_num_threads(threads)
    for a, c in zip(*results):
        assert torch.equal(a, c)


def test_fused_op_argument_errors():
    crow, col, b, q, k, v = fused_problem(2, 5, 6, 3, 2, 83)
    out, lse = _ops.sparse_attention(crow, col, b, q, k, v, 0.5)
    with pytest.raises(RuntimeError, match="lse must have shape"):
        _ops.sparse_attention_backward(crow, col, b, q, k, v, lse[0], out, None, 0.5)
    with pytest.raises(RuntimeError, match="grad_out must have shape"):
        _ops.sparse_attention_backward(crow, col, b, q, k, v, lse, out[..., :1], None, 0.5)
    with pytest.raises(RuntimeError, match="bias must hold one value"):
        _ops.sparse_attention(crow, col, b.expand(3, -1), q, k, v, 0.5)  # 3 rows for 2 members
    with pytest.raises(RuntimeError, match="or a batch"):
        _ops.sparse_attention(crow, col, b, q, k[0], v, 0.5)


def test_sdpa_refusals():
    q = randn(2, 4, 3, seed=40)
    A = attention_mask((4, 4), 41)
    with pytest.raises(RuntimeError, match="is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=A, is_causal=True)
    with pytest.raises(RuntimeError, match="query's dtype"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=A.to(torch.float32))
    with pytest.raises(RuntimeError, match=r"\(L, S\)"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=attention_mask((4, 5), 42))


def test_sdpa_never_makes_the_mask_dense(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the -inf mask was made dense")
    A = attention_mask((2, 6, 7), 43, values="random")
    q, k, v = randn(2, 6, 4, seed=44), randn(2, 7, 4, seed=45), randn(2, 7, 5, seed=46)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=A.to_dense())
    monkeypatch.setattr(sf.SparseFillTensor, "to_dense", refuse)
    assert_dense_equal(F.scaled_dot_product_attention(q, k, v, attn_mask=A), expected)


@pytest.mark.parametrize("need_weights", [False, True])
def test_multihead_attention(need_weights):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True).double()
    x = randn(3, 5, 8, seed=47, grad=True)
    A = attention_mask((5, 5), 48, density=0.6)
    assert bool((A.to_dense() == 0).any(-1).all()), "every row attends somewhere"
    out, w = mha(x, x, x, attn_mask=A, need_weights=need_weights)
    x2 = x.detach().clone().requires_grad_()
    out2, w2 = mha(x2, x2, x2, attn_mask=A.to_dense(), need_weights=need_weights)
    assert_dense_equal(out, out2)
    if need_weights:
        assert_dense_equal(w, w2)
    out.sum().backward()
    out2.sum().backward()
    torch.testing.assert_close(x.grad, x2.grad)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("fill", [0.0, 1.5, -math.inf, math.nan])
@pytest.mark.parametrize("diagonal", [-6, -1, 0, 2, 7])
@pytest.mark.parametrize("upper", [False, True])
def test_tril_triu(upper, diagonal, fill, layout):
    A = pattern((5, 7), 50, density=0.5, layout=layout, fill=fill)
    fn = torch.triu if upper else torch.tril
    out = fn(A, diagonal)
    expected = fn(A.to_dense(), diagonal)
    whole = (upper and diagonal <= -4) or (not upper and diagonal >= 6)
    if fill == 0.0 or whole:
        assert isinstance(out, sf.SparseFillTensor) and out.layout == layout
        out = out.to_dense()
    assert_dense_equal(out, expected)
    method = A.triu(diagonal) if upper else A.tril(diagonal)
    assert_dense_equal(T.dense(method),
                       expected)


def test_tril_batched_and_gradients():
    A = pattern((2, 4, 4), 51, density=0.6)
    v = A.values().detach().clone().requires_grad_()
    S = sf.sparse_coo_tensor(A.indices(), v, A.shape, fill_value=0.0)
    out = torch.tril(S, -1)
    assert_dense_equal(out.to_dense(), torch.tril(A.to_dense(), -1))
    out.to_dense().sum().backward()
    idx = A.indices()
    assert_dense_equal(v.grad, (idx[2] - idx[1] <= -1).to(torch.float64))
