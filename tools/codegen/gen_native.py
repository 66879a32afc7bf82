"""Generate the native ops' glue from tools/codegen/native.yaml, the one list of
the ops of torch.ops.sparsefill (but the element-wise ones) and of the entry
points of the two cores (its header says what each field means):

  aten_ext/generated/core_entries.h       the C core's prototypes, each typed entry per type
  aten_ext/generated/cuda_entries.h       the CUDA core's prototypes
  aten_ext/generated/<file>_entries.inc   extern "C" _f32/_f64/_i64 twins of a .cu's entries
  aten_ext/ops/generated/core.h           Core<T>: the C core's typed entries by C type
  aten_ext/ops/generated/cuda_core.h      CudaCore<T>: the CUDA core's
  aten_ext/ops/generated/schemas.h        every schema, with the `<op>_autograd` twins'
  aten_ext/ops/generated/calls.h          call::<op>, each op through the dispatcher
  aten_ext/ops/generated/kernels.h        the declarations of the hand-written kernels
  aten_ext/ops/generated/registrations.cpp  each kernel at its dispatch key
  aten_ext/ops/generated/autograd.cpp     the Autograd kernels (the switch to the twin)
  aten_ext/ops/generated/README.md        the op table, between its GENERATED markers

    python tools/codegen/gen_native.py           # write them
    python tools/codegen/gen_native.py --check   # exit 1 when one is stale

Needs Python with PyYAML only (no torch, no build). Example of the one list's
entry for an op and what it becomes::

    >>> op = {"name": "rows_from_crow", "schema": "(Tensor crow_indices) -> Tensor"}
    >>> cpp_signature(op, "rows_from_crow_cpu")
    'Tensor rows_from_crow_cpu(const Tensor& crow_indices)'
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "tools" / "codegen" / "native.yaml"
CORE_OUT = ROOT / "aten_ext" / "generated"
OPS_OUT = ROOT / "aten_ext" / "ops" / "generated"
GEN_NOTE = "written by tools/codegen/gen_native.py from tools/codegen/native.yaml: edit those"

# A kernel's dispatch key -> the suffix of its function's name.
KEYS = {"CPU": "cpu", "CUDA": "cuda", "CompositeImplicitAutograd": "composite",
        "CompositeExplicitAutograd": "composite"}
OP_FIELDS = {"name", "family", "schema", "kernels", "derivative", "python_autograd", "doc"}
ENTRY_FIELDS = {"name", "types", "params", "returns", "doc", "source"}
FAMILIES = ("structure", "products", "bsr", "reductions")

# schema types -> C++ parameter and return types (TORCH_LIBRARY's conventions)
CPP_ARG = {"Tensor": "const Tensor&", "Tensor?": "const std::optional<Tensor>&",
           "int": "int64_t", "int[]": "at::IntArrayRef", "float": "double", "bool": "bool",
           "str": "c10::string_view"}


class SpecError(Exception):
    pass


# ---- the one list ------------------------------------------------------------------

def load(path: Path = SPEC) -> dict:
    """The list, checked: known fields, known keys and types, derivative inputs
    that are Tensor arguments, unique names."""
    spec = yaml.safe_load(path.read_text())
    names = set()
    for op in spec["ops"]:
        extra = set(op) - OP_FIELDS
        if extra or not {"name", "family", "schema", "kernels", "doc"} <= set(op):
            raise SpecError(f"op {op.get('name')}: fields {sorted(op)} (known: {sorted(OP_FIELDS)})")
        if op["name"] in names:
            raise SpecError(f"op {op['name']} listed twice")
        names.add(op["name"])
        if op["family"] not in FAMILIES:
            raise SpecError(f"op {op['name']}: family {op['family']!r} is not one of {FAMILIES}")
        for key in op["kernels"]:
            if key not in KEYS:
                raise SpecError(f"op {op['name']}: unknown dispatch key {key!r} (known: {list(KEYS)})")
        if op.get("derivative") and op.get("python_autograd"):
            raise SpecError(f"op {op['name']}: a derivative is either the twin's or Python's")
        args = {n: t for t, n in schema_args(op)}
        for name in op.get("derivative", []):
            if args.get(name) != "Tensor":
                raise SpecError(f"op {op['name']}: derivative input {name!r} is not a Tensor argument")
    for part in ("core", "cuda"):
        seen = set()
        for item in spec[part]:
            if "name" not in item:
                continue
            if set(item) - ENTRY_FIELDS:
                raise SpecError(f"{part} entry {item['name']}: unknown fields {set(item) - ENTRY_FIELDS}")
            if item["name"] in seen:
                raise SpecError(f"{part} entry {item['name']} listed twice")
            seen.add(item["name"])
            for t in item.get("types", []):
                if t not in spec["types"]:
                    raise SpecError(f"{part} entry {item['name']}: unknown type {t!r}")
            if part == "cuda" and item.get("types") and "source" not in item:
                raise SpecError(f"cuda entry {item['name']}: a typed entry names its source .cu")
    return spec


def schema_args(op: dict) -> list:
    """[(type, name)] of the op's schema."""
    m = re.match(r"^\((.*)\) -> (.*)$", op["schema"])
    if not m:
        raise SpecError(f"op {op['name']}: schema {op['schema']!r} is not '(args) -> returns'")
    out = []
    for arg in filter(None, (a.strip() for a in m.group(1).split(","))):
        t, n = arg.rsplit(" ", 1)
        if t not in CPP_ARG:
            raise SpecError(f"op {op['name']}: argument type {t!r} has no C++ type here")
        out.append((t, n))
    return out


