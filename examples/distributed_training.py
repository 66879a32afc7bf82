"""Data-parallel training and a row-sharded product on two processes (gloo
on 127.0.0.1), each checked against one process.

- A model with a SparseFillTensor weight (fill 0.1: a background strength
  between every input and output) and a SparseFillTensor buffer, trained
  with ``sfd.DistributedDataParallel``: each rank sees half of every batch;
  the weights then equal those of one process trained on the whole batches.
- ``A @ B`` with A (CSR, fill -0.2) and B held as row blocks, one per rank:
  each rank computes its rows; their concatenation is the product.

Prints what each rank computed and the largest difference from one
process; exits non-zero when they part.

Run: python examples/distributed_training.py [--steps 5]
"""
from __future__ import annotations

import argparse
import datetime
import multiprocessing
import socket
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

import torch_sparsefill as sf
import torch_sparsefill.distributed as sfd


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        idx = torch.randint(0, 16, (2, 40), generator=g)
        weight = sf.sparse_coo_tensor(idx, torch.randn(40, generator=g), (16, 16),
                                      fill_value=0.1).coalesce()
        self.weight = torch.nn.Parameter(weight)
        self.register_buffer("gain", sf.full((16,), 0.5) * 2.0)
        self.head = torch.nn.Linear(16, 1)

    def forward(self, x):
        return self.head(torch.tanh(F.linear(x, self.weight)) * self.gain.to_dense())


def batches(steps):
    g = torch.Generator().manual_seed(1)
    return [(torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g))
            for _ in range(steps)]


def train(model, data, part=slice(None)):
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for x, y in data:
        opt.zero_grad()
        F.mse_loss(model(x[part]), y[part]).backward()
        opt.step()


def product_operands():
    g = torch.Generator().manual_seed(2)
    idx = torch.randint(0, 12, (2, 30), generator=g)
    A = sf.sparse_coo_tensor(idx, torch.randn(30, generator=g), (12, 12), fill_value=-0.2)
    return A.coalesce().to_sparse(layout=torch.sparse_csr), torch.randn(12, 3, generator=g)


def rank_main(rank, world, port, steps, queue):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    try:
        torch.manual_seed(0)
        local = Model()
        model = sfd.DistributedDataParallel(local)
        half = 8 // world
        train(model, batches(steps), slice(rank * half, (rank + 1) * half))
        A, B = product_operands()
        out = sfd.matmul_row_sharded(sfd.shard_rows(A), sfd.shard_rows(B))
        # lists: a tensor would travel by shared memory, gone when this process ends
        queue.put((rank, local.weight.to_dense().detach().tolist(), out.detach().tolist()))
    finally:
        dist.destroy_process_group()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=5)
    args = ap.parse_args(argv)
    world = 2
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    procs = [ctx.Process(target=rank_main, args=(r, world, port, args.steps, queue))
             for r in range(world)]
    for p in procs:
        p.start()
    results = {r: (torch.tensor(w), torch.tensor(out))
               for r, w, out in (queue.get(timeout=120) for _ in procs)}
    for p in procs:
        p.join(30)
    torch.manual_seed(0)
    single = Model()
    train(single, batches(args.steps))
    A, B = product_operands()
    weight_diff = max(float((w - single.weight.to_dense().detach()).abs().max())
                      for w, _ in results.values())
    product = torch.cat([results[r][1] for r in range(world)])
    product_diff = float((product - A.to_dense() @ B).abs().max())
    print(f"DDP on {world} processes vs one process, {args.steps} SGD steps: "
          f"largest weight difference {weight_diff:.2e} (fill {float(single.weight.detach().fill_value()):+.4f})")
    print(f"row-sharded A @ B ({tuple(A.shape)} @ {tuple(B.shape)}) vs one process: "
          f"largest difference {product_diff:.2e}")
    return 0 if max(weight_diff, product_diff) < 1e-5 else 1


if __name__ == "__main__":
    sys.exit(main())
