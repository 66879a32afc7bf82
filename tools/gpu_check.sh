#!/usr/bin/env bash
# `make gpu-check`: one command that proves the CUDA build on a borrowed GPU
# machine (README "Checking the CUDA build on a GPU machine").
#
# It uses the machine's own python ($GPU_PYTHON, default python3) as it is:
# no venv, no pip. In order: the versions (nvcc, ninja, nproc, python, torch,
# the GPU); the extension built for $GPU_ARCH (default 9.0: H100/H200) with
# $GPU_JOBS parallel compiles (default: every core) into build/gpu-check (the
# source tree's _C is left alone); the CUDA tests ($GPU_TESTS, default
# test/cuda, selected with -k cuda; GPU_TESTS=test adds every other file's
# CUDA pass);
# the GPU rows of bench/bench.py; then a short report, gpu-check.md, with the
# logs beside it, in $OUT when it is set, else build/gpu-check/report.
# A failed build skips the tests and the bench; the exit status is that of
# the first step that failed.
#
# Example: make gpu-check                      (on the GPU machine)
#          make gpu-check GPU_PYTHON=.venv-cuda/bin/python GPU_JOBS=2   (a dry run here)
set -uo pipefail
cd "$(dirname "$0")/.."

PY=${GPU_PYTHON:-python3}
ARCH=${GPU_ARCH:-9.0}
JOBS=${GPU_JOBS:-$(nproc)}
TESTS=${GPU_TESTS:-test/cuda}
WORK=build/gpu-check
REPORT_DIR=${OUT:-$WORK/report}
mkdir -p "$WORK" "$REPORT_DIR"
REPORT=$REPORT_DIR/gpu-check.md
status=0
t0=$(date +%s)

step() { echo; echo "== $* ($(( $(date +%s) - t0 )) s)"; }

# torch's extension build needs the ninja executable; a pip-installed ninja
# may sit only beside that python.
if ! command -v ninja >/dev/null; then
  bin=$("$PY" -c 'import ninja; print(ninja.BIN_DIR)' 2>/dev/null \
        || "$PY" -c 'import os, sys; print(os.path.dirname(sys.executable))')
  export PATH="$bin:$PATH"
fi

step versions
{
  echo "nvcc: $(nvcc --version 2>/dev/null | sed -n 's/.*release \(.*\)/\1/p' || true)"
  echo "ninja: $(ninja --version 2>/dev/null || echo 'not found')"
  echo "nproc: $(nproc)"
  echo "python: $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])' 2>&1))"
  "$PY" -c '
import torch
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (torch.cuda.is_available() is False)"
print(f"torch: {torch.__version__} (CUDA {torch.version.cuda})")
print(f"GPU: {gpu}")' 2>&1
} | tee "$REPORT_DIR/versions.txt"
if ! command -v nvcc >/dev/null; then
  echo "gpu-check: nvcc is not on PATH" >&2
  exit 1
fi

# torch finds the toolkit from CUDA_HOME, else from nvcc's location; nvcc
# may be a wrapper script, so point at the folder that holds include/.
if [ -z "${CUDA_HOME:-}" ]; then
  for home in /usr/local/cuda "$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")"; do
    if [ -f "$home/include/cuda_runtime.h" ]; then export CUDA_HOME=$home; break; fi
  done
fi

step "build for sm_${ARCH/./}, $JOBS jobs"
b0=$(date +%s)
SPARSEFILL_CUDA=1 TORCH_CUDA_ARCH_LIST="$ARCH" MAX_JOBS="$JOBS" \
  "$PY" setup.py -q build --build-base "$WORK/build" --build-lib "$WORK/lib" \
  > "$REPORT_DIR/build.log" 2>&1
build_rc=$?
build_s=$(( $(date +%s) - b0 ))
tail -n 3 "$REPORT_DIR/build.log" | cut -c1-160
echo "build: exit $build_rc after $build_s s"

tests_line="not run (the build failed)"
bench_rows="not run (the build failed)"
if [ $build_rc -ne 0 ]; then
  status=$build_rc
else
  step "CUDA tests: $TESTS"
  # 16 cores: spread the files over workers when pytest-xdist is there.
  par=()
  if "$PY" -c 'import xdist' 2>/dev/null && [ "$JOBS" -gt 2 ]; then
    par=(-n "$(( JOBS < 8 ? JOBS : 8 ))")
  fi
  # shellcheck disable=SC2086  # TESTS is a list of paths
  SPARSEFILL_EXPECT_CUDA=1 PYTHONPATH="$WORK/lib" "$PY" -P -m pytest -q -p no:cacheprovider \
    "${par[@]}" -k cuda $TESTS 2>&1 | tee "$REPORT_DIR/tests.log"
  tests_rc=${PIPESTATUS[0]}
  tests_line=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$REPORT_DIR/tests.log" | tail -n 1)
  tests_line="${tests_line:-no summary line (exit $tests_rc)}"
  [ $tests_rc -ne 0 ] && [ $status -eq 0 ] && status=$tests_rc

  step "GPU rows of bench/bench.py"
  OMP_NUM_THREADS=2 PYTHONPATH="$WORK/lib" "$PY" -P bench/bench.py --gpu-only --no-results \
    2>&1 | tee "$REPORT_DIR/bench.log"
  bench_rc=${PIPESTATUS[0]}
  bench_rows=$(grep -E '^(operation|GPU)' "$REPORT_DIR/bench.log")
  bench_rows="${bench_rows:-no GPU rows (see bench.log)}"
  [ $bench_rc -ne 0 ] && [ $status -eq 0 ] && status=$bench_rc
fi

total=$(( $(date +%s) - t0 ))
{
  echo "# make gpu-check"
  echo
  echo "Exit status $status after $total s on $(hostname) ($(date -u '+%Y-%m-%d %H:%M UTC'))."
  echo
  echo '```'
  cat "$REPORT_DIR/versions.txt"
  echo '```'
  echo
  echo "- build: sm_${ARCH/./}, $JOBS jobs, exit $build_rc after $build_s s (build.log)"
  echo "- tests: $tests_line (tests.log: $TESTS, -k cuda)"
  echo "- bench (bench.log):"
  echo
  echo '```'
  echo "$bench_rows"
  echo '```'
} > "$REPORT"
step "report: $REPORT"
cat "$REPORT"
exit $status
