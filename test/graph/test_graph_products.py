"""sf.mxm against the present-only reference (sf_testing/graph.py): every
semiring, vectors, strided operands, layouts, dtypes, masks (structural,
value, complemented, replace, accum into out), and gradients."""
import pytest
import torch

import sf_testing.graph as G
import torch_sparsefill as sf

SEMIRINGS = ["plus_times", "min_plus", "max_plus", "min_times", "max_times", "lor_land",
             "any_pair", "plus_pair", "min_first", "min_second", "plus_first", "plus_second",
             "max_min", "any_second", "land_lor", "times_plus"]
LAYOUTS = [torch.sparse_coo, torch.sparse_csr, torch.sparse_csc]


# bool operands: the semirings whose op torch defines on bools.
_BOOL = {"lor_land", "any_pair", "plus_pair", "min_first", "min_second", "plus_first",
         "plus_second", "max_min", "any_second", "land_lor", "max_times", "min_times"}
CASES = [(s, d) for s in SEMIRINGS for d in (torch.float64, torch.int64, torch.bool)
         if d != torch.bool or s in _BOOL]


@pytest.mark.parametrize("semiring,dtype", CASES, ids=lambda x: str(x).split(".")[-1])
def test_mxm_matches_present_only_reference(semiring, dtype):
    Av, Ap = G.random_graph((5, 4), dtype=dtype, seed=1)
    Bv, Bp = G.random_graph((4, 6), dtype=dtype, seed=2)
    R = sf.mxm(G.indefinite(Av, Ap), G.indefinite(Bv, Bp), semiring)
    G.assert_result(R, G.mxm(Av, Ap, Bv, Bp, semiring), (5, 6))


@pytest.mark.parametrize("layouts", [(a, b) for a in LAYOUTS for b in LAYOUTS],
                         ids=lambda p: "-".join(str(x).split("_")[-1] for x in p))
def test_mxm_layouts(layouts):
    Av, Ap = G.random_graph((6, 5), seed=3)
    Bv, Bp = G.random_graph((5, 4), seed=4)
    R = sf.mxm(G.indefinite(Av, Ap, layouts[0]), G.indefinite(Bv, Bp, layouts[1]), "min_plus")
    G.assert_result(R, G.mxm(Av, Ap, Bv, Bp, "min_plus"), (6, 4))


def test_mxm_empty_rows_columns_and_nothing_present():
    Av, Ap = G.random_graph((4, 3), seed=5)
    Ap[1] = False
    Ap[:, 2] = False
    Bv, Bp = G.random_graph((3, 5), seed=6)
    Bp[:, 0] = False
    R = sf.mxm(G.indefinite(Av, Ap), G.indefinite(Bv, Bp), "max_times")
    G.assert_result(R, G.mxm(Av, Ap, Bv, Bp, "max_times"), (4, 5))
    none = torch.zeros(4, 3, dtype=torch.bool)
    G.assert_result(sf.mxm(G.indefinite(Av, none), G.indefinite(Bv, Bp), "min_plus"), {},
                    (4, 5))


