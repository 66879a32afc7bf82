"""The README's torch.func and torch.compile examples run as written: every
```python block of those sections, in order, in one namespace; each block
asserts its results against the dense tensor."""
import re

import pytest

import sf_testing as T

pytestmark = [pytest.mark.cpu_only(reason="the README's CPU examples"),
              pytest.mark.filterwarnings("ignore:There is a performance drop")]

README = (T.ROOT / "README.md").read_text()
SECTIONS = ["### torch.func and forward-mode AD", "## torch.compile"]


def _blocks(title):
    start = README.index(title + "\n")
    body = README[start + len(title):]
    end = re.search(r"\n#{2,3} ", body)
    return re.findall(r"```python\n(.*?)```", body[:end.start()] if end else body, re.S)


@pytest.mark.parametrize("title", SECTIONS)
def test_readme_section_runs(title):
    blocks = _blocks(title)
    assert blocks, f"no python example under {title!r}"
    namespace: dict = {}
    exec("import torch, torch_sparsefill as sf", namespace)  # noqa: S102 -- the README's code
    for block in blocks:
        exec(compile(block, f"README.md: {title}", "exec"), namespace)  # noqa: S102
