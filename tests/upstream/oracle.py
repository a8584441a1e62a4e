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
SOURCES = ("go.mod", "go.sum", "oracle/main.go")
BIN_DIR = HERE / ".bin"


OracleUnavailable = GoUnavailable  # no Go toolchain: the only reason the upstream tests may skip


def go_binary() -> str:
    return go_command("the upstream oracle (tests/upstream)")


def build() -> pathlib.Path:
    """The oracle binary for the current sources; rebuilt only when they change (the Go build
    cache keeps even a rebuild short)."""
    digest = hashlib.sha256(b"".join((HERE / name).read_bytes() for name in SOURCES)).hexdigest()[:16]
    target = BIN_DIR / f"oracle-{digest}"
    if target.exists():
        return target
    BIN_DIR.mkdir(exist_ok=True)
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"}
    tmp = target.with_suffix(".tmp")
    result = subprocess.run([go_binary(), "build", "-o", str(tmp), "./oracle"], cwd=HERE, env=env,
                            capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        raise RuntimeError(f"building the oracle failed:\n{result.stderr}")
    tmp.rename(target)
    for old in BIN_DIR.glob("oracle-*"):
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
