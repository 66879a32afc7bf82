"""Regression tests ("never silently wrong", continued from test_regressions.py):
half precision accumulated as dense does, gradients past a fill that covers
no element, non-finite values in sparse @ sparse, torch's type promotion
against plain tensors, exact zeros of var/std and coalesce, and the lenient
edges that now raise as torch does. Each test is named after its defect and
checks it against the dense computation.
"""
from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F

import sf_testing as T
import torch_sparsefill as sf

inf, nan = math.inf, math.nan
HALVES = [torch.float16, torch.bfloat16]


def _dense(x):
    return x.to_dense() if isinstance(x, sf.SparseFillTensor) else x


def _within_dense_error(ours, dense, reference, factor=2.0):
    """`ours` (a half result) is within `factor` times dense's own error
    against the float64 `reference`, plus one ulp of the half dtype (the
    final rounding), and has dense's dtype, shape and non-finite positions."""
    ours, dense = _dense(ours), _dense(dense)
    assert ours.dtype == dense.dtype and ours.shape == dense.shape
    o, d, r = ours.double(), dense.double(), _dense(reference).double()
    assert torch.equal(torch.isfinite(o), torch.isfinite(d))
    finite = torch.isfinite(d)
    ulp = torch.finfo(dense.dtype).eps * r.abs().clamp_min(1)
    allowed = factor * (d - r).abs() + ulp
    assert bool(((o - r).abs() <= allowed)[finite].all()), (ours, dense, reference)


# ---- half precision: float32 accumulation, dense's dtype ---------------------------------

def _half_repro(dtype):
    return sf.sparse_coo_tensor([[0]], torch.tensor([150.], dtype=dtype), (1000,),
                                fill_value=100.)


HALF_REDUCTIONS = {
    "mean": lambda x: x.mean(),
    "std": lambda x: x.std(),
    "var": lambda x: x.var(),
    "norm": lambda x: x.norm(),
    "vector_norm_ord6": lambda x: torch.linalg.vector_norm(x, ord=6),
    "mean_dim": lambda x: x.mean(0),
    "logsumexp": lambda x: torch.logsumexp(x, 0),
    "sum": lambda x: x.sum(),
    "sum_kwarg": lambda x: x.sum(dim=None),
}


@pytest.mark.parametrize("dtype", HALVES, ids=str)
@pytest.mark.parametrize("name", sorted(HALF_REDUCTIONS))
def test_half_reductions_overflow_where_dense_does_not(name, dtype):
    """S.mean() of 999 copies of fill 100 in float16 was inf (count * fill
    formed in float16); dense accumulates in float32 and gives 100.06."""
    f = HALF_REDUCTIONS[name]
    S = _half_repro(dtype)
    _within_dense_error(f(S), f(S.to_dense()), f(S.to_dense().double()))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_half_norm_along_a_dim_keeps_the_dtype(dtype):
    """norm(dim=1) of a float16/bfloat16 tensor returned float32."""
    A = sf.sparse_coo_tensor([[0, 1], [3, 4]], torch.tensor([150., 3.], dtype=dtype), (2, 500),
                             fill_value=100.)
    for f in (lambda x: x.norm(dim=1), lambda x: x.mean(1), lambda x: x.std(1),
              lambda x: x.sum(1), lambda x: x.var(0)):
        _within_dense_error(f(A), f(A.to_dense()), f(A.to_dense().double()))


def test_bfloat16_var_std_within_dense_error():
    """bfloat16 var/std had 5-7x dense's error (the fill term rounded to
    bfloat16 before the sum)."""
    g = T.rng(3)
    keep = torch.rand(64, 64, generator=g) < 0.3
    idx = keep.nonzero().t()
    values = (torch.randn(idx.shape[1], generator=g) * 50 + 300).to(torch.bfloat16)
    A = sf.sparse_coo_tensor(idx, values, (64, 64), fill_value=310.)
    for f in (lambda x: x.var(), lambda x: x.std(), lambda x: x.var(1), lambda x: x.std(0)):
        _within_dense_error(f(A), f(A.to_dense()), f(A.to_dense().double()))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_half_softmax_and_products_within_dense_error(dtype):
    A = sf.sparse_coo_tensor([[0, 1, 2], [1, 0, 3]], torch.tensor([15., 3., -7.], dtype=dtype),
                             (3, 400), fill_value=10.)
    x = torch.rand(400, 2, generator=T.rng(1)).to(dtype)
    D = A.to_dense()
    programs = (lambda a, x: torch.softmax(a, 1), lambda a, x: torch.log_softmax(a, 0),
                lambda a, x: a @ x, lambda a, x: a @ a.t(), lambda a, x: a.t() @ a[:, :3])
    for f in programs:
        _within_dense_error(f(A, x), f(D, x), f(D.double(), x.double()))


@pytest.mark.parametrize("dtype", HALVES, ids=str)
def test_half_sum_fast_path_equals_route(dtype):
    """The hot path's C sum (_C.hot_sum) and the route's with_fill_term
    compute one fill term, in float32, bit for bit."""
    # 999 * 100 overflows float16; the total, 39900, does not.
    S = sf.sparse_coo_tensor([[0]], torch.tensor([-6e4], dtype=dtype), (1000,), fill_value=100.)
    fast, route = S.sum(), S.sum(dim=None)
    assert fast.dtype == dtype and torch.equal(fast, route)
    _within_dense_error(fast, S.to_dense().sum(), S.to_dense().double().sum())


# ---- gradients past a fill that covers no element ------------------------------------------

def _all_stored(fill):
    return sf.sparse_coo_tensor([[0, 1, 2]], [1., 2., 3.], (3,), fill_value=fill)


DEAD_FILL_PROGRAMS = {
    "mul": lambda A, e: A * e,
    "div": lambda A, e: A / e,
    "atan2": lambda A, e: torch.atan2(A, e),
    "rpow": lambda A, e: (e + 1) ** A,
}


def _grad_of_e(program, A, e0=1.5):
    e = torch.tensor(e0, requires_grad=True)
    program(A, e).to_dense().sum().backward() if isinstance(A, sf.SparseFillTensor) else \
        program(A, e).sum().backward()
    return e.grad


