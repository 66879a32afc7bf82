"""Malformed input, each case in its own Python process, so that a crash
(segfault, abort, sanitizer report) shows up as a failed test instead of
killing the suite. A case must end in a Python exception of the expected
type whose message names the offending argument; the "unusual but valid"
cases must instead give the dense reference's answer.

The cases share one process while none of them crashes (a process start
costs seconds); when that process dies, each case runs again in a process of
its own, so a crash fails exactly the case that caused it. See
test_errors.py for the same rules checked in-process.
"""
import concurrent.futures
import dataclasses
import json
import subprocess
import sys
import textwrap

import pytest

PRELUDE = """
import math, torch, torch_sparsefill as sf
ops = torch.ops.sparsefill
coo, csr = sf.sparse_coo_tensor, sf.sparse_csr_tensor
"""

# name -> (code, expected exception type, text the message must contain)
MALFORMED = {
    "coo_index_out_of_range": ("coo([[0, 3]], [1., 2.], (3,))", "RuntimeError", "indices[0, 1] = 3"),
    "coo_index_negative": ("coo([[0], [-4]], [1.], (2, 2))", "RuntimeError", "indices[1, 0] = -4 is negative"),
    "coo_index_float": ("coo(torch.tensor([[0.5]]), [1.], (2,))", "TypeError", "indices must be an integer"),
    "coo_index_bool": ("coo(torch.tensor([[True]]), [1.], (2,))", "TypeError", "indices must be an integer"),
    "coo_index_1d": ("coo(torch.tensor([0, 1]), [1., 2.], (2,))", "ValueError", "indices must be 2-D"),
    "coo_values_count": ("coo([[0, 1]], [1.], (2,))", "ValueError", "values has 1 rows but indices has 2"),
    "coo_values_dense_part": ("coo([[0]], [[1., 2.]], (2, 3))", "ValueError", "dense part"),
    "coo_size_rank": ("coo([[0]], [1.], (2, 2, 2))", "ValueError", "sparse_dim + dense_dim"),
    "coo_size_negative": ("coo([[0]], [1.], (-1,))", "ValueError", "size must be non-negative"),
    "coo_size_overflow": ("coo([[0], [0], [0]], [1.], (2**31, 2**31, 2**31))", "RuntimeError", "overflow"),
    "coo_zero_size_dim": ("coo([[0], [0]], [1.], (0, 3))", "RuntimeError", "out of range for size 0"),
    "coo_fill_shape": ("coo([[0]], [[1., 2.]], (3, 2), fill_value=torch.zeros(3))", "ValueError", "fill_value of shape"),
    "coo_fill_dtype": ("coo([[0]], torch.tensor([1]), (3,), fill_value=torch.tensor(0.5))", "TypeError", "fill_value of dtype"),
    "coo_fill_device": ("coo([[0]], [1.], (3,), fill_value=torch.tensor(0., device='meta'))", "RuntimeError", "fill_value is on meta"),
    "coo_values_not_strided": ("coo([[0]], torch.ones(1, 1).to_sparse(), (3, 1))", "TypeError", "values must be a strided"),
    "coo_mixed_devices": ("coo(torch.tensor([[0]]), torch.ones(1, device='meta'), (3,))", "RuntimeError", "indices are on cpu"),
    "csr_crow_length": ("csr([0, 1], [0], [1.], (2, 2))", "RuntimeError", "crow_indices must have length rows + 1"),
    "csr_crow_first": ("csr([1, 1, 1], [0], [1.], (2, 2))", "RuntimeError", "crow_indices[0] must be 0"),
    "csr_crow_decreasing": ("csr([0, 2, 1], [0, 1], [1., 2.], (2, 2))", "RuntimeError", "non-decreasing"),
    "csr_crow_last": ("csr([0, 1, 1], [0, 1], [1., 2.], (2, 2))", "RuntimeError", "crow_indices[-1] must equal"),
    "csr_crow_beyond_nse": ("csr([0, 9, 2], [0, 1], [1., 2.], (2, 2))", "RuntimeError", "crow_indices"),
    "csr_col_out_of_range": ("csr([0, 1, 2], [0, 5], [1., 2.], (2, 2))", "RuntimeError", "col_indices[1] = 5"),
    "csr_col_negative": ("csr([0, 1, 2], [-1, 0], [1., 2.], (2, 2))", "RuntimeError", "col_indices[0] = -1"),
    "csr_col_duplicate": ("csr([0, 2, 2], [1, 1], [1., 2.], (2, 2))", "RuntimeError", "strictly increasing"),
    "csr_col_unsorted": ("csr([0, 2, 2], [1, 0], [1., 2.], (2, 2))", "RuntimeError", "strictly increasing"),
    "csr_index_dtypes_differ": ("csr(torch.tensor([0, 1]), torch.tensor([0], dtype=torch.int32), [1.], (1, 1))", "TypeError", "same dtype"),
    "csr_values_count": ("csr([0, 1, 2], [0, 1], [1.], (2, 2))", "ValueError", "values has 1 rows but col_indices has 2"),
    "add_size_mismatch": ("sf.full((3,), 1.) + sf.full((4,), 1.)", "RuntimeError", "same size"),
    "op_union_sparse_dim_mismatch": ("ops.union_plan(torch.tensor([[0]]), torch.tensor([[0], [1]]), [2, 2])", "RuntimeError", "one row per sparse dimension"),
    "op_gather_src_out_of_range": ("ops.gather_with_fill(torch.ones(2), torch.tensor(0.), torch.tensor([0, 7]))", "RuntimeError", "src"),
    "op_union_uncoalesced": ("ops.union_plan(torch.tensor([[2, 1]]), torch.tensor([[0]]), [3])", "RuntimeError", "coalesced"),
    "op_to_dense_out_of_range": ("ops.to_dense(torch.tensor([[0, 5]]), torch.ones(2), torch.tensor(0.), [3])", "RuntimeError", "indices"),
    "op_linearize_alias": ("ops.coo_linearize(torch.tensor([[1], [3]]), [2, 3])", "RuntimeError", "indices"),
    "op_crow_from_unsorted_rows": ("ops.crow_from_rows(torch.tensor([1, 0]), 2)", "RuntimeError", "row indices"),
    "op_rows_from_bad_crow": ("ops.rows_from_crow(torch.tensor([0, 3, 1]))", "RuntimeError", "crow_indices"),
    "op_coalesce_float_indices": ("ops.coo_coalesce(torch.zeros(1, 1), torch.ones(1), [2])", "RuntimeError", "indices must be an integer"),
    "op_exp_fill_shape": ("ops.exp(torch.ones(2, 3), torch.ones(4))", "RuntimeError", "fill of shape"),
    "unsupported_function": ("torch.linalg.eig(sf.full((2, 2), 1.))", "NotImplementedError",
                             "torch.linalg.eig"),
}

