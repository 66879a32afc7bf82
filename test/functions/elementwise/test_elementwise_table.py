"""The element-wise op table (tools/codegen/elementwise.yaml), one test per
property, each parametrized over every op of the table:

- dense equivalence: values and fill over the shared cases and layouts
  (sf_testing LAYOUT_CASES), binary ops against every kind of second operand;
- routes: every torch callable the YAML routes to the op;
- gradients: float64 gradcheck on (values, fill) [and the other operand] and
  against the dense gradients on every layout, gradgradcheck for smooth ops;
- opcheck: torch.library.opcheck on every native op the entry generates.

The YAML is read through the generator's own loader (sf_testing.elementwise),
so an op added to the YAML is tested here with nothing else to write. Test ids
name the op after the device pass: test_dense_equivalence[cpu-exp-random-fill1.5-csr].
"""
import pytest
import torch

import sf_testing as T
from torch_sparsefill.ops import elementwise as generated
from sf_testing.elementwise import OPS, check_gradients, check_op, check_route, opcheck_op, \
    route_id

DENSE_CASES = [pytest.param(spec, case, layout,
                            id=f"{name}-{T.case_id(case)}-{T.layout_id(layout)}")
               for name, spec in OPS.items() for case, layout in T.LAYOUT_CASES]
ROUTES = [pytest.param(spec, func, id=f"{name}-{route_id(fname)}")
          for name, spec in OPS.items() for fname, func in spec.routes]
GRADIENT_CASES = [pytest.param(spec, layout, id=f"{name}-{T.layout_id(layout)}")
                  for name, spec in OPS.items() for layout in T.ALL_LAYOUTS]


@pytest.mark.parametrize("spec,case,layout", DENSE_CASES)
def test_dense_equivalence(spec, case, layout):
    check_op(spec, case, layout)


@pytest.mark.parametrize("spec,func", ROUTES)
def test_routes(spec, func):
    check_route(spec, func)


@pytest.mark.parametrize("spec,layout", GRADIENT_CASES)
def test_gradients(spec, layout):
    check_gradients(spec, layout)


@pytest.mark.parametrize("spec", OPS.values(), ids=OPS.keys())
def test_opcheck(spec):
    opcheck_op(spec)


def test_table_covers_every_op():
    """Every op the generator registers is in the table the tests run
    (the same loader: an op cannot be generated without being tested)."""
    assert set(generated.OPS) == set(OPS)
    for name in OPS:
        assert hasattr(torch.ops.sparsefill, name), name
