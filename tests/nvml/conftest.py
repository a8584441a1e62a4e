import pytest

from tests.gobuild import GoUnavailable
from tests.nvml import library, nvidia


@pytest.fixture(scope="session")
def nvml_library():
    """The folder holding the test libnvidia-ml.so.1 (built once, cached by its sources)."""
    try:
        return library.build()
    except GoUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def nvidia_programs():
    """The folder holding NVIDIA's gpu-feature-discovery and nvidia-device-plugin."""
    try:
        return nvidia.build()
    except GoUnavailable as exc:
        pytest.skip(str(exc))
