"""Walk what the torch.sparse documentation lists as supporting sparse COO
inputs (names copied below from its "Supported Linear Algebra operations"
table, the sparse Tensor methods, the Tensor methods that support sparse COO
tensors, "Sparse tensor functions" and "Other functions").

Each name has a call that runs unchanged on torch's sparse tensor and on a
SparseFillTensor. With fill 0 ours must give torch's result; with other fills
it must give the dense computation, or the name is in REFUSED and every call
raises NotImplementedError.
"""
import math

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf

LINEAR_ALGEBRA = ["torch.mv", "torch.matmul", "torch.mm", "torch.sparse.mm", "torch.smm",
                  "torch.hspmm", "torch.bmm", "torch.addmm", "torch.sparse.addmm",
                  "torch.sspaddmm", "torch.lobpcg", "torch.pca_lowrank", "torch.svd_lowrank"]
SPARSE_METHODS = ["is_sparse", "dense_dim", "sparse_dim", "sparse_mask", "sparse_resize_",
                  "sparse_resize_and_clear_", "to_dense", "to_sparse", "coalesce",
                  "is_coalesced", "indices", "values"]
COO_METHODS = ["add", "add_", "addmm", "addmm_", "any", "asin", "asin_", "arcsin", "arcsin_",
               "bmm", "clone", "deg2rad", "deg2rad_", "detach", "detach_", "dim", "div", "div_",
               "floor_divide", "floor_divide_", "get_device", "index_select", "isnan", "log1p",
               "log1p_", "mm", "mul", "mul_", "mv", "narrow_copy", "neg", "neg_", "negative",
               "negative_", "numel", "rad2deg", "rad2deg_", "resize_as_", "size", "pow", "sqrt",
               "square", "smm", "sspaddmm", "sub", "sub_", "t", "t_", "transpose", "transpose_",
               "zero_"]
SPARSE_FUNCTIONS = ["torch.sparse_coo_tensor", "torch.sparse.sum", "torch.sparse.addmm",
                    "torch.sparse.mm", "torch.sspaddmm", "torch.hspmm", "torch.smm",
                    "torch.sparse.softmax", "torch.sparse.log_softmax"]
OTHER_FUNCTIONS = ["torch.cat", "torch.dstack", "torch.empty", "torch.empty_like", "torch.hstack",
                   "torch.index_select", "torch.is_complex", "torch.is_floating_point",
                   "torch.is_nonzero", "torch.is_same_size", "torch.is_signed", "torch.is_tensor",
                   "torch.lobpcg", "torch.mm", "torch.native_norm", "torch.pca_lowrank",
                   "torch.select", "torch.stack", "torch.svd_lowrank", "torch.unsqueeze",
                   "torch.vstack", "torch.zeros"]
DOCUMENTED = sorted(set(LINEAR_ALGEBRA + ["Tensor." + m for m in SPARSE_METHODS + COO_METHODS]
                        + SPARSE_FUNCTIONS + OTHER_FUNCTIONS))

# Refused for now (NotImplementedError), each with its owner:
REFUSED = {
    "Tensor.addmm_": "a sparse self cannot hold the dense sum; torch 2.13 refuses it too "
                     "(addmm_sparse_dense: expected strided result tensor)",
}

N = 4
INDICES = [[0, 0, 1, 2, 3, 3], [1, 3, 1, 2, 0, 3]]  # symmetric positions
VALUES = [0.5, 1.5, 2.0, -1.0, 1.5, 3.0]


def vec(k=N):
    return torch.arange(1., k + 1, dtype=torch.float64)


def mat(cols=2):
    return torch.linspace(-1., 2., N * cols, dtype=torch.float64).reshape(N, cols)


def sparse_like(x, dense):
    """`dense` as the same kind of tensor as x (torch sparse, ours with fill
    0.25, or strided)."""
    if isinstance(x, sf.SparseFillTensor):
        return sf.to_sparse(dense, fill_value=0.25)
    if x.layout == torch.sparse_coo:
        return dense.to_sparse()
    return dense


