"""Build torch_sparsefill: the C core (compiled as C, by build_clib) and the
torch-facing registration library torch_sparsefill._C (C++20, BuildExtension).

Environment:
  SPARSEFILL_CUDA=auto|0|1  auto (default): build the CUDA parts when torch has
                            CUDA and nvcc is found; 0: never; 1: require them.
"""
import os
import shutil
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py

try:
    import torch  # noqa: F401
    from torch.utils import cpp_extension
except ImportError as exc:  # an isolated build environment: no torch there
    raise SystemExit(
        "torch_sparsefill compiles against the torch you have installed, and this build "
        "environment has none (" + str(exc) + "). Install torch first, then build without "
        "isolation: pip install --no-build-isolation .") from None

ROOT = Path(__file__).parent.resolve()
OPS = ROOT / "aten_ext" / "ops"


def sources(folder: Path, pattern: str) -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in folder.glob(pattern))


C_CORE = sources(ROOT / "aten_ext" / "cpu", "*.c")
# What the C core's files include: its headers, the template files each is
# compiled from once per type (cpu/templates/) and the generated prototypes.
# build_clib compares timestamps with these too (it knows no includes).
C_CORE_DEPS = (sources(ROOT / "aten_ext", "*.h") + sources(ROOT / "aten_ext" / "generated", "*.h")
               + sources(ROOT / "aten_ext" / "cpu", "**/*.h"))
# The torch-facing translation units (aten_ext/ops/README.md): the library and
# every folder below it -- the op families (each file with its ops' CPU and
# CUDA kernels; the CUDA ones compiled in the CUDA build only), the hot path,
# the generated registrations.
CXX_SOURCES = sources(OPS, "**/*.cpp")


def cuda_wanted() -> bool:
    mode = os.environ.get("SPARSEFILL_CUDA", "auto").lower()
    import torch

    available = torch.version.cuda is not None and (
        shutil.which("nvcc") is not None or os.environ.get("CUDA_HOME") is not None)
    if mode in ("0", "off", "no"):
        return False
    if mode in ("1", "on", "yes"):
        if not available:
            raise SystemExit("SPARSEFILL_CUDA=1 but torch was built without CUDA "
                             f"(torch.version.cuda={torch.version.cuda}) or nvcc was not found")
        return True
    if mode != "auto":
        raise SystemExit(f"SPARSEFILL_CUDA must be auto, 0 or 1, got {mode!r}")
    return available


def cusparse_paths():
    """(include_dirs, library_dirs, link_args) for cuSPARSE (the CUDA products
    call it, and ATen/cuda/CUDAContextLight.h includes cusparse.h). A full
    toolkit has it in CUDA_HOME/include and lib64, which CUDAExtension already
    passes. Otherwise it comes from the NVIDIA wheels torch's CUDA build
    depends on (nvidia-cusparse: nvidia/cu13/include and lib; the CUDA 12
    wheels use nvidia/cusparse/...). The wheel ships only the versioned
    libcusparse.so.N, so it is linked by that name: the extension then needs
    the same soname that libtorch_cuda.so needs, and importing torch (which
    always precedes loading the extension) has already loaded it, from the
    wheel through torch's own rpath; no rpath of ours is needed."""
    home = cpp_extension.CUDA_HOME
    if home and (Path(home) / "include" / "cusparse.h").exists():
        return [], [], ["-lcusparse"]
    try:
        import nvidia
        bases = list(nvidia.__path__)
    except ImportError:
        bases = []
    for base in bases:
        for sub in ("cu13", "cu12", "cusparse"):
            inc, lib = Path(base) / sub / "include", Path(base) / sub / "lib"
            libs = sorted(lib.glob("libcusparse.so*"))
            if (inc / "cusparse.h").exists() and libs:
                return [str(inc)], [str(lib)], [f"-l:{libs[0].name}"]
    raise SystemExit("torch_sparsefill: the CUDA build needs cuSPARSE (cusparse.h and "
                     "libcusparse): not in CUDA_HOME nor in an nvidia wheel of this python; "
                     "`pip install nvidia-cusparse` provides both")