@pytest.mark.parametrize("fill", [inf, -inf, nan], ids=["inf", "-inf", "nan"])
@pytest.mark.parametrize("name", sorted(DEAD_FILL_PROGRAMS))
def test_nan_gradient_from_a_fill_that_covers_no_element(name, fill):
    """(A * e).sum().backward() with every element of A stored and fill inf
    gave e.grad nan (0 * d(fill * e)/de); dense gives 6."""
    A = _all_stored(fill)
    T.assert_all_close((_grad_of_e(DEAD_FILL_PROGRAMS[name], A),),
                       (_grad_of_e(DEAD_FILL_PROGRAMS[name], A.to_dense()),))
    assert torch.equal(torch.isnan((DEAD_FILL_PROGRAMS[name](A, torch.tensor(1.5))).fill_value()),
                       torch.isnan(DEAD_FILL_PROGRAMS[name](torch.tensor(fill), torch.tensor(1.5))))


def test_pow_gradient_from_a_dead_fill_of_minus_one():
    """A ** e with fill -1 covering nothing: nan where dense gives 4.68."""
    program = lambda A, e: A ** e  # noqa: E731
    A = _all_stored(-1.)
    T.assert_all_close((_grad_of_e(program, A),), (_grad_of_e(program, A.to_dense()),))


def test_empty_tensor_times_a_plain_scalar_gradient_is_zero():
    """sf.full((0, 3), inf) * e: nan where dense gives 0."""
    program = lambda A, e: A * e  # noqa: E731
    A = sf.full((0, 3), inf)
    assert _grad_of_e(program, A).item() == 0 == _grad_of_e(program, A.to_dense()).item()


def test_hybrid_tensor_times_a_tensor_over_its_dense_part_gradient():
    A = sf.sparse_coo_tensor([[0, 1]], [[1., 2.], [3., 4.]], (2, 2), fill_value=inf)
    grads = []
    for X in (A, A.to_dense()):
        e = torch.tensor([1.5, 2.], requires_grad=True)
        _dense(X * e).sum().backward()
        grads.append(e.grad)
    T.assert_all_close((grads[0],), (grads[1],))


def test_second_order_gradient_through_an_empty_pow_is_zero():
    """The Hessian of (sf.full((0,), 0.) ** e).sum() was nan; dense gives 0."""
    e = torch.tensor(1.5, dtype=torch.float64)
    ours = torch.autograd.functional.hessian(
        lambda e: (sf.full((0,), 0., dtype=torch.float64) ** e).to_dense().sum(), e)
    dense = torch.autograd.functional.hessian(
        lambda e: (torch.zeros(0, dtype=torch.float64) ** e).sum(), e)
    assert ours.item() == dense.item() == 0


# ---- sparse @ sparse with non-finite values at fill 0 ---------------------------------------