def cpp_return(op: dict) -> str:
    ret = op["schema"].split(" -> ", 1)[1].strip()
    if ret == "()":
        return "void"
    if ret == "Tensor":
        return "Tensor"
    parts = [p.strip().split(" ")[0] for p in ret.strip("()").split(",")]
    if any(p != "Tensor" for p in parts):
        raise SpecError(f"op {op['name']}: returns {ret!r}: only Tensors are supported")
    return f"std::tuple<{', '.join(['Tensor'] * len(parts))}>"


def cpp_signature(op: dict, fname: str) -> str:
    """The C++ declaration of a kernel (or call::) of the op, named fname."""
    params = ", ".join(f"{CPP_ARG[t]} {n}" for t, n in schema_args(op))
    return f"{cpp_return(op)} {fname}({params})"


def fn_type(op: dict) -> str:
    return f"{cpp_return(op)}({', '.join(CPP_ARG[t] for t, _ in schema_args(op))})"


# ---- C and C++ text ---------------------------------------------------------------

def wrap_call(head: str, items: list, tail: str, width: int = 100, indent: str = "") -> list:
    """head(item, item, ...)tail wrapped at `width`, continuation lines aligned
    after the parenthesis (or indented by 4 when that leaves too little room)."""
    one = indent + head + ", ".join(items) + tail
    if len(one) <= width:
        return [one]
    col = len(indent + head)
    if col > 60:  # hanging indent
        lines, cur, pad = [indent + head.rstrip()], indent + "    ", indent + "    "
        col = len(pad)
    else:
        lines, cur, pad = [], indent + head, " " * col
    for i, it in enumerate(items):
        piece = it + (", " if i + 1 < len(items) else tail)
        if len(cur) + len(piece.rstrip()) > width and cur.strip() and cur != pad:
            lines.append(cur.rstrip())
            cur = pad
        cur += piece
    lines.append(cur.rstrip())
    return lines


def comment(lines: list, indent: str = "") -> list:
    """A C block comment in the headers' style."""
    lines = list(lines)
    out = []
    for i, l in enumerate(lines):
        lead = "/* " if i == 0 else " * "
        out.append((indent + lead + l).rstrip() if l else (indent + lead).rstrip())
    out[-1] += " */"
    return out


def doc_lines(text: str | None) -> list:
    return text.rstrip("\n").split("\n") if text else []


def split_params(params: str) -> list:
    return [p.strip() for p in params.split(",") if p.strip()]


def param_name(param: str) -> str:
    return re.findall(r"\w+", param)[-1]


def instantiate(text: str, types: dict, t: str) -> str:
    c = types[t]
    return re.sub(r"\bACC\b", c["ACC"], re.sub(r"\bT\b", c["T"], text))


def entry_prototypes(entry: dict, types: dict) -> list:
    """(name, return, [params]) of each C function the entry stands for."""
    ret = entry.get("returns", "sf_status")
    if not entry.get("types"):
        return [(entry["name"], ret, split_params(entry["params"]))]
    return [(f"{entry['name']}_{t}", ret, split_params(instantiate(entry["params"], types, t)))
            for t in entry["types"]]


