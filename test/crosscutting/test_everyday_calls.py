"""Calls a new user makes in the first hour, each once broken: they must give
the dense answer (or torch's own error), never torch's internal errors.
"""
import subprocess
import sys

import pytest
import torch

import sf_testing as T
import torch_sparsefill as sf

F = torch.nn.functional
NEG_INF = float("-inf")


def _pair():
    A = sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2), fill_value=0.5)
    return A, A.clone()


def test_assert_close_compares_the_dense_meaning():
    A, B = _pair()
    torch.testing.assert_close(A, B)
    # The same dense tensor stored in another pattern is equal...
    torch.testing.assert_close(A, sf.to_sparse(A.to_dense(), fill_value=0.5).to_sparse_coo())
    torch.testing.assert_close(A.to_sparse_csr(), B.to_sparse_csr())
    # ... and the same components with another fill are not: the message
    # says which element differs.
    other = sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 2.], (2, 2), fill_value=0.25)
    with pytest.raises(AssertionError, match=r"(?s)Mismatched elements: 2 / 4.*index \(0, 0\)"):
        torch.testing.assert_close(A, other)
    torch.testing.assert_close(A, A.to_dense(), check_layout=False)


@pytest.mark.parametrize("query", ["is_mps", "is_xpu", "is_cpu", "is_cuda", "is_meta"])
def test_device_queries_answer_as_the_dense_tensor(query):
    A, _ = _pair()
    assert getattr(A, query) == getattr(A.to_dense(), query)


def test_is_inference_answers_as_the_dense_tensor():
    A, _ = _pair()
    assert A.is_inference() is False
    with torch.inference_mode():
        B = sf.sparse_coo_tensor([[0]], [1.], (2,))
    assert B.is_inference() is True


def _mask():
    """A -inf fill mask (3 x 3): the diagonal and one more position open."""
    return sf.sparse_coo_tensor([[0, 1, 2, 0], [0, 1, 2, 1]], [0., 0., 0., 0.5], (3, 3),
                                fill_value=NEG_INF)


def test_sdpa_with_grouped_query_heads():
    gen = T.rng(3)
    q = torch.randn(2, 4, 3, 8, generator=gen, dtype=torch.float64)
    kv = torch.randn(2, 2, 3, 8, generator=gen, dtype=torch.float64)
    M = _mask().double()
    got = F.scaled_dot_product_attention(q, kv, kv, attn_mask=M, enable_gqa=True)
    want = F.scaled_dot_product_attention(q, kv, kv, attn_mask=M.to_dense(), enable_gqa=True)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-12)
    with pytest.raises(RuntimeError, match="multiple of the key heads"):
        F.scaled_dot_product_attention(q, kv[:, :1].expand(2, 3, 3, 8), kv, attn_mask=M,
                                       enable_gqa=True)


@pytest.mark.parametrize("module", ["encoder_layer", "multihead_attention"])
def test_inference_fast_path_with_a_sparse_mask(module):
    torch.manual_seed(0)
    if module == "encoder_layer":
        layer = torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True).eval()

        def run(mask):
            return layer(x, src_mask=mask)
    else:
        layer = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval()

        def run(mask):
            return layer(x, x, x, attn_mask=mask, need_weights=False)[0]
    x = torch.randn(2, 3, 8)
    M = _mask()
    with torch.no_grad():  # torch's fused inference kernels
        got, want = run(M), run(M.to_dense())
    # float32's tolerance here and below, not bit equality: on an Intel
    # AVX-512/AMX host torch's kernels round the two calls differently in
    # the last place (6e-8, stop 41); on AMD they were bit-identical
    torch.testing.assert_close(got, want)
    # The composite path, with autograd (torch's two paths differ on this
    # mask: each is compared with itself on the dense mask).
    torch.testing.assert_close(run(M), run(M.to_dense()))


def test_expand_repeats_the_pattern_along_a_sparse_dim_of_size_one():
    A = sf.sparse_coo_tensor([[0, 0], [0, 2], [1, 0]], [1., 2.], (1, 3, 2), fill_value=-1.)
    got = A.expand(4, 3, 2)
    assert got.is_coalesced() and got.nse() == 8
    T.assert_dense_equal(got.to_dense(), A.to_dense().expand(4, 3, 2))
    B = A.view(1, 1, 3, 2).expand(2, 5, -1, -1)
    T.assert_dense_equal(B.to_dense(), A.to_dense().view(1, 1, 3, 2).expand(2, 5, 3, 2))
    with pytest.raises(RuntimeError, match="non-singleton dimension 1"):
        A.expand(1, 4, 2)
    values = torch.tensor([1., 2.], requires_grad=True)
    C = sf.sparse_coo_tensor([[0, 0], [0, 2]], values, (1, 3), fill_value=0.)
    C.expand(3, 3).to_dense().sum().backward()
    assert torch.equal(values.grad, torch.tensor([3., 3.]))


def test_to_takes_copy_positionally():
    A, _ = _pair()
    B = A.to("cpu", torch.float64, False, True)
    assert B.dtype == torch.float64 and torch.equal(B.to_dense(), A.to_dense().double())
    C = A.to("cpu", torch.float32, False, True)  # a copy even when nothing changes
    C._values()[0] = 9.
    assert A._values()[0] == 1.
    assert A.to(torch.float32, False, False) is not None
    D = A.to(A.to_dense(), False, True)
    D._values()[0] = 9.
    assert A._values()[0] == 1.


@pytest.mark.parametrize("call", [
    lambda A, **k: A.sum(**k), lambda A, **k: torch.sum(A, **k), lambda A, **k: A.mean(**k),
    lambda A, **k: A.amax(**k), lambda A, **k: torch.softmax(A, **k),
    lambda A, **k: torch.log_softmax(A, **k),
], ids=["sum", "torch.sum", "mean", "amax", "softmax", "log_softmax"])
def test_axis_wherever_torch_takes_dim(call):
    A, _ = _pair()
    dense = A.to_dense()
    T.assert_dense_equal(T.dense(call(A, axis=0)), call(dense, axis=0))
    T.assert_dense_equal(T.dense(call(A, axis=0)), T.dense(call(A, dim=0)))


def test_keepdims_as_torch():
    A, _ = _pair()
    T.assert_dense_equal(T.dense(A.sum(axis=1, keepdims=True)),
                         A.to_dense().sum(1, keepdim=True))


def test_torch_load_before_the_import_names_the_package(tmp_path):
    path = tmp_path / "a.pt"
    torch.save({"A": _pair()[0]}, path)
    code = ("import torch, sys\n"
            "try:\n    torch.load(sys.argv[1])\n"
            "except Exception as e:\n    print(type(e).__name__, e)\n"
            "import torch_sparsefill\n"
            "print('loaded', torch.load(sys.argv[1])['A'].to_dense().tolist())\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         timeout=300, check=True).stdout
    assert out.startswith("UnpicklingError") and "torch_sparsefill" in out
    assert "loaded [[0.5, 1.0], [2.0, 0.5]]" in out
