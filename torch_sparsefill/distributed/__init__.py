"""torch.distributed for SparseFillTensors (RFC.md#distributed): the
collectives (collectives.py), data-parallel training of modules holding them
(modules.py: DistributedDataParallel, fully_shard, broadcast_module +
all_reduce_gradients) and row-sharded matrices (sharded.py).

Each function is the torch.distributed collective of the same name applied
to the dense tensors, computed on the components: the ranks first exchange
a small description of their tensors (layout, shape, dtype, fill shape,
nse), which every rank checks, so mismatched shapes, dtypes or layouts raise
the same error on every rank instead of hanging; then the pattern, values
and fill travel as padded tensors of the largest nse. Nothing is densified.

The backend is whatever the process group uses: tested with gloo on the
CPU; with NCCL the components must be on the rank's GPU (untested: no GPU
was available).

torch.distributed's own collectives also take SparseFillTensors and write
in place (torch_api.py); these return their results. An all_reduce or broadcast whose result
stores the input's pattern (every rank with the same pattern, as for the
gradients of a parameter) also writes it into the input in place, as the
dense collective does.

Example (on every rank)::

    >>> A = sf.sparse_coo_tensor([[rank]], [1.], (4,), fill_value=0.5)
    >>> sfd.all_reduce(A).to_dense()  # two ranks
    tensor([2., 2., 1., 1.])
"""
import sys

from ..compile import dynamo as _dynamo
from .collectives import all_gather, all_reduce, broadcast, recv, reduce_scatter, send
from .modules import DistributedDataParallel, all_reduce_gradients, broadcast_module, fully_shard
from .sharded import matmul_row_sharded, reduce_rows_sharded, row_range, shard_rows

__all__ = ["broadcast", "all_gather", "all_reduce", "reduce_scatter", "send", "recv",
           "broadcast_module", "all_reduce_gradients", "DistributedDataParallel", "fully_shard",
           "row_range", "shard_rows", "matmul_row_sharded", "reduce_rows_sharded"]

# Loaded on demand, after the package hid its modules from Dynamo: hide these
# too, so a compiled training step runs them eagerly like the rest
# (compile/dynamo.py).
_dynamo.hide_from_dynamo([m for name, m in sys.modules.items() if name.startswith(__name__)],
                         __name__)
