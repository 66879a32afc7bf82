"""The package's import layering (torch_sparsefill/README.md): no lazy
imports, no import circle, the fill rules, the compressed
layouts' component conversions (batched ones too) and the tensor class at
the bottom."""
import ast
from pathlib import Path

import torch_sparsefill

PACKAGE = Path(torch_sparsefill.__file__).parent


def _imports():
    """module -> (package modules imported at module level, lazily imported ones)."""
    out = {}
    for path in sorted(PACKAGE.glob("*.py")):
        tree = ast.parse(path.read_text())
        top, lazy = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                names = {node.module} if node.module else {a.name for a in node.names}
                (top if node in tree.body else lazy).update(names)
        out[path.stem] = (top, lazy)
    return out


def test_no_lazy_imports():
    lazy = {m: sorted(names) for m, (_, names) in _imports().items() if names}
    assert not lazy, f"package imports inside functions: {lazy}"


def test_no_import_circle():
    graph = {m: top for m, (top, _) in _imports().items()}
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


def test_bottom_layers():
    imports = _imports()
    assert imports["_fill"][0] == set()
    assert imports["_compressed"][0] == {"_fill"}
    assert imports["_batched"][0] == {"_fill", "_compressed"}
    assert imports["_tensor"][0] == {"_fill", "_compressed", "_batched"}
