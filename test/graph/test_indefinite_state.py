"""sf.indefinite, the state (RFC.md#indefinite-fill): constructors, reading
the fill refuses, conversions, copies, casts, printing and pickling keep it,
to_dense(fill=), the routing's one check, and the indefinite-aware routes
(element-wise on stored values, torch's own stored-element meaning)."""
import copy
import io
import pickle

import pytest
import torch

import sf_testing.graph as G
import torch_sparsefill as sf

NAN = float("nan")


def _A(layout=torch.sparse_coo):
    A = sf.sparse_coo_tensor([[0, 1, 1], [1, 0, 2]], [2., 3., -4.], (2, 3),
                             fill_value=sf.indefinite)
    return A if layout == torch.sparse_coo else A.to_sparse(layout=layout)


def test_every_constructor_takes_it():
    made = [
        _A(),
        sf.sparse_csr_tensor([0, 1, 3], [1, 0, 2], [2., 3., -4.], (2, 3),
                             fill_value=sf.indefinite),
        sf.sparse_csc_tensor([0, 1, 2, 3], [1, 0, 1], [3., 2., -4.], (2, 3),
                             fill_value=sf.indefinite),
        sf.sparse_compressed_tensor([0, 1, 3], [1, 0, 2], [2., 3., -4.], (2, 3),
                                    layout=torch.sparse_csr, fill_value=sf.indefinite),
        sf.to_sparse(torch.tensor([[NAN, 2., NAN], [3., NAN, -4.]]), fill_value=sf.indefinite),
        sf.to_sparse(torch.tensor([[0., 2., 0.], [3., 0., -4.]]), fill_value=sf.indefinite,
                     mask=torch.tensor([[False, True, False], [True, False, True]])),
        sf.to_sparse(torch.tensor([[0., 2., 0.], [3., 0., -4.]]).to_sparse(),
                     fill_value=sf.indefinite),
        sf.sparse_mask(torch.tensor([[9., 2., 9.], [3., 9., -4.]]), _A(), fill_value=sf.indefinite),
        sf.sampled_matmul(torch.tensor([[1.], [1.]]), torch.tensor([[3., 2., -4.]]),
                          _A(), fill_value=sf.indefinite),
    ]
    for A in made:
        assert A.is_indefinite()
        torch.testing.assert_close(A.to_dense(fill=NAN), _A().to_dense(fill=NAN),
                                   equal_nan=True)
    for layout in (torch.sparse_coo, torch.sparse_csr):  # nothing stored: all absent
        E = sf.full((2, 3), sf.indefinite, layout=layout)
        assert E.is_indefinite() and E.nse() == 0 and E.dtype == torch.get_default_dtype()
    B = sf.sparse_bsr_tensor([0, 1], [1], torch.ones(1, 2, 2), (2, 4), fill_value=sf.indefinite)
    assert B.is_indefinite() and B.to_sparse_csr().nse() == 4
    assert torch.equal(B.to_dense(fill=0.), torch.tensor([[0., 0., 1., 1.]] * 2))


def test_the_fill_is_no_value():
    A = _A()
    for read in (A.fill_value, A._fill_value, A.to_dense, A.eliminate_fill):
        with pytest.raises(RuntimeError, match="indefinite"):
            read()
    with pytest.raises(RuntimeError, match=r"to_dense\(fill=v\)"):
        A.to_dense()
    with pytest.raises(NotImplementedError, match="no value to pad"):
        A.to_sparse_bsr((1, 1))
    assert torch.equal(A.to_dense(fill=0.), torch.tensor([[0., 2., 0.], [3., 0., -4.]]))
    assert torch.equal(A.to_dense(fill=NAN).isnan(), ~G.parts(A)[1])
    with pytest.raises(ValueError, match="to_indefinite"):
        sf.to_sparse(sf.full((2,), 1.), fill_value=sf.indefinite)
    with pytest.raises(ValueError, match="mask"):
        sf.to_sparse(torch.ones(2), mask=torch.ones(2, dtype=torch.bool))
    with pytest.raises(TypeError):
        bool(sf.indefinite)


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr, torch.sparse_csc])
def test_conversions_copies_casts_keep_it(layout):
    A = _A(layout)
    kept = [A.to_sparse_coo(), A.to_sparse_csr(), A.to_sparse_csc(), A.clone(), torch.clone(A),
            A.detach(), A.double(), A.to(torch.float16), A.cpu(), copy.deepcopy(A),
            pickle.loads(pickle.dumps(A)), A.coalesce() if layout == torch.sparse_coo else A]
    buf = io.BytesIO()
    torch.save(A, buf)
    buf.seek(0)
    kept.append(torch.load(buf))
    for B in kept:
        assert B.is_indefinite(), B
        torch.testing.assert_close(B.to_dense(fill=NAN).double(), _A().to_dense(fill=NAN).double(),
                                   equal_nan=True)
    assert "fill_value=sf.indefinite" in repr(A)


