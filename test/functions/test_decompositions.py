"""The decomposition route and sf.auto_densify() (RFC.md#decomposition-route,
RFC.md#auto-densify): functions without a route compute through torch's own
decomposition equal to dense, values and gradients to values and fill; a
refused step refuses the call naming the function and the step; the route
table is the one torch's registries give; dense-only functions densify only
inside the scope."""
from __future__ import annotations

import math
import re
import threading

import pytest
import torch
import torch.nn.functional as F

import sf_testing as T
import torch_sparsefill as sf
from torch_sparsefill.functions import composites, decompositions, routing

D = torch.float64


def _sparse(shape, fill, layout, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=D)
    x[torch.rand(shape, generator=g) < 0.6] = fill
    return sf.to_sparse(T.on_test_device(x), fill_value=fill, layout=layout)


def _dense_of(shape, seed):
    g = torch.Generator().manual_seed(seed + 100)
    return T.on_test_device(torch.randn(shape, generator=g, dtype=D))


# (id, function of the SparseFillTensor A (4, 5) and a dense tensor B (4, 5) of the same shape)
LISTED = [
    ("mse_loss", lambda A, B: F.mse_loss(A, B)),
    ("l1_loss", lambda A, B: F.l1_loss(A, B, reduction="sum")),
    ("huber_loss", lambda A, B: F.huber_loss(A, B, delta=0.5)),
    ("smooth_l1_loss", lambda A, B: F.smooth_l1_loss(A, B)),
    ("kl_div", lambda A, B: F.kl_div(A, B.sigmoid(), reduction="batchmean")),
    ("soft_margin_loss", lambda A, B: F.soft_margin_loss(A, B.sign())),
    ("cosine_similarity", lambda A, B: F.cosine_similarity(A, B)),
    ("pairwise_distance", lambda A, B: F.pairwise_distance(A, B)),
    ("normalize", lambda A, B: F.normalize(A, dim=0)),
    ("softmin", lambda A, B: F.softmin(A, dim=1)),
    ("dist", lambda A, B: torch.dist(A, B, 3)),
    ("linalg.norm", lambda A, B: torch.linalg.norm(A)),
    ("linalg.vector_norm.dim", lambda A, B: torch.linalg.vector_norm(A, 3, dim=1)),
    ("linalg.vector_norm.inf", lambda A, B: torch.linalg.vector_norm(A, math.inf, dim=0)),
    ("linalg.matrix_norm", lambda A, B: torch.linalg.matrix_norm(A, 1)),
    ("nansum", lambda A, B: torch.nansum(A, 1)),
    ("nanmean", lambda A, B: torch.nanmean(A, 0)),
    ("std_mean", lambda A, B: torch.std_mean(A)[0] + torch.std_mean(A)[1]),
    ("var_mean", lambda A, B: torch.var_mean(A, 1, correction=0)[0]),
    ("dot", lambda A, B: torch.dot(A[0], B[0])),
    ("vdot", lambda A, B: torch.vdot(A[1], B[1])),
    ("outer", lambda A, B: torch.outer(A[0], B[1])),
    ("addmv", lambda A, B: torch.addmv(B[:, 0], A, B[0], beta=0.5)),
    ("addr", lambda A, B: torch.addr(A, B[:, 0], B[0])),
    ("linalg.multi_dot", lambda A, B: torch.linalg.multi_dot([A, B.T, B])),
    ("linalg.vecdot", lambda A, B: torch.linalg.vecdot(A, B)),
]