def other(x):
    return sparse_like(x, torch.eye(N, dtype=torch.float64) * 2 - 0.5)


def co(x):
    """x coalesced (torch's sparse in-place unary ops need it); a strided x as it is."""
    return x if x.layout == torch.strided else x.coalesce()


def factory(x, name):
    """torch.<name>(size, layout=torch.sparse_coo), or sf.<name> for ours."""
    if isinstance(x, sf.SparseFillTensor):
        return getattr(sf, name)((2, 3), dtype=x.dtype)
    return getattr(torch, name)((2, 3), layout=torch.sparse_coo, dtype=x.dtype)


def _seeded(f):
    def run(*args, **kwargs):
        torch.manual_seed(0)
        return f(*args, **kwargs)
    return run


def _resize_like(x, size):
    if x.layout == torch.strided:  # the dense counterpart: grow with x's fill
        return None
    return x.clone().sparse_resize_(size, 2, 0)


# name -> (call on x, kind). kind "elements": the result's elements (ours with
# fill 0 == torch's; other fills == the call on x.to_dense()); "product": the
# same for a product whose result torch makes sparse (dense: DENSE);
# "torch": no dense counterpart, compared with torch's structure; "softmax":
# torch's convention that unspecified elements are -inf, so only a fill of
# -inf is accepted (RFC.md#softmax); "refused".
CALLS = {
    "torch.mv": (lambda x: torch.mv(x, vec()), "elements"),
    "torch.matmul": (lambda x: torch.matmul(x, mat()), "elements"),
    "torch.mm": (lambda x: torch.mm(x, mat()), "elements"),
    "torch.sparse.mm": (lambda x: torch.sparse.mm(x, mat()), "elements"),
    "torch.smm": (lambda x: torch.smm(x, mat()), "product"),
    "torch.hspmm": (lambda x: torch.hspmm(x, mat()), "product"),
    "torch.bmm": (lambda x: torch.bmm(torch.stack([x, x]), torch.stack([mat(), mat()])),
                  "elements"),
    "torch.addmm": (lambda x: torch.addmm(mat(), x, mat(), beta=0.5, alpha=2.), "elements"),
    "torch.sparse.addmm": (lambda x: torch.sparse.addmm(mat(), x, mat(), beta=0.5, alpha=2.),
                           "elements"),
    "torch.sspaddmm": (lambda x: torch.sspaddmm(other(x), x, torch.eye(N, dtype=torch.float64),
                                                beta=0.5, alpha=2.), "product"),
    "torch.lobpcg": (_seeded(lambda x: torch.lobpcg(x, k=1, X=mat(1), niter=50)[0]),
                     "elements"),
    "torch.pca_lowrank": (_seeded(lambda x: torch.pca_lowrank(x, q=N, niter=3)[1]),
                          "elements"),
    "torch.svd_lowrank": (_seeded(lambda x: torch.svd_lowrank(x, q=N, niter=3)[1]),
                          "elements"),
    "Tensor.is_sparse": (lambda x: x.is_sparse, "torch"),
    "Tensor.dense_dim": (lambda x: x.dense_dim(), "torch"),
    "Tensor.sparse_dim": (lambda x: x.sparse_dim(), "torch"),
    "Tensor.sparse_mask": (lambda x: x.to_dense().sparse_mask(x) if x.is_sparse
                           else x.sparse_mask(x), "torch"),
    "Tensor.sparse_resize_": (lambda x: _resize_like(x, (N + 1, N + 2)), "torch"),
    "Tensor.sparse_resize_and_clear_": (
        lambda x: x.clone().sparse_resize_and_clear_((2, 3), 2, 0), "torch"),
    "Tensor.to_dense": (lambda x: x.to_dense(), "elements"),
    "Tensor.to_sparse": (lambda x: x.to_sparse(), "torch"),
    "Tensor.coalesce": (lambda x: x.coalesce(), "torch"),
    "Tensor.is_coalesced": (lambda x: x.is_coalesced(), "torch"),
    "Tensor.indices": (lambda x: x.coalesce().indices(), "torch"),
    "Tensor.values": (lambda x: x.coalesce().values(), "torch"),
    "Tensor.add": (lambda x: x.add(other(x), alpha=2.), "elements"),
    "Tensor.add_": (lambda x: x.clone().add_(other(x)), "elements"),
    "Tensor.addmm": (lambda x: mat(N).addmm(x, torch.eye(N, dtype=torch.float64)), "elements"),
    "Tensor.addmm_": (lambda x: x.clone().addmm_(x, torch.eye(N, dtype=torch.float64)),
                      "refused"),
    "Tensor.any": (lambda x: x.any(), "elements"),
    "Tensor.asin": (lambda x: (x / 4).asin(), "elements"),
    "Tensor.asin_": (lambda x: co(x / 4).asin_(), "elements"),
    "Tensor.arcsin": (lambda x: (x / 4).arcsin(), "elements"),
    "Tensor.arcsin_": (lambda x: co(x / 4).arcsin_(), "elements"),
    "Tensor.bmm": (lambda x: torch.stack([x, x]).bmm(torch.stack([mat(), mat()])), "elements"),
    "Tensor.clone": (lambda x: x.clone(), "elements"),
    "Tensor.deg2rad": (lambda x: x.deg2rad(), "elements"),
    "Tensor.deg2rad_": (lambda x: co(x).clone().deg2rad_(), "elements"),
    "Tensor.detach": (lambda x: x.detach(), "elements"),
    "Tensor.detach_": (lambda x: x.clone().detach_(), "elements"),
    "Tensor.dim": (lambda x: x.dim(), "elements"),
    "Tensor.div": (lambda x: x.div(2.), "elements"),
    "Tensor.div_": (lambda x: x.clone().div_(2.), "elements"),
    "Tensor.floor_divide": (lambda x: x.floor_divide(2.), "elements"),
    "Tensor.floor_divide_": (lambda x: x.clone().floor_divide_(2.), "elements"),
    "Tensor.get_device": (lambda x: x.get_device(), "elements"),
    "Tensor.index_select": (lambda x: x.index_select(1, torch.tensor([3, 0, 3])), "elements"),
    "Tensor.isnan": (lambda x: x.isnan(), "elements"),
    "Tensor.log1p": (lambda x: x.abs().log1p(), "elements"),
    "Tensor.log1p_": (lambda x: co(x.abs()).log1p_(), "elements"),
    "Tensor.mm": (lambda x: x.mm(mat()), "elements"),
    "Tensor.mul": (lambda x: x.mul(other(x)), "elements"),
    "Tensor.mul_": (lambda x: x.clone().mul_(other(x)), "elements"),
    "Tensor.mv": (lambda x: x.mv(vec()), "elements"),
    "Tensor.narrow_copy": (lambda x: x.narrow_copy(1, 1, 2), "elements"),
    "Tensor.neg": (lambda x: x.neg(), "elements"),
    "Tensor.neg_": (lambda x: x.clone().neg_(), "elements"),
    "Tensor.negative": (lambda x: x.negative(), "elements"),
    "Tensor.negative_": (lambda x: x.clone().negative_(), "elements"),
    "Tensor.numel": (lambda x: x.numel(), "elements"),
    "Tensor.rad2deg": (lambda x: x.rad2deg(), "elements"),
    "Tensor.rad2deg_": (lambda x: co(x).clone().rad2deg_(), "elements"),
    "Tensor.resize_as_": (lambda x: None if x.layout == torch.strided else x.clone().resize_as_(
        torch.sparse_coo_tensor(size=(N + 2, N))), "torch"),
    "Tensor.size": (lambda x: x.size(), "elements"),
    "Tensor.pow": (lambda x: x.pow(2), "elements"),
    "Tensor.sqrt": (lambda x: x.abs().sqrt(), "elements"),
    "Tensor.square": (lambda x: x.square(), "elements"),
    "Tensor.smm": (lambda x: x.smm(mat()), "product"),
    "Tensor.sspaddmm": (lambda x: other(x).sspaddmm(x, torch.eye(N, dtype=torch.float64)),
                        "product"),
    "Tensor.sub": (lambda x: x.sub(other(x)), "elements"),
    "Tensor.sub_": (lambda x: x.clone().sub_(other(x)), "elements"),
    "Tensor.t": (lambda x: x.t(), "elements"),
    "Tensor.t_": (lambda x: x.clone().t_(), "elements"),
    "Tensor.transpose": (lambda x: x.transpose(0, 1), "elements"),
    "Tensor.transpose_": (lambda x: x.clone().transpose_(0, 1), "elements"),
    "Tensor.zero_": (lambda x: x.clone().zero_(), "elements"),
    "torch.sparse_coo_tensor": (lambda x: x, "elements"),  # every x is built with it
    "torch.sparse.sum": (lambda x: torch.sparse.sum(x, dim=0), "elements"),
    "torch.sparse.softmax": (lambda x: torch.sparse.softmax(x, 1), "softmax"),
    "torch.sparse.log_softmax": (lambda x: torch.sparse.log_softmax(x, 1), "softmax"),
    "torch.cat": (lambda x: torch.cat([x, other(x)], 1), "elements"),
    "torch.dstack": (lambda x: torch.dstack([x, other(x)]), "elements"),
    "torch.hstack": (lambda x: torch.hstack([x, other(x)]), "elements"),
    "torch.vstack": (lambda x: torch.vstack([x, other(x)]), "elements"),
    "torch.stack": (lambda x: torch.stack([x, other(x)]), "elements"),
    "torch.empty": (lambda x: factory(x, "empty"), "torch"),
    "torch.zeros": (lambda x: factory(x, "zeros"), "torch"),
    "torch.empty_like": (lambda x: torch.empty_like(x) if x.layout != torch.strided
                         else torch.zeros_like(x), "elements"),
    "torch.index_select": (lambda x: torch.index_select(x, 0, torch.tensor([2, 2, 0])),
                           "elements"),
    "torch.select": (lambda x: torch.select(x, 0, 3), "elements"),
    "torch.unsqueeze": (lambda x: torch.unsqueeze(x, 1), "elements"),
    "torch.is_complex": (torch.is_complex, "elements"),
    "torch.is_floating_point": (torch.is_floating_point, "elements"),
    "torch.is_signed": (torch.is_signed, "elements"),
    "torch.is_same_size": (lambda x: torch.is_same_size(x, mat(N)), "elements"),
    "torch.is_tensor": (torch.is_tensor, "elements"),
    "torch.is_nonzero": (lambda x: torch.is_nonzero(torch.select(torch.select(x, 0, 2), 0, 1)),
                         "elements"),
    "torch.native_norm": (torch.native_norm, "elements"),
}


