"""What a downstream C++ extension needs to build against torch_sparsefill
(README: the op library; RFC.md#op-library)."""
from __future__ import annotations

from pathlib import Path

from .. import _C

__all__ = ["get_include", "get_library"]

_HEADER = "sparsefill_core.h"


def get_include() -> str:
    """The folder holding ``sparsefill_core.h``, the C ABI of the core, for
    ``extra_include_paths`` of ``torch.utils.cpp_extension.load`` (or
    ``include_dirs`` of a setup.py).

    Example::

        >>> import os
        >>> os.path.exists(os.path.join(sf.get_include(), "sparsefill_core.h"))
        True
    """
    package = Path(__file__).resolve().parent.parent  # torch_sparsefill/, beside ops/
    for folder in (package / "include", package.parent / "aten_ext"):
        if (folder / _HEADER).is_file():
            return str(folder)
    raise RuntimeError(f"torch_sparsefill: {_HEADER} was not found next to the package "
                       f"({package / 'include'}) nor in its source checkout")


def get_library() -> str:
    """The path of the extension's shared library, which exports the C core
    (``sf_*``) and registers the ops: link a downstream extension against it
    (``extra_ldflags=[get_library()]``) to call the core, and import
    torch_sparsefill before calling ``sparsefill::`` ops through the dispatcher.

    Example::

        >>> sf.get_library().endswith(".so")
        True
    """
    return str(Path(_C.__file__).resolve())
