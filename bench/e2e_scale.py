"""The webhook against a real API server holding a large GPU cluster: 2,000 Node objects and
16,000 GPUs published as ResourceSlices (the reporter's rendering of its fake backend's 8x H100
node, NVIDIA's schema, one pool per node), in the e2e control plane.

Measures: time for `serve --inventory live` to become ready from the real API server, its RSS
once ready and after the claims, and /validate latency for ResourceClaims created by
concurrent clients (the client's create time and the API server's own histogram of our
webhook), beside the same creates into a namespace no webhook serves (the baseline, same run).

Usage: python bench/e2e_scale.py [--nodes 2000] [--claims 400] [--clients 8]
"""

import argparse
import pathlib
import ssl
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.reporter import render  # noqa: E402
from app.reporter.backends import FakeBackend  # noqa: E402
from bench.e2e_admission import buckets, histogram_quantile  # noqa: E402
from tests.e2e.burst import quantile  # noqa: E402
from tests.e2e.cluster import ControlPlane, build  # noqa: E402
from tests.e2e.conftest import Webhook, install  # noqa: E402

CLAIM_SPEC = {"devices": {
    "requests": [{"name": "gpus", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "count": 4, "selectors": [{"cel": {"expression": (
            "device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('h100') && "
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0")}}]}}],
    "constraints": [{"requests": ["gpus"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]}}


def post_all(plane: ControlPlane, path: str, objects: list[dict], clients: int) -> list[float]:
    context = ssl.create_default_context(cafile=str(plane.ca))
    headers = {"Authorization": f"Bearer {plane.admin_token}"}
    sessions = [httpx.Client(verify=context, headers=headers, timeout=60) for _ in range(clients)]

    def one(i: int) -> float:
        started = time.monotonic()
        response = sessions[i % clients].post(plane.server + path, json=objects[i])
        if response.status_code != 201:
            raise SystemExit(f"POST {path}: {response.status_code} {response.text[:300]}")
        return time.monotonic() - started

    try:
        with ThreadPoolExecutor(clients) as pool:
            return list(pool.map(one, range(len(objects))))
    finally:
        for s in sessions:
            s.close()


def rss_mb(pid: int) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=2000)
    parser.add_argument("--claims", type=int, default=400)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    binaries = build()
    gpus = FakeBackend(str(ROOT / "app" / "data" / "fake" / "h100x8.yaml")).read()
    with tempfile.TemporaryDirectory() as workdir:
        plane = ControlPlane(pathlib.Path(workdir), binaries).start()
        webhook = None
        try:
            install(plane)
            names = [f"scale-{i:05d}" for i in range(args.nodes)]
            started = time.monotonic()
            post_all(plane, "/api/v1/nodes", [{"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": n, "labels": {"kubernetes.io/hostname": n, "nvidia.com/gpu.present": "true"}}}
                for n in names], 16)
            slices = [s for n in names for s in render.slices(gpus, n, "gpu.nvidia.com", 1)]
            post_all(plane, "/apis/resource.k8s.io/v1/resourceslices", slices, 16)
            devices = sum(len(s["spec"]["devices"]) for s in slices)
            print(f"published {args.nodes} nodes, {len(slices)} ResourceSlices, {devices} GPUs in "
                  f"{time.monotonic() - started:.0f}s")
            webhook = Webhook(plane, "--log-level", "warning")
            started = time.monotonic()
            webhook.start()  # returns once /readyz says ready (the live inventory synced)
            ready_s = time.monotonic() - started
            print(f"serve --inventory live: ready in {ready_s:.1f}s (process start, lists, index), "
                  f"RSS {rss_mb(webhook.process.pid):.0f} MB")
            plane.apply(webhook.configurations())
            plane.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "scale-plain"}}])
            time.sleep(2)  # configurations in force
            claim = lambda i, ns: {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",  # noqa: E731
                                   "metadata": {"name": f"claim-{i}", "namespace": ns}, "spec": CLAIM_SPEC}
            before = plane.get("/metrics")
            results = {}
            for ns in ("scale-plain", "team-a", "scale-plain", "team-a"):  # interleaved
                path = f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
                offset = len(results.get(ns, []))
                results.setdefault(ns, []).extend(post_all(
                    plane, path, [claim(offset + i, ns) for i in range(args.claims // 2)], args.clients))
            after = plane.get("/metrics")
            for ns, label in (("scale-plain", "no webhook"), ("team-a", "dra-bridge /validate")):
                latencies = results[ns]
                print(f"claims, {label}: {len(latencies)} from {args.clients} clients, create median "
                      f"{quantile(latencies, 0.5) * 1000:.1f} ms, p99 {quantile(latencies, 0.99) * 1000:.1f} ms")
            b, a = buckets(before, "validate.dra-bridge.io", "validating"), buckets(after, "validate.dra-bridge.io",
                                                                                   "validating")
            print(f"API server's histogram of validate.dra-bridge.io: median {histogram_quantile(0.5, b, a) * 1000:.1f} "
                  f"ms, p99 {histogram_quantile(0.99, b, a) * 1000:.1f} ms")
            print(f"webhook RSS after the claims: {rss_mb(webhook.process.pid):.0f} MB")
        finally:
            if webhook:
                webhook.stop()
            plane.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
