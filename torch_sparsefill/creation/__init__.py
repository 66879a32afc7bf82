"""Making SparseFillTensors: the constructors from components
(constructors.py, their argument checks in checks.py), from a value or a
dense tensor (full.py), from other libraries (interop.py), from files
(serialization.py) and from samples (data.py: collate)."""
from .constructors import (sparse_bsc_tensor, sparse_bsr_tensor, sparse_compressed_tensor,
                           sparse_coo_tensor, sparse_csc_tensor, sparse_csr_tensor)
from .data import collate
from .full import eliminate_fill, empty, fill_value, full, ones, to_sparse, zeros
from .interop import from_pydata, from_scipy

__all__ = ["sparse_coo_tensor", "sparse_csr_tensor", "sparse_csc_tensor", "sparse_bsr_tensor",
           "sparse_bsc_tensor", "sparse_compressed_tensor", "to_sparse", "full", "zeros", "ones",
           "empty", "fill_value", "eliminate_fill", "from_scipy", "from_pydata", "collate"]
