"""Load: concurrent clients on /mutate and /validate over TLS, next to the echo floor, same run.

Fixed request count per endpoint, closed loop with `hey` (C concurrent connections). Reports
throughput, p50/p99, errors, and the server's RSS before and after (growth across the run).
Usage: python bench/load.py [--requests 100000] [--concurrency 16]
       python bench/load.py --idle 2000   (the shipped server: RSS with N idle TLS connections,
                                           and how long until its read deadline closes them)
"""

import argparse
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import orjson

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._server import running  # noqa: E402
from bench.mutate import review  # noqa: E402

CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c", "namespace": "ml"},
         "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
             "deviceClassName": "gpu.nvidia.com", "count": 2, "selectors": [{"cel": {"expression":
                 "device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('h100')"}}]}}]}}}


def validate_review() -> bytes:
    return orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "load", "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
        "operation": "CREATE", "namespace": "ml", "object": CLAIM}})


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def hey(url: str, body: bytes, requests: int, concurrency: int):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as handle:
        handle.write(body)
    started = time.perf_counter()
    out = subprocess.run(["hey", "-n", str(requests), "-c", str(concurrency), "-m", "POST", "-T", "application/json",
                          "-D", handle.name, "-o", "csv", url], capture_output=True, text=True, check=True).stdout
    elapsed = time.perf_counter() - started
    latencies, errors = [], 0
    for line in out.splitlines()[1:]:
        fields = line.split(",")
        latencies.append(float(fields[0]))
        errors += fields[6] != "200"
    return latencies, errors, elapsed


def idle_connections(count: int, read_timeout: float) -> None:
    import resource
    import socket
    import ssl

    from tests.http import server as srv
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, count + 256)), hard))
    server = srv.start(pathlib.Path(tempfile.mkdtemp()), "--read-timeout", str(read_timeout))
    try:
        host, port = server.url.split("//")[1].split(":")
        context = ssl.create_default_context(cafile=server.ca)
        before = rss_mb(server.proc.pid)
        opened = []
        started = time.monotonic()
        for _ in range(count):
            raw = socket.create_connection((host, int(port)), timeout=10)
            opened.append(context.wrap_socket(raw, server_hostname="127.0.0.1"))  # handshake done, then silence
        took = time.monotonic() - started
        time.sleep(0.5)
        held = rss_mb(server.proc.pid)
        print(f"{count} idle TLS connections (opened in {took:.1f} s): server RSS {before:.0f} MB -> {held:.0f} MB "
              f"({(held - before) * 1024 / count:.0f} KiB each)")
        for conn in opened:
            conn.settimeout(read_timeout + 10)
        deadline = time.monotonic() + read_timeout + 10
        closed = 0
        for conn in opened:
            try:
                closed += conn.recv(1) == b""
            except (OSError, ssl.SSLError):
                closed += 1
            if time.monotonic() > deadline:
                break
        waited = time.monotonic() - started - took
        print(f"closed by the server's read deadline ({read_timeout:g} s): {closed}/{count} after {waited:.1f} s; "
              f"server RSS then {rss_mb(server.proc.pid):.0f} MB")
        for conn in opened:
            conn.close()
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--idle", type=int, default=0, help="measure N idle TLS connections instead")
    parser.add_argument("--read-timeout", type=float, default=10.0)
    args = parser.parse_args()
    if args.idle:
        idle_connections(args.idle, args.read_timeout)
        return
    if shutil.which("hey") is None:
        sys.exit("bench/load.py needs `hey` (apt-get install hey)")
    with running() as (url, _ca, proc):
        bodies = {"/echo": review(0), "/mutate": review(0), "/validate": validate_review()}
        for path, body in bodies.items():  # warm up
            hey(url + path, body, 2000, args.concurrency)
        before = rss_mb(proc.pid)
        print(f"{args.requests} requests per endpoint, {args.concurrency} concurrent TLS keep-alive clients (hey), "
              f"one uvicorn worker, 2-core machine shared with the load generator")
        for path, body in bodies.items():
            latencies, errors, elapsed = hey(url + path, body, args.requests, args.concurrency)
            ordered = sorted(latencies)
            print(f"{path:9s} {len(latencies) / elapsed:7.0f} req/s  p50 {statistics.median(ordered) * 1e3:6.2f} ms  "
                  f"p99 {ordered[int(len(ordered) * 0.99) - 1] * 1e3:6.2f} ms  errors {errors}  "
                  f"server RSS {rss_mb(proc.pid):.0f} MB")
        after = rss_mb(proc.pid)
        print(f"server RSS before {before:.0f} MB, after {after:.0f} MB ({after - before:+.1f} MB across "
              f"{2 * args.requests} mutate+validate requests)")


if __name__ == "__main__":
    main()
