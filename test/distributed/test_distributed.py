"""torch_sparsefill.distributed (RFC.md#distributed) on 2 and 4 processes:
gloo on 127.0.0.1, every collective against the same reduction of the dense
tensors in one process, mismatches raising on every rank, data-parallel
training steps (all_reduce_gradients; DistributedDataParallel) against the
single-process step, and the row-sharded ops. Bounded: the process group
times out after 60 s and the test kills its processes after 150 s, so a
test never hangs."""
import datetime
import math
import multiprocessing
import os
import socket
import traceback

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

import torch_sparsefill as sf
import torch_sparsefill.distributed as sfd

import sf_testing as T

FILLS = [1.5, -2.0, math.inf, 0.0]
SIZE = (5, 7)


def _tensor(rank, layout, seed_offset=0):
    return T.random_tensor("random", FILLS[rank % len(FILLS)], layout, seed=rank + seed_offset,
                           size=SIZE)


def _same_pattern(rank, layout):
    A = T.random_tensor("random", 0.5, layout, seed=0, size=SIZE)
    return A * (rank + 1.0)


def _dense_reduce(tensors, combine):
    out = tensors[0]
    for t in tensors[1:]:
        out = combine(out, t)
    return out


# ---- what every rank runs -------------------------------------------------------------------

def _collectives(rank, world):
    for layout in T.LAYOUTS:
        A = _tensor(rank, layout)
        dense = [_tensor(r, layout).to_dense() for r in range(world)]
        got = sfd.broadcast(A, src=1)
        T.assert_dense_equal(got.to_dense(), dense[1])
        gathered = sfd.all_gather(A)
        assert len(gathered) == world
        for r in range(world):
            T.assert_dense_equal(gathered[r].to_dense(), dense[r])
        for op, combine in [(dist.ReduceOp.SUM, torch.add), (dist.ReduceOp.MAX, torch.maximum),
                            (dist.ReduceOp.MIN, torch.minimum), (dist.ReduceOp.PRODUCT, torch.mul)]:
            out = sfd.all_reduce(A.clone(), op)
            assert isinstance(out, sf.SparseFillTensor)
            T.assert_dense_equal(out.to_dense(), _dense_reduce(dense, combine))
        avg = sfd.all_reduce(A, dist.ReduceOp.AVG)
        T.assert_dense_equal(avg.to_dense(), _dense_reduce(dense, torch.add) / world)
        # the same pattern on every rank: in place, like the dense collective
        B = _same_pattern(rank, layout)
        assert sfd.all_reduce(B) is B
        T.assert_dense_equal(B.to_dense(), _dense_reduce(
            [_same_pattern(r, layout).to_dense() for r in range(world)], torch.add))
        C = _same_pattern(rank, layout)
        assert sfd.broadcast(C, src=0) is C
        T.assert_dense_equal(C.to_dense(), _same_pattern(0, layout).to_dense())
        # reduce_scatter: rank r gets the sum of every rank's inputs[r]
        inputs = [_tensor(rank, layout) * (k + 1.0) for k in range(world)]
        mine = sfd.reduce_scatter(inputs)
        T.assert_dense_equal(mine.to_dense(), _dense_reduce(
            [_tensor(q, layout).to_dense() * (rank + 1.0) for q in range(world)], torch.add))
        # send / recv around a ring
        nxt, prev = (rank + 1) % world, (rank - 1) % world
        if rank % 2 == 0:
            sfd.send(A, nxt)
            got = sfd.recv(prev)
        else:
            got = sfd.recv(prev)
            sfd.send(A, nxt)
        T.assert_dense_equal(got.to_dense(), dense[prev])
        assert got.layout == layout


