"""The C semiring kernels behind sf.mxm's vector products
(torch.ops.sparsefill.semiring_mv / semiring_vm), its masked product
(semiring_masked) and ewise_add / ewise_union (ewise_merge): every monoid and op with a C twin over float32, float64 and
int64, vectors on both sides (indefinite and strided), empty rows, masks;
the same answers as the torch route and the present-only reference; integer
wrap, NaN, tracked gradients routed to torch, and the kernels' refusals."""
import pytest
import torch

import sf_testing.graph as G
import torch_sparsefill as sf
from torch_sparsefill.graph import ewise as E
from torch_sparsefill.graph import products as P

_ops = torch.ops.sparsefill

MONOIDS = ["plus", "times", "min", "max", "lor", "land", "any"]
OPS = ["plus", "minus", "rminus", "times", "div", "rdiv", "min", "max", "first", "second",
       "pair", "land", "lor", "lxor", "eq", "ne", "lt", "gt", "le", "ge"]
DTYPES = [torch.float32, torch.float64, torch.int64]


@pytest.fixture
def routes(monkeypatch):
    """Counts the products the C kernels answered."""
    seen = []
    real = P._native_vector

    def spy(*args):
        got = real(*args)
        seen.append(got is not None)
        return got
    monkeypatch.setattr(P, "_native_vector", spy)
    return seen


def _torch_route(monkeypatch, f):
    with monkeypatch.context() as m:
        m.setattr(P, "_native_vector", lambda *a: None)
        m.setattr(P, "_native_masked", lambda *a: None)
        m.setattr(E, "_native_merge", lambda *a: None)
        return f()


def _operands(dtype, seed):
    Av, Ap = G.random_graph((7, 6), dtype=dtype, seed=seed, density=0.5)
    Ap[2] = False      # an empty row of A: absent in A x
    Ap[:, 4] = False   # an empty column: absent in u A
    xv, xp = G.random_graph((6,), dtype=dtype, seed=seed + 1, density=0.6)
    uv, up = G.random_graph((7,), dtype=dtype, seed=seed + 2, density=0.6)
    return Av, Ap, xv, xp, uv, up


def _vector(expected, axis):
    return {(k[axis],): v for k, v in expected.items()}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("monoid", MONOIDS)
@pytest.mark.parametrize("op", OPS)
def test_vector_products_match_reference(op, monoid, dtype, routes):
    semiring = f"{monoid}_{op}"
    Av, Ap, xv, xp, uv, up = _operands(dtype, seed=len(op) * 7 + len(monoid))
    if not dtype.is_floating_point and op in ("div", "rdiv"):
        Av, xv, uv = Av.abs() + 1, xv.abs() + 1, uv.abs() + 1  # no 0 / 0 in the reference
    A = G.indefinite(Av, Ap, torch.sparse_csr)
    full = torch.ones_like(xp)
    cases = [  # (result, expected, native)
        (sf.mxm(A, G.indefinite(xv, xp), semiring),
         _vector(G.mxm(Av, Ap, xv[:, None], xp[:, None], semiring), 0)),
        (sf.mxm(A, xv, semiring),
         _vector(G.mxm(Av, Ap, xv[:, None], full[:, None], semiring), 0)),
        (sf.mxm(G.indefinite(uv, up), A, semiring),
         _vector(G.mxm(uv[None], up[None], Av, Ap, semiring), 1)),
        (sf.mxm(uv, A, semiring),
         _vector(G.mxm(uv[None], torch.ones_like(up)[None], Av, Ap, semiring), 1)),
    ]
    for R, want in cases:
        G.assert_result(R, want, R.shape)
    # An integer div is a float in torch: the torch route; every other case native.
    assert all(routes) == (dtype.is_floating_point or op not in ("div", "rdiv"))
    assert len(routes) == 4