@pytest.mark.parametrize("value", [nan, inf, -inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("mm", [lambda a, b: a @ b, torch.mm, torch.sparse.mm],
                         ids=["matmul", "mm", "sparse.mm"])
def test_sparse_at_sparse_with_fill_zero_keeps_nan_and_inf(mm, value):
    """The fill-0 SpGEMM skipped unspecified zeros: nan * 0 vanished."""
    A = sf.sparse_coo_tensor([[0], [0]], [1.], (2, 2))
    B = sf.sparse_coo_tensor([[1], [0]], [value], (2, 2))
    T.assert_matches_dense(mm(A, B), mm(A.to_dense(), B.to_dense()))
    T.assert_matches_dense(mm(B, A), mm(B.to_dense(), A.to_dense()))


# ---- type promotion against plain tensors ----------------------------------------------------

def test_plain_tensor_of_another_float_dtype_keeps_the_fill_dtype():
    """float64 A + a float32 column gave a float32 fill (3.0739998817 where
    dense has 3.0740000010), and then ones(3, 2, float64) @ S raised."""
    S = sf.full((2, 3), 1.5, dtype=torch.float64) + torch.tensor([[1.574], [-1.03]])
    D = torch.full((2, 3), 1.5, dtype=torch.float64) + torch.tensor([[1.574], [-1.03]])
    assert S.fill_value().dtype == torch.float64
    T.assert_matches_dense(S, D, rtol=0, atol=0)
    T.assert_matches_dense(torch.ones(3, 2, dtype=torch.float64) @ S,
                         torch.ones(3, 2, dtype=torch.float64) @ D)


@pytest.mark.parametrize("other", [torch.tensor(2., dtype=torch.float64), torch.tensor(2),
                                   torch.tensor([2.], dtype=torch.float64), torch.tensor(True)],
                         ids=["0d-float64", "0d-int64", "1d-float64", "0d-bool"])
def test_zero_dim_tensor_does_not_widen_the_dtype(other):
    """sf.full((3,), 1.) + tensor(2., float64) was float64; torch's
    result_type keeps float32 for a 0-d operand of the same kind."""
    A = sf.full((3,), 1.)
    ours, dense = A + other, A.to_dense() + other
    assert ours.dtype == dense.dtype and ours.sum().dtype == dense.sum().dtype
    T.assert_matches_dense(ours, dense)


# ---- exact results --------------------------------------------------------------------------

def test_var_of_equal_elements_is_exactly_zero():
    """sf.full((3, 2), 0.1, float64).var(0) was 2.9e-34 (log(var) = -77, not -inf)."""
    A = sf.full((3, 2), 0.1, dtype=torch.float64)
    for f in (lambda x: x.var(0), lambda x: x.std(1), lambda x: torch.log(x.var(0))):
        ours, dense = _dense(f(A)), f(A.to_dense())
        assert torch.equal(ours, dense)
    # (dense's var of the whole tensor is 2.3e-34 here, another algorithm;
    # ours is 0: within its error, and never negative.)
    assert A.var().item() == 0
    B = sf.sparse_coo_tensor([[0, 2], [1, 0]], torch.tensor([0.1, 0.1], dtype=torch.float64),
                             (3, 2), fill_value=0.1)
    assert torch.equal(_dense(B.var(0)), torch.zeros(2, dtype=torch.float64))


def test_lone_negative_zero_survives_coalesce():
    """A lone -0.0 of an uncoalesced COO became +0.0 (1/x: -inf turned +inf)."""
    idx, values = [[0, 0, 1, 2]], torch.tensor([-0.0, 0.0, -0.0, -0.0])
    ours = sf.sparse_coo_tensor(idx, values, (3,), fill_value=1.).coalesce().values()
    torch_own = torch.sparse_coo_tensor(idx, values, (3,)).coalesce().values()
    assert torch.equal(torch.signbit(ours), torch.signbit(torch_own))
    B = sf.sparse_coo_tensor([[1, 0]], [-0.0, 2.], (3,), fill_value=1.)
    T.assert_matches_dense(1 / B.coalesce(), 1 / B.to_dense())


# ---- lenient or unclear edges ------------------------------------------------------------

def test_softmax_of_an_empty_tensor_is_empty():
    """torch.softmax(sf.full((2, 0), 1.5), 0) raised 'a required pointer is NULL'."""
    for dim in (0, 1):
        T.assert_matches_dense(torch.softmax(sf.full((2, 0), 1.5), dim),
                             torch.softmax(torch.full((2, 0), 1.5), dim))


def test_bool_subtraction_is_refused_as_torch_refuses_it():
    """True - sf.full((2,), 1.) computed where torch refuses to subtract with bools."""
    with pytest.raises(RuntimeError, match="bool"):
        True - sf.full((2,), 1.)
    with pytest.raises(RuntimeError, match="bool"):
        sf.full((2,), True) - sf.full((2,), False)
    T.assert_matches_dense(sf.full((2,), True) + True, torch.full((2,), True) + True)


def test_fractional_size_is_a_type_error():
    """size=(3.5,) was truncated to 3; torch raises TypeError."""
    with pytest.raises(TypeError, match="size"):
        sf.sparse_coo_tensor([[0]], [1.], (3.5,))
    with pytest.raises(TypeError, match="size"):
        sf.full((3.5,), 1.)
    assert sf.full((torch.tensor(3),), 1.).shape == (3,)


def test_integer_fill_out_of_range_is_refused_not_wrapped():
    """An int64 fill of 2**40 with int32 values wrapped to 0."""
    values = torch.tensor([1], dtype=torch.int32)
    for fill in (2 ** 40, torch.tensor(2 ** 40)):
        with pytest.raises(ValueError, match="fill_value"):
            sf.sparse_coo_tensor([[0]], values, (3,), fill_value=fill)
    assert sf.sparse_coo_tensor([[0]], values, (3,), fill_value=torch.tensor(7)).fill_value() == 7


def test_meta_values_with_cpu_indices_name_the_arguments():
    with pytest.raises((RuntimeError, ValueError), match="indices.*values|values.*indices"):
        sf.sparse_coo_tensor(torch.tensor([[0]]), torch.ones(1, device="meta"), (3,))


def test_pca_lowrank_differs_only_by_the_singular_vectors_basis():
    """torch.pca_lowrank(A, q=2, center=True) differed from dense (up to 0.58)
    on OpInfo samples whose fill covers most elements: the singular values and
    the low-rank reconstruction U S V^T agree to rounding; the vectors
    themselves differ by sign and, where a singular value is 0 or repeated,
    by a rotation, which dense's own runs do as well (not a defect)."""
    g = T.rng(21)
    for fill, shape, center in ((0.0, (3, 2), True), (1.5, (3, 2), False), (3.0, (5, 4), True)):
        D = torch.randn(shape, generator=g, dtype=torch.float64)
        D = torch.where(torch.rand(shape, generator=g) < 0.2, D, torch.tensor(fill).double())
        A = sf.to_sparse(D, fill_value=fill)
        torch.manual_seed(0)
        U1, S1, V1 = torch.pca_lowrank(A, q=2, center=center)
        torch.manual_seed(0)
        U2, S2, V2 = torch.pca_lowrank(D, q=2, center=center)
        torch.testing.assert_close(S1, S2)
        torch.testing.assert_close(U1 @ torch.diag(S1) @ V1.T, U2 @ torch.diag(S2) @ V2.T)


# ---- found by the op-chain fuzzer once the wave's branches met ------------------------

H = torch.float16


def _int32_and_mask():
    A = sf.sparse_coo_tensor([[0, 1], [0, 0]], torch.tensor([1, 2], dtype=torch.int32), (3, 2),
                             fill_value=-3)
    C = sf.sparse_coo_tensor([[0], [0]], torch.tensor([True]), (3, 2), fill_value=False)
    return A, C


@pytest.mark.parametrize("order", ["number last", "number first"])
def test_where_with_a_number_keeps_the_int32_dtype(order):
    """torch.where(C, int32 A, 0) was int64 (the number became an int64
    tensor before the kernel promoted); torch keeps int32 (seed 108571)."""
    A, C = _int32_and_mask()
    args = (C, A, 0) if order == "number last" else (C, 0, A)
    dense = [a.to_dense() if isinstance(a, sf.SparseFillTensor) else a for a in args]
    T.assert_dense_equal(torch.where(*args).to_dense(), torch.where(*dense))


def test_lerp_of_bools_with_a_float_weight_computes_in_float():
    """lerp(bool A, True, tensor(0.5, float64)) raised "expected dtype bool
    for weight"; torch promotes every operand to float64 (seed 2419)."""
    A = sf.sparse_coo_tensor([[0, 1], [0, 0]], torch.tensor([True, False]), (4, 1),
                             fill_value=True)
    end, weight = torch.tensor(True), torch.tensor(0.5, dtype=torch.float64)
    T.assert_dense_equal(torch.lerp(A, end, weight).to_dense(),
                         torch.lerp(A.to_dense(), end, weight))


@pytest.mark.parametrize("bias_fill", [float("-inf"), 1.0])
def test_half_linear_adds_the_bias_before_rounding(bias_fill):
    """F.linear in float16 with a product past 65504 and a bias of -inf gave
    NaN (inf + -inf in half); ATen's addmm adds in float32 and rounds once:
    -inf (seed 110738). addmm and baddbmm share the rule."""
    W = sf.sparse_coo_tensor([[0, 0, 0], [0, 1, 2]], torch.tensor([-16896., 43.6, -5400.],
                                                                  dtype=H), (1, 3),
                             fill_value=-1.)
    x = torch.tensor([[-4548., -6484., 5752.]], dtype=H)
    b = torch.tensor([bias_fill], dtype=H)
    T.assert_dense_equal(F.linear(x, W, b), F.linear(x, W.to_dense(), b))
    T.assert_dense_equal(torch.addmm(b.expand(1, 1), x, W.t()),
                         torch.addmm(b.expand(1, 1), x, W.to_dense().t()))
    T.assert_dense_equal(torch.baddbmm(b.expand(1, 1, 1), x[None], W.t().unsqueeze(0)),
                         torch.baddbmm(b.expand(1, 1, 1), x[None], W.to_dense().t()[None]))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("fn", [torch.quantile, torch.nanquantile])
def test_quantile_refuses_half_types_as_torch(fn, dtype):
    """quantile of a float16 tensor computed where torch refuses ("input
    tensor must be either float or double")."""
    A = sf.sparse_coo_tensor([[0]], torch.tensor([2.], dtype=dtype), (4,), fill_value=1.)
    with pytest.raises(RuntimeError, match="must be either float or double"):
        fn(A.to_dense(), 0.5)
    with pytest.raises(RuntimeError, match="must be either float or double"):
        fn(A, 0.5)


def test_amax_of_an_empty_complex_tensor_is_empty_as_torch():
    """amax of a (5, 0) complex tensor along dim 0 raised "not supported for
    complex tensors"; torch returns the empty result (seed 1706)."""
    A = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64),
                             torch.zeros(0, dtype=torch.complex64), (5, 0), fill_value=-1.)
    T.assert_dense_equal(torch.amax(A, 0).to_dense(), torch.amax(A.to_dense(), 0))
    with pytest.raises(RuntimeError, match="not supported for complex"):
        torch.amax(sf.full((2, 2), 1 + 1j), 0)


