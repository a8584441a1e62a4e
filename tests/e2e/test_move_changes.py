"""Issue 47 on a control plane of its own, with the real kube-scheduler: what a move to DRA changes.

- Preemption: a high-priority pod preempts a low-priority one on the device plugin's side; the same
  pair on DRA devices leaves the high-priority pod Pending and its victim untouched (the scheduler
  does not preempt for DRA devices through 1.37). `audit` of the cluster keeps both on the device
  plugin and says why.
- Pools: a pool whose resourceSliceCount says more slices than are published is not allocated
  from; `check --inventory live` and the webhook's /validate say so, naming the pool."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.e2e.cluster import kube_minor
from tests.e2e.conftest import (INSTALLED_KINDS, NVIDIA_CLASSES, Webhook, own_plane, rendered_manifests,
                                reporter_kubeconfig, run_reporter, wait_for)

pytestmark = pytest.mark.timeout(600)
PLUGIN_NODE, DRA_NODE = "pp-plugin", "pp-dra"
MIGRATE = {"dra-bridge.io/migrate": "enabled"}
CLASSES = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value} for name, value in (("serving-high", 100000), ("batch-low", 100))]


def ready_node(name: str, allocatable: dict) -> tuple[dict, dict]:
    status = {"capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", **allocatable},
              "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", **allocatable},
              "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}]}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
        "kubernetes.io/hostname": name}}}, status


@pytest.fixture(scope="module")
def plane(binaries, tmp_path_factory):
    with own_plane(binaries, tmp_path_factory, "move-changes") as cluster:
        cluster.apply([d for d in rendered_manifests(cluster) if d["kind"] in INSTALLED_KINDS])
        cluster.apply(NVIDIA_CLASSES + CLASSES + [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": MIGRATE}}
            for n in ("plugin-side", "dra-side")])
        for name, allocatable in ((PLUGIN_NODE, {"nvidia.com/gpu": "1"}), (DRA_NODE, {})):
            node, status = ready_node(name, allocatable)
            cluster.apply([node])
            cluster.kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p",
                            json.dumps({"status": status}))
        published = run_reporter(cluster, DRA_NODE, "l4x4.yaml", reporter_kubeconfig(cluster, DRA_NODE))
        assert published.returncode == 0, published.stderr
        yield cluster


def pod(name: str, namespace: str, priority: str, node: str, gpus: int = 1, template: str | None = None) -> dict:
    container = {"name": "c", "image": "cuda"}
    spec = {"priorityClassName": priority, "nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [container], "terminationGracePeriodSeconds": 30}
    if template:
        container["resources"] = {"claims": [{"name": "gpus"}]}
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template}]
    else:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def template(name: str, count: int) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "dra-side"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "count": count}}]}}}}


def get(plane, name: str, namespace: str) -> dict:
    return plane.json("pod", name, "-n", namespace)


def job(name: str, priority: str) -> dict:
    """A Job's one pod, as a workload would run it (audit judges the Job: its pods come back from it)."""
    template = pod(name, "plugin-side", priority, PLUGIN_NODE)
    template["spec"]["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "plugin-side"},
            "spec": {"backoffLimit": 0, "template": {"spec": template["spec"]}}}


def job_pod(plane, name: str) -> dict | None:
    found = plane.json("pods", "-n", "plugin-side", "-l", f"job-name={name}")["items"]
    return found[0] if found else None


