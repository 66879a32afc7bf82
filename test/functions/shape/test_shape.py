"""Shape and indexing ops (RFC.md#shape-and-indexing): every op on a SparseFillTensor equals
the same op on the dense tensor, gradients included, on COO, CSR, hybrid and
per-slice fills.

The dense reference is `sf_testing.dense_of`, not to_dense(), so that
per-slice fills are checked independently of the library's conversions;
torch.cat and torch.stack are in test_concat.py.
"""
from __future__ import annotations

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf
from sf_testing import dense_of, random_tensor
from sf_testing.shapes import COO, CSC, CSR, TENSORS, assert_canonical

ERRORS = (RuntimeError, IndexError, NotImplementedError, TypeError, ValueError)


# Ops that apply to any tensor with two leading sparse dims of sizes (5, 7).
OPS_2D = {
    "transpose": lambda x: x.transpose(0, 1),
    "transpose_neg": lambda x: torch.transpose(x, 1, -x.dim()),
    "swapaxes": lambda x: torch.swapaxes(x, 0, 1),
    "permute": lambda x: x.permute(1, 0, *range(2, x.dim())),
    "unsqueeze0": lambda x: x.unsqueeze(0),
    "unsqueeze1": lambda x: torch.unsqueeze(x, 1),
    "unsqueeze2": lambda x: x.unsqueeze(2),
    "unsqueeze_last": lambda x: x.unsqueeze(-1),
    "squeeze": lambda x: x.unsqueeze(1).unsqueeze(-1).squeeze(),
    "squeeze_dim": lambda x: torch.squeeze(x.unsqueeze(0), 0),
    "reshape_sparse": lambda x: x.reshape((35,) + tuple(x.shape[2:])),
    "reshape_swap": lambda x: x.reshape((7, 5) + tuple(x.shape[2:])),
    "reshape_infer": lambda x: torch.reshape(x, (-1, 5) + tuple(x.shape[2:])),
    "view": lambda x: x.view(35, *x.shape[2:]),
    "flatten": lambda x: x.flatten(0, 1),
    "narrow_rows": lambda x: x.narrow(0, 1, 3),
    "narrow_empty": lambda x: torch.narrow(x, 0, 2, 0),
    "narrow_cols": lambda x: x.narrow(1, 2, 4),
    "narrow_copy": lambda x: x.narrow_copy(1, 6, 1),
    "select_row": lambda x: x.select(0, 2),
    "select_col": lambda x: torch.select(x, 1, -1),
    "index_select_rows": lambda x: x.index_select(0, torch.tensor([4, 0, 4, 2])),
    "index_select_cols": lambda x: torch.index_select(x, 1, torch.tensor([6, 1, 1, 3])),
    "index_select_cols_sorted": lambda x: x.index_select(1, torch.tensor([0, 2, 2, 5, 6])),
    "index_select_none": lambda x: x.index_select(1, torch.tensor([], dtype=torch.int64)),
    "getitem_int": lambda x: x[2],
    "getitem_int_int": lambda x: x[2, 3],
    "getitem_neg": lambda x: x[-1, -7],
    "getitem_col": lambda x: x[:, 3],
    "getitem_step": lambda x: x[1:5:2],
    "getitem_col_step": lambda x: x[:, ::3],
    "getitem_both_slices": lambda x: x[3:, 1:6:2],
    "getitem_ellipsis": lambda x: x[..., 1:3] if x.dim() > 2 else x[..., 4],
    "getitem_none": lambda x: x[None, 1],
    "getitem_none_mid": lambda x: x[:, None, 2:],
    "getitem_list": lambda x: x[[3, 1, 3]],
    "getitem_tensor_cols": lambda x: x[:, torch.tensor([0, -1, 2])],
    "getitem_bool": lambda x: x[torch.tensor([True, False, True, True, False])],
    "getitem_int_tensor": lambda x: x[1, torch.tensor([6, 0])],
    "getitem_tensor_int": lambda x: x[torch.tensor([4, 1]), 2],
    "getitem_row_slice": lambda x: x[-1, 2:],
    "getitem_0d_tensor": lambda x: x[torch.tensor(3)],
    "contiguous": lambda x: x.contiguous(),
    "clone": lambda x: x.clone(),
}
OPS_2D_ONLY = {  # need exactly two dims
    "t": lambda x: x.t(),
    "torch_t": lambda x: torch.t(x),
    "mT": lambda x: x.mT,
    "T": lambda x: x.T,
}
OPS_HYBRID = {
    "select_dense": lambda x: x.select(2, 1),
    "narrow_dense": lambda x: x.narrow(-1, 1, 2),
    "index_select_dense": lambda x: x.index_select(2, torch.tensor([2, 0, 2])),
    "getitem_element": lambda x: x[1, 2, 0],
    "getitem_dense_slice": lambda x: x[..., ::2],
    "getitem_dense_part": lambda x: x[4, 6],
    "reshape_dense": lambda x: x.unsqueeze(-1).reshape(5, 7, 3),
    "reshape_dense_split": lambda x: x.unsqueeze(-1).expand(5, 7, 3, 2).reshape(5, 7, 6),
    "expand": lambda x: x.unsqueeze(-1).expand(5, 7, 3, 4),
    "expand_as": lambda x: x.unsqueeze(-1).expand_as(torch.empty(5, 7, 3, 2)),
    "transpose_sparse": lambda x: x.transpose(1, 0),
}
OPS_3D = {
    "permute": lambda x: x.permute(2, 0, 1),
    "transpose02": lambda x: x.transpose(0, 2),
    "index_select1": lambda x: x.index_select(1, torch.tensor([4, 4, 0])),
    "index_select2": lambda x: x.index_select(2, torch.tensor([5, 1])),
    "index_select2_sorted": lambda x: x.index_select(2, torch.tensor([1, 1, 4])),
    "select2": lambda x: x.select(2, 3),
    "getitem_mixed": lambda x: x[1, :, 2],
    "getitem_element": lambda x: x[3, 4, 5],
    "getitem_ellipsis_int": lambda x: x[..., 0, 1:],
    "getitem_tensor_slice_int": lambda x: x[torch.tensor([3, 0]), :, 4],
    "getitem_slice_tensor_int": lambda x: x[:, [4, 4, 1], 0],
    "getitem_ellipsis_tensor": lambda x: x[..., torch.tensor([1, 0, 1, 0, 1, 1]).bool()],
    "reshape": lambda x: x.reshape(20, 6),
    "reshape_all": lambda x: x.reshape(-1),
    "reshape_more": lambda x: x.reshape(2, 2, 5, 3, 2),
    "flatten": lambda x: x.flatten(),
    "flatten_tail": lambda x: torch.flatten(x, 1),
    "narrow2": lambda x: x.narrow(2, 1, 4),
    "getitem_step": lambda x: x[:, 1::2, ::4],
    "unsqueeze_mid": lambda x: x.unsqueeze(2),
}