def test_a_fill_covering_nothing_with_a_nan_exponent_has_a_zero_hessian():
    """sf.full((0, 4), f) ** e with e = NaN: the Hessian in e was NaN (the dead
    fill was replaced by 1, but pow(1, e)'s second derivatives with e = NaN
    are NaN); dense computes nothing: 0 (fuzz seed 113120)."""
    f = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    e = torch.tensor(float("nan"), dtype=torch.float64, requires_grad=True)
    A = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0, dtype=torch.float64),
                             (0, 4), fill_value=f)
    ge, gf = torch.autograd.grad((A ** e).to_dense().sum(), (e, f), create_graph=True)
    hessian = torch.autograd.grad(ge + gf, (e, f), allow_unused=True)
    assert all(h is None or h == 0 for h in hessian), hessian


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr])
def test_per_row_and_per_column_fills_of_full_slices_stay_out_of_products(layout):
    """A per-row fill of inf on a fully stored row (a per-column NaN on a
    full column) covers no element: A @ x must not see it, and its gradient
    is 0 (the product reads the covered slices from the row pointers or a
    column count, not per element)."""
    D = torch.float64
    x = torch.tensor([[1., 2.], [2., -1.], [3., 0.5]], dtype=D, requires_grad=True)
    for idx, vals, fill in (([[0, 0, 0, 1], [0, 1, 2, 0]], [1., 2., 3., 4.], [[inf], [2.]]),
                            ([[0, 1, 0], [0, 0, 1]], [1., 2., 3.], [[nan, 1., 2.]]),
                            ([[0, 1, 0], [0, 0, 1]], [1., 2., 3.], [[1e308, 1., 2.]])):
        f = torch.tensor(fill, dtype=D, requires_grad=True)
        A = sf.sparse_coo_tensor(idx, torch.tensor(vals, dtype=D), (2, 3), fill_value=f)
        A = A.to_sparse_csr() if layout == torch.sparse_csr else A
        dense_f = f.detach().clone().requires_grad_()
        dense = torch.where(torch.zeros(2, 3, dtype=torch.bool).index_put_(
            tuple(torch.tensor(idx)), torch.tensor(True)),
            torch.zeros(2, 3, dtype=D).index_put_(tuple(torch.tensor(idx)),
                                                  torch.tensor(vals, dtype=D)), dense_f)
        T.assert_dense_equal(A @ x, dense @ x)
        got = torch.autograd.grad((A @ x).sum(), (f, x))
        want = torch.autograd.grad((dense @ x).sum(), (dense_f, x))
        T.assert_dense_equal(got[0], want[0])
        T.assert_dense_equal(got[1], want[1])


def test_diff_along_a_dim_of_size_one_stays_in_the_graph():
    """torch.diff along a dim of size 1 (an empty result) was cut from the
    graph, where dense's empty result requires grad (fuzz seed 157516); a
    NaN or infinite fill sends no NaN back."""
    for fill, idx in itertools.product((1.5, inf), ([[0], [0], [1]],
                                                   [[0, 0, 0], [0, 0, 0], [0, 1, 2]])):
        f = torch.tensor(fill, requires_grad=fill != inf)  # (every element stored: seed 157516)
        v = torch.full((len(idx[0]),), 2., requires_grad=True)
        A = sf.sparse_coo_tensor(idx, v, (1, 1, 3), fill_value=f)
        out = torch.diff(A, dim=-2)
        want = torch.diff(A.to_dense(), dim=-2)
        assert out.shape == want.shape and out.requires_grad and want.requires_grad
        grads = torch.autograd.grad(out.to_dense().sum(), [t for t in (v, f) if t.requires_grad],
                                    allow_unused=True)
        assert all(g is None or bool(g.eq(0).all()) for g in grads), grads


