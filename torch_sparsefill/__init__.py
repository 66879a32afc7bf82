"""torch_sparsefill: sparse COO, CSR, CSC, BSR and BSC tensors with a fill value.

The fill value is the value of every unspecified element (PyTorch assumes 0).
Element-wise ops, conversions and gradients treat it exactly:
``op(A).to_dense()`` equals ``op(A.to_dense())``.

Example::

    >>> import torch, torch_sparsefill as sf
    >>> A = sf.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3., 4., 5.], (2, 3), fill_value=5.)
    >>> torch.exp(A).fill_value()
    tensor(148.4132)
"""
import sys

import torch

from . import ops  # noqa: F401  -- the extension: every op, its fake kernels and autograd
from .compile import dynamo as _dynamo
from .compile.export import exportable
from .compile.vmap import vmap, vmappable
from .compile.whole_graph import compile  # noqa: A004 -- sf.compile, as torch.compile
from .creation import (collate, eliminate_fill, empty, fill_value, from_pydata, from_scipy,
                       full, ones, sparse_bsc_tensor, sparse_bsr_tensor,
                       sparse_compressed_tensor, sparse_coo_tensor, sparse_csc_tensor,
                       sparse_csr_tensor, to_sparse, zeros)
from .creation import data as _data
from .creation import interop as _interop
from .creation import serialization as _serialization
from .functions import components as _components
from .functions import masked as _masked
from .functions import routing as _routing
from .distributed import torch_api as _distributed_api
from .functions import testing as _testing
from .functions.attention import sampled_matmul, sparse_mask
from .functions.densify import auto_densify, is_auto_densify, set_auto_densify
from .graph import (apply, assign, ewise_add, ewise_mult, ewise_union, extract,
                    from_graphblas, indefinite, kron, mxm, reduce, select, to_graphblas)
from .ops import memory
from .ops.library import get_include, get_library
from .pyg import gat_conv, gcn_conv
from .tensor import SparseFillTensor

# The wiring, top-down: SparseFillTensor (tensor/) imports nothing above the
# component rules, so the package gives it its routing and the methods whose
# homes lie above it.
SparseFillTensor.__torch_function__ = classmethod(_routing.torch_function)
# torch.distributed's own collectives on a SparseFillTensor (distributed/torch_api.py)
_routing.extend("distributed", _distributed_api.ROUTES)
SparseFillTensor._route_dispatch = staticmethod(_routing.torch_dispatch)
SparseFillTensor.__reduce_ex__ = _serialization.reduce_ex
SparseFillTensor.__deepcopy__ = _serialization.deepcopy
SparseFillTensor.to_scipy = _interop.to_scipy
SparseFillTensor.to_pydata = _interop.to_pydata
SparseFillTensor.to_graphblas = to_graphblas
# A neighbour library (torch_geometric, ...) taking apart a tensor whose fill
# is not 0 is refused by name (functions/components.py).
for _name in _components.ACCESSORS:
    setattr(SparseFillTensor, _name, _components.guarded(_name, getattr(SparseFillTensor, _name)))

# torch.load(weights_only=True), the default, may rebuild our tensors: the
# rebuild function validates its input like the public constructors. Files
# saved by earlier versions name it under older modules: those names resolve
# to the same function, with and without weights_only.
sys.modules.update(_serialization.legacy_modules())
torch.serialization.add_safe_globals(
    [_serialization._rebuild_sparsefill, type(indefinite)]
    + [(_serialization._rebuild_sparsefill, name) for name in _serialization.LEGACY_NAMES])

# torch.masked's functions have no __torch_function__ hook: replaced by ones
# that compute SparseFillTensors with the fill (functions/masked.py).
_masked.install()
# torch.testing.assert_close compares a SparseFillTensor by its dense meaning.
_testing.install()

# torch.utils.data's default_collate looks samples' types up in this map.
torch.utils.data._utils.collate.default_collate_fn_map[SparseFillTensor] = _data.collate_fn

# torch.compile runs the package eagerly, between graphs of the user's dense
# work (compile/dynamo.py says why): every function of every module loaded by now.
_dynamo.hide_from_dynamo([m for name, m in sys.modules.items()
                          if name == __name__ or name.startswith(__name__ + ".")], __name__)

__all__ = ["SparseFillTensor", "collate", "compile", "exportable", "get_include", "get_library",
           "sparse_coo_tensor", "sparse_csr_tensor", "sparse_csc_tensor", "sparse_bsr_tensor",
           "sparse_bsc_tensor", "sparse_compressed_tensor", "to_sparse", "full", "zeros", "ones",
           "empty", "fill_value", "from_scipy", "from_pydata", "eliminate_fill",
           "sampled_matmul", "sparse_mask", "gcn_conv", "gat_conv", "vmap", "vmappable",
           "indefinite", "mxm", "ewise_add", "ewise_mult", "ewise_union", "apply", "select",
           "reduce", "extract", "assign", "kron", "from_graphblas", "to_graphblas",
           "auto_densify", "set_auto_densify", "is_auto_densify", "memory"]
__version__ = "0.1.0"
