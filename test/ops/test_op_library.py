"""The op library as a public API (RFC.md#op-library): docs/ops.md is the
current reference of torch.ops.sparsefill, and a downstream extension builds
against sf.get_include()/sf.get_library() and calls the C core and the ops."""
import subprocess
import sys

import pytest
import torch
from torch.utils import cpp_extension

import torch_sparsefill as sf

import sf_testing as T

ROOT = T.ROOT


@pytest.mark.cpu_only(reason="the reference is generated from the CPU build's registry")
def test_op_reference_is_current():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_op_reference.py"),
                           "--check"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    text = (ROOT / "docs" / "ops.md").read_text()
    for name in ("to_dense", "spmm", "seg_softmax", "add_same"):
        assert f"| `{name}` |" in text


@pytest.mark.cpu_only(reason="one build of the downstream extension")
def test_downstream_extension_builds_and_calls_the_library():
    # Kept between runs (ninja rebuilds only what changed), one folder per torch:
    # the CPU suite and the CUDA build's suite must not share objects or a lock.
    build = ROOT / "build" / f"downstream_ext-{torch.__version__}"
    build.mkdir(parents=True, exist_ok=True)
    ext = cpp_extension.load(
        name="sparsefill_downstream", sources=[str(ROOT / "test" / "downstream" / "downstream.cpp")],
        extra_include_paths=[sf.get_include()],
        extra_ldflags=[sf.get_library()],
        build_directory=str(build), verbose=False)
    A = T.random_tensor("random", 0.5, torch.sparse_coo).coalesce()
    indices = A.indices()
    expected = indices[0] * A.shape[1] + indices[1]
    assert torch.equal(ext.linear_positions(indices, list(A.shape)), expected)
    values = A.values().clone().requires_grad_()
    fill = A._fill_value().clone().requires_grad_()
    out = ext.dense_exp(indices, values, fill, list(A.shape))
    T.assert_dense_equal(out, torch.exp(A.to_dense()))
    out.sum().backward()  # the ops' autograd works from C++ calls too
    torch.testing.assert_close(values.grad, torch.exp(A.values()))
    unspecified = A.numel() - A.nse()
    torch.testing.assert_close(fill.grad, torch.exp(A._fill_value()) * unspecified)
    with pytest.raises(RuntimeError, match="sf_coo_linearize failed"):
        ext.linear_positions(torch.tensor([[0], [99]]), list(A.shape))
