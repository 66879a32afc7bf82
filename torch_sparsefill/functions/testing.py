"""``torch.testing.assert_close`` on SparseFillTensors: their dense meaning.

torch compares two sparse tensors by their components (nse, indices,
values), which ignores the fill and calls two equal tensors stored in
different patterns different. A pair holding a SparseFillTensor is compared
as the dense tensors it represents instead, with torch's own rules and
message (which element differs, by how much). The package installs the
comparison once (``install``), wrapping the value comparison of torch's
tensor pair; any other pair is compared as before.

Example::

    >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=2.)
    >>> torch.testing.assert_close(A, sf.sparse_coo_tensor([[1]], [2.], (3,), fill_value=2.))
    Traceback (most recent call last):
    AssertionError: ... Mismatched elements: 1 / 3 ...
"""
from __future__ import annotations

from torch.testing import _comparison

from ..tensor import SparseFillTensor

__all__ = ["install"]


def install() -> bool:
    """Make torch.testing compare SparseFillTensors by their dense meaning;
    False where torch's comparison has no such step to wrap (then it
    compares components, as for torch's sparse tensors).

    Example: ``install()`` is called by ``import torch_sparsefill``.
    """
    pair = getattr(_comparison, "TensorLikePair", None)
    original = getattr(pair, "_compare_values", None)
    if original is None or getattr(original, "_sf_dense", False):
        return original is not None

    def compare_values(self, actual, expected):
        if isinstance(actual, SparseFillTensor) or isinstance(expected, SparseFillTensor):
            actual, expected = (t.to_dense() if isinstance(t, SparseFillTensor) else t
                                for t in (actual, expected))
        return original(self, actual, expected)

    compare_values._sf_dense = True
    compare_values.__doc__ = original.__doc__
    pair._compare_values = compare_values
    return True
