"""The hot path (docs/design.md#hot-path): the fast handlers of plain operands
answer what dense torch answers, hand every other call to the routes, and
leave the exceptions' rules to them."""
import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from torch_sparsefill.functions import routing as _routing
from torch_sparsefill.functions.elementwise import fast as _elementwise_fast, handlers as _elementwise
from torch_sparsefill.functions.reductions import handlers as _reductions
from torch_sparsefill.tensor import is_plain

FILLS = [0.5, float("inf"), float("-inf"), float("nan")]


def _plain(fill, layout=torch.sparse_coo, dtype=torch.float64):
    A = sf.sparse_coo_tensor([[0, 1, 3], [2, 0, 1]], [1.5, -2., 3.], (4, 3), fill_value=fill,
                             dtype=dtype)
    return A if layout == torch.sparse_coo else A.to_sparse_csr()


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=["coo", "csr"])
@pytest.mark.parametrize("fill", FILLS, ids=str)
def test_fast_results_equal_dense(fill, layout):
    A = _plain(fill, layout)
    B = A._with(A._sf_values * -3, A._sf_fill + 1)  # the same pattern (same index tensors)
    assert is_plain(A) and is_plain(B)
    D, E = A.to_dense(), B.to_dense()
    for func, args, dense_args in (
            (torch.exp, (A,), (D,)), (torch.Tensor.__neg__, (A,), (D,)),
            (torch.Tensor.__mul__, (A, 2), (D, 2)), (torch.Tensor.__rmul__, (A, 2.5), (D, 2.5)),
            (torch.Tensor.__rsub__, (A, 1), (D, 1)), (torch.Tensor.__truediv__, (A, 3), (D, 3)),
            (torch.add, (A, B), (D, E)), (torch.Tensor.__mul__, (A, B), (D, E)),
            (torch.maximum, (A, B), (D, E))):
        fast = _routing.FAST[func]
        out = fast(args)
        assert out is not None, func  # plain operands: the hot path answers
        assert out.layout == layout and out._sf_coalesced
        T.assert_dense_equal(out.to_dense(), func(*dense_args))
    total = _reductions.FAST[torch.Tensor.sum]((A,))
    T.assert_dense_equal(total, D.sum())


def test_not_plain_goes_to_the_routes():
    A = _plain(0.5)
    dense_part = sf.sparse_coo_tensor([[0]], [[1., 2.]], (3, 2), fill_value=0.5)
    per_slice = sf.sparse_coo_tensor([[0], [1]], [1.], (2, 2),
                                     fill_value=torch.tensor([[1.], [2.]]))
    uncoalesced = sf.sparse_coo_tensor([[1, 0]], [1., 2.], (3,), fill_value=0.5)
    grad_fill = _plain(0.5).requires_grad_()
    csc = A.to_sparse_csc()
    other_pattern = sf.sparse_coo_tensor([[0, 1, 3], [2, 0, 1]], [1., 2., 3.], (4, 3),
                                         fill_value=2., dtype=torch.float64)
    for X in (dense_part, per_slice, uncoalesced, grad_fill, csc):
        assert not is_plain(X)
        assert _routing.FAST[torch.exp]((X,)) is None
        assert _routing.FAST[torch.sum]((X,)) is None
        T.assert_dense_equal(torch.exp(X).to_dense(), torch.exp(X.to_dense()))
    assert is_plain(grad_fill.detach())
    fast_mul = _routing.FAST[torch.Tensor.__mul__]
    # Equal patterns in other index tensors, numbers the route handles,
    # keywords: the routes answer, and as dense torch does.
    assert fast_mul((A, other_pattern)) is None
    T.assert_dense_equal((A * other_pattern).to_dense(), A.to_dense() * other_pattern.to_dense())
    assert fast_mul((A, True)) is None and _routing.FAST[torch.pow]((A, 2)) is None
    T.assert_dense_equal((A ** 2).to_dense(), A.to_dense() ** 2)
    T.assert_dense_equal(torch.add(A, A, alpha=2).to_dense(), torch.add(A.to_dense(),
                                                                        A.to_dense(), alpha=2))


def test_fill_gradient_through_the_route():
    A = _plain(0.5).requires_grad_()
    D = A.to_dense().detach().requires_grad_()
    (A * 3).sum().backward()
    (D * 3).sum().backward()
    T.assert_dense_equal(A.grad.to_dense(), D.grad)


