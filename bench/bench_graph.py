"""The graph domain's rows (RFC.md#indefinite-fill), python-graphblas
(SuiteSparse:GraphBLAS, 2 threads) or scipy.sparse.csgraph beside them on
the same matrices: mxv min_plus, the masked plus_pair triangle count,
ewise_add(min), Bellman-Ford to convergence, and today's union rule
``A + B`` (fills 1 and 2; in COO, and in CSR as GraphBLAS stores it)
against GraphBLAS's ewise_union. bench.py runs them in its table;
``python bench/bench_graph.py [--quick]`` alone.
"""
from __future__ import annotations

import sys

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph as csgraph
import torch

import torch_sparsefill as sf


def _graphblas():
    try:
        import graphblas as gb
    except ImportError:
        return None
    gb.ss.config["nthreads"] = 2
    return gb


def power_law(n: int, nse: int, seed: int, symmetric=False):
    """(rows, cols, weights) of a graph with skewed degrees, coalesced, no
    self-loops, about `nse` edges."""
    g = torch.Generator().manual_seed(seed)
    src = (torch.rand(nse, generator=g) ** 2 * n).long().clamp(max=n - 1)
    dst = torch.randint(0, n, (nse,), generator=g)
    if symmetric:
        src, dst = torch.cat([src, dst]), torch.cat([dst, src])
    keep = src != dst
    key = torch.unique(src[keep] * n + dst[keep])
    return key // n, key % n, torch.rand(key.shape[0], generator=g, dtype=torch.float64) + 0.1


def _ours(rows, cols, w, n):
    return sf.sparse_coo_tensor(torch.stack([rows, cols]), w, (n, n), fill_value=sf.indefinite,
                                is_coalesced=True).to_sparse_csr()


def _theirs(gb, rows, cols, w, n):
    return gb.Matrix.from_coo(rows.numpy(), cols.numpy(), w.numpy(), nrows=n, ncols=n)


def bellman_ford(A, source: int):
    n = A.shape[0]
    d = sf.sparse_coo_tensor([[source]], torch.zeros(1, dtype=A.dtype), (n,),
                             fill_value=sf.indefinite)
    for _ in range(n):
        new = sf.ewise_add(d, sf.mxm(d, A, "min_plus"), "min")
        if new.nse() == d.nse() and torch.equal(new.values(), d.values()):
            return d
        d = new
    return d


