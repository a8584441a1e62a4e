"""Issue 26: `dra-bridge rollout` moves a running cluster off the device plugin, wave by wave, on a
control plane of its own, run as an admin bound only to the `dra-bridge-rollout` ClusterRole.

KWOK plays the nodes' kubelets (pods really reach Running and Ready, so PodDisruptionBudgets
count them, and finish when deleted); tests.e2e.kwok.GpuAgents follows the node labels as the two
DaemonSets' programs would (the device plugin advertises GPUs while
`nvidia.com/gpu.deploy.device-plugin=true`; NVIDIA's kubelet plugin publishes slices, through our
reporter, while `nvidia.com/dra-kubelet-plugin=true`). After every wave: every workload has its pods bound
again, pods on moved nodes hold DRA devices there, no pod is bound to a node without what it asks.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.e2e import kwok
from tests.e2e.cluster import ControlPlane, kubeconfig
from tests.e2e.conftest import INSTALLED_KINDS, NVIDIA_CLASSES, Webhook, rendered_manifests, wait_for
from tests.e2e.test_brownfield import report

pytestmark = pytest.mark.timeout(900)
NODES = ("rl-0", "rl-1", "rl-2")
PLUGIN_LABEL, DRA_LABEL = "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/dra-kubelet-plugin"
PRODUCT = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
NS = "roll"


def workload(kind, name, replicas, gpus, node=None, labels=None):
    labels = labels or {"app": name}
    pod = {"metadata": {"labels": labels}, "spec": {
        "terminationGracePeriodSeconds": 0, **({"nodeSelector": {"kubernetes.io/hostname": node}} if node else {}),
        **({"restartPolicy": "Never"} if kind == "Job" else {}),
        "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}
    spec = {"template": pod}
    if kind == "Job":
        spec["backoffLimit"] = 20
    else:
        spec.update(replicas=replicas, selector={"matchLabels": labels})
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "batch/v1" if kind == "Job" else "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": NS}, "spec": spec}


# db and infer live on rl-2 (its wave comes last: most pods to evict); train goes where it fits.
WORKLOADS = [workload("Deployment", "infer", 2, 1, node="rl-2"), workload("Job", "train", 1, 2),
             workload("StatefulSet", "db", 1, 1, node="rl-2")]
def budget(name, **spec):
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": NS},
            "spec": {**spec, "selector": {"matchLabels": {"app": name}}}}


# db allows no disruption (the plan says so); infer allows one at a time, but its pods are pinned
# to their node, so a replacement cannot become ready while the node moves (the run says so).
BUDGETS = [budget("db", minAvailable=1), budget("infer", maxUnavailable=1)]
EXPECTED = {"infer": 2, "train": 1, "db": 1}
# The device plugin's DaemonSet as the GPU Operator runs it: on nodes whose switch label is on.
DEVICE_PLUGIN = {"apiVersion": "apps/v1", "kind": "DaemonSet",
                 "metadata": {"name": "nvidia-device-plugin-daemonset", "namespace": "kube-system"},
                 "spec": {"selector": {"matchLabels": {"app": "nvidia-device-plugin"}}, "template": {
                     "metadata": {"labels": {"app": "nvidia-device-plugin"}},
                     "spec": {"nodeSelector": {PLUGIN_LABEL: "true"}, "terminationGracePeriodSeconds": 1,
                              "containers": [{"name": "plugin", "image": "nvidia/k8s-device-plugin"}]}}}}


def gear_of(hardware: dict | None):
    """node -> (what its device plugin advertises, the fake GPU description our reporter reads)."""
    return lambda node: (hardware or {}).get(node, ({"nvidia.com/gpu": "8"}, "h100x8.yaml"))


@contextlib.contextmanager
def moving_plane(workdir, binaries, kwok_binary, nodes=NODES, namespace=NS, hardware=None):
    """A control plane with dra-bridge installed, `nodes` (KWOK's) on the device plugin (shadowed by
    our reporter), tests.e2e.kwok.GpuAgents for the GPU Operator's DaemonSets (NVIDIA's plugin
    publishing through our reporter), and `plane.mover`: a kubeconfig bound only to the rollout
    ClusterRole."""
    plane = ControlPlane(workdir, binaries).start()
    webhook = runner = agents = None
    gear = gear_of(hardware)
    try:
        plane.apply([d for d in rendered_manifests(plane) if d["kind"] in INSTALLED_KINDS])
        plane.apply([{"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": namespace, "labels": {"dra-bridge.io/migrate": "enabled"}}}])
        runner = kwok.Kwok(plane, kwok_binary, jobs_complete=False).start()  # training runs on
        runner.add_nodes([kwok.fake_node(n, gear(n)[0], {PLUGIN_LABEL: "true", **PRODUCT}) for n in nodes])
        for node in nodes:
            assert report(plane, node, "shadow", gear(node)[1]).returncode == 0
        plane.apply(NVIDIA_CLASSES + [DEVICE_PLUGIN])
        webhook = Webhook(plane, "--template-gc-interval", "3600").start()
        plane.apply(webhook.configurations())

        def publish(node):
            published = report(plane, node, "publish", gear(node)[1])
            assert published.returncode == 0, published.stderr[-2000:]
        agents = kwok.GpuAgents(plane, lambda node: gear(node)[0], publish, PLUGIN_LABEL, DRA_LABEL).start()
        plane.mover = mover_kubeconfig(plane)
        plane.agents = agents
        yield plane
    finally:
        for part in (agents, webhook, runner):
            if part is not None:
                part.stop()
        plane.stop()


def mover_kubeconfig(plane) -> str:
    """The admin who moves nodes: bound to the rollout ClusterRole and nothing else."""
    plane.apply([{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "mover", "namespace": "default"}},
                 {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                  "metadata": {"name": "dra-bridge-rollout-mover"},
                  "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                              "name": "dra-bridge-rollout"},
                  "subjects": [{"kind": "ServiceAccount", "name": "mover", "namespace": "default"}]}])
    token = plane.kubectl("create", "token", "mover", "-n", "default", "--duration=2h").stdout.strip()
    return kubeconfig(plane.dir / "mover.kubeconfig", plane.server, plane.ca, token)


@pytest.fixture(scope="module")
def rolling(binaries, kwok_binary, tmp_path_factory):
    with moving_plane(tmp_path_factory.mktemp("rollout"), binaries, kwok_binary) as plane:
        yield plane


def rollout(plane, *args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "rollout", *args, "--kubeconfig", plane.mover],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, **kw)


def rollout_killed_at(plane, marker: str, *args) -> list[str]:
    """`rollout *args`, SIGKILLed as soon as it prints a line holding `marker`: the lines it printed."""
    run = subprocess.Popen([sys.executable, "-m", "app", "rollout", *args, "--kubeconfig", plane.mover],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    seen = []
    for line in run.stdout:
        seen.append(line)
        if marker in line:
            run.send_signal(signal.SIGKILL)
            break
    run.wait(30)
    return seen


def bound(plane) -> list[dict] | None:
    """Every workload's pods bound and Ready (None while one waits)."""
    pods = [p for p in plane.json("pods", "-n", NS)["items"] if not p["metadata"].get("deletionTimestamp")]
    counts = {}
    for p in pods:
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or [])
        if p["spec"].get("nodeName") and ready:
            app = p["metadata"]["labels"]["app"]
            counts[app] = counts.get(app, 0) + 1
    return pods if counts == EXPECTED and len(pods) == sum(EXPECTED.values()) else None