EYE = torch.eye(N, dtype=torch.float64)

# The dense computation that torch.sparse's products with a sparse result
# and its softmax stand for (a strided x has no smm/hspmm/sspaddmm, and
# torch.sparse.softmax needs a sparse x).
DENSE = {
    "torch.sparse.softmax": lambda d: torch.softmax(d, 1),
    "torch.sparse.log_softmax": lambda d: torch.log_softmax(d, 1),
    "torch.native_norm": lambda d: torch.linalg.vector_norm(d),  # sparse-only in torch
    "torch.sparse.sum": lambda d: d.sum(0),  # sparse-only in torch
    "torch.smm": lambda d: d @ mat(),
    "torch.hspmm": lambda d: d @ mat(),
    "Tensor.smm": lambda d: d @ mat(),
    "torch.sspaddmm": lambda d: 0.5 * other(d) + 2. * (d @ EYE),
    "Tensor.sspaddmm": lambda d: other(d) + d @ EYE,
}
# Structural calls whose sparse result has fill 0 whatever the input's fill.
# (sparse_mask keeps torch's meaning: the mask's pattern, x's values, fill 0.)
FILL_ZERO = {"torch.empty", "torch.zeros", "Tensor.sparse_mask"}


def _check_close(ours, expected):
    ours, expected = T.dense(ours, any_sparse=True), T.dense(expected, any_sparse=True)
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(ours, expected, equal_nan=True, check_dtype=False)
    else:
        assert ours == expected