@pytest.mark.parametrize("semiring", ["min_plus", "plus_times", "any_second", "plus_pair"])
def test_vectors_and_strided_operands(semiring):
    Av, Ap = G.random_graph((5, 4), seed=7)
    xv, xp = G.random_graph((4,), seed=8, density=0.6)
    A, x = G.indefinite(Av, Ap), G.indefinite(xv, xp)
    mxv = G.mxm(Av, Ap, xv[:, None], xp[:, None], semiring)
    G.assert_result(sf.mxm(A, x, semiring), {(i,): v for (i, _), v in mxv.items()}, (5,))
    yv, yp = G.random_graph((5,), seed=9, density=0.6)
    vxm = G.mxm(yv[None], yp[None], Av, Ap, semiring)
    G.assert_result(sf.mxm(G.indefinite(yv, yp), A, semiring),
                    {(j,): v for (_, j), v in vxm.items()}, (4,))
    # a strided operand: every element present
    full = torch.ones(4, dtype=torch.bool)
    dense = G.mxm(Av, Ap, xv[:, None], full[:, None], semiring)
    G.assert_result(sf.mxm(A, xv, semiring), {(i,): v for (i, _), v in dense.items()}, (5,))
    dense2 = G.mxm(Av, torch.ones_like(Ap), xv[:, None], xp[:, None], semiring)
    G.assert_result(sf.mxm(Av, x, semiring), {(i,): v for (i, _), v in dense2.items()}, (5,))
    # a dot product: a 0-d tensor, or sf.indefinite with no common element
    dot = G.mxm(yv[None, :4], yp[None, :4], xv[:, None], xp[:, None], semiring)
    got = sf.mxm(G.indefinite(yv[:4], yp[:4]), x, semiring)
    if dot:
        torch.testing.assert_close(got, dot[(0, 0)].to(got.dtype))
    else:
        assert got is sf.indefinite
    assert sf.mxm(G.indefinite(yv[:4], ~xp), x, semiring) is sf.indefinite


def test_min_times_with_negative_values_is_not_an_identity_stand_in():
    # The terms of (0, 0): -2 * 3 = -6 alone; an identity (+inf) stand-in for
    # absent terms would give inf * ... products; a 0 stand-in would give 0.
    A = sf.sparse_coo_tensor([[0, 0], [0, 1]], [-2., 5.], (1, 2), fill_value=sf.indefinite)
    B = sf.sparse_coo_tensor([[0], [0]], [3.], (2, 1), fill_value=sf.indefinite)
    R = sf.mxm(A, B, "min_times")
    assert R.values().tolist() == [-6.] and R.nse() == 1
    assert sf.mxm(A, B, "any_second").values().tolist() == [3.]
    assert sf.mxm(A, B, "plus_pair").values().tolist() == [1]
    assert sf.mxm(A, B, "plus_pair").dtype == torch.float32


def test_plus_pair_counts_over_bool():
    Av, Ap = G.random_graph((5, 5), dtype=torch.bool, seed=10)
    R = sf.mxm(G.indefinite(Av, Ap), G.indefinite(Av, Ap), "plus_pair")
    assert R.dtype == torch.int64
    G.assert_result(R, G.mxm(Av, Ap, Av, Ap, "plus_pair"), (5, 5))
    assert sf.mxm(G.indefinite(Av, Ap), G.indefinite(Av, Ap), "lor_land").dtype == torch.bool


@pytest.mark.parametrize("complement", [False, True])
@pytest.mark.parametrize("structural", [True, False])
def test_masks(complement, structural):
    Av, Ap = G.random_graph((6, 5), seed=11, density=0.6)
    Bv, Bp = G.random_graph((5, 7), seed=12, density=0.6)
    Mv, Mp = G.random_graph((6, 7), seed=13, density=0.5)
    allowed = Mp & (Mv != 0) if not structural else Mp
    allowed = ~allowed if complement else allowed
    R = sf.mxm(G.indefinite(Av, Ap), G.indefinite(Bv, Bp), "min_plus",
               mask=G.indefinite(Mv, Mp), complement=complement, structural=structural)
    G.assert_result(R, G.mxm(Av, Ap, Bv, Bp, "min_plus", allowed), (6, 7))


def test_masked_product_by_dots_and_by_expansion_agree(monkeypatch):
    # The masked kernel picks the cheaper method; both must give the same.
    Av, Ap = G.random_graph((30, 30), seed=14, density=0.3)
    Mv, Mp = G.random_graph((30, 30), seed=15, density=0.05)
    A, M = G.indefinite(Av, Ap), G.indefinite(Mv, Mp)
    want = G.mxm(Av, Ap, Av, Ap, "plus_times", Mp)
    for cheaper in (True, False):
        monkeypatch.setattr(sf.graph.products, "_dots_cheaper", lambda *a, c=cheaper: c)
        G.assert_result(sf.mxm(A, A, "plus_times", mask=M), want, (30, 30))


