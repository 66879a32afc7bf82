"""The native ops of torch.ops.sparsefill as the contract tests see them
(test/ops/): every op autograd differentiates, enumerated from the
dispatcher so that a new op joins by itself; the element-wise variants each
YAML entry generates; and a program of the public API that calls each of
the other ops.

    >>> REGISTRY["spmm"]            # the dispatch key differentiating it
    'Autograd'
    >>> variant_of("mul_scalar")    # the YAML op of an element-wise variant
    ('mul', '_scalar')
    >>> fn, inputs, marks = PROGRAMS["spmm"]; fn(*[T.leaf(t) for t in inputs])
"""
import math

import torch

import torch_sparsefill as sf

from .elementwise import OPS

F64 = torch.float64


def registry():
    """Every sparsefill op autograd differentiates: {name: dispatch key},
    e.g. registry()["spmm"] == "Autograd"."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    out = {}
    for qualified in torch._C._dispatch_get_all_op_names():
        if not qualified.startswith("sparsefill::"):
            continue
        for key in ("Autograd", "CompositeImplicitAutograd"):
            if has(qualified, key):
                out[qualified.split("::")[1]] = key
                break
    return out


REGISTRY = registry()


# ---- element-wise: every variant of every YAML entry ----------------------------

def variant_of(name):
    """(YAML op, variant suffix) of a native element-wise op, (None, None)
    for another op: variant_of("add_dense") == ("add", "_dense")."""
    for suffix in ("_same", "_scalar", "_dense"):
        if name.endswith(suffix) and name[: -len(suffix)] in OPS:
            return name[: -len(suffix)], suffix
    return (name, "") if name in OPS else (None, None)


# Real-valued ops: the complex, integer and boolean ones are checked by
# test_elementwise_table.py (complex gradcheck; no gradient out of the
# others).
ELEMENTWISE = sorted(n for n in REGISTRY if variant_of(n)[0] is not None
                     and OPS[variant_of(n)[0]].dtypes in ("float", "mask"))
NOT_REAL = sorted(n for n in REGISTRY
                  if variant_of(n)[0] is not None and n not in ELEMENTWISE)


# ---- the other ops: programs of the public API that call them ----------------------

_g = torch.Generator().manual_seed(0)
_CROW, _COL = torch.tensor([0, 2, 2, 4]), torch.tensor([0, 3, 1, 2])
_V = torch.rand(4, generator=_g, dtype=F64) + 0.5
_FILL = torch.tensor(0.7, dtype=F64)
_X = torch.rand(4, 2, generator=_g, dtype=F64)
_Y = torch.rand(2, 3, generator=_g, dtype=F64)


def _csr(v, f):
    return sf.sparse_csr_tensor(_CROW, _COL, v, (3, 4), fill_value=f)


def _coo(v, f):
    return _csr(v, f).to_sparse_coo()


# name -> (function of float64 leaves, its inputs, pytest marks or None)
PROGRAMS = {
    "spmm": (lambda v, f, x: _csr(v, f) @ x, (_V, _FILL, _X), None),
    "dense_spmm": (lambda v, f, y: y @ _csr(v, f), (_V, _FILL, _Y), None),
    # BSR @ dense: 2 x 4 in 1 x 2 blocks, one per block row.
    "bsr_spmm": (lambda v, f, x: sf.sparse_bsr_tensor([0, 1, 2], [1, 0], v.view(2, 1, 2), (2, 4),
                                                      fill_value=f) @ x, (_V, _FILL, _X), None),
    "sparse_mm_sparse": (lambda v, f, w: (_csr(v, f) @ _csr(w, f * 2).t().to_sparse_csr())
                         .to_dense(), (_V, _FILL, _V.flip(0)), None),
    "spgemm": (lambda v, w: (_csr(v, 0.0) @ _csr(w, 0.0).t().to_sparse_csr()).to_dense(),
               (_V, _V.flip(0)), None),
    # X Y^T sampled on a pattern (sampled products, attention scores).
    "sddmm": (lambda x, y: sf.sampled_matmul(x, y, _csr(_V, 0.0), fill_value=0.5).to_dense(),
              (_X[:3].clone(), _Y[:, :1].expand(2, 4).clone() + _X[:2, :1]), None),
    # The fused attention op (SDPA with a -inf mask on the CPU); row 1 is empty.
    "sparse_attention": (lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=sf.sparse_csr_tensor(_CROW, _COL, _V - 1, (3, 4),
                                                fill_value=-math.inf)),
        (_X[:3].clone(), _X.flip(0).clone(), _X * 2), None),
    # No element of x equals the fill: at one that does, a perturbation
    # changes the pattern and the fill's one gradient is shared by the
    # unspecified elements (RFC.md#a-grad), which gradcheck cannot see.
    "from_dense": (lambda x: sf.to_sparse(x, fill_value=0.5).to_dense() ** 2,
                   (torch.tensor([[0.75, 1.25], [2.0, -1.0]], dtype=F64),), None),
    "sum-dim0": (lambda v, f: _coo(v, f).sum(0).to_dense(), (_V, _FILL), None),
    "sum-all": (lambda v, f: _coo(v, f).sum(), (_V, _FILL), None),
    "mean-dim1": (lambda v, f: _coo(v, f).mean(1).to_dense(), (_V, _FILL), None),
    "prod-dim1": (lambda v, f: _coo(v, f).prod(1).to_dense(), (_V, _FILL), None),
    "var-dim0": (lambda v, f: _coo(v, f).var(0).to_dense(), (_V, _FILL), None),
    "amax-dim0": (lambda v, f: _coo(v, f).amax(0).to_dense(), (_V, _FILL), None),
    "max-all": (lambda v, f: _coo(v, f).max(), (_V, _FILL), None),
    "logsumexp": (lambda v, f: torch.logsumexp(_coo(v, f), 1).to_dense(), (_V, _FILL), None),
    "softmax": (lambda v, f: torch.softmax(_csr(v, f), -1).to_dense(), (_V, _FILL), None),
    "log_softmax-dim0": (lambda v, f: torch.log_softmax(_coo(v, f), 0).to_dense(),
                         (_V, _FILL), None),
    "coalesce": (lambda v, f: sf.sparse_coo_tensor([[0, 0, 1, 2], [1, 1, 0, 3]], v, (3, 4),
                                                   fill_value=f).coalesce().to_dense(),
                 (_V, _FILL), None),
    "eliminate_fill": (lambda v, f: _coo(v, f).eliminate_fill().to_dense(), (_V, _FILL), None),
    "union-mul": (lambda v, f, w: (_coo(v, f) * sf.sparse_coo_tensor(
        [[0, 2], [1, 2]], w[:2], (3, 4), fill_value=f)).to_dense(), (_V, _FILL, _V.flip(0)), None),
    "to_dense": (lambda v, f: _coo(v, f).to_dense() ** 2, (_V, _FILL), None),
    "gather_with_fill": (lambda v, f: torch.ops.sparsefill.gather_with_fill(
        v, f, torch.tensor([2, -1, 0, -1, 3])) ** 2, (_V, _FILL), None),
}

# Composite ops decompose before a dispatch mode sees them: the program that
# calls each.
COMPOSITE_CALLERS = {"dense_spmm": "dense_spmm", "coo_coalesce": "coalesce",
                     "eliminate_fill": "eliminate_fill", "sparse_mm_dense": "sparse_mm_sparse",
                     "to_dense": "to_dense", "gather_with_fill": "gather_with_fill"}
