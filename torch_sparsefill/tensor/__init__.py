"""The SparseFillTensor class and what lies below it: the fill rules
(fill.py), the compressed and batched component layouts (compressed.py,
batched.py), the argument checks (args.py), and build(), the one way to make
a tensor from its components."""
from .plain import edited, is_plain, on_pattern
from .sparse_fill_tensor import FACTS, SparseFillTensor, build, coo_indices_of_csr

__all__ = ["FACTS", "SparseFillTensor", "build", "coo_indices_of_csr", "is_plain", "on_pattern", "edited"]
