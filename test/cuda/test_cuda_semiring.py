"""The semiring kernels' CUDA twins (aten_ext/cuda/sf_cuda_semiring.cu)
against the CPU's (skipped without a GPU; `make gpu-check` runs them): every
monoid with every op the dtype allows, for semiring_mv (x all present and
x with a presence mask), semiring_vm and semiring_masked (by dots and by
rows), in float32, float64 and int64. out and arg must equal the CPU's bit
for bit (zeros' signs included; NaN where the CPU has NaN), the masked
product's pattern exactly. Then sf.mxm on CUDA tensors must take them."""
import pytest
import torch

import sf_testing.graph as G
import torch_sparsefill as sf
from sf_testing.cuda import CUDA, both, gpu, malformed_csr
from torch_sparsefill.graph.operators import NATIVE_MONOIDS, NATIVE_OPS

pytestmark = [gpu, pytest.mark.cpu_only("chooses CPU and CUDA explicitly")]

ops = torch.ops.sparsefill
DTYPES = [torch.float32, torch.float64, torch.int64]
CODES = sorted(set(NATIVE_OPS.values()))


def _op_codes(dtype):
    """Every binop code the dtype takes (an integer division is torch's float)."""
    if dtype.is_floating_point:
        return CODES
    return [c for c in CODES if c not in (NATIVE_OPS["div"], NATIVE_OPS["rdiv"])]


def _csr(shape, seed, dtype, density=0.4):
    """(crow, col, values) of a random CSR operand with sorted columns; float
    values with NaN and signed zeros among them (the ties and NaN rules)."""
    v, p = G.random_graph(shape, density=density, dtype=dtype, seed=seed)
    rows, cols = p.nonzero(as_tuple=True)
    crow = torch.zeros(shape[0] + 1, dtype=torch.long)
    crow[1:] = torch.bincount(rows, minlength=shape[0]).cumsum(0)
    values = v[rows, cols].contiguous()
    if dtype.is_floating_point and values.numel():
        values[::11] = float("nan")
        values[3::13] = -0.0
    return crow, cols.contiguous(), values


def _same(cpu, cuda, what):
    """Equal bit for bit (NaN as NaN: its payload is the hardware's)."""
    cuda = cuda.cpu()
    assert cpu.dtype == cuda.dtype and cpu.shape == cuda.shape, what
    if not cpu.is_floating_point():
        assert torch.equal(cpu, cuda), what
        return
    nan = cpu.isnan()
    assert torch.equal(nan, cuda.isnan()), what
    bits = torch.int64 if cpu.dtype == torch.float64 else torch.int32
    assert torch.equal(cpu[~nan].view(bits), cuda[~nan].view(bits)), what