@pytest.mark.parametrize("semiring", ["min_plus", "plus_times", "any_second", "max_first",
                                      "plus_pair", "lor_land", "land_lt", "times_minus"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_native_and_torch_routes_agree(semiring, dtype, monkeypatch, routes):
    Av, Ap, xv, xp, uv, up = _operands(dtype, seed=40)
    for layout in (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc):
        A = G.indefinite(Av, Ap, layout)
        for left, right in ((A, G.indefinite(xv, xp)), (A, xv), (G.indefinite(uv, up), A),
                            (uv, A)):
            got = sf.mxm(left, right, semiring)
            want = _torch_route(monkeypatch, lambda: sf.mxm(left, right, semiring))
            assert got.dtype == want.dtype and got.layout == want.layout
            assert torch.equal(got.indices(), want.indices())
            torch.testing.assert_close(got.values(), want.values(), equal_nan=True)
    assert routes and all(routes)


@pytest.mark.parametrize("complement", [False, True])
@pytest.mark.parametrize("structural", [True, False])
def test_vector_masks(complement, structural, routes):
    Av, Ap, xv, xp, uv, up = _operands(torch.float64, seed=50)
    Mv, Mp = G.random_graph((7,), seed=53, density=0.5)
    allowed = Mp & (Mv != 0) if not structural else Mp
    allowed = ~allowed if complement else allowed
    A = G.indefinite(Av, Ap)
    R = sf.mxm(A, G.indefinite(xv, xp), "min_plus", mask=G.indefinite(Mv, Mp),
               complement=complement, structural=structural)
    want = _vector(G.mxm(Av, Ap, xv[:, None], xp[:, None], "min_plus",
                         allowed[:, None]), 0)
    G.assert_result(R, want, (7,))
    # into out, with accum: the vector's own C<M> = accum(C, T)
    Cv, Cp = G.random_graph((7,), seed=54, density=0.5)
    C = G.indefinite(Cv, Cp)
    sf.mxm(A, G.indefinite(xv, xp), "min_plus", mask=G.indefinite(Mv, Mp),
           complement=complement, structural=structural, accum="min", out=C)
    expect = {}
    for i in range(7):
        c = Cv[i] if Cp[i] else None
        t = want.get((i,))
        if allowed[i]:
            z = c if t is None else t if c is None else torch.minimum(c, t)
            if z is not None:
                expect[(i,)] = z
        elif c is not None:
            expect[(i,)] = c
    G.assert_result(C, expect, (7,))
    assert routes and all(routes)


def test_all_absent_rows_stay_absent(routes):
    # Row 0 has elements, but none meets a present x; row 1 stores nothing.
    A = sf.sparse_csr_tensor([0, 2, 2, 3], [0, 1, 2], [1., 2., 3.], (3, 3),
                             fill_value=sf.indefinite)
    x = sf.sparse_coo_tensor([[2]], [5.], (3,), fill_value=sf.indefinite)
    for semiring in ("min_plus", "plus_times", "land_lor", "any_pair"):
        R = sf.mxm(A, x, semiring)
        assert R.indices().tolist() == [[2]], semiring
    assert sf.mxm(sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=sf.indefinite), A,
                  "min_plus").indices().tolist() == [[0, 1]]
    nothing = sf.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.long), torch.zeros(0), (3,),
                                   fill_value=sf.indefinite)
    assert sf.mxm(A, nothing, "min_plus").nse() == 0
    assert sf.mxm(nothing, A, "max_times").nse() == 0
    assert all(routes)


def test_int64_wraps_as_torch(monkeypatch, routes):
    big = 2 ** 62
    A = sf.sparse_csr_tensor([0, 2, 3], [0, 1, 1], [big, big, -big], (2, 2),
                             fill_value=sf.indefinite)
    x = torch.tensor([4, 3])
    for semiring in ("plus_times", "plus_plus", "times_plus", "min_times", "max_minus"):
        got = sf.mxm(A, x, semiring)
        want = _torch_route(monkeypatch, lambda: sf.mxm(A, x, semiring))
        assert got.dtype == torch.int64 and torch.equal(got.values(), want.values()), semiring
    assert all(routes)


