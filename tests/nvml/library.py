"""An NVML of our own (libnvidia-ml.so.1, Go, built from this folder): a node described in the
reporter's `fake:` YAML, served through NVML's C ABI to the reporter (pynvml) and NVIDIA's
programs. See README.md for what it answers."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

from tests import gobuild

HERE = pathlib.Path(__file__).resolve().parent
LIBRARY = "libnvidia-ml.so.1"
SOURCES = ("go.mod", "go.sum", "tools.go", "nvml.go", "properties.go", "mig.go", "events.go", "description.go",
           "handles.c", "handles.h")
DESCRIPTION_ENV = "DRA_BRIDGE_NVML_DESCRIPTION"
FAIL_ENV = "DRA_BRIDGE_NVML_FAIL"


def _header_folder() -> str:
    """NVIDIA's nvml.h, from the go-nvml module the go.mod pins (downloaded from the module proxy)."""
    go = gobuild.go_command("the test NVML library")
    found = subprocess.run([go, "mod", "download", "-json", "github.com/NVIDIA/go-nvml"], cwd=HERE,
                           capture_output=True, text=True, timeout=600,
                           env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"})
    if found.returncode != 0:
        raise RuntimeError(f"go-nvml could not be downloaded: {found.stderr[-2000:]}")
    return str(pathlib.Path(json.loads(found.stdout)["Dir"]) / "pkg" / "nvml")


def build() -> pathlib.Path:
    """The folder holding libnvidia-ml.so.1 (put it on LD_LIBRARY_PATH)."""
    return gobuild.build(HERE, SOURCES, (".",), "the test NVML library", shared=LIBRARY,
                         env={"CGO_ENABLED": "1", "CGO_CFLAGS": f"-I{_header_folder()}"})


def environment(library: pathlib.Path, description: str | pathlib.Path, fail: str = "") -> dict[str, str]:
    """A process environment whose NVML is the library serving `description`."""
    env = {**os.environ, "LD_LIBRARY_PATH": str(library), DESCRIPTION_ENV: str(description)}
    env.pop(FAIL_ENV, None)
    if fail:
        env[FAIL_ENV] = fail
    return env


if __name__ == "__main__":
    print("test NVML library:", build() / LIBRARY)
