"""The element-wise modes, apply, select, reductions, extract, assign and
kron of indefinite tensors against the present-only reference: values and
exactly the structural pattern."""
import pytest
import torch

import sf_testing.graph as G
import torch_sparsefill as sf

OPS = ["plus", "minus", "times", "min", "max", "first", "second", "pair", "eq", "lt", "div"]


def _two(shape=(5, 6), dtype=torch.float64):
    Av, Ap = G.random_graph(shape, dtype=dtype, seed=31)
    Bv, Bp = G.random_graph(shape, dtype=dtype, seed=32)
    return Av, Ap, Bv, Bp


def _grid(shape, fn):
    out = {}
    for idx in torch.cartesian_prod(*[torch.arange(n) for n in shape]).reshape(-1, len(shape)):
        k = tuple(int(i) for i in idx)
        v = fn(k)
        if v is not None:
            out[k] = v
    return out


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape", [(5, 6), (7,)], ids=["matrix", "vector"])
def test_ewise_modes(op, shape):
    Av, Ap, Bv, Bp = _two(shape)
    A, B = G.indefinite(Av, Ap), G.indefinite(Bv, Bp, torch.sparse_csr if len(shape) == 2
                                               else torch.sparse_coo)
    fn = sf.graph.operators.binary(op)
    both = _grid(shape, lambda k: fn(Av[k], Bv[k]) if Ap[k] and Bp[k] else None)
    G.assert_result(sf.ewise_mult(A, B, op), both, shape)
    union = _grid(shape, lambda k: both.get(k) if Ap[k] and Bp[k] else
                  Av[k] if Ap[k] else Bv[k] if Bp[k] else None)
    G.assert_result(sf.ewise_add(A, B, op), union, shape)
    withdef = _grid(shape, lambda k: fn(Av[k] if Ap[k] else torch.tensor(10., dtype=Av.dtype),
                                        Bv[k] if Bp[k] else torch.tensor(-3., dtype=Bv.dtype))
                    if Ap[k] or Bp[k] else None)
    G.assert_result(sf.ewise_union(A, B, op, 10., -3.), withdef, shape)


def test_ewise_union_with_defined_fills_is_the_binary_rule():
    Av, Ap, Bv, Bp = _two()
    A, B = G.indefinite(Av, Ap), G.indefinite(Bv, Bp)
    U = sf.ewise_union(A, B, "plus", 1., 2.)
    Af = sf.to_sparse(torch.where(Ap, Av, 1.), fill_value=1.)
    Bf = sf.to_sparse(torch.where(Bp, Bv, 2.), fill_value=2.)
    union = Ap | Bp
    assert torch.equal(U.to_dense(fill=3.), torch.where(union, (Af + Bf).to_dense(), 3.))


def test_ewise_add_integer_passthrough_and_strided():
    Av, Ap, Bv, Bp = _two(dtype=torch.int64)
    R = sf.ewise_add(G.indefinite(Av, Ap), Bv, "min")  # a strided operand: all present
    G.assert_result(R, _grid((5, 6), lambda k: torch.minimum(Av[k], Bv[k]) if Ap[k] else Bv[k]),
                    (5, 6))
    assert R.dtype == torch.int64


def test_ewise_gradients():
    Av, Ap, Bv, Bp = _two()
    Av.requires_grad_()
    Bv.requires_grad_()
    for f in (sf.ewise_add, sf.ewise_mult):
        torch.autograd.gradcheck(lambda a, b: f(G.indefinite(a, Ap), G.indefinite(b, Bp),
                                                "times").values(), (Av, Bv))
    torch.autograd.gradcheck(lambda a, b: sf.ewise_union(G.indefinite(a, Ap), G.indefinite(b, Bp),
                                                         "times", 2., 3.).values(), (Av, Bv))


