"""What the image is built from: a base image by digest, every package by hash, a package build
without warnings."""

import re
import subprocess
import sys
import tomllib
import zipfile

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT

PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)")


def locked(path) -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) of a pip-compile --generate-hashes file."""
    out, name = {}, None
    for line in (ROOT / path).read_text().splitlines():
        match = PIN.match(line)
        if match:
            name = canonicalize_name(match[1])
            out[name] = (match[2], 0)
        elif "--hash=sha256:" in line and name:
            out[name] = (out[name][0], out[name][1] + 1)
        elif line.strip() and not line.lstrip().startswith("#"):
            assert line.startswith(" ") or line == "", f"{path}: unpinned line {line!r}"
    return out


def test_every_locked_package_is_pinned_by_hash_and_satisfies_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for path, requirements in (("requirements.lock", project["project"]["dependencies"]),
                               ("requirements-build.lock", project["build-system"]["requires"])):
        pins = locked(path)
        assert pins and all(hashes > 0 for _v, hashes in pins.values()), path
        for text in requirements:
            requirement = Requirement(text)
            name = canonicalize_name(requirement.name)
            assert name in pins, f"{path} lacks {name}: run `make lock`"
            assert requirement.specifier.contains(pins[name][0], prereleases=True), \
                f"{path}: {name}=={pins[name][0]} is outside {requirement.specifier}: run `make lock`"


def test_the_image_installs_only_locked_packages_on_a_pinned_base():
    dockerfile = (ROOT / "Dockerfile").read_text()
    [base] = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", dockerfile, re.MULTILINE)
    assert re.fullmatch(r"python:3\.11-slim@sha256:[0-9a-f]{64}", base)
    assert re.findall(r"^FROM (\S+)", dockerfile, re.MULTILINE) == ["${PYTHON_IMAGE}", "${PYTHON_IMAGE}"]
    installs = [line for line in dockerfile.splitlines() if "pip install" in line]
    assert len(installs) == 3
    for lock in ("requirements.lock", "requirements-build.lock"):
        assert any(f"--require-hashes --no-deps --only-binary=:all: -r {lock}" in i for i in installs), lock
    assert any("--no-deps /tmp/wheel/" in i for i in installs)  # our wheel: nothing resolved beside the locks
    for copied in re.findall(r"^COPY (?!--from)(.+) \S+$", dockerfile, re.MULTILINE):
        for name in copied.split():
            assert (ROOT / name).exists(), name


def test_the_package_builds_without_warnings_and_carries_its_data(tmp_path):
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path), str(ROOT)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    noise = [s for s in (result.stdout + result.stderr).splitlines() if re.search(r"warn|deprecat|!!", s, re.I)]
    assert noise == []
    [wheel] = tmp_path.glob("dra_bridge-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {"app/data/default-policy.yaml", "app/data/example-inventory.yaml", "app/data/fake/h100x8.yaml"} <= set(names)
    assert not any("__pycache__" in n or n.startswith("tests/") for n in names)


def test_make_run_installs_the_service_without_the_test_tools():
    """Issue 25: `make run` installed the test extras (a 400 MB venv for a service that needs
    250 MB). `make -n` prints what each target would run, without running it."""
    def planned(target):
        result = subprocess.run(["make", "-n", "-B", target, "VENV=/nonexistent/venv"], cwd=ROOT,
                                capture_output=True, text=True, timeout=30)
        assert result.returncode == 0, result.stderr
        return [line for line in result.stdout.splitlines() if "pip install" in line and "-e" in line]

    assert [line.split()[-1] for line in planned("run")] == ["."]
    assert [line.split()[-1] for line in planned("test")] == ["'.[test]'"]
