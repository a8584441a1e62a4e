"""Admission latency of our webhooks as the API server measures it, on a real control plane.

Starts the e2e control plane (tests/e2e: kube-apiserver, controller-manager, scheduler, etcd
from upstream Kubernetes), installs dra-bridge as the e2e tests do, creates N legacy GPU pods,
and reads `apiserver_admission_webhook_admission_duration_seconds` from the API server: median
and p99 per webhook (histogram quantiles, interpolated in buckets as Prometheus does), with
the same pods' total create time. Usage: python bench/e2e_admission.py [--pods 200]
"""

import argparse
import json
import pathlib
import re
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.cluster import ControlPlane, build  # noqa: E402
from tests.e2e.conftest import Webhook, install  # noqa: E402

METRIC = "apiserver_admission_webhook_admission_duration_seconds"
BUCKET = re.compile(METRIC + r'_bucket\{(?P<labels>[^}]*)\} (?P<value>\S+)')


def buckets(metrics: str, webhook: str, step: str) -> list[tuple[float, float]]:
    """Cumulative (upper bound, count) of one webhook's histogram (type admit | validating), summed
    over the other labels."""
    totals: dict[float, float] = {}
    for match in BUCKET.finditer(metrics):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
        if labels.get("name") != webhook or labels.get("type") != step:
            continue
        bound = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
        totals[bound] = totals.get(bound, 0.0) + float(match["value"])
    return sorted(totals.items())


def quantile(q: float, before: list, after: list) -> float:
    """histogram_quantile over the increase between two scrapes."""
    base = dict(before)
    increase = [(bound, count - base.get(bound, 0.0)) for bound, count in after]
    total = increase[-1][1] if increase else 0
    if total <= 0:
        return float("nan")
    rank, previous_bound, previous_count = q * total, 0.0, 0.0
    for bound, count in increase:
        if count >= rank:
            if bound == float("inf"):
                return previous_bound
            share = (rank - previous_count) / max(count - previous_count, 1e-9)
            return previous_bound + (bound - previous_bound) * share
        previous_bound, previous_count = bound, count
    return previous_bound


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=200)
    args = parser.parse_args()
    started = time.perf_counter()
    binaries = build()
    print(f"control plane binaries ready in {time.perf_counter() - started:.0f}s: {binaries}")
    with tempfile.TemporaryDirectory() as workdir:
        plane = ControlPlane(pathlib.Path(workdir), binaries).start()
        webhook = None
        try:
            install(plane)
            webhook = Webhook(plane).start()
            plane.apply(webhook.configurations())
            before = plane.get("/metrics")
            pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"burst-{i}"},
                     "spec": {"containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04",
                                              "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
                    for i in range(args.pods)]
            t0 = time.perf_counter()
            plane.kubectl("create", "-n", "team-a", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                                  "items": pods}), timeout=600)
            elapsed = time.perf_counter() - t0
            after = plane.get("/metrics")
            print(f"{args.pods} legacy GPU pods created in {elapsed:.1f}s ({args.pods / elapsed:.0f} pods/s, "
                  "kubectl create, one request per pod)")
            for name, step in (("mutate.dra-bridge.io", "admit"), ("validate.dra-bridge.io", "validating")):
                b, a = buckets(before, name, step), buckets(after, name, step)
                count = (a[-1][1] - dict(b).get(a[-1][0], 0.0)) if a else 0
                print(f"{name}: {count:.0f} admissions, median {quantile(0.5, b, a) * 1000:.1f} ms, "
                      f"p99 {quantile(0.99, b, a) * 1000:.1f} ms (API server's histogram)")
        finally:
            if webhook:
                webhook.stop()
            plane.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
