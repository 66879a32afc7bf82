"""Random SparseFillTensors over named cases and layouts, and gradient leaves.

Every random draw goes through `rng(seed)`, a generator on the device the
suite runs on (conftest.py), so each pass is deterministic.

    >>> A = random_tensor("random", 1.5, torch.sparse_csr, seed=3)
    >>> A, v, f = leaves(A)          # v, f: leaves that require grad
    >>> rebuild(A, v * 2, f).to_dense()   # differentiable in v and f
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

import torch_sparsefill as sf

LAYOUTS = [torch.sparse_coo, torch.sparse_csr]
# The compressed layouts beyond CSR (RFC.md#compressed-layouts). random_tensor makes
# them (block layouts with BLOCKSIZE, non-square so that a swapped block
# shows); the element-wise table runs them over EXTRA_CASES. A shared test
# covers them by parametrizing over ALL_LAYOUTS (or LAYOUT_CASES) and
# building its operands with random_tensor / leaf_parts + build.
EXTRA_LAYOUTS = [torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc]
ALL_LAYOUTS = LAYOUTS + EXTRA_LAYOUTS
BLOCK_LAYOUTS = (torch.sparse_bsr, torch.sparse_bsc)
BLOCKSIZE = (2, 3)
FILLS = [0.0, 1.5, -2.0, math.inf, -math.inf, math.nan]


def rng(seed: int) -> torch.Generator:
    """A seeded generator on the device the tests run on (see conftest.py):
    random inputs are drawn there, so the CUDA pass draws other numbers than
    the CPU pass, both deterministic.

        >>> torch.rand(3, generator=rng(0))
    """
    return torch.Generator(device=torch.get_default_device()).manual_seed(seed)


def on_test_device(x):
    """x (a tensor or SparseFillTensor built on the CPU, e.g. from scipy) moved
    to the device the tests run on.

        >>> on_test_device(sf.from_scipy(m))
    """
    return x.to(torch.get_default_device())


@dataclass(frozen=True)
class Case:
    """A named pattern and a fill, e.g. Case("hybrid", math.nan)."""
    pattern: str  # empty | one | random | full | duplicates | hybrid
    fill: float


CASES = [Case(p, f) for p in ("empty", "one", "random", "full", "duplicates", "hybrid")
         for f in FILLS]


# Fewer cases per extra layout: the conversions to CSR are tested in full
# elsewhere, so each op sees every pattern kind and every non-finite fill.
EXTRA_CASES = [Case("random", f) for f in FILLS] + [
    Case("hybrid", 1.5), Case("hybrid", -math.inf), Case("empty", math.nan),
    Case("one", -2.0), Case("full", 0.0)]


@dataclass(frozen=True)
class Batched:
    """A batched compressed layout in the test matrices (RFC.md#batched-compressed):
    random_tensor makes a tensor of `layout` with a leading batch dim of 2
    whose batches have different patterns (so they are padded), with one fill
    per batch when `per_batch` (the case's fill and 0.25).

        >>> random_tensor("random", 1.5, Batched(torch.sparse_csr)).shape
        torch.Size([2, 5, 7])
    """
    layout: torch.layout
    per_batch: bool = False


BATCHED_LAYOUTS = [Batched(torch.sparse_csr), Batched(torch.sparse_csc, per_batch=True),
                   Batched(torch.sparse_bsr, per_batch=True), Batched(torch.sparse_bsc)]
# Each batched layout sees a finite and a non-finite fill; together they see
# every non-finite fill, a hybrid tensor and per-batch fills.
BATCHED_CASES = [
    (Case("random", 1.5), BATCHED_LAYOUTS[0]), (Case("hybrid", math.nan), BATCHED_LAYOUTS[0]),
    (Case("random", -math.inf), BATCHED_LAYOUTS[1]), (Case("random", -2.0), BATCHED_LAYOUTS[2]),
    (Case("random", math.inf), BATCHED_LAYOUTS[2]), (Case("random", 0.0), BATCHED_LAYOUTS[3]),
    (Case("hybrid", math.inf), BATCHED_LAYOUTS[3])]
LAYOUT_CASES = [(c, lay) for lay in LAYOUTS for c in CASES] + \
    [(c, lay) for lay in EXTRA_LAYOUTS for c in EXTRA_CASES] + BATCHED_CASES


def case_id(case: Case) -> str:
    """The test id of a case: case_id(Case("one", 1.5)) == "one-fill1.5"."""
    return f"{case.pattern}-fill{case.fill}"


def fill_id(fill) -> str:
    """The test id of a fill (a number or a list of per-batch fills):
    fill_id(1.5) == "fill1.5", fill_id([0.5, -2.0]) == "fill0.5,-2.0"."""
    return "fill" + (",".join(map(str, fill)) if isinstance(fill, (list, tuple)) else str(fill))


def layout_id(layout) -> str:
    """The test id of a layout: layout_id(torch.sparse_csr) == "csr"."""
    if isinstance(layout, Batched):
        return "batched-" + layout_id(layout.layout) + ("-per-batch" if layout.per_batch else "")
    return str(layout).split("_")[-1]


def base_layout(layout) -> torch.layout:
    """The torch layout of a test layout (a Batched one's own):
    base_layout(Batched(torch.sparse_csr)) is torch.sparse_csr."""
    return layout.layout if isinstance(layout, Batched) else layout


def layout_case_id(x) -> str:
    """The test id of a layout or a case, for parametrize(ids=...)."""
    return layout_id(x) if isinstance(x, (torch.layout, Batched)) else case_id(x)


def size_for_layout(size, layout):
    """`size` rounded up to multiples of BLOCKSIZE for a block layout:
    size_for_layout((5, 7), torch.sparse_bsr) == (6, 9)."""
    if layout not in BLOCK_LAYOUTS:
        return tuple(size)
    return tuple(-(-s // b) * b for s, b in zip(size, BLOCKSIZE))


def blocksize_for(layout):
    """The test blocksize of a block layout, None for the others:
    blocksize_for(torch.sparse_bsr) == BLOCKSIZE."""
    return BLOCKSIZE if layout in BLOCK_LAYOUTS else None


def compressed_indices(A):
    """(compressed, plain) indices of a CSR/CSC/BSR/BSC tensor, e.g. for
    sf.sparse_compressed_tensor(*compressed_indices(A), v, A.shape, layout=A.layout)."""
    if A.layout in (torch.sparse_csr, torch.sparse_bsr):
        return A.crow_indices(), A.col_indices()
    return A.ccol_indices(), A.row_indices()


def random_tensor(pattern: str, fill, layout=torch.sparse_coo, *, dtype=torch.float64,
                  seed: int = 0, size=(5, 7), domain: str = "real",
                  requires_grad: bool = False) -> sf.SparseFillTensor:
    """A SparseFillTensor of a named pattern (see Case). Stored values never
    equal the fill, so the pattern survives round trips through dense.

        >>> random_tensor("hybrid", math.inf, torch.sparse_csr, seed=2).shape
        torch.Size([5, 7, 3])
    """
    if isinstance(layout, Batched):
        return _batched_random_tensor(pattern, fill, layout, dtype=dtype, seed=seed, size=size,
                                      domain=domain, requires_grad=requires_grad)
    g = rng(seed)
    rows, cols = size_for_layout(size, layout)
    dense_shape = (3,) if pattern == "hybrid" else ()
    if pattern == "empty":
        idx = torch.zeros(2, 0, dtype=torch.int64)
    elif pattern == "one":
        idx = torch.tensor([[rows // 2], [cols - 1]])
    elif pattern == "full":
        idx = torch.cartesian_prod(torch.arange(rows), torch.arange(cols)).t()
    elif layout in BLOCK_LAYOUTS:
        # A block layout stores whole blocks: drawn block by block, so that
        # about a third of them are stored (drawn element by element, nearly
        # every block would hold one, the fill would hardly show, and the
        # gradient checks would perturb every element).
        r, c = BLOCKSIZE
        mask = torch.rand(rows // r, cols // c, generator=g) < 0.35
        idx = mask.repeat_interleave(r, 0).repeat_interleave(c, 1).nonzero().t()
    else:
        mask = torch.rand(rows, cols, generator=g) < 0.35
        idx = mask.nonzero().t()
    nse = idx.shape[1]
    values = torch.randn((nse,) + dense_shape, generator=g, dtype=torch.float64)
    if domain == "positive":
        values = values.abs() + 0.1
    values = values.to(dtype)
    if pattern == "duplicates" and layout == torch.sparse_coo and nse > 1:
        # Repeat some entries, shuffled: the tensor is uncoalesced.
        extra = idx[:, : nse // 2]
        idx = torch.cat([idx, extra], 1)
        values = torch.cat([values, torch.randn(extra.shape[1], generator=g,
                                                dtype=torch.float64).to(dtype)])
        perm = torch.randperm(idx.shape[1], generator=g)
        idx, values = idx[:, perm], values[perm]
    fill_t = torch.full(dense_shape[-1:] if pattern == "hybrid" else (), fill, dtype=dtype)
    if pattern == "hybrid":
        fill_t[0] = 0.5 if not math.isnan(fill) else fill
    if domain == "positive" and not (fill > 0):
        fill_t = torch.full_like(fill_t, 0.75)
    A = sf.sparse_coo_tensor(idx, values, (rows, cols) + dense_shape, fill_value=fill_t,
                             requires_grad=requires_grad)
    return A.to_sparse(layout=layout, blocksize=blocksize_for(layout))


def _batched_random_tensor(pattern, fill, layout: Batched, *, dtype, seed, size, domain,
                           requires_grad):
    """Two batches of random_tensor's patterns (seeds `seed` and `seed` + 11)
    as one batched tensor of `layout` (through strided: the padding of
    RFC.md#batched-compressed makes the batches' nse equal)."""
    parts = [random_tensor(pattern, fill, layout.layout, dtype=dtype, seed=seed + 11 * b,
                           size=size, domain=domain) for b in range(2)]
    x = torch.stack([p.to_dense() for p in parts])
    f = parts[0]._fill_value()
    dense_dim = parts[0].dense_dim()
    if layout.per_batch:
        f = torch.stack([f.expand(parts[0]._dense_shape()),
                         torch.full(parts[0]._dense_shape(), 0.25, dtype=f.dtype)])
        f = f.reshape((2, 1, 1) + tuple(f.shape[1:]))
        v, f1 = parts[1]._values(), parts[1]._fill_value()
        stored = parts[1]._with(torch.zeros_like(v), torch.ones_like(f1)).to_dense() == 0
        x[1] = torch.where(stored, x[1], f[1])
    A = sf.to_sparse(x, fill_value=f, layout=layout.layout, dense_dim=dense_dim,
                     blocksize=blocksize_for(layout.layout))
    return A.detach().requires_grad_() if requires_grad else A


def leaf(t: torch.Tensor) -> torch.Tensor:
    """A fresh copy of t, detached from any graph, that requires grad:
    leaf(torch.ones(2)).is_leaf is True."""
    return t.detach().clone().requires_grad_()


def leaves(A: sf.SparseFillTensor, *, coalesce: bool = True):
    """(A, values, fill): A detached (coalesced first when COO, unless
    `coalesce=False` keeps its pattern and flag as they are, so that the
    uncoalesced paths run) and fresh leaves of its stored values and fill
    that require grad; `rebuild(A, values, fill)` is A again,
    differentiable in both.

        >>> A, v, f = leaves(random_tensor("random", 1.5))
        >>> rebuild(A, v, f).sum().backward()   # v.grad, f.grad
    """
    if coalesce and A.layout == torch.sparse_coo:
        A = A.coalesce()
    A = A.detach()
    return A, leaf(A._values()), leaf(A._fill_value())


def rebuild(A: sf.SparseFillTensor, values, fill) -> sf.SparseFillTensor:
    """A's pattern (as it is: `values` are in A's order) with other values
    and fill (any fill shape A's shape broadcasts to: per-slice fills too).

        >>> rebuild(A, A._values() * 2, torch.tensor(0.5, dtype=A.dtype))
    """
    return A._with(values, torch.as_tensor(fill, dtype=values.dtype, device=values.device))


def with_fill(A: sf.SparseFillTensor, fill) -> sf.SparseFillTensor:
    """A's pattern and values with another fill (per-slice fills included).

        >>> with_fill(A, torch.randn(5, 1, dtype=A.dtype))   # a per-row fill
    """
    A = A.coalesce() if A.layout == torch.sparse_coo else A
    return rebuild(A, A._values(), fill)