def test_chunked_expansion_matches(monkeypatch):
    monkeypatch.setattr(sf.graph.products, "CHUNK_TERMS", 7)
    Av, Ap = G.random_graph((12, 9), seed=16, density=0.5)
    Bv, Bp = G.random_graph((9, 8), seed=17, density=0.5)
    Mv, Mp = G.random_graph((12, 8), seed=18, density=0.5)
    A, B = G.indefinite(Av, Ap), G.indefinite(Bv, Bp)
    G.assert_result(sf.mxm(A, B, "max_plus"), G.mxm(Av, Ap, Bv, Bp, "max_plus"), (12, 8))
    G.assert_result(sf.mxm(A, B, "max_plus", mask=G.indefinite(Mv, Mp)),
                    G.mxm(Av, Ap, Bv, Bp, "max_plus", Mp), (12, 8))


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("accum", [None, "plus", "min"])
@pytest.mark.parametrize("complement", [False, True])
def test_accum_replace_into_out(replace, accum, complement):
    Av, Ap = G.random_graph((5, 4), seed=19, density=0.6)
    Bv, Bp = G.random_graph((4, 6), seed=20, density=0.6)
    Cv, Cp = G.random_graph((5, 6), seed=21, density=0.5)
    Mv, Mp = G.random_graph((5, 6), seed=22, density=0.5)
    allowed = ~Mp if complement else Mp
    T = G.mxm(Av, Ap, Bv, Bp, "min_plus", allowed)
    C = G.indefinite(Cv, Cp, torch.sparse_csr)
    out = sf.mxm(G.indefinite(Av, Ap), G.indefinite(Bv, Bp), "min_plus",
                 mask=G.indefinite(Mv, Mp), complement=complement, replace=replace,
                 accum=accum, out=C)
    assert out is C and C.layout == torch.sparse_csr
    want = {}
    for i in range(5):
        for j in range(6):
            c = Cv[i, j] if Cp[i, j] else None
            t = T.get((i, j))
            if allowed[i, j]:
                z = t if accum is None else (c if t is None else t if c is None else
                                             sf.graph.operators.binary(accum)(c, t))
                if z is not None:
                    want[(i, j)] = z
            elif not replace and c is not None:
                want[(i, j)] = c
    G.assert_result(C, want, (5, 6))


SMOOTH = ["plus_times", "min_plus", "max_plus", "min_times", "max_times"]


@pytest.mark.parametrize("semiring", SMOOTH)
def test_gradcheck(semiring):
    Av, Ap = G.random_graph((4, 3), seed=23, density=0.7)
    Bv, Bp = G.random_graph((3, 5), seed=24, density=0.7)
    g = torch.Generator().manual_seed(0)
    # distinct values: no ties, so finite differences see one argmin
    Av = torch.randn(4, 3, generator=g, dtype=torch.float64).requires_grad_()
    Bv = torch.randn(3, 5, generator=g, dtype=torch.float64).requires_grad_()

    def f(a, b):
        return sf.mxm(G.indefinite(a, Ap), G.indefinite(b, Bp), semiring).values()
    torch.autograd.gradcheck(f, (Av, Bv))
    x = torch.randn(3, generator=g, dtype=torch.float64).requires_grad_()
    torch.autograd.gradcheck(lambda a, x: sf.mxm(G.indefinite(a, Ap), x, semiring).values(),
                             (Av, x))


TIE_SHAPES = ["matrix", "one column", "vector", "masked by dots", "masked by expansion"]


