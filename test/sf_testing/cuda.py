"""Shared by the test/cuda/ files: the `gpu` marker and the CPU-vs-CUDA
comparison `both`, so every file compares kernels by one rule.

    >>> from sf_testing.cuda import both, gpu
    >>> both(torch.ops.sparsefill.coo_linearize, indices, [4, 5])
"""
import math

import pytest
import torch

gpu = pytest.mark.skipif(not torch.cuda.is_available(),
                         reason="needs a CUDA GPU (torch.cuda.is_available() is False)")
CUDA = "cuda"
# fp64 sums in another order (tree order on the GPU, sequential on the CPU):
# equal to rounding.
TIGHT = dict(rtol=1e-10, atol=1e-10)

# ---- helpers ------------------------------------------------------------------

def both(fn, *args, rtol=0.0, atol=0.0, expect="value"):
    """fn on the CPU arguments and on their CUDA copies. `expect="value"`
    (the default, every *_matches_cpu test): the CPU computes, and the CUDA
    result agrees: integer and bool outputs (indices, counts, winners)
    exactly, floating ones within rtol/atol (default: exactly); an error on
    the CPU fails the test (two equal refusals prove nothing about values).
    `expect="error"`: the CPU raises and CUDA raises with the same first
    line. `expect="either"`: one of the two, for an error test whose call is
    valid in some of its cases. Returns (cpu result, cuda result)."""
    assert expect in ("value", "error", "either"), expect

    def to(x, device):
        return x.to(device) if isinstance(x, torch.Tensor) else x

    try:
        expected = fn(*[to(a, "cpu") for a in args])
    except RuntimeError as e:
        if expect == "value":
            raise AssertionError(f"the CPU refused a call whose values this test compares: "
                                 f"{str(e).splitlines()[0]}") from e
        with pytest.raises(RuntimeError) as got:
            fn(*[to(a, CUDA) for a in args])
        assert str(got.value).splitlines()[0] == str(e).splitlines()[0]
        return None, None
    assert expect != "error", f"{getattr(fn, '__name__', fn)} accepted what must be refused"
    actual = fn(*[to(a, CUDA) for a in args])
    flat_e = expected if isinstance(expected, tuple) else (expected,)
    flat_a = actual if isinstance(actual, tuple) else (actual,)
    assert len(flat_e) == len(flat_a)
    for e, a in zip(flat_e, flat_a):
        if not isinstance(e, torch.Tensor):
            assert a == e
            continue
        assert a.device.type == torch.device(CUDA).type and a.dtype == e.dtype and \
            a.shape == e.shape
        if e.is_floating_point() or e.is_complex():
            torch.testing.assert_close(a.cpu(), e, equal_nan=True, rtol=rtol, atol=atol)
        else:
            assert torch.equal(a.cpu(), e)
    return expected, actual


def both_refuse(fn, *args):
    """``both(fn, *args, expect="error")``: the CPU and CUDA refuse alike."""
    return both(fn, *args, expect="error")


def random_indices(g, size, nse, *, unique=False, sort=False):
    """nse random COO indices (a sparse_dim x nse tensor) into `size` drawn
    with generator g, distinct when `unique`, in row-major order when `sort`:
    random_indices(torch.Generator().manual_seed(0), (4, 5), 6, unique=True)."""
    numel = math.prod(size)
    if unique:
        linear = torch.randperm(numel, generator=g)[:nse]
    else:
        linear = torch.randint(0, max(numel, 1), (nse,), generator=g)
    if sort:
        linear = linear.sort().values
    out = []
    for s in reversed(size):
        out.append(linear % s)
        linear = linear // s
    return torch.stack(out[::-1]) if size else torch.zeros(0, nse, dtype=torch.int64)

def malformed_csr(case):
    """A 3 x 5 CSR pattern (crow, col) broken in the named way:
    crow, col = malformed_csr("col_unsorted")."""
    crow = torch.tensor([0, 2, 2, 5])
    col = torch.tensor([1, 3, 0, 2, 4])
    if case == "crow_first":
        crow[0] = 1
    elif case == "decreasing":
        crow[2] = 1
    elif case == "last":
        crow[3] = 4
    elif case == "col_negative":
        col[3] = -2
    elif case == "col_range":
        col[4] = 5
    elif case == "col_unsorted":
        col[3] = 0
    elif case == "col_duplicate":
        col[1] = 1
    return crow, col