def section_title(title: str) -> str:
    head = f"/* ---- {title} "
    return head + "-" * max(4, 76 - len(head)) + " */"


def gen_header(spec: dict, part: str, guard: str, what: str) -> str:
    out = [f"/* generated/{guard.lower()}.h -- {what}",
           " * (written by tools/codegen/gen_native.py from tools/codegen/native.yaml:",
           " * edit those). */",
           f"#ifndef SPARSEFILL_GENERATED_{guard}_H", f"#define SPARSEFILL_GENERATED_{guard}_H", ""]
    for item in spec[part]:
        if "section" in item:
            doc = doc_lines(item.get("doc"))
            if doc:
                out += [section_title(item["section"])[:-3].rstrip(), " *"]
                out += [(" * " + l).rstrip() for l in doc]
                out[-1] += " */"
            else:
                out.append(section_title(item["section"]))
            out.append("")
        elif "name" not in item:
            out += comment(doc_lines(item["doc"])) + [""]
        else:
            doc = doc_lines(item.get("doc"))
            if doc:
                out += comment(doc)
            for name, ret, params in entry_prototypes(item, spec["types"]):
                sep = "" if ret.endswith("*") else " "
                out += wrap_call(f"{ret}{sep}{name}(", params, ");")
            out.append("")
    out += [f"#endif /* SPARSEFILL_GENERATED_{guard}_H */"]
    return "\n".join(out) + "\n"


def member(name: str) -> str:
    """Core<T>'s name of a typed entry: sf_csr_spmm -> spmm."""
    short = re.sub(r"^sf_(cuda_)?", "", name)
    return re.sub(r"^csr_", "", short)


def gen_core_structs(spec: dict, part: str, struct: str, header: str, what: str) -> str:
    types = spec["types"]
    out = [f"// ops/generated/{'core' if part == 'core' else 'cuda_core'}.h -- {what}",
           "// (written by tools/codegen/gen_native.py from tools/codegen/native.yaml:",
           "// edit those).", "#pragma once", "", "#include <cstdint>", "",
           f'#include "{header}"', "", "namespace sparsefill {", "",
           f"template <class T> struct {struct};"]
    for t, c in types.items():
        entries = [e for e in spec[part] if t in e.get("types", [])]
        if not entries:
            continue
        out += ["", f"template <> struct {struct}<{c['T']}> {{"]
        for e in entries:
            out.append(f"  static constexpr auto {member(e['name'])} = {e['name']}_{t};")
        out.append("};")
    out += ["", "}  // namespace sparsefill", ""]
    return "\n".join(out)


def gen_cuda_wrappers(spec: dict) -> dict:
    """generated/<stem>_entries.inc per .cu: its typed entries' extern "C" twins."""
    files: dict = {}
    for e in spec["cuda"]:
        if "name" not in e or not e.get("types"):
            continue
        stem = Path(e["source"]).stem
        body = files.setdefault(stem, [
            f"// generated/{stem}_entries.inc -- the C ABI's typed twins of the template",
            f"// entries of cuda/{stem}.cu, which includes this file last (written by",
            "// tools/codegen/gen_native.py from tools/codegen/native.yaml: edit those).", ""])
        tmpl = re.sub(r"^sf_cuda_", "", e["name"])
        for name, ret, params in entry_prototypes(e, spec["types"]):
            t = name.rsplit("_", 1)[1]
            sep = "" if ret.endswith("*") else " "
            body += wrap_call(f'extern "C" {ret}{sep}{name}(', params, ") {")
            body += wrap_call(f"  return entry::{tmpl}<{spec['types'][t]['T']}>(",
                              [param_name(p) for p in params], ");")
            body += ["}", ""]
    return {CORE_OUT / f"{stem}_entries.inc": "\n".join(lines) for stem, lines in files.items()}


def gen_schemas(spec: dict) -> str:
    out = ["// ops/generated/schemas.h -- every schema of torch.ops.sparsefill but the",
           "// element-wise ones (elementwise_schemas.h), then each `<op>_autograd` twin: the",
           "// op's schema under the twin's name, which ops/library.cpp defines",
           "// (written by tools/codegen/gen_native.py from tools/codegen/native.yaml:",
           "// edit those).",
           "#pragma once", "", "namespace sparsefill {", "", "inline constexpr const char* kNativeSchemas[] = {"]
    for op in spec["ops"]:
        out.append(f'    "{op["name"]}{op["schema"]}",')
    for op in spec["ops"]:
        if op.get("derivative"):
            out.append(f'    "{op["name"]}_autograd{op["schema"]}",')
    out += ["};", "", "}  // namespace sparsefill", ""]
    return "\n".join(out)