def graph_rows(quick: bool):
    """(name, ours, anchor name, anchor) rows; those needing python-graphblas
    are left out where it is absent."""
    gb = _graphblas()
    n, nse = (20_000, 120_000) if quick else (200_000, 1_200_000)
    rows, cols, w = power_law(n, nse, seed=1)
    A = _ours(rows, cols, w, n)
    label = f"{n // 1000}k nodes, {A.nse():,} edges"
    x = torch.rand(n, dtype=torch.float64)
    if gb is not None:
        M = _theirs(gb, rows, cols, w, n)
        xv = gb.Vector.from_dense(x.numpy())
        yield (f"graph mxv min_plus, {label}", lambda: sf.mxm(A, x, "min_plus"),
               "python-graphblas mxv", lambda: M.mxv(xv, gb.semiring.min_plus).new())
        r2, c2, w2 = power_law(n, nse, seed=2)
        B, MB = _ours(r2, c2, w2, n), _theirs(gb, r2, c2, w2, n)
        yield (f"graph ewise_add(min), {label}", lambda: sf.ewise_add(A, B, "min"),
               "python-graphblas ewise_add", lambda: M.ewise_add(MB, gb.binary.min).new())
        sr, sc, sw = power_law(n, nse // 2, seed=3, symmetric=True)
        keep = sc < sr
        L = _ours(sr[keep], sc[keep], torch.ones(int(keep.sum()), dtype=torch.int64), n)
        ML = gb.select.tril(_theirs(gb, sr, sc, torch.ones_like(sw).long(), n), -1).new()
        yield (f"graph triangle count plus_pair, {L.nse():,} edges",
               lambda: sf.reduce(sf.mxm(L, L, "plus_pair", mask=L)),
               "python-graphblas masked mxm",
               lambda: ML.mxm(ML, gb.semiring.plus_pair).new(mask=ML.S).reduce_scalar().new())
        m_u, nse_u = (10_000, 100_000) if quick else (100_000, 5_000_000)
        U1, U2 = _union_operands(m_u, nse_u)
        G1, G2 = (_theirs(gb, *_coo(U), m_u) for U in (U1, U2))
        yield (f"graph union A + B fills 1, 2, {nse_u:,} + {nse_u:,}", lambda: U1 + U2,
               "python-graphblas ewise_union", lambda: G1.ewise_union(G2, gb.binary.plus, 1., 2.).new())
        # The same sum in CSR, GraphBLAS's own layout: both sides then write
        # columns and values only. A COO result also writes a row index per
        # element (80 MB more here), which is torch's layout, not the merge.
        C1, C2 = U1.to_sparse_csr(), U2.to_sparse_csr()
        yield (f"graph union A + B fills 1, 2, CSR, {nse_u:,} + {nse_u:,}", lambda: C1 + C2,
               "python-graphblas ewise_union", lambda: G1.ewise_union(G2, gb.binary.plus, 1., 2.).new())
    nb, eb = (2_000, 10_000) if quick else (20_000, 100_000)
    br, bc, bw = power_law(nb, eb, seed=4)
    BA = _ours(br, bc, bw, nb)
    S = scipy.sparse.csr_array((bw.numpy(), (br.numpy(), bc.numpy())), shape=(nb, nb))
    yield (f"graph Bellman-Ford, {nb // 1000}k nodes, {BA.nse():,} edges",
           lambda: bellman_ford(BA, 0), "scipy shortest_path BF",
           lambda: csgraph.shortest_path(S, method="BF", indices=0))


def gpu_rows(quick: bool):
    """GPU rows of the CUDA semiring kernels (sf_cuda_semiring.cu), when torch
    sees a CUDA device: mxv min_plus against torch's scatter_reduce (amin)
    of the same terms on the GPU, and the masked plus_pair triangle count
    against the same call on the CPU (the C kernel, torch's threads)."""
    if not torch.cuda.is_available():
        return
    cuda = torch.device("cuda")

    def synced(fn):
        def run():
            fn()
            torch.cuda.synchronize()
        return run
    n, nse = (20_000, 120_000) if quick else (200_000, 1_200_000)
    rows, cols, w = power_law(n, nse, seed=1)
    A = _ours(rows, cols, w, n).to(cuda)
    x = torch.rand(n, dtype=torch.float64, device=cuda)
    r, c, v = rows.to(cuda), cols.to(cuda), w.to(cuda)

    def by_scatter():  # present rows only would need one more pass: the anchor is kinder
        out = torch.full((n,), float("inf"), dtype=torch.float64, device=cuda)
        return out.scatter_reduce_(0, r, v + x[c], "amin")
    yield (f"GPU graph mxv min_plus, {n // 1000}k nodes, {A.nse():,} edges",
           synced(lambda: sf.mxm(A, x, "min_plus")),
           "torch scatter_reduce amin (CUDA)", synced(by_scatter))
    sr, sc, sw = power_law(n, nse // 2, seed=3, symmetric=True)
    keep = sc < sr
    L = _ours(sr[keep], sc[keep], torch.ones(int(keep.sum()), dtype=torch.int64), n)
    Lg = L.to(cuda)
    yield (f"GPU graph triangle count plus_pair, {L.nse():,} edges",
           synced(lambda: sf.reduce(sf.mxm(Lg, Lg, "plus_pair", mask=Lg))),
           "the same on the CPU (C kernel)", lambda: sf.reduce(sf.mxm(L, L, "plus_pair", mask=L)))


def memory_case(name: str, quick: bool):
    """(inputs, op) of one memory row of the graph domain, or None: the
    masked product must stay within 2x (inputs + output) although its
    unmasked result would be several times larger."""
    n, nse = (20_000, 120_000) if quick else (200_000, 1_200_000)
    if name == "graph mxv min_plus":
        A = _ours(*power_law(n, nse, seed=1), n)
        x = torch.rand(n, dtype=torch.float64)
        return (A, x), lambda: sf.mxm(A, x, "min_plus")
    if name == "graph ewise_add(min)":
        A, B = (_ours(*power_law(n, nse, seed=s), n) for s in (1, 2))
        return (A, B), lambda: sf.ewise_add(A, B, "min")
    if name == "graph masked plus_pair (triangles)":
        sr, sc, _ = power_law(n, nse // 2, seed=3, symmetric=True)
        keep = sc < sr
        L = _ours(sr[keep], sc[keep], torch.ones(int(keep.sum()), dtype=torch.int64), n)
        return (L,), lambda: sf.mxm(L, L, "plus_pair", mask=L)
    return None


MEMORY_CASES = ("graph mxv min_plus", "graph ewise_add(min)", "graph masked plus_pair (triangles)")


def _union_operands(m, nse):
    g = torch.Generator().manual_seed(7)
    out = []
    for fill in (1., 2.):
        key = torch.unique(torch.randint(0, m * m, (nse,), generator=g))
        out.append(sf.sparse_coo_tensor(torch.stack([key // m, key % m]),
                                        torch.rand(key.shape[0], generator=g, dtype=torch.float64),
                                        (m, m), fill_value=fill, is_coalesced=True))
    return out


def _coo(U):
    idx = U.indices()
    return idx[0], idx[1], U.values()


def main(argv=None) -> int:
    import bench  # the table's timing rule (time_pair), run from bench/
    quick = "--quick" in (argv if argv is not None else sys.argv[1:])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; python-graphblas "
          f"{'absent' if _graphblas() is None else 'present'}")
    for name, ours, anchor_name, anchor in graph_rows(quick):
        t_o, t_a = bench.time_pair(ours, anchor, repeat=3)
        print(f"{name:<52} {bench.fmt(t_o):>10}  {anchor_name:<30} {bench.fmt(t_a):>10}  "
              f"{t_o / t_a:6.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
