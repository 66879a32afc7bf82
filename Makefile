# torch_sparsefill developer commands. Each works from a fresh clone: it makes
# the virtual environment, installs pinned dependencies, builds, then runs.
#   make demo    the RFC's membrane-potential application
#   make test    codegen checks, C core GoogleTest (ctest), pytest, the examples (parity with dense)
#   make test-slow  the tests marked slow (compile-heavy: every program under inductor)
#   make bench   benchmark table (ratios against torch in the same run)
#   make wheel   build a wheel (--no-build-isolation, against .venv's torch) and import it
#   make gen     regenerate the code of tools/codegen's two lists (native.yaml, elementwise.yaml)
#   make docs    regenerate docs/ops.md, the op reference, from the built extension, and docs/routes.md
#   make fuzz    libFuzzer on the C core (FUZZ_RUNS executions, default 10 million)
#   make fuzz-ops  the op-chain differential fuzzer: N programs (default 5000) from SEED
#   make cuda-build  the CUDA build, in its own environment, and its tests (no GPU needed)
#   make cuda-ci     CI's CUDA step: cuda-build when the CUDA torch matches nvcc
#   make cuda-bench  the benchmark table with the CUDA build (GPU rows need a GPU; ROWS=GPU: only them)
#   make coverage  PyTorch's op database run on SparseFillTensors against dense (UPDATE=1: new expectations)
#   make gpu-check   the CUDA build and its tests on a lent GPU machine, in one command (README)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BUILD  ?= build/cmake
# ccache's compiler links, when installed, make rebuilds after a clean cheap.
CCACHE_PATH := $(if $(wildcard /usr/lib/ccache),/usr/lib/ccache:,)
export PATH := $(CCACHE_PATH)$(PATH)
# Paths under the checkout are hashed relative to it: clones and worktrees in
# other folders share ccache's results.
export CCACHE_BASEDIR ?= $(CURDIR)
export MAX_JOBS ?= 2

# Every source the extension is built from: the C cores and the torch-facing
# tree (aten_ext/ops and its folders), whatever their depth.
SOURCES := setup.py $(shell find aten_ext -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \
                                           -o -name '*.cu' -o -name '*.cuh' \))

FUZZ_RUNS ?= 10000000

.PHONY: all demo test test-slow examples bench build wheel gen docs ctest pytest system-deps clean fuzz fuzz-ops cuda-build cuda-ci cuda-bench

all: build

# Debian packages: GoogleTest for the C core's tests, ccache for rebuilds.
system-deps:
	@if [ ! -f /usr/include/gtest/gtest.h ] || ! command -v ccache >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing libgtest-dev ccache"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libgtest-dev ccache) >/dev/null; \
	  else \
	    echo "need libgtest-dev and ccache: sudo apt-get install libgtest-dev ccache" >&2; exit 1; \
	  fi; \
	fi

# The CPU build of torch lies on this kind of machine's disk; never let pip
# fall back to PyPI's multi-GB CUDA build when the variable pointing there is unset.
FIND_LINKS := $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)

$(VENV)/.deps: requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q $(FIND_LINKS) -r requirements-dev.txt
	touch $@

$(VENV)/.built: $(VENV)/.deps $(SOURCES)
	$(PY) -m pip install -q --no-build-isolation -e .
	touch $@

build: $(VENV)/.built