def _torch_api(rank, world):
    """torch.distributed's own functions on SparseFillTensors: in place, as
    the dense collectives are, equal to them on the dense tensors; what has
    no sparse form is refused by name."""
    for layout in T.LAYOUTS:
        dense = [_tensor(r, layout).to_dense() for r in range(world)]
        A = _tensor(rank, layout)
        assert dist.all_reduce(A) is None  # as torch's: the result is A
        T.assert_dense_equal(A.to_dense(), _dense_reduce(dense, torch.add))
        A = _tensor(rank, layout)
        dist.all_reduce(A, op=dist.ReduceOp.MAX)
        T.assert_dense_equal(A.to_dense(), _dense_reduce(dense, torch.maximum))
        B = _tensor(rank, layout)
        dist.broadcast(B, src=1)
        T.assert_dense_equal(B.to_dense(), dense[1])
        outs = [sf.full(SIZE, 0., dtype=dense[0].dtype) for _ in range(world)]
        dist.all_gather(outs, _tensor(rank, layout))
        for r in range(world):
            T.assert_dense_equal(outs[r].to_dense(), dense[r])
        strided = [torch.zeros(SIZE, dtype=dense[0].dtype) for _ in range(world)]
        dist.all_gather(strided, _tensor(rank, layout))  # into dense outputs: their elements
        for r in range(world):
            T.assert_dense_equal(strided[r], dense[r])
        out = sf.full(SIZE, 0., dtype=dense[0].dtype)
        dist.reduce_scatter(out, [_tensor(rank, layout) * (k + 1.0) for k in range(world)])
        T.assert_dense_equal(out.to_dense(), _dense_reduce(
            [_tensor(q, layout).to_dense() * (rank + 1.0) for q in range(world)], torch.add))
        nxt, prev = (rank + 1) % world, (rank - 1) % world
        got = sf.full(SIZE, 0., dtype=dense[0].dtype)
        if rank % 2 == 0:
            dist.send(_tensor(rank, layout), nxt)
            assert dist.recv(got, prev) == prev
        else:
            dist.recv(got, prev)
            dist.send(_tensor(rank, layout), nxt)
        T.assert_dense_equal(got.to_dense(), dense[prev])
        with pytest.raises(NotImplementedError, match="async_op=False"):
            dist.all_reduce(_tensor(rank, layout), async_op=True)
        with pytest.raises(NotImplementedError, match="all_gather\\(tensor_list, A\\)"):
            dist.all_gather_into_tensor(torch.zeros(world * SIZE[0], SIZE[1]),
                                        _tensor(rank, layout))


def _mismatches(rank, world):
    cases = [
        (T.random_tensor("random", 1.0, torch.sparse_coo, size=(5, 7 + (rank == 1))), "shape"),
        (T.random_tensor("random", 1.0, torch.sparse_coo,
                         dtype=torch.float32 if rank == 1 else torch.float64), "dtype"),
        (T.random_tensor("random", 1.0, torch.sparse_csr if rank == 1 else torch.sparse_coo),
         "layout"),
    ]
    for A, what in cases:
        for call in (lambda: sfd.all_reduce(A), lambda: sfd.all_gather(A),
                     lambda: sfd.broadcast(A, 0)):
            try:
                call()
            except RuntimeError as e:
                assert "differ across ranks" in str(e) and what in str(e), str(e)
            else:
                raise AssertionError(f"no error for a {what} mismatch")
    # the sharded product: operands that disagree raise on every rank
    A_local = sfd.shard_rows(T.random_tensor("random", 1.0, torch.sparse_csr, size=(6, 8)))
    B = torch.randn(8 + (rank == 1), 3, dtype=torch.float64)
    for B_local, what in [(sfd.shard_rows(B[:8]).float() if rank == 1 else sfd.shard_rows(B[:8]),
                           "B_dtype"),
                          (B[sfd.row_range(8)[0]:sfd.row_range(8)[1] + (rank == 1)],
                           "shard_rows"),
                          (sfd.shard_rows(B[:8, :2 + (rank == 1)]), "B_columns")]:
        try:
            sfd.matmul_row_sharded(A_local, B_local)
        except RuntimeError as e:
            assert what in str(e), str(e)
        else:
            raise AssertionError(f"no error for a {what} mismatch")
    # reductions over rows, and the data-parallel helpers over modules that differ
    A_local = sfd.shard_rows(T.random_tensor("random", 1.0, torch.sparse_csr,
                                             size=(6, 8 + (rank == 1))))
    wide = _Model(torch.sparse_coo)
    if rank == 1:
        wide.bias = torch.nn.Parameter(torch.zeros(SIZE[0] + 1, dtype=torch.float64))
    other = _Model(torch.sparse_csr if rank == 1 else torch.sparse_coo)
    for call, what in [(lambda: sfd.reduce_rows_sharded(A_local, "sum"), "columns"),
                       (lambda: sfd.all_reduce_gradients(wide), "bias"),
                       (lambda: sfd.broadcast_module(wide), "bias"),
                       (lambda: sfd.DistributedDataParallel(other), "layout"),
                       (lambda: sfd.fully_shard(_Sharded(other.weight.layout)), "weight")]:
        try:
            call()
        except RuntimeError as e:
            assert what in str(e) and "differ across ranks" in str(e), str(e)
        else:
            raise AssertionError(f"no error for a {what} mismatch")