def test_nan_propagates_and_any_takes_the_smallest_k(monkeypatch, routes):
    nan = float("nan")
    A = sf.sparse_csr_tensor([0, 3, 5], [0, 1, 2, 0, 2], [1., nan, 3., 2., 1.], (2, 3),
                             fill_value=sf.indefinite)
    x = torch.tensor([1., 1., 0.5])
    for semiring in ("min_plus", "max_plus", "plus_times", "min_min", "max_max"):
        got = sf.mxm(A, x, semiring)
        want = _torch_route(monkeypatch, lambda: sf.mxm(A, x, semiring))
        torch.testing.assert_close(got.values(), want.values(), equal_nan=True)
    assert torch.isnan(sf.mxm(A, x, "min_plus").values()[0])
    assert sf.mxm(A, x, "any_first").values().tolist() == [1., 2.]
    assert sf.mxm(torch.tensor([7., 8.]), A, "any_first").values().tolist() == [7., 7., 7.]
    assert all(routes)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_products_round_in_the_dtype_as_torch(dtype, monkeypatch, routes):
    # A times monoid rounds to the dtype at each step, as torch.prod: in
    # double, float32 1e30 * 1e30 * 0 would be 0 where torch gives inf * 0.
    big = 1e30 if dtype == torch.float32 else 1e300
    A = sf.sparse_csr_tensor([0, 3, 5], [0, 1, 2, 0, 1], [1., 1., 1., 1., 1.], (2, 3),
                             fill_value=sf.indefinite).to(dtype)
    x = torch.tensor([big, big, 0.], dtype=dtype)
    for semiring in ("times_times", "times_first", "times_second", "times_plus"):
        got = sf.mxm(A, x, semiring)
        want = _torch_route(monkeypatch, lambda: sf.mxm(A, x, semiring))
        torch.testing.assert_close(got.values(), want.values(), equal_nan=True, rtol=0, atol=0)
    assert sf.mxm(A, x, "times_second").values()[0].isnan()
    assert sf.mxm(A, x, "times_second").values()[1].isinf()
    assert all(routes)


def test_counts_of_comparisons_are_int64(routes):
    A = sf.sparse_csr_tensor([0, 3], [0, 1, 2], [1., 5., 3.], (1, 3),
                             fill_value=sf.indefinite, dtype=torch.float32)
    R = sf.mxm(A, torch.tensor([2., 2., 2.]), "plus_gt")
    assert R.dtype == torch.int64 and R.values().tolist() == [2]
    assert sf.mxm(A, torch.tensor([2., 2., 2.]), "lor_lt").dtype == torch.bool
    assert all(routes)


def test_tracked_gradients_take_the_torch_route(routes):
    Av, Ap, xv, xp, uv, up = _operands(torch.float64, seed=60)
    x = xv.clone().requires_grad_()
    R = sf.mxm(G.indefinite(Av, Ap), x, "min_plus")
    R.values().sum().backward()
    assert x.grad is not None and routes == [False]
    with torch.no_grad():
        sf.mxm(G.indefinite(Av, Ap), x, "min_plus")
    assert routes == [False, True]


def test_kernel_refusals_name_the_argument():
    crow, col = torch.tensor([0, 1, 2]), torch.tensor([0, 1])
    v, x = torch.tensor([1., 2.]), torch.tensor([1., 2.])
    with pytest.raises(RuntimeError, match="x must be float32, float64 or int64"):
        _ops.semiring_mv(crow, col, v, x.to(torch.int32), None, 0, 0)
    with pytest.raises(RuntimeError, match="values and x must have one dtype"):
        _ops.semiring_mv(crow, col, v, x.double(), None, 0, 0)
    with pytest.raises(RuntimeError, match="monoid must be a code"):
        _ops.semiring_mv(crow, col, v, x, None, 7, 0)
    with pytest.raises(RuntimeError, match="binop must be a code"):
        _ops.semiring_mv(crow, col, v, x, None, 0, 20)
    with pytest.raises(RuntimeError,
                       match=r"x_present must be a 1-D tensor of 2 elements \(x's\) on the CPU"):
        _ops.semiring_mv(crow, col, v, x, torch.ones(3, dtype=torch.bool), 0, 0)
    with pytest.raises(RuntimeError, match="semiring_mv operands: .*out of range"):
        _ops.semiring_mv(crow, torch.tensor([0, 5]), v, x, None, 0, 0)
    with pytest.raises(RuntimeError, match="crow_indices"):
        _ops.semiring_mv(torch.tensor([0, 1, 3]), col, v, x, None, 0, 0)
    with pytest.raises(RuntimeError, match="semiring_mv operands"):
        _ops.semiring_mv(crow, col, v.long(), x.long(), None, 0, 4)  # an integer div
    with pytest.raises(RuntimeError, match="u has 1 keys but 2 values"):
        _ops.semiring_vm(crow, col, v, torch.tensor([0]), x, 2, 0, 0)
    with pytest.raises(RuntimeError, match="semiring_vm operands: .*not coalesced|sorted"):
        _ops.semiring_vm(crow, col, v, torch.tensor([1, 0]), x, 2, 0, 0)
    with pytest.raises(RuntimeError, match="semiring_vm operands: .*out of range"):
        _ops.semiring_vm(crow, col, v, torch.tensor([0, 2]), x, 2, 0, 0)
    with pytest.raises(RuntimeError, match="semiring_vm operands: .*out of range"):
        _ops.semiring_vm(crow, col, v, torch.tensor([0, 1]), x, 1, 0, 0)


