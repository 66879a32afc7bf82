"""torch_sparsefill benchmark table (`make bench`).

Every row times one of our operations and an anchor measured in the same run
(torch's own operation on the same data, or a peer library: scipy.sparse, and
pydata/sparse, the other library with fill values), and prints the ratio
ours/anchor: below 1 is faster than the anchor. The two are timed in
alternating samples after a warm-up, each the best of its samples (on a
shared machine the best sample is the one least disturbed by other work; both
sides see the same load), on the threads torch is given (make bench sets 2).
Rows with a goal (GOALS, from the issues) say whether they meet it.

The run also writes bench/results/latest.json (every row, note and memory row)
and bench/results/ratios.png (each row's ratio on a log scale, its goal
marked), which the README shows.

Usage: python bench/bench.py [--quick] [--rows substring] [--no-results] [--gpu-only]
"""
from __future__ import annotations

import argparse
import itertools
import json
import tempfile
import sys
import time
import types
from pathlib import Path

import warnings

import torch

import torch_sparsefill as sf

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its siblings, also when imported
import bench_order  # noqa: E402
import bench_graph  # noqa: E402
from bench_graph import graph_rows  # noqa: E402

warnings.filterwarnings("ignore", message="Sparse (CSR|CSC|BSR|BSC) tensor support is in beta")
warnings.filterwarnings("ignore", message="Sparse invariant checks are implicitly disabled")

RESULTS = Path(__file__).resolve().parent / "results"

# (row name contains, anchor name contains, goal ratio ours/anchor): the performance goals.
GOALS = [
    ("per-op overhead: A * 2", "torch COO * 2", 1.5),
    ("per-op overhead: -A", "torch COO neg", 1.5),
    ("per-op overhead: exp(A)", "torch.exp(values)", 4.0),
    ("per-op overhead: A + B", "torch COO + COO", 1.5),
    ("per-op overhead: A.sum()", "torch.sparse.sum", 1.5),
    ("one row A[", "torch CSR select", 2.0),
    ("CSR->COO", "torch to_sparse_coo", 1.2),
    ("COO->CSR", "torch to_sparse_csr", 1.1),
    ("A @ x", "torch CSR mv", 1.0),
    ("per-row fill", "the same with a scalar fill", 1.5),
    ("per-column fill", "the same with a scalar fill", 1.5),
    ("index_select 400 cols, COO", "torch COO index_select", 1.0),
    ("A @ B sparse 4000x4000 0.2% CSR, fill 0", "torch CSR @ CSR", 1.0),
    ("sum dim 0", "scipy", 1.0),
    ("sum dim 1", "pydata", 0.5),
    ("add union pattern", "torch COO + COO", 0.3),
    ("BSR @ dense", "torch BSR @ dense, fill 0", 1.1),
    ("dense @ BSR", "torch (BSR^T @ dense^T)^T", 1.1),
    ("-> BSR", "torch", 1.2),
    ("BSR -> dense", "torch BSR to_dense", 1.2),
    ("BSR -> CSR", "torch BSR", 1.2),
    # the compile rows
    ("graph mxv min_plus", "python-graphblas", 1.5),
    ("graph triangle count", "python-graphblas", 1.5),
    ("graph ewise_add(min)", "python-graphblas", 1.2),
    ("graph union A + B", "python-graphblas", 1.0),
    ("compile 6-op chain, 1,000,000 stored (components)", "the chain, eager", 0.5),
    ("compile 6-op chain, 3 elements (components", "the chain on dense, eager", 1.0),
    ("compile 6-op chain, 1,000,000 stored (sf.compile)", "the chain, eager", 0.5),
]


GOALS += bench_order.GOALS


def goal_of(name: str, anchor: str):
    """The goal ratio of a row, or None."""
    return next((g for n, a, g in GOALS if n in name and a in anchor), None)


def _samples(fn, inner):
    start = time.perf_counter()
    for _ in range(inner):
        fn()
    return (time.perf_counter() - start) / inner


def _inner(fn, budget):
    """(calls per sample so that a sample lasts about `budget`, seconds of one call)."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    return max(1, int(budget / once)), once


def timeit(fn, *, repeat=7, min_time=0.2) -> float:
    """Best seconds per call over `repeat` samples of about min_time/repeat each."""
    inner, _ = _inner(fn, min_time / repeat)
    return min(_samples(fn, inner) for _ in range(repeat))


def time_pair(ours, anchor, *, repeat=7, min_time=0.2):
    """(ours, anchor) seconds per call, sampled alternately so that both see
    the same load; each the best of its samples. Sub-millisecond calls get
    many short samples (a short sample is often not preempted); calls of
    over half a second get 3 (the table's run time stays bounded). A sample
    of calls under 0.1 s holds at least 3 of them: a sample of one call
    right after the other side's measures the memory that side just freed
    (a call writing 38 MB faulted 9,400 pages, or none when it reused the
    other's: 40 ms or 27 ms, the graph rows), not the function's own
    steady state."""
    (inner_o, once_o), (inner_a, once_a) = (_inner(ours, min_time / repeat),
                                            _inner(anchor, min_time / repeat))
    if inner_o > 50 and inner_a > 50:  # fast calls: many samples of ~20 calls
        repeat, inner_o, inner_a = 200, 20, 20
    elif max(once_o, once_a) > 0.5:
        repeat = 3
    if max(once_o, once_a) < 0.1:
        inner_o, inner_a = max(inner_o, 3), max(inner_a, 3)
    best_o = best_a = float("inf")
    for _ in range(repeat):
        best_o = min(best_o, _samples(ours, inner_o))
        best_a = min(best_a, _samples(anchor, inner_a))
    return best_o, best_a


def fmt(seconds: float) -> str:
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:8.2f} {unit}"
    return f"{seconds / 1e-9:8.0f} ns"


def random_coo(shape, density, fill, seed=0, dtype=torch.float32, requires_grad=False):
    """(SparseFillTensor, native torch COO with the same pattern and values)."""
    g = torch.Generator().manual_seed(seed)
    numel = 1
    for s in shape:
        numel *= s
    nse = int(numel * density)
    linear = torch.randperm(numel, generator=g)[:nse].sort().values
    idx = torch.stack(torch.unravel_index(linear, shape))
    values = torch.randn(nse, generator=g, dtype=dtype) + 10  # never equal to the fill
    # Sorted and unique (randperm, sorted): say so, as torch code would, so
    # values() is readable (RFC.md#stored-elements).
    A = sf.sparse_coo_tensor(idx, values, shape, fill_value=fill, requires_grad=requires_grad,
                             is_coalesced=True)
    native = torch.sparse_coo_tensor(idx, values, shape, check_invariants=False).coalesce()
    return A, native.requires_grad_(requires_grad)


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
    # Forward and backward of the union op (the backward reuses the forward's
    # merge): the sum of the result's stored values, against the same loss
    # through torch's COO add. Gradients are reset first, so that none accumulates.
    leaves, leaves_native = [], []
    for seed, fill in ((1, 5.0), (2, -1.0)):
        A, N = random_coo((n,), 0.5, fill, seed=seed, requires_grad=True)
        leaves.append(A)
        leaves_native.append(N)

    def union_fwd_bwd():
        for A in leaves:
            A._values().grad = A._fill_value().grad = None
        (leaves[0] + leaves[1])._values().sum().backward()

    def union_fwd_bwd_native():
        for N in leaves_native:
            N.grad = None
        torch.sparse.sum(leaves_native[0] + leaves_native[1]).backward()

    yield (f"add union fwd+bwd, {n // 2:,} + {n // 2:,} stored", union_fwd_bwd,
           "torch COO + COO, fwd+bwd", union_fwd_bwd_native, union)

    tiny, tiny_native = random_coo((3,), 1.0, 5.0, seed=3)
    yield ("per-op overhead: A * 2, 3 elements", lambda: tiny * 2,
           "torch COO * 2", lambda: tiny_native * 2)
    yield ("per-op overhead: -A, 3 elements", lambda: -tiny, "torch COO neg", lambda: -tiny_native)
    tiny_values = tiny.values()
    yield ("per-op overhead: exp(A), 3 elements", lambda: torch.exp(tiny), "torch.exp(values)",
           lambda: torch.exp(tiny_values))
    tiny_twin = tiny._with(tiny_values * 2, tiny._fill_value())
    yield ("per-op overhead: A + B same pattern, 3 elements", lambda: tiny + tiny_twin,
           "torch COO + COO", lambda: tiny_native + tiny_native)
    yield ("per-op overhead: A.sum(), 3 elements", lambda: tiny.sum(), "torch.sparse.sum",
           lambda: torch.sparse.sum(tiny_native))
    yield from shape_rows(quick)


def _random_large(rows, cols, nse, fill, seed=0):
    """(SparseFillTensor, native coalesced COO) with about nse random elements,
    without materialising rows * cols (randperm would)."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.stack([torch.randint(0, rows, (nse,), generator=g),
                       torch.randint(0, cols, (nse,), generator=g)])
    native = torch.sparse_coo_tensor(idx, torch.randn(nse, generator=g) + 10, (rows, cols),
                                     check_invariants=False).coalesce()
    A = sf.sparse_coo_tensor(native.indices(), native.values(), native.shape, fill_value=fill)
    return A, native