class _Model(torch.nn.Module):
    def __init__(self, layout):
        super().__init__()
        self.weight = torch.nn.Parameter(T.random_tensor("random", 0.3, layout, size=SIZE))
        self.register_buffer("scale", T.random_tensor("random", 2.0, layout, seed=5, size=SIZE))
        self.bias = torch.nn.Parameter(torch.zeros(SIZE[0], dtype=torch.float64))

    def forward(self, x):
        return F.linear(x, self.weight, self.bias) * self.scale.sum() / 40


def _batches(world, steps=3, per_rank=4):
    g = T.rng(11)
    return [(torch.randn(world * per_rank, SIZE[1], generator=g, dtype=torch.float64),
             torch.randn(world * per_rank, SIZE[0], generator=g, dtype=torch.float64))
            for _ in range(steps)]


def _data_parallel(rank, world):
    for layout in T.LAYOUTS:
        local, single = _Model(layout), _Model(layout)
        if rank != 0:  # rank 0's initial state reaches every rank
            with torch.no_grad():
                local.weight.mul_(-3.0)
                local.scale.add_(1.0)
        sfd.broadcast_module(local, src=0)
        opt_l = torch.optim.Adam(local.parameters(), lr=0.05)
        opt_s = torch.optim.Adam(single.parameters(), lr=0.05)
        for x, y in _batches(world):
            part = slice(rank * 4, rank * 4 + 4)
            opt_l.zero_grad()
            F.mse_loss(local(x[part]), y[part]).backward()
            sfd.all_reduce_gradients(local)
            opt_l.step()
            opt_s.zero_grad()
            F.mse_loss(single(x), y).backward()
            opt_s.step()
        torch.testing.assert_close(local.weight.to_dense().detach(),
                                   single.weight.to_dense().detach())
        torch.testing.assert_close(local.bias.detach(), single.bias.detach())


