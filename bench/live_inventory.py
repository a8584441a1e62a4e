"""Live inventory at scale: the webhook's watch and index against a fake API server serving
100,000 devices on 12,500 nodes with 12,500 claims (bench/validate.py's heterogeneous cluster).

A child process runs the real LiveInventory (list + watch over HTTP, incremental index) and
reports: time to ready, RSS and its peak in each phase (the kernel's high-water mark), the
latency of one slice change and one claim change, from the write to the API until a review
would see it, and of a Node label change (a full build taking the unchanged slices' devices);
against the baseline of a full build of the same objects taking nothing, in the same run.

    .venv/bin/python bench/live_inventory.py [--nodes 12500] [--updates 30] [--serve]

--serve first runs the whole webhook (`serve --inventory live`) against the same objects and
reports its peak RSS through the same kinds of rebuilds.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.validate import allocation_results, heterogeneous, peak_rss_mb, percentile, rss_mb  # noqa: E402
from tests.kube.fakeapi import FakeKube  # noqa: E402


def claims_for(allocated: set, capacity: dict, shared: set) -> list[dict]:
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"claim-{pool}", "namespace": "default"},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
             "status": {"allocation": {"devices": {"results": results}}}}
            for pool, results in allocation_results(allocated, capacity, shared).items()]


def child(url: str, updates: int) -> None:
    import urllib.request

    import orjson

    from app import dra
    from app.common import unpack
    from app.kube import LiveInventory, api_client_for_host

    def put(path: str, obj: dict) -> None:
        request = urllib.request.Request(f"{url}{path}/{obj['metadata']['name']}", data=orjson.dumps(obj),
                                         method="PUT", headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request).read()

    start_rss = rss_mb()
    peak_rss_mb(reset=True)
    started = time.perf_counter()
    live = LiveInventory(api_client_for_host(url), dra.LiveIndex, rebuild_interval_s=0).start()
    live.wait_synced(600)
    index = live.index()
    ready_s = time.perf_counter() - started
    out = {"devices": index.device_count, "nodes": len(index.views), "groups": len(index.node_groups),
           "ready_s": ready_s, "rss_start_mb": start_rss, "rss_ready_mb": rss_mb(),
           "peak_start_mb": peak_rss_mb(reset=True)}

    with live._lock:
        raw_slices = list(live.objects["resourceslices"].items())
        raw_claims = list(live.objects["resourceclaims"].items())
    timings: dict[str, tuple[list, list]] = {"resourceslices": ([], []), "resourceclaims": ([], [])}

    def timed_write(path: str, obj: dict, resource: str | None = None) -> float:
        """Write through the API; wait until the index a review reads has taken it."""
        before = live.builds
        t = time.perf_counter()
        put(path, obj)
        while live.builds == before:
            time.sleep(0.001)
        if resource:
            timings[resource][0].append(time.perf_counter() - t)
            timings[resource][1].append(live.last_build_s)
        return live.last_build_s

    for i in range(updates):
        obj = unpack(raw_slices[(i * 997) % len(raw_slices)][1])
        for device in obj["spec"].get("devices") or []:
            device.setdefault("attributes", {})["bench"] = {"int": i}  # a reporter's republish
        timed_write("/apis/resource.k8s.io/v1/resourceslices", obj, "resourceslices")
        claim = unpack(raw_claims[(i * 613) % len(raw_claims)][1])
        results = claim["status"]["allocation"]["devices"]["results"]
        claim["status"]["allocation"]["devices"]["results"] = results[:-1] if len(results) > 1 else results
        timed_write("/apis/resource.k8s.io/v1/resourceclaims", claim, "resourceclaims")
    (slice_latency, slice_apply), (claim_latency, claim_apply) = timings["resourceslices"], timings["resourceclaims"]
    out["full_builds_during_updates"] = live.full_builds - 1
    out["rss_after_updates_mb"] = rss_mb()
    out["peak_updates_mb"] = peak_rss_mb(reset=True)
    # A Node's labels change (a rollout's flip, GFD): a full build while reviews read the old index.
    builds = live.full_builds
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-00042", "labels": {"bench": "flipped"}}}
    t = time.perf_counter()
    put("/api/v1/nodes", node)
    while live.full_builds == builds or live._build_lock.locked():
        time.sleep(0.001)
    out["label_visible_s"], out["label_build_s"] = time.perf_counter() - t, live.last_build_s
    out["label_full_builds"] = live.full_builds - builds
    out["peak_label_mb"] = peak_rss_mb(reset=True)
    # An admin taints every device (DeviceTaintRule, selector {}): every slice derived again.
    builds = live.full_builds
    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "bench-drain"},
            "spec": {"deviceSelector": {}, "taint": {"key": "bench/drain", "effect": "NoSchedule"}}}
    t = time.perf_counter()
    put("/apis/resource.k8s.io/v1/devicetaintrules", rule)
    while live.full_builds == builds or live._build_lock.locked():
        time.sleep(0.001)
    out["rule_visible_s"] = time.perf_counter() - t
    out["peak_rule_mb"] = peak_rss_mb(reset=True)
    # The baseline and the worst case: a full build with nothing to take from the index before
    # (what every full build was before slices were reused), the old index still held by readers.
    with live._build_lock:
        live._live = None
        t = time.perf_counter()
        live._rebuild()
        out["full_build_s"] = time.perf_counter() - t
    out["peak_cold_mb"] = peak_rss_mb(reset=True)
    for name, values in (("slice_latency", slice_latency), ("slice_apply", slice_apply),
                         ("claim_latency", claim_latency), ("claim_apply", claim_apply)):
        out[name] = {"median_ms": statistics.median(values) * 1e3, "p99_ms": percentile(values, 0.99) * 1e3}
    live.stop()
    print(json.dumps(out))


def serve_phase(fake: FakeKube, workdir: pathlib.Path) -> None:
    """The whole webhook (`serve --inventory live`) against the same objects: its peak RSS when
    ready, through a Node label change and through a DeviceTaintRule on every device (seen when
    a claim's verdict changes), and answering /validate."""
    import orjson

    from tests.helpers import review
    from tests.http import server as srv

    def write(path: str, obj: dict) -> None:
        request = urllib.request.Request(f"{fake.url}{path}/{obj['metadata']['name']}", data=orjson.dumps(obj),
                                         method="PUT", headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request).read()

    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
             "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}
    body = orjson.dumps(review(claim, kind="ResourceClaim", namespace="default"))
    started = time.perf_counter()
    server = srv.start(workdir, "--inventory", "live", "--kubeconfig", fake.kubeconfig(workdir / "kc"),
                       "--log-level", "warning")
    try:
        with server.client() as client:
            server.wait_ready(client, 600)
            ready_s = time.perf_counter() - started
            verdict = client.post("/validate", content=body, timeout=60).json()["response"]
            ready = peak_rss_mb(reset=True, pid=server.proc.pid)
            write("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                    "metadata": {"name": "node-00043", "labels": {"bench": "flipped"}}})
            time.sleep(8)  # a full build at this size takes about a second
            label = peak_rss_mb(reset=True, pid=server.proc.pid)
            rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                    "metadata": {"name": "bench-drain"},
                    "spec": {"deviceSelector": {}, "taint": {"key": "bench/drain", "effect": "NoSchedule"}}}
            original = orjson.loads(orjson.dumps(rule))
            original["spec"]["deviceSelector"] = {"driver": "none.example.com"}
            write("/apis/resource.k8s.io/v1/devicetaintrules", rule)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                tainted = client.post("/validate", content=body, timeout=60).json()["response"]
                if tainted.get("warnings") != verdict.get("warnings"):
                    break
                time.sleep(0.5)
            else:
                raise SystemExit("serve never saw the DeviceTaintRule on every device")
            tainted_peak = peak_rss_mb(reset=True, pid=server.proc.pid)
            write("/apis/resource.k8s.io/v1/devicetaintrules", original)  # as the child phase expects
            time.sleep(5)
    finally:
        server.stop()
    print(f"serve --inventory live (the whole webhook): ready in {ready_s:.1f} s; peak RSS to ready "
          f"{ready:.0f} MB; through a Node label change {label:.0f} MB; through a DeviceTaintRule on every "
          f"device {tainted_peak:.0f} MB (its /validate verdict changed: "
          f"{(tainted.get('warnings') or ['none'])[0][:90]!r})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=12_500)
    parser.add_argument("--updates", type=int, default=30)
    parser.add_argument("--serve", action="store_true", help="also run the whole webhook against the objects")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.updates)
        return
    inv, allocated, capacity, shared = heterogeneous(args.nodes)
    fake = FakeKube()
    for s in inv.slices:
        fake.add_cluster_object("resourceslices", s)
    for c in inv.classes.values():
        fake.add_cluster_object("deviceclasses", c)
    for claim in claims_for(allocated, capacity, shared):
        fake.add_cluster_object("resourceclaims", claim)
    for name, labels in (inv.nodes or {}).items():
        fake.add_cluster_object("nodes", {"apiVersion": "v1", "kind": "Node",
                                          "metadata": {"name": name, "labels": labels}})
    fake.add_cluster_object("devicetaintrules", {  # selects nothing yet; the bench widens it
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "bench-drain"},
        "spec": {"deviceSelector": {"driver": "none.example.com"}, "taint": {"key": "bench/drain", "effect": "NoSchedule"}}})
    fake.events.clear()  # watches start from the list: no history to scan
    fake.start()
    try:
        if args.serve:
            with tempfile.TemporaryDirectory() as workdir:
                serve_phase(fake, pathlib.Path(workdir))
        result = subprocess.run([sys.executable, __file__, "--child", fake.url, "--updates", str(args.updates)],
                                stdout=subprocess.PIPE, text=True, check=True)
    finally:
        fake.stop()
    r = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"live inventory: {r['devices']} devices, {r['nodes']} nodes, {r['groups']} node groups "
          f"(fake API server, list + watch over HTTP)")
    print(f"time to ready {r['ready_s']:.1f} s; RSS start {r['rss_start_mb']:.0f} MB, ready {r['rss_ready_mb']:.0f} MB, "
          f"after {args.updates} updates {r['rss_after_updates_mb']:.0f} MB")
    print(f"peak RSS (the kernel's high-water mark, per phase): start to ready {r['peak_start_mb']:.0f} MB; "
          f"updates {r['peak_updates_mb']:.0f} MB; full build after a Node label change "
          f"{r['peak_label_mb']:.0f} MB (built in {r['label_build_s'] * 1e3:.0f} ms, visible {r['label_visible_s'] * 1e3:.0f} ms "
          f"after the write; {r['label_full_builds']} full build); "
          f"a DeviceTaintRule on every device (all derived again) {r['peak_rule_mb']:.0f} MB "
          f"(visible {r['rule_visible_s'] * 1e3:.0f} ms after the write); "
          f"full build taking nothing from the index before {r['peak_cold_mb']:.0f} MB")
    for what in ("slice", "claim"):
        latency, apply = r[f"{what}_latency"], r[f"{what}_apply"]
        print(f"one {what} change: applied in median {apply['median_ms']:.1f} ms (p99 {apply['p99_ms']:.1f} ms); "
              f"write -> visible median {latency['median_ms']:.1f} ms (p99 {latency['p99_ms']:.1f} ms, "
              f"incl. the fake server's 20 ms watch poll)")
    print(f"baseline, full build of the same objects taking nothing: {r['full_build_s'] * 1e3:.0f} ms -> one slice change "
          f"{r['full_build_s'] * 1e3 / max(r['slice_apply']['median_ms'], 1e-3):.0f}x faster; full builds during "
          f"the updates: {r['full_builds_during_updates']}")


if __name__ == "__main__":
    main()
