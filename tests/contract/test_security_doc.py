"""SECURITY.md names the test behind each guarantee: every test and file it names must exist,
so a guarantee cannot outlive the test that held it."""

import re

from tests.conftest import ROOT

TEXT = (ROOT / "SECURITY.md").read_text()


def _defined_tests() -> set[str]:
    names = set()
    for path in (ROOT / "tests").rglob("test_*.py"):
        names |= set(re.findall(r"^def (test_\w+)", path.read_text(), re.M))
    return names


def test_every_named_test_exists():
    named = set(re.findall(r"\b(test_\w+)\b(?!\.py)", TEXT))
    assert named, "SECURITY.md names no tests"
    missing = named - _defined_tests()
    assert not missing, f"SECURITY.md names tests that do not exist: {sorted(missing)}"


def test_every_named_file_exists():
    paths = set(re.findall(r"`((?:app|tests|bench|manifests)/[\w/.-]+\.(?:py|yaml))", TEXT))
    assert paths
    missing = [p for p in sorted(paths) if not (ROOT / p).exists()]
    assert not missing, f"SECURITY.md names files that do not exist: {missing}"
