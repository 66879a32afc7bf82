"""One OpInfo of PyTorch's op database, run on SparseFillTensors and compared
with the dense op (the worker half of `make coverage`; run.py is the driver).

For an OpInfo and each dtype it supports of float64, float32, float16 and
bfloat16, the first 3 usable samples (a tensor input with at least one dim)
give the cases: the input (and, for a binary ufunc, every tensor argument of
its shape) becomes a SparseFillTensor whose fill is its most frequent value,
as COO and, when 2-D, as CSR; once as given and once with two thirds of its
elements set to one value. The dense op on the same dense arguments is the
reference; a sample where it raises is left out.

Each case ends in one outcome, judged by judge.py: pass, refused, wrong or
error; an op's status folds its cases (judge.op_status).

Example::

    $ python tools/coverage/cases.py exp --dtypes float64
    exp: pass (pass 8)
"""
from __future__ import annotations

import argparse
import collections
import math
import os
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path

import torch

from judge import _first_line, clean_refusal, compare, op_status, raised_by_package, ties_open

DTYPES = {"float64": torch.float64, "float32": torch.float32,
          "float16": torch.float16, "bfloat16": torch.bfloat16}
SAMPLES_PER_DTYPE = 3

# Ops whose output is random or uninitialised memory: no dense reference to
# compare with. torch tags most random ops (nondeterministic_seeded, found by
# `skip_reason`); these are the ones its tags miss.
UNINITIALISED = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
                 "new_empty_strided"}
RANDOM = {"nn.functional.dropout2d", "nn.functional.dropout3d",
          # randomized algorithms (a random projection of the input)
          "svd_lowrank", "pca_lowrank"}



def op_key(op) -> str:
    """The OpInfo's name and variant, unique in op_db: ``"max.reduction_with_dim"``."""
    return op.name + ("." + op.variant_test_name if op.variant_test_name else "")


def load_op_db():
    """PyTorch's OpInfo list, keyed by op_key (importing it needs expecttest)."""
    warnings.filterwarnings("ignore")
    # The package first: an OpInfo binds its function when op_db is built,
    # and importing the package replaces torch.masked's (functions/masked.py).
    import torch_sparsefill  # noqa: F401
    from torch.testing._internal.common_methods_invocations import op_db
    return {op_key(op): op for op in op_db}


def load_package():
    """Imports torch_sparsefill (the module whose tensors are tested)."""
    import torch_sparsefill as sf
    return sf


def _aten_tags(op) -> set:
    tags = set()
    for name in {op.aten_name, op.name.split(".")[-1]}:
        packet = getattr(torch.ops.aten, name, None) if name else None
        if packet is None or not hasattr(packet, "overloads"):
            continue
        for overload in packet.overloads():
            tags |= set(getattr(packet, overload).tags)
    return tags


def skip_reason(op) -> str | None:
    """Why an OpInfo is not compared (its output is random or uninitialised), or None."""
    if op.name in UNINITIALISED:
        return "uninitialised output"
    if op.name in RANDOM:
        return "random output"
    if torch.Tag.nondeterministic_seeded in _aten_tags(op):
        return "random output (torch.Tag.nondeterministic_seeded)"
    return None


# ---- building the cases ------------------------------------------------------

def most_frequent(x: torch.Tensor):
    """The value x holds most often (the smallest among ties; NaN counts as one
    value); 0 for an empty x. ``most_frequent(torch.tensor([1., 2., 2.]))`` is 2.0."""
    flat = x.detach().reshape(-1).cpu()
    if flat.numel() == 0:
        return False if x.dtype == torch.bool else 0
    values = flat.tolist()
    counts = collections.Counter("nan" if isinstance(v, float) and math.isnan(v) else v
                                 for v in values)
    best = max(counts.values())
    tops = [v for v, c in counts.items() if c == best]
    numbers = [v for v in tops if v != "nan"]
    if not numbers:
        return float("nan")
    return min(numbers, key=lambda v: (v.real, v.imag) if isinstance(v, complex) else v)