# Unusual but valid: must not crash and must equal the dense reference.
VALID = {
    "noncontiguous_indices": """
idx = torch.tensor([[0, 1], [2, 0]]).t().contiguous().t()
assert not idx.is_contiguous()
A = coo(idx, [1., 2.], (2, 3), fill_value=4.)
ref = torch.full((2, 3), 4.); ref[0, 2] = 1.; ref[1, 0] = 2.
""",
    "overlapping_values": """
A = coo([[0, 1, 2]], torch.ones(1).expand(3), (4,), fill_value=-1.)
ref = torch.tensor([1., 1., 1., -1.])
""",
    "noncontiguous_values": """
A = coo([[0, 2]], torch.arange(4.)[::2], (3,), fill_value=9.)
ref = torch.tensor([0., 9., 2.])
""",
    "duplicates_unsorted": """
A = coo([[2, 0, 2]], [1., 2., 3.], (3,), fill_value=5.)
ref = torch.tensor([2., 5., 4.])
""",
    "zero_size": """
A = coo(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0), (0, 3), fill_value=1.)
ref = torch.zeros(0, 3)
""",
    "add_hybrid_and_plain": """
A = coo([[0]], [[1., 2.]], (2, 2)) + coo([[0], [1]], [1.], (2, 2))
ref = torch.tensor([[1., 3.], [0., 0.]])
""",
    "int32_csr": """
A = csr(torch.tensor([0, 1], dtype=torch.int32), torch.tensor([1], dtype=torch.int32), [3.], (1, 2), fill_value=2.)
ref = torch.tensor([[2., 3.]])
""",
}


