"""The graph algorithms example (examples/graph_algorithms.py) at a small
size: every algorithm agrees with scipy.sparse.csgraph or its dense
reference, and the edge weights trained through min_plus follow the dense
twin."""
import importlib.util

import sf_testing.repo as R


def _example():
    spec = importlib.util.spec_from_file_location("graph_algorithms",
                                                  R.ROOT / "examples" / "graph_algorithms.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_graph_algorithms_agree_with_scipy_and_dense():
    assert _example().run(n=120, steps=3)


def test_bfs_ignores_edge_values():
    ex = _example()
    edges, weights = ex.random_graph(50, seed=5)
    A = ex.adjacency(edges, weights, 50)
    B = ex.adjacency(edges, -weights, 50)
    assert (ex.bfs_levels(A, 0) == ex.bfs_levels(B, 0)).all()
