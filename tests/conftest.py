import pathlib

import pytest

from tests.kube.fakeapi import FakeKube

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
# The corpus of other projects' manifests sits beside the clone in CI, not inside it.
CORPUS_ABSENT = f"shared corpus not found at {CORPUS} (real manifests of other projects, not part of this repository)"


@pytest.fixture
def fake_kube():
    fake = FakeKube().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="session")
def corpus() -> pathlib.Path:
    if not CORPUS.is_dir():
        pytest.skip(CORPUS_ABSENT)
    return CORPUS
