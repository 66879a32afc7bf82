"""Regression tests for dtypes ("never silently wrong"), found by the op-chain
fuzzer (tools/fuzz_ops.py) once the order-statistics, decomposition and
never-crash branches met: each is named after the defect and checks the
case against dense torch.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import sf_testing as T
import torch_sparsefill as sf

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
