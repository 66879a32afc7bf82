"""`make bench` rows of the order statistics, scans and indexing
(RFC.md#order-statistics, RFC.md#scans-and-differences,
RFC.md#indexing-with-the-fill): each against dense torch on the same data,
in the same run; and their peak-memory cases (bench.py runs each in a fresh
process)."""
from __future__ import annotations

import torch

import torch_sparsefill as sf


def _csr(m, n, nse, fill, seed):
    g = torch.Generator().manual_seed(seed)
    lin = torch.randperm(m * n, generator=g)[:nse].sort().values
    idx = torch.stack(torch.unravel_index(lin, (m, n)))
    A = sf.sparse_coo_tensor(idx, torch.randn(nse, generator=g), (m, n), fill_value=fill)
    return A.to_sparse_csr() if n > 1 else A


def _vector(n, nse, fill, seed):
    g = torch.Generator().manual_seed(seed)
    lin = torch.randperm(n, generator=g)[:nse].sort().values
    return sf.sparse_coo_tensor(lin.unsqueeze(0), torch.randn(nse, generator=g), (n,),
                                fill_value=fill)


def order_rows(quick: bool):
    """sort, msort, topk, argmax, cumsum along the rows of a 1% CSR with a
    fill (dense torch on A.to_dense() the anchor); topk/argmax of a long
    vector; A[rows, cols] lookups against dense advanced indexing."""
    m = 2000 if quick else 4000
    C = _csr(m, m, m * m // 100, 5.0, 0)
    D = C.to_dense()
    tag = f"{m}x{m} 1% CSR"
    yield (f"sort rows, values+indices, {tag}", lambda: torch.sort(C, 1), "dense torch.sort",
           lambda: torch.sort(D, 1))
    yield (f"msort (values only), {tag}", lambda: torch.msort(C), "dense torch.msort",
           lambda: torch.msort(D))
    yield (f"topk(10) rows, {tag}", lambda: torch.topk(C, 10, 1), "dense torch.topk",
           lambda: torch.topk(D, 10, 1))
    yield (f"argmax rows, {tag}", lambda: torch.argmax(C, 1), "dense torch.topk",
           lambda: torch.topk(D, 10, 1))
    yield (f"cumsum rows, {tag}", lambda: torch.cumsum(C, 1), "dense torch.cumsum",
           lambda: torch.cumsum(D, 1))
    n = 10**6 if quick else 10**7
    V = _vector(n, n // 1000, 0.5, 1)
    DV = V.to_dense()
    yield (f"topk(10) of a {n:,} vector, {n // 1000:,} stored", lambda: torch.topk(V, 10),
           "dense torch.topk", lambda: torch.topk(DV, 10))
    yield (f"argmax of a {n:,} vector, {n // 1000:,} stored", lambda: torch.argmax(V),
           "dense torch.topk", lambda: torch.topk(DV, 10))
    k = 3000 if quick else 10000
    B = _csr(k, k, k * k // 100, 5.0, 2)
    DB = B.to_dense()
    g = torch.Generator().manual_seed(3)
    r, c = (torch.randint(0, k, (10**5,), generator=g) for _ in range(2))
    yield (f"A[rows, cols] 100,000 lookups, CSR {B.nse():,} stored", lambda: B[r, c],
           "dense advanced indexing", lambda: DB[r, c])


# Goals from the issue (ratios to the anchor of the same run).
GOALS = [
    ("sort rows, values+indices", "dense torch.sort", 0.5),
    ("msort (values only)", "dense torch.msort", 0.05),
    ("topk(10) rows", "dense torch.topk", 0.1),
    ("argmax rows", "dense torch.topk", 0.1),
    ("cumsum rows", "dense torch.cumsum", 1.2),
    (" vector, ", "dense torch.topk", 0.01),
    ("A[rows, cols] 100,000 lookups", "dense advanced indexing", 2.0),
]


def memory_case(name: str, quick: bool):
    """(inputs, op) of one memory row of these families, or None."""
    m = 2000 if quick else 4000
    if name == "sort rows CSR 1%":
        C = _csr(m, m, m * m // 100, 5.0, 0)
        return (C,), lambda: torch.sort(C, 1)
    if name == "topk(10) of a 10^7-vector":
        V = _vector(10**6 if quick else 10**7, 10**4, 0.5, 1)
        return (V,), lambda: torch.topk(V, 10)
    if name == "cumsum rows CSR 1%":
        C = _csr(m, m, m * m // 100, 5.0, 0)
        return (C,), lambda: torch.cumsum(C, 1)
    if name == "A[rows, cols] 10^5 lookups":
        k = 3000 if quick else 10000
        B = _csr(k, k, k * k // 100, 5.0, 2)
        g = torch.Generator().manual_seed(3)
        r, c = (torch.randint(0, k, (10**5,), generator=g) for _ in range(2))
        return (B, r, c), lambda: B[r, c]
    return None


MEMORY_CASES = ("sort rows CSR 1%", "topk(10) of a 10^7-vector", "cumsum rows CSR 1%",
                "A[rows, cols] 10^5 lookups")
