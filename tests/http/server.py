"""Run the real `dra-bridge serve` process on loopback over TLS for HTTP tests."""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass

import httpx

from app.certs import write_bundle
from tests.helpers import clean_env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RunningServer:
    proc: subprocess.Popen
    url: str
    ca: str
    cert_dir: str
    log_path: str

    def client(self, **kw) -> httpx.Client:
        kw.setdefault("timeout", 10)
        return httpx.Client(base_url=self.url, verify=ssl.create_default_context(cafile=self.ca), **kw)

    def wait_ready(self, client: httpx.Client, timeout_s: float = 10) -> None:
        """Until /readyz says ready (the live inventory synced), or fail."""
        deadline = time.monotonic() + timeout_s
        while client.get("/readyz").status_code != 200:
            if time.monotonic() > deadline:
                raise AssertionError(f"not ready after {timeout_s} s: {client.get('/readyz').text}")
            time.sleep(0.1)

    def log(self) -> str:
        with open(self.log_path, encoding="utf-8") as handle:
            return handle.read()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start(tmp_path, *args: str, certs: bool = True, env: dict | None = None) -> RunningServer:
    cert_dir = str(tmp_path / "certs")
    if certs:
        write_bundle(cert_dir, ["localhost", "127.0.0.1"])
    port = free_port()
    log_path = str(tmp_path / "server.log")
    # The example unless a test names one: these tests judge its devices, with a cluster or not.
    named = any(a in ("--inventory", "--demo") for a in args)
    cmd = [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(port),
           *(() if named else ("--inventory", "example")),
           "--tls-cert", f"{cert_dir}/tls.crt", "--tls-key", f"{cert_dir}/tls.key",
           "--reload-interval", "0.2", *(() if "--drain-seconds" in args else ("--drain-seconds", "0")), *args]
    env = {**clean_env(tmp_path), **(env or {})}
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    server = RunningServer(proc, f"https://localhost:{port}", f"{cert_dir}/ca.crt", cert_dir, log_path)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}:\n{server.log()}")
        try:
            with server.client() as c:
                if c.get("/healthz").status_code == 200:
                    return server
        except (httpx.HTTPError, OSError):
            time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"server did not start:\n{server.log()}")
