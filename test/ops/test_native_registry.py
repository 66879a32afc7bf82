"""The one list of the native ops (tools/codegen/native.yaml) against what the
built extension registers: every op of torch.ops.sparsefill is in a list (this
one, or the element-wise one) and every listed op is registered, with the
list's schema, a kernel at exactly the dispatch keys the list names, and, for
an op with a derivative, its `<op>_autograd` twin and an Autograd kernel. The
generated files and the op table of aten_ext/ops/generated/README.md are what
the list makes of them today.

    >>> spec = load_list()
    >>> next(op for op in spec["ops"] if op["name"] == "spmm")["kernels"]
    ['CPU', 'CUDA']
"""
import importlib.util
import os
import re

import pytest
import torch
import yaml

import torch_sparsefill  # noqa: F401  -- loads the extension and the Python kernels

pytestmark = pytest.mark.cpu_only("reads the registry, computes nothing")

from sf_testing.repo import ROOT
LIST = ROOT / "tools" / "codegen" / "native.yaml"
ELEMENTWISE_SCHEMAS = ROOT / "aten_ext" / "ops" / "generated" / "elementwise_schemas.h"
TWIN = "_autograd"
KEYS = ("CPU", "CUDA", "CompositeImplicitAutograd", "CompositeExplicitAutograd")


def load_list():
    """tools/codegen/native.yaml, parsed."""
    return yaml.safe_load(LIST.read_text())


def generator():
    spec = importlib.util.spec_from_file_location("gen_native", ROOT / "tools/codegen/gen_native.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SPEC = load_list()
OPS = {op["name"]: op for op in SPEC["ops"]}
WITH_DERIVATIVE = sorted(name for name, op in OPS.items() if op.get("derivative"))


def registered():
    """The names of torch.ops.sparsefill (without the namespace)."""
    return {n.split("::", 1)[1].split(".")[0] for n in torch._C._dispatch_get_all_op_names()
            if n.startswith("sparsefill::")}


def elementwise_names():
    """The element-wise ops (their own list, elementwise.yaml), from the schemas it generates."""
    return set(re.findall(r'"(\w+)\(', ELEMENTWISE_SCHEMAS.read_text()))


def has_kernel(name, key):
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"sparsefill::{name}", key)


def cuda_build():
    """Whether this build registered its CUDA kernels (the CUDA build, with a CUDA torch)."""
    return torch.version.cuda is not None and any(has_kernel(n, "CUDA") for n in OPS)


def test_every_registered_op_is_listed_and_every_listed_op_registered():
    expected = set(OPS) | {n + TWIN for n in WITH_DERIVATIVE} | elementwise_names()
    actual = registered()
    assert not actual - expected, f"registered but in no list: {sorted(actual - expected)}"
    assert not expected - actual, f"listed but not registered: {sorted(expected - actual)}"


@pytest.mark.parametrize("name", sorted(OPS))
def test_schema_is_the_listed_one(name):
    schema = str(getattr(torch.ops.sparsefill, name).default._schema)
    assert schema == f"sparsefill::{name}{OPS[name]['schema']}"


@pytest.mark.parametrize("name", sorted(OPS))
def test_kernels_at_the_listed_keys(name):
    listed = set(OPS[name]["kernels"])
    if not cuda_build():
        listed.discard("CUDA")  # the CPU build compiles no CUDA kernel
    if os.environ.get("SPARSEFILL_EXPECT_CUDA") == "1":
        assert cuda_build(), "SPARSEFILL_EXPECT_CUDA=1 but no CUDA kernel is registered"
    actual = {key for key in KEYS if has_kernel(name, key)}
    assert actual == listed, f"{name}: kernels at {sorted(actual)}, the list says {sorted(listed)}"


@pytest.mark.parametrize("name", sorted(OPS))
def test_derivative_means_twin_and_autograd_kernel(name):
    derivative = bool(OPS[name].get("derivative"))
    # an Autograd kernel: the generated switch, or Python's register_autograd
    assert has_kernel(name, "Autograd") == (derivative or bool(OPS[name].get("python_autograd"))), name
    assert (name + TWIN in registered()) == derivative, name
    if derivative:
        twin = getattr(torch.ops.sparsefill, name + TWIN).default._schema
        assert str(twin) == f"sparsefill::{name}{TWIN}{OPS[name]['schema']}"
        # the twin's one kernel: the autograd registered from Python
        assert has_kernel(name + TWIN, "CompositeImplicitAutograd"), name + TWIN


@pytest.mark.parametrize("name", sorted(OPS))
def test_backend_kernels_have_a_fake(name):
    # A traced program (torch.compile, export, opcheck) runs an op with a
    # kernel of its own through its fake kernel, the op's Python module's.
    if {"CPU", "CUDA", "CompositeExplicitAutograd"} & set(OPS[name]["kernels"]):
        assert has_kernel(name, "Meta"), f"{name} has no fake kernel"


def test_generated_files_are_current():
    assert generator().main(["--check"]) == 0, "run: make gen"


def test_readme_op_table_is_the_list():
    gen = generator()
    text = (ROOT / "aten_ext" / "ops" / "generated" / "README.md").read_text()
    block = text.split(gen.README_BEGIN, 1)[1].split(gen.README_END, 1)[0].strip()
    assert block == gen.op_table(SPEC)
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \| ([^|]*) \| ([^|]*) \|$", block, re.M)
    assert [r[0] for r in rows] == list(OPS)
    twins = sorted(r[0] for r in rows if r[3].strip() and "Python" not in r[3])
    assert twins == WITH_DERIVATIVE


def test_list_is_checked():
    # The generator refuses a list that names an unknown key or a derivative
    # input that is not a Tensor argument.
    gen = generator()
    bad = dict(SPEC, ops=[dict(OPS["spmm"], kernels=["CPU", "XLA"])])
    path = ROOT / "build" / "native_bad.yaml"
    path.parent.mkdir(exist_ok=True)
    for broken in (bad, dict(SPEC, ops=[dict(OPS["spmm"], derivative=["ncols"])])):
        path.write_text(yaml.safe_dump(broken))
        with pytest.raises(gen.SpecError):
            gen.load(path)
