import pytest

from tests.gobuild import GoUnavailable
from tests.nvml import library


@pytest.fixture(scope="session")
def nvml_library():
    """The folder holding the test libnvidia-ml.so.1 (built once, cached by its sources)."""
    try:
        return library.build()
    except GoUnavailable as exc:
        pytest.skip(str(exc))