# Runs cases one after another in one process, each in a fresh namespace
# made by the prelude, and reports each case's output as a JSON line; a case
# that kills the process leaves its BEGIN line without an END.
RUNNER = r"""
import contextlib, io, json, sys, traceback
job = json.load(sys.stdin)
prelude = {}
exec(compile(job["prelude"], "<prelude>", "exec"), prelude)
for name, code in job["cases"]:
    print("@@BEGIN", name, flush=True)
    out, failed = io.StringIO(), ""
    with contextlib.redirect_stdout(out):
        try:
            exec(compile(code, name, "exec"), dict(prelude))
        except BaseException:
            failed = traceback.format_exc()
    print("@@END", json.dumps([name, out.getvalue(), failed]), flush=True)
"""


@dataclasses.dataclass
class Outcome:
    """What a case's own process would have given: its exit status, output, errors."""
    returncode: int
    stdout: str
    stderr: str


def _interpreter(code: str, stdin: str = None) -> subprocess.CompletedProcess:
    # -P: the package is the one this test session imported (the CUDA build
    # runs from build/cuda/lib via PYTHONPATH), never the checkout's folder.
    return subprocess.run([sys.executable, "-P", "-c", code], input=stdin,
                          capture_output=True, text=True, timeout=300)


def _prelude(device: str) -> str:
    # The case's tensors are built on the device of this pass (conftest.py).
    return PRELUDE + ("" if device == "cpu" else f"torch.set_default_device({device!r})\n")


def _alone(code: str, device: str) -> Outcome:
    proc = _interpreter(_prelude(device) + textwrap.dedent(code))
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


def _run_all(programs: dict, device: str) -> dict:
    """name -> Outcome of every program. All run in one process first (each
    process start imports torch: seconds); if that process does not finish
    every case and exit cleanly (a crash, an abort, a corrupted heap found
    at exit), every case runs again in a process of its own, so that a crash
    is charged to the case that caused it and to no other."""
    job = {"prelude": _prelude(device),
           "cases": [(name, textwrap.dedent(code)) for name, code in programs.items()]}
    proc = _interpreter(RUNNER, json.dumps(job))
    outcomes = {}
    for line in proc.stdout.splitlines():
        if line.startswith("@@END "):
            name, out, failed = json.loads(line[len("@@END "):])
            outcomes[name] = Outcome(1 if failed else 0, out, failed)
    if proc.returncode == 0 and outcomes.keys() == programs.keys():
        return outcomes
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(_alone, code, device) for name, code in programs.items()}
        return {name: f.result() for name, f in futures.items()}


def _malformed_program(code, error):
    return f"""
try:
    {code}
except {error} as e:
    # the builtin class (sf.Refused is a NotImplementedError)
    print("RAISED", next(c for c in type(e).__mro__ if c.__module__ == "builtins").__name__,
          "|", e)
else:
    print("NO ERROR")
"""


@pytest.fixture(scope="module")
def results(device):
    programs = {name: _malformed_program(code, "Exception") for name, (code, _, _) in MALFORMED.items()}
    programs.update({name: code + "\nassert torch.equal(A.to_dense(), ref), A.to_dense()\nprint('OK')"
                     for name, code in VALID.items()})
    return _run_all(programs, device)


def test_enough_cases():
    assert len(MALFORMED) >= 30


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_input_raises(results, name):
    _, error, text = MALFORMED[name]
    proc = results[name]
    assert proc.returncode == 0, f"process died ({proc.returncode}):\n{proc.stderr[-3000:]}"
    line = proc.stdout.strip().splitlines()[-1]
    assert line.startswith(f"RAISED {error} |"), line
    assert text in line, line


@pytest.mark.parametrize("name", sorted(VALID))
def test_unusual_valid_input(results, name):
    proc = results[name]
    assert proc.returncode == 0, f"process died ({proc.returncode}):\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip().endswith("OK")