def check(fn, A):
    expected = fn(dense_of(A))
    out = fn(A)
    if isinstance(out, sf.SparseFillTensor):
        assert_canonical(out)
        if A.layout == COO:
            assert out.layout == COO
            # Results are coalesced; clone and contiguous keep the input as it is.
            assert out.is_coalesced() or fn in (OPS_2D["clone"], OPS_2D["contiguous"])
    else:
        assert out.layout == torch.strided
    actual = dense_of(out)
    assert actual.shape == expected.shape
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, equal_nan=True, rtol=0, atol=0)
    return out


def _cases(ops, names):
    return [pytest.param(TENSORS[t], op, id=f"{t}-{o}") for t in names for o, op in ops.items()]


TWO_SPARSE = ["coo", "coo_uncoalesced", "csr", "csr_empty", "coo_full", "hybrid_coo",
              "hybrid_csr", "rowfill_coo", "colfill_csr", "slicefill_hybrid"]


@pytest.mark.parametrize("A,op", _cases(OPS_2D, TWO_SPARSE)
                         + _cases(OPS_2D_ONLY, ["coo", "csr", "csr_empty", "rowfill_coo",
                                                "colfill_csr"])
                         + _cases(OPS_HYBRID, ["hybrid_coo", "hybrid_csr", "slicefill_hybrid"])
                         + _cases(OPS_3D, ["coo_3d"]))
