"""The CPU output cache (torch_sparsefill/ops/memory.py, aten_ext/ops/common/
memory.cpp): a large output's block serves the next output of about its size
once its tensor dies, with the right values whatever the block held; the
limit, empty_cache and their argument checks; a cached output's storage
still resizes."""
import os
import subprocess
import sys

import pytest
import torch

import torch_sparsefill as sf

pytestmark = pytest.mark.cpu_only("the CPU allocator of the kernels' outputs")

LARGE = 32 << 20  # the cache serves blocks of 32 MiB and more


@pytest.fixture(scope="module")
def operands():
    """Two 1,000 x 10,000 COO operands with 3M stored each (fills 1 and 2):
    their union stores about 5.1M, over 32 MiB of float64 values."""
    def operand(seed, fill):
        g = torch.Generator().manual_seed(seed)
        linear = torch.randperm(10_000_000, generator=g)[:3_000_000].sort().values
        indices = torch.stack([linear // 10_000, linear % 10_000])
        values = torch.randn(linear.numel(), dtype=torch.float64, generator=g)
        return sf.sparse_coo_tensor(indices, values, (1000, 10_000), fill_value=fill).coalesce()
    return operand(1, 1.0), operand(2, 2.0)


@pytest.fixture
def limit():
    """A test may set the limit; it is restored."""
    previous = sf.memory.cache_info().limit
    yield
    sf.memory.set_cache_limit(previous)


def _blocks(C):
    return {C._sf_values.untyped_storage().data_ptr(),
            C._sf_indices.untyped_storage().data_ptr()}


def test_a_dead_output_serves_the_next_with_its_own_values(operands, limit):
    A, B = operands
    sf.memory.set_cache_limit(1 << 30)
    sf.memory.empty_cache()
    expected = (A.to_dense() + B.to_dense())
    D = A - B  # other values in blocks of the same size
    assert D._sf_values.nbytes >= LARGE
    left = _blocks(D)
    del D
    before = sf.memory.cache_info()
    assert before.kept_bytes >= 2 * LARGE
    C = A + B
    after = sf.memory.cache_info()
    assert after.hits == before.hits + 2 and after.misses == before.misses
    assert _blocks(C) == left
    assert torch.equal(C.to_dense(), expected)


def _poisoned_rerun(fn, inputs):
    """fn()'s result against fn() run again after its first outputs' large
    components (none shared with `inputs`) were filled with NaN bytes (-1 as
    int64) and freed into the cache."""
    first = fn()
    outs = first if isinstance(first, tuple) else (first,)
    expected = [x.detach().clone() for x in outs]
    taken = {t.untyped_storage().data_ptr() for x in inputs
             for t in (x._sf_indices, x._sf_values) if t is not None}
    parts = [t for x in outs for t in ((x._sf_indices, x._sf_values, x._sf_col)
                                       if isinstance(x, sf.SparseFillTensor) else (x,))]
    poisoned = 0
    for t in parts:
        if t is not None and t.nbytes >= LARGE and t.untyped_storage().data_ptr() not in taken:
            t.detach().view(torch.uint8).fill_(0xFF)
            poisoned += 1
    del first, outs, parts, t
    hits = sf.memory.cache_info().hits
    again = fn()
    assert poisoned and sf.memory.cache_info().hits - hits >= poisoned
    for a, b in zip(again if isinstance(again, tuple) else (again,), expected):
        a = a.detach()
        if isinstance(a, sf.SparseFillTensor):
            a, b = a.to_dense(), b.to_dense()
        assert torch.equal(a, b)


@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_writes_every_element_of_a_kept_block(dim, limit):
    """The softmax kernels and their backward (seg_softmax along CSR/COO
    dim 1, slot_softmax along dim 0) take empty_output blocks: a block left
    full of NaN never shows."""
    sf.memory.set_cache_limit(1 << 30)
    g = torch.Generator().manual_seed(3)
    linear = torch.randperm(10_000_000, generator=g)[:4_500_000].sort().values
    indices = torch.stack([linear // 1000, linear % 1000])
    values = torch.randn(linear.numel(), dtype=torch.float64, generator=g)
    S = sf.sparse_coo_tensor(indices, values, (10_000, 1000),
                             fill_value=float("-inf")).coalesce()
    _poisoned_rerun(lambda: torch.softmax(S, dim), [S])
    v = S._sf_values.clone().requires_grad_()

    def backward():
        T = sf.sparse_coo_tensor(S._sf_indices, v, S.shape, fill_value=float("-inf"),
                                 is_coalesced=True)
        return torch.autograd.grad(torch.softmax(T, dim)._sf_values.sin().sum(), v)[0]
    _poisoned_rerun(backward, [S])


def test_no_limit_no_reuse(operands, limit):
    A, B = operands
    assert sf.memory.set_cache_limit(0) > 0  # the previous, default limit
    C = A + B
    del C
    info = sf.memory.cache_info()
    assert info.kept_bytes == 0 and info.limit == 0
    C = A + B
    assert sf.memory.cache_info().hits == info.hits
    assert torch.equal(C.to_dense(), A.to_dense() + B.to_dense())


def test_limit_and_empty_cache(operands, limit):
    A, B = operands
    sf.memory.set_cache_limit(1 << 30)
    C = A + B
    del C
    assert sf.memory.cache_info().kept_bytes > 0
    sf.memory.empty_cache()
    assert sf.memory.cache_info()[:2] == (0, 1 << 30)
    C = A + B  # the values' block alone fits: the oldest kept leaves
    sf.memory.set_cache_limit(C._sf_values.untyped_storage().nbytes() + (2 << 20))
    del C
    assert 0 < sf.memory.cache_info().kept_bytes <= sf.memory.cache_info().limit


def test_the_memory_profiler_sees_them(operands):
    """torch.profiler(profile_memory=True) counts an output from a kept block
    as one from torch's allocator."""
    from torch.profiler import ProfilerActivity, profile
    A, B = operands
    C = A + B
    del C  # the profiled call takes the kept blocks
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        C = A + B
    nbytes = C._sf_values.nbytes + C._sf_indices.nbytes
    assert sf.memory.cache_info().hits > 0
    assert max(e.cpu_memory_usage for e in prof.key_averages()
               if "union_binop" in e.key) >= nbytes


def test_a_cached_output_resizes(operands, limit):
    """Growing a cached output's storage takes a block that holds the new
    size, never a smaller kept one (here: a dead output of the old size)."""
    A, B = operands
    sf.memory.set_cache_limit(1 << 30)
    C = A + B
    D = A - B
    del D
    values = C._sf_values.clone()
    v = C._sf_values.detach()
    v.resize_(v.numel() + 1_000_000)  # through the storage's allocator (ours)
    v[values.numel():] = 2.0  # the new block holds the whole new size
    assert torch.equal(v[:values.numel()], values) and bool(v[values.numel():].eq(2.0).all())


def test_threads_take_and_give_back_blocks(operands, limit):
    """Two threads allocating and freeing outputs of the same size at once
    (torch.ops calls let go of the GIL): each result is its own."""
    import threading
    A, B = operands
    sf.memory.set_cache_limit(1 << 30)
    expected = {"add": (A + B)._sf_values.clone(), "sub": (A - B)._sf_values.clone()}
    wrong = []

    def work(name, op):
        for _ in range(4):
            C = op(A, B)
            if not torch.equal(C._sf_values, expected[name]):
                wrong.append(name)
            del C
    threads = [threading.Thread(target=work, args=args)
               for args in (("add", torch.add), ("sub", torch.sub))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


@pytest.mark.parametrize("bad, error", [(-1, ValueError), (1.5, TypeError), (True, TypeError),
                                        ("1", TypeError)])
def test_set_cache_limit_refuses(bad, error, limit):
    with pytest.raises(error, match="nbytes"):
        sf.memory.set_cache_limit(bad)


def test_limit_from_the_environment():
    code = "import torch_sparsefill as sf; print(sf.memory.cache_info().limit)"
    run = lambda text: subprocess.run([sys.executable, "-c", code], capture_output=True,
                                      text=True, env={**os.environ,
                                                      "SPARSEFILL_CPU_CACHE_BYTES": text})
    assert run("0").stdout.strip() == "0"
    assert run("12345678").stdout.strip() == "12345678"
    bad = run("lots")
    assert bad.returncode != 0 and "SPARSEFILL_CPU_CACHE_BYTES" in bad.stderr


def test_docstring_examples(limit):
    import doctest

    from torch_sparsefill.ops import memory
    result = doctest.testmod(memory, extraglobs={"sf": sf})
    assert result.attempted >= 4 and result.failed == 0
