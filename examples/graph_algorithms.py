"""Graph algorithms on indefinite SparseFillTensors (non-edges are absent,
not 0 or inf), each checked against scipy.sparse.csgraph or a dense
reference:

- BFS levels: ``any_pair`` vector-matrix products masked by the complement
  of the visited nodes;
- single-source shortest paths: Bellman-Ford on ``min_plus``;
- connected components: label propagation on ``min_second``;
- PageRank with dangling nodes on ``plus_times``;
- triangle count: ``plus_pair`` masked by the strict lower triangle;
- training edge weights through a shortest-path loss (autograd through
  ``min_plus``), beside the same model on the dense matrix with +inf
  non-edges.

Prints each result beside its reference; exits non-zero on a mismatch.

Run: python examples/graph_algorithms.py [--n 300] [--steps 20]
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph as csgraph
import torch

import torch_sparsefill as sf


def random_graph(n: int, avg_degree: float = 4.0, seed: int = 0, symmetric=False):
    """A directed graph with a skewed (power-law-like) in-degree: (2, nse)
    coalesced edges without self-loops and positive float64 weights."""
    g = torch.Generator().manual_seed(seed)
    m = int(n * avg_degree)
    src = torch.randint(0, n, (m,), generator=g)
    dst = (torch.rand(m, generator=g) ** 2 * n).long().clamp(max=n - 1)
    if symmetric:
        src, dst = torch.cat([src, dst]), torch.cat([dst, src])
    keep = src != dst
    key = torch.unique(src[keep] * n + dst[keep])
    edges = torch.stack([key // n, key % n])
    weights = torch.rand(edges.shape[1], generator=g, dtype=torch.float64) * 9 + 1
    return edges, weights


def adjacency(edges, weights, n):
    """The indefinite CSR adjacency: weights on the edges, absent elsewhere."""
    return sf.sparse_coo_tensor(edges, weights, (n, n), fill_value=sf.indefinite,
                                is_coalesced=True).to_sparse_csr()


def bfs_levels(A, source: int) -> torch.Tensor:
    """Level of every node from `source` (-1: unreachable)."""
    n = A.shape[0]
    levels = sf.sparse_coo_tensor([[source]], [0], (n,), fill_value=sf.indefinite)
    frontier = levels
    depth = 0
    while frontier.nse():
        depth += 1
        # the nodes one hop from the frontier that no level has reached yet
        frontier = sf.mxm(frontier, A, "any_pair", mask=levels, complement=True)
        levels = sf.ewise_add(levels, sf.apply(frontier, lambda v: torch.full_like(v, depth)))
    return levels.to_dense(fill=-1)


def bellman_ford(A, source: int, iterations=None):
    """Shortest-path distances from `source` (+inf: unreachable); stops at
    the fixpoint, or after `iterations` relaxations (differentiable)."""
    n = A.shape[0]
    d = sf.sparse_coo_tensor([[source]], torch.zeros(1, dtype=A.dtype), (n,),
                             fill_value=sf.indefinite)
    for step in range(n if iterations is None else iterations):
        new = sf.ewise_add(d, sf.mxm(d, A, "min_plus"), "min")
        if iterations is None and new.nse() == d.nse() and torch.equal(new.values(), d.values()):
            break
        d = new
    return d.to_dense(fill=float("inf"))


def connected_components(A) -> torch.Tensor:
    """A component label per node: the smallest node index of its component
    (A symmetric)."""
    n = A.shape[0]
    labels = torch.arange(n)
    pattern = sf.apply(A, "one").long()
    while True:
        nearest = sf.mxm(pattern, labels, "min_second").to_dense(fill=n)
        new = torch.minimum(labels, nearest)
        new = torch.minimum(new, new[new])  # pointer jumping: fewer rounds
        if torch.equal(new, labels):
            return labels
        labels = new


def pagerank(A, alpha=0.85, tol=1e-12, max_iter=1000) -> torch.Tensor:
    """PageRank with a uniform jump; a dangling node's rank spreads evenly."""
    n = A.shape[0]
    out_degree = sf.reduce(sf.apply(A, "one"), 1, "plus").to_dense(fill=0).double()
    P = sf.apply(A, "one").double()
    rows = P.to_sparse_coo().indices()[0]
    P = sf.sparse_coo_tensor(P.to_sparse_coo().indices(), 1 / out_degree[rows], (n, n),
                             fill_value=sf.indefinite, is_coalesced=True).to_sparse_csr()
    dangling = out_degree == 0
    r = torch.full((n,), 1 / n, dtype=torch.float64)
    for _ in range(max_iter):
        spread = sf.mxm(r, P, "plus_times").to_dense(fill=0.)
        new = (1 - alpha) / n + alpha * (spread + r[dangling].sum() / n)
        if (new - r).abs().sum() < tol:
            return new
        r = new
    return r


def triangle_count(A) -> int:
    """Triangles of the undirected graph A (symmetric, no self-loops)."""
    L = sf.select(sf.apply(A, "one").long(), "tril", -1)
    counts = sf.mxm(L, L, "plus_pair", mask=L)
    total = sf.reduce(counts)
    return 0 if total is sf.indefinite else int(total)


