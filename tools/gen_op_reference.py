"""Write docs/ops.md, the reference of every op in torch.ops.sparsefill, from
the registry of the built extension (so it cannot drift from the code):

- the schema of each overload (``op.default._schema``);
- the dispatch keys with a kernel (``torch._C._dispatch_dump``; the CUDA key,
  present in the CUDA build only, is left out so both builds agree);
- whether it is differentiable (a kernel at an Autograd key or
  CompositeImplicitAutograd);
- what it computes on the components: the op's `doc` in the one list of the
  native ops (tools/codegen/native.yaml), or, for the element-wise ops, its
  kind and ATen formula from tools/codegen/elementwise.yaml.

    python tools/gen_op_reference.py           # write docs/ops.md
    python tools/gen_op_reference.py --check   # exit 1 when docs/ops.md is stale
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import torch
import yaml

import torch_sparsefill  # noqa: F401  -- registers torch.ops.sparsefill

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "ops.md"
FAMILIES = [("structure", "structural ops"), ("products", "matrix products"), ("bsr", "BSR products"),
            ("reductions", "softmax and reductions")]
VARIANTS = {"": "two SparseFillTensors, on the union of their patterns",
            "_same": "two SparseFillTensors of the same pattern",
            "_scalar": "a SparseFillTensor and a Python number",
            "_dense": "a SparseFillTensor and a strided tensor over its dense part"}
DIFFERENTIABLE_KEYS = ("Autograd", "AutogradCPU", "CompositeImplicitAutograd")
# Element-wise ops marked `differentiable: false` in the YAML (predicates,
# comparisons, ...): their results carry no gradient (filled in by
# elementwise_descriptions).
NOT_DIFFERENTIABLE: set = set()
# An op's autograd twin (docs/design.md#autograd-twins) is documented with its op.
TWIN = "_autograd"


def native_descriptions(family: str) -> dict:
    """op name -> its `doc` in tools/codegen/native.yaml, for the ops of `family`."""
    spec = yaml.safe_load((ROOT / "tools" / "codegen" / "native.yaml").read_text())
    return {op["name"]: op["doc"] for op in spec["ops"] if op["family"] == family}


def elementwise_descriptions() -> dict:
    spec = yaml.safe_load((ROOT / "tools" / "codegen" / "elementwise.yaml").read_text())
    out = {}
    for op in spec["ops"]:
        if not op.get("differentiable", True):
            NOT_DIFFERENTIABLE.update(op["name"] + s for s in ("", *VARIANTS))
        kind, formula = op["kind"], op["aten"]
        if kind == "unary":
            out[op["name"]] = f"unary: values and fill each mapped by `{formula}`"
        elif kind == "binary":
            for suffix, operands in VARIANTS.items():
                out[op["name"] + suffix] = (f"binary, {operands}: `{formula}` on values "
                                            f"and on the fills")
        else:
            out[op["name"]] = (f"{kind}: `{formula}` on the union of the operands' patterns "
                               f"and on their fills")
    return out


def dispatch_keys(qualname: str) -> list:
    keys = []
    for line in torch._C._dispatch_dump(qualname).splitlines():
        m = re.match(r"^(\w+)(\[alias\])?: registered at", line)
        if m and m.group(1) not in ("CUDA", "debug"):
            keys.append(m.group(1))
    return keys


def render() -> str:
    ns = torch.ops.sparsefill
    names = sorted({n.split("::", 1)[1].split(".")[0]
                    for n in torch._C._dispatch_get_all_op_names() if n.startswith("sparsefill::")})
    descriptions = {fam: native_descriptions(fam) for fam, _ in FAMILIES}
    descriptions["elementwise"] = elementwise_descriptions()
    sections = {fam: [] for fam in descriptions}
    sections["other"] = []
    for name in names:
        packet = getattr(ns, name)
        base = name[:-len(TWIN)] if name.endswith(TWIN) else name
        family = next((f for f, d in descriptions.items() if base in d), "other")
        what = " ".join(descriptions.get(family, {}).get(base, "").split())
        if base != name:
            what = (f"the autograd twin of `{base}` (same schema and result), called by its "
                    f"Autograd kernel when a gradient is tracked; a Python autograd Function "
                    f"(torch.func, forward AD, double backward; docs/design.md#autograd-twins)")
        for overload in packet.overloads():
            schema = str(getattr(packet, overload)._schema)
            keys = dispatch_keys(f"sparsefill::{name}" + ("" if overload == "default"
                                                          else f".{overload}"))
            grad = "yes" if any(k in DIFFERENTIABLE_KEYS for k in keys) and \
                name not in NOT_DIFFERENTIABLE else "no"
            sections[family].append(
                f"| `{name}` | `{schema.split('::', 1)[1]}` | {', '.join(keys)} | {grad} | "
                f"{what.replace('|', '/')} |")
    lines = [
        "# torch.ops.sparsefill: the op reference",
        "",
        "Generated by `tools/gen_op_reference.py` from the registry of the built",
        "extension; `make test` checks that it is current (`test/ops/test_op_library.py`).",
        "Every op takes and returns component tensors (indices or CSR row pointers",
        "and columns, values, fill; RFC.md#data-model). Dispatch keys are those of the",
        "CPU build; the CUDA build adds a CUDA kernel to every op with a CPU kernel but",
        "the CPU-only ones (docs/design.md#cuda names them). Meta kernels are the fake",
        "kernels registered from Python (`torch_sparsefill/ops/`). Differentiable: a",
        "kernel at the Autograd key (gradients with respect to the values and fill",
        "inputs) or a composite of differentiable ops. Call them from Python as",
        "`torch.ops.sparsefill.<op>` and",
        "from C++ through the dispatcher (README: the op library).",
        "",
    ]
    titles = dict(FAMILIES + [("elementwise", "element-wise ops (generated)"),
                              ("other", "other ops")])
    for family, rows in sections.items():
        if not rows:
            continue
        lines += [f"## {titles[family]}", "",
                  "| op | schema | dispatch keys | differentiable | on the components |",
                  "| --- | --- | --- | --- | --- |", *rows, ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when docs/ops.md is stale")
    text = render()
    if parser.parse_args().check:
        if not OUT.exists() or OUT.read_text() != text:
            print("docs/ops.md is stale: run python tools/gen_op_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