def test_every_documented_name_has_a_call():
    assert sorted(CALLS) == DOCUMENTED
    for name, reason in REFUSED.items():
        assert CALLS[name][1] == "refused", name
    assert all(kind != "refused" or name in REFUSED for name, (_, kind) in CALLS.items())


def _ours(fill):
    return sf.sparse_coo_tensor(INDICES, VALUES, (N, N), fill_value=fill, dtype=torch.float64)


def _theirs():
    return torch.sparse_coo_tensor(INDICES, VALUES, (N, N), dtype=torch.float64)


@pytest.mark.parametrize("name", DOCUMENTED)
def test_fill0_behaves_as_torch(name):
    call, kind = CALLS[name]
    if kind in ("refused", "softmax"):
        with pytest.raises(NotImplementedError):
            call(_ours(0.))
        return
    ours, theirs = call(_ours(0.)), call(_theirs())
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, torch.Tensor) and ours.layout == theirs.layout
        assert ours.shape == theirs.shape
    _check_close(ours, theirs)


def _other_fill_cases():
    for name in DOCUMENTED:
        for fill in (f for f in T.FILLS if f != 0.0):
            yield pytest.param(name, fill, id=f"{name}-{fill}")


@pytest.mark.parametrize("name, fill", list(_other_fill_cases()))
def test_other_fills_behave_as_dense(name, fill):
    call, kind = CALLS[name]
    A = _ours(fill)
    if kind == "refused" or (kind == "softmax" and fill != -math.inf):
        with pytest.raises(NotImplementedError):
            call(A)
        return
    if kind == "softmax":  # fill -inf: torch's stored values, and the dense result
        ours, theirs = call(A), call(_theirs()).coalesce()
        torch.testing.assert_close(ours.coalesce().values(), theirs.values())
        _check_close(ours, DENSE[name](A.to_dense()))
        return
    if name in ("torch.lobpcg", "torch.pca_lowrank", "torch.svd_lowrank") and \
            not math.isfinite(fill):
        return  # no eigen- or singular values of a non-finite matrix; torch raises alike
    if kind == "torch":
        # No dense counterpart: the structure is torch's (fill 0 with A's
        # pattern), the fill A's.
        ours, theirs = call(A), call(_theirs())
        if isinstance(theirs, torch.Tensor) and theirs.layout == torch.sparse_coo:
            theirs = theirs.coalesce()
            ours = ours.coalesce()
            assert ours.shape == theirs.shape
            assert torch.equal(ours.indices(), theirs.indices())
            torch.testing.assert_close(ours.values(), theirs.values())
            expected_fill = 0. if name in FILL_ZERO else fill
            torch.testing.assert_close(ours.fill_value(), torch.tensor(expected_fill,
                                       dtype=ours.dtype), equal_nan=True)
        else:
            _check_close(ours, theirs)
        return
    ours = call(A)
    dense = DENSE[name](A.to_dense()) if name in DENSE else call(A.to_dense())
    if kind == "product":  # torch's result is sparse: so is ours, its elements the product's
        assert isinstance(ours, sf.SparseFillTensor)
    _check_close(ours, dense)


