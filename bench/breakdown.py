"""Where a call's time goes (docs/design.md#hot-path): each piece of the hot path of
`torch.exp(A)`, `A * 2` and `A.sum()` on 3 stored elements, and of
`index_select` of 400 columns of a 4000^2 COO matrix (1%), timed alone with
thread CPU time (other processes on a shared machine do not count), the
pieces of one call interleaved and each the best of its rounds. Thread CPU
time counts the calling thread only: run the index_select part with
OMP_NUM_THREADS=1 to see all of its work.

Usage: OMP_NUM_THREADS=2 python bench/breakdown.py
"""
from __future__ import annotations

import time
import timeit

import torch

import torch_sparsefill as sf
from torch_sparsefill import _C
from torch_sparsefill import tensor as _tensor
from torch_sparsefill.functions import routing as _routing
from torch_sparsefill.functions.shape import indexing as _indexing, parts as _parts


def best(fns: dict, number=5000, rounds=15) -> dict:
    """{name: best microseconds per call} of zero-argument callables."""
    out = {name: float("inf") for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t = timeit.timeit(fn, number=number, timer=time.thread_time) / number * 1e6
            out[name] = min(out[name], t)
    return out


class _Returns(torch.Tensor):
    """A subclass whose __torch_function__ returns at once: torch's entry alone."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return None


def main() -> None:
    torch.manual_seed(0)
    values = torch.randn(3)
    A = sf.sparse_coo_tensor(torch.tensor([[0, 1, 2]]), values, (3,), fill_value=5.0).coalesce()
    v, f = A._sf_values, A._sf_fill
    hot_exp = _C.hot("exp")[0]
    hot_mul = _C.hot("mul")[2]
    null = values.as_subclass(_Returns)
    native = torch.sparse_coo_tensor(torch.tensor([[0, 1, 2]]), values, (3,),
                                     check_invariants=False).coalesce()
    whole_exp = _C.hot_on("exp")[0]
    make = torch.Tensor._make_wrapper_subclass
    pieces = {
        "torch.exp(A)": lambda: torch.exp(A),
        "  torch's __torch_function__ entry": lambda: torch.exp(null),
        "  routing.torch_function (all below)": lambda: _routing.torch_function(
            type(A), torch.exp, (type(A),), (A,), None),
        "  fast handler in C (all below)": lambda: _routing.FAST[torch.exp]((A,)),
        "    its whole call, hot_on('exp')(A)": lambda: whole_exp(A),
        "    hot function: 2 ATen exp below autograd": lambda: hot_exp(v, f),
        "    _make_wrapper_subclass (the result)": lambda: make(
            type(A), A._sf_size, dtype=v.dtype, device=v.device, layout=A._sf_layout,
            dispatch_layout=True),
        "  Python fallback: is_plain(A)": lambda: _tensor.is_plain(A),
        "  Python fallback: the op through torch.ops":
            lambda: torch.ops.sparsefill.exp.default._op(v, f),
        "  Python fallback: on_pattern (the result)": lambda: _tensor.on_pattern(A, v, f),
        "anchor torch.exp(values)": lambda: torch.exp(v),
        "A * 2": lambda: A * 2,
        "  hot function: 2 ATen mul by a number": lambda: hot_mul(v, f, 2, False),
        "anchor torch COO * 2": lambda: native * 2,
        "A.sum()": lambda: A.sum(),
        "  hot_sum": lambda: _C.hot_sum(v, f, A._sf_size),
        "anchor torch.sparse.sum": lambda: torch.sparse.sum(native),
    }
    for name, us in best(pieces).items():
        print(f"{name:50s} {us:7.3f} us")
    for name, us in best(index_select_pieces(), number=50, rounds=7).items():
        print(f"{name:50s} {us:7.1f} us")


def index_select_pieces() -> dict:
    """The column branch of _indexing._index_select on bench.py's data."""
    from bench import random_coo  # bench/ is this script's folder
    m = 4000
    A, native = random_coo((m, m), 0.01, 5.0)
    index = torch.randint(0, m, (m // 10,), generator=torch.Generator().manual_seed(4))
    p = _parts.parts(A)
    plan = torch.ops.sparsefill.index_select_plan
    indices, src = plan(p.indices, index, 1, [m, m])
    values = p.values.index_select(0, src)
    result = _parts.Parts(indices, values, p.F, (m, len(index)), p.layout)
    return {
        "A.index_select(1, 400 columns)": lambda: A.index_select(1, index),
        "  _index_arg (checks)": lambda: _indexing._index_arg(index, m, "", device=A.device),
        "  parts(A)": lambda: _parts.parts(A),
        "  index_select_plan (the C pass)": lambda: plan(p.indices, index, 1, [m, m]),
        "  values.index_select(0, src)": lambda: p.values.index_select(0, src),
        "  finish (the result)": lambda: _parts.finish(result, A),
        "anchor torch COO index_select": lambda: native.index_select(1, index),
    }


if __name__ == "__main__":
    main()
