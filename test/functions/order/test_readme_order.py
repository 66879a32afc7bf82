"""The README's "Order statistics, scans and indexing with the fill" example
runs as written, and what its comments claim holds."""
import pytest
import torch

import sf_testing as T

TITLE = "### Order statistics, scans and indexing with the fill"


@pytest.mark.cpu_only("the README's CPU example")
def test_readme_example():
    text = (T.ROOT / "README.md").read_text()
    body = text[text.index(TITLE):]
    block = body[body.index("```python\n") + 10: body.index("```\n", body.index("```python"))]
    ns = {"torch": torch, "sf": __import__("torch_sparsefill")}
    exec(compile(block, "README.md", "exec"), ns)  # noqa: S102
    v, s, x, M = ns["v"], ns["s"], ns["x"], ns["M"]
    top = torch.topk(v, 2)
    assert top.values.tolist() == [7.0, 2.0] and top.indices.tolist() == [3, 0]
    assert int(torch.argmin(v)) == 9_999_998 and float(torch.median(v)) == 2.0
    assert s.values.to_dense().tolist() == [-1.0, 2.0, 2.0, 7.0]
    assert s.indices.tolist() == [3, 1, 2, 0]
    assert torch.cumsum(x, 0).tolist() == [1.0, 2.0, 7.0, 8.0, 9.0]
    assert torch.diff(x).to_dense().tolist() == [0.0, 4.0, -4.0, 0.0]
    assert M[torch.tensor([0, 1]), torch.tensor([2, 2])].tolist() == [3.0, 5.0]
    assert M[M > 3.5].tolist() == [5.0, 5.0, 4.0, 5.0, 5.0]
    assert torch.flip(M, [1]).to_dense().tolist() == [[3.0, 5.0, 5.0], [5.0, 5.0, 4.0]]
    P = torch.nn.functional.pad(M, (1, 1), mode="reflect")
    assert P.to_dense().tolist() == [[5.0, 5.0, 5.0, 3.0, 5.0], [5.0, 4.0, 5.0, 5.0, 5.0]]
    assert torch.unique(M, dim=1, return_counts=True)[1].tolist() == [1, 1, 1]
