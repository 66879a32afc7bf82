"""vmap over SparseFillTensor arguments (RFC.md#vmap): `sf.vmap(f)(A)` and
`torch.func.vmap` inside `sf.vmappable()` take a batched SparseFillTensor (a
3-D COO, a batched CSR) apart into its slices along dim 0. Each program's
result equals f stacked over the slices and the same program vmapped over
the dense tensor, values and gradients (of A's values and fill through the
vmap, and vmap of grad), with fills 0.3, inf, -inf and nan. The registration
is scoped: outside it a SparseFillTensor is one pytree leaf and a transform
refuses it, also after an error and with threads."""
import math
import threading

import pytest
import torch
from torch.utils import _pytree as pytree

import sf_testing as T
import torch_sparsefill as sf
from torch_sparsefill.compile import vmap as _vmap

pytestmark = [pytest.mark.cpu_only(reason="transforms of CPU programs"),
              pytest.mark.filterwarnings("ignore:There is a performance drop")]

F64 = torch.float64
# A: 3 x 3 x 4, slice 0 two elements, slice 1 one, slice 2 none (padding to
# one nse per slice meets every case), stored values where the fill is not.
IDX = torch.tensor([[0, 0, 1], [0, 2, 1], [1, 3, 0]])
SIZE = (3, 3, 4)
FILLS = [0.3, math.inf, -math.inf, math.nan]
W = torch.linspace(-1.0, 1.0, 8, dtype=F64).reshape(4, 2)


PROGRAMS = {
    "chain": lambda S: -(torch.exp(torch.sigmoid(S * 2 + 1)) * 0.5 - 1),
    "A@W": lambda S: S @ (W if S.dtype == F64 else W.to(S.dtype)),
    "softmax": lambda S: torch.softmax(S * 0.5, -1),
    "sum(-1)": lambda S: S.sum(-1),
    "to_dense": lambda S: S.to_dense(),
    "block": lambda S: torch.softmax(S * 0.5, -1) @ W,
}
LAYOUTS = ["coo", "csr", "csc", "bsr"]


def _leaves(fill):
    v = torch.tensor([1.5, -0.5, 2.0], dtype=F64, requires_grad=True)
    f = torch.tensor(fill, dtype=F64, requires_grad=True)
    return v, f


def _sparse(layout, v, f):
    A = sf.sparse_coo_tensor(IDX, v, SIZE, fill_value=f)
    if layout == "bsr":
        return A.to_sparse(layout=torch.sparse_bsr, blocksize=(1, 2))
    return A.to_sparse(layout=getattr(torch, "sparse_" + layout))


def _loss(out):
    out = T.dense(out)
    weight = torch.linspace(0.5, 1.5, out.numel(), dtype=F64).reshape(out.shape)
    return (out * weight).nan_to_num(nan=0.0, posinf=7.0, neginf=-7.0).sum()


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_vmap_over_slices(name, layout, fill):
    """sf.vmap(f)(A) equals f stacked over A's slices and torch.func.vmap(f)
    of the dense tensor; the gradient of A's values and fill through it
    equals the dense gradient."""
    prog = PROGRAMS[name]
    v, f = _leaves(fill)
    A = _sparse(layout, v, f)
    got = sf.vmap(prog)(A)
    stacked = torch.stack([T.dense(prog(A[i])) for i in range(SIZE[0])])
    D = T.dense_from_parts(IDX, v, f, SIZE)
    # to_dense of the dense reference is D itself; torch 2.14.1's functorch
    # to_dense rule fails on a plain BatchedTensor (an INTERNAL ASSERT in
    # PlumbingHelper.h), so the reference does not ask it.
    want = D if name == "to_dense" else torch.func.vmap(prog)(D)
    torch.testing.assert_close(T.dense(got), want, equal_nan=True)
    torch.testing.assert_close(stacked, want, equal_nan=True)
    if isinstance(got, sf.SparseFillTensor):  # stacked back with a leading batch dim
        # (a BSR's slices are COO under vmap: RFC.md#vmap)
        slice_layout = torch.sparse_coo if layout == "bsr" else prog(A[0]).layout
        assert got.shape == want.shape and got.layout == slice_layout
    grads = torch.autograd.grad(_loss(got), (v, f), allow_unused=True, materialize_grads=True)
    want_grads = torch.autograd.grad(_loss(want), (v, f), allow_unused=True,
                                     materialize_grads=True)
    for g, w in zip(grads, want_grads):
        torch.testing.assert_close(g, w, equal_nan=True)


