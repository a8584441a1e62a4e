"""What dra-bridge costs pod creation on a real control plane, side by side with no webhook and
a minimal FastAPI/uvicorn webhook (allow, no patch), while the scheduler allocates every claim.

Starts the e2e control plane (tests/e2e: kube-apiserver, controller-manager, scheduler, etcd from
upstream Kubernetes), installs dra-bridge as the e2e tests do, and the minimal webhook beside it
with the same mutating and validating configurations. Three namespaces differ only in which
webhooks see them. `--gpu-nodes` DRA nodes (8 H100 each, published as NVIDIA's driver does) and as
many device-plugin nodes (8 nvidia.com/gpu each) take every pod: the scheduler binds each one
and allocates each rewritten pod's claim as pods arrive, so dra-bridge's inventory changes with
every pod, as in a busy brownfield cluster. For each client count, rounds of `--pods` legacy GPU
pods (one shape, its template already created) are created by that many keep-alive clients into
each namespace in turn, the order rotating each round so noise falls on all alike; pods are
deleted after each phase. Prints each phase's median and p99 create latency and throughput, the
latency each webhook adds over no webhook (medians), the ratios dra-bridge / minimal webhook,
the claims the scheduler allocated, and the API server's own histogram of each webhook's time.

Usage: python bench/e2e_admission.py [--pods 64] [--rounds 3] [--clients 1,8,16] [--gpu-nodes 16]
"""

import argparse
import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time
import urllib.parse

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.reporter import node_from_description, render  # noqa: E402
from app import certs  # noqa: E402
from tests.e2e.burst import create_pods, quantile  # noqa: E402
from tests.e2e.cluster import ControlPlane, build, free_port  # noqa: E402
from tests.e2e.conftest import Webhook, install, wait_for  # noqa: E402

METRIC = "apiserver_admission_webhook_admission_duration_seconds"
BUCKET = re.compile(METRIC + r'_bucket\{(?P<labels>[^}]*)\} (?P<value>\S+)')
PHASES = {"none": {}, "minimal": {"bench.dra-bridge.io/echo": "on"}, "dra-bridge": {"dra-bridge.io/migrate": "enabled"}}
ECHO = "echo.bench.dra-bridge.io"


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


def histogram_quantile(q: float, before: list, after: list) -> float:
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


