"""Upstream Kubernetes as a judge: the Go program in oracle/ (k8s.io/dynamic-resource-allocation,
pinned in go.mod), built on demand and cached, answering one JSON request per line."""

from __future__ import annotations

import hashlib
import os
import pathlib
import subprocess
import threading

import orjson

from tests.gobuild import GoUnavailable, go_command

HERE = pathlib.Path(__file__).resolve().parent
SOURCES = tuple(sorted(f"oracle/{p.name}" for p in (HERE / "oracle").glob("*.go")))
BIN_DIR = HERE / ".bin"
# Each release's oracle: its k8s.io modules (go.mod for the newest, go.k1XX.mod for the others,
# with their go.sum files beside them) and the build tag that picks its default feature gates.
RELEASES = {"1.37": ("go.mod", ""), "1.36": ("go.k136.mod", "k136"), "1.35": ("go.k135.mod", "k135"),
            "1.34": ("go.k134.mod", "k134")}


OracleUnavailable = GoUnavailable  # no Go toolchain: the only reason the upstream tests may skip


def go_binary() -> str:
    return go_command("the upstream oracle (tests/upstream)")


def build(release: str = "1.37") -> pathlib.Path:
    """The oracle binary of a release (its k8s.io modules and default gates) for the current
    sources; rebuilt only when they change (the Go build cache keeps even a rebuild short)."""
    modfile, tag = RELEASES[release]
    sums = modfile.removesuffix(".mod") + ".sum"
    digest = hashlib.sha256(b"".join((HERE / name).read_bytes() for name in (*SOURCES, modfile, sums))
                            ).hexdigest()[:16]
    name = f"oracle-{release}-"
    target = BIN_DIR / f"{name}{digest}"
    if target.exists():
        return target
    BIN_DIR.mkdir(exist_ok=True)
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}
    tmp = target.with_suffix(".tmp")
    result = subprocess.run([go_binary(), "build", f"-modfile={modfile}", "-tags", tag or "k137", "-o", str(tmp),
                             "./oracle"], cwd=HERE, env=env, capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"building the oracle of Kubernetes {release} failed:\n{result.stderr}")
    tmp.rename(target)
    for old in BIN_DIR.glob(f"{name}*"):
        if old != target:
            old.unlink(missing_ok=True)
    return target


class Oracle:
    """One long-lived oracle process; `ask` is one request, `ask_many` streams a batch."""

    def __init__(self, binary: pathlib.Path | None = None):
        self.process = subprocess.Popen([str(binary or build())], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE)
        self._lock = threading.Lock()

    def ask(self, request: dict) -> dict:
        return self.ask_many([request])[0]

    def ask_many(self, requests: list[dict]) -> list[dict]:
        with self._lock:
            # Written from a thread: a large batch must not fill the pipe while we wait to read.
            writer = threading.Thread(target=self._write, args=(requests,))
            writer.start()
            answers = []
            for _ in requests:
                line = self.process.stdout.readline()
                if not line:
                    raise RuntimeError(f"oracle exited: {self.process.stderr.read().decode(errors='replace')}")
                answer = orjson.loads(line)
                if isinstance(answer, dict) and "inputError" in answer:
                    raise ValueError(f"oracle refused the request: {answer['inputError']}")
                answers.append(answer)
            writer.join()
            return answers

    def _write(self, requests: list[dict]) -> None:
        for request in requests:
            self.process.stdin.write(orjson.dumps(request) + b"\n")
        self.process.stdin.flush()

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=10)

    # -- convenience ---------------------------------------------------------------------
    def cel(self, expression: str, device: dict | None = None, **options) -> dict:
        return self.ask({"op": "cel", "expression": expression, "device": device, **options})

    def allocate(self, **case) -> dict:
        return self.ask({"op": "allocate", **case})
