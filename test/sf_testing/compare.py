"""Comparisons against the dense reference: dtype, layout, values and NaN
positions.

    >>> assert_dense_equal(torch.exp(A).to_dense(), torch.exp(A.to_dense()))
    >>> assert_matches_dense(torch.exp(A), torch.exp(A.to_dense()))   # A SparseFillTensor result
    >>> assert_all_close((ga, gf), (dense_ga, dense_gf))                # tuples of gradients
"""
from __future__ import annotations

import torch

import torch_sparsefill as sf

from .reference import dense


def assert_dense_equal(actual: torch.Tensor, expected: torch.Tensor, *, equal_nan=True, **kw):
    """`actual` is a strided tensor (not a SparseFillTensor) of expected's
    dtype whose values match, NaN where expected has NaN unless
    `equal_nan=False` (then a NaN anywhere fails); `**kw` goes to
    torch.testing.assert_close (rtol, atol, ...).

        >>> assert_dense_equal(torch.ones(2), torch.ones(2))
    """
    assert not isinstance(actual, sf.SparseFillTensor)
    assert actual.layout == torch.strided
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    torch.testing.assert_close(actual, expected, equal_nan=equal_nan, **kw)


def assert_matches_dense(out, expected: torch.Tensor, **kw):
    """A result of either kind (SparseFillTensor or strided) matches the dense
    computation: assert_dense_equal(dense(out), expected, **kw).

        >>> assert_matches_dense(torch.exp(A), torch.exp(A.to_dense()))
    """
    assert_dense_equal(dense(out), expected, **kw)


def assert_all_close(got, want, **kw):
    """Pairwise torch.testing.assert_close (NaN equal to NaN) over two
    sequences of tensors of equal length, e.g. gradients.

        >>> assert_all_close(torch.func.grad(f, (0, 1))(v, w), (dv, dw))
    """
    got, want = tuple(got), tuple(want)
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True, **kw)
