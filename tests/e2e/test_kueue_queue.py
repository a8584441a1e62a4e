"""Issue 34: a real Kueue (built from sigs.k8s.io/kueue, tests/e2e/kueue/go.mod) on a control plane
of its own, with a ClusterQueue of 4 nvidia.com/gpu and a LocalQueue in two namespaces, one opted
in to dra-bridge. Jobs: Kueue admits them from their templates, so half of them run rewritten and
the queue still counts each; its usage and the GPUs held never pass 4. Pods Kueue admits one by
one stay on the device plugin until Kueue maps the class (`dra-bridge quota`'s Configuration part,
read back by serve); then they are rewritten and Kueue counts their claims, not nothing.
`audit` adds up the queue at each step; with Kueue's DRA gate off, a pod's claim escapes the
queue's count, and audit and serve's metric say so.
"""

from __future__ import annotations

import json
import time

import pytest
import yaml

from tests.e2e.cluster import ControlPlane
from tests.e2e.conftest import Webhook, wait_for
from tests.e2e.kueue_manager import Kueue, build
from tests.e2e.twonode import dra_bridge, gpus_held, install

pytestmark = pytest.mark.timeout(600)
MIGRATING, LEGACY = "queued", "queued-legacy"
QUEUE = {"kueue.x-k8s.io/queue-name": "lq"}


@pytest.fixture(scope="module")
def world(binaries, tmp_path_factory):
    binary = build()
    plane = ControlPlane(tmp_path_factory.mktemp("kueue"), binaries).start()
    webhook = kueue = None
    try:
        install(plane, {MIGRATING: {"dra-bridge.io/migrate": "enabled"}, LEGACY: {}})
        kueue = Kueue(plane, binary, [MIGRATING, LEGACY])
        kueue.install()
        kueue.start()
        webhook = Webhook(plane, "--template-gc-interval", "3600", "--unmigrated-interval", "2").start()
        plane.apply(webhook.configurations())
        queues = Kueue.queue_objects(MIGRATING, 4)
        queues.append({**queues[-1], "metadata": {"name": "lq", "namespace": LEGACY}})
        apply_until_answered(plane, queues, "Kueue's webhooks answering")
        yield plane, kueue, webhook
    finally:
        for process in (webhook, kueue):
            if process is not None:
                process.stop()
        plane.stop()