@pytest.mark.parametrize("layout", T.LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("fill", [0.0, 1.5], ids=T.fill_id)
@pytest.mark.parametrize("fn", [f for _, f in LISTED], ids=[n for n, _ in LISTED])
def test_listed_functions_equal_dense(fn, fill, layout):
    A, B = _sparse((4, 5), fill, layout, 3), _dense_of((4, 5), 3)
    out = fn(A, B)
    T.assert_matches_dense(out, fn(A.to_dense(), B))


# Gradients to values and fill, through the decomposition's steps.
GRADS = ["mse_loss", "huber_loss", "cosine_similarity", "normalize", "linalg.vector_norm.dim",
         "nanmean", "var_mean", "outer", "addmv", "kl_div"]


@pytest.mark.parametrize("name", GRADS)
def test_gradients_to_values_and_fill(name):
    fn = dict(LISTED)[name]
    A, B = _sparse((4, 5), 0.7, torch.sparse_coo, 5), _dense_of((4, 5), 5)
    T.check_dense_gradients(lambda X: fn(X, B), lambda X: fn(X, B), A)


def test_gradcheck_values_and_fill():
    idx, v, f, size = T.leaf_parts(7, 0.7, torch.sparse_csr, "real")
    B = _dense_of(tuple(size), 7).to(v.dtype)

    def fn(v, f):
        A = T.build(torch.sparse_csr, idx, v, f, size)
        return torch.stack([F.mse_loss(A, B), F.cosine_similarity(A, B).sum()])
    torch.autograd.gradcheck(fn, (v.double().detach().requires_grad_(),
                                  f.double().detach().requires_grad_()))


def test_non_finite_fills_and_empty():
    for fill in (math.inf, -math.inf, math.nan, -0.0):
        A, B = _sparse((3, 4), fill, torch.sparse_coo, 11), _dense_of((3, 4), 11)
        for fn in (lambda A: torch.nansum(A, 0), lambda A: F.mse_loss(A, B, reduction="none"),
                   lambda A: torch.linalg.vector_norm(A, 1, dim=1)):
            T.assert_matches_dense(fn(A), fn(A.to_dense()))
    E = sf.to_sparse(torch.zeros(0, 3, dtype=D), fill_value=2.0)
    T.assert_matches_dense(torch.nansum(E, 0), torch.nansum(E.to_dense(), 0))


def test_half_accumulates_as_dense():
    # a float16 sum of squares would overflow; the reference accumulates in float32
    x = torch.full((4, 100), 30.0, dtype=torch.float16)
    A = sf.to_sparse(x, fill_value=30.0)
    T.assert_matches_dense(torch.linalg.vector_norm(A), torch.linalg.vector_norm(x))
    T.assert_matches_dense(A.norm(2, 1, keepdim=True), x.norm(2, 1, keepdim=True))


def test_refused_step_names_function_and_step():
    A = _sparse((2, 4, 3), 0.5, torch.sparse_coo, 1)
    with pytest.raises(NotImplementedError) as info:
        F.group_norm(A, 2)
    message = str(info.value)
    assert "torch.nn.functional.group_norm" in message
    assert "broadcast_in_dim" in message and "sf.auto_densify()" in message
    with sf.auto_densify():
        T.assert_matches_dense(F.group_norm(A, 2), F.group_norm(A.to_dense(), 2))


def _pass_through(A):
    """A public function of torch's kind with no __torch_function__ hook of
    its own (as F.upsample_bilinear calls F.interpolate)."""
    return F.group_norm(A, 2)


def test_refusal_names_the_function_called_through_torchs_python():
    """F.upsample_bilinear has no hook: the route sees only the F.interpolate
    it calls, and its refusal names both (the coverage judge asks the
    function the user called)."""
    A = _sparse((2, 3, 4, 4), 0.5, torch.sparse_coo, 3)
    with pytest.raises(NotImplementedError) as info, \
            pytest.warns(UserWarning, match="upsample_bilinear` is deprecated"):
        F.upsample_bilinear(A, scale_factor=2)
    assert "torch.nn.functional.interpolate (called by torch.nn.functional.upsample_bilinear)" \
        in str(info.value)
    # called directly (or from code outside torch): no "called by"
    with pytest.raises(NotImplementedError) as info:
        _pass_through(_sparse((2, 4, 3), 0.5, torch.sparse_coo, 1))
    assert "called by" not in str(info.value)
    with pytest.raises(NotImplementedError) as info:
        F.interpolate(A, scale_factor=2, mode="bilinear")
    assert "called by" not in str(info.value)


def test_argument_errors_are_dense_torchs():
    A, B = _sparse((4, 5), 0.0, torch.sparse_coo, 2), _dense_of((3, 5), 2)
    with pytest.raises(RuntimeError):  # as dense: the shapes do not broadcast
        F.mse_loss(A, B)
    with pytest.raises(ValueError):
        F.mse_loss(A, _dense_of((4, 5), 2), reduction="bogus")


def test_route_table_from_registries():
    table = decompositions.table(routing.TABLE)
    kinds = {"explicit", "auto_densify", "refused"} | {
        "decomposition:" + k for k in ("python", "composite", "refs", "decomp")}
    assert set(table.values()) <= kinds
    for func in (F.mse_loss, F.l1_loss, F.huber_loss, F.smooth_l1_loss, F.kl_div,
                 F.cosine_similarity, F.normalize, F.pairwise_distance, F.softmin, torch.dist,
                 torch.linalg.norm, torch.linalg.matrix_norm, torch.nansum, torch.nanmean,
                 torch.std_mean, torch.var_mean, torch.dot, torch.vdot, torch.outer, torch.addmv,
                 torch.addr, torch.linalg.multi_dot, torch.linalg.vecdot):
        assert table[func].startswith("decomposition"), (func, table[func])
    assert table[torch.linalg.vector_norm] == "explicit"
    for func, route in table.items():
        name = getattr(func, "__name__", "") or ""
        if name.endswith("_") and not name.endswith("__"):
            assert not route.startswith("decomposition"), func  # never in place
    # random callables never decompose (their decomposition would draw again)
    assert not table[F.dropout].startswith("decomposition")
    assert table[torch.bernoulli] in ("explicit", "auto_densify")
    # a REFUSED entry is one torch still decomposes (else the entry is stale)
    refs = decompositions._refs_map()
    for func in decompositions.REFUSED:
        assert func in refs or decompositions._aten_decomposition(func) is not None or \
            decompositions._python_body(func) is not None, func
        assert decompositions.route_of(func, routing.TABLE) in ("explicit", "auto_densify")
    # a restated composite is one torch has no Python decomposition of
    for func in composites.COMPOSITES:
        if func in composites.REPLACES_PYTHON_BODY:
            assert decompositions._python_body(func) is not None, func
            continue
        assert decompositions._python_body(func) is None, func
        assert func not in refs and decompositions._aten_decomposition(func) is None, func


def test_routes_doc_is_current():
    """docs/routes.md describes the pinned torch (requirements-dev.txt): its
    registries decide which functions decompose, so another torch (the
    CUDA build's) lists a few differently; there only the routing table's
    own part (the explicit routes) must match."""
    gen = T.tool("gen_routes_doc.py")
    text, current = gen.DOC.read_text(), gen.render()
    pinned = re.search(r"^torch==(\S+)$", (T.ROOT / "requirements-dev.txt").read_text(), re.M)
    if pinned and torch.__version__.split("+")[0] != pinned.group(1):
        def explicit(doc):
            return doc.split("## Computed by an explicit route", 1)[1].split("\n## ", 1)[0]
        assert explicit(text) == explicit(current), "docs/routes.md is stale: run make docs"
        return
    assert text == current, "docs/routes.md is stale: run make docs"


# ---- sf.auto_densify() ---------------------------------------------------------------

def test_dense_only_refused_by_default_naming_the_scope():
    A = _sparse((3, 3), 0.0, torch.sparse_csr, 4)
    with pytest.raises(NotImplementedError, match=r"linalg\.inv.*sf\.auto_densify\(\)"):
        torch.linalg.inv(A)


@pytest.mark.parametrize("fn", [torch.linalg.inv, lambda A: torch.fft.fft(A).abs(),
                                lambda A: F.conv1d(A.unsqueeze(0), torch.ones(2, 3, 2, dtype=D)),
                                torch.linalg.det],
                         ids=["inv", "fft", "conv1d", "det"])
def test_auto_densify_computes_dense_with_gradients(fn):
    A = _sparse((3, 3), 0.5, torch.sparse_coo, 6)
    A = sf.to_sparse(A.to_dense() + 3 * torch.eye(3, dtype=D), fill_value=0.5)
    with sf.auto_densify():
        out = fn(A)
        assert not isinstance(out, sf.SparseFillTensor)
        T.assert_dense_equal(out, fn(A.to_dense()))
        T.check_dense_gradients(fn, fn, A)


def test_auto_densify_scoped_nested_and_setting():
    A = _sparse((3, 3), 0.0, torch.sparse_coo, 8) + 3 * sf.to_sparse(torch.eye(3, dtype=D),
                                                                      fill_value=0.0)
    assert not sf.is_auto_densify()
    with sf.auto_densify():
        torch.linalg.inv(A)
        with sf.auto_densify(False):
            with pytest.raises(NotImplementedError):
                torch.linalg.inv(A)
        seen = []
        t = threading.Thread(target=lambda: seen.append(sf.is_auto_densify()))
        t.start()
        t.join()
        assert seen == [False]  # another thread does not see this scope
    with pytest.raises(NotImplementedError):
        torch.linalg.inv(A)
    sf.set_auto_densify(True)
    try:
        torch.linalg.inv(A)
    finally:
        sf.set_auto_densify(False)
    with pytest.raises(TypeError, match="enabled"):
        with sf.auto_densify("yes"):
            pass


def test_auto_densify_never_writes_a_copy():
    A = _sparse((3, 3), 0.0, torch.sparse_coo, 9)
    with sf.auto_densify():
        with pytest.raises(NotImplementedError):
            A.renorm_(2, 0, 1.0)  # in place: never densified
        with pytest.raises(NotImplementedError, match="out="):
            torch.linalg.inv(A, out=sf.to_sparse(torch.zeros(3, 3, dtype=D)))
