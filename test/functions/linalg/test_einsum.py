"""torch.einsum with SparseFillTensor operands: the contractions that are
products, reductions, transposes and element-wise products; the result
equals the dense einsum."""
from __future__ import annotations

import math

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from sf_testing import assert_dense_equal, rng

SIZES = {"b": 2, "h": 3, "i": 4, "j": 5, "k": 3}


def sparse(term, fill, seed):
    shape = tuple(SIZES[ch] for ch in term)
    g = rng(seed)
    keep = torch.rand(shape, generator=g) < 0.4
    idx = keep.nonzero().t()
    return sf.sparse_coo_tensor(idx, torch.randn(idx.shape[1], generator=g, dtype=torch.float64),
                                shape, fill_value=fill)


def strided(term, seed):
    return torch.randn(tuple(SIZES[ch] for ch in term), generator=rng(seed), dtype=torch.float64)


EQUATIONS = [
    # (equation, which operands are sparse)
    ("ij->ji", "s"), ("ij->i", "s"), ("ij->", "s"), ("ij", "s"), ("bij->bj", "s"),
    ("ij,jk->ik", "sd"), ("ij,jk->ik", "ds"), ("ij,jk->ik", "ss"), ("ij,jk", "sd"),
    ("ij,kj->ik", "sd"), ("ij,jk->ki", "sd"), ("ij,j->i", "sd"), ("i,ij->j", "ds"),
    ("bij,bjk->bik", "sd"), ("bhij,bhjk->bhik", "sd"), ("bhij,bhkj->bhik", "ds"),
    ("ij,ij->ij", "sd"), ("ij,j->ij", "sd"), ("ij,ij->", "sd"), ("ij,ij->i", "sd"),
    ("ik,ij->kj", "sd"), ("bij,bjk->ik", "sd"), ("ihj,jk->hik", "sd"),
    ("ij,jk,kh->ih", "sdd"), ("ij,jk,kh->ih", "dsd"),
]


@pytest.mark.parametrize("fill", [0.0, 1.5, -math.inf, math.nan])
@pytest.mark.parametrize("equation,kinds", EQUATIONS, ids=lambda x: str(x))
def test_matches_dense(equation, kinds, fill):
    terms = equation.split("->")[0].split(",")
    ops = [sparse(t, fill, 10 + n) if kind == "s" else strided(t, 10 + n)
           for n, (t, kind) in enumerate(zip(terms, kinds))]
    out = torch.einsum(equation, *ops)
    expected = torch.einsum(equation, *[T.dense(x) for x in ops])
    assert_dense_equal(T.dense(out), expected)


def test_list_form_and_gradients():
    A = sparse("bij", 0.5, 1).coalesce()
    v = A.values().detach().clone().requires_grad_()
    f = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    x = strided("bjk", 2).requires_grad_()
    S = sf.sparse_coo_tensor(A.indices(), v, A.shape, fill_value=f)
    torch.einsum("bij,bjk->bik", [S, x]).pow(2).sum().backward()
    v2, f2 = v.detach().clone().requires_grad_(), f.detach().clone().requires_grad_()
    x2 = x.detach().clone().requires_grad_()
    D = sf.sparse_coo_tensor(A.indices(), v2, A.shape, fill_value=f2).to_dense()
    torch.einsum("bij,bjk->bik", D, x2).pow(2).sum().backward()
    for got, want in ((v.grad, v2.grad), (f.grad, f2.grad), (x.grad, x2.grad)):
        torch.testing.assert_close(got, want)


@pytest.mark.parametrize("equation,match", [
    ("ii->i", "repeated index"), ("...ij->...ji", "ellipsis"), ("ij,jk->ik", "3 operands"),
    ("ij->q", "output subscript"), ("i->i", "has 1 indices"),
])
def test_refusals(equation, match):
    A = sparse("ij", 1.0, 3) if equation != "ii->i" else sf.sparse_coo_tensor(
        [[0], [0]], [1.], (3, 3), fill_value=1.)
    args = (A, strided("jk", 4), strided("kh", 5)) if "3 operands" in match else (A,)
    if "operands" in match:
        match = "names 2 operands"
    with pytest.raises((NotImplementedError, RuntimeError), match=match):
        torch.einsum(equation, *args)
    if "repeated" in match or "ellipsis" in match:
        with pytest.raises(NotImplementedError, match="torch.einsum"):
            torch.einsum(equation, *args)
