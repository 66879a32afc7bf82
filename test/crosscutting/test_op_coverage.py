"""make coverage (tools/coverage), bounded: its ratchet over a fixed subset of
PyTorch's op database, the guards of its driver, and the rules that judge a
case.

The subset (`bounded` in tools/coverage/expected.json, picked by a full
`make coverage UPDATE=1`) is every op that gives wrong results today plus ops
that compute, a few of each OpInfo family. An op whose status gets worse than
the expectation, or a new wrong/error, fails; an op that got better warns to
rerun `make coverage UPDATE=1`.
"""
import json
import os
import subprocess
import sys
import types
import warnings

import pytest
import torch

from sf_testing.repo import ROOT
sys.path.insert(0, str(ROOT / "tools" / "coverage"))
import cases  # noqa: E402
import judge  # noqa: E402
import run  # noqa: E402

pytestmark = pytest.mark.cpu_only("the harness runs op_db's CPU samples in its own processes")

EXPECTED = json.loads(run.EXPECTED.read_text())


def _harness(tmp_path, *args, env=None):
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "coverage" / "run.py"), "--quiet",
                           "--report", str(tmp_path), *args],
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, **(env or {})))
    report = tmp_path / "coverage.json"
    assert report.exists(), done.stdout + done.stderr
    return done, json.loads(report.read_text())


def test_bounded_subset_is_no_worse_than_expected(tmp_path):
    assert EXPECTED["bounded"], "tools/coverage/expected.json names no bounded subset"
    done, report = _harness(tmp_path, "--keys", "bounded", "--jobs", "2")
    results = report["ops"]
    assert set(results) == set(EXPECTED["bounded"])
    same_torch = EXPECTED["torch"].split(".")[:2] == torch.__version__.split(".")[:2]
    if not same_torch:
        # op_db's samples change between torch versions: the statuses are
        # expectations for the pinned torch only; a crash is a crash anywhere.
        crashed = {k: r["reason"] for k, r in results.items()
                   if r.get("reason", "").startswith(("crashed", "timeout"))}
        assert not crashed, crashed
        return
    worse, better = run.compare_expected(results, EXPECTED["status"])
    for key, old, new, _ in better:
        warnings.warn(f"coverage: {key} improved from {old} to {new}: record it with "
                      f"`make coverage UPDATE=1`")
    assert not worse, "\n".join(
        f"{key}: expected {old}, got {new}: {r.get('examples', {}).get(new, r.get('reason'))}"
        for key, old, new, r in worse)
    assert done.returncode == 0, done.stdout[-3000:]


def test_a_crash_and_a_hang_end_their_op_not_the_run(tmp_path):
    """A worker killed by a signal and one stuck in a case: each op becomes an
    error with the reason, and a new worker runs the ops after it."""
    done, report = _harness(tmp_path, "--keys", "abs,exp,neg,sgn", "--jobs", "2",
                            "--timeout", "3",
                            env={"SF_COVERAGE_CRASH": "abs", "SF_COVERAGE_HANG": "exp"})
    ops = report["ops"]
    assert ops["abs"]["status"] == "error" and ops["abs"]["reason"] == "crashed (signal 11)"
    assert ops["exp"]["status"] == "error" and ops["exp"]["reason"].startswith("timeout")
    assert ops["neg"]["status"] == "pass" and ops["sgn"]["status"] == "pass", ops
    assert done.returncode == 1  # a new error is a regression


# ---- the rules that judge a case ------------------------------------------------

def test_float64_results_compare_to_rounding():
    x = torch.tensor([1.0, -2.0, 3e5], dtype=torch.float64)
    assert judge.compare(x * (1 + 1e-13), x) is None
    assert "differ" in judge.compare(x * (1 + 1e-6), x)
    assert "dtype" in judge.compare(x.float(), x)
    assert "shape" in judge.compare(x[:2], x)
    assert "NaN" in judge.compare(torch.tensor([float("nan"), 1.0]), torch.tensor([0.0, 1.0]))
    assert judge.compare(torch.tensor([float("nan"), -float("inf")]),
                         torch.tensor([float("nan"), -float("inf")])) is None
    assert "values differ" in judge.compare(torch.tensor([1, 2]), torch.tensor([1, 3]))
    nan = torch.full((2,), float("nan"), dtype=torch.float16)   # NaN everywhere, in both
    assert judge.compare(nan, nan, nan.double()) is None