def test_to_indefinite_forgets_the_fill():
    A = sf.sparse_coo_tensor([[0, 2]], [1., 2.], (4,), fill_value=7.)
    B = A.to_indefinite()
    assert B.is_indefinite() and not A.is_indefinite()
    assert B._values() is A._values()
    assert torch.equal(B.to_dense(fill=-1.), torch.tensor([1., -1., 2., -1.]))


def test_every_other_route_refuses_naming_the_graph_functions():
    A = _A()
    calls = [lambda: torch.sum(A), lambda: A.sum(), lambda: A + A, lambda: A @ torch.ones(3),
             lambda: torch.mm(A, torch.ones(3, 2)), lambda: A[0], lambda: A.T,
             lambda: torch.cat([A, A]), lambda: A + torch.ones(2, 3), lambda: A.amax(),
             lambda: torch.softmax(A, 1), lambda: A.add_(1), lambda: torch.exp(A, out=A),
             lambda: torch.sparse.mm(A, torch.ones(3, 1)), lambda: A.reshape(6),
             lambda: torch.where(A > 0, A, 0.)]
    for call in calls:
        with pytest.raises(NotImplementedError, match="sf.mxm, sf.ewise_add"):
            call()


@pytest.mark.parametrize("name", ["sum", "prod", "amax", "amin", "mean", "var", "norm",
                                  "logsumexp", "softmax", "cumsum", "argmax"])
def test_torch_masked_refuses(name):
    # torch.masked's functions have their own entry (functions/masked.py), not
    # the routing's: it must refuse too, as an operand, a mask or a second operand.
    A, D = _A(), torch.ones(2, 3)
    fn = getattr(torch.masked, name)
    rest = (1,) if name not in ("sum", "prod", "amax", "amin", "mean", "var") else ()
    args = (A, 2.0, 1) if name == "norm" else (A, *rest)
    for call in (lambda: fn(*args), lambda: fn(D, *args[1:], mask=A > 0)):
        with pytest.raises(NotImplementedError, match=f"torch.masked.{name} .*sf.reduce"):
            call()
    with pytest.raises(NotImplementedError, match="torch.masked.logaddexp"):
        torch.masked.logaddexp(D, A)


def test_elementwise_functions_apply_to_stored_elements():
    A = _A(torch.sparse_csr)
    for f in (torch.exp, torch.abs, lambda x: x > 0, lambda x: 2 * x - 1, lambda x: x ** 2,
              lambda x: torch.clamp(x, min=0.), torch.nn.functional.relu,
              lambda x: 1 / x, lambda x: torch.float_power(x, 2)):  # the last two by hand
        R = f(A)
        assert R.is_indefinite() and R.layout == torch.sparse_csr
        assert torch.equal(R.crow_indices(), A.crow_indices())
        assert torch.equal(R.values(), f(A.values()))
    assert (A > 0).dtype == torch.bool
    v = A.values().detach().clone().requires_grad_()
    B = sf.sparse_csr_tensor(A.crow_indices(), A.col_indices(), v, (2, 3),
                             fill_value=sf.indefinite)
    torch.exp(B).values().sum().backward()
    assert torch.equal(v.grad, torch.exp(v.detach()))