@pytest.mark.parametrize("fill", [1.5, inf, nan])
def test_results_with_no_element_stay_in_the_graph_as_dense(fill):
    """softmax (and any routed op) of a tensor with a size-0 dim returned a
    result cut from the graph where dense's requires grad (fuzz seed
    171662); the factories and detach stay cut, as in dense."""
    f = torch.tensor(fill, requires_grad=True)
    A = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0), (0, 3),
                             fill_value=f)
    D = A.to_dense()
    for fn in (lambda x: torch.softmax(x, 0), lambda x: x.sum(0), torch.zeros_like,
               lambda x: x.detach(), lambda x: torch.exp(x).t()):
        ours, dense = fn(A), fn(D)
        assert ours.requires_grad == dense.requires_grad, fn
        if dense.requires_grad:
            grads = torch.autograd.grad(_dense(ours).sum(), f, allow_unused=True)
            assert grads[0] is None or grads[0] == 0, grads


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.uint8])
def test_amax_and_amin_along_a_dim_keep_a_narrow_integer_dtype(dtype):
    """amax(dim) of an int32 tensor was int64 (the slot kernels widen);
    torch keeps int32 (fuzz seed 196812)."""
    A = sf.sparse_coo_tensor([[0, 1], [0, 2]], torch.tensor([3, 4], dtype=dtype), (5, 3),
                             fill_value=7)
    for fn in (lambda X: X.amax(0), lambda X: X.amin(1), lambda X: torch.amax(X, -2)):
        T.assert_dense_equal(_dense(fn(A)), fn(A.to_dense()))


@pytest.mark.parametrize("call", ["vector_norm", "foreach_norm", "vector_norm dim"])
def test_the_gradient_of_a_zero_norm_is_zero(call):
    """vector_norm (and _foreach_norm, which clip_grad_norm_ calls) of an
    all-zero tensor had a NaN gradient through the reference's sqrt at 0;
    dense's is 0 (fuzz seeds 204909, 205623)."""
    f = torch.tensor(0., requires_grad=True)
    A = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0), (2, 4),
                             fill_value=f)
    fn = {"vector_norm": torch.linalg.vector_norm,
          "foreach_norm": lambda X: torch._foreach_norm([X])[0],
          "vector_norm dim": lambda X: torch.linalg.vector_norm(X, dim=1).sum()}[call]
    ours, dense = _dense(fn(A)), fn(A.to_dense())
    T.assert_dense_equal(ours, dense)
    T.assert_dense_equal(torch.autograd.grad(ours, f)[0], torch.autograd.grad(dense, f)[0])


def test_a_product_with_a_full_fill_matrix_is_refused_by_name():
    """A fill of shape (m, k) (per element) reached the product kernel, whose
    RuntimeError named none of the user's arguments (fuzz seed 202796)."""
    A = sf.sparse_coo_tensor([[0, 1, 2], [0, 1, 2]], torch.ones(3), (3, 3),
                             fill_value=torch.arange(9.).reshape(3, 3) + 1)
    with pytest.raises(NotImplementedError, match=r"a fill of shape \(3, 3\)"):
        A @ torch.ones(3)


def test_a_ternary_op_cuts_the_per_slice_fill_slices_that_cover_nothing():
    """lerp of three sparse operands, the weight's per-row fill -inf in a row
    the union stores: that row of the result's fill
    covers nothing, yet its derivative (1 - w = inf) times the zero gradient
    sent NaN to the input's fill; dense's gradient is finite (fuzz seed 152812)."""
    fx = torch.tensor(-1., requires_grad=True)
    x = sf.sparse_coo_tensor([[2, 3], [0, 0]], torch.tensor([1.6, -1.9]), (4, 1), fill_value=fx)
    end = sf.sparse_coo_tensor([[2], [0]], torch.tensor([0.13]), (4, 1), fill_value=0.)
    w = sf.sparse_coo_tensor([[0, 1, 2, 3], [0, 0, 0, 0]], torch.tensor([-0.45, -0.66, 0.12, -0.86]),
                             (4, 1), fill_value=torch.tensor([[-1.], [-inf], [1.5], [1.5]]))
    ours, dense = torch.lerp(x, end, w), torch.lerp(x.to_dense(), end.to_dense(), w.to_dense())
    T.assert_dense_equal(ours.to_dense(), dense)
    got = torch.autograd.grad(ours.to_dense().sum(), fx)[0]
    want = torch.autograd.grad(dense.sum(), fx)[0]
    T.assert_dense_equal(got, want)


def test_coalescing_complex_values_with_an_infinite_part_keeps_the_other_part():
    """Coalescing summed duplicates with ATen's complex add, which scales by
    alpha: 1 * (inf + 1.19j) has a NaN imaginary part, so a shape op that
    re-sorts (roll) turned a stored inf + 0.61j into inf + nanj where dense
    keeps it (fuzz seed 200180)."""
    v = torch.tensor([complex(inf, 0.5), 1 + 1j, complex(-inf, -2.)], dtype=torch.complex64)
    A = sf.sparse_coo_tensor([[1, 0, 2], [0, 0, 0]], v, (3, 1), fill_value=torch.tensor(-1 + 0j))
    cases = [(lambda X: X.roll(2, 0), lambda D: D.roll(2, 0)),
             (lambda X: X.coalesce(), lambda D: D),
             (lambda X: torch.imag(X.flip(0)), lambda D: torch.imag(D.flip(0)))]
    for fn, dense_fn in cases:
        ours, dense = _dense(fn(A)), dense_fn(A.to_dense())
        T.assert_dense_equal(ours, dense)


@pytest.mark.parametrize("layout", ["coo", "csr", "bsr"])
def test_an_empty_row_of_a_product_is_plus_zero_as_dense(layout):
    """The fill correction alone (0 * a negative column sum) is -0.0, which
    an empty row of A @ B kept where dense's sum of products is +0.0; atan2
    and rsqrt then gave -pi and -inf (fuzz seeds 182614, 179938)."""
    A = sf.sparse_coo_tensor([[0, 1], [0, 1]], torch.tensor([2., 3.], dtype=torch.float64),
                             (4, 4), fill_value=0.)
    A = {"coo": A, "csr": A.to_sparse_csr(), "bsr": A.to_sparse_bsr((2, 2))}[layout]
    B = -torch.ones(4, 3, dtype=torch.float64)
    ours, dense = (A @ B).to_dense(), A.to_dense() @ B
    assert torch.equal(torch.signbit(ours), torch.signbit(dense)), (ours, dense)
    assert torch.equal(torch.atan2(ours, -torch.ones(())), torch.atan2(dense, -torch.ones(())))



