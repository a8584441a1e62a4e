import pathlib

import pytest

from tests.kube.fakeapi import FakeKube

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"


@pytest.fixture
def fake_kube():
    fake = FakeKube().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="session")
def corpus() -> pathlib.Path:
    if not CORPUS.is_dir():
        pytest.skip(f"shared corpus not found at {CORPUS}")
    return CORPUS