def legacy_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"bench": "admission"}},
            "spec": {"containers": [{"name": "cuda", "image": "nvcr.io/nvidia/cuda:12.5.0-base-ubuntu22.04",
                                     "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}


def echo_configurations(ours: list[dict], base: str, ca_bundle: str) -> list[dict]:
    """Our pod webhooks' configurations (rules, matchConditions, timeouts), pointed at the
    minimal webhook and at its namespace only: the API server does the same work for both."""
    out = []
    for configuration in ours:
        hooks = [{**hook, "name": f"{hook['name'].split('.')[0]}.{ECHO}",
                  "clientConfig": {"url": base + urllib.parse.urlsplit(hook["clientConfig"]["url"]).path,
                                   "caBundle": ca_bundle},
                  "namespaceSelector": {"matchLabels": {"bench.dra-bridge.io/echo": "on"}}}
                 for hook in configuration["webhooks"] if hook["name"] in ("mutate.dra-bridge.io", "validate.dra-bridge.io")]
        if hooks:
            out.append({**configuration, "metadata": {"name": f"bench-echo-{configuration['kind'].lower()}"},
                        "webhooks": hooks})
    return out


def gpu_nodes(plane: ControlPlane, count: int) -> None:
    """`count` DRA nodes with 8 H100 each (slices as NVIDIA's driver publishes them) and `count`
    device-plugin nodes with 8 nvidia.com/gpu each: room for every pod of a phase on both sides."""
    description = node_from_description(yaml.safe_load((ROOT / "app/data/fake/h100x8.yaml").read_text()), "h100")
    names = [f"bench-dra-{i}" for i in range(count)] + [f"bench-plugin-{i}" for i in range(count)]
    plane.apply([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}}}
                 for n in names])
    for n in names:
        gpus = {"nvidia.com/gpu": "8"} if "plugin" in n else {}
        resources = {"cpu": "64", "memory": "512Gi", "pods": "110", **gpus}
        plane.kubectl("patch", "node", n, "--subresource=status", "--type=merge", "-p", json.dumps({"status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "bench"}]}}))
    plane.apply([s for n in names if "dra" in n for s in render.slices(description, n, "gpu.nvidia.com", 1)])


def fast_path(webhook: Webhook) -> dict[str, float]:
    return {m[0]: float(m[1]) for m in re.findall(r'^dra_bridge_fast_path_total\{result="(\w+)"\} (\S+)$',
                                                   webhook.get("/metrics")[1], re.M)}


def allocated_claims(plane: ControlPlane, namespace: str, tag: str) -> int:
    """Allocated claims of this phase's pods (their owners), not of an earlier phase being deleted."""
    claims = plane.json("resourceclaims", "-n", namespace).get("items", [])
    return sum(1 for c in claims if (c.get("status") or {}).get("allocation") and any(
        o.get("name", "").startswith(f"{tag}-") for o in c["metadata"].get("ownerReferences") or []))


def echo_server(plane: ControlPlane) -> tuple[subprocess.Popen, str, str]:
    bundle = certs.write_bundle(str(plane.dir / "echo-pki"), ["localhost", "127.0.0.1"])
    port = free_port()
    process = subprocess.Popen([sys.executable, str(ROOT / "bench" / "_echo_webhook.py"), str(port), bundle.cert,
                                bundle.key], cwd=ROOT)
    return process, f"https://127.0.0.1:{port}", plane.ca_bundle(pathlib.Path(bundle.ca_cert))


def run_phase(plane: ControlPlane, namespace: str, clients: int, pods: int, tag: str):
    burst = create_pods(plane, namespace, [legacy_pod(f"{tag}-{i}") for i in range(pods)], clients)
    bad = [c for c in burst.created if c.status != 201]
    if bad:
        raise SystemExit(f"{namespace}: {len(bad)} creates failed: {bad[0].pod}")
    if namespace == "bench-dra-bridge":
        unmigrated = [c for c in burst.created if not c.pod["spec"].get("resourceClaims")]
        if unmigrated:
            raise SystemExit(f"{len(unmigrated)} pods admitted unmigrated: {unmigrated[0].warnings}")
        burst.allocated = allocated_claims(plane, namespace, tag)  # by the scheduler, while the pods came
        wait_for(lambda: allocated_claims(plane, namespace, tag) >= pods, 120, "every claim allocated", 0.2)
    plane.kubectl("delete", "pods", "-l", "bench=admission", "-n", namespace, "--grace-period=0", "--force",
                  "--wait=false")
    return burst


def _without_our_validation(configurations: list[dict], namespaces: list[str]) -> None:
    """The baselines' namespaces left out of our validating webhook as an admin does: by name."""
    for hook in (h for c in configurations for h in c["webhooks"] if h["name"] == "validate.dra-bridge.io"):
        for expression in hook["namespaceSelector"]["matchExpressions"]:
            if expression["key"] == "kubernetes.io/metadata.name" and expression["operator"] == "NotIn":
                expression["values"] += namespaces


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=64, help="pods per phase")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--clients", default="1,8,16", help="client counts, comma-separated")
    parser.add_argument("--gpu-nodes", type=int, default=16, help="DRA nodes, and as many device-plugin nodes")
    args = parser.parse_args()
    levels = [int(c) for c in args.clients.split(",")]
    started = time.perf_counter()
    binaries = build()
    print(f"control plane binaries ready in {time.perf_counter() - started:.0f}s")
    with tempfile.TemporaryDirectory() as workdir:
        plane = ControlPlane(pathlib.Path(workdir), binaries).start()
        webhook = echo = None
        try:
            install(plane)
            gpu_nodes(plane, args.gpu_nodes)
            webhook = Webhook(plane, "--log-level", "info").start()  # as deployed: no collection every second
            ours = webhook.configurations()
            _without_our_validation(ours, ["bench-none", "bench-minimal"])
            echo, echo_url, echo_ca = echo_server(plane)
            plane.apply(ours + echo_configurations(ours, echo_url, echo_ca))
            plane.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"bench-{p}", "labels": labels}}
                         for p, labels in PHASES.items()])
            # Polled: the service account controller creates it a moment after the namespace.
            wait_for(lambda: plane.kubectl("get", "serviceaccount", "default", "-n", "bench-dra-bridge",
                                           check=False).returncode == 0, 60, "service account")
            for phase in PHASES:  # warm-up: connections, the template, the plan cache; not measured
                run_phase(plane, f"bench-{phase}", 4, 16, f"warm-{phase}")
            before = plane.get("/metrics")
            fast_before = fast_path(webhook)
            results: dict[tuple[int, str], list] = {}
            names = list(PHASES)
            for clients in levels:
                for r in range(args.rounds):
                    for phase in names[r % 3:] + names[:r % 3]:
                        burst = run_phase(plane, f"bench-{phase}", clients, args.pods, f"c{clients}-r{r}")
                        results.setdefault((clients, phase), []).append(burst)
            after = plane.get("/metrics")
            report(results, levels, args)
            mutated = sum(len(b.created) for (_c, phase), bursts in results.items() if phase == "dra-bridge"
                          for b in bursts)
            counts = {k: v - fast_before.get(k, 0) for k, v in fast_path(webhook).items()}
            print(f"dra-bridge /mutate of {mutated} pods: {counts.get('reused', 0):.0f} answered from an earlier "
                  f"replica's decision (the fast path); decided in a worker: "
                  f"{ {k: int(v) for k, v in counts.items() if k != 'reused' and v} }")
            for name, step in ((f"mutate.{ECHO}", "admit"), (f"validate.{ECHO}", "validating"),
                               ("mutate.dra-bridge.io", "admit"), ("validate.dra-bridge.io", "validating")):
                b, a = buckets(before, name, step), buckets(after, name, step)
                count = (a[-1][1] - dict(b).get(a[-1][0], 0.0)) if a else 0
                print(f"API server's histogram, {name}: {count:.0f} calls, median "
                      f"{histogram_quantile(0.5, b, a) * 1000:.1f} ms, p99 {histogram_quantile(0.99, b, a) * 1000:.1f} ms")
        finally:
            if echo:
                echo.terminate()
            if webhook:
                webhook.stop()
            plane.stop()
    return 0