def test_dense_equivalence(A, op):
    if op in (OPS_2D["reshape_sparse"], OPS_2D["reshape_swap"], OPS_2D["reshape_infer"],
              OPS_2D["view"], OPS_2D["flatten"]) and A._fill_value().dim() > A.dense_dim():
        with pytest.raises(NotImplementedError, match="per-slice fill"):
            op(A)
        return
    check(op, A)


@pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.complex128, torch.float32])
@pytest.mark.parametrize("layout", [COO, CSR])
def test_dtypes(dtype, layout):
    base = TENSORS["coo"]
    v = base._values()
    values = v > 0 if dtype == torch.bool else (v * 5).round().to(dtype) \
        if dtype == torch.int64 else v.to(dtype) * (1 + 1j if dtype.is_complex else 1)
    fill = torch.tensor(True) if dtype == torch.bool else torch.tensor(7).to(dtype)
    A = base._with(values, fill).to_sparse(layout=layout)
    B = base._with(values.flip(0), torch.zeros((), dtype=dtype)).to_sparse(layout=layout)
    for name in ("transpose", "index_select_cols", "getitem_int_int", "getitem_step",
                 "reshape_swap", "select_col"):
        check(OPS_2D[name], A)
    for dim in (0, 1):
        out = torch.cat([A, B], dim)
        assert_canonical(out)
        torch.testing.assert_close(dense_of(out), torch.cat([dense_of(A), dense_of(B)], dim))


MULTI_OPS = {
    "unbind0": lambda x: x.unbind(0),
    "unbind1": lambda x: torch.unbind(x, 1),
    "iterate": lambda x: list(x),
    "split": lambda x: torch.split(x, 2),
    "split_sizes": lambda x: x.split([1, 4, 2], 1),
    "chunk": lambda x: torch.chunk(x, 3, 1),
    "chunk_rows": lambda x: x.chunk(2),
}


