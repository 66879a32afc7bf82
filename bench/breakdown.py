"""Where a small call's time goes (RFC.md 9.1): each piece of the hot path of
`torch.exp(A)`, `A * 2` and `A.sum()` on 3 stored elements, timed alone with
thread CPU time (other processes on a shared machine do not count), the
pieces of one call interleaved and each the best of its rounds.

Usage: OMP_NUM_THREADS=2 python bench/breakdown.py
"""
from __future__ import annotations

import time
import timeit

import torch

import torch_sparsefill as sf
from torch_sparsefill import _C, _routing, _tensor


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
    pieces = {
        "torch.exp(A)": lambda: torch.exp(A),
        "  torch's __torch_function__ entry": lambda: torch.exp(null),
        "  fast handler (all below)": lambda: _routing.FAST[torch.exp]((A,)),
        "    is_plain(A)": lambda: _tensor.is_plain(A),
        "    hot function: 2 ATen exp below autograd": lambda: hot_exp(v, f),
        "    the op through torch.ops (not taken)": lambda: torch.ops.sparsefill.exp.default._op(v, f),
        "    on_pattern (the result)": lambda: _tensor.on_pattern(A, v, f),
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


if __name__ == "__main__":
    main()