def _ddp(rank, world):
    """torch's DDP machinery (sfd.DistributedDataParallel) against one
    process on the whole batch: rank 0's initial state (another pattern on
    the other ranks), buffers re-broadcast before each forward, gradient
    accumulation under no_sync, parameters and fills compared."""
    for layout in T.LAYOUTS:
        for optimiser in (torch.optim.SGD, torch.optim.Adam):
            local, single = _Model(layout), _Model(layout)
            if rank != 0:  # another pattern and values: rank 0's must win
                local.weight = torch.nn.Parameter(
                    T.random_tensor("random", -1.0, layout, seed=40 + rank, size=SIZE))
                with torch.no_grad():
                    local.scale.add_(1.0)
            # torch's options reach torch's reducer: buckets as the gradients' storage,
            # the search for unused parameters
            other = dict(gradient_as_bucket_view=True, find_unused_parameters=True)
            model = sfd.DistributedDataParallel(
                local, **(other if optimiser is torch.optim.Adam else {}))
            assert local.weight.nse() == single.weight.nse()
            opt_l = optimiser(model.parameters(), lr=0.05)
            opt_s = optimiser(single.parameters(), lr=0.05)
            for step, (x, y) in enumerate(_batches(world)):
                if rank != 0 and step == 1:  # drifted: rank 0's buffer comes back
                    with torch.no_grad():
                        local.scale.mul_(3.0)
                half = slice(rank * 4, rank * 4 + 2), slice(rank * 4 + 2, rank * 4 + 4)
                opt_l.zero_grad()
                with model.no_sync():  # accumulated locally, reduced with the next
                    (F.mse_loss(model(x[half[0]]), y[half[0]]) / 2).backward()
                (F.mse_loss(model(x[half[1]]), y[half[1]]) / 2).backward()
                opt_l.step()
                opt_s.zero_grad()
                F.mse_loss(single(x), y).backward()
                opt_s.step()
            for got, want in ((local.weight, single.weight), (local.scale, single.scale)):
                T.assert_dense_equal(got.to_dense().detach(), want.to_dense().detach())
                torch.testing.assert_close(got._fill_value().detach(),
                                           want._fill_value().detach())
            torch.testing.assert_close(local.bias.detach(), single.bias.detach())
    # torch's own class refuses such a module (RFC.md#distributed); ours names itself
    try:
        torch.nn.parallel.DistributedDataParallel(_Model(torch.sparse_coo))
    except RuntimeError:
        pass
    else:
        raise AssertionError("torch's DistributedDataParallel took a SparseFillTensor")


class _Sharded(torch.nn.Module):
    def __init__(self, layout):
        super().__init__()
        self.weight = torch.nn.Parameter(T.random_tensor("random", 0.3, layout, size=SIZE))
        torch.manual_seed(0)
        self.head = torch.nn.Linear(SIZE[0], SIZE[0], dtype=torch.float64)

    def forward(self, x):
        return self.head(F.linear(x, self.weight))


def _fsdp(rank, world):
    """FSDP2 (sfd.fully_shard) against one process on the whole batch:
    the strided head sharded, the SparseFillTensor weight whole, gradients
    accumulated over two backward passes."""
    from torch.distributed.fsdp import fully_shard
    for layout in T.LAYOUTS:
        local, single = _Sharded(layout), _Sharded(layout)
        sfd.fully_shard(local.head)
        sfd.fully_shard(local)
        assert isinstance(local.head.weight, torch.distributed.tensor.DTensor)
        opt_l = torch.optim.SGD(local.parameters(), lr=0.1, momentum=0.5)
        opt_s = torch.optim.SGD(single.parameters(), lr=0.1, momentum=0.5)
        for x, y in _batches(world):
            opt_l.zero_grad()
            for part in (slice(rank * 4, rank * 4 + 2), slice(rank * 4 + 2, rank * 4 + 4)):
                (F.mse_loss(local(x[part]), y[part]) / 2).backward()
            opt_l.step()
            opt_s.zero_grad()
            F.mse_loss(single(x), y).backward()
            opt_s.step()
        T.assert_dense_equal(local.weight.to_dense().detach(), single.weight.to_dense().detach())
        torch.testing.assert_close(local.weight._fill_value().detach(),
                                   single.weight._fill_value().detach())
        torch.testing.assert_close(local.head.weight.full_tensor().detach(),
                                   single.head.weight.detach())
    # torch's own refuses, and the message names the route
    try:
        fully_shard(_Sharded(torch.sparse_coo))
    except NotImplementedError as e:
        assert "torch_sparsefill.distributed.fully_shard" in str(e), str(e)
    else:
        raise AssertionError("torch's fully_shard took a SparseFillTensor")