def _on_both(fn, *args):
    """fn on the CPU arguments and on their CUDA copies, each output compared."""
    expected = fn(*args)
    actual = fn(*[a.to(CUDA) if isinstance(a, torch.Tensor) else a for a in args])
    for k, (e, a) in enumerate(zip(expected, actual)):
        assert a.device.type == "cuda"
        _same(e, a, f"output {k}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("monoid", list(NATIVE_MONOIDS))
def test_mv_matches_cpu(monoid, dtype):
    crow, col, values = _csr((37, 29), 1, dtype)
    x, present = G.random_graph((29,), density=0.6, dtype=dtype, seed=2)
    for op in _op_codes(dtype):
        for p in (None, present):  # every x present: min/max by the CPU's two lanes
            _on_both(lambda *a: ops.semiring_mv(*a, NATIVE_MONOIDS[monoid], op),
                     crow, col, values, x, p)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("monoid", list(NATIVE_MONOIDS))
def test_vm_matches_cpu(monoid, dtype):
    crow, col, values = _csr((31, 26), 3, dtype)
    u, present = G.random_graph((31,), density=0.5, dtype=dtype, seed=4)
    keys = present.nonzero().squeeze(1)
    for op in _op_codes(dtype):
        _on_both(lambda *a: ops.semiring_vm(*a, 26, NATIVE_MONOIDS[monoid], op),
                 crow, col, values, keys, u[keys].contiguous())


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("monoid", list(NATIVE_MONOIDS))
def test_masked_matches_cpu(monoid, dtype):
    a = _csr((23, 19), 5, dtype)
    b = _csr((19, 21), 6, dtype)
    crow_m, col_m, _ = _csr((23, 21), 7, torch.float64, density=0.3)
    crow_t, col_t, perm = ops.csr_transpose(b[0], b[1], 21)
    bt = (crow_t, col_t, b[2].index_select(0, perm))
    for op in _op_codes(dtype):
        for by_dots, other in ((True, bt), (False, b)):
            _on_both(lambda *t: ops.semiring_masked(*t, 21, NATIVE_MONOIDS[monoid], op, by_dots),
                     crow_m, col_m, *a, *other)


def test_bad_keys_refused_alike():
    crow, col, values = _csr((8, 6), 8, torch.float64)
    for keys in (torch.tensor([2, 1]), torch.tensor([1, 8])):
        u = torch.ones(2, dtype=torch.float64)
        messages = []
        for dev in ("cpu", CUDA):
            with pytest.raises(RuntimeError) as e:
                ops.semiring_vm(crow.to(dev), col.to(dev), values.to(dev), keys.to(dev),
                                u.to(dev), 6, 0, 3)
            messages.append(str(e.value).splitlines()[0])
        assert messages[0] == messages[1]


def test_empty_operands_match_cpu():
    e, v0 = torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.float64)
    none, three = torch.zeros(1, dtype=torch.long), torch.zeros(4, dtype=torch.long)  # rows
    x, u = torch.ones(4, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    _on_both(lambda *a: ops.semiring_mv(*a, None, 0, 3), none, e, v0, x)
    _on_both(lambda *a: ops.semiring_mv(*a, None, 2, 0), three, e, v0, x)
    _on_both(lambda *a: ops.semiring_vm(*a, 0, 2, 0), three, e, v0, e, v0)
    _on_both(lambda *a: ops.semiring_vm(*a, 5, 2, 0), three, e, v0, torch.tensor([0, 2]), u)
    bt = torch.zeros(5, dtype=torch.long)  # B^T: ncols = 4 empty rows
    for by_dots, crow_b in ((True, bt), (False, torch.zeros(3, dtype=torch.long))):
        _on_both(lambda *a: ops.semiring_masked(*a, 4, 0, 3, by_dots),
                 three, e, three, e, v0, crow_b, e, v0)


@pytest.mark.parametrize("case", ["crow_first", "decreasing", "last", "col_negative",
                                  "col_range"])
def test_bad_operands_refused_alike(case):
    crow, col = malformed_csr(case)  # 3 x 5
    values, ones = torch.ones(col.numel(), dtype=torch.float64), torch.ones(5, dtype=torch.float64)
    both(lambda *a: ops.semiring_mv(*a, None, 0, 3), crow, col, values, ones, expect="error")
    both(lambda *a: ops.semiring_vm(*a, 5, 0, 3), crow, col, values, torch.arange(3), ones[:3],
         expect="error")


def _parts(R):
    C = R.to_sparse_coo()._coalesced()
    return C._sf_indices, C._sf_values


def _indef(x):
    return sf.to_sparse(x, fill_value=sf.indefinite)


def _graph(shape, seed, density=0.4):
    v, p = G.random_graph(shape, seed=seed, density=density)
    return v.masked_fill(~p, float("nan"))  # NaN: absent (sf.to_sparse's rule)


@pytest.mark.parametrize("semiring", ["min_plus", "plus_times", "max_second", "any_pair",
                                      "lor_land"])
def test_mxm_takes_the_cuda_kernels(semiring, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the torch route ran on CUDA")
    for route in ("_by_expansion", "_by_dots", "_by_rows"):
        monkeypatch.setattr(sf.graph.products, route, refuse)
    A, B, M = _graph((30, 25), 9), _graph((25, 20), 10), _graph((30, 20), 11, 0.2)
    x, u = _graph((25,), 12, 0.6), _graph((30,), 13, 0.6)
    for dots in (True, False):
        monkeypatch.setattr(sf.graph.products, "_dots_cheaper", lambda *a, d=dots: d)
        cases = [(lambda a, v: sf.mxm(_indef(a), _indef(v), semiring), (A, x)),
                 (lambda a, v: sf.mxm(_indef(a), v, semiring), (A, x.nan_to_num())),
                 (lambda v, a: sf.mxm(_indef(v), _indef(a), semiring), (u, A)),
                 (lambda a, b, m: sf.mxm(_indef(a).to_sparse_csr(), _indef(b), semiring,
                                         mask=_indef(m)), (A, B, M))]  # COO A: the torch route
        for fn, args in cases:
            expected = _parts(fn(*args))
            actual = _parts(fn(*[t.to(CUDA) for t in args]))
            assert torch.equal(expected[0], actual[0].cpu())
            _same(expected[1], actual[1], semiring)