# ---- the documentation's worked examples -------------------------------------------------

def _doc_examples(make):
    """The torch.sparse documentation's examples (construction, hybrid,
    uncoalesced, working with COO tensors, indexing), written once for any
    `make` with torch.sparse_coo_tensor's signature. Returns what they show."""
    out = {}
    i, v = [[0, 1, 1], [2, 0, 2]], [3, 4, 5]
    out["construct"] = make(i, v, (2, 3)).to_dense()
    pairs = [[0, 2], [1, 0], [1, 2]]
    out["zip"] = make(list(zip(*pairs)), v, (2, 3)).to_dense()
    out["t"] = make(torch.tensor(pairs).t(), v, torch.Size([2, 3])).to_dense()
    empty = make(size=(2, 3))
    out["empty"] = (empty.to_dense(), empty._nnz(), tuple(empty._indices().shape))
    s = make(i, [[3, 4], [5, 6], [7, 8]], (2, 3, 2))
    out["hybrid"] = s.to_dense()
    out["facts"] = (isinstance(s, torch.Tensor), s.is_sparse, s.layout == torch.sparse_coo,
                    (s.sparse_dim(), s.dense_dim()), s.is_coalesced())
    with pytest.raises(RuntimeError, match="Cannot get indices on an uncoalesced tensor"):
        s.indices()
    out["_indices"] = s._indices()
    s2 = s.coalesce()
    out["coalesced"] = (s2.indices(), s2.values(), s2.is_coalesced())
    out["index"] = (s2[1].to_dense(), s2[1, 0, 1], s2[1, 0, 1:])
    u = make([[1, 1]], [3, 4], (3,))
    out["uncoalesced"] = (u._nnz(), u.to_dense(), u.coalesce().values(), u.coalesce()._nnz())
    out["scale"] = (u * 2).to_dense()
    return out