def check_invariants(plane, phase):
    pods = wait_for(lambda: bound(plane), 120, f"{phase}: every workload's pods bound and ready again")
    nodes = {n: plane.json("node", n) for n in NODES}
    for p in pods:
        node = nodes[p["spec"]["nodeName"]]
        on_dra = node["metadata"]["labels"].get(DRA_LABEL) == "true"
        if p["spec"].get("resourceClaims"):
            assert on_dra, f"{phase}: {p['metadata']['name']} holds a claim on device-plugin node {node['metadata']['name']}"
        else:
            assert "nvidia.com/gpu" in node["status"]["allocatable"], \
                f"{phase}: {p['metadata']['name']} asks the device plugin on {node['metadata']['name']}, which has none"
    assert not plane.agents.errors, plane.agents.errors[:3]
    return pods


def test_a_running_cluster_moves_wave_by_wave_and_a_wave_can_be_undone(rolling):
    plane = rolling
    plane.apply(WORKLOADS + BUDGETS)
    check_invariants(plane, "before")

    plan = json.loads(rollout(plane, "plan", "-o", "json").stdout)
    waves = plan["waves"]
    assert [w["nodes"] for w in waves][-1] == ["rl-2"] and len(waves) == 3  # db's node: most to evict, last
    [db_wave] = [w for w in waves if "rl-2" in w["nodes"]]
    assert any("PodDisruptionBudget roll/db allows no disruption now" in b for b in db_wave["blockers"])
    # Room made earlier: on DRA, the pods pinned to rl-2 there once it has moved.
    assert {p["comesBackOn"] for p in db_wave["pods"]} <= {"dra", "dra, after the move"} and len(db_wave["pods"]) >= 3
    assert not any(w["blockers"] for w in waves[:2])

    # A server-side dry run changes nothing.
    dry = rollout(plane, "run", "--wave", "1", "--dry-run=server", "--timeout", "30")
    assert dry.returncode == 0 and "[dry run] " in dry.stdout, dry.stdout + dry.stderr
    first = waves[0]["nodes"][0]
    node = plane.json("node", first)
    assert not node["spec"].get("unschedulable") and "dra-bridge.io/rollout-wave" not in node["metadata"].get(
        "annotations", {})

    for number in (1, 2):
        moved = rollout(plane, "run", "--wave", str(number), "--timeout", "90")
        assert moved.returncode == 0, moved.stdout + moved.stderr
        assert f"wave {number}: done" in moved.stdout, moved.stdout
        [name] = [w["nodes"][0] for w in waves if w["wave"] == number]
        node = plane.json("node", name)
        assert node["metadata"]["labels"][PLUGIN_LABEL] == "false" and node["metadata"]["labels"][DRA_LABEL] == "true"
        assert not node["spec"].get("unschedulable")
        assert node["metadata"]["annotations"]["dra-bridge.io/rollout-step"] == "done"
        check_invariants(plane, f"after wave {number}")
        again = rollout(plane, "run", "--wave", str(number), "--timeout", "30")  # idempotent
        assert again.returncode == 0 and "done already" in again.stdout, again.stdout + again.stderr

    # The budget forbids evicting db: the wave is refused, saying why; nothing was touched.
    blocked = rollout(plane, "run", "--wave", "3", "--timeout", "10")
    assert blocked.returncode == 1 and "PodDisruptionBudget roll/db allows no disruption now" in blocked.stderr
    assert not plane.json("node", "rl-2")["spec"].get("unschedulable")
    # The owner accepts one disruption: the wave goes, db comes back on DRA.
    plane.kubectl("patch", "pdb", "db", "-n", NS, "--type=merge", "-p", '{"spec": {"minAvailable": 0}}')
    wait_for(lambda: rollout(plane, "plan", "-o", "json").returncode == 0, 60, "the budget allowing a disruption")
    stopped = rollout(plane, "run", "--wave", "3", "--timeout", "15")
    assert stopped.returncode == 1, stopped.stdout + stopped.stderr
    assert "evicted roll/db-0 (StatefulSet/db recreates it; it belongs on DRA)" in stopped.stdout
    assert "dra-bridge rollout: stopped: rl-2: eviction of roll/infer-" in stopped.stderr
    assert "disruption budget" in stopped.stderr and "Nothing was forced" in stopped.stderr
    node = plane.json("node", "rl-2")
    assert node["spec"]["unschedulable"] and node["metadata"]["annotations"]["dra-bridge.io/rollout-step"] == "cordoned"
    assert json.loads(rollout(plane, "status", "-o", "json").stdout)["nodes"]["moving"] == ["rl-2"]
    # The owner lets both go: the same command continues where it stopped.
    plane.kubectl("patch", "pdb", "infer", "-n", NS, "--type=merge", "-p", '{"spec": {"maxUnavailable": 2}}')
    last = rollout(plane, "run", "--wave", "3", "--timeout", "90")
    assert last.returncode == 0, last.stdout + last.stderr
    assert "rl-2: continuing from step cordoned" in last.stdout and "evicted roll/infer-" in last.stdout
    assert "wave 3: done, every evicted workload's pods bound again" in last.stdout
    pods = check_invariants(plane, "after wave 3")
    assert all(p["spec"].get("resourceClaims") for p in pods)  # every GPU pod on DRA now

    status = json.loads(rollout(plane, "status", "-o", "json").stdout)
    assert status["nodes"]["dra"] == list(NODES) and status["gpus"]["dra"] == 24 and not status["nodes"]["plugin"]

    # Without the device plugin's DaemonSet nothing would serve the node after an undo: refused
    # before anything is done, naming the label; nothing evicted, the node as it was.
    before = {p["metadata"]["name"] for p in plane.json("pods", "-n", NS)["items"]}
    plane.kubectl("delete", "daemonset", DEVICE_PLUGIN["metadata"]["name"], "-n", "kube-system")
    refused = rollout(plane, "undo", "--wave", "1", "--timeout", "30")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "undo wave 1 refused, nothing done" in refused.stderr
    assert f"no DaemonSet selects nodes by {PLUGIN_LABEL}" in refused.stderr
    node = plane.json("node", first)
    assert node["metadata"]["labels"][DRA_LABEL] == "true" and not node["spec"].get("unschedulable")
    assert {p["metadata"]["name"] for p in plane.json("pods", "-n", NS)["items"]} == before
    plane.apply([DEVICE_PLUGIN])
    # `plan --undo` says what the undo will do, as it judges it before acting.
    undo_plan = json.loads(rollout(plane, "plan", "--undo", "1", "-o", "json").stdout)
    [taken_back] = undo_plan["waves"]
    assert undo_plan["undo"] and taken_back["nodes"] == [first] and not taken_back["blockers"]
    assert {p["comesBackOn"] for p in taken_back["pods"]} <= {"dra", "plugin"}

    # Undo the first wave: its node goes back to the device plugin and nothing is lost.
    undone = rollout(plane, "undo", "--wave", "1", "--timeout", "90")
    assert undone.returncode == 0, undone.stdout + undone.stderr
    node = plane.json("node", first)
    assert node["metadata"]["labels"][PLUGIN_LABEL] == "true" and DRA_LABEL not in node["metadata"]["labels"]
    assert "dra-bridge.io/rollout-wave" not in node["metadata"].get("annotations", {})
    assert not node["spec"].get("unschedulable")
    check_invariants(plane, "after undo")
    status = json.loads(rollout(plane, "status", "-o", "json").stdout)
    assert status["nodes"]["plugin"] == [first]