@pytest.mark.parametrize("name", ["coo", "csr", "hybrid_csr", "colfill_csr", "slicefill_hybrid"])
@pytest.mark.parametrize("op", list(MULTI_OPS))
def test_multi_output_ops(name, op):
    A = TENSORS[name]
    fn = MULTI_OPS[op]
    pieces, expected = fn(A), fn(dense_of(A))
    assert len(pieces) == len(expected)
    for out, exp in zip(pieces, expected):
        if isinstance(out, sf.SparseFillTensor):
            assert_canonical(out)
        torch.testing.assert_close(dense_of(out), exp, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize("op", ["transpose", "element", "index_select_cols", "cat_rows"])
def test_gradgradcheck(op):
    """Double backward works too (the ops are linear, so this checks that
    their backward graphs are themselves differentiable)."""
    A, v, f = _leaves("csr")
    fn = GRAD_OPS[op]
    assert torch.autograd.gradgradcheck(lambda v, f: dense_of(fn(A._with(v, f))) ** 2, (v, f))


def test_split_gradcheck():
    A, v, f = _leaves("rowfill_coo")

    def run(v, f):
        B = A._with(v, f)
        return torch.cat([dense_of(p) * k for k, p in enumerate(B.split([2, 3, 2], 1))], 1)

    assert torch.autograd.gradcheck(run, (v, f))


# ---- results: layout, fill, strided elements ----------------------------------------

def test_single_element_is_strided_0d():
    A = sf.sparse_coo_tensor([[0, 1], [2, 0]], [3., 4.], (2, 3), fill_value=5.)
    for layout in (COO, CSR):
        B = A.to_sparse(layout=layout)
        stored, unspecified = B[0, 2], B[1, 1]
        assert type(stored) is torch.Tensor and stored.dim() == 0 and stored.item() == 3.
        assert type(unspecified) is torch.Tensor and unspecified.item() == 5.


def test_slice_keeps_fill_and_layout():
    A = random_tensor("random", 1.5, CSR, seed=1)
    R = A[1:4]
    assert R.layout == CSR and R._fill_value().item() == 1.5
    assert R.crow_indices()[0] == 0 and R.nse() == int(A.crow_indices()[4] - A.crow_indices()[1])
    C = A.index_select(0, torch.tensor([3, 3]))
    assert C.layout == CSR and C.nse() == 2 * int(A.crow_indices().diff()[3])


CSR_KEEPS = ["narrow_rows", "narrow_cols", "index_select_rows",
             "index_select_cols", "getitem_step", "getitem_both_slices", "getitem_list",
             "getitem_tensor_cols", "getitem_bool", "contiguous"]


@pytest.mark.parametrize("name", ["csr", "hybrid_csr", "colfill_csr"])
@pytest.mark.parametrize("op", CSR_KEEPS)
def test_csr_stays_csr(name, op):
    assert check(OPS_2D[op], TENSORS[name]).layout == CSR


@pytest.mark.parametrize("name", ["csr", "hybrid_csr", "colfill_csr"])
@pytest.mark.parametrize("op", ["transpose", "permute"])
def test_csr_transpose_is_csc(name, op):
    """As in torch: the transpose of CSR is CSC, in O(1) (RFC.md#compressed-components)."""
    assert check(OPS_2D[op], TENSORS[name]).layout == CSC


def test_csr_t_is_csc_sharing_the_components():
    A = random_tensor("random", 1.5, CSR, seed=1)
    B = A.t()
    assert B.layout == CSC and B.shape == (7, 5)
    assert B.ccol_indices() is A.crow_indices() and B._values() is A._values()
    torch.testing.assert_close(dense_of(B), dense_of(A).t())
    assert B.t().layout == CSR


def test_per_slice_fill_is_sliced_along():
    A = TENSORS["rowfill_coo"]
    rows = A._fill_value()
    assert A[1:4]._fill_value().shape == (3, 1)
    torch.testing.assert_close(A[1:4]._fill_value(), rows[1:4])
    # Selecting a row leaves one fill value: stored in the dense-part form.
    assert A[2]._fill_value().shape == ()
    torch.testing.assert_close(A[2]._fill_value(), rows[2, 0])
    assert A.t()._fill_value().shape == (1, 5)
    # Narrowing columns: the per-row fill is unchanged.
    assert A[:, 2:5]._fill_value().shape == (5, 1)


def test_dense_part_fill_follows_dense_ops():
    A = TENSORS["hybrid_coo"]  # fill (3,) = [0.5, 1.5, 1.5]
    torch.testing.assert_close(A[..., 0]._fill_value(), A._fill_value()[0])
    torch.testing.assert_close(A.index_select(2, torch.tensor([2, 0]))._fill_value(),
                               A._fill_value()[[2, 0]])


ALIAS_OPS = ["transpose", "unsqueeze_last", "squeeze_dim", "reshape_sparse", "narrow_rows",
             "narrow_cols", "select_row", "index_select_rows", "getitem_step", "getitem_none"]


# The transposes of a compressed tensor are views, as in torch (RFC.md#compressed-components).
ALIAS_CASES = [(n, op) for n in ("coo", "csr", "hybrid_coo", "hybrid_csr", "rowfill_coo")
               for op in ALIAS_OPS if (n, op) != ("rowfill_coo", "reshape_sparse")
               and not (n.endswith("csr") and op == "transpose")] + \
    [(n, op) for n in ("hybrid_coo", "hybrid_csr")
     for op in ("select_dense", "narrow_dense", "reshape_dense")]


@pytest.mark.parametrize("name,op", ALIAS_CASES)
def test_results_are_not_views(name, op):
    """Writing into a result in place leaves the input alone (RFC.md#shape-layouts-and-cost)."""
    A = TENSORS[name].clone()
    fn = OPS_2D.get(op) or OPS_HYBRID[op]
    before = dense_of(A).clone()
    R = fn(A)
    R._values().mul_(0).add_(123.)
    R._fill_value().fill_(-77.)
    torch.testing.assert_close(dense_of(A), before, equal_nan=True, rtol=0, atol=0)


def test_expand_fill_is_not_shared():
    A = TENSORS["hybrid_coo"].clone().unsqueeze(-1)
    before = dense_of(A).clone()
    A.expand(5, 7, 3, 4)._fill_value().fill_(9.)
    torch.testing.assert_close(dense_of(A), before, rtol=0, atol=0)


# ---- gradients ------------------------------------------------------------------

def _leaves(name):
    """T.leaves of TENSORS[name] with a finite fill (gradcheck perturbs it)."""
    A, v, f = T.leaves(TENSORS[name])
    return A, v, T.leaf(torch.nan_to_num(f, nan=0.25, posinf=3.0, neginf=-3.0))


GRAD_OPS = {
    "transpose": lambda x: x.transpose(0, 1),
    "unsqueeze_squeeze": lambda x: x.unsqueeze(1).squeeze(1),
    "reshape": lambda x: x.reshape(7, 5, *x.shape[2:]),
    "narrow": lambda x: x.narrow(0, 1, 3),
    "select": lambda x: x.select(1, 2),
    "index_select_rows": lambda x: x.index_select(0, torch.tensor([4, 0, 4])),
    "index_select_cols": lambda x: x.index_select(1, torch.tensor([6, 6, 1])),
    "getitem": lambda x: x[1:4:2, [0, 3, 3]],
    "element": lambda x: x[2, 3],
    "cat_cols": lambda x: torch.cat([x, x[:, 2:5]], 1),
    "cat_rows": lambda x: torch.cat([x[1:3], x], 0),
    "stack": lambda x: torch.stack([x, x], 0),
}


# Reshaping the sparse dims refuses per-slice fills (tested above).
GRAD_CASES = [(n, op) for n in ("coo", "csr", "hybrid_csr", "rowfill_coo", "slicefill_hybrid")
              for op in GRAD_OPS if not (op == "reshape" and "fill_" in n)]


@pytest.mark.parametrize("name,op", GRAD_CASES)
def test_gradcheck(name, op):
    A, v, f = _leaves(name)
    fn = GRAD_OPS[op]

    def run(v, f):
        return dense_of(fn(A._with(v, f)))

    assert torch.autograd.gradcheck(run, (v, f))


def test_unspecified_element_sends_gradient_to_fill():
    v = torch.tensor([3., 4.], requires_grad=True)
    f = torch.tensor(5., requires_grad=True)
    for layout in (COO, CSR):
        A = sf.sparse_coo_tensor([[0, 1], [2, 0]], v, (2, 3), fill_value=f).to_sparse(
            layout=layout)
        (A[1, 1] * 7 + A[0, 2] * 3).backward()
        assert f.grad.item() == 7. and v.grad.tolist() == [3., 0.]
        f.grad = v.grad = None
        # A selected row: its 2 unspecified elements add to the fill gradient.
        dense_of(A[1]).sum().backward()
        assert f.grad.item() == 2. and v.grad.tolist() == [0., 1.]
        f.grad = v.grad = None


def test_docstring_examples():
    import doctest

    from torch_sparsefill.functions.shape import concat as _concat, indexing as _indexing, reshape as _shape

    results = [doctest.testmod(m, extraglobs={"sf": sf, "torch": torch})
               for m in (_shape, _indexing, _concat)]
    assert sum(r.attempted for r in results) >= 15 and sum(r.failed for r in results) == 0


# ---- errors --------------------------------------------------------------------

def test_errors():
    A = TENSORS["hybrid_coo"]
    with pytest.raises(RuntimeError, match="sparse dim 1 with dense dim 2"):
        A.transpose(1, 2)
    with pytest.raises(RuntimeError, match="cannot move dims between"):
        A.permute(2, 0, 1)
    with pytest.raises(NotImplementedError, match="mixes them"):
        A.reshape(5, 21)
    with pytest.raises(NotImplementedError, match="per-slice fill"):
        TENSORS["rowfill_coo"].reshape(35)
    # sparse dims of size 1 and new leading dims expand now (copies, functions/shape/copies.py)
    D = A.to_dense()
    assert torch.equal(A.unsqueeze(0).expand(4, 5, 7, 3).to_dense(), D.expand(4, 5, 7, 3))
    assert torch.equal(A.expand(2, 5, 7, 3).to_dense(), D.expand(2, 5, 7, 3))
    with pytest.raises(RuntimeError, match="non-singleton dimension 0"):
        A.expand(6, 7, 3)
    with pytest.raises(RuntimeError, match="non-singleton dimension 2"):
        A.expand(5, 7, 4)
    with pytest.raises(ValueError, match="step must be greater than zero"):
        A[::-1]
    with pytest.raises(IndexError, match="out of range"):
        A[5]
    with pytest.raises(IndexError, match="out of range"):
        A.select(1, -8)
    with pytest.raises(IndexError, match="out of bounds"):
        A.index_select(0, torch.tensor([5]))
    with pytest.raises(IndexError, match="out of bounds"):
        A[torch.tensor([0, -6])]
    with pytest.raises(TypeError, match="integer tensor"):
        A.index_select(0, torch.tensor([True]))
    with pytest.raises(IndexError, match="dimension out of range"):
        A.select(3, 0)
    with pytest.raises(IndexError, match="too many indices"):
        A[0, 0, 0, 0]
    # a mask of several dims and several index tensors compute now (functions/indexing/)
    mask = torch.ones(5, 7, dtype=torch.bool)
    assert torch.equal(A[mask], A.to_dense()[mask])
    with pytest.raises(IndexError, match="boolean index must be 1-D of the dim's size 5"):
        A[torch.ones(4, dtype=torch.bool)]
    assert torch.equal(A[[0, 1], [1, 2]], A.to_dense()[[0, 1], [1, 2]])
    with pytest.raises(NotImplementedError, match="separated by slices"):
        TENSORS["coo_3d"][1, :, [0, 2]]
    with pytest.raises(RuntimeError, match=r"exceeds dimension size"):
        A.narrow(0, 3, 3)
    with pytest.raises(NotImplementedError, match="mixes them"):
        sf.sparse_coo_tensor(torch.zeros(1, 0, dtype=torch.int64), torch.zeros(0, 4), (0, 4),
                             fill_value=1.).flatten()  # empty: the dense part cannot merge
    with pytest.raises(RuntimeError, match="invalid for input of size"):
        A.reshape(4, 7, 3)
    with pytest.raises(RuntimeError, match="2 dimensions"):
        A.t()
    with pytest.raises(NotImplementedError, match=r"tensors\[1\] must be a SparseFillTensor"):
        torch.cat([A, A.to_dense()])
    with pytest.raises(RuntimeError, match="must match except in dimension 0"):
        torch.cat([A, A[:, :3]])
    with pytest.raises(RuntimeError, match="sparse and"):
        torch.cat([A, A.select(2, 0)])
    with pytest.raises(RuntimeError, match="equal size"):
        torch.stack([A, A[1:]])
    with pytest.raises(RuntimeError, match="sum exactly to 5"):
        A.split([2, 2])
    with pytest.raises(RuntimeError, match="greater than 0"):
        A.chunk(0)
    with pytest.raises(NotImplementedError, match="view\\(dtype\\)"):
        A.view(torch.int64)
    with pytest.raises(NotImplementedError, match="no fill-value semantics"):
        A.unfold(0, 2, 1)