def _row_sharded(rank, world):
    g = T.rng(21)
    for layout in T.LAYOUTS:
        # finite fills: products with non-finite ones are checked in one
        # process (crosscutting/test_regressions.py)
        for fill in (0.0, -1.5, 2.0, "per row", "per column"):
            if isinstance(fill, str):  # a per-slice fill: the lean path (rows), the gather
                dim = 1 if fill == "per row" else 0
                A = torch.softmax(T.random_tensor("random", 0.5, layout, size=(7, 9)), dim)
            else:
                A = T.random_tensor("random", fill, layout, size=(7, 9))
            B = torch.randn(9, 3, generator=g, dtype=torch.float64)
            A = A.detach()
            A_local = sfd.shard_rows(A).requires_grad_()
            B_local = sfd.shard_rows(B).clone().requires_grad_()
            out = sfd.matmul_row_sharded(A_local, B_local)
            start, stop = sfd.row_range(7)
            expected = (A.to_dense() @ B)[start:stop]
            T.assert_dense_equal(out, expected)
            # gradients: the sum over ranks of the blocks' losses, against one process
            (out * out).sum().backward()
            Ad = A.to_dense().detach().clone().requires_grad_()  # (one rank: A_local is A)
            Bd = B.clone().requires_grad_()
            ((Ad @ Bd) ** 2).sum().backward()
            b_start, b_stop = sfd.row_range(9)
            torch.testing.assert_close(B_local.grad, Bd.grad[b_start:b_stop])
            # the component gradients of the local block (RFC.md#gradient-convention)
            grad_block, block = Ad.grad[start:stop], A_local.to_dense().detach()
            fill_b = A_local._fill_value()
            unspecified = block == fill_b.expand_as(block)
            torch.testing.assert_close(A_local._values().grad, grad_block[~unspecified])
            summed = (grad_block * unspecified).sum(
                [d for d in range(2) if fill_b.dim() == 0 or fill_b.shape[d] == 1],
                keepdim=fill_b.dim() > 0)
            torch.testing.assert_close(fill_b.grad, summed)
        # sparse @ sparse: B a row-sharded SparseFillTensor too
        for fill_b in (0.0, 1.5, "per row"):
            A = T.random_tensor("random", -1.5, layout, size=(7, 9)).detach()
            if fill_b == "per row":
                B = torch.softmax(T.random_tensor("random", 0.5, layout, seed=8, size=(9, 4)), 1)
            else:
                B = T.random_tensor("random", fill_b, layout, seed=8, size=(9, 4))
            B = B.detach()
            A_local = sfd.shard_rows(A).requires_grad_()
            B_local = sfd.shard_rows(B).requires_grad_()
            out = sfd.matmul_row_sharded(A_local, B_local)
            start, stop = sfd.row_range(7)
            Ad, Bd = (X.to_dense().detach().requires_grad_() for X in (A, B))  # (one rank: A_local is A)
            want = Ad @ Bd
            T.assert_dense_equal(out, want[start:stop])
            w = torch.randn(7, 4, generator=g, dtype=torch.float64)
            (out * w[start:stop]).sum().backward()
            (want * w).sum().backward()
            for local, dense_grad, rows in ((A_local, Ad.grad, (start, stop)),
                                            (B_local, Bd.grad, sfd.row_range(9))):
                block = dense_grad[rows[0]:rows[1]]  # the convention of RFC.md#parameters
                fill_l = local._fill_value()
                unspecified = local.to_dense().detach() == fill_l.detach().expand(block.shape)
                T.assert_dense_equal(local._values().grad, block[~unspecified])
                summed = (block * unspecified).sum(
                    [d for d in range(2) if fill_l.dim() == 0 or fill_l.shape[d] == 1],
                    keepdim=fill_l.dim() > 0)
                torch.testing.assert_close(fill_l.grad, summed)
        # reductions over all rows, combined across ranks
        for fill in (0.5, -math.inf, math.nan):
            A = T.random_tensor("random", fill, layout, size=(7, 9))
            A_local = sfd.shard_rows(A)
            for op in ("amax", "amin", "sum", "mean"):
                got = sfd.reduce_rows_sharded(A_local, op)
                T.assert_dense_equal(got, getattr(torch, op)(A.to_dense(), 0))
        A = T.random_tensor("random", 0.5, layout, size=(7, 9))
        A_local = sfd.shard_rows(A).requires_grad_()
        w = torch.randn(9, generator=T.rng(3), dtype=torch.float64)
        (sfd.reduce_rows_sharded(A_local, "mean") * w).sum().backward()
        D = A.to_dense().detach().requires_grad_()  # (one rank: A_local is A)
        (D.mean(0) * w).sum().backward()  # the loss on every rank: world times
        start, stop = sfd.row_range(7)
        block = D.grad[start:stop] * world
        stored = A.to_dense()[start:stop] != A.fill_value()
        T.assert_dense_equal(A_local.grad.to_dense(), torch.where(stored, block,
                                                                  block[~stored].mean()))
        # row-wise softmax and element-wise ops act on the local rows alone
        A = T.random_tensor("random", -0.5, layout, size=(7, 9))
        A_local = sfd.shard_rows(A).requires_grad_()
        out = torch.softmax(torch.exp(A_local) * 2.0, 1)
        D = A.to_dense().detach().requires_grad_()  # (one rank: A_local is A)
        want = torch.softmax(torch.exp(D) * 2.0, 1)
        T.assert_dense_equal(out.to_dense(), want[start:stop])
        w = torch.randn(7, 9, generator=T.rng(4), dtype=torch.float64)
        (out.to_dense() * w[start:stop]).sum().backward()
        (want * w).sum().backward()
        block = D.grad[start:stop]
        stored = A.to_dense()[start:stop] != A.fill_value()
        T.assert_dense_equal(A_local.grad.to_dense(), torch.where(stored, block,
                                                                  block[~stored].mean()))
        try:
            sfd.reduce_rows_sharded(A_local, "amax")
        except NotImplementedError:
            pass
        else:
            raise AssertionError("amax of a tensor requiring grad must refuse")



