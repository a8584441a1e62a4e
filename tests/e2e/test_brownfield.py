"""Issue 23: a cluster moving off the device plugin node by node, on a control plane of its own.

(a) every GPU node on the device plugin (the harness writes what the plugin would advertise into
    Node status.allocatable), our reporter shadowing them, NVIDIA's DeviceClasses installed and
    its kubelet plugin on no node yet; (b) half the nodes flipped to DRA (allocatable removed,
    slices published as NVIDIA's driver would), their pods deleted as a drain would; (c) all
    nodes DRA, after the admin added the quota key `dra-bridge audit` named.

Checked in every phase: every pod that was bound is bound again; no pod waits while a node could
serve it; a GPU quota's `used` never falls below the GPUs its pods hold; no share costs a whole
GPU (shares stay on the device plugin until devices that allow multiple allocations serve them).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.e2e.cluster import ControlPlane
from tests.e2e.conftest import (INSTALLED_KINDS, NVIDIA_CLASSES, Webhook, rendered_manifests, reporter_kubeconfig,
                                requires_kube, wait_for)

pytestmark = pytest.mark.timeout(900)
NODES = ("bf-0", "bf-1", "bf-2", "bf-3")
FIRST_WAVE, SECOND_WAVE = ("bf-0", "bf-1"), ("bf-2", "bf-3")
PRODUCT = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
TIME_SLICED = {"nvidia.com/gpu.sharing-strategy": "time-slicing", "nvidia.com/gpu.replicas": "4"}
# What the device plugin advertises on each node (HAMi's plugin adds its memory and cores on bf-2;
# bf-3 is time-sliced with renamed resources, as the plugin's renameByDefault does).
PLUGIN = {"bf-0": {"nvidia.com/gpu": "8"}, "bf-1": {"nvidia.com/gpu": "8"},
          "bf-2": {"nvidia.com/gpu": "8", "nvidia.com/gpumem": "655360", "nvidia.com/gpucores": "800"},
          "bf-3": {"nvidia.com/gpu.shared": "32"}}
SHAREABLE = {"bf-3"}  # once on DRA: devices that allow multiple allocations (consumable capacity)
MIGRATE = {"dra-bridge.io/migrate": "enabled"}
QUOTA_KEY = "gpu.nvidia.com.deviceclass.resource.k8s.io/devices"


def deployment(name, namespace, replicas, limits):
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "main", "image": "cuda", "resources": {"limits": limits}}]}}}}


WORKLOADS = [
    deployment("infer", "brown", 2, {"nvidia.com/gpu": "1"}),
    deployment("ts", "brown", 3, {"nvidia.com/gpu.shared": "1"}),
    deployment("hami", "brown", 1, {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "4000"}),
    deployment("q", "quota-ns", 2, {"nvidia.com/gpu": "1"}),
    {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "brown"},
     "spec": {"backoffLimit": 20, "template": {"metadata": {"labels": {"app": "train"}}, "spec": {
         "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
         "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}},
]
EXPECTED = {("brown", "infer"): 2, ("brown", "ts"): 3, ("brown", "hami"): 1, ("quota-ns", "q"): 2,
            ("brown", "train"): 1}
SHARES = {"ts", "hami"}


@pytest.fixture(scope="module")
def brown(binaries, tmp_path_factory):
    plane = ControlPlane(tmp_path_factory.mktemp("brownfield"), binaries).start()
    webhook = None
    try:
        plane.apply([d for d in rendered_manifests(plane) if d["kind"] in INSTALLED_KINDS])
        plane.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": MIGRATE}}
                     for n in ("brown", "quota-ns")])
        plane.apply([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {
            "kubernetes.io/hostname": n, **PRODUCT, **(TIME_SLICED if n == "bf-3" else {})}}} for n in NODES])
        for node in NODES:
            set_allocatable(plane, node, PLUGIN[node])
            assert report(plane, node, "shadow").returncode == 0
        plane.apply(NVIDIA_CLASSES)  # NVIDIA's driver chart installed; its kubelet plugin serves no node yet
        plane.apply([{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "quota-ns"},
                      "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}])
        webhook = Webhook(plane, "--template-gc-interval", "3600").start()
        plane.apply(webhook.configurations())
        yield plane
    finally:
        if webhook is not None:
            webhook.stop()
        plane.stop()


def set_allocatable(plane, node, extended: dict) -> None:
    """The harness as the device plugin: what it advertises is the node's extended resources."""
    base = {"cpu": "64", "memory": "512Gi", "pods": "110"}
    current = plane.json("node", node).get("status", {}).get("allocatable", {})
    gone = {k: None for k in current if "/" in k and k not in extended}
    status = {"capacity": {**base, **extended, **gone}, "allocatable": {**base, **extended, **gone},
              "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}]}
    plane.kubectl("patch", "node", node, "--subresource=status", "--type=merge", "-p", json.dumps({"status": status}))


def report(plane, node, mode, description="h100x8.yaml") -> subprocess.CompletedProcess:
    config = reporter_kubeconfig(plane, node)
    return subprocess.run([sys.executable, "-m", "app", "reporter", "--backend",
                           f"fake:{ROOT / 'app' / 'data' / 'fake' / description}", "--node-name", node,
                           "--mode", mode, "--kubeconfig", config, "--max-rounds", "1", "--health-port", "0",
                           *(["--shareable"] if mode == "publish" and node in SHAREABLE else [])],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


def pods(plane) -> list[dict]:
    out = []
    for namespace in ("brown", "quota-ns"):
        out += [p for p in plane.json("pods", "-n", namespace)["items"] if not p["metadata"].get("deletionTimestamp")]
    return out


def owner(pod) -> str:
    return pod["metadata"]["labels"].get("app", "")


def all_bound(plane):
    """Every workload has its pods bound (None while one waits)."""
    current = pods(plane)
    bound = {}
    for p in current:
        if p["spec"].get("nodeName"):
            key = (p["metadata"]["namespace"], owner(p))
            bound[key] = bound.get(key, 0) + 1
    return current if bound == EXPECTED and len(current) == sum(EXPECTED.values()) else None


def claim_devices(plane, pod) -> list[dict]:
    results = []
    for status in pod.get("status", {}).get("resourceClaimStatuses") or []:
        claim = plane.json("resourceclaim", status["resourceClaimName"], "-n", pod["metadata"]["namespace"])
        results += ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []
    return results


def waiting(plane) -> list[str]:
    """What a failed wait prints: each unbound pod and why the scheduler or a controller holds it."""
    out = []
    for p in pods(plane):
        if not p["spec"].get("nodeName"):
            why = [f"{c.get('type')}={c.get('status')} {c.get('reason', '')}: {c.get('message', '')}"
                   for c in p.get("status", {}).get("conditions") or []]
            out.append(f"{p['metadata']['namespace']}/{p['metadata']['name']} {why}")
    for namespace in ("brown", "quota-ns"):
        for rs in plane.json("replicasets", "-n", namespace)["items"]:
            for c in rs.get("status", {}).get("conditions") or []:
                out.append(f"{namespace}/{rs['metadata']['name']} {c.get('type')}: {c.get('message', '')}")
    return out


def check_invariants(plane, phase: str) -> list[dict]:
    try:
        current = wait_for(lambda: all_bound(plane), 120, f"phase {phase}: every pod bound again")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; waiting: {waiting(plane)}") from None
    in_use = 0
    for p in current:
        limits = p["spec"]["containers"][0]["resources"].get("limits") or {}
        devices = claim_devices(plane, p) if p["spec"].get("resourceClaims") else []
        if owner(p) in SHARES and devices:
            assert all(d.get("shareID") for d in devices), f"phase {phase}: share {p['metadata']['name']} got whole GPUs: {devices}"
        if p["metadata"]["namespace"] == "quota-ns":
            in_use += int(limits.get("nvidia.com/gpu", 0)) + len(devices)
    # The quota controller recounts usage from a snapshot: a recount racing a pod's re-creation
    # can leave `used` low until its next sync (upstream's, whatever the path). What must hold is
    # that, once synced, it counts every GPU in use.
    def counted():
        used = plane.json("resourcequota", "gpus", "-n", "quota-ns").get("status", {}).get("used") or {}
        return (int(used.get("requests.nvidia.com/gpu", 0)) + int(used.get(QUOTA_KEY, 0)) >= in_use) or None
    wait_for(counted, 30, f"phase {phase}: quota used counting the {in_use} GPUs in use")
    return current


def drain(plane, nodes) -> None:
    for p in pods(plane):
        if p["spec"].get("nodeName") in nodes:
            plane.kubectl("delete", "pod", p["metadata"]["name"], "-n", p["metadata"]["namespace"], "--wait=false")


def rewritten(plane, namespace, limits) -> bool:
    """A dry run of a pod asking `limits` comes back rewritten: what the webhook sees serves it."""
    probe = deployment("probe", namespace, 1, limits)["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": namespace}, "spec": probe["spec"]}
    out = plane.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod))
    return bool(json.loads(out.stdout)["spec"].get("resourceClaims"))