@pytest.mark.parametrize("ord", [3, 2.5, 0.5, -1, -0.5])
def test_the_gradient_of_a_zero_norm_of_any_order_is_dense_s(ord):
    """vector_norm of order 3 (decomposed) had a NaN gradient at a zero norm,
    and norm of order < 1 a NaN at each zero element (|x| ** p at 0);
    dense's backward masks both to 0 (fuzz seed 314122)."""
    for dim in (None, 1):
        f = torch.tensor(0., dtype=torch.float64, requires_grad=True)
        v = torch.tensor([0., 1.5], dtype=torch.float64, requires_grad=True)
        A = sf.sparse_coo_tensor([[0, 1], [0, 2]], v, (3, 4), fill_value=f)
        for fn in (lambda X: torch.linalg.vector_norm(X, ord, dim=dim),
                   lambda X: torch.norm(X, p=ord, dim=dim)):
            ours, dense = _dense(fn(A)), fn(A.to_dense())
            T.assert_dense_equal(ours, dense)
            for a, b in zip(torch.autograd.grad(ours.sum(), (f, v)),
                            torch.autograd.grad(dense.sum(), (f, v))):
                T.assert_dense_equal(a, b)


@pytest.mark.parametrize("other", [3, 2.5, "f64 0-d"])
def test_reflected_division_is_torch_s_reciprocal_times_other(other):
    """``other / A`` is torch's Tensor.__rtruediv__: A.reciprocal() * other.
    Routed as a division, a bool A divided into a float64 0-d tensor came out
    float64 where dense's is float32 (fuzz seed 339959), and 3 / A differed
    from dense's in the last bit."""
    other = torch.tensor(3., dtype=torch.float64) if other == "f64 0-d" else other
    for A in (sf.full((4, 1), True),
              sf.sparse_coo_tensor([[0], [0]], torch.tensor([7]), (4, 1), fill_value=3),
              sf.sparse_coo_tensor([[0, 1], [0, 0]], torch.tensor([7., 0.3]), (4, 1),
                                   fill_value=0.7)):
        ours, dense = other / A, other / A.to_dense()
        assert torch.equal(_dense(ours), dense) and ours.dtype == dense.dtype, (ours, dense)


@pytest.mark.parametrize("call", ["pad", "diag", "repeat"])
def test_a_result_made_from_an_input_with_no_element_stays_in_the_graph(call):
    """F.pad of an empty tensor is all pad value, yet dense's result requires
    grad (its backward sends 0); ours was built fresh, cut from the graph, so
    a backward through it raised (fuzz seed 343383)."""
    f = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    A = sf.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.int64),
                             torch.zeros(0, dtype=torch.float64), (0,), fill_value=f)
    fn = {"pad": lambda X: F.pad(X, (1, 2), value=0.5), "diag": torch.diag,
          "repeat": lambda X: X.repeat(3)}[call]
    ours, dense = fn(A), fn(A.to_dense())
    assert ours.requires_grad == dense.requires_grad
    T.assert_dense_equal(_dense(ours), dense)
    if dense.numel():
        T.assert_dense_equal(torch.autograd.grad(_dense(ours).sum(), f)[0],
                             torch.zeros((), dtype=torch.float64))
    assert not A.new_zeros(2).requires_grad  # a factory's result does not, as dense's


def test_a_strided_result_with_no_element_stays_in_the_graph():
    """baddbmm of an empty sparse batch returns an empty strided tensor that
    did not require grad where dense's does (fuzz seed 348427)."""
    f = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    A = sf.sparse_coo_tensor(torch.zeros(3, 0, dtype=torch.int64),
                             torch.zeros(0, dtype=torch.float64), (0, 0, 2), fill_value=f)
    inp, b = torch.zeros(0, 0, 1, dtype=torch.float64), torch.ones(0, 2, 1, dtype=torch.float64)
    ours, dense = torch.baddbmm(inp, A, b), torch.baddbmm(inp, A.to_dense(), b)
    assert type(ours) is torch.Tensor and ours.requires_grad == dense.requires_grad
    T.assert_dense_equal(ours, dense)


@pytest.mark.parametrize("half", HALVES)
def test_duplicates_of_a_half_tensor_are_summed_in_float32(half):
    """Summed in the half type one by one, 2048 + 1 + 1 is 2048 in float16
    (torch's own coalesce and index_put do so); summed in float32 and
    rounded once it is the exact 2050, never further from the float64 sum
    than dense's (fuzz seed 420753: 133.0 where that sum is 133.5)."""
    big = 2048. if half == torch.float16 else 256.
    v = torch.tensor([big, 1., 1.], dtype=half)
    A = sf.sparse_coo_tensor([[0, 0, 0]], v, (2,), fill_value=0.)
    want = torch.tensor([big + 2, 0.], dtype=half)
    T.assert_dense_equal(A.to_dense(), want)
    T.assert_dense_equal(A.coalesce()._values(), want[:1])


def test_a_zero_dim_sparse_tensor_promotes_as_a_zero_dim_tensor():
    """A 0-d SparseFillTensor against a plain 0-d tensor of a wider dtype:
    both 0-d, so the wider wins, as dense (float32 came out where dense is
    float64; fuzz seed 422887)."""
    S = sf.full((), 1.5, dtype=torch.float32)
    other = torch.tensor(1., dtype=torch.float64)
    for fn in (torch.subtract, torch.add, torch.mul, torch.maximum):
        ours, dense = fn(S, other), fn(S.to_dense(), other)
        T.assert_dense_equal(_dense(ours), dense)