def _compare_examples(ours, expected):
    assert ours.keys() == expected.keys()
    for key in expected:
        a, b = ours[key], expected[key]
        for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            if isinstance(y, torch.Tensor):
                x = x.to_dense() if x.layout != torch.strided else x
                y = y.to_dense() if y.layout != torch.strided else y
                assert x.dtype == y.dtype, key
                torch.testing.assert_close(x, y, msg=key)
            else:
                assert x == y, key


def test_documentation_examples_fill0_as_torch():
    _compare_examples(_doc_examples(sf.sparse_coo_tensor), _doc_examples(torch.sparse_coo_tensor))


def test_documentation_examples_other_fill_as_dense():
    """With fill 7 the pattern facts stay torch's; every element that torch
    shows as an unspecified 0 is 7."""
    def make(*args, **kwargs):
        return sf.sparse_coo_tensor(*args, fill_value=7, **kwargs)

    ours, theirs = _doc_examples(make), _doc_examples(torch.sparse_coo_tensor)
    for key in ("construct", "zip", "t", "hybrid", "index"):
        dense_theirs = theirs[key] if isinstance(theirs[key], tuple) else (theirs[key],)
        dense_ours = ours[key] if isinstance(ours[key], tuple) else (ours[key],)
        for x, y in zip(dense_ours, dense_theirs):
            x = x.to_dense() if x.layout != torch.strided else x
            y = y.to_dense() if y.layout != torch.strided else y
            torch.testing.assert_close(x, torch.where(y == 0, 7, y))
    assert ours["facts"] == theirs["facts"]
    torch.testing.assert_close(ours["empty"][0], torch.full((2, 3), 7.))
    unspecified = torch.arange(3) != 1  # u stores only index 1
    torch.testing.assert_close(ours["uncoalesced"][1],
                               torch.where(unspecified, 7, theirs["uncoalesced"][1]))
    torch.testing.assert_close(ours["scale"], torch.where(unspecified, 14, theirs["scale"]))