# A plain (non-editable) wheel, built the way the README says, installed into
# a scratch folder and imported from there (not from the editable checkout).
WHEEL_DIR := build/wheel
wheel: $(VENV)/.deps
	rm -rf $(WHEEL_DIR)
	$(PY) -m pip wheel -q --no-build-isolation --no-deps -w $(WHEEL_DIR) .
	$(PY) -m pip install -q --no-deps --target $(WHEEL_DIR)/site $(WHEEL_DIR)/*.whl
	cd $(WHEEL_DIR) && PYTHONPATH=site $(abspath $(PY)) -P -c "import torch_sparsefill as sf, pathlib, pkgutil, importlib; \
	  site = pathlib.Path('site').resolve(); \
	  mods = [importlib.import_module(m.name) for m in pkgutil.walk_packages(sf.__path__, 'torch_sparsefill.')]; \
	  bad = [m.__name__ for m in [sf, *mods] if not pathlib.Path(m.__file__).resolve().is_relative_to(site)]; \
	  assert not bad, bad; assert len([m for m in mods if hasattr(m, '__path__')]) >= 8, mods; \
	  print('wheel:', sf.__file__, len(mods), 'modules', (sf.full((2,), 3.) * 2).to_dense().tolist())"

docs: build
	$(PY) tools/gen_op_reference.py
	$(PY) tools/gen_routes_doc.py

gen: $(VENV)/.deps
	$(PY) tools/codegen/gen_native.py
	$(PY) tools/codegen/gen_elementwise.py

# The C core's GoogleTest suite, once plainly (with the CUDA C core compiled
# when nvcc is present) and once under AddressSanitizer + UBSan.
# The CUDA C core's products include cusparse.h, which this toolkit lacks: when
# nvcc is present, .venv gets the header from NVIDIA's wheel (no torch
# involved; the CMake build only compiles, nothing links it).
NVCC := $(shell command -v nvcc 2>/dev/null)
CUSPARSE_WHEEL ?= nvidia-cusparse==12.6.3.3
$(VENV)/.cusparse: $(VENV)/.deps
	$(PY) -m pip install -q --no-deps $(CUSPARSE_WHEEL)
	touch $@

ctest: system-deps $(if $(NVCC),$(VENV)/.cusparse)
	@mkdir -p $(dir $(BUILD))
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSPARSEFILL_PYTHON=$(abspath $(PY)) \
	  > $(BUILD).configure.log || { cat $(BUILD).configure.log; exit 1; }
	@grep '^-- sparsefill' $(BUILD).configure.log || true
	cmake --build $(BUILD) -j $(MAX_JOBS)
	ctest --test-dir $(BUILD) --output-on-failure
	cmake -S . -B $(BUILD)-asan -DCMAKE_BUILD_TYPE=Debug -DSPARSEFILL_SANITIZE=ON -DSPARSEFILL_CUDA=OFF >/dev/null
	cmake --build $(BUILD)-asan -j $(MAX_JOBS)
	ctest --test-dir $(BUILD)-asan --output-on-failure

# Seeds are committed in test/fuzz/corpus; new finds go to build/fuzz-corpus.
fuzz:
	@command -v clang >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get install -y -qq clang libclang-rt-14-dev >/dev/null; }
	CC=clang CXX=clang++ cmake -S . -B $(BUILD)-fuzz -DSPARSEFILL_FUZZ=ON -DBUILD_TESTING=OFF -DSPARSEFILL_CUDA=OFF >/dev/null
	cmake --build $(BUILD)-fuzz --target fuzz_core -j $(MAX_JOBS)
	mkdir -p $(BUILD)-fuzz/corpus
	$(BUILD)-fuzz/fuzz_core -runs=$(FUZZ_RUNS) -print_final_stats=1 \
	  -artifact_prefix=$(BUILD)-fuzz/ $(BUILD)-fuzz/corpus test/fuzz/corpus

# Random op chains on SparseFillTensors against dense torch (tools/fuzz_ops.py);
# `make test` runs a bounded budget of them.
N ?= 5000
SEED ?= 0
fuzz-ops: build
	$(PY) tools/fuzz_ops.py --seed $(SEED) -n $(N)

# The slowest tests are listed at the end: the budget is test/README.md's.
# Two workers (pytest-xdist), one per core, each taking whole files (their
# module fixtures are built once); PYTEST_JOBS=0 runs in one process.
PYTEST_JOBS ?= 2
pytest: build
	$(PY) -m pytest -q --durations=10 -n $(PYTEST_JOBS) --dist loadfile test

test-slow: build
	$(PY) -m pytest -q -m slow test

test: system-deps build
	$(PY) tools/codegen/gen_native.py --check
	$(PY) tools/codegen/gen_elementwise.py --check
	$(PY) tools/gen_routes_doc.py --check
	$(MAKE) --no-print-directory ctest
	$(MAKE) --no-print-directory pytest
	$(MAKE) --no-print-directory examples

# The examples at small sizes: each prints its parity with dense and fails when it is lost.
examples: build
	$(PY) examples/sparse_attention.py --seq 128 --steps 3
	$(PY) examples/gnn_karate.py --steps 3
	$(PY) examples/distributed_training.py --steps 3
	$(PY) examples/graph_algorithms.py --n 200 --steps 4

# ---- the CUDA build --------------------------------------------------------
# torch's CUDA build (torch 2.14.1+cu130: CUDA 13.0, as nvcc here) in its own
# environment, so that .venv keeps the CPU build. The extension is built with
# its CUDA parts under build/cuda, never in the source tree (whose _C is the
# CPU build's); then the whole suite runs against it: without a GPU, that is
# the CPU pass of the CUDA build (torch 2.14) plus test/cuda's check
# that every op has its CUDA kernel registered (their GPU tests skip); with
# one, every test runs on the CPU and on CUDA.
# `make cuda-ci` (CI, after `make test`) does this whenever the CUDA torch's
# CUDA major version equals nvcc's, and says why when it does not.
# TORCH_CUDA_ARCH_LIST: the H100/H200 we test on (otherwise torch picks many
# architectures when it sees no GPU). CUDA_JOBS: parallel compiles; nvcc is
# memory hungry (about 3 GB each with torch's headers).
CUDA_VENV ?= .venv-cuda
CUDA_PY   := $(CUDA_VENV)/bin/python
CUDA_TORCH ?= torch==2.14.1
CUDA_ARCH ?= 9.0
CUDA_JOBS ?= 1
CUDA_LIB  := build/cuda/lib
# The toolkit's root (headers, lib64): nvcc may be a wrapper script on PATH,
# from which torch would guess a root without them.
CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda) $(patsubst %/bin/nvcc,%,$(realpath $(shell command -v nvcc))))

$(CUDA_VENV)/.deps: requirements-dev.txt
	test -x $(CUDA_PY) || $(PYTHON) -m venv $(CUDA_VENV)
	grep -v '^torch==' requirements-dev.txt > $(CUDA_VENV)/requirements.txt
	$(CUDA_PY) -m pip install -q $(CUDA_TORCH) -r $(CUDA_VENV)/requirements.txt
	touch $@

# (the package's Python too: build/cuda/lib holds a copy of it)
build/cuda/.built: $(CUDA_VENV)/.deps $(SOURCES) $(shell find torch_sparsefill -name '*.py')
	SPARSEFILL_CUDA=1 CUDA_HOME="$(CUDA_HOME)" TORCH_CUDA_ARCH_LIST="$(CUDA_ARCH)" MAX_JOBS=$(CUDA_JOBS) \
	  $(CUDA_PY) setup.py -q build --build-base build/cuda --build-lib $(CUDA_LIB)
	touch $@

cuda-build: build/cuda/.built
	SPARSEFILL_EXPECT_CUDA=1 PYTHONPATH=$(CUDA_LIB) $(CUDA_PY) -P -m pytest -q -p no:cacheprovider test

# CI's CUDA step. Skips, saying why, when there is no nvcc, when the CUDA
# torch cannot be installed here, or when its CUDA major version differs
# from nvcc's (the extension would then be compiled by one CUDA and loaded
# against another). A build or test failure fails.
cuda-ci:
	@if ! command -v nvcc >/dev/null; then echo "cuda-ci: skipped: no nvcc on PATH"; exit 0; fi; \
	if ! $(MAKE) --no-print-directory $(CUDA_VENV)/.deps; then \
	  echo "cuda-ci: skipped: could not install $(CUDA_TORCH) into $(CUDA_VENV)"; exit 0; fi; \
	nvcc_cuda=$$(nvcc --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p'); \
	torch_cuda=$$($(CUDA_PY) -c 'import torch; print(torch.version.cuda or "none")'); \
	if [ "$${torch_cuda%%.*}" != "$${nvcc_cuda%%.*}" ]; then \
	  echo "cuda-ci: skipped: $(CUDA_TORCH) is built with CUDA $$torch_cuda, nvcc is CUDA $$nvcc_cuda"; exit 0; fi; \
	echo "cuda-ci: $(CUDA_TORCH) (CUDA $$torch_cuda) and nvcc (CUDA $$nvcc_cuda) match: building the CUDA extension"; \
	$(MAKE) --no-print-directory cuda-build CUDA_JOBS=$(MAX_JOBS)

demo: build
	$(PY) examples/membrane_potential.py

bench: build
	OMP_NUM_THREADS=2 $(PY) bench/bench.py
	$(PY) bench/bench_distributed.py

# The GPU rows (and the rest) with the CUDA build; needs a GPU to time them.
cuda-bench: build/cuda/.built
	OMP_NUM_THREADS=2 PYTHONPATH=$(CUDA_LIB) $(CUDA_PY) -P bench/bench.py --rows "$(ROWS)"

# ---- the measuring tools ----------------------------------------------------
# PyTorch's op database on SparseFillTensors against dense (tools/coverage):
# the per-op table, bench/results/coverage.{json,md}, and the comparison with
# tools/coverage/expected.json (fails when an op got worse). UPDATE=1 rewrites
# the expectations; COVERAGE_ARGS passes options (--ops exp,sum --jobs 1 ...).
.PHONY: coverage gpu-check
COVERAGE_ARGS ?=
coverage: build
	$(PY) tools/coverage/run.py $(if $(UPDATE),--update) $(COVERAGE_ARGS)

# The CUDA build proven on a GPU machine with its own python (no venv, no
# pip): versions, build for GPU_ARCH (default 9.0) on GPU_JOBS cores (default
# all), the CUDA tests (GPU_TESTS, default test/cuda), the bench's
# GPU rows, a report in $$OUT or build/gpu-check/report (tools/gpu_check.sh).
GPU_PYTHON ?= python3
gpu-check:
	GPU_PYTHON="$(GPU_PYTHON)" GPU_ARCH="$(GPU_ARCH)" GPU_JOBS="$(GPU_JOBS)" GPU_TESTS="$(GPU_TESTS)" \
	  CUDA_HOME="$(CUDA_HOME)" bash tools/gpu_check.sh

clean:
	rm -rf $(BUILD) build torch_sparsefill/*.so *.egg-info $(VENV)/.built build/cuda/.built
