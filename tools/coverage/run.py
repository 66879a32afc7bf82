"""`make coverage`: PyTorch's op database run on SparseFillTensors, each op
compared with the dense op (cases.py builds and runs the cases, judge.py judges them).

Every OpInfo of `torch.testing._internal.common_methods_invocations.op_db`
but the random and uninitialised ones gets a status:
  pass     every case equals dense
  partial  some cases equal dense, the others are clean refusals
  refused  every case is a clean refusal
  wrong    some case gives a result that differs from dense
  error    some case raises an exception that is not a clean refusal (a crash
           of the process and a case over --timeout included)
The share that computes is (pass + partial) over the ops with usable cases.

The ops run in --jobs worker processes (one thread each): a segfault or a
hang ends that worker, the op is recorded as an error, and a new worker takes
the rest. A full run writes bench/results/coverage.json and coverage.md and
compares every status with tools/coverage/expected.json: it fails when an op
got worse or a new wrong/error appears, and names the ops that improved
(--update, `make coverage UPDATE=1`, rewrites the file; from a full run it
also picks the bounded subset that `make test` runs, test/crosscutting/test_op_coverage.py).

Routes: --dense-route reruns every refused case under ``sf.auto_densify()``
(the opt-in dense route) and reports the share that computes with it as a
second column. A case computed by torch's decomposition passes by default;
the worker counts those cases apart (the package's record of calls the
decomposition route computed) and the summary splits the ops that compute into
explicit routes only and decomposition in some case.

Example::

    python tools/coverage/run.py --ops exp,linalg.vector_norm --dtypes float64,float16
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import cases  # noqa: E402
import judge  # noqa: E402

EXPECTED = HERE / "expected.json"
RESULTS = ROOT / "bench" / "results"
STARTUP_S = 180.0     # a worker's imports (torch, op_db, the package)
BOUNDED_BUDGET_S = 30.0  # one-worker seconds of the bounded subset (its ops' measured times)


class Worker:
    """One `cases.py --worker` process and the op it is running."""

    def __init__(self, dtypes, dense_route):
        self.log = tempfile.TemporaryFile()
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        cmd = [sys.executable, str(HERE / "cases.py"), "--worker", "--dtypes", ",".join(dtypes)]
        if dense_route:
            cmd.append("--dense-route")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, cwd=ROOT, env=env)
        self.buffer = b""
        self.op = None
        self.ready = False
        self.deadline = time.monotonic() + STARTUP_S
        self.started = None

    def send(self, key, timeout):
        self.op, self.started = key, time.monotonic()
        self.deadline = self.started + timeout
        self.proc.stdin.write((key + "\n").encode())
        self.proc.stdin.flush()

    def lines(self):
        """The protocol lines read now ([] when none); None at end of file."""
        chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
        if not chunk:
            return None
        self.buffer += chunk
        *complete, self.buffer = self.buffer.split(b"\n")
        return [ln.decode(errors="replace")[len(cases.MARK):] for ln in complete
                if ln.startswith(cases.MARK.encode())]

    def stderr_tail(self, n=3):
        self.log.seek(0)
        text = self.log.read().decode(errors="replace").strip().splitlines()
        return " | ".join(text[-n:])

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


def sweep(keys, dtypes, jobs, timeout, dense_route, progress=True) -> dict:
    """{op key: result} of every op in keys, run by `jobs` workers."""
    todo = collections.deque(keys)
    results = {}
    workers = [Worker(dtypes, dense_route) for _ in range(min(jobs, len(keys)))]
    done = 0
    while workers:
        by_fd = {w.proc.stdout.fileno(): w for w in workers}
        ready, _, _ = select.select(list(by_fd), [], [], 1.0)
        now = time.monotonic()
        for fd in ready:
            w = by_fd[fd]
            lines = w.lines()
            if lines is None:  # the worker died
                if w.op is not None:
                    code = w.proc.wait()
                    what = f"signal {-code}" if code < 0 else f"exit status {code}"
                    results[w.op] = {"status": "error", "reason": f"crashed ({what})",
                                     "cases": {"error": 1},
                                     "examples": {"error": f"the process died ({what}): "
                                                           f"{w.stderr_tail()}"}}
                    done += 1
                elif not w.ready:
                    raise SystemExit(f"coverage: a worker failed to start: {w.stderr_tail(20)}")
                w.kill()
                workers.remove(w)
                if todo:
                    workers.append(Worker(dtypes, dense_route))
                continue
            for line in lines:
                if line == "ready":
                    w.ready = True
                elif line == "beat":
                    w.deadline = time.monotonic() + timeout
                elif line.startswith("done "):
                    r = json.loads(line[5:])
                    r["seconds"] = round(time.monotonic() - w.started, 3)
                    results[r.pop("op")] = r
                    w.op = None
                    done += 1
                    if progress and done % 25 == 0:
                        print(f"  {done}/{len(keys)} ops", file=sys.stderr, flush=True)
            if w.ready and w.op is None:
                if todo:
                    w.send(todo.popleft(), timeout)
                else:
                    w.proc.stdin.close()
        for w in list(workers):
            if w.proc.poll() is None and now > w.deadline:
                if w.op is not None:
                    results[w.op] = {"status": "error", "reason": f"timeout ({timeout:g} s in one case)",
                                     "cases": {"error": 1},
                                     "examples": {"error": f"one case ran over {timeout:g} s"}}
                    done += 1
                elif not w.ready:
                    raise SystemExit(f"coverage: a worker did not start in {STARTUP_S:g} s")
                w.kill()
                workers.remove(w)
                if todo:
                    workers.append(Worker(dtypes, dense_route))
    return results


# ---- summary, report, expectations ---------------------------------------------

def summarize(results: dict) -> dict:
    """Counts per status and the share that computes (pass + partial over the
    ops with usable cases; skipped and unusable ops are outside it)."""
    counts = collections.Counter(r["status"] for r in results.values())
    judged = sum(counts[s] for s in judge.STATUS_RANK)
    computing = counts["pass"] + counts["partial"]
    out = {"ops": len(results), "judged": judged, "computing": computing,
           "share": round(computing / judged, 4) if judged else 0.0,
           "status": {s: counts[s] for s in
                      ("pass", "partial", "refused", "wrong", "error", "unusable", "skipped")}}
    by_decomposition = sum(1 for r in results.values() if r["status"] in ("pass", "partial")
                           and r.get("decomposition_cases"))
    out["computing_by_decomposition"] = by_decomposition
    out["computing_explicitly"] = computing - by_decomposition
    if any("route_cases" in r for r in results.values()):
        with_route = sum(1 for r in results.values() if r["status"] in ("pass", "partial")
                         or (r["status"] == "refused" and r.get("route_cases", {}).get("pass")))
        out["computing_with_dense_route"] = with_route
        out["share_with_dense_route"] = round(with_route / judged, 4) if judged else 0.0
    return out


def print_table(results: dict) -> None:
    print(f"{'status':<9} {'op':<52} cases (pass/refused/wrong/error)  first problem")
    for key in sorted(results):
        r = results[key]
        c = r.get("cases", {})
        counts = "/".join(str(c.get(k, 0)) for k in ("pass", "refused", "wrong", "error")) \
            if c else "-"
        ex = r.get("examples", {})
        problem = next((ex[k] for k in ("wrong", "error", "refused") if k in ex), r.get("reason", ""))
        print(f"{r['status']:<9} {key:<52} {counts:<16} {problem[:150]}")


def print_summary(s: dict, wall: float) -> None:
    st = s["status"]
    print(f"\n{s['computing']} of {s['judged']} ops with usable cases compute "
          f"({s['share']:.1%}): pass {st['pass']}, partial {st['partial']}, refused "
          f"{st['refused']}, wrong {st['wrong']}, error {st['error']}; not judged: "
          f"{st['unusable']} without usable cases, {st['skipped']} random/uninitialised; "
          f"{wall:.0f} s")
    print(f"of those computing: {s['computing_explicitly']} by explicit routes only, "
          f"{s['computing_by_decomposition']} by torch's decomposition in some case")
    if "share_with_dense_route" in s:
        print(f"with the dense route: {s['computing_with_dense_route']} of {s['judged']} "
              f"({s['share_with_dense_route']:.1%})")


def write_report(results: dict, summary: dict, meta: dict, folder: Path) -> None:
    import torch
    folder.mkdir(parents=True, exist_ok=True)
    data = {"torch": torch.__version__, **meta, "summary": summary, "ops": results}
    (folder / "coverage.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    st = summary["status"]
    lines = [
        "# make coverage: PyTorch's op_db on SparseFillTensors",
        "",
        f"Written by `make coverage` (tools/coverage/run.py) with torch {torch.__version__}, "
        f"dtypes {', '.join(meta['dtypes'])}, {meta['jobs']} workers, {meta['wall_s']:.0f} s.",
        "",
        f"**{summary['computing']} of {summary['judged']} ops compute ({summary['share']:.1%})**: "
        f"pass {st['pass']}, partial {st['partial']}, refused {st['refused']}, wrong "
        f"{st['wrong']}, error {st['error']}. Not judged: {st['unusable']} ops without usable "
        f"cases, {st['skipped']} random or uninitialised.",
        ""]
    lines += [f"Of those computing: {summary['computing_explicitly']} by explicit routes "
              f"only, {summary['computing_by_decomposition']} by torch's decomposition in some "
              f"case (RFC.md#decomposition-route).", ""]
    if "share_with_dense_route" in summary:
        lines += [f"With the dense route: {summary['computing_with_dense_route']} "
                  f"({summary['share_with_dense_route']:.1%}).", ""]
    for status in ("wrong", "error"):
        keys = sorted(k for k, r in results.items() if r["status"] == status)
        lines += [f"## {status} ({len(keys)})", ""]
        for k in keys:
            ex = results[k].get("examples", {})
            lines.append(f"- `{k}`: {ex.get(status, results[k].get('reason', ''))[:200]}")
        lines.append("")
    skipped = sorted(f"`{k}` ({r['reason']})" for k, r in results.items()
                     if r["status"] == "skipped")
    lines += [f"## skipped ({len(skipped)})", "", ", ".join(skipped), ""]
    (folder / "coverage.md").write_text("\n".join(lines))


def compare_expected(results: dict, expected: dict) -> tuple[list, list]:
    """(regressions, improvements) of results against the expected statuses: a
    regression is a status lower in judge.STATUS_RANK, or a wrong/error the
    expectation does not name."""
    rank = judge.STATUS_RANK
    worse, better = [], []
    for key, r in sorted(results.items()):
        new, old = r["status"], expected.get(key)
        if new == old or new not in rank:
            continue
        if new in ("wrong", "error") or (old in rank and rank[new] < rank[old]):
            worse.append((key, old, new, r))
        elif old is None or old not in rank or rank[new] > rank[old]:
            better.append((key, old, new, r))
    return worse, better


def pick_bounded(results: dict, budget_s: float) -> list:
    """The subset `make test` runs: every wrong op, then ops that compute
    (pass, partial), cheapest first, one per OpInfo family in turn, until
    their measured seconds reach budget_s."""
    ops = cases.load_op_db()
    chosen = sorted(k for k, r in results.items() if r["status"] == "wrong")
    spent = sum(results[k].get("seconds", 0) for k in chosen)
    families = collections.defaultdict(list)
    for k, r in results.items():
        if r["status"] in ("pass", "partial") and k in ops:
            families[type(ops[k]).__name__].append((r.get("seconds", 0), k))
    queues = [collections.deque(sorted(v)) for _, v in sorted(families.items())]
    while any(queues) and spent < budget_s:
        for q in queues:
            if q and spent < budget_s:
                s, k = q.popleft()
                chosen.append(k)
                spent += s
    return sorted(chosen)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", default="",
                        help="only ops whose key contains one of these comma-separated substrings")
    parser.add_argument("--keys", default="", help="exactly these comma-separated op keys; "
                        "'bounded': the subset expected.json names (make test)")
    parser.add_argument("--dtypes", default=",".join(cases.DTYPES),
                        help="comma-separated, of " + ", ".join(cases.DTYPES))
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (one thread each)")
    parser.add_argument("--limit", type=int, default=0, help="only the first N ops (by key)")
    parser.add_argument("--timeout", type=float, default=60.0,
                        help="seconds one case may run before its worker is killed")
    parser.add_argument("--dense-route", action="store_true",
                        help="rerun refused cases under sf.auto_densify(), a second column")
    parser.add_argument("--update", action="store_true",
                        help="rewrite tools/coverage/expected.json with these statuses")
    parser.add_argument("--report", default="",
                        help="folder for coverage.json/.md (default: bench/results for a full "
                             "run, none for a filtered one)")
    parser.add_argument("--quiet", action="store_true", help="no per-op table")
    args = parser.parse_args()
    dtypes = [d for d in args.dtypes.split(",") if d]
    unknown = [d for d in dtypes if d not in cases.DTYPES]
    if unknown or not dtypes:
        parser.error(f"--dtypes: unknown {unknown}; choose from {', '.join(cases.DTYPES)}")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.dense_route:
        sf = cases.load_package()
        if not hasattr(sf, "auto_densify"):
            parser.error("--dense-route: this torch_sparsefill has no sf.auto_densify()")

    expected = json.loads(EXPECTED.read_text()) if EXPECTED.exists() else {"status": {}}
    all_keys = sorted(cases.load_op_db())
    if args.keys == "bounded":
        keys = list(expected.get("bounded", []))
    elif args.keys:
        keys = [k for k in args.keys.split(",") if k]
    else:
        subs = [s for s in args.ops.split(",") if s]
        keys = [k for k in all_keys if not subs or any(s in k for s in subs)]
    missing = [k for k in keys if k not in all_keys]
    if missing:
        parser.error(f"not in this torch's op_db: {', '.join(missing)}")
    if args.limit:
        keys = keys[: args.limit]
    full = len(keys) == len(all_keys) and dtypes == list(cases.DTYPES)

    import torch
    print(f"coverage: {len(keys)} ops, dtypes {','.join(dtypes)}, {args.jobs} workers, "
          f"torch {torch.__version__}", flush=True)
    start = time.monotonic()
    results = sweep(keys, dtypes, args.jobs, args.timeout, args.dense_route,
                    progress=not args.quiet)
    wall = time.monotonic() - start
    summary = summarize(results)
    if not args.quiet:
        print_table(results)
    print_summary(summary, wall)
    meta = {"dtypes": dtypes, "jobs": args.jobs, "wall_s": round(wall, 1)}
    if args.report or full:
        folder = Path(args.report) if args.report else RESULTS
        write_report(results, summary, meta, folder)
        print(f"wrote {folder / 'coverage.json'} and {folder / 'coverage.md'}")

    same_torch = expected.get("torch", "").split(".")[:2] == torch.__version__.split(".")[:2]
    if args.update:
        if dtypes != list(cases.DTYPES):
            parser.error("--update needs every dtype (the expectations hold all four)")
        status = dict(expected.get("status", {}))
        status.update({k: r["status"] for k, r in results.items()})
        new = {"torch": torch.__version__, "dtypes": dtypes, "status": dict(sorted(status.items())),
               "bounded": pick_bounded(results, BOUNDED_BUDGET_S) if full else
               expected.get("bounded", [])}
        EXPECTED.write_text(json.dumps(new, indent=1) + "\n")
        print(f"wrote {EXPECTED.relative_to(ROOT)} ({len(status)} ops, "
              f"{len(new['bounded'])} in the bounded subset)")
        return 0
    if dtypes != list(cases.DTYPES):
        print("expectations: not compared (they hold all four dtypes)")
        return 0
    worse, better = compare_expected(results, expected.get("status", {}))
    for key, old, new, r in better:
        print(f"improved: {key}: {old} -> {new} (make coverage UPDATE=1 records it)")
    for key, old, new, r in worse:
        ex = r.get("examples", {})
        print(f"REGRESSION: {key}: expected {old}, got {new}: "
              f"{ex.get(new, r.get('reason', ''))}")
    if worse and not same_torch:
        print(f"(the expectations were recorded with torch {expected.get('torch')}, this is "
              f"{torch.__version__}: op_db's samples differ between versions)")
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
