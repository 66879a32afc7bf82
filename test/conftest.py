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