SCENARIOS = {"collectives": _collectives, "torch_api": _torch_api, "mismatches": _mismatches,
             "data_parallel": _data_parallel, "ddp": _ddp, "fsdp": _fsdp, "row_sharded": _row_sharded}


def _worker(rank, world, port, scenario, out_dir):
    result = "OK"
    try:
        torch.set_num_threads(1)  # a forked child: no OpenMP pool of the parent's
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world, timeout=datetime.timedelta(seconds=60))
        SCENARIOS[scenario](rank, world)
    except BaseException:  # noqa: BLE001 -- reported to the parent
        result = traceback.format_exc()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
        with open(os.path.join(out_dir, f"rank{rank}"), "w") as f:
            f.write(result)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _spawn(world, scenario, tmp_path, timeout=150):
    ctx = multiprocessing.get_context("fork")
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, scenario, str(tmp_path)))
             for r in range(world)]
    for p in procs:
        p.start()
    deadline = datetime.datetime.now() + datetime.timedelta(seconds=timeout)
    for p in procs:
        p.join(max(1.0, (deadline - datetime.datetime.now()).total_seconds()))
    hung = [r for r, p in enumerate(procs) if p.is_alive()]
    for r in hung:
        procs[r].kill()
        procs[r].join(10)
    assert not hung, f"ranks {hung} did not finish within {timeout} s"
    for r in range(world):
        text = (tmp_path / f"rank{r}").read_text()
        assert text == "OK", f"rank {r}:\n{text}"


# 2 processes in `make test`; 4 processes in `make test-slow` (mismatches in both:
# what must never hang)
CASES = [pytest.param(s, w, marks=[pytest.mark.slow] if w == 4 and s != "mismatches" else [])
         for s in sorted(SCENARIOS) for w in (2, 4)]
CASES.append(pytest.param("row_sharded", 1))  # one process: the product itself


@pytest.mark.cpu_only(reason="gloo on the CPU")
@pytest.mark.parametrize("scenario, world", CASES)
def test_distributed(scenario, world, tmp_path):
    _spawn(world, scenario, tmp_path)