def dra_bridge(plane, *args: str) -> subprocess.CompletedProcess:
    """The CLI as the admin runs it: the cluster kubectl would ask ($KUBECONFIG)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRA_BRIDGE_")}
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, env={**env, "KUBECONFIG": plane.admin_kubeconfig})


def test_the_scheduler_preempts_for_the_device_plugin_not_for_dra_devices(plane):
    # Device plugin: the low-priority pod is bound, the high-priority one preempts it.
    plane.apply([job("batch", "batch-low")])
    batch = wait_for(lambda: (job_pod(plane, "batch") or {}).get("spec", {}).get("nodeName") and job_pod(plane, "batch"),
                     60, "batch bound")
    plane.apply([job("serving", "serving-high")])
    wait_for(lambda: job_pod(plane, "serving"), 60, "serving's pod created")
    # What dra-bridge says of the two: both keep the device plugin, and why.
    audited = dra_bridge(plane, "audit", "-n", "plugin-side", "-o", "json")
    reasons = {r["name"]: " ".join(r["reasons"]) for r in json.loads(audited.stdout)["objects"]}
    assert "preemption: it preempts" in reasons["serving"], audited.stdout
    assert "preemption: it is preempted" in reasons["batch"], audited.stdout
    victim = batch["metadata"]["name"]
    wait_for(lambda: get(plane, victim, "plugin-side")["metadata"].get("deletionTimestamp"), 60,
             "the low-priority pod preempted")
    wait_for(lambda: job_pod(plane, "serving")["status"].get("nominatedNodeName") == PLUGIN_NODE, 30, "nominated")
    plane.kubectl("delete", "pod", victim, "-n", "plugin-side", "--force", "--grace-period=0")  # the kubelet's part
    wait_for(lambda: job_pod(plane, "serving")["spec"].get("nodeName") == PLUGIN_NODE, 60, "the preemptor bound")

    # DRA: the low-priority pod holds all four devices; the high-priority one waits, nobody is evicted.
    plane.apply([template("all-four", 4), template("one", 1)])
    plane.apply([pod("batch", "dra-side", "batch-low", DRA_NODE, template="all-four")])
    wait_for(lambda: get(plane, "batch", "dra-side")["spec"].get("nodeName"), 60, "batch bound with its claim")
    plane.apply([pod("serving", "dra-side", "serving-high", DRA_NODE, template="one")])

    def unschedulable():
        conditions = get(plane, "serving", "dra-side")["status"].get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"), None)
    condition = wait_for(unschedulable, 60, "the high-priority DRA pod found unschedulable")
    for _ in range(10):  # several scheduling attempts: still no victim
        assert not get(plane, "batch", "dra-side")["metadata"].get("deletionTimestamp")
        assert not get(plane, "serving", "dra-side")["status"].get("nominatedNodeName")
        subprocess.run(["sleep", "1"])
    print(f"high-priority DRA pod Pending: {condition.get('message')}")
    assert not get(plane, "serving", "dra-side")["spec"].get("nodeName")
    for name in ("serving", "batch"):
        plane.kubectl("delete", "pod", name, "-n", "dra-side", "--force", "--grace-period=0")


def test_an_incomplete_pool_is_allocated_from_by_nobody_and_named(plane, tmp_path):
    """From 1.35 nothing is allocated from a pool whose slices are not all published, and we say
    which pool; 1.34's scheduler allocates an exact count from it, and we say satisfiable: both
    as the release's own scheduler then does (issue 54)."""
    allocates = kube_minor() < 35
    wait_for(lambda: not plane.json("resourceclaims", "-n", "dra-side")["items"], 60, "the earlier claims gone")
    [pool_slice] = [s for s in plane.json("resourceslices")["items"] if s["spec"].get("nodeName") == DRA_NODE]
    count = pool_slice["spec"]["pool"]["resourceSliceCount"]
    plane.kubectl("patch", "resourceslice", pool_slice["metadata"]["name"], "--type=json", "-p", json.dumps(
        [{"op": "replace", "path": "/spec/pool/resourceSliceCount", "value": count + 1}]))  # a driver mid-update
    pool = f"gpu.nvidia.com/{pool_slice['spec']['pool']['name']}"
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "one",
             "namespace": "dra-side"}, "spec": template("x", 1)["spec"]["spec"]}
    (tmp_path / "claim.yaml").write_text(json.dumps(claim))
    checked = dra_bridge(plane, "check", "-f", str(tmp_path / "claim.yaml"), "--inventory", "live")
    if allocates:
        assert checked.returncode == 0 and "satisfiable on 1 node(s)" in checked.stdout, checked.stdout + checked.stderr
    else:
        assert checked.returncode == 1 and "unsatisfiable-now" in checked.stdout, checked.stdout + checked.stderr
        assert f"incomplete pools: {pool} (1 of its {count + 1} slice(s)" in checked.stdout, checked.stdout
    webhook = Webhook(plane).start()
    try:
        plane.apply(webhook.configurations())
        warned = plane.kubectl("apply", "-f", str(tmp_path / "claim.yaml"))
        assert (f"incomplete pools: {pool}" in warned.stderr) != allocates, warned.stderr
    finally:
        webhook.stop()
        for doc in webhook.configurations():
            plane.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], "--ignore-not-found")
    # The scheduler agrees: a pod with that claim is placed (1.34) or not (1.35+).
    waiting = pod("waits", "dra-side", "batch-low", DRA_NODE)
    waiting["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}]}
    waiting["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": "one"}]
    plane.apply([waiting])

    def decided():
        conditions = get(plane, "waits", "dra-side")["status"].get("conditions") or []
        return any(c["type"] == "PodScheduled" and c["status"] == ("True" if allocates else "False")
                   for c in conditions)
    wait_for(decided, 60, "the scheduler's decision on an incomplete pool")
    allocation = plane.json("resourceclaim", "one", "-n", "dra-side").get("status", {}).get("allocation")
    assert bool(allocation) == allocates, allocation