def test_integer_division_by_a_dead_zero_fill_goes_to_the_route():
    # Every element stored: the zero fill divides nothing, which only the
    # route knows; the fast handler's error hands the call over.
    A = sf.sparse_coo_tensor([[0, 1, 2]], [6, 4, 2], (3,), fill_value=1)
    B = A._with(torch.tensor([3, 2, 1]), torch.tensor(0))
    assert _routing.FAST[torch.Tensor.__floordiv__]((A, B)) is None
    T.assert_dense_equal((A // B).to_dense(), A.to_dense() // B.to_dense())
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        sf.sparse_coo_tensor([[0]], [6], (3,), fill_value=1) // 0


def test_autocast_skips_the_hot_path(monkeypatch):
    def refuse(args):
        raise AssertionError("the hot path ran under autocast")
    monkeypatch.setitem(_routing.FAST, torch.exp, refuse)
    A = _plain(0.5, dtype=torch.float32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, expected = torch.exp(A), torch.exp(A.to_dense())
    assert out.dtype == expected.dtype
    T.assert_dense_equal(out.to_dense(), expected)


def test_every_fast_callable_is_routed_by_its_family():
    for func in _elementwise_fast.FAST:
        assert _routing.TABLE[func] is _elementwise.ROUTES[func]
    for func in _reductions.FAST:
        assert _routing.TABLE[func] is _reductions.ROUTES[func]


# ---- the hot functions (_C.hot, _C.hot_sum: aten_ext/ops/hot.cpp) -----------------

_ops = torch.ops.sparsefill


@pytest.mark.parametrize("fill", FILLS, ids=str)
def test_hot_functions_equal_the_ops(fill):
    A = _plain(fill)
    v, f = A._sf_values, A._sf_fill
    w, g = v * -3, f + 1
    exp, _, _ = sf._C.hot("exp")
    _, add_same, add_scalar = sf._C.hot("add")
    _, _, sub_scalar = sf._C.hot("sub")
    for got, want in ((exp(v, f), _ops.exp(v, f)),
                      (add_same(v, f, w, g, 2), _ops.add_same(v, f, w, g, 2)),
                      (add_scalar(v, f, 2.5, False, 1), _ops.add_scalar(v, f, 2.5, False, 1)),
                      (sub_scalar(v, f, 3, True, 1), _ops.sub_scalar(v, f, 3, True, 1))):
        assert got is not None
        for x, y in zip(got, want):
            assert x.dtype == y.dtype
            torch.testing.assert_close(x, y, equal_nan=True, rtol=0, atol=0)
    torch.testing.assert_close(sf._C.hot_sum(v, f, (4, 3)), A.to_dense().sum(), equal_nan=True)
    torch.testing.assert_close(sf._C.hot_sum(v, f, (3,)), v.sum())  # every element stored
    assert sf._C.hot_sum(v.long(), f.long(), (4, 3)) is None  # the route's dtype rules
    assert sf._C.hot_sum(v, f, (4, 3.0)) is None and sf._C.hot_sum(v, f, (2 ** 40,) * 2) is None
    assert sf._C.hot_sum(v, torch.ones(4, 1, dtype=v.dtype), (4, 3)) is None  # per-slice fill
    assert sf._C.hot_sum(v[:, None], f, (4, 3, 1)) is None  # a dense part


def test_hot_functions_leave_gradients_modes_and_odd_arguments_to_the_op():
    from torch.autograd import forward_ad
    from torch.utils._python_dispatch import TorchDispatchMode
    v, f = torch.tensor([1., 2.]), torch.tensor(0.5)
    exp, _, _ = sf._C.hot("exp")
    _, mul_same, mul_scalar = sf._C.hot("mul")
    assert exp(v, f) is not None
    assert exp(v.clone().requires_grad_(), f) is None
    assert exp(v, f.clone().requires_grad_()) is None
    assert sf._C.hot_sum(v.clone().requires_grad_(), f, (3,)) is None
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(v, torch.ones(2))
        assert exp(dual, f) is None and sf._C.hot_sum(dual, f, (3,)) is None

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Watch():
        assert exp(v, f) is None
    seen = []

    def under_vmap(x):
        seen.append(exp(x, f))
        return x
    torch.func.vmap(under_vmap)(v[:, None])
    assert seen == [None]
    assert mul_scalar(v, f, True, False) is None       # a bool is no number here
    assert mul_scalar(v, f, 2 ** 70, False) is None    # beyond int64: the op says what
    assert mul_scalar(v, f, 2, 1) is None              # reverse must be a bool
    assert mul_same(v, f, torch.ones(3), f) is None    # the op's error, not ours
    assert exp(v) is None and sf._C.hot("no_such_op") == (None, None, None)


def test_values_that_require_grad_take_the_op_on_the_hot_path():
    A = _plain(0.5)
    values = A._sf_values.clone().requires_grad_()
    B = A._with(values, A._sf_fill)
    assert is_plain(B)
    out = _routing.FAST[torch.exp]((B,))
    assert out is not None and out._sf_values.requires_grad
    out._sf_values.sum().backward()
    torch.testing.assert_close(values.grad, values.detach().exp())


@pytest.mark.parametrize("fill", FILLS, ids=str)
def test_one_row_on_the_hot_path_is_the_routes(fill):
    from torch_sparsefill.functions.shape import indexing as _indexing
    A = _plain(fill, torch.sparse_csr)
    fast = _routing.FAST[torch.Tensor.__getitem__]
    for i in range(-4, 4):
        out = fast((A, i))
        assert out is not None
        route = _indexing._select(A, 0, i)
        assert (out.layout, out.shape, out._sf_coalesced, out.is_coalesced()) == \
            (route.layout, route.shape, route._sf_coalesced, route.is_coalesced())
        T.assert_dense_equal(out.to_dense(), A.to_dense()[i])
        T.assert_dense_equal(A[i].to_dense(), A.to_dense()[i])
    out = fast((A, 1))
    out._sf_values.add_(1)  # a copy: A keeps its values
    T.assert_dense_equal(A[1].to_dense(), A.to_dense()[1])


def test_rows_the_hot_path_leaves_to_the_route():
    A = _plain(0.5, torch.sparse_csr)
    fast = _routing.FAST[torch.Tensor.__getitem__]
    for index in (4, -5, True, 1.0, (1,), slice(1, 2)):
        assert fast((A, index)) is None
    with pytest.raises(IndexError, match="out of range"):
        A[4]
    assert fast((_plain(0.5), 1)) is None  # COO: the route
    meta = A._with(A._sf_values.to("meta"), A._sf_fill.to("meta"))
    assert sf._C.hot_row(meta._sf_crow.to("meta"), meta._sf_col.to("meta"), meta._sf_values,
                         meta._sf_fill, 1) is None
    values = A._sf_values.clone().requires_grad_()
    B = A._with(values, A._sf_fill)
    assert fast((B, 1)) is None
    B[1]._sf_values.sum().backward()
    assert values.grad.tolist() == [0., 1., 0.]


# ---- whole calls in C (_C.hot_on, _C.hot_fast: aten_ext/ops/hot.cpp) ----------------

def test_new_sets_the_attributes_on_pattern_copies():
    from torch_sparsefill.tensor import plain as _tensor
    for layout in (torch.sparse_coo, torch.sparse_csr):
        assert len(_plain(0.5, layout).__dict__) == _tensor._N_FACTS


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=["coo", "csr"])
@pytest.mark.parametrize("fill", FILLS, ids=str)
def test_whole_calls_equal_the_python_path(fill, layout):
    """hot_on's result is the one the Python fast path makes (on_pattern of
    the op's kernel): the same attributes, the same bits."""
    from torch_sparsefill.tensor import on_pattern
    A = _plain(fill, layout)
    B = A._with(A._sf_values * -3, A._sf_fill + 1)
    exp, _ = sf._C.hot_on("exp")
    _, add_same = sf._C.hot_on("add")
    for got, (values, fill_out) in ((exp(A), _ops.exp(A._sf_values, A._sf_fill)),
                                    (add_same(A, B, 2), _ops.add_same(
                                        A._sf_values, A._sf_fill, B._sf_values, B._sf_fill, 2))):
        want = on_pattern(A, values, fill_out)
        assert type(got) is type(want) and got.__dict__.keys() == want.__dict__.keys()
        for key, value in want.__dict__.items():
            if isinstance(value, torch.Tensor) and key in ("_sf_values", "_sf_fill"):
                assert got.__dict__[key].dtype == value.dtype
                torch.testing.assert_close(got.__dict__[key], value, equal_nan=True, rtol=0,
                                           atol=0)
            else:
                assert got.__dict__[key] is value or got.__dict__[key] == value, key
        assert (got.shape, got.dtype, got.device, got.layout) == \
            (want.shape, want.dtype, want.device, want.layout)


def test_whole_calls_leave_the_rest_to_the_python_path():
    from torch.utils._python_dispatch import TorchDispatchMode
    exp, _ = sf._C.hot_on("exp")
    _, add_same = sf._C.hot_on("add")
    A = _plain(0.5)
    other = sf.sparse_coo_tensor([[0, 1, 3], [2, 0, 1]], [1., 2., 3.], (4, 3), fill_value=2.,
                                 dtype=torch.float64)
    cached = _plain(0.5)
    cached.note = "set by a user"  # an attribute beyond __new__'s: not copied by C
    grad = A._with(A._sf_values.clone().requires_grad_(), A._sf_fill)
    for X in (grad, cached, A.to_sparse_csc(), A.to_dense(), 3.0):
        assert exp(X) is None
    assert add_same(A, other) is None and add_same(A, A, 1) is not None
    assert add_same(A, A.to_dense()) is None and add_same(A, 2) is None

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Watch():
        assert exp(A) is None
    # ... and the fast handlers then answer as before (the Python path).
    out = _routing.FAST[torch.exp]((cached,))
    assert out is not None and not hasattr(out, "note")
    T.assert_dense_equal(out.to_dense(), cached.to_dense().exp())
    out = _routing.FAST[torch.exp]((grad,))
    assert out._sf_values.requires_grad


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr], ids=["coo", "csr"])
@pytest.mark.parametrize("fill", FILLS, ids=str)
def test_whole_calls_with_a_number_equal_the_python_path(fill, layout):
    """`A * 2`, `2 - A`, ...: the binary whole call takes a Python number on
    either side and gives what the Python fast path gives (on_pattern of the
    op's scalar kernel), bit for bit; pow's number form is left to Python."""
    from torch_sparsefill.tensor import on_pattern
    A = _plain(fill, layout)
    I = _plain(2, layout, dtype=torch.int64)
    for name, extra in (("add", (2,)), ("sub", (1,)), ("mul", ()), ("floor_divide", ()),
                        ("remainder", ()), ("fmod", ())):
        op = getattr(_ops, name + "_scalar")
        _, whole = sf._C.hot_on(name)
        for X in (A, I):
            for number in (3, -2.5, 0.0):
                for reverse in (False, True):
                    args = (number, X) if reverse else (X, number)
                    try:
                        values, fill_out = op(X._sf_values, X._sf_fill, number, reverse, *extra)
                    except RuntimeError:
                        assert whole(*args, *extra) is None  # the route raises it
                        continue
                    got, want = whole(*args, *extra), on_pattern(X, values, fill_out)
                    assert got is not None, (name, number, reverse)
                    for key in ("_sf_values", "_sf_fill"):
                        assert got.__dict__[key].dtype == want.__dict__[key].dtype
                        torch.testing.assert_close(got.__dict__[key], want.__dict__[key],
                                                   equal_nan=True, rtol=0, atol=0)
                    assert got.__dict__.keys() == want.__dict__.keys()
    _, pow_whole = sf._C.hot_on("pow")
    assert pow_whole(A, 2) is None and pow_whole(2, A) is None
    _, mul = sf._C.hot_on("mul")
    grad = A._with(A._sf_values.clone().requires_grad_(), A._sf_fill)
    assert mul(grad, 2) is None and mul(2, grad) is None and mul(2, 3) is None
    assert mul(A, True) is None  # a bool is not a number here (torch promotes it otherwise)
    # through the routed callables: A * 2 and 2 * A as torch computes them densely
    for func, args in ((torch.Tensor.__mul__, (A, 2)), (torch.Tensor.__rmul__, (A, 2)),
                       (torch.Tensor.__rsub__, (A, 1.5)), (torch.mul, (2, A))):
        out = _routing.FAST[func](args)
        T.assert_dense_equal(out.to_dense(), func(*[a.to_dense() if a is A else a
                                                    for a in args]))


def test_fast_handlers_in_c_swap_reflected_operands():
    A = _plain(0.5)
    B = A._with(A._sf_values * -3, A._sf_fill + 1)
    D, E = A.to_dense(), B.to_dense()
    for func in (torch.Tensor.__rsub__, torch.Tensor.__rpow__, torch.Tensor.__sub__):
        T.assert_dense_equal(_routing.FAST[func]((A, B)).to_dense(), func(D, E))
    with pytest.raises(TypeError, match="hot_on"):
        sf._C.hot_fast(sf._C.hot("exp")[0], (), lambda args: None, False)
