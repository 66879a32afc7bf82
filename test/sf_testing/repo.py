"""The repository the tests check: its paths, and its tools loaded as
modules (tools/ is not a package and is not on the path).

    >>> (ROOT / "README.md").exists()
    True
    >>> fuzz_ops = tool("fuzz_ops.py")
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "test" / "data"
# Real matrices from the SuiteSparse collection, kept in the repository
# (test/data/README.md); override with SPARSEFILL_MATRICES. Tests that use
# them fail, never skip, when missing.
MATRICES = Path(os.environ.get("SPARSEFILL_MATRICES", DATA / "matrices"))


def tool(path: str):
    """tools/<path> imported as a module (once: later calls return the same
    module), e.g. tool("codegen/gen_elementwise.py").load_spec()."""
    file = ROOT / "tools" / path
    name = "sf_tool_" + file.stem
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while it runs
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]
