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
import threading

from torch.utils import _pytree as pytree

from ..tensor import SparseFillTensor

__all__ = ["exportable", "scoped_node", "registered"]

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
    with scoped_node("sf.exportable()", _flatten, _unflatten, _flatten_with_keys, _TYPE_NAME):
        yield


# One registration at a time, shared by the threads inside its context: a
# count under a lock, so that threads enter and leave in any order and the
# last one out deregisters (also on an exception).
_lock = threading.Lock()
_owner = None  # (what, flatten) of the registration in force
_users = 0


@contextlib.contextmanager
def scoped_node(what, flatten, unflatten, flatten_with_keys, type_name):
    """SparseFillTensor as a node of torch's Python pytree with these
    functions while any thread is inside this context (`what` names the
    public context, for the refusal when another one's node is in force).

    Example: ``with scoped_node("sf.exportable()", ...): pytree.tree_flatten(A)``
    gives the components.
    """
    global _owner, _users
    with _lock:
        if _users == 0:
            if SparseFillTensor in pytree.SUPPORTED_NODES:
                raise RuntimeError("torch_sparsefill internal: a pytree node of SparseFillTensor "
                                   "not registered by the package")
            # torch's Python pytree only (export's and vmap's), so that
            # deregistering undoes it all (the public register_pytree_node
            # also registers with the C++ one).
            pytree._private_register_pytree_node(SparseFillTensor, flatten, unflatten,
                                                 serialized_type_name=type_name,
                                                 flatten_with_keys_fn=flatten_with_keys)
            _owner = (what, flatten)
        elif _owner[1] is not flatten:
            raise RuntimeError(f"torch_sparsefill: {what} while {_owner[0]} is active (in this "
                               f"or another thread) is not supported: each gives SparseFillTensor "
                               f"its own pytree node")
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                pytree._deregister_pytree_node(SparseFillTensor)
                _owner = None


def registered(flatten) -> bool:
    """Whether SparseFillTensor is a pytree node now, flattened by `flatten`."""
    node = pytree.SUPPORTED_NODES.get(SparseFillTensor)
    return node is not None and node.flatten_fn is flatten
