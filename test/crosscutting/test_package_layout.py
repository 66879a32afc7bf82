"""The package's layout (torch_sparsefill/README.md): which folder may import
which, no lazy imports, no import circle, no oversized module, no two
modules whose names differ only by an ending, a README in every folder."""
import ast
import re
from pathlib import Path

import pytest

# The layout is a property of the source tree, not of an installed copy
# (`make cuda-build` tests a copy under build/cuda/lib that has no READMEs).
PACKAGE = Path(__file__).resolve().parents[2] / "torch_sparsefill"
NAME = "torch_sparsefill"

# What each layer (a top-level folder, or a top-level module) may import of
# the package, besides itself and the extension `_C`. Lower layers first:
# nothing may import a layer that is not listed for it.
ALLOWED = {
    "ops": set(),
    "tensor": set(),
    "creation": {"tensor"},
    "functions": {"tensor", "creation", "ops"},
    "compile": {"tensor", "creation"},
    "distributed": {"tensor", "creation", "functions", "compile"},
    "pyg": {"tensor", "creation", "ops", "functions"},
    "graph": {"tensor", "creation", "ops", "functions"},
}
# Generated files (tools/codegen) are data, not hand-written modules.
GENERATED = {"ops.elementwise"}
MAX_LINES = 550


def _modules() -> dict:
    """dotted name below the package ('' for __init__) -> path, every .py file."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(node) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> set:
    """The package modules a relative import names (a name that is a
    submodule counts as that module, any other name as the module itself)."""
    base = module.split(".") if module else []
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
    target = ".".join(base + (node.module.split(".") if node.module else []))
    found = set()
    for alias in node.names:
        sub = f"{target}.{alias.name}" if target else alias.name
        found.add(sub if sub in MODULES or sub == "_C" else target)
    return found


def _imports() -> dict:
    """module -> (package modules imported at module level, imported lazily)."""
    out = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        is_package = path.name == "__init__.py"
        skip = {id(n) for stmt in ast.walk(tree) if _is_type_checking(stmt)
                for n in ast.walk(stmt)}
        top, lazy = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level >= 1 and id(node) not in skip:
                (top if node in tree.body else lazy).update(_resolve(module, is_package, node))
            elif isinstance(node, ast.Import) and id(node) not in skip:
                names = {a.name[len(NAME) + 1:] for a in node.names
                         if a.name.startswith(NAME + ".")}
                (top if node in tree.body else lazy).update(names)
        top.discard(module)
        out[module] = (top, lazy)
    return out


IMPORTS = _imports()


def _layer(module: str) -> str:
    return module.split(".")[0]


def test_modules_found():
    assert {"tensor.sparse_fill_tensor", "functions.routing", "ops.reductions",
            "creation.constructors", "compile.whole_graph", "distributed.collectives",
            "pyg"} <= set(MODULES)


def test_no_lazy_imports():
    lazy = {m: sorted(names) for m, (_, names) in IMPORTS.items() if names}
    assert not lazy, f"package imports inside functions: {lazy}"


def test_no_import_circle():
    graph = {m: top for m, (top, _) in IMPORTS.items()}
    done, path = set(), []

    def visit(m):
        assert m not in path, f"import circle: {' -> '.join(path[path.index(m):] + [m])}"
        if m in done:
            return
        path.append(m)
        for dep in graph.get(m, ()):
            visit(dep)
        path.pop()
        done.add(m)

    for m in graph:
        visit(m)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_it_may(layer):
    wrong = {}
    for module, (top, _) in IMPORTS.items():
        if module and _layer(module) == layer:
            bad = {m for m in top if m != "_C" and _layer(m) not in ALLOWED[layer] | {layer}}
            if bad:
                wrong[module] = sorted(bad)
    assert not wrong, f"{layer}/ may import only {sorted(ALLOWED[layer])}: {wrong}"


def test_every_layer_is_known():
    layers = {_layer(m) for m in MODULES if m} - {"_C"}
    assert layers <= set(ALLOWED), f"a folder without import rules: {layers - set(ALLOWED)}"


def test_bottom_of_tensor():
    """The component rules below the class import nothing above them."""
    tops = {m: top for m, (top, _) in IMPORTS.items()}
    assert tops["tensor.fill"] == set()
    assert tops["tensor.compressed"] == {"tensor.fill"}
    assert tops["tensor.batched"] <= {"tensor.fill", "tensor.compressed"}
    for mixin in ("tensor.conversions", "tensor.gradients"):
        assert tops[mixin] <= {"tensor.fill", "tensor.compressed", "tensor.batched"}, mixin


def test_public_api_is_the_package_init():
    """__init__ holds the public names and their wiring: it defines no function."""
    tree = ast.parse(MODULES[""].read_text())
    assert not [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]


def test_no_module_too_long():
    long = {m: n for m, p in MODULES.items() if m not in GENERATED
            and (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def _stem(name: str) -> str:
    return re.sub(r"(tions|tion|ings|ing|es|e|s)$", "", name.strip("_"))


def test_no_names_that_differ_only_by_an_ending():
    stems = {m.split(".")[-1] for m in MODULES if m}
    clashes = sorted((a, b) for a in stems for b in stems if a < b
                     and (a.startswith(b) or b.startswith(a) or _stem(a) == _stem(b)))
    assert not clashes, f"module names a reader confuses: {clashes}"


def test_every_folder_has_a_readme():
    folders = {p.parent for p in MODULES.values()}
    missing = sorted(str(f.relative_to(PACKAGE.parent)) for f in folders
                     if not (f / "README.md").exists())
    assert not missing, f"folders without a README: {missing}"
