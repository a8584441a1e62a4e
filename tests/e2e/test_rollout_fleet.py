"""Issue 30: a rollout on a fleet that differs from the happy path, on a control plane of its own:
a GPU DaemonSet, a bare pod, a Job that takes no retry, a run killed mid-wave, and the rollback
of the only DRA node (the pilot). After every command: no pod lost its owner would not recreate
(unless forced), none bound to a node lacking what it asks, none Pending, and `status` agrees.
"""

from __future__ import annotations

import datetime
import json

import pytest

from tests.e2e.conftest import wait_for
from tests.e2e.test_rollout import DRA_LABEL, PLUGIN_LABEL, PRODUCT, moving_plane, rollout, rollout_killed_at, workload

pytestmark = pytest.mark.timeout(900)
NODES = ("fl-0", "fl-1", "fl-2")
# fl-2: 8 A100s, two of them split into MIG devices (its device plugin's mixed strategy).
HARDWARE = {"fl-2": ({"nvidia.com/gpu": "6", "nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-2g.20gb": "1",
                      "nvidia.com/mig-3g.40gb": "1"}, "a100-mig.yaml")}
NS = "fleet"
PILOT = ["--nodes", "kubernetes.io/hostname=fl-0"]


def fleet_workload(kind, name, replicas, gpus, node=None, **extra):
    obj = workload(kind, name, replicas, gpus, node)
    obj["metadata"]["namespace"] = NS
    obj["spec"].update(extra)
    return obj