def _scipy(edges, weights, n):
    return scipy.sparse.csr_array((weights.numpy(), (edges[0].numpy(), edges[1].numpy())),
                                  shape=(n, n))


def _check(name, ok, detail=""):
    print(f"{name:<28} {'agrees' if ok else 'DIFFERS'} {detail}")
    return ok


def run(n: int, steps: int) -> bool:
    ok = True
    edges, weights = random_graph(n, seed=1)
    A, M = adjacency(edges, weights, n), _scipy(edges, weights, n)
    ref = csgraph.shortest_path(M, unweighted=True, indices=0)
    got = bfs_levels(A, 0)
    ok &= _check("BFS levels", np.array_equal(np.where(np.isinf(ref), -1, ref),
                                              got.numpy()), f"(max level {int(got.max())})")
    ref = csgraph.shortest_path(M, method="BF", indices=0)
    got = bellman_ford(A, 0)
    ok &= _check("Bellman-Ford", np.allclose(ref, got.numpy(), rtol=1e-12, atol=0),
                 f"({int(np.isfinite(ref).sum())} reachable)")
    sedges, sweights = random_graph(n, avg_degree=1.0, seed=2, symmetric=True)
    S = adjacency(sedges, sweights, n)
    count, labels = csgraph.connected_components(_scipy(sedges, sweights, n), directed=False)
    canon = torch.from_numpy(labels)
    canon = torch.full((count,), n).scatter_reduce(0, canon, torch.arange(n), "amin")[canon]
    got = connected_components(S)
    ok &= _check("connected components", torch.equal(got, canon), f"({count} components)")
    # PageRank: the dense linear system of the same Markov chain
    dense = torch.zeros(n, n, dtype=torch.float64)
    dense[edges[0], edges[1]] = 1.
    deg = dense.sum(1, keepdim=True)
    T = torch.where(deg > 0, dense / deg.clamp(min=1), 1. / n)
    alpha = 0.85
    ref = torch.linalg.solve(torch.eye(n, dtype=torch.float64) - alpha * T.T,
                             torch.full((n,), (1 - alpha) / n, dtype=torch.float64))
    got = pagerank(A, alpha)
    ok &= _check("PageRank", torch.allclose(got, ref / ref.sum(), rtol=1e-8, atol=1e-12),
                 f"({int((deg == 0).sum())} dangling)")
    tedges, tweights = random_graph(n, avg_degree=3.0, seed=4, symmetric=True)
    sym = torch.zeros(n, n, dtype=torch.float64).index_put_((tedges[0], tedges[1]),
                                                            torch.tensor(1., dtype=torch.float64))
    ref = int(torch.trace(sym @ sym @ sym) / 6)
    got = triangle_count(adjacency(tedges, tweights, n))
    ok &= _check("triangle count", got == ref, f"({got} triangles)")
    ok &= train_edge_weights(n=min(n, 60), steps=steps)
    return bool(ok)


def train_edge_weights(n: int, steps: int) -> bool:
    """Learn edge weights so that shortest-path distances from node 0 match
    those of hidden true weights; the same model on the dense matrix (+inf
    non-edges, distances relaxed by ``(d[:, None] + W).amin(0)``) trains
    beside it and must follow it step by step."""
    edges, true_w = random_graph(n, seed=3)
    target = bellman_ford(adjacency(edges, true_w, n), 0)
    reach = torch.isfinite(target)
    raw = torch.zeros(edges.shape[1], dtype=torch.float64, requires_grad=True)
    raw_dense = raw.detach().clone().requires_grad_()
    opt = torch.optim.SGD([raw], lr=0.05)
    opt_dense = torch.optim.SGD([raw_dense], lr=0.05)
    worst = 0.0
    first = last = None
    for step in range(steps):
        w = torch.nn.functional.softplus(raw) + 0.1
        d = bellman_ford(adjacency(edges, w, n), 0, iterations=n - 1)
        loss = ((d[reach] - target[reach]) ** 2).mean()
        wd = torch.nn.functional.softplus(raw_dense) + 0.1
        W = torch.full((n, n), float("inf"), dtype=torch.float64).index_put(
            (edges[0], edges[1]), wd)
        dd = torch.full((n,), float("inf"), dtype=torch.float64).index_put(
            (torch.tensor([0]),), torch.zeros(1, dtype=torch.float64))
        for _ in range(n - 1):
            dd = torch.minimum(dd, (dd[:, None] + W).amin(0))
        loss_dense = ((dd[reach] - target[reach]) ** 2).mean()
        for o, lo in ((opt, loss), (opt_dense, loss_dense)):
            o.zero_grad()
            lo.backward()
            o.step()
        worst = max(worst, abs(loss.item() - loss_dense.item()),
                    float((raw - raw_dense).detach().abs().max()))
        first = loss.item() if first is None else first
        last = loss.item()
    return _check("train edge weights", worst < 1e-9 and (steps < 2 or last < first),
                  f"(loss {first:.3f} -> {last:.3f}, largest gap to dense {worst:.1e})")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=300, help="nodes")
    p.add_argument("--steps", type=int, default=20, help="training steps")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    return 0 if run(args.n, args.steps) else 1


if __name__ == "__main__":
    sys.exit(main())
