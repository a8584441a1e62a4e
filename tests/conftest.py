import os
import pathlib

import pytest

from tests.kube.fakeapi import FakeKube

ROOT = pathlib.Path(__file__).resolve().parents[1]
# The e2e tier builds and starts a real control plane: `make e2e` runs it, `make test` does not.
collect_ignore = [] if os.environ.get("DRA_BRIDGE_E2E") else ["e2e"]
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