def report(results: dict, levels: list[int], args) -> None:
    print(f"\n{args.pods} pods a phase, {args.rounds} rounds, phases interleaved; latency = client's create time")
    allocated = [b.allocated for (_c, phase), bursts in results.items() if phase == "dra-bridge"
                 for b in bursts]
    print(f"claims the scheduler had allocated when each dra-bridge phase ended: {sorted(allocated)} "
          f"(each phase then waited, untimed, until all {args.pods} were)")
    print(f"{'clients':>7} {'webhook':12} {'median ms':>10} {'p99 ms':>8} {'pods/s':>8}")
    for clients in levels:
        summary = {}
        for phase in PHASES:
            bursts = results[(clients, phase)]
            latencies = [x for b in bursts for x in b.latencies]
            per_second = sorted(b.per_second for b in bursts)[len(bursts) // 2]
            summary[phase] = (quantile(latencies, 0.5), quantile(latencies, 0.99), per_second)
            print(f"{clients:>7} {phase:12} {summary[phase][0] * 1000:>10.1f} {summary[phase][1] * 1000:>8.1f} "
                  f"{per_second:>8.1f}")
        added = {p: (summary[p][0] - summary["none"][0]) * 1000 for p in ("minimal", "dra-bridge")}
        ratio = added["dra-bridge"] / added["minimal"] if added["minimal"] > 0 else float("nan")
        print(f"{clients:>7} added median: minimal {added['minimal']:.1f} ms, dra-bridge {added['dra-bridge']:.1f} ms "
              f"(x{ratio:.2f}); throughput vs none: minimal {summary['minimal'][2] / summary['none'][2]:.2f}x, "
              f"dra-bridge {summary['dra-bridge'][2] / summary['none'][2]:.2f}x; dra-bridge / minimal "
              f"{summary['dra-bridge'][2] / summary['minimal'][2]:.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