@pytest.mark.parametrize("call", ["amin(1)", "amax(0)", "amax()"])
def test_a_max_over_no_element_raises_as_dense(call):
    """amin/amax along a dim of size 0 (or over an empty tensor without a
    dim) computed a result where dense raises (fuzz seed 445027)."""
    A = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0), (0, 0),
                             fill_value=1.)
    fn = {"amin(1)": lambda X: X.amin(1), "amax(0)": lambda X: X.amax(0),
          "amax()": lambda X: X.amax()}[call]
    with pytest.raises(Exception) as dense:
        fn(A.to_dense())
    with pytest.raises(type(dense.value), match=r"Expected reduction dim"):
        fn(A)


@pytest.mark.parametrize("inplace", [False, True])
def test_ldexp_takes_the_power_in_the_exponent_s_dtype_as_dense(inplace):
    """``torch.ldexp(A, e)`` is ATen's ``A * torch.pow(2.0, e)``: with a
    float16 exponent of 20 the power overflows to inf before the product
    promotes, so dense gives inf where a promoted power gives a finite value
    (fuzz seed 510512: ours was finite, then logit turned dense's inf to NaN)."""
    for A in (sf.sparse_coo_tensor([[0, 2]], torch.tensor([0.25, -3.]), (4,), fill_value=0.5),
              sf.sparse_coo_tensor([[1, 3]], torch.tensor([0.25, -3.], dtype=torch.float64),
                                   (4,), fill_value=-2.),  # the power in float64: finite
              sf.sparse_coo_tensor([[1]], torch.tensor([7.], dtype=torch.bfloat16), (4,),
                                   fill_value=3.)):
        for e in (torch.tensor(20., dtype=torch.float16), torch.tensor([2, -1, 0, 30]),
                  sf.full((4,), 20., dtype=torch.float16)):
            d, de = A.to_dense(), _dense(e)
            if inplace and e.dim() == 1 and not isinstance(e, sf.SparseFillTensor):
                with pytest.raises(NotImplementedError, match="mul_"):
                    A.clone().ldexp_(e)  # a strided tensor over the sparse dim densifies
                continue
            ours = A.clone().ldexp_(e) if inplace else torch.ldexp(A, e)
            dense = d.clone().ldexp_(de) if inplace else torch.ldexp(d, de)
            assert torch.equal(_dense(ours), dense) and ours.dtype == dense.dtype, (ours, dense)


@pytest.mark.parametrize("dtypes", [(torch.bfloat16, torch.float16), (torch.float32, torch.float64),
                                    (torch.int64, torch.float32)])
@pytest.mark.parametrize("layout", ["csr", "bsr", "coo"])
def test_a_per_slice_fill_meets_a_fill_of_another_dtype_in_the_values_dtype(dtypes, layout):
    """A per-slice fill (m, 1) and a 0-d fill of another dtype: ATen promotes
    the 0-d one as a scalar, so the result's fill kept the first dtype while
    its values took the common one, and a BSR result then failed to build
    (fuzz seed 1319: bfloat16 with float16)."""
    first, second = dtypes
    A = sf.sparse_csr_tensor([0, 1, 1, 2], [0, 0], torch.tensor([1, 2], dtype=first), (3, 1),
                             fill_value=torch.tensor([[5], [6], [7]], dtype=first))
    A = {"csr": A, "bsr": A.to_sparse_bsr((1, 1)), "coo": A.to_sparse_coo()}[layout]
    B = sf.sparse_coo_tensor([[1], [0]], torch.tensor([2], dtype=second), (3, 1),
                             fill_value=torch.tensor(3, dtype=second))
    for ours, dense in ((A * B, A.to_dense() * B.to_dense()),
                        (B - A, B.to_dense() - A.to_dense())):
        assert ours.dtype == dense.dtype and ours.fill_value().dtype == dense.dtype
        assert torch.equal(ours.to_dense(), dense), (ours, dense)


def test_ldexp_with_an_integer_exponent_is_exact_and_differentiable():
    """An integer exponent takes ATen's std::ldexp kernel: input's dtype,
    one rounding, beyond float32's range of powers (1e-30 * 2 ** 130 is
    finite). Its gradient is 2 ** e; torch's own is 0 for a negative e (it
    raises 2 to e in integers: a KNOWN entry of the fuzzer), so ours is held
    to gradcheck, not to dense's."""
    A = sf.sparse_coo_tensor([[0, 2]], torch.tensor([1e-30, -3.]), (4,), fill_value=0.75)
    e = torch.tensor([130, -2, 5, -140])
    assert torch.equal(torch.ldexp(A, e).to_dense(), torch.ldexp(A.to_dense(), e))
    values = torch.tensor([0.3, -2.], dtype=torch.float64, requires_grad=True)
    fill = torch.tensor(0.75, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda v, f: torch.ldexp(
        sf.sparse_coo_tensor([[0, 2]], v, (4,), fill_value=f), e).to_dense(), (values, fill))
    with pytest.raises(NotImplementedError, match="Bool"):
        torch.ldexp(A, torch.tensor([True, False, True, True]))


def test_float_power_casts_each_operand_to_float64_on_its_own():
    """torch.float_power(A, e) raises float64 operands: a float16 exponent of
    150.5 with a bfloat16 base was promoted into bfloat16 first (150: 2 ** 150
    where dense gives 2 ** 150.5, and a finite value where a negative base
    gives NaN; fuzz seed 772537)."""
    A = sf.sparse_coo_tensor([[0, 1]], torch.tensor([-3.5, 2.], dtype=torch.bfloat16), (3,),
                             fill_value=100.)
    for e in (torch.tensor(150.5, dtype=torch.float16), torch.tensor([0.5, -0.3, 2.25]), 2.5, 1j):
        ours, dense = torch.float_power(A, e), torch.float_power(A.to_dense(), e)
        assert ours.dtype == dense.dtype
        torch.testing.assert_close(ours.to_dense(), dense, equal_nan=True, rtol=0, atol=0)
    ours = torch.float_power(2, sf.full((2,), 3))
    assert torch.equal(ours.to_dense(), torch.float_power(2, torch.full((2,), 3)))


