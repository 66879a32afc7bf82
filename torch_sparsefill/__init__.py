"""torch_sparsefill: sparse COO and CSR tensors with a fill value.

The fill value is the value of every unspecified element (PyTorch assumes 0).
Element-wise ops, conversions and gradients treat it exactly:
``op(A).to_dense()`` equals ``op(A.to_dense())``.

Example::

    >>> import torch, torch_sparsefill as sf
    >>> A = sf.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3., 4., 5.], (2, 3), fill_value=5.)
    >>> torch.exp(A).fill_value()
    tensor(148.4132)
"""
import torch

from . import _C  # noqa: F401  -- registers torch.ops.sparsefill.*
from ._tensor import SparseFillTensor, _rebuild_sparsefill
from ._factories import (eliminate_fill, fill_value, full, ones, sparse_coo_tensor,
                         sparse_csr_tensor, to_sparse, zeros)
from ._interop import from_pydata, from_scipy
from . import _fake, _routing  # noqa: F401  -- fake kernels; routing tables
from . import _shape  # noqa: F401  -- shape and indexing routes
from . import _products  # noqa: F401  -- matrix products: routes and fake kernels
from . import _reductions  # noqa: F401  -- softmax and reductions (routes)

# torch.load(weights_only=True), the default, may rebuild our tensors: the
# rebuild function validates its input like the public constructors.
torch.serialization.add_safe_globals([_rebuild_sparsefill])

__all__ = ["SparseFillTensor", "sparse_coo_tensor", "sparse_csr_tensor", "to_sparse", "full",
           "zeros", "ones", "fill_value", "from_scipy", "from_pydata", "eliminate_fill"]
__version__ = "0.1.0"
