"""Pickling, torch.save / torch.load and copy.deepcopy of SparseFillTensors:
the components are saved, and loading validates them like the public
constructors. Files written before the package was split into subpackages
name the rebuild function under its old modules: those names stay loadable
(LEGACY_NAMES)."""
from __future__ import annotations

import copy
import types

import torch

from ..tensor import SparseFillTensor
from ..tensor import indefinite as _indefinite
from .constructors import sparse_compressed_tensor, sparse_coo_tensor


def _rebuild_sparsefill(layout_name, size, indices, crow, col, values, fill, coalesced,
                        requires_grad, is_param=False):
    """Unpickling entry point (torch.save/torch.load, copy, multiprocessing).

    Validates like the public constructors, so a tampered file cannot build
    an inconsistent tensor. `is_param`: it was an ``nn.Parameter`` (files
    written before it was recorded omit it).
    """
    if layout_name == "sparse_coo":
        out = sparse_coo_tensor(indices, values, size, fill_value=fill,
                                requires_grad=requires_grad, is_coalesced=coalesced or None)
    else:
        layout = {"sparse_csr": torch.sparse_csr, "sparse_csc": torch.sparse_csc,
                  "sparse_bsr": torch.sparse_bsr, "sparse_bsc": torch.sparse_bsc}.get(layout_name)
        if layout is None:
            raise ValueError(f"unknown SparseFillTensor layout {layout_name!r}")
        out = sparse_compressed_tensor(crow, col, values, size, layout=layout, fill_value=fill,
                                       requires_grad=requires_grad)
    if is_param:
        out._is_param = True  # what nn.Parameter(A) marks on a tensor subclass
    return out


def _rebuild_args(A: SparseFillTensor, detach) -> tuple:
    comps = [None if t is None else detach(t) for t in
             (A._sf_indices, A._sf_crow, A._sf_col, A._sf_values, A._sf_fill)]
    if A.is_indefinite():  # the state travels as the fill (the constructors take it)
        comps[4] = _indefinite.indefinite
    return (str(A.layout).split(".")[-1], A._sf_size, *comps, A._sf_coalesced_flag,
            A.requires_grad, bool(getattr(A, "_is_param", False)))


def reduce_ex(self: SparseFillTensor, protocol):
    """``SparseFillTensor.__reduce_ex__``: pickle the components; unpickling
    validates them again (``_rebuild_sparsefill``)."""
    return _rebuild_sparsefill, _rebuild_args(self, torch.Tensor.detach)


def deepcopy(self: SparseFillTensor, memo):
    """``SparseFillTensor.__deepcopy__``: copies of the components, validated
    like a new tensor."""
    if id(self) in memo:
        return memo[id(self)]
    out = _rebuild_sparsefill(*_rebuild_args(self, lambda t: copy.deepcopy(t.detach(), memo)))
    memo[id(self)] = out
    return out


# The dotted names under which files saved by earlier versions find the
# rebuild function (the modules it lived in before the package had
# subpackages): torch.load(weights_only=True) looks them up here (the
# package registers them as safe globals), and plain unpickling imports them
# (the package aliases the old modules in sys.modules).
LEGACY_NAMES = ("torch_sparsefill._factories._rebuild_sparsefill",
                "torch_sparsefill._tensor._rebuild_sparsefill")


def legacy_modules() -> dict:
    """{old module name: a module holding only the rebuild function}: what
    plain unpickling imports for a file that names an old module."""
    out = {}
    for dotted in LEGACY_NAMES:
        module_name, _, attr = dotted.rpartition(".")
        module = types.ModuleType(module_name, "an old home of the rebuild function, for loading")
        setattr(module, attr, _rebuild_sparsefill)
        out[module_name] = module
    return out
