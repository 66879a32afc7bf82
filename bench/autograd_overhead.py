"""Per-op eager overhead of the autograd mechanism: tiny operands,
with and without requires_grad, each against torch COO's own op measured
in the same run (the ratio is what to compare between builds; the
goal is <= 1.5x, bench.py GOALS).

    .venv/bin/python bench/autograd_overhead.py [--repeat 15]

Run it with another checkout's interpreter to compare builds in one sitting.
"""
from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch

import torch_sparsefill as sf

warnings.filterwarnings("ignore", message="Sparse (CSR|CSC|BSR|BSC) tensor support is in beta")


def per_call(fn, repeat: int, number: int = 2000) -> float:
    """Median seconds per call over `repeat` samples of `number` calls."""
    for _ in range(50):
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def native(idx, values, size, requires_grad):
    """torch's own coalesced COO tensor."""
    out = torch.sparse_coo_tensor(idx, values.clone(), size, check_invariants=False).coalesce()
    return out.requires_grad_(requires_grad)


def operands(requires_grad: bool):
    """Two 3-element COO operands on one pattern (ours and torch's), and W."""
    idx = torch.tensor([[0, 1, 2]])
    va, vb = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.5, -1.0, 4.0])
    A = sf.sparse_coo_tensor(idx, va.clone(), (3,), fill_value=5.0, is_coalesced=True,
                             requires_grad=requires_grad)
    B = sf.sparse_coo_tensor(idx, vb.clone(), (3,), fill_value=1.0, is_coalesced=True,
                             requires_grad=requires_grad)
    nA, nB = native(idx, va, (3,), requires_grad), native(idx, vb, (3,), requires_grad)
    idx2 = torch.tensor([[0, 1, 2], [2, 0, 1]])
    M = sf.sparse_coo_tensor(idx2, va.clone(), (3, 3), fill_value=0.5, is_coalesced=True,
                             requires_grad=requires_grad)
    nM = native(idx2, va, (3, 3), requires_grad)
    W = torch.randn(3, 2)
    return A, B, nA, nB, M, nM, W


def rows(requires_grad: bool):
    A, B, nA, nB, M, nM, W = operands(requires_grad)
    yield "A * 2", lambda: A * 2, "COO * 2", lambda: nA * 2
    yield "torch.exp(A)", lambda: torch.exp(A), "torch.sin(COO)", lambda: torch.sin(nA)
    yield "A + B, one pattern", lambda: A + B, "COO + COO", lambda: nA + nB
    yield "A @ W, 3x3", lambda: M @ W, "torch.sparse.mm(COO, W)", lambda: torch.sparse.mm(nM, W)
    yield "A.sum(0), 3x3", lambda: M.sum(0), "torch.sparse.sum(COO, 0)", \
        lambda: torch.sparse.sum(nM, 0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{'op':<22}{'grad':<6}{'ours':>10}{'anchor':>10}{'ratio':>8}  anchor")
    for requires_grad in (False, True):
        for name, ours, anchor_name, anchor in rows(requires_grad):
            # interleave to share the machine's load between the two
            t_ours, t_anchor = [], []
            for _ in range(3):
                t_ours.append(per_call(ours, args.repeat))
                t_anchor.append(per_call(anchor, args.repeat))
            o, a = min(t_ours), min(t_anchor)
            print(f"{name:<22}{str(requires_grad):<6}{o * 1e6:>8.1f}us{a * 1e6:>8.1f}us"
                  f"{o / a:>8.2f}  {anchor_name}")


if __name__ == "__main__":
    main()
