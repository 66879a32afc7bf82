"""Batching SparseFillTensor samples (RFC.md#data-loading): sf.collate and
torch's default_collate / DataLoader, worker processes included."""
import math

import pytest
import torch
from torch.utils.data import DataLoader, default_collate

import torch_sparsefill as sf

import sf_testing as T


class Samples(torch.utils.data.Dataset):
    def __init__(self, layout):
        fills = T.FILLS
        self.items = [T.random_tensor("random", fills[i % len(fills)], layout, seed=i)
                      for i in range(6)]

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        return {"x": self.items[i], "label": i}


@pytest.mark.parametrize("layout", T.LAYOUTS)
def test_default_collate_stacks_with_per_sample_fills(layout):
    samples = Samples(layout).items[:4]
    batch = default_collate(samples)
    assert isinstance(batch, sf.SparseFillTensor) and batch.shape == (4, 5, 7)
    T.assert_dense_equal(batch.to_dense(), torch.stack([s.to_dense() for s in samples]))
    T.assert_dense_equal(sf.collate(samples).to_dense(), batch.to_dense())


@pytest.mark.cpu_only(reason="worker processes")
@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_batches_dicts(workers):
    data = Samples(torch.sparse_coo)
    loader = DataLoader(data, batch_size=3, num_workers=workers)
    for k, batch in enumerate(loader):
        T.assert_dense_equal(batch["x"].to_dense(),
                             torch.stack([data[3 * k + i]["x"].to_dense() for i in range(3)]))
        assert batch["label"].tolist() == [3 * k + i for i in range(3)]


def test_collate_refusals():
    A = sf.full((2, 3), 1.)
    with pytest.raises(RuntimeError, match="one shape"):
        default_collate([A, sf.full((3, 3), 1.)])
    with pytest.raises(TypeError, match="sample 1"):
        sf.collate([A, torch.ones(2, 3)])
    with pytest.raises(ValueError, match="empty"):
        sf.collate([])
    assert math.isnan(sf.collate([sf.full((1,), math.nan)]).fill_value().item())