def test_apply_and_select():
    Av, Ap, _, _ = _two()
    A = G.indefinite(Av, Ap, torch.sparse_csr)
    G.assert_result(sf.apply(A, "plus", 1.), _grid((5, 6), lambda k: Av[k] + 1 if Ap[k] else None),
                    (5, 6))
    G.assert_result(sf.apply(A, "minus", 1., left=True),
                    _grid((5, 6), lambda k: 1 - Av[k] if Ap[k] else None), (5, 6))
    G.assert_result(sf.apply(A, "ainv"), _grid((5, 6), lambda k: -Av[k] if Ap[k] else None),
                    (5, 6))
    for which, keep in [("tril", lambda i, j: j - i <= 1), ("triu", lambda i, j: j - i >= 1),
                        ("diag", lambda i, j: j == i + 1), ("offdiag", lambda i, j: j != i + 1)]:
        G.assert_result(sf.select(A, which, 1),
                        _grid((5, 6), lambda k: Av[k] if Ap[k] and keep(*k) else None), (5, 6))
    G.assert_result(sf.select(A, "gt", 0.), _grid((5, 6), lambda k: Av[k] if Ap[k] and Av[k] > 0
                                                  else None), (5, 6))
    G.assert_result(sf.select(A, lambda v: v.abs() < 2),
                    _grid((5, 6), lambda k: Av[k] if Ap[k] and abs(Av[k]) < 2 else None), (5, 6))
    with pytest.raises(ValueError, match="which"):
        sf.select(A, "upper")