AGENT = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": NS},
         "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
             "metadata": {"labels": {"app": "agent"}},
             "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": PRODUCT, "containers": [
                 {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}
BARE = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "scratch", "namespace": NS, "labels": {"app": "scratch"}},
        "spec": {"terminationGracePeriodSeconds": 0, "nodeSelector": {"kubernetes.io/hostname": "fl-0"},
                 "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
ONESHOT = fleet_workload("Job", "oneshot", 1, 1, node="fl-0", backoffLimit=0)


@pytest.fixture(scope="module")
def fleet(binaries, kwok_binary, tmp_path_factory):
    with moving_plane(tmp_path_factory.mktemp("fleet"), binaries, kwok_binary, NODES, NS, HARDWARE) as plane:
        yield plane


def live_pods(plane) -> list[dict]:
    return [p for p in plane.json("pods", "-n", NS)["items"] if not p["metadata"].get("deletionTimestamp")
            and p["status"].get("phase") not in ("Succeeded", "Failed")]


def settled(plane, expected: dict[str, int]) -> list[dict] | None:
    """Every pod bound and Ready, as many per app as expected (None while one waits)."""
    pods, counts = live_pods(plane), {}
    for p in pods:
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
        if p["spec"].get("nodeName") and ready:
            counts[p["metadata"]["labels"]["app"]] = counts.get(p["metadata"]["labels"]["app"], 0) + 1
    return pods if counts == expected and len(pods) == sum(expected.values()) else None


def check(plane, phase, expected):
    pods = wait_for(lambda: settled(plane, expected), 120, f"{phase}: every pod bound and ready")
    nodes = {n: plane.json("node", n) for n in NODES}
    for p in pods:
        node = nodes[p["spec"]["nodeName"]]
        if p["spec"].get("resourceClaims"):
            assert node["metadata"]["labels"].get(DRA_LABEL) == "true", f"{phase}: {p['metadata']['name']} holds " \
                f"a claim on device-plugin node {node['metadata']['name']}"
        else:
            asked = {r for c in p["spec"]["containers"] for r in (c.get("resources") or {}).get("limits") or {}
                     if r.startswith("nvidia.com/")}
            assert asked <= set(node["status"]["allocatable"]), \
                f"{phase}: {p['metadata']['name']} asks the device plugin on {node['metadata']['name']} for {asked}"
    for name, node in nodes.items():
        annotations = node["metadata"].get("annotations") or {}
        if not node["spec"].get("unschedulable"):
            continue
        assert annotations.get("dra-bridge.io/rollout-step") not in (None, "done"), f"{phase}: {name} left cordoned"
    status = rollout(plane, "status", "-o", "json")
    assert status.returncode == 0, f"{phase}: status says something is in trouble: {status.stdout}"
    assert not plane.agents.errors, plane.agents.errors[:3]
    return pods, json.loads(status.stdout)


def test_a_mixed_fleet_moves_without_stranding_a_pod_and_the_pilot_rolls_back(fleet):
    plane = fleet
    mig = fleet_workload("Deployment", "mig", 1, 1)
    mig["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-1g.10gb": "1"}
    plane.apply([fleet_workload("Deployment", "infer", 2, 1), AGENT, BARE, ONESHOT, mig])
    check(plane, "before", {"infer": 2, "agent": 3, "scratch": 1, "oneshot": 1, "mig": 1})

    # kubectl drain's conventions and the Job that takes no retry: named before anything moves.
    planned = rollout(plane, "plan", *PILOT)
    assert planned.returncode == 1, planned.stdout + planned.stderr
    assert "fleet/scratch is a bare pod" in planned.stdout and "pass --force" in planned.stdout
    assert "Job/oneshot in fleet: evicting 1 of its pod(s) would exceed its backoffLimit" in planned.stdout
    assert "fleet/agent-" in planned.stdout and "-> DRA on its node, after the move" in planned.stdout
    refused = rollout(plane, "run", "--wave", "1", *PILOT, "--force", "--timeout", "60")
    assert refused.returncode == 1 and "would exceed its backoffLimit" in refused.stderr, refused.stderr
    assert not plane.json("node", "fl-0")["spec"].get("unschedulable")  # nothing was touched
    plane.kubectl("delete", "job", "oneshot", "-n", NS, "--cascade=foreground", "--wait=true")

    # Another operator's rollout holds the Lease (renewed just now): this one refuses, naming the
    # holder, and touches nothing; once that rollout released it, this one goes ahead.
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    plane.apply([{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                  "metadata": {"name": "dra-bridge-rollout", "namespace": "dra-bridge"},
                  "spec": {"holderIdentity": "bob@elsewhere pid 7", "leaseDurationSeconds": 600, "renewTime": now}}])
    held = rollout(plane, "run", "--wave", "1", *PILOT, "--force", "--timeout", "60")
    assert held.returncode == 1 and "another rollout holds Lease dra-bridge-rollout: bob@elsewhere pid 7" \
        in held.stderr, held.stdout + held.stderr
    assert not plane.json("node", "fl-0")["spec"].get("unschedulable")  # nothing was touched
    plane.kubectl("delete", "lease", "dra-bridge-rollout", "-n", "dra-bridge")

    # The run is killed right after the labels flip; the same command finishes it.
    seen = rollout_killed_at(plane, "fl-0: labels ", "run", "--wave", "1", *PILOT, "--force", "--timeout", "90")
    assert any("evicted fleet/scratch (a bare pod: lost (--force)" in line for line in seen), seen
    assert plane.json("node", "fl-0")["metadata"]["annotations"]["dra-bridge.io/rollout-step"] == "flipped"
    again = rollout(plane, "run", "--wave", "1", *PILOT, "--force", "--timeout", "90")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "fl-0: continuing from step flipped" in again.stdout
    assert "wave 1: done, every evicted workload's pods bound again" in again.stdout
    pods, status = check(plane, "after the pilot", {"infer": 2, "agent": 3, "mig": 1})
    [agent] = [p for p in pods if p["spec"]["nodeName"] == "fl-0" and p["metadata"]["labels"]["app"] == "agent"]
    assert agent["spec"].get("resourceClaims"), "the DaemonSet pod on the moved node holds a device-plugin GPU"
    assert status["nodes"]["dra"] == ["fl-0"]
    # The MIG pod can come back only where a 1g.10gb MIG device is: not on the H100s fl-0 publishes.
    mig_wave = json.loads(rollout(plane, "plan", "-o", "json", "--nodes", "kubernetes.io/hostname=fl-2").stdout)
    [wave] = [w for w in mig_wave["waves"] if w["nodes"] == ["fl-2"]]
    assert any(b.startswith("fleet/mig-") and b.endswith("no node left that takes it has 1 nvidia.com/mig-1g.10gb "
                                                         "free on either side") for b in wave["blockers"]), wave

    # A workload that starts on the pilot runs on DRA there (pinned to it, as with local storage).
    plane.apply([fleet_workload("Deployment", "local", 2, 1, node="fl-0")])
    pods, _ = check(plane, "a workload on the pilot", {"infer": 2, "agent": 3, "mig": 1, "local": 2})
    assert all(p["spec"].get("resourceClaims") for p in pods if p["metadata"]["labels"]["app"] == "local")

    # Roll the pilot back: it is the only DRA node, so its pods must come back on the device plugin
    # (the webhook counts no cordoned node as room), not onto claims of a node leaving DRA.
    undone = rollout(plane, "undo", "--wave", "1", "--timeout", "90")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    assert "undo wave 1: done, every evicted workload's pods bound again" in undone.stdout
    pods, status = check(plane, "after the rollback", {"infer": 2, "agent": 3, "mig": 1, "local": 2})
    assert not any(p["spec"].get("resourceClaims") for p in pods)  # nothing left on a node that left DRA
    assert status["nodes"]["plugin"] == list(NODES) and not status["nodes"]["dra"]
    node = plane.json("node", "fl-0")
    assert node["metadata"]["labels"][PLUGIN_LABEL] == "true" and DRA_LABEL not in node["metadata"]["labels"]
    assert not node["spec"].get("unschedulable") and "dra-bridge.io/rollout-step" not in node["metadata"].get(
        "annotations", {})