def shape_rows(quick: bool):
    """Shape and indexing (RFC.md#shape-and-indexing): index_select and CSR row slicing against
    torch's own sparse ops. torch has no index_select or slicing for CSR, so
    its COO index_select / narrow_copy on the same data are the anchors."""
    m = 2000 if quick else 4000
    A, N = random_coo((m, m), 0.01, 5.0)
    C = A.to_sparse_csr()
    g = torch.Generator().manual_seed(4)
    rows = torch.randint(0, m, (m // 10,), generator=g)
    k = len(rows)
    yield (f"index_select {k} rows, CSR {m}x{m} 1%", lambda: C.index_select(0, rows),
           "torch COO index_select", lambda: N.index_select(0, rows))
    yield (f"index_select {k} rows, COO {m}x{m} 1%", lambda: A.index_select(0, rows),
           "torch COO index_select", lambda: N.index_select(0, rows))
    yield (f"index_select {k} cols, COO {m}x{m} 1%", lambda: A.index_select(1, rows),
           "torch COO index_select", lambda: N.index_select(1, rows))
    lo = m // 4
    yield (f"rows A[{lo}:{lo + k}], CSR {m}x{m} 1%", lambda: C[lo: lo + k],
           "torch COO narrow_copy", lambda: N.narrow_copy(0, lo, k))
    yield (f"rows A[{lo}:{lo + k}:2], CSR {m}x{m} 1%", lambda: C[lo: lo + 2 * k: 2],
           "torch COO index_select", lambda: N.index_select(0, torch.arange(lo, lo + 2 * k, 2)))
    NC = N.to_sparse_csr()
    yield (f"one row A[{lo}], CSR {m}x{m} 1%", lambda: C[lo], "torch CSR select",
           lambda: NC.select(0, lo))
    n = 20_000 if quick else 200_000
    big, big_native = _random_large(n, n, 2_000_000 if not quick else 200_000, 5.0, seed=5)
    big_csr = big.to_sparse_csr()
    few = torch.randint(0, n, (100,), generator=g)
    yield (f"index_select 100 rows, CSR {n}^2, {big.nse():,} stored",
           lambda: big_csr.index_select(0, few), "torch COO index_select",
           lambda: big_native.index_select(0, few))
    yield (f"rows A[{n // 2}:{n // 2 + 100}], CSR {n}^2", lambda: big_csr[n // 2: n // 2 + 100],
           "torch COO narrow_copy", lambda: big_native.narrow_copy(0, n // 2, 100))


def products_rows(quick: bool):
    """Matrix products (issue "Fill-aware matrix products"). Anchors: the RFC's
    manual workaround on torch's own CSR (`torch.sparse.mm(A0, B) + a * B.sum(0)`),
    dense torch.mm, torch CSR @ dense, torch sparse @ sparse."""
    m = 2000 if quick else 4000
    n = 64  # columns of B
    fill = 5.0
    A, N = random_coo((m, m), 0.01, fill, seed=4)
    A_csr = A.to_sparse_csr()
    N0 = torch.sparse_coo_tensor(N.indices(), N.values() - fill, N.shape).coalesce().to_sparse_csr()
    B = torch.randn(m, n)
    yield (f"A @ B {m}x{m} 1%, n={n}, fill 5", lambda: A_csr @ B,
           "torch CSR mm(A0,B)+a*colsum", lambda: torch.sparse.mm(N0, B) + fill * B.sum(0))
    D = A.to_dense()
    yield (f"A @ B {m}x{m} 1%, n={n}, fill 5", lambda: A_csr @ B,
           "dense torch.mm(A.to_dense())", lambda: torch.mm(D, B))
    yield (f"A @ B {m}x{m} 1%, n={n}, fill 5, COO", lambda: A @ B,
           "torch CSR mm(A0,B)+a*colsum", lambda: torch.sparse.mm(N0, B) + fill * B.sum(0))
    x = torch.randn(m)
    yield (f"A @ x {m}x{m} 1%, fill 5", lambda: A_csr @ x,
           "torch CSR mv(A0,x)+a*sum(x)", lambda: torch.mv(N0, x) + fill * x.sum())
    # a per-row (m, 1) or per-column (1, m) fill: the correction is a rank-1
    # or diagonal term, so the cost is the scalar fill's
    idx = A_csr.to_sparse_coo().coalesce()
    for what, shape in (("per-row", (m, 1)), ("per-column", (1, m))):
        S = sf.sparse_coo_tensor(idx._indices(), idx._values(), (m, m),
                                 fill_value=torch.rand(shape) + fill).to_sparse_csr()
        yield (f"A @ x {m}x{m} 1%, {what} fill", lambda S=S: S @ x,
               "the same with a scalar fill", lambda: A_csr @ x)
    L = torch.randn(n, m)
    yield (f"D @ A {m}x{m} 1%, {n} rows, fill 5", lambda: L @ A_csr,
           "torch mm(D, A0 CSR)+a*rowsum", lambda: torch.sparse.mm(N0.t(), L.t()).t()
           + fill * L.sum(1, keepdim=True))
    v = A_csr._values().detach().requires_grad_()
    Bg = B.clone().requires_grad_()
    Ag = sf.sparse_csr_tensor(A_csr.crow_indices(), A_csr.col_indices(), v, (m, m),
                              fill_value=torch.tensor(fill, requires_grad=True))
    Ng = N0.detach().clone().requires_grad_()

    def ours_fwd_bwd():
        (Ag @ Bg).sum().backward()

    def torch_fwd_bwd():
        (torch.sparse.mm(Ng, Bg) + fill * Bg.sum(0)).sum().backward()

    yield (f"A @ B fwd+bwd {m}x{m} 1%, n={n}", ours_fwd_bwd, "torch CSR fwd+bwd (fill 0)",
           torch_fwd_bwd)

    # Real structure at scale: a shared matrix repeated block-diagonally.
    import scipy.io
    import scipy.sparse
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "test" / "data" / "matrices" / "bcsstk13.mtx"
    if path.exists():
        block = scipy.sparse.csr_array(scipy.io.mmread(str(path))).astype("float32")
        reps = max(1, (1_000_000 if quick else 10_000_000) // block.nnz + 1)
        big = scipy.sparse.block_diag([block] * reps, format="csr")
        big.sort_indices()
        crow = torch.from_numpy(big.indptr.astype("int64"))
        col = torch.from_numpy(big.indices.astype("int64"))
        vals = torch.from_numpy(big.data)
        rows_, nse = big.shape[0], big.nnz
        S = sf.sparse_csr_tensor(crow, col, vals, big.shape, fill_value=0.0)
        S5 = sf.sparse_csr_tensor(crow, col, vals, big.shape, fill_value=-0.5)
        Nt = torch.sparse_csr_tensor(crow, col, vals, big.shape)
        nb = 16
        Bb = torch.randn(big.shape[1], nb)
        src = torch.empty(64 * 2**20 // 4)
        t_copy = timeit(lambda: src.clone())
        copy_bw = 2 * src.numel() * 4 / t_copy  # read + write
        # Bytes an SpMM must move at least: values + columns + row pointers,
        # B once and C once.
        moved = nse * (4 + 8) + (rows_ + 1) * 8 + 2 * rows_ * nb * 4
        flops = 2 * nse * nb

        def note(label):
            def f(t_ours, t_anchor):
                return (f"{label}: {flops / t_ours / 1e9:.2f} GFLOP/s, "
                        f"{moved / t_ours / copy_bw * 100:.0f}% of copy bandwidth "
                        f"({copy_bw / 1e9:.1f} GB/s); torch CSR @ dense: "
                        f"{flops / t_anchor / 1e9:.2f} GFLOP/s, "
                        f"{moved / t_anchor / copy_bw * 100:.0f}%")
            return f

        label = f"bcsstk13 x{reps} block-diag, {nse:,} stored, n={nb}"
        yield (f"{label}, fill 0", lambda: S @ Bb, "torch CSR @ dense", lambda: Nt @ Bb,
               note(f"{label}, fill 0"))
        yield (f"{label}, fill -0.5", lambda: S5 @ Bb, "torch CSR @ dense (fill 0)",
               lambda: Nt @ Bb, note(f"{label}, fill -0.5"))

    # sparse @ sparse, fill 0: SpGEMM
    ms = 2000 if quick else 4000
    P, PN = random_coo((ms, ms), 0.002, 0.0, seed=5)
    Q, QN = random_coo((ms, ms), 0.002, 0.0, seed=6)
    Pc, Qc, PNc, QNc = P.to_sparse_csr(), Q.to_sparse_csr(), PN.to_sparse_csr(), QN.to_sparse_csr()
    yield (f"A @ B sparse {ms}x{ms} 0.2% CSR, fill 0", lambda: Pc @ Qc,
           "torch CSR @ CSR", lambda: PNc @ QNc)
    yield (f"A @ B sparse {ms}x{ms} 0.2% COO, fill 0", lambda: P @ Q,
           "torch COO @ COO", lambda: PN @ QN)
    P5 = P._with(P._values(), torch.tensor(0.5))
    Q5 = Qc._with(Qc._values(), torch.tensor(-1.0))
    yield (f"A @ B sparse {ms}x{ms} 0.2%, fills .5, -1", lambda: P5 @ Q5,
           "torch CSR @ CSR (fill 0)", lambda: PNc @ QNc)


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
    """Softmax and reductions (RFC.md#reductions-and-softmax) against torch.sparse.softmax /
    torch.sparse.sum on the same native tensor, and dense softmax at 1%."""
    m, k = (10_000, 100) if quick else (100_000, 100)  # 1M or 10M stored
    A, N = stratified(m, 10_000, k, -float("inf"))
    label = f"{m * k // 1_000_000}M stored"
    yield (f"softmax dim 1, {label}, fill -inf", lambda: torch.softmax(A, 1),
           "torch.sparse.softmax", lambda: torch.sparse.softmax(N, 1))
    C = A.to_sparse_csr()
    stored = m * k

    def per_element(t_ours, t_anchor):
        return (f"softmax dim 1 CSR, {label}: {t_ours / stored * 1e9:.1f} ns per stored element "
                f"(goal <= 2 ns)")
    yield (f"softmax dim 1 CSR, {label}, fill -inf", lambda: torch.softmax(C, 1),
           "torch.sparse.softmax (COO)", lambda: torch.sparse.softmax(N, 1), per_element)
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
    # The decomposition route's overhead (RFC.md#decomposition-route): F.mse_loss
    # runs torch's decomposition step by step, against the same expression by hand.
    T5 = A5._with(A5._values() + 1.0, torch.tensor(0.25))
    yield (f"F.mse_loss(A, B) by decomposition, {label}",
           lambda: torch.nn.functional.mse_loss(A5, T5), "((A - B) ** 2).mean() by hand",
           lambda: ((A5 - T5) ** 2).mean())
    # 1% density against the dense softmax of the same (dense) matrix
    S, _ = stratified(10_000 if not quick else 2_000, 10_000 if not quick else 2_000, 100 if not
                      quick else 20, 0.5, seed=4)
    DS = S.to_dense()
    yield ("softmax dim 1, 1% of 10000x10000, fill 0.5" if not quick else
           "softmax dim 1, 1% of 2000x2000, fill 0.5", lambda: torch.softmax(S, 1),
           "dense torch.softmax", lambda: torch.softmax(DS, 1))


def finiteness_rows(quick: bool):
    """The range check every sparse @ dense product makes (docs/design.md#range-check: the
    subtracting fast path runs only when k max|B| (max|v| + 2 max|f|) is
    finite and below a quarter of the dtype's range, so no intermediate
    overflows; one host sync per product) against the whole product it
    guards, at a large and at a small size (where a fixed cost shows most).
    The ratio is the check's share of the product's time."""
    fill = 5.0
    for m, density, n in ((2000 if quick else 4000, 0.01, 64), (100, 0.05, 4)):
        A, _ = random_coo((m, m), density, fill, seed=9)
        A_csr = A.to_sparse_csr()
        B = torch.randn(m, n)
        f, values = torch.tensor(fill), A_csr.values()
        limit = torch.finfo(B.dtype).max / 4

        def check(f=f, values=values, B=B, limit=limit):
            bound = B.abs().amax() * B.shape[0] * (values.abs().amax() + 2 * f.abs())
            return bool(bound < limit)

        def note(t_check, t_product, m=m):
            return (f"range check, {m}x{m}: {t_check / t_product:.1%} of the product; timed "
                    f"from Python (three max|x| and one item round trip), an upper bound of "
                    f"the same check in C++ inside the product")

        yield (f"range check of A @ B {m}x{m}, n={n}", check,
               "the product A @ B (with it)", lambda A_csr=A_csr, B=B: A_csr @ B, note)


def _pydata():
    """pydata/sparse, or None (its rows are then skipped, and the run says so)."""
    try:
        import sparse
    except ImportError:
        return None
    return sparse


def _scipy_csr(native):
    """scipy CSR of a native coalesced 2-D torch COO tensor (fill 0)."""
    import scipy.sparse
    idx, vals = native.indices().numpy(), native.values().numpy()
    return scipy.sparse.csr_array((vals, (idx[0], idx[1])), shape=tuple(native.shape))


def peer_rows(quick: bool):
    """Peers on the same data, wherever they compute the same thing: scipy.sparse
    (fill 0 only: conversions, SpMV, SpMM, SpGEMM, column sums) and
    pydata/sparse (COO with fill values: element-wise, union add, sums)."""
    import numpy as np
    m = 2000 if quick else 4000
    A, N = random_coo((m, m), 0.01, 5.0)
    A0, _ = random_coo((m, m), 0.01, 0.0)
    S_csr = _scipy_csr(N)
    S_coo = S_csr.tocoo()
    yield (f"COO->CSR {m}x{m} 1%", A.to_sparse_csr, "scipy coo.tocsr()", S_coo.tocsr)
    C, C0 = A.to_sparse_csr(), A0.to_sparse_csr()
    yield (f"CSR->COO {m}x{m} 1%", C.to_sparse_coo, "scipy csr.tocoo()", S_csr.tocoo)
    x = torch.randn(m)
    xn = x.numpy()
    yield (f"A @ x {m}x{m} 1%, fill 0", lambda: C0 @ x, "scipy CSR @ x", lambda: S_csr @ xn)
    B = torch.randn(m, 64)
    Bn = B.numpy()
    yield (f"A @ B {m}x{m} 1%, n=64, fill 0", lambda: C0 @ B, "scipy CSR @ dense",
           lambda: S_csr @ Bn)
    P, PN = random_coo((m, m), 0.002, 0.0, seed=5)
    Q, QN = random_coo((m, m), 0.002, 0.0, seed=6)
    Pc, Qc, SP, SQ = P.to_sparse_csr(), Q.to_sparse_csr(), _scipy_csr(PN), _scipy_csr(QN)
    yield (f"A @ B sparse {m}x{m} 0.2% CSR, fill 0", lambda: Pc @ Qc, "scipy CSR @ CSR",
           lambda: SP @ SQ)

    rows_, k = (10_000, 100) if quick else (100_000, 100)
    R, RN = stratified(rows_, 10_000, k, 0.5)
    label = f"{rows_ * k // 1_000_000}M stored"
    SR = _scipy_csr(RN)
    yield (f"sum dim 0, {label}, fill 0.5", lambda: R.sum(0), "scipy CSR sum(axis=0), fill 0",
           lambda: SR.sum(axis=0))
    yield (f"sum dim 1, {label}, fill 0.5", lambda: R.sum(1), "scipy CSR sum(axis=1), fill 0",
           lambda: SR.sum(axis=1))
    pydata = _pydata()
    if pydata is None:
        return
    PR = pydata.COO(RN.indices().numpy(), RN.values().numpy(), shape=tuple(RN.shape),
                    fill_value=0.5, has_duplicates=False, sorted=True)
    yield (f"sum dim 0, {label}, fill 0.5", lambda: R.sum(0), "pydata COO sum(axis=0)",
           lambda: PR.sum(axis=0))
    yield (f"sum dim 1, {label}, fill 0.5", lambda: R.sum(1), "pydata COO sum(axis=1)",
           lambda: PR.sum(axis=1))
    n = 2_000_000 if quick else 20_000_000
    big, big_native = random_coo((n,), 0.5, 5.0, seed=1)
    other, other_native = random_coo((n,), 0.5, -1.0, seed=2)

    def to_pydata(native, fill):
        return pydata.COO(native.indices().numpy(), native.values().numpy(), shape=(n,),
                          fill_value=fill, has_duplicates=False, sorted=True)
    pb, po = to_pydata(big_native, 5.0), to_pydata(other_native, -1.0)
    yield (f"exp, {n // 2:,} stored fp32, fill 5", lambda: torch.exp(big), "pydata np.exp(COO)",
           lambda: np.exp(pb))
    yield (f"A * 2.5, {n // 2:,} stored fp32, fill 5", lambda: big * 2.5, "pydata COO * 2.5",
           lambda: pb * 2.5)
    yield (f"add union pattern, {n // 2:,} + {n // 2:,} stored", lambda: big + other,
           "pydata COO + COO", lambda: pb + po)


# ---- memory rows -------------------------------------------------------------

def _storages(*tensors) -> dict:
    """{storage address: bytes} of the tensors' components (a SparseFillTensor's
    indices, values and fill): a component an output shares with an input
    (softmax keeps the pattern) is counted once."""
    out = {}
    for x in tensors:
        parts = (x._sf_indices, x._sf_crow, x._sf_col, x._sf_values, x._sf_fill) \
            if isinstance(x, sf.SparseFillTensor) else (x,)
        for t in parts:
            if t is not None:
                out[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    return out


def _memory_case(name: str, quick: bool):
    """(inputs, op) of one memory row."""
    scale = 10 if quick else 1
    if name == "union add":
        a, _ = random_coo((4_000_000 // scale,), 0.5, 5.0, seed=1)
        b, _ = random_coo((4_000_000 // scale,), 0.5, -1.0, seed=2)
        return (a, b), lambda: a + b
    if name == "softmax dim 1":
        a, _ = stratified(20_000 // scale, 10_000, 100, 0.5)
        a = a.to_sparse_csr()
        return (a,), lambda: torch.softmax(a, 1)
    for family in (bench_order, bench_graph):
        case = family.memory_case(name, quick)
        if case is not None:
            return case
    a, _ = random_coo((4000 // scale, 4000 // scale), 0.01, 5.0, seed=4)
    a = a.to_sparse_csr()
    b = torch.randn(4000 // scale, 64)
    return (a, b), lambda: a @ b


MEMORY_CASES = (("union add", "softmax dim 1", "A @ B CSR fill 5, n=64") + bench_order.MEMORY_CASES
                + bench_graph.MEMORY_CASES)


def _memory_main(name: str, quick: bool) -> None:
    """In a fresh process: build the inputs, let go of what building them
    freed (the output cache's blocks too), reset the high-water mark, run the
    op once; print the input, output and added peak bytes."""
    import ctypes
    import gc
    inputs, op = _memory_case(name, quick)
    op()  # warm-up: one-time allocations (thread pools, ...) are not the op's
    gc.collect()
    sf.memory.empty_cache()  # the measured call takes fresh memory, not the warm-up's
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = _status("VmRSS")
    out = op()
    added = _status("VmHWM") - before
    outs = tuple(out) if isinstance(out, tuple) else (out,)  # (values, indices) too
    inputs_bytes = sum(_storages(*inputs).values())
    print(json.dumps({"inputs": inputs_bytes,
                      "output": sum(_storages(*inputs, *outs).values()) - inputs_bytes,
                      "added": added}))


def memory_rows(quick: bool):
    """Peak memory of one call (the goal: at most 2x the bytes of the
    inputs plus the output's new components), each case in a fresh process."""
    import subprocess
    import sys
    for name in MEMORY_CASES:
        argv = [sys.executable, __file__, "--memory", name] + (["--quick"] if quick else [])
        out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            yield {"name": name, "error": out.stderr.strip().splitlines()[-1:]}
            continue
        r = json.loads(out.stdout.strip().splitlines()[-1])
        r["name"] = name
        r["ratio"] = (r["inputs"] + r["added"]) / max(r["inputs"] + r["output"], 1)
        r["goal"] = 2.0
        yield r


# ---- results -------------------------------------------------------------------

def results_markdown(data: dict) -> str:
    """The measured numbers of one run (latest.json's dict) as markdown: the
    page the documents cite for every timing, so no figure is hand-copied.

    >>> "| row |" in results_markdown({"torch": "2.13.0", "threads": 2, "rows": [],
    ...                                "memory": [], "notes": []})
    True
    """
    def cell(text) -> str:
        return str(text).replace("|", "\\|")

    def goal(ratio, target) -> str:
        return "" if target is None else f"<= {target:g}: {'met' if ratio <= target else 'MISSED'}"

    out = ["# make bench: the last full run", "",
           "<!-- Generated by bench/bench.py (make bench) from latest.json. Do not edit. -->", "",
           f"torch {data['torch']}, {data['threads']} threads. Each row: our time and an anchor's, "
           "measured in the same run (alternating samples, each the best of its samples), and "
           "their ratio ours / anchor (below 1 is faster); a goal is met when the ratio is at "
           "most the goal. `bench/README.md` says what each row measures.", "",
           "## Rows", "", "| row | ours | anchor | anchor's time | ratio | goal |",
           "| --- | ---: | --- | ---: | ---: | --- |"]
    for r in data["rows"]:
        out.append(f"| {cell(r['name'])} | {fmt(r['ours_s']).strip()} | {cell(r['anchor'])} | "
                   f"{fmt(r['anchor_s']).strip()} | {r['ratio']:.3f} | {goal(r['ratio'], r['goal'])} |")
    out += ["", "## Peak memory", "",
            "One call in a fresh process: (inputs + added peak) / (inputs + output).", "",
            "| case | inputs | output | added peak | ratio | goal |",
            "| --- | ---: | ---: | ---: | ---: | --- |"]
    for r in data["memory"]:
        if "error" in r:
            out.append(f"| {cell(r['name'])} | failed: {cell(' '.join(r['error']))} | | | | |")
            continue
        mib = [f"{r[k] / 2**20:.1f} MiB" for k in ("inputs", "output", "added")]
        out.append(f"| {cell(r['name'])} | {' | '.join(mib)} | {r['ratio']:.2f} | "
                   f"{goal(r['ratio'], r['goal'])} |")
    out += ["", "## Notes", ""] + [f"- {note}" for note in data["notes"]]
    return "\n".join(out) + "\n"


def write_results(rows: list, memory: list, notes: list) -> None:
    """bench/results/latest.json, latest.md (the same numbers as a page the
    documents cite) and ratios.png (matplotlib, when installed)."""
    RESULTS.mkdir(exist_ok=True)
    data = {"torch": torch.__version__, "threads": torch.get_num_threads(),
            "rows": rows, "memory": memory, "notes": notes}
    (RESULTS / "latest.json").write_text(json.dumps(data, indent=1) + "\n")
    (RESULTS / "latest.md").write_text(results_markdown(data))
    print(f"wrote {RESULTS / 'latest.md'}")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("ratios.png: not drawn (matplotlib is not installed)")
        return
    labels = [f"{r['name']}  [{r['anchor']}]" for r in rows]
    ratios = [r["ratio"] for r in rows]
    fig, ax = plt.subplots(figsize=(11, 0.22 * len(rows) + 1.5))
    y = list(range(len(rows)))[::-1]
    colors = ["tab:red" if r["goal"] is not None and r["ratio"] > r["goal"] else
              "tab:green" if r["goal"] is not None else "tab:blue" for r in rows]
    ax.barh(y, ratios, color=colors, height=0.7)
    goals = [(yy, r["goal"]) for yy, r in zip(y, rows) if r["goal"] is not None]
    if goals:
        ax.scatter([g for _, g in goals], [yy for yy, _ in goals], marker="|", s=150,
                   color="black", zorder=3, label="goal")
        ax.legend(loc="lower right")
    ax.axvline(1.0, color="gray", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=6)
    ax.set_xlabel("time ours / anchor (log scale; below 1 is faster; green: goal met, "
                  "red: goal missed)")
    ax.set_title(f"torch_sparsefill make bench, torch {torch.__version__}, "
                 f"{torch.get_num_threads()} threads")
    fig.tight_layout()
    fig.savefig(RESULTS / "ratios.png", dpi=110)
    plt.close(fig)


def _synced(fn):
    """fn, then wait for the GPU: the timer sees the kernels' whole run."""
    def run():
        fn()
        torch.cuda.synchronize()
    return run


def gpu_rows(quick: bool):
    """GPU rows, when torch sees a CUDA device: element-wise against
    a device-to-device copy of the same values (the note gives the share of
    copy bandwidth reached: both read and write every value once), CSR @ dense
    against cuSPARSE through torch plus the manual fill correction, softmax
    against torch.sparse.softmax on the GPU. Every row is timed to the end of
    its kernels (_synced)."""
    if not torch.cuda.is_available():
        return
    cuda = torch.device("cuda")
    side = 1 << 14
    per_row = 64 if quick else 1024  # 1M or 16.8M stored values
    A, _ = stratified(side, side, per_row, 0.5)
    A = A.to(cuda).coalesce()
    values = A._values()
    nse = values.numel()
    copy_bytes = 2 * values.numel() * values.element_size()

    def bandwidth(t_ours, t_copy):
        return (f"GPU exp, {nse:,} stored: {copy_bytes / t_ours / 1e9:.0f} GB/s of values, "
                f"{t_copy / t_ours:.0%} of copy bandwidth ({copy_bytes / t_copy / 1e9:.0f} GB/s; "
                "target >= 70%)")
    yield (f"GPU exp, {nse >> 20}M stored fp32", _synced(lambda: torch.exp(A)),
           "values.clone() (D2D copy)", _synced(lambda: values.clone()), bandwidth)
    yield (f"GPU A * 2 + 1, {nse >> 20}M stored fp32", _synced(lambda: A * 2 + 1),
           "values.clone() (D2D copy)", _synced(lambda: values.clone()))

    m = 4000 if quick else 20000
    fill = 5.0
    Acpu, Ncpu = stratified(m, m, m // 100, fill, seed=4)  # 1%, no m*m permutation
    A_csr = Acpu.to_sparse_csr().to(cuda)
    N0 = torch.sparse_coo_tensor(Ncpu.indices(), Ncpu.values() - fill, Ncpu.shape)
    N0 = N0.coalesce().to_sparse_csr().to(cuda)
    B = torch.randn(m, 64, device=cuda)
    yield (f"GPU A @ B {m}x{m} 1%, n=64, fill 5", _synced(lambda: A_csr @ B),
           "cuSPARSE mm(A0,B)+a*colsum", _synced(lambda: torch.sparse.mm(N0, B) + fill * B.sum(0)))

    rows_ = 10_000 if quick else 100_000
    S, NS = stratified(rows_, 10_000, 100, -float("inf"))
    S, NS = S.to(cuda), NS.to(cuda)
    yield (f"GPU softmax dim 1, {rows_ // 10_000}M stored, fill -inf", _synced(lambda: torch.softmax(S, 1)),
           "torch.sparse.softmax (CUDA)", _synced(lambda: torch.sparse.softmax(NS, 1)))
    yield from bench_graph.gpu_rows(quick)  # the semiring kernels (sf_cuda_semiring.cu)


def layout_rows(quick: bool):
    """CSC, BSR, BSC (RFC.md#compressed-layouts). BSR @ dense with a fill against torch's BSR @
    dense (fill 0) on the same blocks; t() of CSR at two nse (O(1): the two
    rows take the same time); conversions to and from BSR against torch's."""
    m, n = (1024, 64) if quick else (2048, 128)
    g = torch.Generator().manual_seed(7)
    X = torch.randn(m, n, generator=g)
    for bs, share in ((16, 0.01), (16, 0.05), (32, 0.01), (32, 0.05)):
        nb = m // bs
        blocks = torch.randperm(nb * nb, generator=g)[: max(1, int(nb * nb * share))].sort().values
        crow = torch.ops.sparsefill.crow_from_rows((blocks // nb).contiguous(), nb)
        col = (blocks % nb).contiguous()
        values = torch.randn(len(blocks), bs, bs, generator=g)
        N = torch.sparse_bsr_tensor(crow, col, values, (m, m))
        for fill in (0.0, 1.5):
            A = sf.sparse_bsr_tensor(crow, col, values, (m, m), fill_value=fill)
            yield (f"BSR @ dense {m}^2 x {n}, block {bs}, {share:.0%} blocks, fill {fill:g}",
                   lambda A=A: A @ X, "torch BSR @ dense, fill 0", lambda N=N: N @ X)
        # dense @ BSR (torch has none; A: fill 1.5): against torch's BSR @
        # dense of the transpose, built beforehand (the same products).
        NT, Y = N.to_dense().t().to_sparse_bsr(bs), X.t().contiguous()
        yield (f"dense @ BSR {n} x {m}^2, block {bs}, {share:.0%} blocks, fill 1.5",
               lambda A=A, Y=Y: Y @ A, "torch (BSR^T @ dense^T)^T, fill 0",
               lambda NT=NT, Y=Y: (NT @ Y.t()).t())
    for nse in (10_000, 1_000_000):
        C, NC = _random_large(20_000, 20_000, nse, 5.0, seed=8)
        C, NC = C.to_sparse_csr(), NC.to_sparse_csr()
        yield (f"A.t() of CSR, {nse:,} stored", lambda C=C: C.t(), "torch CSR t() (O(1))",
               lambda NC=NC: NC.t())
    D = torch.randn(m, m, generator=g)
    keep = (torch.rand(m // 16, m // 16, generator=g) < 0.05).repeat_interleave(16, 0) \
        .repeat_interleave(16, 1)
    D = torch.where(keep, D, torch.zeros(()))
    csr = sf.to_sparse(D, layout=torch.sparse_csr)
    ncsr = D.to_sparse_csr()
    bsr, nbsr = csr.to_sparse_bsr(16), ncsr.to_sparse_bsr(16)
    yield (f"dense -> BSR {m}^2, block 16, 5%", lambda: sf.to_sparse(
        D, layout=torch.sparse_bsr, blocksize=16), "torch to_sparse_bsr",
        lambda: D.to_sparse_bsr(16))
    yield (f"CSR -> BSR {m}^2, block 16, 5%", lambda: csr.to_sparse_bsr(16),
           "torch CSR to_sparse_bsr", lambda: ncsr.to_sparse_bsr(16))
    yield (f"BSR -> dense {m}^2, block 16, 5%", lambda: bsr.to_dense(), "torch BSR to_dense",
           lambda: nbsr.to_dense())
    yield (f"BSR -> CSR {m}^2, block 16, 5%", lambda: bsr.to_sparse_csr(),
           "torch BSR to_dense().to_sparse_csr()", lambda: nbsr.to_dense().to_sparse_csr())


def peak_bytes(spec: str) -> int:
    """Peak resident memory that one forward+backward of an attention case
    adds, in bytes: a fresh process (`--peak spec`) builds the case, resets
    its high-water mark (VmHWM) and runs it once; torch's CPU allocations are
    not visible to tracemalloc, and forking a process that has started
    torch's threads can hang."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, __file__, "--peak", spec], capture_output=True,
                         text=True, timeout=600)
    return int(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 else -1


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return -1


def _attention_case(S, density, H, d):
    """(ours, dense) forward+backward closures of one attention row."""
    g = torch.Generator().manual_seed(S)
    nse = int(S * S * density)
    linear = torch.randperm(S * S, generator=g)[:nse].sort().values
    idx = torch.stack(torch.unravel_index(linear, (S, S)))
    A = sf.sparse_coo_tensor(idx, torch.zeros(nse), (S, S), fill_value=float("-inf")).coalesce()
    q, k, v = (torch.randn(1, H, S, d, generator=g).requires_grad_() for _ in range(3))
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def ours():
        sdpa(q, k, v, attn_mask=A).sum().backward()

    def dense(M=[]):
        if not M:  # built at the first call, outside the timed runs
            M.append(A.to_dense())
        sdpa(q, k, v, attn_mask=M[0]).sum().backward()
    return ours, dense


def _peak_main(spec: str) -> None:
    S, density, H, d, which = spec.split(",")
    ours, dense = _attention_case(int(S), float(density), int(H), int(d))
    fn = ours if which == "ours" else dense  # dense's first call also builds its mask
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # VmHWM := VmRSS
    before = _status("VmRSS")
    fn()
    print(_status("VmHWM") - before)


def attention_rows(quick: bool):
    """Sparse attention: F.scaled_dot_product_attention forward +
    backward with a SparseFillTensor mask of fill -inf (stored biases 0) on a
    random pattern, against torch's SDPA with the same mask as a dense float
    tensor (-inf off the pattern). One batch, H heads, head dim d. S = 16384
    runs one head with d = 32 at 1% so the dense anchor fits this machine's
    memory (its mask, scores and weights are 1 GiB each) and its timing ends
    in seconds."""
    sizes = [(1024, 0.05, 4, 64), (4096, 0.01, 4, 64), (4096, 0.05, 1, 64)]
    if not quick:
        sizes.append((16384, 0.01, 1, 32))
    for S, density, H, d in sizes:
        case = []  # built at the first call: a skipped row builds nothing

        def get(i, case=case, args=(S, density, H, d)):
            if not case:
                case.extend(_attention_case(*args))
            return case[i]

        def ours(get=get):
            get(0)()

        def dense(get=get):
            get(1)()
        label = f"SDPA fwd+bwd S={S} {density:.0%} H={H} d={d}"
        spec = f"{S},{density},{H},{d}"

        def note(t_ours, t_anchor, label=label, spec=spec):
            # Measured only for rows that ran (--rows, --skip).
            peaks = (peak_bytes(spec + ",ours"), peak_bytes(spec + ",dense"))
            return (f"{label}: peak memory of one fwd+bwd, ours {peaks[0] / 2**20:.0f} MiB, "
                    f"dense SDPA {peaks[1] / 2**20:.0f} MiB (its mask included)")
        yield (label, ours, "dense SDPA, float mask", dense, note)

def _chain(A):
    """The 6-op element-wise chain of the compile rows (public API)."""
    return -(torch.exp(torch.sigmoid(A * 2 + 1)) * 0.5 - 1)


def _chain_components(values, fill):
    """The same chain on a tensor's values and fill (torch.ops.sparsefill):
    what compiles with fullgraph=True (RFC.md#compile-components)."""
    ops = torch.ops.sparsefill
    v, f = ops.mul_scalar(values, fill, 2.0, False)
    v, f = ops.add_scalar(v, f, 1.0, False)
    v, f = ops.sigmoid(v, f)
    v, f = ops.exp(v, f)
    v, f = ops.mul_scalar(v, f, 0.5, False)
    v, f = ops.sub_scalar(v, f, 1.0, False)
    # Unpacked, not the op's tuple returned as is: Inductor then keeps every
    # op of the graph as an external call instead of decomposing them.
    v, f = ops.neg(v, f)
    return v, f


def _attention_block(S, V):
    """The attention block of the sf.compile row: scores on S's CSR pattern
    (fill -inf masks the rest), row softmax, then the values."""
    return torch.softmax(S * 0.125, -1) @ V


class _ChainOnComponents(torch.nn.Module):
    """The components' chain as a module, for torch.export and AOTInductor."""

    def forward(self, values, fill):
        return _chain_components(values, fill)


def _own_code(fn):
    """fn with a code object of its own: Dynamo keeps its cache entries and
    skip marks per code object (compiling `_chain` on a SparseFillTensor
    leaves its frame to eager, RFC.md#compile-graph-breaks)."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__)


def compile_rows(quick: bool):
    """torch.compile: the 6-op chain on n stored values, compiled
    against eager. A SparseFillTensor graph-breaks at each op (RFC.md#compile-graph-breaks),
    so the compiled public API is eager plus Dynamo's overhead; the fullgraph
    route is a function of the components (inductor: the element-wise ops are
    CompositeImplicitAutograd, decomposed into ATen and fused into one loop).
    The small rows: per-call time on 3 elements against the same chain on a
    dense tensor in eager; the anchor rows: torch.compile of that dense
    chain (torch's own floor: one input, one output) and our chain with
    values and fill in one tensor (what one input and one output across
    the graph's boundary cost, docs/design.md#compile-per-call-cost)."""
    n = 100_000 if quick else 1_000_000
    A, _ = random_coo((2 * n,), 0.5, 0.25, seed=4)
    values, fill = A.values(), A.fill_value()
    compiled_api = torch.compile(_chain)
    compiled_parts = torch.compile(_chain_components, fullgraph=True)
    # Each compiles in timeit's warm-up call, outside the timing.
    yield (f"compile 6-op chain, {n:,} stored (graph breaks)", lambda: compiled_api(A),
           "the chain, eager", lambda: _chain(A))
    yield (f"compile 6-op chain, {n:,} stored (components)", lambda: compiled_parts(values, fill),
           "the chain, eager", lambda: _chain(A))
    # sf.compile: the public API's chain as ONE graph (traced without Dynamo,
    # compiled by Inductor), on the SparseFillTensor itself.
    whole = sf.compile(_own_code(_chain))
    yield (f"compile 6-op chain, {n:,} stored (sf.compile)", lambda: whole(A),
           "the chain, eager", lambda: _chain(A))
    # torch's own floor for that goal: the chain on a dense tensor of n
    # values, compiled vs eager (exp and sigmoid bound the fused loop).
    dense_n = values.detach().clone()
    compiled_dense_n = torch.compile(_own_code(_chain), fullgraph=True)
    yield (f"compile 6-op chain, {n:,} dense values (torch.compile's floor)",
           lambda: compiled_dense_n(dense_n), "the chain on dense, eager",
           lambda: _chain(dense_n))
    # The CSR attention block (fill -inf), forward and backward of values,
    # fill and V, compiled whole against eager.
    m = 1000 if quick else 4000
    P, _ = random_coo((m, m), 0.01, 0.0, seed=5)
    P = P.to_sparse_csr()
    S = sf.sparse_csr_tensor(P.crow_indices(), P.col_indices(), P.values() * 0.01, (m, m),
                             fill_value=float("-inf")).requires_grad_()
    V = torch.randn(m, 64, requires_grad=True)
    leaves = [S._values(), S._fill_value(), V]
    block = sf.compile(_attention_block)

    def fwd_bwd(fn):
        return lambda: torch.autograd.grad(fn(S, V).sum(), leaves, allow_unused=True)
    yield (f"sf.compile attention fwd+bwd {m}x{m} 1% CSR", fwd_bwd(block),
           "the block, eager", fwd_bwd(_attention_block))
    tiny, _ = random_coo((3,), 1.0, 5.0, seed=3)
    tv, tf = tiny.values(), tiny.fill_value()
    dense = tiny.to_dense()
    compiled_tiny = torch.compile(_chain_components, fullgraph=True)
    yield ("compile 6-op chain, 3 elements (components)", lambda: compiled_tiny(tv, tf),
           "the chain on dense, eager", lambda: _chain(dense))
    compiled_dense = torch.compile(_own_code(_chain), fullgraph=True)
    yield ("compile 6-op chain, 3 elements, dense (torch.compile's floor)",
           lambda: compiled_dense(dense), "the chain on dense, eager", lambda: _chain(dense))
    # A scalar fill and no dense part: the fill takes the values' arithmetic,
    # so one tensor [values, fill] carries both through the same chain.
    packed = torch.cat([tv, tf.reshape(1)])
    compiled_packed = torch.compile(_own_code(_chain), fullgraph=True)
    yield ("compile 6-op chain, 3 elements (values and fill in one tensor)",
           lambda: compiled_packed(packed), "the chain on dense, eager", lambda: _chain(dense))
    # Ahead of time (AOTInductor): the exported chain compiled into a shared
    # library, called without torch.compile's per-call entry (Dynamo's frame
    # hook, guards, AOTAutograd's wrappers); inference only.
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch's own, from its pytree
        program = torch.export.export(_ChainOnComponents(), (tv, tf))
        package = torch._inductor.aoti_compile_and_package(
            program, package_path=str(Path(tmp) / "chain.pt2"))
        aot = torch._inductor.aoti_load_package(package)
        yield ("compile 6-op chain, 3 elements (components, AOTInductor)",
               lambda: aot(tv, tf), "the chain on dense, eager", lambda: _chain(dense))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for smoke tests")
    parser.add_argument("--rows", default="", help="only rows whose name contains this")
    parser.add_argument("--skip", default="", help="leave out rows whose name contains this")
    parser.add_argument("--no-results", action="store_true",
                        help="do not write bench/results (a run with --rows or --quick never does)")
    parser.add_argument("--gpu-only", action="store_true",
                        help="build and time only the GPU rows (the other rows' setup, an "
                             "AOTInductor compile among it, is skipped; make gpu-check)")
    parser.add_argument("--peak", default="", help=argparse.SUPPRESS)  # see peak_bytes
    parser.add_argument("--memory", default="", help=argparse.SUPPRESS)  # see memory_rows
    args = parser.parse_args()
    if args.peak:
        return _peak_main(args.peak)
    if args.memory:
        return _memory_main(args.memory, args.quick)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    header = (f"{'operation':<44} {'ours':>11}   {'anchor':<26} {'anchor time':>11}  {'ratio':>6}"
              f"  goal")
    print(header)
    print("-" * len(header))
    notes, results = [], []
    if _pydata() is None:
        notes.append("pydata/sparse rows: skipped (import sparse failed)")
    families = [gpu_rows] if args.gpu_only else [
        rows, products_rows, finiteness_rows, reduction_rows, peer_rows, layout_rows,
        attention_rows, compile_rows, bench_order.order_rows, graph_rows, gpu_rows]
    for name, ours, anchor_name, anchor, *elements in itertools.chain(
            *(family(args.quick) for family in families)):
        if args.rows not in name or (args.skip and args.skip in name):
            continue
        t_ours, t_anchor = time_pair(ours, anchor)
        ratio = t_ours / t_anchor
        goal = goal_of(name, anchor_name)
        mark = "" if goal is None else f"<= {goal:g} {'met' if ratio <= goal else 'MISSED'}"
        print(f"{name:<44} {fmt(t_ours):>11}   {anchor_name:<26} {fmt(t_anchor):>11}  "
              f"{ratio:6.2f}  {mark}", flush=True)
        results.append({"name": name, "ours_s": t_ours, "anchor": anchor_name,
                        "anchor_s": t_anchor, "ratio": ratio, "goal": goal})
        if elements and callable(elements[0]):
            notes.append(elements[0](t_ours, t_anchor))
        elif elements:
            notes.append(f"{name}: {t_ours / elements[0] * 1e9:.1f} ns per union element "
                         f"(torch: {t_anchor / elements[0] * 1e9:.1f} ns), {elements[0]:,} in the union")
    for note in notes:
        print(note)
    memory = []
    if not args.gpu_only and (not args.rows or "memory" in args.rows):
        print("peak memory of one call (inputs + added peak) / (inputs + output), goal <= 2:")
        for r in memory_rows(args.quick):
            memory.append(r)
            if "error" in r:
                print(f"  {r['name']}: failed: {r['error']}")
                continue
            print(f"  {r['name']:<28} inputs {r['inputs'] / 2**20:8.1f} MiB, output "
                  f"{r['output'] / 2**20:8.1f} MiB, added peak {r['added'] / 2**20:8.1f} MiB: "
                  f"{r['ratio']:.2f} {'met' if r['ratio'] <= r['goal'] else 'MISSED'}")
    if not torch.cuda.is_available():
        print("GPU rows: not run (torch.cuda.is_available() is False; `make cuda-bench` on a GPU machine)")
    if not (args.rows or args.quick or args.no_results or args.gpu_only):
        write_results(results, memory, notes)
        print(f"wrote {RESULTS / 'latest.json'} and {RESULTS / 'ratios.png'}")


if __name__ == "__main__":
    main()
