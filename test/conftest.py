"""Every test runs on every device this machine has: CPU always, CUDA where
torch.cuda.is_available(). The `device` fixture is session-scoped
and autouse, so pytest runs the whole suite once per device; for a device
other than the CPU it makes that device torch's default, so the tests'
factory calls (torch.tensor, sf.full, torch.randn, ...) build their inputs
there and the dense reference is computed there too.

Tests that choose devices themselves (test/cuda/ compares CPU against
CUDA explicitly) or that only make sense on the CPU (scipy interop, thread
counts) carry `@pytest.mark.cpu_only`: they run in the CPU pass only.

The default device does not reach into the library: its functions create
tensors on their inputs' device explicitly, which test/cuda/test_cuda.py
checks with the CPU as the default device.
"""
import pytest
import torch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def pytest_configure(config):
    config.addinivalue_line("markers", "cpu_only(reason): run in the CPU pass only")
    config.addinivalue_line("markers", "slow: left out of the default run (pytest.ini); "
                                       "`make test-slow` runs them")


@pytest.fixture(scope="session", params=DEVICES, autouse=True)
def device(request):
    """The device the test's tensors live on ("cpu" or "cuda")."""
    name = request.param
    if name == "cpu":
        yield name
        return
    torch.set_default_device(name)
    try:
        yield name
    finally:
        torch.set_default_device(None)


def pytest_runtest_setup(item):
    marker = item.get_closest_marker("cpu_only")
    if marker is not None and item.callspec.params.get("device", "cpu") != "cpu":
        pytest.skip("runs in the CPU pass only: " + (marker.args[0] if marker.args else ""))


# ---- global state: every test starts as a fresh process and leaves it so ----------------
# A test that changed a global setting (float32 matmul precision, a backend
# flag, the default dtype, the thread count, Dynamo's config, an environment
# variable, ...) and did not restore it changes what later tests compute,
# on some hosts only (an AVX-512-BF16/AMX CPU honours a reduced matmul
# precision, others do not). The guard fails such a test, naming the
# setting, and restores it. The random number generator is reset to a fresh
# process's state before every test: a test draws the numbers it draws when
# run alone, as a user running a README example in a new process does.

import os  # noqa: E402
import sys  # noqa: E402

import torch._dynamo.config  # noqa: E402,F401 -- loaded by the package anyway: watched from the start
import torch._functorch.config  # noqa: E402,F401
import torch._inductor.config  # noqa: E402,F401

_FRESH_RNG = torch.get_rng_state()
_CONFIGS = ("torch._dynamo.config", "torch._inductor.config", "torch._functorch.config")
# Set by pytest, and by torch itself on first use (cache folders, CUDA's
# lazy module loading): not a test's doing.
_OWN_VARIABLES = {"PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
                  "CUDA_MODULE_LOADING"}
_PRECISION_FLAGS = ("fp32_precision", "mkldnn.fp32_precision", "mkldnn.matmul.fp32_precision",
                    "mkldnn.conv.fp32_precision", "mkldnn.rnn.fp32_precision",
                    "cuda.matmul.fp32_precision", "cudnn.fp32_precision",
                    "cudnn.conv.fp32_precision", "cudnn.rnn.fp32_precision",
                    "mkldnn.enabled", "mkldnn.deterministic", "cudnn.enabled",
                    "cudnn.deterministic", "cudnn.benchmark", "cudnn.allow_tf32",
                    "cuda.matmul.allow_tf32", "cuda.matmul.allow_bf16_reduced_precision_reduction",
                    "cuda.matmul.allow_fp16_reduced_precision_reduction",
                    "opt_einsum.enabled", "mha.get_fastpath_enabled")
_SETTERS = {
    "float32_matmul_precision": torch.set_float32_matmul_precision,
    "default_dtype": torch.set_default_dtype,
    "num_threads": torch.set_num_threads,
    "num_interop_threads": lambda n: None,  # cannot be set twice; reported only
    "deterministic_algorithms": lambda v: torch.use_deterministic_algorithms(v[0], warn_only=v[1]),
    "grad_enabled": torch.set_grad_enabled,
    "anomaly_mode": lambda v: torch.set_anomaly_enabled(*v),
    "flush_denormal": torch.set_flush_denormal,
    "default_device": torch.set_default_device,
    "output_cache_limit": lambda n: sys.modules["torch_sparsefill.ops.memory"].set_cache_limit(n),
}


def _backend_flag(path):
    obj = torch.backends
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj() if callable(obj) else obj


