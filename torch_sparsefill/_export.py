"""torch.export of modules that take SparseFillTensors: inside `exportable()`,
torch's pytree sees a SparseFillTensor as a node whose children are its
components (`_flatten_components`), so non-strict export takes the components
as the program's inputs and traces our routing on them: the exported graph
holds the torch.ops.sparsefill calls, and the exported module rebuilds the
tensor's structure (layout, size, coalesced facts) from the input spec.

Scoped, never global: every pytree user (torch.func.vmap, checkpointing,
distributed) would otherwise take a SparseFillTensor apart into components
and map over them, which has no fill semantics.
"""
from __future__ import annotations

import contextlib

from torch.utils import _pytree as pytree

from ._tensor import SparseFillTensor

__all__ = ["exportable"]

_TYPE_NAME = "torch_sparsefill.SparseFillTensor"


def _flatten(A):
    names, context = A._flatten_components()
    return [getattr(A, n) for n in names], (tuple(names), context)


def _flatten_with_keys(A):
    children, spec = _flatten(A)
    return [(pytree.GetAttrKey(n), t) for n, t in zip(spec[0], children)], spec


def _unflatten(children, spec):
    names, context = spec
    return SparseFillTensor._unflatten_components(dict(zip(names, children)), context, None, None)


@contextlib.contextmanager
def exportable():
    """Within this context, `torch.export.export(..., strict=False)` accepts
    modules taking SparseFillTensors, and the exported module runs on them
    (call it inside the context too). The layout, size and coalesced facts
    are part of the program's input spec: another tensor must match them
    (nse may vary where `dynamic_shapes` says so: give the components'
    shapes, e.g. ``[None, {0: nse}, {0: nse}, None]`` for a CSR tensor's
    crow, col, values, fill).

    Example::

        >>> class Scale(torch.nn.Module):
        ...     def forward(self, A):
        ...         return (A * 2).to_dense()
        >>> A = sf.sparse_coo_tensor([[0, 1]], [3., 4.], (3,), fill_value=1.)
        >>> with sf.exportable():
        ...     ep = torch.export.export(Scale(), (A,), strict=False)
        ...     ep.module()(A)
        tensor([6., 8., 2.])
    """
    node = pytree.SUPPORTED_NODES.get(SparseFillTensor)
    if node is not None:
        if node.flatten_fn is not _flatten:
            raise RuntimeError("torch_sparsefill: sf.exportable() inside sf.vmappable() (or "
                               "sf.vmap) is not supported: each gives SparseFillTensor its own "
                               "pytree node")
        yield  # nested: the outer context owns it
        return
    # torch's Python pytree only (export's), so that deregistering undoes it
    # all (the public register_pytree_node also registers with the C++ one).
    pytree._private_register_pytree_node(SparseFillTensor, _flatten, _unflatten,
                                         serialized_type_name=_TYPE_NAME,
                                         flatten_with_keys_fn=_flatten_with_keys)
    try:
        yield
    finally:
        pytree._deregister_pytree_node(SparseFillTensor)
