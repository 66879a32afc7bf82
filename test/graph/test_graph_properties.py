"""Property tests (hypothesis) of the graph domain: sf.mxm over random
shapes (empty ones too), densities, dtypes, layouts, semirings, vectors and
masks; the three element-wise modes of a random op; sf.reduce of a random
monoid. The reference reduces over present terms only (sf_testing/graph.py)
and the result's pattern must be exactly the structural one; this reaches
the C kernels (CSR operands of float32/float64/int64) and the torch route
(the other layouts and dtypes) with inputs no hand-written case chose."""
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sf_testing.graph as G
import torch_sparsefill as sf

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])
SEMIRINGS = ["plus_times", "min_plus", "max_plus", "min_times", "max_times", "lor_land",
             "any_pair", "plus_pair", "min_first", "min_second", "plus_first", "plus_second",
             "max_min", "any_second", "land_lor", "times_plus"]
BOOL_SEMIRINGS = {"lor_land", "any_pair", "plus_pair", "min_first", "min_second",
                  "plus_first", "plus_second", "max_min", "any_second", "land_lor",
                  "max_times", "min_times"}
LAYOUTS = [torch.sparse_coo, torch.sparse_csr, torch.sparse_csc]
DTYPES = [torch.float64, torch.float32, torch.int64, torch.bool]


@st.composite
def operand(draw, shape, dtype):
    """(values, presence) of one operand, a NaN now and then in a float one."""
    density = draw(st.sampled_from([0.0, 0.2, 0.5, 0.9, 1.0]))
    Av, Ap = G.random_graph(shape, density=density, dtype=dtype,
                            seed=draw(st.integers(0, 10_000)))
    present = Ap.reshape(-1).nonzero().squeeze(1)
    if dtype.is_floating_point and present.numel() and draw(st.booleans()):
        Av = Av.clone()  # a NaN where it counts: at a present element
        Av.reshape(-1)[present[draw(st.integers(0, present.numel() - 1))]] = float("nan")
    return Av, Ap


@st.composite
def products(draw):
    semiring = draw(st.sampled_from(SEMIRINGS))
    dtype = draw(st.sampled_from([d for d in DTYPES if d != torch.bool or
                                  semiring in BOOL_SEMIRINGS]))
    m, k, n = (draw(st.integers(0, 6)) for _ in range(3))
    A = draw(operand((m, k), dtype))
    B = draw(operand((k, n), dtype))
    layouts = (draw(st.sampled_from(LAYOUTS)), draw(st.sampled_from(LAYOUTS)))
    vector = draw(st.sampled_from([None, "mxv", "vxm"]))
    mask = draw(st.sampled_from([None, "structural", "value"]))
    complement = draw(st.booleans())
    M = draw(operand((m, n), torch.float64)) if mask else None
    return semiring, dtype, A, B, layouts, vector, mask, complement, M


@pytest.mark.cpu_only(reason="the operands are built on the CPU")
@SETTINGS
@given(products())
def test_mxm_equals_the_present_only_reference(case):
    semiring, dtype, (Av, Ap), (Bv, Bp), layouts, vector, mask, complement, M = case
    if (vector == "mxv" and not Bv.shape[1]) or (vector == "vxm" and not Av.shape[0]):
        vector = None  # no column / row to take
    if vector == "mxv":  # B's first column as a vector
        Bv, Bp = Bv[:, :1], Bp[:, :1]
    elif vector == "vxm":
        Av, Ap = Av[:1], Ap[:1]
    m, n = Av.shape[0], Bv.shape[1]
    allowed = None
    kwargs = {}
    if mask and vector is None:
        Mv, Mp = M
        allowed = Mp if mask == "structural" else Mp & (Mv != 0)
        allowed = ~allowed if complement else allowed
        kwargs = dict(mask=G.indefinite(Mv, Mp), complement=complement,
                      structural=mask == "structural")
    want = G.mxm(Av, Ap, Bv, Bp, semiring, allowed)
    if vector == "mxv":
        A = G.indefinite(Av, Ap, layouts[0])
        R = sf.mxm(A, G.indefinite(Bv[:, 0], Bp[:, 0]), semiring)
        G.assert_result(R, {(i,): v for (i, _), v in want.items()}, (m,))
    elif vector == "vxm":
        R = sf.mxm(G.indefinite(Av[0], Ap[0]), G.indefinite(Bv, Bp, layouts[1]), semiring)
        G.assert_result(R, {(j,): v for (_, j), v in want.items()}, (n,))
    else:
        R = sf.mxm(G.indefinite(Av, Ap, layouts[0]), G.indefinite(Bv, Bp, layouts[1]),
                   semiring, **kwargs)
        G.assert_result(R, want, (m, n))


OPS = ["plus", "minus", "times", "min", "max", "first", "second", "pair", "eq", "lt", "ne"]


@pytest.mark.cpu_only(reason="the operands are built on the CPU")
@SETTINGS
@given(st.data())
def test_ewise_modes_equal_the_reference(data):
    op = data.draw(st.sampled_from(OPS))
    dtype = data.draw(st.sampled_from([torch.float64, torch.float32, torch.int64]))
    shape = data.draw(st.sampled_from([(0, 3), (4, 5), (6,), (3, 1)]))
    Av, Ap = data.draw(operand(shape, dtype))
    Bv, Bp = data.draw(operand(shape, dtype))
    la, lb = (data.draw(st.sampled_from(LAYOUTS if len(shape) == 2 else [torch.sparse_coo]))
              for _ in range(2))
    A, B = G.indefinite(Av, Ap, la), G.indefinite(Bv, Bp, lb)
    fn = sf.graph.operators.binary(op)
    keys = [tuple(int(i) for i in k) for k in torch.cartesian_prod(
        *[torch.arange(s) for s in shape]).reshape(-1, len(shape))] if Av.numel() else []
    both = {k: fn(Av[k], Bv[k]) for k in keys if Ap[k] and Bp[k]}
    G.assert_result(sf.ewise_mult(A, B, op), both, shape)
    union = {k: both[k] if k in both else Av[k] if Ap[k] else Bv[k]
             for k in keys if Ap[k] or Bp[k]}
    G.assert_result(sf.ewise_add(A, B, op), union, shape)
    a0, b0 = (torch.tensor(x, dtype=dtype) for x in (2, -3))
    withdef = {k: fn(Av[k] if Ap[k] else a0, Bv[k] if Bp[k] else b0)
               for k in keys if Ap[k] or Bp[k]}
    G.assert_result(sf.ewise_union(A, B, op, 2, -3), withdef, shape)


@pytest.mark.cpu_only(reason="the operands are built on the CPU")
@SETTINGS
@given(st.data())
def test_reduce_equals_the_reference(data):
    name = data.draw(st.sampled_from(["plus", "times", "min", "max", "lor", "land", "any"]))
    dtype = data.draw(st.sampled_from([torch.float64, torch.int64]))
    shape = (data.draw(st.integers(0, 5)), data.draw(st.integers(0, 5)))
    Av, Ap = data.draw(operand(shape, dtype))
    A = G.indefinite(Av, Ap, data.draw(st.sampled_from(LAYOUTS)))
    dim = data.draw(st.sampled_from([None, 0, 1]))
    want = G.reduce(Av, Ap, dim, name)
    got = sf.reduce(A, dim, name)
    if dim is None:
        if not want:
            assert got is sf.indefinite
        else:
            torch.testing.assert_close(got, want[()].to(got.dtype), equal_nan=True)
    else:
        G.assert_result(got, want, (shape[1 - dim],))