def _set_backend_flag(path, value):
    *parents, last = path.split(".")
    obj = torch.backends
    for part in parents:
        obj = getattr(obj, part)
    if last == "get_fastpath_enabled":
        obj.set_fastpath_enabled(value)
    else:
        setattr(obj, last, value)


def _global_state(configs=False) -> dict:
    """Every global setting a test could leave changed, by name; with
    `configs`, Dynamo's, Inductor's and functorch's config modules (a
    millisecond to copy: checked per test file)."""
    state = {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "default_dtype": torch.get_default_dtype(),
        "num_threads": torch.get_num_threads(),
        "num_interop_threads": torch.get_num_interop_threads(),
        "deterministic_algorithms": (torch.are_deterministic_algorithms_enabled(),
                                     torch.is_deterministic_algorithms_warn_only_enabled()),
        "grad_enabled": torch.is_grad_enabled(),
        "anomaly_mode": (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
        # No getter: a subnormal survives a multiplication unless flushed.
        "flush_denormal": bool((torch.tensor([1e-40]) * 1.0).item() == 0.0),
        "default_device": str(torch.get_default_device()),
        "autocast": (torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu")),
        "environ": {k: v for k, v in os.environ.items()
                    if k not in _OWN_VARIABLES and not k.startswith("_TORCHINDUCTOR")},
        "print_options": dict(vars(torch._tensor_str.PRINT_OPTS)),
    }
    memory = sys.modules.get("torch_sparsefill.ops.memory")
    if memory is not None:  # sf.memory.set_cache_limit
        state["output_cache_limit"] = memory.cache_info().limit
    for path in _PRECISION_FLAGS:
        try:
            state["torch.backends." + path] = _backend_flag(path)
        except (AttributeError, RuntimeError):
            pass
    for name in _CONFIGS if configs else ():
        module = sys.modules.get(name)
        if module is not None:
            state[name] = {k: _config_repr(v) for k, v in module.get_config_copy().items()}
    return state


def _config_repr(value):
    """A config value as text that compares by value: a set's (or a set
    held as its text, as dynamo's `_save_config_ignore`) element order
    is its hash order, which differs between equal sets."""
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(map(repr, value))) + "}"
    if isinstance(value, str) and value.startswith("{'") and value.endswith("'}"):
        return "{" + ", ".join(sorted(value[1:-1].split(", "))) + "}"
    return repr(value)


def _restore(name, value, module_values):
    if name in _SETTERS:
        _SETTERS[name](value)
    elif name.startswith("torch.backends."):
        _set_backend_flag(name[len("torch.backends."):], value)
    elif name == "environ":
        own = {k: v for k, v in os.environ.items()
               if k in _OWN_VARIABLES or k.startswith("_TORCHINDUCTOR")}
        os.environ.clear()
        os.environ.update(value, **own)
    elif name == "print_options":
        vars(torch._tensor_str.PRINT_OPTS).update(value)
    elif name.endswith(".config"):
        sys.modules[name].load_config(module_values[name])


def _check_unchanged(before, configs, who):
    after = _global_state(configs=bool(configs))
    changed = [name for name in before if name in after and before[name] != after[name]]
    for name in changed:
        _restore(name, before[name], configs)
    if changed:
        details = []
        for name in changed:
            b, a = before[name], after[name]
            if isinstance(b, dict):
                keys = sorted(k for k in set(b) | set(a) if b.get(k) != a.get(k))
                b, a = {k: b.get(k) for k in keys}, {k: a.get(k) for k in keys}
            details.append(f"{name}: {b!r} -> {a!r}")
        pytest.fail(f"{who} left global state changed (restore it in the test, e.g. with a "
                    f"fixture or try/finally):\n" + "\n".join(details), pytrace=False)


@pytest.fixture(autouse=True)
def _no_global_state_leaks(request):
    """Fails a test that leaves a global setting changed (and restores it);
    starts every test with a fresh process's random numbers."""
    torch.set_rng_state(_FRESH_RNG)
    before = _global_state()
    yield
    _check_unchanged(before, {}, request.node.nodeid)


@pytest.fixture(autouse=True, scope="module")
def _no_config_leaks(request):
    """The same for the config modules, per test file (their copy costs a
    millisecond)."""
    before = _global_state(configs=True)
    configs = {name: sys.modules[name].get_config_copy() for name in _CONFIGS
               if name in before}
    yield
    _check_unchanged({k: v for k, v in before.items() if k in configs}, configs,
                     request.node.nodeid)