WITH_CUDA = cuda_wanted()
print(f"torch_sparsefill: CUDA parts {'enabled' if WITH_CUDA else 'disabled'}")

core = ("sparsefill_core", {
    "sources": C_CORE,
    "obj_deps": {"": C_CORE_DEPS},
    "include_dirs": ["aten_ext"],
    # Plain C99, position independent: it is linked into a shared library.
    "cflags": ["-std=c99", "-O3", "-fPIC", "-Wall", "-Wextra"],
})

# -fopenmp: at::parallel_for is inlined from torch's headers and splits work
# with `#pragma omp parallel`; compiled without it, every kernel of ours runs
# on one thread whatever torch.get_num_threads() says.
# AT_PER_OPERATOR_HEADERS + TORCH_ASSERT_ONLY_METHOD_OPERATORS: each file
# includes the ATen/ops/<op>.h headers of the ATen functions it calls, never
# the header of all of them (ATen/Functions.h, which torch's own headers then
# leave out too, and which the second macro refuses): that header was most of
# each file's compile time.
# -g1: line tables only (backtraces keep file and line); Python's CFLAGS ask
# for -g, whose full debug info of torch's templates doubled the compile time
# and made the library about 4x larger.
cxx_flags = ["-std=c++20", "-O2", "-g1", "-fopenmp", "-DTORCH_EXT_NAME=_C",
             "-DAT_PER_OPERATOR_HEADERS", "-DTORCH_ASSERT_ONLY_METHOD_OPERATORS"]
ext_kwargs = dict(
    name="torch_sparsefill._C",
    sources=CXX_SOURCES,
    include_dirs=[str(ROOT / "aten_ext")],
    libraries=["sparsefill_core"],
    extra_compile_args={"cxx": cxx_flags, "nvcc": ["-O3", "-std=c++20", "-Xcompiler", "-fopenmp"]},
    extra_link_args=["-fopenmp"],
)
if WITH_CUDA:
    # The CUDA kernels (the SPARSEFILL_WITH_CUDA half of each family's files,
    # host code) and the CUDA C core they call (aten_ext/cuda/*.cu, no torch
    # headers) join the extension; torch's nvcc flags and
    # TORCH_CUDA_ARCH_LIST apply.
    ext_kwargs["sources"] = CXX_SOURCES + sources(ROOT / "aten_ext" / "cuda", "*.cu")
    ext_kwargs["extra_compile_args"]["cxx"] = cxx_flags + ["-DSPARSEFILL_WITH_CUDA"]
    cusparse_inc, cusparse_lib, cusparse_link = cusparse_paths()
    ext_kwargs["include_dirs"] += cusparse_inc
    ext_kwargs["library_dirs"] = cusparse_lib
    ext_kwargs["extra_link_args"] = ext_kwargs["extra_link_args"] + cusparse_link
    extension = cpp_extension.CUDAExtension(**ext_kwargs)
else:
    extension = cpp_extension.CppExtension(**ext_kwargs)



class BuildPyWithHeader(build_py):
    """Builds the package with the C core's header in torch_sparsefill/include,
    where get_include() finds it in a wheel or a build folder (an editable
    install finds it in the checkout's aten_ext), with the generated
    prototypes it includes (generated/core_entries.h)."""

    def run(self):
        super().run()
        include = Path(self.build_lib) / "torch_sparsefill" / "include"
        (include / "generated").mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "aten_ext" / "sparsefill_core.h", include)
        shutil.copy2(ROOT / "aten_ext" / "generated" / "core_entries.h", include / "generated")


setup(
    name="torch_sparsefill",
    version="0.1.0",
    description="Sparse COO/CSR tensors with a fill value for PyTorch",
    # Every subpackage ships (make wheel imports each one from the installed wheel).
    packages=find_packages(include=["torch_sparsefill", "torch_sparsefill.*"]),
    python_requires=">=3.10",
    install_requires=["torch>=2.11"],
    libraries=[core],
    ext_modules=[extension],
    cmdclass={"build_ext": cpp_extension.BuildExtension.with_options(use_ninja=True),
              "build_py": BuildPyWithHeader},
)
