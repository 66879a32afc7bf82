"""Shape ops that move, copy or pick elements (functions/shape/moves.py,
functions/shape/copies.py) against dense torch on A.to_dense(): every fill,
pattern and layout; gradients to values and fill."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import sf_testing as T
import torch_sparsefill as sf
from sf_testing.gradients import build, leaf_parts

CASES = [T.Case(p, f) for p in ("empty", "one", "random", "full", "hybrid") for f in T.FILLS]


def _ops(nd, f):
    def m(x):  # a matrix of the tensor
        return x if nd == 2 else x[..., 0]
    return {
        "flip": lambda x: torch.flip(x, [0, nd - 1]), "fliplr": torch.fliplr,
        "flipud": torch.flipud, "roll": lambda x: torch.roll(x, (2, -1), (0, 1)),
        "roll-flat": lambda x: torch.roll(x, 3), "rot90": torch.rot90,
        "rot90-2": lambda x: torch.rot90(x, 2), "rot90-3": lambda x: torch.rot90(x, -1),
        "movedim": lambda x: torch.movedim(x, 0, -1), "unflatten": lambda x: x.unflatten(0, (-1, 1)),
        "atleast_3d": torch.atleast_3d, "tensor_split": lambda x: torch.tensor_split(x, 3, 1),
        "tensor_split-indices": lambda x: torch.tensor_split(x, [1, 4], 0),
        "hsplit": lambda x: torch.hsplit(x, [2]), "vsplit": lambda x: torch.vsplit(x, [1, 3]),
        "split_with_sizes": lambda x: torch.split_with_sizes(x, [2, x.shape[0] - 2]),
        "column_stack": lambda x: torch.column_stack([m(x)[:, 0], m(x)]),
        "diagonal": torch.diagonal, "diagonal+1": lambda x: torch.diagonal(x, 1),
        "diagonal-2": lambda x: torch.diagonal(x, -2, 1, 0), "trace": lambda x: torch.trace(m(x)),
        "diag-vector": lambda x: torch.diag(m(x)[0], 1), "diag-matrix": lambda x: torch.diag(m(x), -1),
        "diag_embed": torch.diag_embed, "diagflat": lambda x: torch.diagflat(x[0]),
        "repeat": lambda x: x.repeat((2,) * nd), "repeat-new-dims": lambda x: x.repeat((2, 1) + (1,) * nd),
        "tile": lambda x: torch.tile(x, (2,)),
        "repeat_interleave": lambda x: torch.repeat_interleave(x, 2, 0),
        "repeat_interleave-tensor": lambda x: torch.repeat_interleave(x, torch.arange(x.shape[1]) % 3, 1),
        "broadcast_to": lambda x: torch.broadcast_to(x[:1], (3,) + tuple(x.shape[1:])),
        "broadcast_to-new": lambda x: x.broadcast_to((2,) + tuple(x.shape)),
        "kron": lambda x: torch.kron(m(x), m(x)[:2, :3]),
        "block_diag": lambda x: torch.block_diag(m(x), m(x)[0]),
        "pad-fill": lambda x: F.pad(x, (1, 2), value=f), "pad-other": lambda x: F.pad(x, (1, 0, 0, 2), value=-3.0),
        "pad-crop": lambda x: F.pad(x, (-1, 1), value=0.5),
    }


def _check(a, b):
    if isinstance(b, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _check(x, y)
        return
    a = a.to_dense() if isinstance(a, sf.SparseFillTensor) else a
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape)
    T.assert_dense_equal(a, b, equal_nan=True)


@pytest.mark.parametrize("layout", T.ALL_LAYOUTS, ids=T.layout_id)
@pytest.mark.parametrize("case", CASES, ids=T.case_id)
def test_equal_dense(case, layout):
    if layout in T.EXTRA_LAYOUTS and case not in T.EXTRA_CASES:
        pytest.skip("the extra layouts run their own cases")
    A = T.random_tensor(case.pattern, case.fill, layout, seed=2)
    D = A.to_dense()
    for name, fn in _ops(A.dim(), case.fill).items():
        _check(fn(A), fn(D))
    if A.dense_dim():  # a dense-part fill varies: no flat form (refused, named)
        with pytest.raises(NotImplementedError, match="ravel"):
            torch.ravel(A)
    else:
        _check(torch.ravel(A), torch.ravel(D))


@pytest.mark.parametrize("layout", T.LAYOUTS, ids=T.layout_id)
def test_gradients(layout):
    idx, v, f, size = leaf_parts(21, 0.7, layout, "real")
    for name, fn in _ops(2, 0.7).items():
        def run(v, f):
            out = fn(build(layout, idx, v, f, size))
            out = out[0] if isinstance(out, tuple) else out
            return out.to_dense() if isinstance(out, sf.SparseFillTensor) else out
        torch.autograd.gradcheck(run, (v, f))


def test_diagonal_of_a_per_slice_fill_with_an_empty_dim():
    """A per-slice fill with a dim of size 0 (a fuzzer find)."""
    A = sf.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0), (2, 0),
                             fill_value=torch.zeros(1, 0))
    _check(torch.diagonal(A, 1), torch.diagonal(A.to_dense(), 1))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("fill", [0.0, 2.5, math.inf, math.nan])
def test_pad_modes_copy_elements_and_gradients(mode, fill):
    """F.pad's reflect / replicate / circular: an index_select per padded dim;
    values, NaN positions and gradients (values and fill) equal dense."""
    g = torch.Generator().manual_seed(3)
    keep = torch.rand(2, 3, 4, generator=g) < 0.4
    idx = keep.nonzero().t()
    v = torch.randn(idx.shape[1], generator=g, dtype=torch.float64, requires_grad=True)
    f = torch.tensor(fill, dtype=torch.float64, requires_grad=True)
    A = sf.sparse_coo_tensor(idx, v, (2, 3, 4), fill_value=f)
    pads = (2, 1, 1, 2)
    out = F.pad(A, pads, mode=mode)
    v2, f2 = v.detach().clone().requires_grad_(), f.detach().clone().requires_grad_()
    D = f2.expand(2, 3, 4).index_put(tuple(idx), v2)
    ref = F.pad(D, pads, mode=mode)
    T.assert_dense_equal(out.to_dense(), ref)
    if math.isfinite(fill):
        w = torch.randn(ref.shape, generator=g, dtype=torch.float64)
        (out.to_dense() * w).sum().backward()
        (ref * w).sum().backward()
        T.assert_dense_equal(v.grad, v2.grad)
        T.assert_dense_equal(f.grad, f2.grad)


def test_pad_modes_refuse_as_torch_does():
    A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 3), fill_value=1.)
    for args, kw in [(((3, 0),), {"mode": "reflect"}), (((1, 1),), {"mode": "reflect",
                                                                    "value": 2.}),
                     (((1, 1, 1, 1, 1, 1),), {"mode": "replicate"})]:
        with pytest.raises(Exception) as dense_error:
            F.pad(A.to_dense(), *args, **kw)
        with pytest.raises(type(dense_error.value)):
            F.pad(A, *args, **kw)
    B = sf.sparse_coo_tensor([[0], [1]], [True], (2, 3), fill_value=False)
    with pytest.raises(NotImplementedError, match="Bool"):
        F.pad(B, (1, 1), mode="reflect")
    with pytest.raises(NotImplementedError, match="mode"):
        F.pad(A, (1, 1), mode="bogus")
