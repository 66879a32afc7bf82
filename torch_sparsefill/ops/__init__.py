"""The Python half of torch.ops.sparsefill, one module per native op family
(aten_ext/ops/<family>): each family's fake kernels and the autograd of its
ops with a derivative of their own. Importing this package loads the
extension, which registers every schema and kernel, then these."""
from .. import _C  # noqa: F401  -- registers torch.ops.sparsefill.*
from . import bsr, products, reductions, structure  # noqa: F401  -- fakes and autograd
