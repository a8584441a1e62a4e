import pytest

from tests.gobuild import GoUnavailable
from tests.helm import helmbin


@pytest.fixture(scope="session")
def helm():
    try:
        return helmbin.build()
    except GoUnavailable as exc:
        pytest.skip(str(exc))