def test_clamp_with_bounds_larger_than_the_fill_differentiates():
    """clamp(A, lo, hi) with a bound over the dense part: the fill (0-d) is
    clamped by a larger bound, and torch's clamp backward cannot reduce into
    the smaller input (fuzz seed 673867): the fills are broadcast first."""
    v = torch.tensor([[0.5, -2., 3.]], requires_grad=True)
    f = torch.tensor(0.25, requires_grad=True)
    lo, hi = torch.tensor([0., -1., 1.]), torch.tensor(2.)
    A = sf.sparse_coo_tensor([[0], [1]], v, (2, 2, 3), fill_value=f)
    torch.clamp(A, lo, hi).to_dense().sum().backward()
    D = A.to_dense().detach().requires_grad_()
    torch.clamp(D, lo, hi).sum().backward()
    torch.testing.assert_close(v.grad, D.grad[0, 1].unsqueeze(0))
    torch.testing.assert_close(f.grad, D.grad.sum() - D.grad[0, 1].sum())


def test_a_per_slice_fill_slice_that_covers_nothing_leaves_the_graph_on_one_pattern():
    """Two operands of the same pattern (the fast path) with a per-slice
    fill: a slice of it that covers no element is cut from the graph as on a
    union, so atan2's NaN derivative at (-inf, -1) stays out of the other
    fill's gradient (fuzz seed 788156: NaN where dense gives a finite value)."""
    v = torch.tensor([0.64, -1.21, -0.52, 1.10], dtype=torch.float64, requires_grad=True)
    f = torch.tensor([[1.5, -inf]], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([-0.81], dtype=torch.float64, requires_grad=True)
    g = torch.tensor(-1., dtype=torch.float64, requires_grad=True)
    A = sf.sparse_coo_tensor([[0, 0, 0, 0], [1, 1, 1, 1]], v, (1, 2), fill_value=f)
    B = sf.sparse_coo_tensor([[0], [1]], w, (1, 2), fill_value=g)
    (gg,) = torch.autograd.grad(torch.arctan2(A, B).to_dense().sum(), (g,))
    D = B.to_dense().detach().requires_grad_()
    torch.arctan2(A.to_dense().detach(), D).sum().backward()
    torch.testing.assert_close(gg, D.grad[0, 0])


def test_concatenating_a_tensor_with_nothing_stored_and_a_dense_part_fill():
    """dstack of a hybrid CSR with nothing stored and a per-slice fill:
    index_select into its empty values failed (fuzz seed 799250)."""
    A = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0, 3), (1, 4, 3),
                             fill_value=torch.tensor([-inf, 1., 2.])).to_sparse_csr()
    A = torch.softmax(A, 0)  # per-slice fill
    B = sf.sparse_coo_tensor([[0], [1]], torch.tensor([[1.3, 1.5, 0.4]]), (1, 4, 3),
                             fill_value=-1.).to_sparse_csr()
    T.assert_dense_equal(torch.dstack([A, B]).to_dense(),
                         torch.dstack([A.to_dense(), B.to_dense()]), equal_nan=True)


def test_fill_leaves_no_gradient_path_to_what_came_before():
    """A.fill_(v) on a tensor whose components are views (a CSR result):
    filled in place, the view passed the rest of its base's gradient on, so
    the first-order gradient hung on the op after fill_ and its double
    backward was needed (hardsigmoid has none: fuzz seed 658566). As in
    dense, the gradient through fill_ is zero and depends on nothing."""
    v = torch.randn(12, dtype=torch.float64, requires_grad=True)
    f = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
    idx = torch.stack(torch.meshgrid(torch.arange(3), torch.arange(1), torch.arange(4),
                                     indexing="ij")).reshape(3, -1)
    A = sf.sparse_coo_tensor(idx, v, (3, 1, 4), fill_value=f).to_sparse_csr() * 1.0
    out = F.hardsigmoid(torch.fill_(A, 2.5)).to_dense()
    assert torch.equal(out, F.hardsigmoid(torch.full((3, 1, 4), 2.5, dtype=torch.float64)))
    gv, gf = torch.autograd.grad(out.sum(), (v, f), create_graph=True, allow_unused=True)
    for g in (gv, gf):
        assert g is None or (not g.requires_grad and not bool(g.any()))


def test_dividing_by_a_number_keeps_a_structurally_zero_gradient_zero():
    """Fuzz seed 1014734: sgn's gradient is torch's ZeroTensor, which
    div.Tensor's backward keeps zero through sqrt's infinite derivative at
    0; Python binds `x / -1.0` to div.Tensor, and ours called div.Scalar,
    whose backward turned it into 0 / 0 = NaN (dense: 0)."""
    f = torch.zeros((), dtype=torch.float64, requires_grad=True)
    A = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, dtype=torch.float64),
                             (5, 1), fill_value=f)
    out = A.sqrt().divide(-1.0).acos().sgn()
    dense_f = f.detach().clone().requires_grad_()
    dense = dense_f.expand(5, 1).sqrt().divide(-1.0).acos().sgn()
    T.assert_dense_equal(torch.autograd.grad(out.to_dense().sum(), f)[0],
                         torch.autograd.grad(dense.sum(), dense_f)[0])


def test_put_accumulates_complex_values_that_require_grad():
    """Fuzz seed 1037646: put(accumulate=True) of complex values that
    require grad raised scatter_reduce's "does not support automatic
    differentiation for outputs with complex dtype"; dense computes."""
    v = torch.tensor([1 + 2j, -1j, 0.5 + 0j], requires_grad=True)
    A = sf.sparse_coo_tensor([[0, 1, 2], [0, 1, 2]], v, (3, 3), fill_value=0.5)
    src = torch.tensor([1j, 2.0 + 0j, 1j])
    index = torch.tensor([0, 4, 0])
    got = torch.put(A, index, src, accumulate=True)
    want = torch.put(A.to_dense(), index, src, accumulate=True)
    T.assert_dense_equal(got.to_dense(), want)
    gv = torch.autograd.grad(got.to_dense().abs().sum(), v)[0]
    gd = torch.autograd.grad(want.abs().sum(), v)[0]
    T.assert_dense_equal(gv, gd)
