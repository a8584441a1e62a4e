"""Issue 48: `dra-bridge rollout` and the migration path on real nodes: kubelets, containerd and
runc, the device plugin and NVIDIA's DRA kubelet plugin as real processes (tests/e2e/realnode.py)
that come and go with the labels the rollout flips. Pods really take their grace period to stop,
claims are really prepared (CDI) and unprepared, and a stopped device plugin's resource lingers
in node status (allocatable 0) as a real kubelet leaves it."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.e2e.cluster import ControlPlane
from tests.e2e.conftest import INSTALLED_KINDS, NVIDIA_CLASSES, Webhook, rendered_manifests, wait_for
from tests.e2e.test_brownfield import report
from tests.e2e.test_rollout import mover_kubeconfig, rollout_killed_at
from tests.e2e.test_rollout import workload as rollout_workload
from tests.e2e import realnode
from tests.e2e.realnode import DRA_LABEL, PAUSE_IMAGE, PLUGIN_LABEL, WORKLOAD_IMAGE, RealNode
from tests.e2e.test_real_nodes import UUIDS

pytestmark = [pytest.mark.realnode, pytest.mark.nvidia, pytest.mark.timeout(900)]
NODES = ("rr-0", "rr-1", "rr-2")
NS = "real"
PRODUCT = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
PILOT = ["--nodes", "kubernetes.io/hostname=rr-0"]
STOP_DELAY_S = 2  # each workload container takes this long to stop after SIGTERM


def container(gpus=1, **env):
    return {"name": "main", "image": WORKLOAD_IMAGE, "imagePullPolicy": "Never",
            "env": [{"name": k, "value": str(v)} for k, v in {"STOP_DELAY_S": STOP_DELAY_S, **env}.items()],
            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}


def workload(kind, name, replicas=1, node=None, **env):
    """test_rollout's workload in this namespace, running the workload image; a DaemonSet runs
    on every H100 node."""
    obj = rollout_workload("Deployment" if kind == "DaemonSet" else kind, name, replicas, 1, node)
    obj["kind"], obj["metadata"]["namespace"] = kind, NS
    template = obj["spec"]["template"]["spec"]
    template.update(terminationGracePeriodSeconds=10, containers=[container(**env)])
    if kind == "DaemonSet":
        del obj["spec"]["replicas"]
        template["nodeSelector"] = PRODUCT
    return obj


BARE = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "scratch", "namespace": NS, "labels": {"app": "scratch"}},
        "spec": {"terminationGracePeriodSeconds": 10, "nodeSelector": {"kubernetes.io/hostname": "rr-0"},
                 "containers": [container()]}}
BUDGET = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "infer", "namespace": NS},
          "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "infer"}}}}
WORKLOADS = [workload("Deployment", "infer", 2), workload("StatefulSet", "db"), workload("Job", "train"),
             workload("DaemonSet", "agent"), BUDGET]
# The GPU Operator's device plugin DaemonSet: its pods (pause here) follow the switch label, as
# the harness's agents do; the rollout reads the DaemonSet to know an undo has something to run.
DEVICE_PLUGIN = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "kube-system"},
                 "spec": {"selector": {"matchLabels": {"app": "nvidia-device-plugin"}}, "template": {
                     "metadata": {"labels": {"app": "nvidia-device-plugin"}},
                     "spec": {"nodeSelector": {PLUGIN_LABEL: "true"}, "automountServiceAccountToken": False,
                              "containers": [{"name": "plugin", "image": PAUSE_IMAGE, "imagePullPolicy": "Never"}]}}}}


@contextlib.contextmanager
def real_moving_plane(workdir, binaries, node_binaries):
    """A control plane with dra-bridge installed, three real nodes on the device plugin (shadowed
    by our reporter), the agents, and `plane.mover` bound only to the rollout ClusterRole."""
    node_bin, runtime_bin = node_binaries
    plane = ControlPlane(workdir, binaries).start()
    nodes, agents, webhook = {}, None, None
    try:
        plane.apply([d for d in rendered_manifests(plane) if d["kind"] in INSTALLED_KINDS])
        plane.apply([{"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": NS, "labels": {"dra-bridge.io/migrate": "enabled"}}}])
        # The kubelets mount no pod volumes (realnode.py): no token volume in this namespace.
        wait_for(lambda: plane.kubectl("get", "serviceaccount", "default", "-n", NS, check=False).returncode == 0, 30,
                 "the namespace's default ServiceAccount")
        plane.kubectl("patch", "serviceaccount", "default", "-n", NS, "-p", '{"automountServiceAccountToken": false}')
        for index, name in enumerate(NODES):
            nodes[name] = RealNode(plane, name, index, node_bin, runtime_bin,
                                   {PLUGIN_LABEL: "true", **PRODUCT}).start()
        agents = realnode.NodeAgents(plane, nodes, {n: "h100x8.yaml" for n in NODES}).start()
        for name in NODES:
            wait_for(lambda: plane.json("node", name)["status"]["allocatable"].get("nvidia.com/gpu") == "8", 60,
                     f"{name}'s device plugin registered")
            assert report(plane, name, "shadow", "h100x8.yaml").returncode == 0
        plane.apply(NVIDIA_CLASSES + [DEVICE_PLUGIN])
        # Template collection every second, 3 s grace: it must not race pods being replaced.
        webhook = Webhook(plane).start()
        plane.apply(webhook.configurations())
        plane.mover = mover_kubeconfig(plane)
        plane.nodes, plane.agents = nodes, agents
        yield plane
    finally:
        if agents is not None:
            agents.stop()
        for node in nodes.values():
            node.stop()
        if webhook is not None:
            webhook.stop()
        plane.stop()


@pytest.fixture(scope="module")
def real(binaries, node_binaries, tmp_path_factory):
    with real_moving_plane(tmp_path_factory.mktemp("rollout-real"), binaries, node_binaries) as plane:
        yield plane


def rollout(plane, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "rollout", *args, "--kubeconfig", plane.mover],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)


def running(plane, expected: dict[str, int]) -> list[dict] | None:
    """Every pod Running with its container started, as many per app as expected."""
    pods = [p for p in plane.json("pods", "-n", NS)["items"] if not p["metadata"].get("deletionTimestamp")]
    counts = {}
    for p in pods:
        started = all("running" in (s.get("state") or {}) for s in p["status"].get("containerStatuses") or [{}])
        if p["status"].get("phase") == "Running" and started:
            counts[p["metadata"]["labels"]["app"]] = counts.get(p["metadata"]["labels"]["app"], 0) + 1
    return pods if counts == expected and len(pods) == sum(expected.values()) else None


def check(plane, phase, expected):
    """Every pod running where what it asks is served; a DRA pod's container sees its claim's
    devices (the CDI spec the plugin wrote); `status` agrees and reports no trouble."""
    pods = wait_for(lambda: running(plane, expected), 180, f"{phase}: every pod running")
    nodes = {n: plane.json("node", n) for n in NODES}
    for p in pods:
        node = nodes[p["spec"]["nodeName"]]
        if p["spec"].get("resourceClaims"):
            assert node["metadata"]["labels"].get(DRA_LABEL) == "true", f"{phase}: {p['metadata']['name']}"
            # what the container printed at its start: the devices its claim got, through CDI
            seen = wait_for(lambda: RealNode.container_log(p).splitlines(), 15, f"{phase}: {p['metadata']['name']}'s log")
            assert any(line.startswith("DRA_BRIDGE_TEST_CLAIM=") for line in seen), (phase, p["metadata"]["name"], seen)
            assert any(line.startswith("NVIDIA_VISIBLE_DEVICES=gpu-") for line in seen), (phase, p["metadata"]["name"], seen)
        else:
            assert int(node["status"]["allocatable"].get("nvidia.com/gpu", "0")) > 0, f"{phase}: {p['metadata']['name']}"
            # the kubelet's own account of what the device plugin allocated to the container
            [held] = [r for c in p["status"]["containerStatuses"] for r in c.get("allocatedResourcesStatus") or []]
            assert held["name"] == "nvidia.com/gpu" and held["resources"][0]["resourceID"] in UUIDS, (phase, held)
    status = rollout(plane, "status", "-o", "json")
    assert status.returncode == 0, f"{phase}: {status.stdout}{status.stderr}"
    assert not plane.agents.errors, plane.agents.errors[:3]
    return pods, json.loads(status.stdout)


def journal(plane, node) -> tuple[set[str], set[str]]:
    lines = [line.split(" ", 1) for line in plane.agents.journal(node)]
    return {c for e, c in lines if e == "prepared"}, {c for e, c in lines if e == "unprepared"}


def test_a_real_fleet_moves_wave_by_wave_and_the_pilot_rolls_back(real):
    plane = real
    plane.apply(WORKLOADS + [BARE])
    expected = {"infer": 2, "db": 1, "train": 1, "agent": 3, "scratch": 1}
    check(plane, "before", expected)

    planned = rollout(plane, "plan", *PILOT)
    assert planned.returncode == 1 and "real/scratch is a bare pod" in planned.stdout, planned.stdout

    # Killed right after the labels flip; the same command finishes the wave.
    seen = rollout_killed_at(plane, "rr-0: labels ", "run", "--wave", "1", *PILOT, "--force", "--timeout", "120")
    assert plane.json("node", "rr-0")["metadata"]["annotations"]["dra-bridge.io/rollout-step"] == "flipped", seen
    again = rollout(plane, "run", "--wave", "1", *PILOT, "--force", "--timeout", "120")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "rr-0: continuing from step flipped" in again.stdout
    del expected["scratch"]  # a bare pod, evicted with --force: lost, as `kubectl drain --force` loses it
    pods, status = check(plane, "after the pilot", expected)
    assert status["nodes"]["dra"] == ["rr-0"]
    on_pilot = [p for p in pods if p["spec"]["nodeName"] == "rr-0"]
    assert on_pilot and all(p["spec"].get("resourceClaims") for p in on_pilot)
    # The device plugin stopped with its label: its resource lingers in capacity, allocatable 0.
    pilot = plane.json("node", "rr-0")["status"]
    assert (pilot["allocatable"].get("nvidia.com/gpu"), pilot["capacity"].get("nvidia.com/gpu")) == ("0", "8")
    prepared, _ = journal(plane, "rr-0")
    assert len(prepared) == len(on_pilot)

    # Roll the pilot back: claims unprepared, pods back on the device plugin, slices withdrawn
    # (the kubelet removes them once NVIDIA's plugin has gone).
    undone = rollout(plane, "undo", "--wave", "1", "--timeout", "150")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    pods, status = check(plane, "after the rollback", expected)
    assert not any(p["spec"].get("resourceClaims") for p in pods) and status["nodes"]["plugin"] == list(NODES)
    prepared, unprepared = journal(plane, "rr-0")
    assert prepared and prepared <= unprepared, (prepared, unprepared)
    assert not list(plane.nodes["rr-0"].cdi_dir.iterdir())
    assert not plane.json("resourceslices", "--field-selector=spec.driver=gpu.nvidia.com")["items"]

    # The whole plan, wave by wave: every pod comes back running on DRA.
    waves = json.loads(rollout(plane, "plan", "-o", "json").stdout)["waves"]
    for wave in waves:
        moved = rollout(plane, "run", "--wave", str(wave["wave"]), "--timeout", "150")
        assert moved.returncode == 0, moved.stdout + moved.stderr
        pods, status = check(plane, f"after wave {wave['wave']}", expected)
    assert all(p["spec"].get("resourceClaims") for p in pods)
    assert status["nodes"]["dra"] == list(NODES) and status["gpus"]["dra"] == 24


def test_a_rewritten_pod_runs_sees_its_devices_and_releases_its_claim(real):
    """The migration path on a real node: the webhook rewrites a device-plugin Job onto a
    generated ResourceClaimTemplate; the pod runs on a DRA node, sees the devices its claim
    got, and once it ends its claim is unprepared and deleted; the template outlives it."""
    plane = real
    wait_for(lambda: any(plane.json("node", n)["metadata"]["labels"].get(DRA_LABEL) == "true" for n in NODES), 5,
             "a DRA node (the test above moved them)")
    job = workload("Job", "once", EXIT_AT_ONCE="1")
    job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "2"
    plane.apply([job])
    [done] = wait_for(lambda: [p for p in plane.json("pods", "-n", NS, "-l", "app=once")["items"]
                               if p["status"].get("phase") == "Succeeded"], 120, "the rewritten Job's pod Succeeded")
    assert done["spec"]["resourceClaims"] and "nvidia.com/gpu" not in json.dumps(done["spec"]["containers"])
    [status] = done["status"]["containerStatuses"]
    seen = status["state"]["terminated"]["message"].splitlines()
    devices = [line for line in seen if line.startswith("NVIDIA_VISIBLE_DEVICES=")]
    assert len(devices) == 1 and devices[0].count("gpu-") == 2, seen
    claim = next(line.split("=", 1)[1] for line in seen if line.startswith("DRA_BRIDGE_TEST_CLAIM="))
    node = done["spec"]["nodeName"]
    wait_for(lambda: f"unprepared {claim}" in plane.agents.journal(node), 60, "the finished pod's claim unprepared")
    namespace, name = claim.split("/")
    wait_for(lambda: plane.kubectl("get", "resourceclaim", name, "-n", namespace, check=False).returncode != 0, 60,
             "the finished pod's claim deleted")
    template = done["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]
    assert plane.kubectl("get", "resourceclaimtemplate", template, "-n", NS, check=False).returncode == 0
