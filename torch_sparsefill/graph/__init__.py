"""The graph domain (RFC.md#indefinite-fill): tensors whose unspecified
elements are absent (``fill_value=sf.indefinite``, a graph's non-edges),
and GraphBLAS's operations on them: semiring products with masks
(products.py), the element-wise modes, apply and select (ewise.py),
reductions (monoids.py), extract, assign and kron (structure.py)."""
from ..tensor.indefinite import indefinite
from .interop import from_graphblas, to_graphblas
from .ewise import apply, ewise_add, ewise_mult, ewise_union, select
from .products import mxm
from .monoids import reduce
from .structure import assign, extract, kron

__all__ = ["indefinite", "mxm", "ewise_add", "ewise_mult", "ewise_union", "apply", "select",
           "reduce", "extract", "assign", "kron", "from_graphblas", "to_graphblas"]
