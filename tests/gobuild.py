"""Go programs the tests build from pinned modules (each folder's go.mod): built once into the
folder's `.bin/<digest of its sources>/`, then cached; the Go build cache keeps a rebuild after
a change short. Nothing is downloaded but modules from the Go module proxy."""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess


class GoUnavailable(Exception):
    """No Go toolchain: the tests that need one skip, except where a run must have them (CI sets
DRA_BRIDGE_REQUIRE_GO=1): there it is an error, and the tests guarding DRA semantics cannot
silently drop out of a run."""


def go_command(what: str) -> str:
    go = shutil.which("go")
    if go is None:
        why = f"Go is not installed: {what} is built with the go command"
        if os.environ.get("DRA_BRIDGE_REQUIRE_GO"):
            raise RuntimeError(f"{why}, and DRA_BRIDGE_REQUIRE_GO is set: this run must build it")
        raise GoUnavailable(why)
    return go


def build(folder: pathlib.Path, sources: tuple[str, ...], packages: tuple[str, ...], what: str,
          timeout_s: int = 3600, ldflags: str = "", cache: str = ".bin",
          env: dict[str, str] | None = None, shared: str = "") -> pathlib.Path:
    """The folder holding one binary per package (named after its last path element; `shared`:
    the one package built as that shared library). Builds sharing a folder keep apart by `cache`
    (each keeps only its newest digest)."""
    go = go_command(what)
    digest = hashlib.sha256(b"".join((folder / name).read_bytes() for name in sources)
                            + ldflags.encode()).hexdigest()[:16]
    root = folder / cache
    target = root / digest
    names = [shared] if shared else [pathlib.PurePosixPath(p).name for p in packages]
    if all((target / name).exists() for name in names):
        return target
    target.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly", **(env or {})}
    flags = ["-ldflags", ldflags] if ldflags else []
    # A shared library (one package, named by `shared`): C callers load it as they would the vendor's.
    output = ["-buildmode=c-shared", "-o", str(target / shared)] if shared else ["-o", str(target) + "/"]
    result = subprocess.run([go, "build", *flags, *output, *packages], cwd=folder, env=env,
                            capture_output=True, text=True, timeout=timeout_s)
    if result.returncode != 0:
        raise RuntimeError(f"building {what} failed:\n{result.stderr[-4000:]}")
    for old in root.iterdir():
        if old != target:
            shutil.rmtree(old, ignore_errors=True)
    return target