def two_thirds(x: torch.Tensor, seed: int) -> torch.Tensor:
    """A copy of x with two thirds of its elements (at seeded random positions)
    set to the value of its first element."""
    y = x.detach().clone().contiguous()
    n = y.numel()
    if n:
        flat = y.view(-1)
        g = torch.Generator().manual_seed(seed)
        where = torch.randperm(n, generator=g)[: (2 * n) // 3]
        flat[where.to(flat.device)] = flat[0].clone()
    return y


def _map_tensors(obj, fn):
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_map_tensors(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    return obj


def _fresh(obj):
    """obj with every tensor cloned (an op may write into its arguments)."""
    return _map_tensors(obj, lambda t: t.detach().clone())


def usable_samples(op, dtype):
    """The first SAMPLES_PER_DTYPE samples of op in dtype whose input is a
    strided tensor with at least one dim (an input that is a torch sparse
    tensor already is the sparse operand; it is not a case)."""
    torch.manual_seed(0)
    out = []
    for sample in op.sample_inputs("cpu", dtype, requires_grad=False):
        x = sample.input
        if isinstance(x, torch.Tensor) and x.layout == torch.strided and x.dim() >= 1:
            out.append(sample)
            if len(out) == SAMPLES_PER_DTYPE:
                break
    return out


def binary_ufunc(op) -> bool:
    from torch.testing._internal.opinfo.core import BinaryUfuncInfo
    return isinstance(op, BinaryUfuncInfo)


# ---- running one op ----------------------------------------------------------

def _upcast(obj, dtype):
    return _map_tensors(obj, lambda t: t.detach().to(torch.float64)
                        if t.dtype == dtype else t.detach().clone())


def run_op(op, sf, dtypes, heartbeat=lambda: None, route=None) -> dict:
    """Every case of op in dtypes; returns {"status", "cases": {outcome: n},
    "examples": {outcome: first message}, "skipped_samples": n}. `route`, when
    given, is a context manager factory each refused case is rerun under (the
    opt-in dense route): its outcomes are counted in "route_cases"."""
    reason = skip_reason(op)
    if reason:
        return {"status": "skipped", "reason": reason}
    counts, examples = collections.Counter(), {}
    route_counts = collections.Counter()
    decomposed = 0  # passing cases computed by the decomposition route
    dense_raises = 0
    sparse_binary = binary_ufunc(op)
    supported = op.supported_dtypes("cpu")
    for dname in dtypes:
        dtype = DTYPES[dname]
        if dtype not in supported:
            continue
        try:
            samples = usable_samples(op, dtype)
        except Exception:
            continue
        for si, sample in enumerate(samples):
            shape = sample.input.shape
            for variant in ("given", "two_thirds"):
                seed = 1000 * si + 7
                base_in = sample.input.detach()
                if variant == "two_thirds":
                    base_in = two_thirds(base_in, seed)
                # the arguments that become sparse: for a binary ufunc, every
                # tensor argument of the input's shape
                args, kwargs = sample.args, sample.kwargs
                if sparse_binary:
                    k = [0]

                    def prep(t):
                        if t.shape != shape or t.dim() == 0:
                            return t.detach()
                        k[0] += 1
                        return two_thirds(t, seed + k[0]) if variant == "two_thirds" else t.detach()
                    args, kwargs = _map_tensors(args, prep), _map_tensors(kwargs, prep)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        expected = op.op(_fresh(base_in), *_fresh(args), **_fresh(kwargs))
                except Exception:
                    dense_raises += 1
                    continue
                ref = None
                if dtype != torch.float64:
                    try:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            ref = op.op(_upcast(base_in, dtype), *_upcast(args, dtype),
                                        **_upcast(kwargs, dtype))
                    except Exception:
                        ref = None
                layouts = [torch.sparse_coo] + ([torch.sparse_csr] if len(shape) == 2 else [])
                for layout in layouts:
                    heartbeat()
                    before = _taken(sf)
                    outcome, message = _one_case(op, sf, base_in, args, kwargs, layout,
                                                 sparse_binary, expected, ref)
                    counts[outcome] += 1
                    if outcome == "pass" and _taken(sf) > before:
                        decomposed += 1
                    if outcome != "pass":
                        examples.setdefault(outcome, f"{dname} {tuple(shape)} {variant} "
                                                 f"{str(layout).split('_')[-1]}: {message}")
                    if outcome == "refused" and route is not None:
                        with route():
                            r_outcome, r_message = _one_case(op, sf, base_in, args, kwargs,
                                                             layout, sparse_binary, expected, ref)
                        route_counts[r_outcome] += 1
    status = op_status(counts)
    out = {"status": status or "unusable", "cases": dict(counts), "examples": examples,
           "dense_raises": dense_raises}
    if status is None:
        out["reason"] = ("the dense op raises on every usable sample" if dense_raises else
                         "no sample with a strided tensor input of at least one dim")
    if route is not None:
        out["route_cases"] = dict(route_counts)
    if decomposed:
        out["decomposition_cases"] = decomposed
    return out


def _taken(sf) -> int:
    """How many calls the package computed by torch's decomposition so far (0
    for a package without the route)."""
    module = sys.modules.get(sf.__name__ + ".functions.decompositions")
    return module.TAKEN["decomposition"] if module is not None else 0


def _one_case(op, sf, base_in, args, kwargs, layout, sparse_binary, expected, ref):
    def convert(t):
        return sf.to_sparse(t, fill_value=most_frequent(t), layout=layout)

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            A = convert(base_in)
            a, kw = _fresh(args), _fresh(kwargs)
            if sparse_binary:
                def conv(t):
                    return convert(t) if t.shape == base_in.shape and t.dim() > 0 else t
                a, kw = _map_tensors(a, conv), _map_tensors(kw, conv)
            ours = _densify(op.op(A, *a, **kw))
    except Exception as exc:  # noqa: BLE001 -- every exception is an outcome
        if clean_refusal(exc, op):
            return "refused", _first_line(exc)
        if raised_by_package(exc):
            return "error", "a refusal of ours that does not name the function: " + \
                _first_line(exc)
        tb = traceback.extract_tb(exc.__traceback__)
        where = f" (at {Path(tb[-1].filename).name}:{tb[-1].lineno})" if tb else ""
        return "error", _first_line(exc) + where
    try:
        why = compare(ours, expected, ref)
        if why:
            why = ties_open(op, base_in, args, kwargs, ours, expected)
    except Exception as exc:  # noqa: BLE001 -- judge.py's own failure, not the op's
        return "error", "harness: judge.py failed: " + _first_line(exc)
    if why:
        return "wrong", why
    return "pass", ""


def _densify(result):
    """result with every tensor of another layout in its dense form, tuples as
    tuples: what our code must do before judge.py compares it."""
    if isinstance(result, torch.Tensor):
        return result.to_dense() if result.layout != torch.strided else result
    if isinstance(result, (tuple, list)):
        return tuple(_densify(r) for r in result)
    return result


# ---- the worker protocol -----------------------------------------------------
# run.py starts `cases.py --worker DTYPES`, writes one op key a line to its
# stdin and reads lines starting with MARK from its stdout: "beat" before each
# case (the driver's per-case timeout), then "done <json>" per op. Anything
# else the ops print is ignored.
MARK = "@@coverage "


def worker(dtypes, dense_route: bool) -> None:
    import json
    torch.set_num_threads(1)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # what the ops print goes to stderr, never into the protocol
    ops = load_op_db()
    sf = load_package()
    route = getattr(sf, "auto_densify", None) if dense_route else None
    out.write(MARK + "ready\n")
    # The driver's guards are tested by making one op crash or hang on purpose.
    crash, hang = os.environ.get("SF_COVERAGE_CRASH"), os.environ.get("SF_COVERAGE_HANG")
    for line in sys.stdin:
        key = line.strip()
        if not key:
            continue
        if key == crash:
            os.kill(os.getpid(), signal.SIGSEGV)
        if key == hang:
            out.write(MARK + "beat\n")
            time.sleep(3600)
        try:
            result = run_op(ops[key], sf, dtypes,
                            heartbeat=lambda: out.write(MARK + "beat\n"), route=route)
        except Exception as exc:  # noqa: BLE001 -- the harness's own failure, reported
            result = {"status": "error", "reason": "harness: " + _first_line(exc),
                      "cases": {"error": 1}, "examples": {"error": traceback.format_exc()}}
        out.write(MARK + "done " + json.dumps({"op": key, **result}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ops", nargs="*", help="op keys to run in this process")
    parser.add_argument("--dtypes", default=",".join(DTYPES))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--dense-route", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    dtypes = [d for d in args.dtypes.split(",") if d]
    if args.worker:
        return worker(dtypes, args.dense_route)
    torch.set_num_threads(1)
    ops, sf = load_op_db(), load_package()
    for key in args.ops:
        r = run_op(ops[key], sf, dtypes)
        cases = ", ".join(f"{k} {v}" for k, v in sorted(r.get("cases", {}).items()))
        print(f"{key}: {r['status']} ({cases or r.get('reason', '')})")
        for outcome, message in r.get("examples", {}).items():
            if outcome != "pass":
                print(f"  {outcome}: {message}")


if __name__ == "__main__":
    main()