def flip(plane, nodes, only_these_serve: dict) -> None:
    """A wave of the move: the device plugin leaves, NVIDIA's driver publishes, pods are drained
    once the webhook sees the new slices (probed with an ask only this wave's nodes can serve:
    a drain racing the webhook's watch would strand the pods it re-creates)."""
    for node in nodes:
        set_allocatable(plane, node, {})
        assert report(plane, node, "publish").returncode == 0
    wait_for(lambda: rewritten(plane, "brown", only_these_serve), 60, f"the webhook seeing {nodes}' slices")
    drain(plane, nodes)


def audit(plane, namespace) -> dict:
    result = subprocess.run([sys.executable, "-m", "app", "audit", "--inventory", "live", "-o", "json", "-n", namespace,
                             "--kubeconfig", plane.admin_kubeconfig], capture_output=True, text=True, timeout=120,
                            cwd=ROOT)
    assert result.returncode in (0, 1) and result.stdout.startswith("{"), (result.returncode, result.stderr)
    return {f"{o['kind']}/{o['name']}": o for o in json.loads(result.stdout)["objects"]}


@requires_kube("1.36", "its second wave moves time-sliced shares onto consumable capacity (DRAConsumableCapacity)")
def test_a_cluster_moves_off_the_device_plugin_without_losing_a_workload(brown):
    plane = brown
    plane.apply(WORKLOADS)

    # (a) Device plugin only: nothing allocates the shadowed devices, every pod stays legacy.
    current = check_invariants(plane, "a")
    assert not any(p["spec"].get("resourceClaims") for p in current)
    found = audit(plane, "brown")
    assert "once NVIDIA's driver serves node bf-" in " ".join(found["Deployment/infer"]["reasons"])
    assert found["Deployment/ts"]["status"] == "needs-attention"  # a share DRA could not keep here

    # (b) Half the nodes on NVIDIA's driver: their pods come back rewritten onto them, except
    # those whose quota would not count a claim and the shares.
    flip(plane, FIRST_WAVE, {"nvidia.com/gpu": "1"})
    current = check_invariants(plane, "b")
    for p in current:
        on_dra = p["spec"]["nodeName"] in FIRST_WAVE
        assert on_dra == bool(p["spec"].get("resourceClaims")), f"{p['metadata']['name']} on {p['spec']['nodeName']}"
        if p["metadata"]["namespace"] == "quota-ns" or owner(p) in SHARES:
            assert not on_dra
    assert not rewritten(plane, "brown", {"nvidia.com/gpu.shared": "1"})  # so the next wave's probe can tell
    quota = audit(plane, "quota-ns")["ResourceQuota/gpus"]
    assert any(QUOTA_KEY in r for r in quota["reasons"])
    plane.kubectl("patch", "resourcequota", "gpus", "-n", "quota-ns", "--type=merge", "-p",
                  json.dumps({"spec": {"hard": {QUOTA_KEY: "4"}}}))  # what audit said to add
    wait_for(lambda: rewritten(plane, "quota-ns", {"nvidia.com/gpu": "1"}), 60, "the webhook seeing the quota key")

    # (c) Every node on NVIDIA's driver (shareable devices where the time-sliced GPUs were).
    flip(plane, SECOND_WAVE, {"nvidia.com/gpu.shared": "1"})  # only bf-3's shareable devices serve a share
    current = check_invariants(plane, "c")
    for p in current:
        assert p["spec"].get("resourceClaims"), f"{p['metadata']['name']} still on the device plugin"
        limits = p["spec"]["containers"][0]["resources"].get("limits") or {}
        assert not any(k.startswith("nvidia.com/") for k in limits)
    shares = [d for p in current if owner(p) in SHARES for d in claim_devices(plane, p)]
    assert shares and all(d.get("shareID") for d in shares)
