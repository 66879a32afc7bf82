"""CSR row pointers from sorted row indices (COO -> CSR), split over torch's
threads by element ranges: the same pointers on 1 and 2 threads, those of
the definition, and every bad row refused in any range."""
import pytest
import torch

import torch_sparsefill  # noqa: F401  (registers torch.ops.sparsefill)

ops = torch.ops.sparsefill


def _rows(n, nrows, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, nrows, (n,), generator=g).sort().values


@pytest.mark.parametrize("nrows", [1, 300, 500_000])
def test_one_and_two_threads_match_the_definition(nrows):
    rows = _rows(200_000, nrows, 1)
    want = torch.searchsorted(rows, torch.arange(nrows + 1))  # elements in rows before r
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            assert torch.equal(ops.crow_from_rows(rows, nrows), want)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("where", [0, 1, 100_000, 199_998, 199_999])
def test_bad_rows_are_refused_in_any_range(threads, where):
    good = _rows(200_000, 1000, 2)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        for value in (-1, 1000, None):
            bad = good.clone()
            if value is None:  # decreasing: larger than the element after it
                if where == 199_999:
                    continue
                bad[where] = bad[where + 1] + 1
            else:
                bad[where] = value
            with pytest.raises(RuntimeError, match="row indices"):
                ops.crow_from_rows(bad, 1000)
    finally:
        torch.set_num_threads(before)


def test_empty_and_no_rows():
    assert torch.equal(ops.crow_from_rows(torch.zeros(0, dtype=torch.int64), 3),
                       torch.zeros(4, dtype=torch.int64))
    assert torch.equal(ops.crow_from_rows(torch.zeros(0, dtype=torch.int64), 0),
                       torch.zeros(1, dtype=torch.int64))
    with pytest.raises(RuntimeError, match="row indices"):
        ops.crow_from_rows(torch.tensor([0]), 0)