def test_zero_dim_tensors_are_numbers_on_stored_elements():
    """`A * scale` with a 0-d tensor (a learned scale): on the stored values,
    torch's dtype of the dense computation (half precision included), gradients to both (the scale's
    sums over the stored elements only)."""
    A = _A().coalesce()
    Ai = sf.sparse_coo_tensor([[0, 1], [1, 0]], [2, -3], (2, 3), fill_value=sf.indefinite).coalesce()
    for M, t in ((A, torch.tensor(2.5)), (Ai, torch.tensor(2.5)), (Ai, torch.tensor(3)),
                 (A, torch.tensor(2., dtype=torch.float64)), (A, torch.tensor(True)),
                 (A.half(), torch.tensor(2.5)), (A.bfloat16(), torch.tensor(3))):
        for f in (torch.mul, lambda x, y: y - x, torch.maximum, torch.atan2, torch.eq):
            try:
                dense = f(M.to_dense(fill=1), t)
            except RuntimeError as e:  # bool - x: torch refuses, and so do we
                with pytest.raises(RuntimeError, match=str(e)[:30]):
                    f(M, t)
                continue
            R = f(M, t)
            assert R.is_indefinite(), f
            assert torch.equal(R.values(), f(M.values(), t))
            assert R.dtype == dense.dtype
    v = torch.tensor([2., 3., -4.], dtype=torch.float64, requires_grad=True)
    t = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)

    def f(v, t):
        B = sf.sparse_coo_tensor([[0, 1, 1], [1, 0, 2]], v, (2, 3), fill_value=sf.indefinite)
        return torch.atan2(B * t, t).values()
    assert torch.autograd.gradcheck(f, (v, t)) and torch.autograd.gradgradcheck(f, (v, t))
    for bad in (torch.ones(1), torch.ones(2, 3), _A()):
        with pytest.raises(NotImplementedError, match="sf.ewise_add"):
            A * bad


def test_torch_sparse_ops_compute_the_stored_element_meaning():
    A = _A().coalesce()
    ref = torch.sparse_coo_tensor(A.indices(), A.values(), A.shape, check_invariants=False)
    for f in (torch.sparse.softmax, torch.sparse.log_softmax):
        R = f(A, 1)
        assert R.is_indefinite()
        assert torch.allclose(R.values(), f(ref, 1).coalesce().values())
    x = torch.randn(3, 2)
    for reduce in ("amax", "amin", "mean"):
        assert torch.allclose(torch.sparse.mm(A, x, reduce),
                              torch.sparse.mm(ref.to_sparse_csr(), x, reduce))
    with pytest.raises(NotImplementedError, match="plus_times"):
        torch.sparse.mm(A, x)


def test_scipy_interop_keeps_it():
    A = _A(torch.sparse_csr)
    m, fill = A.to_scipy()
    assert fill is sf.indefinite and m.nnz == 3
    B = sf.from_scipy(m, fill_value=sf.indefinite)
    assert B.is_indefinite()
    assert torch.equal(B.to_dense(fill=0.).float(), A.to_dense(fill=0.))
    with pytest.raises(NotImplementedError, match="pydata sparse cannot hold"):
        sf.creation.interop.to_pydata(A)  # its fill_value is a number


def test_graphblas_round_trip_and_same_products():
    gb = pytest.importorskip("graphblas", reason="python-graphblas is a dev requirement")
    Av, Ap = G.random_graph((6, 5), seed=50)
    xv, xp = G.random_graph((5,), seed=51, density=0.6)
    A, x = G.indefinite(Av, Ap, torch.sparse_csr), G.indefinite(xv, xp)
    M, v = A.to_graphblas(), x.to_graphblas()
    assert isinstance(M, gb.Matrix) and M.nvals == A.nse() and v.nvals == x.nse()
    B = sf.from_graphblas(M)
    assert B.is_indefinite() and B.layout == torch.sparse_csr
    assert torch.equal(B.to_dense(fill=0.), A.to_dense(fill=0.))
    for name in ("min_plus", "plus_times", "max_times", "plus_pair", "any_pair"):
        ours = sf.mxm(A, x, name)
        theirs = sf.from_graphblas(M.mxv(v, getattr(gb.semiring, name)).new())
        assert torch.equal(G.parts(ours)[1], G.parts(theirs)[1])
        if name != "any_pair":  # GraphBLAS's any picks any term
            torch.testing.assert_close(ours.values().double(), theirs.values().double())