def test_lower_precision_is_judged_by_dense_error():
    ref = torch.tensor([1000.3, 1.0, 50.0], dtype=torch.float64)
    dense = ref.to(torch.float16)                       # dense's own rounding
    assert judge.compare(dense.clone(), dense, ref) is None
    off = dense.clone()
    off[0] = 1010.0                                     # 10 where dense's error is ~0.3
    assert "differ" in judge.compare(off, dense, ref)
    inf = dense.clone()
    inf[2] = float("inf")                               # an overflow dense does not have
    assert "differ" in judge.compare(inf, dense, ref)
    zeros = torch.zeros(3, dtype=torch.float16)         # exact zeros: no error to divide by
    assert judge.compare(zeros, zeros, zeros.double()) is None
    assert "differ" in judge.compare(zeros + 1e-3, zeros, zeros.double())


def test_results_of_every_shape_compare_by_dense_form():
    A = torch.tensor([[0.0, 2.0], [0.0, 0.0]])
    assert judge.compare((A.to_sparse(), 3, True), (A, 3, True)) is None
    assert "result 1" in judge.compare((A, 4), (A, 3))
    assert "results" in judge.compare((A,), (A, A))
    assert "tensor" in judge.compare(torch.tensor(3.0), 3.0)
    assert judge.compare(2.0, float("nan")) is not None


def test_op_status_folds_cases_worst_first():
    assert judge.op_status({"pass": 4}) == "pass"
    assert judge.op_status({"pass": 4, "refused": 1}) == "partial"
    assert judge.op_status({"refused": 2}) == "refused"
    assert judge.op_status({"pass": 4, "refused": 1, "error": 1}) == "error"
    assert judge.op_status({"pass": 4, "error": 1, "wrong": 1}) == "wrong"
    assert judge.op_status({}) is None


def test_most_frequent_value_is_the_fill():
    assert cases.most_frequent(torch.tensor([3.0, 1.0, 3.0])) == 3.0
    assert cases.most_frequent(torch.tensor([2.0, 1.0])) == 1.0      # a tie: the smallest
    nan = cases.most_frequent(torch.tensor([float("nan"), float("nan"), 1.0]))
    assert nan != nan
    y = cases.two_thirds(torch.arange(9.0), seed=1)
    assert 6 <= int((y == 0).sum()) <= 7                # 6 set to x[0] = 0 (x[0] may be one)
    assert torch.equal(y, cases.two_thirds(torch.arange(9.0), seed=1))   # the same positions


def test_clean_refusal_is_ours_and_names_the_function():
    import torch_sparsefill as sf
    op = types.SimpleNamespace(name="nn.functional.dropout", aten_name="dropout", aliases=(),
                               op=torch.nn.functional.dropout)
    # dropout of a non-zero fill would make every unspecified element random:
    # refused by design
    with pytest.raises(NotImplementedError) as ours:
        torch.nn.functional.dropout(sf.full((3,), 1.0), 0.5)
    assert judge.clean_refusal(ours.value, op)
    other = types.SimpleNamespace(name="cummax", aten_name="cummax", aliases=(), op=torch.cummax)
    assert not judge.clean_refusal(ours.value, other)    # names another function
    with pytest.raises(NotImplementedError) as elsewhere:
        raise NotImplementedError("dropout is not here")  # not raised by the package
    assert not judge.clean_refusal(elsewhere.value, op)
    assert not judge.clean_refusal(ValueError("dropout"), op)


def test_dense_route_column_counts_refusals_that_compute_under_the_route():
    """--dense-route's plumbing, with a stand-in for sf.auto_densify(): every
    call sees dense arguments while it is active."""
    import contextlib
    import torch_sparsefill as sf

    @contextlib.contextmanager
    def densify():
        def dense_call(cls, func, types, args=(), kwargs=None):
            def plain(t):
                return t.to_dense() if isinstance(t, sf.SparseFillTensor) else t
            with torch._C.DisableTorchFunctionSubclass():
                return func(*cases._map_tensors(args, plain),
                            **cases._map_tensors(kwargs or {}, plain))
        old = sf.SparseFillTensor.__dict__["__torch_function__"]
        sf.SparseFillTensor.__torch_function__ = classmethod(dense_call)
        try:
            yield
        finally:
            sf.SparseFillTensor.__torch_function__ = old

    ops = cases.load_op_db()
    # an op refused today (the first of these that still is)
    key = next(k for k in ("nn.functional.softmin", "logcumsumexp", "msort", "fliplr", "rot90",
                           "cdist", "linalg.det", "fft.fft")
               if EXPECTED["status"].get(k) == "refused")
    r = cases.run_op(ops[key], sf, ["float64"], route=densify)
    assert r["status"] == "refused" and r["route_cases"]["pass"] == r["cases"]["refused"], r
    summary = run.summarize({key: r, "exp": {"status": "pass"}})
    assert summary["share"] == 0.5 and summary["share_with_dense_route"] == 1.0
