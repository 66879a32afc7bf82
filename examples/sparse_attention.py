"""Sparse attention with a SparseFillTensor mask: a Transformer block trained
a few steps on a local + global pattern, next to the same block trained with
torch's dense masked attention from the same initialisation.

The mask is a SparseFillTensor of fill -inf (an additive mask: every pair
off the pattern is excluded) whose stored values are 0. torch's
F.scaled_dot_product_attention routes it to the library's sparse attention,
which computes only the stored scores (O(nse) memory, never S x S); the dense
twin gets the same mask as an S x S float tensor. The script prints, per
step, both losses and the largest difference of their parameters; it exits
non-zero when they part.

Run: python examples/sparse_attention.py [--seq 256] [--steps 5]
"""
from __future__ import annotations

import argparse
import copy
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_sparsefill as sf


def local_global_mask(seq: int, window: int, n_global: int) -> sf.SparseFillTensor:
    """Each position sees its `window` neighbours on either side; the first
    `n_global` positions see and are seen by everyone."""
    i = torch.arange(seq)
    near = (i[:, None] - i[None, :]).abs() <= window
    glob = (i[:, None] < n_global) | (i[None, :] < n_global)
    keep = near | glob
    idx = keep.nonzero().t()
    return sf.sparse_coo_tensor(idx, torch.zeros(idx.shape[1], dtype=torch.float64), (seq, seq),
                                fill_value=-math.inf)


class Block(nn.Module):
    """Pre-norm Transformer block: multi-head attention with a mask, then an MLP."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(b, s, 3, self.heads, d // self.heads) \
            .permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(att.transpose(1, 2).reshape(b, s, d))
        return x + self.mlp(self.norm2(x))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    dim, heads, batch = 32, 4, 2
    mask = local_global_mask(args.seq, window=8, n_global=4)
    dense_mask = mask.to_dense()
    sparse_model = Block(dim, heads).double()
    dense_model = copy.deepcopy(sparse_model)
    opt_s = torch.optim.SGD(sparse_model.parameters(), lr=0.05)
    opt_d = torch.optim.SGD(dense_model.parameters(), lr=0.05)
    x = torch.randn(batch, args.seq, dim, dtype=torch.float64)
    target = torch.randn(batch, args.seq, dim, dtype=torch.float64)
    print(f"seq {args.seq}, pattern {mask._nnz()} of {args.seq ** 2} pairs "
          f"({mask._nnz() / args.seq ** 2:.1%}), {heads} heads")
    worst = 0.0
    for step in range(args.steps):
        losses = []
        for model, opt, m in ((sparse_model, opt_s, mask), (dense_model, opt_d, dense_mask)):
            opt.zero_grad()
            loss = F.mse_loss(model(x, m), target)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        diff = max((p - q).abs().max().item()
                   for p, q in zip(sparse_model.parameters(), dense_model.parameters()))
        worst = max(worst, diff)
        print(f"step {step}: loss sparse {losses[0]:.10f}  dense {losses[1]:.10f}  "
              f"max parameter difference {diff:.2e}")
    ok = worst < 1e-10
    print("parity with dense masked attention:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
