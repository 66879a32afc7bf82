"""The stored components (``values()``, ``indices()``, ``crow_indices()``,
...) read by a neighbour library (RFC.md#neighbour-libraries).

Libraries such as torch_geometric take a sparse tensor apart and rebuild
their own from its components: that computes as if the fill were 0. With a
fill of exactly 0 the components are the whole tensor, as torch's; with any
other fill such a read is refused (naming the package's adapters), since
every result built from it would silently lack the fill. Reads from
anywhere else (the user's code, the package) are answered as always.
"""
from __future__ import annotations

import functools
import sys

import torch

__all__: list = []

# Libraries known to rebuild tensors from the components.
LIBRARIES = ("torch_geometric", "torch_sparse", "torch_scatter")
_PASSING = ("torch_sparsefill", "torch.")  # frames between the caller and the method
_DEPTH = 12


def reading_library(depth: int = 2) -> str | None:
    """The neighbour library whose code called (through torch's and the
    package's frames), or None.

    Example::

        >>> reading_library() is None   # called from here, not from a library
        True
    """
    frame = sys._getframe(depth)
    for _ in range(_DEPTH):
        if frame is None:
            return None
        module = frame.f_globals.get("__name__", "")
        if not module.startswith(_PASSING) and module != "torch":
            return next((lib for lib in LIBRARIES
                         if module == lib or module.startswith(lib + ".")), None)
        frame = frame.f_back
    return None


def guarded(name: str, method):
    """`method` (a component accessor) refusing a library's read of a tensor
    whose fill is not 0.

    Example::

        >>> values = guarded("values", lambda self: self._sf_values)
    """
    @functools.wraps(method)
    def read(self, *args, **kwargs):
        library = reading_library()
        if library is not None and not _fill_is_zero(self):
            raise NotImplementedError(library_refusal(
                library, f"read A.{name}() of a SparseFillTensor whose fill is not 0"))
        return method(self, *args, **kwargs)
    return read


def library_refusal(library: str, what: str) -> str:
    """The message refusing `library`'s `what`, naming the adapters.

    Example::

        >>> library_refusal("torch_geometric", "called x")[:34]
        'torch_sparsefill: torch_geometric '
    """
    return (f"torch_sparsefill: {library} {what}: it would rebuild the tensor from its stored "
            f"values and compute as if the fill were 0. For GCNConv(normalize=True) call "
            f"sf.gcn_conv(conv, x, A), for GATConv sf.gat_conv(conv, x, A); otherwise pass "
            f"A.to_dense() (or a tensor with fill 0)")


def _fill_is_zero(A) -> bool:
    f = A._sf_fill
    return not torch.compiler.is_compiling() and bool((f == 0).all())


# The accessors a library takes a tensor apart with.
ACCESSORS = ("values", "_values", "indices", "_indices", "crow_indices", "col_indices",
             "ccol_indices", "row_indices")