@pytest.fixture
def merges(monkeypatch):
    """Counts the element-wise calls the C merge answered."""
    seen = []
    real = E._native_merge

    def spy(*args):
        got = real(*args)
        seen.append(got is not None)
        return got
    monkeypatch.setattr(E, "_native_merge", spy)
    return seen


def _grid(shape, fn):
    return {(i, j): v for i in range(shape[0]) for j in range(shape[1])
            if (v := fn((i, j))) is not None}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", OPS)
def test_merge_matches_reference(op, dtype, merges):
    shape = (6, 7)
    Av, Ap = G.random_graph(shape, dtype=dtype, seed=71)
    Bv, Bp = G.random_graph(shape, dtype=dtype, seed=72)
    Ap[1], Bp[1] = False, False   # a row absent in both
    Ap[3] = False                 # B's row passes through
    if not dtype.is_floating_point and op in ("div", "rdiv"):
        Av, Bv = Av.abs() + 1, Bv.abs() + 1
    fn = sf.graph.operators.binary(op)
    da, db = (torch.tensor(10, dtype=dtype), torch.tensor(-3, dtype=dtype)) \
        if op not in ("div", "rdiv") or dtype.is_floating_point else (10, 3)
    for layout_a, layout_b in ((torch.sparse_csr, torch.sparse_csr),
                               (torch.sparse_csc, torch.sparse_coo)):
        A, B = G.indefinite(Av, Ap, layout_a), G.indefinite(Bv, Bp, layout_b)
        both = lambda k: fn(Av[k], Bv[k])  # noqa: E731
        add = sf.ewise_add(A, B, op)
        G.assert_result(add, _grid(shape, lambda k: both(k) if Ap[k] and Bp[k] else
                                   Av[k] if Ap[k] else Bv[k] if Bp[k] else None), shape)
        union = sf.ewise_union(A, B, op, da, db)
        ta, tb = torch.as_tensor(da, dtype=dtype), torch.as_tensor(db, dtype=dtype)
        G.assert_result(union, _grid(shape, lambda k: fn(Av[k] if Ap[k] else ta,
                                                         Bv[k] if Bp[k] else tb)
                                     if Ap[k] or Bp[k] else None), shape)
        assert add.layout == union.layout == torch.sparse_csr
    assert all(merges) == (dtype.is_floating_point or op not in ("div", "rdiv"))