def gen_calls(spec: dict) -> str:
    out = ["// ops/generated/calls.h -- call::<op>: each op of the list through the dispatcher,",
           "// so that the kernel of the tensors' device (or the fake kernel, traced) runs",
           "// (written by tools/codegen/gen_native.py from tools/codegen/native.yaml:",
           "// edit those).",
           "//   auto [indices, src_a, src_b] = call::union_plan(indices_a, indices_b, size);",
           "#pragma once", "", "#include <ATen/core/Tensor.h>", "#include <c10/util/string_view.h>",
           "", "#include <cstdint>", "#include <optional>", "#include <tuple>", "",
           '#include "ops/common/dispatch.h"', "", "namespace sparsefill {",
           "using at::Tensor;", "namespace call {", ""]
    for op in spec["ops"]:
        names = [n for _, n in schema_args(op)]
        out += wrap_call(f"inline {cpp_return(op)} {op['name']}(",
                         [f"{CPP_ARG[t]} {n}" for t, n in schema_args(op)], ") {")
        out.append(f'  static auto op = op_handle<decltype({op["name"]})>("sparsefill::{op["name"]}");')
        out += wrap_call("  return op.call(", names, ");")
        out += ["}", ""]
    out += ["}  // namespace call", "}  // namespace sparsefill", ""]
    return "\n".join(out)


def kernel_names(op: dict) -> list:
    return [(key, f"{op['name']}_{KEYS[key]}") for key in op["kernels"]]


def gen_kernels(spec: dict) -> str:
    out = ["// ops/generated/kernels.h -- the hand-written kernel of each op at each key of its",
           "// `kernels` in the list, named <op>_<cpu|cuda|composite> (defined in",
           "// ops/<family>/; the CUDA ones in the CUDA build only)", f"// ({GEN_NOTE}).",
           "#pragma once", "", "#include <ATen/core/Tensor.h>", "#include <c10/util/string_view.h>",
           "", "#include <cstdint>", "#include <optional>", "#include <tuple>", "",
           "namespace sparsefill {", "using at::Tensor;", ""]
    for fam in FAMILIES:
        out.append(f"// ---- {fam} (ops/{fam}/)")
        for op in spec["ops"]:
            if op["family"] != fam:
                continue
            for _, fname in kernel_names(op):
                out += wrap_call(f"{cpp_return(op)} {fname}(",
                                 [f"{CPP_ARG[t]} {n}" for t, n in schema_args(op)], ");")
        out.append("")
    out += ["}  // namespace sparsefill", ""]
    return "\n".join(out)


def gen_registrations(spec: dict) -> str:
    out = ["// ops/generated/registrations.cpp -- every hand-written kernel of the list at its",
           "// dispatch key; the CUDA ones in the CUDA build only", f"// ({GEN_NOTE}).",
           "#include <torch/library.h>", "", '#include "ops/generated/kernels.h"', ""]
    for key in ("CPU", "CUDA", "CompositeImplicitAutograd", "CompositeExplicitAutograd"):
        rows = [(op["name"], f) for op in spec["ops"] for k, f in kernel_names(op) if k == key]
        if not rows:
            continue
        if key == "CUDA":
            out.append("#ifdef SPARSEFILL_WITH_CUDA")
        out.append(f"TORCH_LIBRARY_IMPL(sparsefill, {key}, m) {{")
        out += [f'  m.impl("{n}", &sparsefill::{f});' for n, f in rows]
        out.append("}")
        if key == "CUDA":
            out.append("#endif")
        out.append("")
    return "\n".join(out)