@pytest.mark.parametrize("layout", ["coo", "csr"])
@pytest.mark.parametrize("name", ["A@W", "block", "softmax"])
def test_vmap_of_grad(name, layout):
    """Per-slice gradients of a dense operand: vmap of grad with A's slices
    as SparseFillTensors equals the dense computation."""
    prog = PROGRAMS[name]

    def f(S, w):
        out = T.dense(prog(S))
        return (out.sum(-1) * w).sum() if out.dim() == 1 else (out @ w.t()).sum()

    v, fill = _leaves(0.3)
    A = _sparse(layout, v.detach(), fill.detach())
    w = torch.linspace(0.2, 1.0, 2 if name != "softmax" else 4, dtype=F64)
    got = sf.vmap(torch.func.grad(f, argnums=1), in_dims=(0, None))(A, w)
    want = torch.func.vmap(torch.func.grad(f, argnums=1), in_dims=(0, None))(A.to_dense(), w)
    torch.testing.assert_close(got, want)


def test_per_batch_fill_and_hybrid():
    """A batched CSR with one fill per batch (a (b, 1, 1) per-slice fill) and
    a COO with a dense dim: each slice gets its own fill."""
    C = sf.sparse_csr_tensor(torch.tensor([[0, 1, 2], [0, 0, 2]]), torch.tensor([[1, 0], [0, 1]]),
                             torch.tensor([[1., 2.], [3., 4.]], dtype=F64), (2, 2, 2),
                             fill_value=torch.tensor([1., -2.], dtype=F64).reshape(2, 1, 1))
    prog = lambda S: torch.softmax(torch.exp(S), -1).sum(0)  # noqa: E731
    torch.testing.assert_close(T.dense(sf.vmap(prog)(C)), torch.func.vmap(prog)(C.to_dense()))
    H = sf.sparse_coo_tensor([[0, 1, 1], [1, 0, 1]], torch.arange(6, dtype=F64).reshape(3, 2),
                             (2, 2, 2), fill_value=torch.tensor([0.5, -1.0], dtype=F64))
    prog = lambda S: (S * 2 + 1).sum(0)  # noqa: E731
    torch.testing.assert_close(T.dense(sf.vmap(prog)(H)), torch.func.vmap(prog)(H.to_dense()))


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_two_dim_tensor_and_unbatched_argument(layout):
    """A 2-D tensor's slices are 1-D (rows); in_dims=None passes a tensor
    whole (its own layout back) beside a batched dense argument."""
    v, f = _leaves(-0.25)
    A = _sparse(layout, v.detach(), f.detach())[1]  # 3 x 4: one stored element
    D = A.to_dense()
    torch.testing.assert_close(T.dense(sf.vmap(lambda r: torch.exp(r * 3))(A)), torch.exp(D * 3))
    x = torch.linspace(1.0, 2.0, 5, dtype=F64)
    got = sf.vmap(lambda S, s: (S * s).to_dense(), in_dims=(None, 0))(A, x)
    torch.testing.assert_close(got, D[None] * x[:, None, None])
    seen = []
    sf.vmap(lambda S, s: seen.append(S.layout) or s, in_dims=(None, 0))(A, x)
    assert seen == [A.layout]


def test_nested_vmap_over_batched_csr():
    """vmap of vmap over a 4-D tensor in batched CSR (its batches need no
    reading of data): equals the dense computation; a sparse result comes
    back 4-D in CSR."""
    g = torch.Generator().manual_seed(0)
    D = torch.randn(2, 3, 4, 5, dtype=F64, generator=g)
    D = torch.where(torch.rand(D.shape, generator=g) < 0.3, D, torch.tensor(0.25, dtype=F64))
    C = sf.to_sparse(D, fill_value=0.25).to_sparse_csr()
    prog = lambda S: torch.softmax(S * 2, -1).sum(-1)  # noqa: E731
    torch.testing.assert_close(T.dense(sf.vmap(sf.vmap(prog))(C)),
                               torch.func.vmap(torch.func.vmap(prog))(D))
    out = sf.vmap(sf.vmap(lambda S: S * 2))(C)
    assert out.layout == torch.sparse_csr and out.shape == D.shape
    torch.testing.assert_close(out.to_dense(), D * 2)


