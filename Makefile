# torch_sparsefill developer commands. Each works from a fresh clone: it makes
# the virtual environment, installs pinned dependencies, builds, then runs.
#   make demo    the RFC's membrane-potential application
#   make test    codegen check, C core GoogleTest (ctest), pytest
#   make bench   benchmark table (ratios against torch in the same run)
#   make gen     regenerate element-wise code from tools/codegen/elementwise.yaml
#   make fuzz    libFuzzer on the C core (FUZZ_RUNS executions, default 10 million)
#   make cuda-build  the CUDA build, in its own environment (no GPU needed)

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
BUILD  ?= build/cmake
# ccache's compiler links, when installed, make rebuilds after a clean cheap.
CCACHE_PATH := $(if $(wildcard /usr/lib/ccache),/usr/lib/ccache:,)
export PATH := $(CCACHE_PATH)$(PATH)
export MAX_JOBS ?= 2

SOURCES := setup.py $(wildcard aten_ext/*.h aten_ext/*.cpp aten_ext/generated/*.cpp \
           aten_ext/cpu/*.c aten_ext/cpu/*.h aten_ext/cuda/*.cu aten_ext/cuda/*.cuh)

FUZZ_RUNS ?= 10000000

.PHONY: all demo test bench build gen ctest pytest system-deps clean fuzz cuda-build

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

gen: $(VENV)/.deps
	$(PY) tools/codegen/gen_elementwise.py

# The C core's GoogleTest suite, once plainly (with the CUDA C core compiled
# when nvcc is present) and once under AddressSanitizer + UBSan.
ctest: system-deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release >/dev/null
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

pytest: build
	$(PY) -m pytest -q test

test: system-deps build
	$(PY) tools/codegen/gen_elementwise.py --check
	$(MAKE) --no-print-directory ctest
	$(MAKE) --no-print-directory pytest

# ---- the CUDA build --------------------------------------------------------
# torch's CUDA build (torch 2.14.1+cu130: CUDA 13.0, as nvcc here) in its own
# environment, so that .venv keeps the CPU build. The extension is built with
# its CUDA parts under build/cuda, never in the source tree (whose _C is the
# CPU build's); then test/test_cuda.py runs there: without a GPU it checks
# that every structural op and union element-wise op has a CUDA kernel
# registered (the GPU tests skip); with one it runs them all.
# Not part of `make test`: from a clean clone it took 8 min wall here (about
# 1.5 min for the 5.5 GB environment, 6.5 min compiling at MAX_JOBS=1 on cores
# shared with other builds; 4m52s CPU), above the 6 min CI budget for it.
# `make test` still compiles the torch-free CUDA C core with plain nvcc (ctest).
# TORCH_CUDA_ARCH_LIST: the H100/H200 we test on (otherwise torch picks many
# architectures when it sees no GPU). MAX_JOBS=1: nvcc is memory hungry and
# the cores are shared.
CUDA_VENV ?= .venv-cuda
CUDA_PY   := $(CUDA_VENV)/bin/python
CUDA_TORCH ?= torch==2.14.1
CUDA_ARCH ?= 9.0
CUDA_LIB  := build/cuda/lib
# The toolkit's root (headers, lib64): nvcc may be a wrapper script on PATH,
# from which torch would guess a root without them.
CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda) $(patsubst %/bin/nvcc,%,$(realpath $(shell command -v nvcc))))

$(CUDA_VENV)/.deps: requirements-dev.txt
	test -x $(CUDA_PY) || $(PYTHON) -m venv $(CUDA_VENV)
	grep -v '^torch==' requirements-dev.txt > $(CUDA_VENV)/requirements.txt
	$(CUDA_PY) -m pip install -q $(CUDA_TORCH) -r $(CUDA_VENV)/requirements.txt
	touch $@

$(CUDA_VENV)/.built: $(CUDA_VENV)/.deps $(SOURCES)
	SPARSEFILL_CUDA=1 CUDA_HOME="$(CUDA_HOME)" TORCH_CUDA_ARCH_LIST="$(CUDA_ARCH)" MAX_JOBS=1 \
	  $(CUDA_PY) setup.py -q build --build-base build/cuda --build-lib $(CUDA_LIB)
	touch $@

cuda-build: $(CUDA_VENV)/.built
	SPARSEFILL_EXPECT_CUDA=1 PYTHONPATH=$(CUDA_LIB) $(CUDA_PY) -P -m pytest -q -p no:cacheprovider test/test_cuda.py

demo: build
	$(PY) examples/membrane_potential.py

bench: build
	OMP_NUM_THREADS=2 $(PY) bench/bench.py

clean:
	rm -rf $(BUILD) build torch_sparsefill/*.so *.egg-info $(VENV)/.built $(CUDA_VENV)/.built