def gen_autograd(spec: dict) -> str:
    out = ["// ops/generated/autograd.cpp -- the Autograd kernel of each op with a derivative",
           "// (`derivative` in the list): with no gradient to track (tracks_gradient, over the",
           "// inputs the list names) the op below autograd, in C++; otherwise its",
           "// `<op>_autograd` twin, whose one kernel is the autograd registered from Python",
           "// (backward in differentiable ops, forward-mode jvp, torch.func's levels).",
           "// (Written by tools/codegen/gen_native.py from tools/codegen/native.yaml:",
           "// edit those.)", "#include <torch/library.h>", "",
           "#include <ATen/core/LegacyTypeDispatch.h>", "", '#include "ops/common/tracking.h"',
           '#include "ops/generated/calls.h"', "", "namespace sparsefill {", "namespace {", ""]
    ops = [op for op in spec["ops"] if op.get("derivative")]
    for op in ops:
        names = [n for _, n in schema_args(op)]
        out += wrap_call(f"{cpp_return(op)} {op['name']}_autograd(",
                         [f"{CPP_ARG[t]} {n}" for t, n in schema_args(op)], ") {")
        out.append(f"  if (tracks_gradient({{{', '.join(op['derivative'])}}})) {{")
        out.append(f"    static auto op =")
        out.append(f'        op_handle<decltype(call::{op["name"]})>("sparsefill::{op["name"]}_autograd");')
        out += wrap_call("    return op.call(", names, ");")
        out += ["  }", "  at::AutoDispatchBelowADInplaceOrView guard;"]
        out += wrap_call(f"  return call::{op['name']}(", names, ");")
        out += ["}", ""]
    out += ["}  // namespace", "}  // namespace sparsefill", "",
            "TORCH_LIBRARY_IMPL(sparsefill, Autograd, m) {"]
    out += [f'  m.impl("{op["name"]}", &sparsefill::{op["name"]}_autograd);' for op in ops]
    out += ["}", ""]
    return "\n".join(out)


README_BEGIN = "<!-- GENERATED BEGIN: the ops of tools/codegen/native.yaml -->"
README_END = "<!-- GENERATED END -->"


def op_table(spec: dict) -> str:
    rows = ["| op | family | kernels | derivative: the inputs of its `_autograd` twin, or Python's |",
            "| --- | --- | --- | --- |"]
    for op in spec["ops"]:
        deriv = ", ".join(op["derivative"]) if op.get("derivative") else ""
        deriv = "Python (`register_backward_only`)" if op.get("python_autograd") else deriv
        rows.append(f"| `{op['name']}` | {op['family']} | {', '.join(op['kernels'])} | {deriv} |")
    return "\n".join(rows)


def gen_readme(spec: dict, path: Path) -> str:
    text = path.read_text()
    if README_BEGIN not in text or README_END not in text:
        raise SpecError(f"{path}: the GENERATED markers are missing")
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    return head + README_BEGIN + "\n" + op_table(spec) + "\n" + README_END + tail


def outputs(spec: dict) -> dict:
    files = {
        CORE_OUT / "core_entries.h": gen_header(
            spec, "core", "CORE_ENTRIES",
            "the C core's entry points: the contract of each,\n * then its prototype (each typed entry once per element type)"),
        CORE_OUT / "cuda_entries.h": gen_header(
            spec, "cuda", "CUDA_ENTRIES",
            "the CUDA core's entry points: the contract of each,\n * then its prototype (each typed entry once per element type)"),
        OPS_OUT / "core.h": gen_core_structs(
            spec, "core", "Core", "sparsefill_core.h",
            "Core<T>: the C core's typed entry points by element type\n// (common/dtypes.h says how a kernel picks T)"),
        OPS_OUT / "cuda_core.h": gen_core_structs(
            spec, "cuda", "CudaCore", "sparsefill_cuda.h",
            "CudaCore<T>: the CUDA core's typed entry points by element\n// type, the twin of Core<T>; only CUDA kernels include it (common/cuda.h)"),
        OPS_OUT / "schemas.h": gen_schemas(spec),
        OPS_OUT / "calls.h": gen_calls(spec),
        OPS_OUT / "kernels.h": gen_kernels(spec),
        OPS_OUT / "registrations.cpp": gen_registrations(spec),
        OPS_OUT / "autograd.cpp": gen_autograd(spec),
    }
    files.update(gen_cuda_wrappers(spec))
    readme = OPS_OUT / "README.md"
    files[readme] = gen_readme(spec, readme)
    return files


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when a generated file is stale")
    args = parser.parse_args(argv)
    try:
        files = outputs(load())
    except SpecError as e:
        print(f"tools/codegen/native.yaml: {e}", file=sys.stderr)
        return 2
    stale = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    if args.check:
        for p in stale:
            print(f"stale: {p.relative_to(ROOT)} (run: make gen)", file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(files[p])
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
