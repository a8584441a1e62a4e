"""Issue 44: a rollout in a shared cluster, on a control plane of its own: a node hand-labelled
for both sides, a run a PodDisruptionBudget stops and the undo that would strand a pod, a
StatefulSet pinned by a local PersistentVolume, and a gated pod admitted for the device plugin.
After each: no pod stranded, and every command that stops says why and exits 1."""

from __future__ import annotations

import json

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.test_rollout import DRA_LABEL, moving_plane, rollout, workload

pytestmark = pytest.mark.timeout(900)
NODES = ("sh-0", "sh-1", "sh-2")
NS = "shared"
HOST = "kubernetes.io/hostname"


def ours(obj):
    obj["metadata"]["namespace"] = NS
    return obj


WEB = ours(workload("Deployment", "web", 2, 1, node="sh-1"))
WEB_BUDGET = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": NS},
              "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
DB = ours(workload("StatefulSet", "db", 1, 1))  # no node selection: its volume pins it
DB["spec"]["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {
    "accessModes": ["ReadWriteOnce"], "storageClassName": "local", "resources": {"requests": {"storage": "1Gi"}}}}]
LOCAL_PV = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "local-sh-0"}, "spec": {
    "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "persistentVolumeReclaimPolicy": "Retain",
    "storageClassName": "local", "local": {"path": "/mnt/disk0"}, "nodeAffinity": {"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": HOST, "operator": "In", "values": ["sh-0"]}]}]}}}}
GATED = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "queued", "namespace": "batch"}, "spec": {
    "schedulingGates": [{"name": "kueue.x-k8s.io/admission"}], "nodeSelector": {HOST: "sh-0"},
    "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


@pytest.fixture(scope="module")
def shared(binaries, kwok_binary, tmp_path_factory):
    with moving_plane(tmp_path_factory.mktemp("shared"), binaries, kwok_binary, NODES, NS) as plane:
        yield plane


def pods(plane, app):
    return [p for p in plane.json("pods", "-n", NS, "-l", f"app={app}")["items"]
            if not p["metadata"].get("deletionTimestamp")]


def bound(plane, app, count, node=None, claims=None):
    """`count` pods of `app` bound and Ready (on `node`; holding claims or not): else None."""
    found = [p for p in pods(plane, app) if p["spec"].get("nodeName")
             and any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])]
    ok = len(found) == count == len(pods(plane, app)) and all(
        (node is None or p["spec"]["nodeName"] == node)
        and (claims is None or bool(p["spec"].get("resourceClaims")) == claims) for p in found)
    return found if ok else None


def wave_of(plane, node, *extra) -> dict:
    planned = json.loads(rollout(plane, "plan", "-o", "json", *extra).stdout)
    return next(w for w in planned["waves"] if node in w["nodes"] and not w["done"])