def test_chunk_size_and_tuple_outputs():
    v, f = _leaves(0.3)
    A = _sparse("coo", v.detach(), f.detach())
    D = A.to_dense()
    torch.testing.assert_close(T.dense(sf.vmap(lambda S: S * 2, chunk_size=2)(A)), D * 2)
    with sf.vmappable():  # torch.func.vmap itself, a tuple of a sparse and a dense result
        a, b = torch.func.vmap(lambda S: (S - 1, S.sum()))(A)
    torch.testing.assert_close(a.to_dense(), D - 1)
    torch.testing.assert_close(b, D.sum((1, 2)))


def test_csr_constructor_under_vmap():
    """sparse_csr_tensor on batched crow/col inside torch.func.vmap (no
    context needed): csr_check's batching rule checks every batch member,
    and refuses a bad one."""
    crow = torch.tensor([[0, 1, 2], [0, 0, 2]])
    col = torch.tensor([[1, 0], [0, 1]])
    vals = torch.tensor([[1., 2.], [3., 4.]])
    got = torch.func.vmap(lambda c, k, x: sf.sparse_csr_tensor(c, k, x, (2, 2),
                                                               fill_value=0.5).to_dense())(
        crow, col, vals)
    want = sf.sparse_csr_tensor(crow, col, vals, (2, 2, 2), fill_value=0.5).to_dense()
    torch.testing.assert_close(got, want)
    bad = torch.tensor([[1, 0], [1, 0]])  # batch 1: columns not increasing in row 1
    with pytest.raises(RuntimeError):
        torch.func.vmap(lambda c, k, x: sf.sparse_csr_tensor(c, k, x, (2, 2)))(crow, bad, vals)


def test_other_dims_are_refused():
    v, f = _leaves(0.3)
    A = _sparse("coo", v.detach(), f.detach())
    with pytest.raises(ValueError):  # torch's or ours: the fill has no dim 1
        sf.vmap(lambda S: S.to_dense(), in_dims=1)(A)
    # Every component of size 2 at dim 1 (2 sparse dims per slice, nse 2, a
    # dense dim of 2): vmap's own size check passes, ours names in_dims.
    H = sf.sparse_coo_tensor([[0, 0, 1, 1], [0, 1, 0, 1], [1, 0, 1, 0]],
                             torch.ones(4, 2, dtype=F64), (2, 2, 2, 2),
                             fill_value=torch.tensor([0.5, 1.5], dtype=F64))
    with pytest.raises(ValueError, match="in_dims=1"):
        sf.vmap(lambda S: S.to_dense(), in_dims=1)(H)


def test_registration_is_scoped():
    """Outside the context a SparseFillTensor is one pytree leaf and vmap
    refuses it naming sf.vmap; the registration ends with the context, also
    when the function raises, and nested contexts keep it until the outer
    one ends."""
    v, f = _leaves(0.3)
    A = _sparse("coo", v.detach(), f.detach())
    assert pytree.tree_flatten(A)[0] == [A]
    with pytest.raises((NotImplementedError, RuntimeError), match="sf.vmap|INTERNAL ASSERT"):
        torch.func.vmap(lambda S: S.to_dense())(A)
    with pytest.raises(ZeroDivisionError):
        sf.vmap(lambda S: 1 / 0)(A)
    assert not _vmap.registered() and pytree.tree_flatten(A)[0] == [A]
    with sf.vmappable():
        with sf.vmappable():
            assert _vmap.registered()
        assert _vmap.registered() and len(pytree.tree_flatten(A)[0]) == 3
    assert not _vmap.registered() and sf.SparseFillTensor not in pytree.SUPPORTED_NODES
    with sf.vmappable(), pytest.raises(RuntimeError, match="not supported"):
        with sf.exportable():
            pass
    with sf.exportable(), pytest.raises(RuntimeError, match="not supported"):
        with sf.vmappable():
            pass
    assert sf.SparseFillTensor not in pytree.SUPPORTED_NODES


def test_threads():
    """Threads entering and leaving in any order: each result right, and the
    registration gone when the last one leaves."""
    v, f = _leaves(-math.inf)
    A = _sparse("csr", v.detach(), f.detach())
    want = torch.softmax(A.to_dense(), -1)
    start = threading.Barrier(4)
    errors = []

    def work():
        try:
            start.wait()
            for _ in range(5):
                torch.testing.assert_close(sf.vmap(lambda S: torch.softmax(S, -1))(A).to_dense(),
                                           want, equal_nan=True)
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert not _vmap.registered()