@pytest.mark.parametrize("op", ["plus", "min", "max", "first", "second", "eq", "lt", "pair",
                                "minus", "times"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_merge_native_and_torch_routes_agree(op, dtype, monkeypatch, merges):
    Av, Ap = G.random_graph((9, 8), dtype=dtype, seed=80)
    Bv, Bp = G.random_graph((9, 8), dtype=dtype, seed=81)
    A, B = G.indefinite(Av, Ap, torch.sparse_csr), G.indefinite(Bv, Bp, torch.sparse_csr)
    for f in (lambda: sf.ewise_add(A, B, op), lambda: sf.ewise_union(A, B, op, 2, 5)):
        got, want = f(), _torch_route(monkeypatch, f)
        assert got.dtype == want.dtype and got.layout == want.layout
        assert torch.equal(got.crow_indices(), want.crow_indices())
        assert torch.equal(got.col_indices(), want.col_indices())
        assert torch.equal(got.values(), want.values())
    assert merges and all(merges)


@pytest.mark.parametrize("op", ["min", "max"])
def test_merge_min_max_of_signed_zeros_as_torch(op, monkeypatch, merges):
    # 0 and -0 tie: torch.minimum / maximum give the first operand.
    a, b = torch.tensor([[0.0, -0.0, 1.0]]), torch.tensor([[-0.0, 0.0, -0.0]])
    A, B = (G.indefinite(v, torch.ones_like(v, dtype=torch.bool), torch.sparse_csr)
            for v in (a, b))
    want = getattr(torch, {"min": "minimum", "max": "maximum"}[op])(a, b).flatten()
    for f in (lambda: sf.ewise_add(A, B, op), lambda: sf.ewise_union(A, B, op, 0., 0.)):
        for got in (f().values(), _torch_route(monkeypatch, f).values()):
            assert got.tolist() == want.tolist() and torch.equal(got.signbit(), want.signbit())
    assert merges and all(merges)
    x = torch.tensor([-0.0, 0.0])  # the product's op: the same rule
    M = G.indefinite(torch.zeros(1, 2), torch.ones(1, 2, dtype=torch.bool), torch.sparse_csr)
    assert sf.mxm(M, x, f"any_{op}").values().signbit().tolist() == [False]


def test_merge_routes_gradients_and_other_dtypes_to_torch(merges):
    Av, Ap = G.random_graph((4, 5), seed=90)
    Bv, Bp = G.random_graph((4, 5), seed=91)
    a = Av.clone().requires_grad_()
    R = sf.ewise_add(G.indefinite(a, Ap, torch.sparse_csr), G.indefinite(Bv, Bp), "min")
    R.values().sum().backward()
    assert a.grad is not None and merges == [False]
    sf.ewise_add(G.indefinite(Av.int(), Ap, torch.sparse_csr), G.indefinite(Bv.int(), Bp))
    assert merges == [False, False]
    with torch.no_grad():
        sf.ewise_add(G.indefinite(a, Ap, torch.sparse_csr), G.indefinite(Bv, Bp), "min")
    assert merges == [False, False, True]


def test_merge_refusals_name_the_argument():
    crow, col, v = torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.tensor([1., 2.])
    merge = _ops.ewise_merge
    with pytest.raises(RuntimeError, match="values_b must be float32, float64 or int64"):
        merge(crow, col, v, crow, col, v.int(), 2, 0, None, None)
    with pytest.raises(RuntimeError, match="values_a and values_b must have one dtype"):
        merge(crow, col, v, crow, col, v.double(), 2, 0, None, None)
    with pytest.raises(RuntimeError, match="A has 2 rows but B has 1"):
        merge(crow, col, v, torch.tensor([0, 2]), col, v, 2, 0, None, None)
    with pytest.raises(RuntimeError, match="both a_default and b_default"):
        merge(crow, col, v, crow, col, v, 2, 0, torch.tensor(1.), None)
    with pytest.raises(RuntimeError, match="one-element CPU tensors"):
        merge(crow, col, v, crow, col, v, 2, 0, torch.ones(2), torch.ones(2))
    with pytest.raises(RuntimeError, match="binop must be a code"):
        merge(crow, col, v, crow, col, v, 2, 21, None, None)
    with pytest.raises(RuntimeError, match="ewise_merge operands: .*out of range"):
        merge(crow, torch.tensor([0, 2]), v, crow, col, v, 2, 0, None, None)
    with pytest.raises(RuntimeError, match="ewise_merge operands: .*(sorted|increasing)"):
        merge(torch.tensor([0, 2]), torch.tensor([1, 0]), v, torch.tensor([0, 0]),
              torch.tensor([], dtype=torch.long), v[:0], 2, 0, None, None)
    with pytest.raises(RuntimeError, match="ewise_merge operands"):
        merge(crow, col, v.long(), crow, col, v.long(), 2, 4, None, None)  # an integer div


@pytest.fixture
def dots(monkeypatch):
    """Counts the masked products the C dots kernel answered."""
    seen = []
    real = P._native_masked

    def spy(*args):
        got = real(*args)
        seen.append(got is not None)
        return got
    monkeypatch.setattr(P, "_native_masked", spy)
    return seen


MASKED = ["plus_times", "min_plus", "max_plus", "min_times", "lor_land", "any_pair",
          "plus_pair", "min_first", "min_second", "any_second", "land_lor", "times_minus",
          "plus_eq", "max_div"]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("semiring", MASKED)
def test_masked_product_matches_reference(semiring, dtype, monkeypatch, dots):
    Av, Ap = G.random_graph((8, 6), dtype=dtype, seed=101, density=0.5)
    Bv, Bp = G.random_graph((6, 9), dtype=dtype, seed=102, density=0.5)
    Mv, Mp = G.random_graph((8, 9), dtype=torch.bool, seed=103, density=0.5)
    Ap[2] = False   # no k for row 2
    Mp[5] = False   # nothing allowed in row 5
    if not dtype.is_floating_point and "div" in semiring:
        Av, Bv = Av.abs() + 1, Bv.abs() + 1
    want = G.mxm(Av, Ap, Bv, Bp, semiring, Mp)
    for la, lb, lm in ((torch.sparse_csr, torch.sparse_csr, torch.sparse_csr),
                       (torch.sparse_csc, torch.sparse_csc, torch.sparse_coo),
                       (torch.sparse_csr, torch.sparse_coo, torch.sparse_csc)):
        A, B = G.indefinite(Av, Ap, la), G.indefinite(Bv, Bp, lb)
        M = G.indefinite(Mv, Mp, lm)
        R = sf.mxm(A, B, semiring, mask=M)
        G.assert_result(R, want, (8, 9))
        T = _torch_route(monkeypatch, lambda: sf.mxm(A, B, semiring, mask=M))
        assert R.dtype == T.dtype and R.layout == T.layout == torch.sparse_csr
        assert torch.equal(R.crow_indices(), T.crow_indices())
        assert torch.equal(R.col_indices(), T.col_indices())
        torch.testing.assert_close(R.values(), T.values(), equal_nan=True)
    assert all(dots) == (dtype.is_floating_point or "div" not in semiring)


@pytest.mark.parametrize("semiring", ["min_plus", "any_second", "plus_pair", "max_times"])
def test_masked_by_dots_and_by_rows_agree(semiring, monkeypatch, dots):
    # The kernel's two methods, each forced: the same result.
    Av, Ap = G.random_graph((20, 15), dtype=torch.int64, seed=111, density=0.3)
    Bv, Bp = G.random_graph((15, 25), dtype=torch.int64, seed=112, density=0.3)
    Mv, Mp = G.random_graph((20, 25), seed=113, density=0.3)
    A, B = G.indefinite(Av, Ap, torch.sparse_csr), G.indefinite(Bv, Bp, torch.sparse_csr)
    want = G.mxm(Av, Ap, Bv, Bp, semiring, Mp)
    for cheaper in (True, False):
        monkeypatch.setattr(P, "_dots_cheaper", lambda *a, c=cheaper: c)
        G.assert_result(sf.mxm(A, B, semiring, mask=G.indefinite(Mv, Mp)), want, (20, 25))
    assert dots == [True, True]


def test_triangle_count_and_masks_the_kernel_leaves_to_torch(dots):
    # An undirected graph's lower triangle L: sum(L L .* L) counts each triangle once.
    g = torch.Generator().manual_seed(5)
    D = torch.rand(40, 40, generator=g) < 0.2
    D = (D | D.T).tril(-1)
    L = sf.to_sparse(D.long(), fill_value=sf.indefinite, mask=D).to_sparse_csr()
    count = sf.reduce(sf.mxm(L, L, "plus_pair", mask=L))
    S = D.long() + D.long().T
    assert int(count) == int(torch.trace(S @ S @ S)) // 6
    assert dots == [True]
    Mv, Mp = G.random_graph((40, 40), seed=7)
    M = G.indefinite(Mv, Mp, torch.sparse_csr)
    sf.mxm(L, L, "plus_pair", mask=M, structural=False)        # by value: torch
    sf.mxm(L, L, "plus_pair", mask=M, complement=True)         # complement: torch
    sf.mxm(L.to_sparse_coo(), L, "plus_pair", mask=M)          # a COO result: torch
    assert dots == [True, False]  # the first two never ask the kernel


def test_masked_refusals_name_the_argument():
    crow, col, v = torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.tensor([1., 2.])
    masked = _ops.semiring_masked
    for dots in (True, False):
        with pytest.raises(RuntimeError, match="values_a and values_b must have one dtype"):
            masked(crow, col, crow, col, v, crow, col, v.double(), 2, 0, 0, dots)
        with pytest.raises(RuntimeError, match="the mask must have 2 rows"):
            masked(torch.tensor([0, 2]), col, crow, col, v, crow, col, v, 2, 0, 0, dots)
        with pytest.raises(RuntimeError, match="crow_m must run from 0"):
            masked(torch.tensor([0, 1, 1]), col, crow, col, v, crow, col, v, 2, 0, 0, dots)
        with pytest.raises(RuntimeError, match="semiring_masked operands: .*out of range"):
            masked(crow, torch.tensor([0, 2]), crow, col, v, crow, col, v, 2, 0, 0, dots)
    # By rows, A's columns index B's rows (checked); by dots they are only
    # compared with B^T's (no read through them, no k to check against).
    with pytest.raises(RuntimeError, match="semiring_masked operands: .*out of range"):
        masked(crow, col, crow, torch.tensor([0, 2]), v, crow, col, v, 2, 0, 0, False)
        with pytest.raises(RuntimeError, match="monoid must be a code"):
            masked(crow, col, crow, col, v, crow, col, v, 2, -1, 0, dots)
    with pytest.raises(RuntimeError, match="B\\^T must have 3 rows"):
        masked(crow, col, crow, col, v, crow, col, v, 3, 0, 0, True)