@pytest.mark.parametrize("shape", TIE_SHAPES)
@pytest.mark.parametrize("semiring", ["min_plus", "max_plus", "max_times", "min_times"])
def test_gradient_of_ties_splits_as_amin(semiring, shape, monkeypatch):
    # Integer-valued operands: many ties among the terms of one output. The
    # weights have both signs: torch.segment_reduce's backward gives each
    # tied term the whole of a negative gradient (torch 2.13), amin a share;
    # each shape takes another route (rows, expansion, dots).
    n = 1 if shape in ("one column", "vector") else 5
    Av, Ap = G.random_graph((5, 4), seed=25, density=0.8, negative=False)
    Bv, Bp = G.random_graph((4, n), seed=26, density=0.8, negative=False)
    Av.requires_grad_()
    Bv.requires_grad_()
    options, allowed = {}, None
    if shape.startswith("masked"):
        by_dots = shape.endswith("dots")
        monkeypatch.setattr(sf.graph.products, "_dots_cheaper", lambda *a: by_dots)
        Mv, Mp = G.random_graph((5, n), seed=27, density=0.7)
        options, allowed = {"mask": G.indefinite(Mv, Mp)}, Mp
    if shape == "vector":
        Bp = torch.ones_like(Bp)
        B = Bv[:, 0]
    else:
        B = G.indefinite(Bv, Bp)
    R = sf.mxm(G.indefinite(Av, Ap), B, semiring, **options)
    values, _ = G.parts(R)
    w = (torch.arange(5 * n, dtype=torch.float64) - 7).reshape(5, n)
    got = torch.autograd.grad((values.reshape(5, n) * w).sum(), (Av, Bv))
    ref = G.mxm(Av, Ap, Bv, Bp, semiring, allowed)
    want = torch.autograd.grad(sum(v * w[k] for k, v in ref.items()), (Av, Bv))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("shape", ["matrix", "vector"])
@pytest.mark.parametrize("semiring", SMOOTH + ["times_plus"])
def test_forward_mode_equals_the_reference(semiring, shape):
    # Forward AD takes the torch route: every monoid's tangent, times
    # (zeros among the terms) and ties included.
    n = 1 if shape == "vector" else 5
    Av, Ap = G.random_graph((5, 4), seed=28, density=0.8)
    Bv, Bp = G.random_graph((4, n), seed=29, density=0.8)
    if shape == "vector":
        Bp = torch.ones_like(Bp)
    g = torch.Generator().manual_seed(4)
    tangents = tuple(torch.randn(v.shape, dtype=torch.float64, generator=g) for v in (Av, Bv))

    def ours(a, b):
        B = b[:, 0] if shape == "vector" else G.indefinite(b, Bp)
        return G.parts(sf.mxm(G.indefinite(a, Ap), B, semiring))[0].reshape(5, n)

    def reference(a, b):
        ref = G.mxm(a, Ap, b, Bp, semiring)
        return torch.stack([ref[(i, j)] if (i, j) in ref else a.new_zeros(())
                            for i in range(5) for j in range(n)]).reshape(5, n)
    got = torch.func.jvp(ours, (Av, Bv), tangents)
    want = torch.func.jvp(reference, (Av, Bv), tangents)
    torch.testing.assert_close(got, want)


def test_refusals():
    A = sf.to_sparse(torch.eye(3), fill_value=sf.indefinite)
    with pytest.raises(ValueError, match="to_indefinite"):
        sf.mxm(sf.to_sparse(torch.eye(3)), A)
    with pytest.raises(ValueError, match="inner dimensions"):
        sf.mxm(A, torch.ones(2, 2))
    with pytest.raises(ValueError, match="unknown monoid"):
        sf.mxm(A, A, "avg_plus")
    with pytest.raises(ValueError, match="binary op name"):
        sf.mxm(A, A, "min_frob")
    with pytest.raises(ValueError, match="need a mask"):
        sf.mxm(A, A, complement=True)
    with pytest.raises(ValueError, match="give out"):
        sf.mxm(A, A, accum="plus")
    with pytest.raises(ValueError, match="mask has shape"):
        sf.mxm(A, A, mask=sf.to_sparse(torch.eye(2), fill_value=sf.indefinite))
    with pytest.raises(TypeError, match="strided"):
        sf.mxm(A, [1, 2, 3])
