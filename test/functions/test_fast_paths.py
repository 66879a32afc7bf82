"""Every fast handler is its route's twin, bit for bit (docs/design.md#hot-path).

A fast path (functions/routing.py's FAST: a family's handler of plain
operands, often one C call) computes what its route computes; a rule that
lives in the route (the fill's term of a sum, an integer division by a zero
fill that covers nothing, NaN and infinite fills, -0.0) must hold on the fast
path too. This test is generated from FAST itself: every fast callable,
present and future, is called on plain operands of every kind its family
takes and compared with its route (TABLE's handler, which does not take the
fast path) on values, fill, pattern and dtype, or on the raised error. A fast
callable that no candidate call reaches fails the test: a new fast path
cannot skip it without adding its calls here."""
import itertools
import math

import pytest
import torch

import torch_sparsefill as sf
from torch_sparsefill.functions import routing
from torch_sparsefill.tensor import SparseFillTensor, is_plain, on_pattern

FILLS = [0., -0., 0.5, -2., math.inf, -math.inf, math.nan]
LAYOUTS = [torch.sparse_coo, torch.sparse_csr]


# Patterns of a 4 x 3 matrix: 4 stored, all but one stored (the fill covers
# one element), all stored (the fill covers none: an infinite or NaN fill
# must not leak in).
PATTERNS = [[[0, 1, 3, 3], [2, 0, 0, 1]],
            [[i // 3 for i in range(12) if i != 5], [i % 3 for i in range(12) if i != 5]],
            [[i // 3 for i in range(12)], [i % 3 for i in range(12)]]]


def _plain(values, fill, layout, dtype, pattern):
    values = (values * 3)[:len(pattern[0])]
    A = sf.sparse_coo_tensor(pattern, values, (4, 3), fill_value=fill, dtype=dtype)
    return A if layout == torch.sparse_coo else A.to_sparse_csr()


def _operands(layout, dtype):
    """Plain tensors of `dtype` with every kind of fill, each with a twin on
    the same pattern (the same index tensors) and one whose fill is 0."""
    if dtype == torch.bool:
        fills, values = [False, True], [True, False, True, True]
    elif dtype.is_complex:
        fills = [0j, 0.5 + 1j, complex(math.inf, 0), complex(math.nan, 1)]
        values = [1.5 - 1j, -2 + 0j, 0j, 1j]
    elif dtype.is_floating_point:
        fills, values = FILLS, [1.5, -2., 0., -0.1, 0.3, -0.0]
    else:
        fills, values = [0, 1, -3], [6, -4, 0, 3]
    # The corner patterns matter for the fill's own rules: one dtype of each kind.
    patterns = PATTERNS if dtype in (torch.float64, torch.int64) else PATTERNS[:1]
    for fill, pattern in itertools.product(fills, patterns):
        A = _plain(values, fill, layout, dtype, pattern)
        twin_fill = True if dtype == torch.bool else 0.25 if fill != fill else fill + 1
        twin = A._with(A._sf_values.flip(0), torch.full_like(A._sf_fill, twin_fill))
        zero_fill = A._with(A._sf_values.flip(0), torch.zeros_like(A._sf_fill))
        yield A, twin, zero_fill
    if dtype == torch.float64:
        # per-row (4, 1) and per-column (1, 3) fills, which the products'
        # fast path takes: non-finite ones over slices stored whole too
        for shape, pattern in itertools.product([(4, 1), (1, 3)], PATTERNS):
            fill = torch.tensor([math.inf, -2., math.nan, 0.5][:max(shape)],
                                dtype=dtype).reshape(shape)
            A = _plain(values, 0., layout, dtype, pattern)
            A = A._with(A._sf_values, fill)
            yield A, A._with(A._sf_values.flip(0), fill + 1), A._with(A._sf_values.flip(0),
                                                                        torch.zeros_like(fill))


def _candidates(A, twin, zero_fill):
    """Every argument tuple a fast handler may serve; it answers None to those
    it does not."""
    n = A.shape[0]
    vector = (torch.arange(A.shape[1]) - 1).to(A.dtype)
    matrix = (torch.arange(A.shape[1] * 2).reshape(A.shape[1], 2) - 1).to(A.dtype)
    yield (A,)
    for other in (twin, zero_fill, 2, -3, 0, 2.5, -0.0):
        yield A, other
        yield other, A
    yield A, vector
    yield A, matrix
    for i in (0, 1, n - 1, -1, -n):
        yield A, i


def _same(fast_out, route_out, what):
    if isinstance(route_out, SparseFillTensor):
        assert type(fast_out) is SparseFillTensor, what
        assert fast_out.layout == route_out.layout and fast_out.dtype == route_out.dtype, what
        assert fast_out.shape == route_out.shape, what
        for name in ("_sf_indices", "_sf_crow", "_sf_col"):
            a, b = getattr(fast_out, name), getattr(route_out, name)
            assert (a is None) == (b is None) and (a is None or torch.equal(a, b)), (what, name)
        _bits(fast_out._sf_values, route_out._sf_values, what)
        _bits(fast_out._sf_fill, route_out._sf_fill, what)
    else:
        _bits(fast_out, route_out, what)


def _bits(a, b, what):
    """Equal bit for bit (-0.0 where -0.0), NaN exactly where NaN."""
    assert a.dtype == b.dtype and a.shape == b.shape, what
    if a.dtype.is_complex:
        a, b = torch.view_as_real(a), torch.view_as_real(b)
    if a.dtype.is_floating_point:
        nan = torch.isnan(a)
        assert torch.equal(nan, torch.isnan(b)), what
        ints = {torch.float64: torch.int64, torch.float32: torch.int32,
                torch.float16: torch.int16, torch.bfloat16: torch.int16}[a.dtype]
        a, b = a.masked_fill(nan, 0).view(ints), b.masked_fill(nan, 0).view(ints)
    assert torch.equal(a, b), what


def _route(func, args):
    """What the route answers (the fast path left out): the result or the error."""
    try:
        return routing.TABLE[func](*args), None
    except (RuntimeError, ZeroDivisionError) as e:
        return None, e


DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.bool,
          torch.complex128]
FUNCS = sorted(routing.FAST, key=lambda f: routing._args.name(f))


@pytest.mark.parametrize("layout", LAYOUTS, ids=["coo", "csr"])
@pytest.mark.parametrize("func", FUNCS, ids=lambda f: routing._args.name(f))
def test_fast_path_equals_its_route(func, layout):
    fast = routing.FAST[func]
    for dtype in DTYPES:
        for operands in _operands(layout, dtype):
            assert all(is_plain(X, per_slice=True) for X in operands)
            for args in _candidates(*operands):
                what = (routing._args.name(func), args)
                try:
                    out = fast(args)
                except (TypeError, IndexError):
                    continue  # a call the callable itself does not take
                except RuntimeError as fast_error:
                    # The fast path may raise only what the route raises.
                    expected, error = _route(func, args)
                    assert error is not None, (what, fast_error)
                    assert str(error).splitlines()[0] == str(fast_error).splitlines()[0], what
                    continue
                if out is None:
                    continue
                expected, error = _route(func, args)
                assert error is None, (what, error)  # the fast path answered; the route raises
                _same(out, expected, what)


@pytest.mark.parametrize("func", FUNCS, ids=lambda f: routing._args.name(f))
def test_every_fast_path_is_reached(func):
    """A fast path that serves none of the calls above is one this test
    cannot check: add the calls it serves to _candidates."""
    fast = routing.FAST[func]
    assert any(_answers(fast, args) for layout in LAYOUTS for dtype in DTYPES
               for operands in _operands(layout, dtype) for args in _candidates(*operands)), \
        f"no plain call reaches the fast path of {routing._args.name(func)}"


def _answers(fast, args):
    try:
        return fast(args) is not None
    except (TypeError, IndexError, RuntimeError):
        return False


def test_facts_have_one_home():
    """__new__ sets exactly FACTS, in order: the names the hot path was bound
    with (a renamed or added attribute that FACTS misses breaks this)."""
    from torch_sparsefill.tensor import FACTS
    for layout in LAYOUTS:
        A = _plain([1., 2.], 0.5, layout, torch.float64, PATTERNS[0])
        assert tuple(A.__dict__) == FACTS
        assert tuple(on_pattern(A, A._sf_values * 2, A._sf_fill).__dict__) == FACTS
