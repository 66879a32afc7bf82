"""Shared test machinery; `import sf_testing as T` from any folder of test/
(pytest.ini puts test/ on the path). Not collected as tests.

- repo:        the repository's paths (ROOT, DATA, MATRICES), tool(path)
- tensors:     random SparseFillTensors over named cases and layouts
               (rng, random_tensor, CASES, LAYOUT_CASES, ...), gradient leaves
               (leaf, leaves, rebuild, with_fill)
- reference:   the dense side of the oracle (dense, dense_of, stored_mask) and a
               program's two builders (sparse_from_parts, dense_from_parts)
- compare:     assert_dense_equal, assert_matches_dense, assert_all_close
- gradients:   leaf_parts, build, check_dense_gradients
- elementwise: the element-wise op table (OPS) and its checks (import it as
               sf_testing.elementwise)
- native:      the native ops' registry and a program calling each (sf_testing.native)
- shapes:      the shape-op tests' tensors (sf_testing.shapes; built on import)
- cuda:        the CPU-vs-CUDA comparison `both` and the `gpu` marker (sf_testing.cuda)

    >>> import sf_testing as T
    >>> A = T.random_tensor("random", 1.5, torch.sparse_csr)
    >>> T.assert_matches_dense(torch.exp(A), torch.exp(T.dense_of(A)))
"""
from .compare import assert_all_close, assert_dense_equal, assert_matches_dense
from .gradients import build, check_dense_gradients, leaf_parts
from .reference import dense, dense_from_parts, dense_of, sparse_from_parts, stored_mask
from .repo import DATA, MATRICES, ROOT, tool
from .tensors import (ALL_LAYOUTS, BATCHED_CASES, BATCHED_LAYOUTS, BLOCK_LAYOUTS, BLOCKSIZE, CASES,
                      EXTRA_CASES, EXTRA_LAYOUTS, FILLS, LAYOUT_CASES, LAYOUTS, Batched, Case,
                      base_layout, blocksize_for, case_id, compressed_indices, fill_id,
                      layout_case_id, layout_id, leaf, leaves, on_test_device, random_tensor,
                      rebuild, rng, size_for_layout, with_fill)

__all__ = ["ALL_LAYOUTS", "BATCHED_CASES", "BATCHED_LAYOUTS", "BLOCK_LAYOUTS", "BLOCKSIZE",
           "CASES", "DATA", "EXTRA_CASES", "EXTRA_LAYOUTS", "FILLS", "LAYOUT_CASES", "LAYOUTS",
           "MATRICES", "ROOT", "assert_all_close", "assert_dense_equal", "assert_matches_dense",
           "base_layout", "Batched", "blocksize_for", "build", "Case", "case_id",
           "check_dense_gradients", "compressed_indices", "dense", "dense_from_parts", "dense_of",
           "fill_id", "layout_case_id", "layout_id", "leaf", "leaf_parts", "leaves",
           "on_test_device", "random_tensor", "rebuild", "rng", "size_for_layout",
           "sparse_from_parts", "stored_mask", "tool", "with_fill"]
