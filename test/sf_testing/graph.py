"""The graph domain's reference (RFC.md#indefinite-fill): dense values and a
presence mask, and products, element-wise modes and reductions that reduce
over the present terms only (never an identity stand-in), built from torch
ops on the dense leaves so that their gradients are the reference too."""
from __future__ import annotations

import torch

import torch_sparsefill as sf

NAN = float("nan")


def random_graph(shape, density=0.45, dtype=torch.float64, seed=0, negative=True):
    """(dense values, presence mask): an operand's two halves."""
    g = torch.Generator().manual_seed(seed)
    present = torch.rand(shape, generator=g) < density
    if dtype == torch.bool:
        values = torch.rand(shape, generator=g) < 0.6
    elif dtype.is_floating_point:
        values = torch.randn(shape, generator=g, dtype=torch.float64).mul(3).round().to(dtype)
        if not negative:
            values = values.abs()
    else:
        values = torch.randint(-4 if negative else 0, 5, shape, generator=g).to(dtype)
    return values, present


def indefinite(values, present, layout=torch.sparse_coo):
    """The indefinite tensor of the present elements (differentiable in values)."""
    A = sf.to_sparse(values, fill_value=sf.indefinite, mask=present)
    return A if layout == torch.sparse_coo else A.to_sparse(layout=layout)


def parts(R):
    """(dense values with 0 where absent, presence mask) of an indefinite result."""
    C = R.to_sparse_coo()._coalesced()
    idx, vals = C._sf_indices, C._sf_values
    present = torch.zeros(R.shape, dtype=torch.bool)
    present[tuple(idx)] = True
    values = torch.zeros(R.shape, dtype=vals.dtype).index_put(tuple(idx), vals)
    return values, present


def monoid(name, terms, order):
    """The monoid over present `terms` (1-D), as torch's own reductions."""
    if name == "plus":
        return terms.sum() if terms.dtype != torch.bool else terms.to(torch.int64).sum()
    if name == "times":
        return terms.prod() if terms.dtype != torch.bool else terms.to(torch.int64).prod()
    if name == "min":
        return terms.amin() if terms.dtype != torch.bool else terms.all()
    if name == "max":
        return terms.amax() if terms.dtype != torch.bool else terms.any()
    if name == "lor":
        return terms.ne(0).any()
    if name == "land":
        return terms.ne(0).all()
    if name == "any":
        return terms[torch.argmin(order)]
    raise ValueError(name)


def mxm(Av, Ap, Bv, Bp, semiring, allowed=None):
    """A list of ((i, j), value) of the product over present k only."""
    mon, op = sf.graph.operators.semiring(semiring)
    fn = sf.graph.operators.binary(op)
    m, n = Av.shape[0], Bv.shape[1]
    out = {}
    for i in range(m):
        for j in range(n):
            if allowed is not None and not allowed[i, j]:
                continue
            ks = (Ap[i] & Bp[:, j]).nonzero().squeeze(1)
            if ks.numel():
                out[(i, j)] = monoid(mon, fn(Av[i, ks], Bv[ks, j]), ks)
    return out


def reduce(Av, Ap, dim, name):
    """{index: value} of the reduction over present elements along dim."""
    out = {}
    if dim is None:
        idx = Ap.reshape(-1).nonzero().squeeze(1)
        return {(): monoid(name, Av.reshape(-1)[idx], idx)} if idx.numel() else {}
    for s in range(Av.shape[1 - dim]):
        vals, pres = (Av[s], Ap[s]) if dim == 1 else (Av[:, s], Ap[:, s])
        idx = pres.nonzero().squeeze(1)
        if idx.numel():
            out[(s,)] = monoid(name, vals[idx], idx)
    return out


def assert_result(R, expected: dict, shape):
    """R's pattern is exactly expected's keys, and its values equal theirs."""
    assert R.is_indefinite()
    assert tuple(R.shape) == tuple(shape)
    values, present = parts(R)
    want = torch.zeros(shape, dtype=torch.bool)
    for k in expected:
        want[k] = True
    assert torch.equal(present, want), f"pattern differs:\n{present}\n{want}"
    for k, v in expected.items():
        torch.testing.assert_close(values[k], v.to(values.dtype), equal_nan=True,
                                   msg=f"at {k}")


def as_parts(expected: dict, shape, dtype):
    values = torch.zeros(shape, dtype=dtype)
    present = torch.zeros(shape, dtype=torch.bool)
    for k, v in expected.items():
        values[k] = v
        present[k] = True
    return values, present
