"""Benchmark rows of the row-sharded product (torch_sparsefill.distributed,
RFC.md#distributed): A (CSR, with a fill) @ B (strided), both sharded by rows, on
1, 2 and 4 processes (gloo on 127.0.0.1, one thread each); the anchor is the
same product in this process on one thread. Time: the median of repeated
runs on rank 0, each between barriers. On a machine with fewer cores than
processes the extra ranks share cores, so those rows measure the protocol's
overhead rather than a speed-up.

    python bench/bench_distributed.py [--quick]
"""
from __future__ import annotations

import argparse
import datetime
import multiprocessing
import os
import socket
import statistics
import tempfile
import time

import torch
import torch.distributed as dist

import torch_sparsefill as sf
import torch_sparsefill.distributed as sfd


def operands(n, k, density, seed=0):
    g = torch.Generator().manual_seed(seed)
    nse = int(n * n * density)
    idx = torch.stack([torch.randint(0, n, (nse,), generator=g),
                       torch.randint(0, n, (nse,), generator=g)])
    A = sf.sparse_coo_tensor(idx, torch.randn(nse, generator=g), (n, n), fill_value=0.5)
    return A.coalesce().to_sparse(layout=torch.sparse_csr), torch.randn(n, k, generator=g)


def _median_time(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _rank(rank, world, port, args, out):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    A, B = operands(*args)
    A_local, B_local = sfd.shard_rows(A), sfd.shard_rows(B)

    def step():
        dist.barrier()
        sfd.matmul_row_sharded(A_local, B_local)
        dist.barrier()

    t = _median_time(step, 5)
    if rank == 0:
        with open(out, "w") as f:
            f.write(str(t))
    dist.destroy_process_group()


def sharded_time(world, args, timeout=300):
    ctx = multiprocessing.get_context("fork")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t")
        procs = [ctx.Process(target=_rank, args=(r, world, port, args, out)) for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout)
        for p in procs:
            if p.is_alive():
                p.kill()
                raise RuntimeError(f"bench_distributed: {world} processes did not finish")
        with open(out) as f:
            return float(f.read())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    quick = parser.parse_args().quick
    args = (2048, 32, 0.005) if quick else (8192, 64, 0.002)
    torch.set_num_threads(1)
    A, B = operands(*args)
    anchor = _median_time(lambda: A @ B, 5)
    n, k, density = args
    for world in (1, 2, 4):
        t = sharded_time(world, args)
        name = f"sharded A @ B {n}x{n} d={density} @ {n}x{k}, {world} proc"
        print(f"{name:<52} {t * 1e3:9.2f} ms   {'A @ B, one process':<22} "
              f"{anchor * 1e3:9.2f} ms  {t / anchor:6.2f}")


if __name__ == "__main__":
    main()