@pytest.mark.parametrize("monoid", ["plus", "times", "min", "max", "lor", "land", "any"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_reduce(monoid, dim):
    Av, Ap, _, _ = _two()
    Ap[2] = False  # a row with nothing present: absent, not the identity
    Ap[:, 4] = False
    A = G.indefinite(Av, Ap, torch.sparse_csr)
    d = None if dim is None else dim % 2
    want = G.reduce(Av, Ap, d, monoid)
    got = sf.reduce(A, dim, monoid)
    if dim is None:
        torch.testing.assert_close(got, want[()].to(got.dtype))
    else:
        G.assert_result(got, want, (Av.shape[1 - d],))
    assert sf.reduce(G.indefinite(Av, torch.zeros_like(Ap)), None, monoid) is sf.indefinite


@pytest.mark.parametrize("dim", [0, 1])
@pytest.mark.parametrize("monoid", ["plus", "min", "max"])
def test_reduce_gradients_split_ties_as_amin(monoid, dim):
    Av, Ap, _, _ = _two()
    Av = Av.abs().clamp(max=2).requires_grad_()  # many ties
    values, _ = G.parts(sf.reduce(G.indefinite(Av, Ap), dim, monoid))
    # Weights of both signs: torch.segment_reduce's backward gives each tied
    # term the whole of a negative gradient (torch 2.13), amin a share.
    w = torch.arange(values.shape[0], dtype=torch.float64) - 2
    got = torch.autograd.grad((values * w).sum(), Av)[0]
    ref = G.reduce(Av, Ap, dim, monoid)
    want = torch.autograd.grad(sum(v * w[k] for k, v in ref.items()), Av)[0]
    torch.testing.assert_close(got, want)
    Bv = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    torch.autograd.gradcheck(lambda v: sf.reduce(G.indefinite(v, Ap), dim, monoid).values(),
                             (Bv,))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_half_precision_accumulates_as_torch(dtype):
    # plus and times over float16/bfloat16 accumulate in float32, as torch.sum
    # does: rounding every step to bfloat16 stalls a sum of 4,000 terms near 1
    # at 512. Within two units of the dtype of the float64 result.
    g = torch.Generator().manual_seed(5)
    v = (torch.rand(2, 4000, generator=g) + 0.5).to(dtype)
    w = (1 + (torch.rand(2, 300, generator=g) - 0.5) / 50).to(dtype)
    rtol = 2 * torch.finfo(dtype).eps
    for values, monoid in ((v, "plus"), (w, "times")):
        A = G.indefinite(values, torch.ones_like(values, dtype=torch.bool))
        exact = values.double().sum(1) if monoid == "plus" else values.double().prod(1)
        for dim, want in ((1, exact), (None, exact.sum() if monoid == "plus" else exact.prod())):
            got = sf.reduce(A, dim, monoid)
            got = got if dim is None else got.values()
            assert got.dtype == dtype
            torch.testing.assert_close(got.double(), want, rtol=rtol, atol=0)
    x = torch.ones(4000, dtype=dtype)  # the product's plus: the same rule
    got = sf.mxm(G.indefinite(v, torch.ones_like(v, dtype=torch.bool)), x, "plus_times")
    torch.testing.assert_close(got.values().double(), v.double().sum(1), rtol=rtol, atol=0)


@pytest.mark.parametrize("dim", [None, 0, 1])
def test_times_reduce_second_order(dim):
    # times with a gradient: pairwise products, so a double backward is exact.
    _, Ap, _, _ = _two()
    v = torch.randn(5, 6, dtype=torch.float64)
    v[0, 0] = 0  # a zero term
    v.requires_grad_()
    Ap = Ap.clone()
    Ap[0, 0] = True

    def f(v):
        R = sf.reduce(G.indefinite(v, Ap), dim, "times")
        return R if dim is None else R.values()
    torch.autograd.gradcheck(f, (v,))
    torch.autograd.gradgradcheck(f, (v,))


@pytest.mark.parametrize("dim", [None, 0, 1])
@pytest.mark.parametrize("monoid", ["plus", "times", "min", "max"])
def test_reduce_forward_mode_equals_the_reference(monoid, dim):
    # Forward AD of every differentiable monoid, zeros (times) and ties
    # (min, max) included: torch.segment_reduce has no forward derivative and
    # scatter_reduce("prod") drops the tangent, so neither may compute it.
    Av, Ap, _, _ = _two()
    tangent = torch.randn(Av.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(3))

    def ours(v):
        R = sf.reduce(G.indefinite(v, Ap), dim, monoid)
        return R if dim is None else G.parts(R)[0]

    def reference(v):
        ref = G.reduce(v, Ap, dim, monoid)
        if dim is None:
            return ref[()]
        return torch.stack([ref[(s,)] if (s,) in ref else v.new_zeros(())
                            for s in range(Av.shape[1 - dim])])
    got = torch.func.jvp(ours, (Av,), (tangent,))
    want = torch.func.jvp(reference, (Av,), (tangent,))
    torch.testing.assert_close(got, want)
def test_extract_assign_kron():
    Av, Ap, Bv, Bp = _two()
    A = G.indefinite(Av, Ap)
    rows, cols = [4, 0, 4, 2], [5, 1, 1]
    G.assert_result(sf.extract(A, rows, cols),
                    _grid((4, 3), lambda k: Av[rows[k[0]], cols[k[1]]]
                          if Ap[rows[k[0]], cols[k[1]]] else None), (4, 3))
    # assign: rows 1, 3 x cols 0, 2, 5 from a 2x3 block, masked, accumulated
    r, c = [3, 1], [0, 5, 2]
    Sv, Sp = G.random_graph((2, 3), seed=40, density=0.6)
    Mv, Mp = G.random_graph((2, 3), seed=41, density=0.6)
    for accum in (None, "plus"):
        R = sf.assign(A, r, c, G.indefinite(Sv, Sp), mask=G.indefinite(Mv, Mp), accum=accum)

        def want(k, accum=accum):
            i, j = k
            if i in r and j in c and Mp[r.index(i), c.index(j)]:
                s = (Sv[r.index(i), c.index(j)] if Sp[r.index(i), c.index(j)] else None)
                a = Av[k] if Ap[k] else None
                if accum is None:
                    return s
                return a + s if a is not None and s is not None else (s if a is None else a)
            return Av[k] if Ap[k] else None
        G.assert_result(R, _grid((5, 6), want), (5, 6))
    G.assert_result(sf.assign(A, [0], [1, 2], 9.),
                    _grid((5, 6), lambda k: torch.tensor(9., dtype=torch.float64)
                          if k in ((0, 1), (0, 2)) else Av[k] if Ap[k] else None), (5, 6))
    with pytest.raises(ValueError, match="duplicates"):
        sf.assign(A, [1, 1], [0], torch.ones(2, 1))
    # An empty index list is no index (GraphBLAS's ni = 0, torch's x[[]]).
    G.assert_result(sf.extract(A, [], cols), {}, (0, 3))
    G.assert_result(sf.extract(A, rows, ()), {}, (4, 0))
    G.assert_result(sf.assign(A, [], None, 5.), _grid((5, 6), lambda k: Av[k] if Ap[k] else None),
                    (5, 6))
    with pytest.raises(ValueError, match="integer index list"):
        sf.extract(A, [0.5], cols)
    Kv, Kp = G.random_graph((2, 3), seed=42, density=0.6)
    K = sf.kron(A, G.indefinite(Kv, Kp), "plus")
    G.assert_result(K, _grid((10, 18), lambda k: Av[k[0] // 2, k[1] // 3] + Kv[k[0] % 2, k[1] % 3]
                             if Ap[k[0] // 2, k[1] // 3] and Kp[k[0] % 2, k[1] % 3] else None),
                    (10, 18))