def apply_until_answered(plane, objects: list[dict], what: str, timeout_s: float = 60) -> None:
    """Applies until the API server accepts (a webhook just started may not answer yet); the
    last refusal is in the failure."""
    last = []

    def applied() -> bool:
        last[:] = [plane.kubectl("apply", "-f", "-", check=False, input=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": objects}))]
        return last[0].returncode == 0
    try:
        wait_for(applied, timeout_s, what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {last[0].stderr[-500:]}") from None


def job(name: str, namespace: str) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": QUEUE},
            "spec": {"backoffLimit": 0, "template": {"metadata": {"labels": {"app": name}}, "spec": {
                "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


def queued_pod(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": MIGRATING, "labels": QUEUE},
            "spec": {"terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "cuda",
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def pods(plane) -> list[dict]:
    return [p for ns in (MIGRATING, LEGACY) for p in plane.json("pods", "-n", ns)["items"]
            if not p["metadata"].get("deletionTimestamp")]


def watch_queue(plane, kueue, until, seconds, what) -> list[dict]:
    """Until `until(pods, usage)`: the queue's usage and the GPUs held never above 4."""
    deadline = time.monotonic() + seconds
    while True:
        current, usage = pods(plane), kueue.usage()
        in_use = sum(gpus_held(plane, p) for p in current)
        assert usage <= 4 and in_use <= 4, f"{what}: queue usage {usage}, GPUs held {in_use}, quota 4"
        if until(current, usage):
            return current
        assert time.monotonic() < deadline, f"{what}: not reached in {seconds}s (usage {usage}): " + ", ".join(
            f"{p['metadata']['namespace']}/{p['metadata']['name']} on {p['spec'].get('nodeName')} "
            f"claims={bool(p['spec'].get('resourceClaims'))}" for p in current) + "\n" + workloads(plane) + "\n" \
            + kueue.tail()[-1500:]
        time.sleep(1)


def workloads(plane) -> str:
    """Kueue's Workloads and the Jobs as a failure shows them: what holds the queue's usage."""
    out = []
    for w in plane.json("workloads.kueue.x-k8s.io", "-A")["items"]:
        meta, status = w["metadata"], w.get("status") or {}
        conditions = [f"{c['type']}={c['status']}({c.get('reason', '')})" for c in status.get("conditions") or []]
        out.append(f"workload {meta['namespace']}/{meta['name']} finalizers={meta.get('finalizers')} "
                   f"deleting={bool(meta.get('deletionTimestamp'))} owners="
                   f"{[o['kind'] + '/' + o['name'] for o in meta.get('ownerReferences') or []]} {conditions}")
    for j in plane.json("jobs", "-A")["items"]:
        meta = j["metadata"]
        out.append(f"job {meta['namespace']}/{meta['name']} finalizers={meta.get('finalizers')} "
                   f"deleting={bool(meta.get('deletionTimestamp'))} status={j.get('status')}")
    for ns in (MIGRATING, LEGACY):
        for p in plane.json("pods", "-n", ns)["items"]:
            meta = p["metadata"]
            if meta.get("deletionTimestamp"):
                out.append(f"pod {ns}/{meta['name']} deleting finalizers={meta.get('finalizers')} "
                           f"phase={p.get('status', {}).get('phase')} node={p['spec'].get('nodeName')} "
                           f"claims={p.get('status', {}).get('resourceClaimStatuses')}")
    return "\n".join(out) or "no workloads"


def queue_budget(plane) -> tuple[int, dict]:
    """(audit's exit status, its budget of ClusterQueue gpus), read live as an admin would."""
    audit = dra_bridge(plane, "audit", "--inventory", "live", "-o", "json")
    assert audit.stdout, audit.stderr
    [found] = [q for q in json.loads(audit.stdout)["queueBudgets"] if q["queue"] == "gpus"]
    return audit.returncode, found


def dry_run(plane, pod) -> dict:
    out = plane.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(pod))
    return json.loads(out.stdout)


def test_a_queue_counts_jobs_on_both_sides_and_pods_once_kueue_maps_the_class(world):
    plane, kueue, webhook = world
    plane.apply([job(f"m{i}", MIGRATING) for i in range(3)] + [job(f"l{i}", LEGACY) for i in range(3)])

    # Jobs: admitted from their templates, 4 of 6; those in the opted-in namespace run rewritten.
    def four_running(current, usage):
        return usage == 4 and sum(1 for p in current if p["spec"].get("nodeName")) == 4
    current = watch_queue(plane, kueue, four_running, 120, "jobs")
    for p in current:
        if p["spec"].get("nodeName"):
            assert bool(p["spec"].get("resourceClaims")) == (p["metadata"]["namespace"] == MIGRATING), p["metadata"]
    assert any(p["spec"].get("resourceClaims") for p in current if p["spec"].get("nodeName"))
    # audit: Kueue reserved 4 from the templates, the 4 running pods hold 4 on both sides.
    _status, budget = queue_budget(plane)
    held = sum(gpus_held(plane, p) for p in pods(plane))
    assert (budget["reserved"], budget["plugin"] + budget["dra"], budget["escaped"]) == (4, held, 0), budget
    assert budget["dra"] >= 1 and budget["plugin"] >= 1, budget

    # A pod Kueue admits by itself stays on the device plugin: Kueue does not map the class yet.
    assert not dry_run(plane, queued_pod("probe"))["spec"].get("resourceClaims")

    # The Configuration part dra-bridge prints, merged into Kueue's; Kueue and serve read it at start.
    proposed = dra_bridge(plane, "quota")
    assert proposed.returncode == 1, proposed.stderr
    [configuration] = [d for d in yaml.safe_load_all(proposed.stdout) if d.get("kind") == "Configuration"]
    mappings = configuration["resources"]["deviceClassMappings"]
    assert mappings == [{"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}]
    # In the background: a 1.34 resourceclaim controller gives the claims it makes
    # blockOwnerDeletion, so a foreground delete waits for the kubelet to end the pod (none here).
    plane.kubectl("delete", "jobs", "--all", "-n", MIGRATING, "--wait=false")
    plane.kubectl("delete", "jobs", "--all", "-n", LEGACY, "--wait=false")
    watch_queue(plane, kueue, lambda current, usage: usage == 0 and not current, 120, "jobs gone")
    kueue.stop()
    kueue.start(mappings)
    webhook.stop()
    webhook.start()
    again = dra_bridge(plane, "quota")
    assert again.returncode == 0 and "already" in again.stderr, again.stderr
    wait_for(lambda: bool(dry_run(plane, queued_pod("probe"))["spec"].get("resourceClaims")), 60,
             "serve seeing Kueue's mapping")

    # Five such pods, rewritten: Kueue counts each claim as 1 nvidia.com/gpu, admits 4, gates the fifth.
    apply_until_answered(plane, [queued_pod(f"p{i}") for i in range(5)], "Kueue's webhooks answering after its restart")

    def four_admitted(current, usage):
        return usage == 4 and sum(1 for p in current if p["spec"].get("nodeName")) == 4
    current = watch_queue(plane, kueue, four_admitted, 120, "pods")
    assert all(p["spec"].get("resourceClaims") for p in current)
    waiting = [p for p in current if not p["spec"].get("nodeName")]
    assert len(waiting) == 1 and waiting[0]["spec"].get("schedulingGates"), waiting
    _status, budget = queue_budget(plane)
    assert (budget["plugin"], budget["dra"], budget["reserved"], budget["escaped"]) == (0, 4, 4, 0), budget


def claimed_pod(name: str) -> list[dict]:
    """A pod its owner wrote for DRA already (a claim template of NVIDIA's class), in the queue."""
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": MIGRATING},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}]}}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": MIGRATING, "labels": QUEUE},
           "spec": {"terminationGracePeriodSeconds": 0,
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": name}],
                    "containers": [{"name": "main", "image": "cuda", "resources": {"claims": [{"name": "gpu"}]}}]}}
    return [template, pod]


def test_a_claim_kueue_counts_as_nothing_is_an_escaped_queue_budget(world):
    """kueue#10504: Kueue without its DRA gate admits a pod's claims as nothing. Nothing dra-bridge
    rewrote: the pod was written for DRA by its owner."""
    plane, kueue, webhook = world
    plane.kubectl("delete", "pods", "--all", "-n", MIGRATING, "--wait=false")
    watch_queue(plane, kueue, lambda current, usage: usage == 0 and not current, 120, "pods gone")
    kueue.stop()
    kueue.start([{"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}], dra_gate=False)
    apply_until_answered(plane, claimed_pod("own"), "Kueue's webhooks answering after its restart")
    wait_for(lambda: bool(plane.json("pod", "own", "-n", MIGRATING)["spec"].get("nodeName")), 120,
             "the pod admitted by Kueue and bound")
    assert kueue.usage() == 0  # Kueue counted its GPU as nothing

    wait_for(lambda: queue_budget(plane)[1]["dra"] == 1, 60, "the pod's claim allocated")
    status, budget = queue_budget(plane)
    assert (budget["dra"], budget["reserved"], budget["escaped"]) == (1, 0, 1), budget
    assert status == 1
    audit = dra_bridge(plane, "audit", "--inventory", "live")
    assert "escaped budget: ClusterQueue gpus limits nvidia.com/gpu (4) but does not count 1 device(s) of " \
        "DeviceClass gpu.nvidia.com" in audit.stdout, audit.stdout

    # serve, with the webhook's own RBAC, exports it between audits.
    series = 'dra_bridge_queue_budget_escaped_devices{cluster_queue="gpus",resource="nvidia.com/gpu"} 1.0'
    wait_for(lambda: series in webhook.get("/metrics")[1], 30, "serve's queue-budget metric")
    assert "dra_bridge_kueue_read_failures_total 0.0" in webhook.get("/metrics")[1]
