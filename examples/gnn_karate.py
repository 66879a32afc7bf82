"""Graph layers on Zachary's karate club with SparseFillTensor adjacencies,
each trained a few steps beside the same layer on the dense matrix.

- GCN with a background weight: the adjacency (plus self-loops) stores 1 on
  every edge and has fill `--background` (a weak link between every pair of
  members); the symmetric normalisation D^-1/2 A D^-1/2 counts that
  background in the degrees, as the dense matrix does. It is applied as
  ``dinv * (A @ (dinv * H))``, which keeps A sparse.
- GAT with fill -inf: attention logits are computed on the edges only
  (a SparseFillTensor of fill -inf), softmax runs along each row's edges,
  and the weights multiply the features.

Prints the losses of both twins per step and the largest parameter
difference; exits non-zero when they part.

Run: python examples/gnn_karate.py [--steps 5] [--background 0.01]
"""
from __future__ import annotations

import argparse
import copy
import math
import sys
from pathlib import Path

import scipy.io
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_sparsefill as sf

KARATE = Path(__file__).resolve().parents[1] / "test" / "data" / "matrices" / "karate.mtx"


def karate_edges() -> torch.Tensor:
    """(2, 156) COO indices of the karate graph, both directions (the file
    is symmetric: mmread gives both triangles)."""
    coo = scipy.io.mmread(str(KARATE)).tocoo()
    return torch.stack([torch.from_numpy(coo.row).long(), torch.from_numpy(coo.col).long()])


def dense_of(A):
    return A.to_dense() if isinstance(A, sf.SparseFillTensor) else A


class GCN(nn.Module):
    """Two graph convolutions: H' = D^-1/2 A D^-1/2 H W."""

    def __init__(self, dims):
        super().__init__()
        self.lins = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))

    def forward(self, x, A):
        deg = dense_of(A.sum(1))
        dinv = deg.pow(-0.5).unsqueeze(1)
        for i, lin in enumerate(self.lins):
            x = dinv * (A @ (dinv * lin(x)))
            if i < len(self.lins) - 1:
                x = F.relu(x)
        return x


class GAT(nn.Module):
    """One single-head graph attention layer: softmax over each node's edges
    of LeakyReLU(a1 . h_i + a2 . h_j), then the weighted sum of h_j."""

    def __init__(self, d_in, d_out):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out, bias=False)
        self.a1, self.a2 = nn.Linear(d_out, 1, bias=False), nn.Linear(d_out, 1, bias=False)

    def forward(self, x, edges, n, sparse: bool):
        h = self.lin(x)
        r, c = edges
        logits = F.leaky_relu(self.a1(h)[r, 0] + self.a2(h)[c, 0], 0.2)
        if sparse:
            E = sf.sparse_coo_tensor(edges, logits, (n, n), fill_value=-math.inf)
        else:
            E = torch.full((n, n), -math.inf, dtype=h.dtype).index_put((r, c), logits)
        return torch.softmax(E, dim=1) @ h


def train_twins(name, make, run, steps):
    """Train one model and its deep copy on the sparse and dense inputs; the
    largest parameter difference over the steps."""
    torch.manual_seed(0)
    models = [make()]
    models.append(copy.deepcopy(models[0]))
    opts = [torch.optim.Adam(m.parameters(), lr=0.01) for m in models]
    worst = 0.0
    for step in range(steps):
        losses = []
        for model, opt, sparse in zip(models, opts, (True, False)):
            opt.zero_grad()
            loss = run(model, sparse)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        diff = max((p - q).abs().max().item()
                   for p, q in zip(models[0].parameters(), models[1].parameters()))
        worst = max(worst, diff)
        print(f"{name} step {step}: loss sparse {losses[0]:.10f}  dense {losses[1]:.10f}  "
              f"max parameter difference {diff:.2e}")
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--background", type=float, default=0.01)
    args = parser.parse_args()
    edges = karate_edges()
    n = int(edges.max()) + 1
    loops = torch.arange(n).repeat(2, 1)
    both = torch.cat([edges, loops], 1)
    A = sf.sparse_coo_tensor(both, torch.ones(both.shape[1], dtype=torch.float64), (n, n),
                             fill_value=args.background).coalesce().to_sparse_csr()
    D = A.to_dense()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 8, generator=g, dtype=torch.float64)
    labels = torch.randint(0, 2, (n,), generator=g)
    print(f"karate: {n} members, {edges.shape[1] // 2} friendships, background weight "
          f"{args.background}")

    def gcn_loss(model, sparse):
        return F.cross_entropy(model(x, A if sparse else D), labels)

    def gat_loss(model, sparse):
        return F.cross_entropy(model(x, both, n, sparse), labels)

    worst = max(train_twins("GCN", lambda: GCN([8, 16, 2]).double(), gcn_loss, args.steps),
                train_twins("GAT", lambda: GAT(8, 2).double(), gat_loss, args.steps))
    ok = worst < 1e-10
    print("parity with dense:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
