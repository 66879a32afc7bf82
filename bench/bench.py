"""torch_sparsefill benchmark table (`make bench`).

Every row times one of our operations and an anchor measured in the same run
(torch's own operation on the same data), and prints the ratio ours/anchor:
below 1 is faster than the anchor. Timings are the median of repeated runs
after a warm-up, on the threads torch is given (make bench sets 2).

Usage: python bench/bench.py [--quick] [--rows substring]
"""
from __future__ import annotations

import argparse
import itertools
import statistics
import time

import warnings

import torch

import torch_sparsefill as sf

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")


def timeit(fn, *, repeat=7, min_time=0.2) -> float:
    """Median seconds per call; loops each sample until it lasts min_time/repeat."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    inner = max(1, int(min_time / repeat / once))
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - start) / inner)
    return statistics.median(samples)


def fmt(seconds: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:8.2f} {unit}"
    return f"{seconds / 1e-9:8.0f} ns"


def random_coo(shape, density, fill, seed=0, dtype=torch.float32):
    """(SparseFillTensor, native torch COO with the same pattern and values)."""
    g = torch.Generator().manual_seed(seed)
    numel = 1
    for s in shape:
        numel *= s
    nse = int(numel * density)
    linear = torch.randperm(numel, generator=g)[:nse].sort().values
    idx = torch.stack(torch.unravel_index(linear, shape))
    values = torch.randn(nse, generator=g, dtype=dtype) + 10  # never equal to the fill
    A = sf.sparse_coo_tensor(idx, values, shape, fill_value=fill)
    native = torch.sparse_coo_tensor(idx, values, shape, check_invariants=False).coalesce()
    return A, native


def rows(quick: bool):
    """Yield (name, ours, anchor name, anchor[, element count]) with
    zero-argument callables; an element count adds an ns-per-element line."""
    m = 2000 if quick else 4000
    A, N = random_coo((m, m), 0.01, 5.0)
    A0, _ = random_coo((m, m), 0.01, 0.0)
    yield (f"to_dense {m}x{m} 1%, fill 5", A.to_dense, "torch COO to_dense", N.to_dense)
    yield (f"to_dense {m}x{m} 1%, fill 0", A0.to_dense, "torch COO to_dense", N.to_dense)
    D = A.to_dense()
    Dz = N.to_dense()
    yield (f"dense->sparse {m}x{m} 1%, fill 5", lambda: sf.to_sparse(D, fill_value=5.0),
           "torch to_sparse (fill 0)", Dz.to_sparse)
    yield (f"COO->CSR {m}x{m} 1%", A.to_sparse_csr, "torch to_sparse_csr", N.to_sparse_csr)
    C, NC = A.to_sparse_csr(), N.to_sparse_csr()
    yield (f"CSR->COO {m}x{m} 1%", C.to_sparse_coo, "torch to_sparse_coo", NC.to_sparse_coo)

    n = 2_000_000 if quick else 20_000_000  # half of it stored: 10M stored elements
    big, big_native = random_coo((n,), 0.5, 5.0, seed=1)
    big0, _ = random_coo((n,), 0.5, 0.0, seed=1)
    values = big.values()
    yield (f"exp, {n // 2:,} stored fp32, fill 5", lambda: torch.exp(big),
           "torch.exp(values)", lambda: torch.exp(values))
    yield (f"exp, {n // 2:,} stored fp32, fill 0", lambda: torch.exp(big0),
           "torch.exp(values)", lambda: torch.exp(values))
    yield (f"sigmoid, {n // 2:,} stored fp32, fill 5", lambda: torch.sigmoid(big),
           "torch.sigmoid(values)", lambda: torch.sigmoid(values))
    yield (f"A * 2.5, {n // 2:,} stored fp32", lambda: big * 2.5,
           "values * 2.5", lambda: values * 2.5)
    twin = big._with(big.values() * 2, big._fill_value())
    twin_native = torch.sparse_coo_tensor(big_native.indices(), big_native.values() * 2,
                                          big_native.shape, check_invariants=False).coalesce()
    yield (f"add same pattern, {n // 2:,} stored", lambda: twin + big,
           "torch COO + COO", lambda: twin_native + big_native)
    other, other_native = random_coo((n,), 0.5, -1.0, seed=2)
    union = (big + other).nse()
    yield (f"add union pattern, {n // 2:,} + {n // 2:,} stored", lambda: big + other,
           "torch COO + COO", lambda: big_native + other_native, union)

    tiny, tiny_native = random_coo((3,), 1.0, 5.0, seed=3)
    yield ("per-op overhead: A * 2, 3 elements", lambda: tiny * 2,
           "torch COO * 2", lambda: tiny_native * 2)
    yield ("per-op overhead: -A, 3 elements", lambda: -tiny, "torch COO neg", lambda: -tiny_native)


def stratified(m, n, k, fill, seed=0, dtype=torch.float32):
    """(SparseFillTensor, native COO): m x n with k stored per row, in k
    column bands (sorted, unique) -- a large pattern built without an m*n
    permutation."""
    g = torch.Generator().manual_seed(seed)
    band = n // k
    cols = (torch.randint(0, band, (m, k), generator=g) + torch.arange(k) * band).reshape(-1)
    idx = torch.stack([torch.arange(m).repeat_interleave(k), cols])
    values = torch.randn(m * k, generator=g, dtype=dtype)
    A = sf.sparse_coo_tensor(idx, values, (m, n), fill_value=fill)
    native = torch.sparse_coo_tensor(idx, values, (m, n), check_invariants=False).coalesce()
    return A, native


def reduction_rows(quick: bool):
    """Softmax and reductions (RFC.md 6) against torch.sparse.softmax /
    torch.sparse.sum on the same native tensor, and dense softmax at 1%."""
    m, k = (10_000, 100) if quick else (100_000, 100)  # 1M or 10M stored
    A, N = stratified(m, 10_000, k, -float("inf"))
    label = f"{m * k // 1_000_000}M stored"
    yield (f"softmax dim 1, {label}, fill -inf", lambda: torch.softmax(A, 1),
           "torch.sparse.softmax", lambda: torch.sparse.softmax(N, 1))
    C = A.to_sparse_csr()
    yield (f"softmax dim 1 CSR, {label}, fill -inf", lambda: torch.softmax(C, 1),
           "torch.sparse.softmax (COO)", lambda: torch.sparse.softmax(N, 1))
    A5 = A._with(A._values(), torch.tensor(0.5))
    yield (f"softmax dim 1, {label}, fill 0.5", lambda: torch.softmax(A5, 1),
           "torch.sparse.softmax", lambda: torch.sparse.softmax(N, 1))
    yield (f"softmax dim 0, {label}, fill 0.5", lambda: torch.softmax(A5, 0),
           "torch.sparse.softmax", lambda: torch.sparse.softmax(N, 0))
    yield (f"log_softmax dim 1, {label}, fill 0.5", lambda: torch.log_softmax(A5, 1),
           "torch.sparse.log_softmax", lambda: torch.sparse.log_softmax(N, 1))
    yield (f"sum dim 1, {label}, fill 0.5", lambda: A5.sum(1),
           "torch.sparse.sum", lambda: torch.sparse.sum(N, 1))
    yield (f"sum dim 0, {label}, fill 0.5", lambda: A5.sum(0),
           "torch.sparse.sum", lambda: torch.sparse.sum(N, 0))
    yield (f"amax dim 1, {label}, fill 0.5", lambda: A5.amax(1),
           "torch.sparse.sum", lambda: torch.sparse.sum(N, 1))
    yield (f"sum all, {label}, fill 0.5", lambda: A5.sum(),
           "torch.sparse.sum", lambda: torch.sparse.sum(N))
    # 1% density against the dense softmax of the same (dense) matrix
    S, _ = stratified(10_000 if not quick else 2_000, 10_000 if not quick else 2_000, 100 if not
                      quick else 20, 0.5, seed=4)
    DS = S.to_dense()
    yield ("softmax dim 1, 1% of 10000x10000, fill 0.5" if not quick else
           "softmax dim 1, 1% of 2000x2000, fill 0.5", lambda: torch.softmax(S, 1),
           "dense torch.softmax", lambda: torch.softmax(DS, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for smoke tests")
    parser.add_argument("--rows", default="", help="only rows whose name contains this")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    header = f"{'operation':<44} {'ours':>11}   {'anchor':<26} {'anchor time':>11}  {'ratio':>6}"
    print(header)
    print("-" * len(header))
    notes = []
    for name, ours, anchor_name, anchor, *elements in itertools.chain(rows(args.quick),
                                                                      reduction_rows(args.quick)):
        if args.rows not in name:
            continue
        t_ours, t_anchor = timeit(ours), timeit(anchor)
        print(f"{name:<44} {fmt(t_ours):>11}   {anchor_name:<26} {fmt(t_anchor):>11}  "
              f"{t_ours / t_anchor:6.2f}")
        if elements:
            notes.append(f"{name}: {t_ours / elements[0] * 1e9:.1f} ns per union element "
                         f"(torch: {t_anchor / elements[0] * 1e9:.1f} ns), {elements[0]:,} in the union")
    for note in notes:
        print(note)


if __name__ == "__main__":
    main()