def test_a_rollout_in_a_shared_cluster_strands_nothing(shared):
    plane = shared
    # A node hand-labelled for NVIDIA's kubelet plugin while its device plugin still advertises:
    # both sides serve it. Every command names it; no pod is rewritten onto its devices.
    plane.kubectl("label", "node", "sh-1", f"{DRA_LABEL}=true")
    wait_for(lambda: json.loads(rollout(plane, "status", "-o", "json").stdout)["nodes"]["both"] == ["sh-1"], 60,
             "sh-1 served by both sides")
    planned = rollout(plane, "plan")
    assert planned.returncode == 1 and "hazard: node sh-1 is both" in planned.stdout, planned.stdout
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", "namespace": NS, "labels": {"app": "probe"}},
             "spec": {"terminationGracePeriodSeconds": 0, "containers": [
                 {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    plane.apply([probe])
    assert not plane.json("pod", "probe", "-n", NS)["spec"].get("resourceClaims")  # left on the device plugin
    plane.kubectl("delete", "pod", "probe", "-n", NS, "--wait=false")
    plane.kubectl("label", "node", "sh-1", f"{DRA_LABEL}-")
    wait_for(lambda: rollout(plane, "status").returncode == 0, 60, "sh-1 back on the device plugin alone")

    plane.apply([LOCAL_PV, WEB, WEB_BUDGET, DB])
    wait_for(lambda: bound(plane, "web", 2, "sh-1") and bound(plane, "db", 1, "sh-0"), 120, "web and db bound")
    # A gated pod admitted for the device plugin (its namespace not opted in), pinned to sh-0.
    plane.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "batch"}}, GATED])

    # With no DRA node open, the local volume pins db-0 where nothing could take it back; and
    # the gated pod would lose the last node that takes it.
    sh0 = wave_of(plane, "sh-0", "--nodes", f"{HOST}=sh-0")
    assert any("shared/db-0" in b and "pinned to sh-0" in b for b in sh0["blockers"]), sh0["blockers"]
    assert any("batch/queued (Pending, held by scheduling gates kueue.x-k8s.io/admission" in b
               for b in sh0["blockers"]), sh0["blockers"]

    # sh-2 (nothing on it) goes first and opens DRA room.
    sh2 = wave_of(plane, "sh-2", "--nodes", f"{HOST}=sh-2")
    first = rollout(plane, "run", "--wave", str(sh2["wave"]), "--nodes", f"{HOST}=sh-2", "--timeout", "90")
    assert first.returncode == 0, first.stdout + first.stderr

    # web's pods are pinned to sh-1: its budget lets the first go, never the second (the first's
    # replacement waits, rewritten onto DRA, for sh-1 to move). The run stops cordoned; an undo
    # now would strand that replacement, so it is refused, nothing done.
    sh1 = wave_of(plane, "sh-1", "--nodes", f"{HOST}=sh-1")
    number = str(sh1["wave"])
    stopped = rollout(plane, "run", "--wave", number, "--nodes", f"{HOST}=sh-1", "--timeout", "15")
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert "Nothing was forced" in stopped.stderr and f"`rollout run --wave {number}` continues it" in stopped.stderr
    refused = rollout(plane, "undo", "--wave", number, "--timeout", "30")
    assert refused.returncode == 1 and f"undo wave {number} refused, nothing done" in refused.stderr, refused.stderr
    assert "waits, Pending, for DRA devices on sh-1" in refused.stderr, refused.stderr
    node = plane.json("node", "sh-1")
    assert node["spec"].get("unschedulable") and node["metadata"]["annotations"]["dra-bridge.io/rollout-step"] == \
        "cordoned"

    # The owner lets web move: the same command continues; web ends on sh-1's DRA side.
    plane.kubectl("patch", "pdb", "web", "-n", NS, "--type=merge", "-p", '{"spec": {"maxUnavailable": 2}}')
    moved = rollout(plane, "run", "--wave", number, "--nodes", f"{HOST}=sh-1", "--timeout", "90")
    assert moved.returncode == 0, moved.stdout + moved.stderr
    assert wait_for(lambda: bound(plane, "web", 2, "sh-1", claims=True), 60, "web on sh-1's DRA side")

    # Once the gated pod is gone, db-0 comes back on sh-0's DRA side, where its volume is.
    plane.kubectl("delete", "pod", "queued", "-n", "batch")
    sh0 = wave_of(plane, "sh-0")
    assert not sh0["blockers"] and {p["pod"]: p["comesBackOn"] for p in sh0["pods"]}["shared/db-0"] == \
        "dra, after the move", sh0
    last = rollout(plane, "run", "--wave", str(sh0["wave"]), "--timeout", "90")
    assert last.returncode == 0, last.stdout + last.stderr
    assert wait_for(lambda: bound(plane, "db", 1, "sh-0", claims=True), 60, "db-0 on sh-0's DRA side")
    status = json.loads(rollout(plane, "status", "-o", "json").stdout)
    assert status["nodes"]["dra"] == list(NODES) and not status["hazards"] and not status["workloadsShort"]
