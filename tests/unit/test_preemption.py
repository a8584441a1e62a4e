"""Issue 47: through Kubernetes 1.37 the scheduler does not preempt for DRA devices (KEP-5690 brings
it in 1.38 behind DRAPreemption). A GPU pod that preempts, or is preempted, keeps the device plugin
unless the admin says otherwise; every preview names it, from the one decision."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from app.migration import preemption_of
from tests.conftest import ROOT


def priority_class(name, value, never=False, default=False):
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
            **({"preemptionPolicy": "Never"} if never else {}), **({"globalDefault": True} if default else {})}


def workload(kind, name, priority=None, gpus=1):
    spec = {"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}
    if priority:
        spec["priorityClassName"] = priority
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team-a"}, "spec": spec}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"template": {"spec": {**spec, "restartPolicy": "Never"}}}}


CLASSES = [priority_class("serving-high", 100000), priority_class("batch-low", 100, never=True),
           priority_class("system-cluster-critical", 2000000000)]


def test_a_preemptor_and_its_victims_lose_it_and_system_classes_stand_for_no_gpu_pod():
    facts = preemption_of(CLASSES)
    assert "it preempts: priority 100000 (serving-high)" in facts.lost({"priorityClassName": "serving-high"})
    assert "it is preempted" in facts.lost({"priorityClassName": "batch-low"})
    assert "it is preempted" in facts.lost({})  # priority 0, below serving-high
    alone = preemption_of([priority_class("system-node-critical", 2000001000)])
    assert alone.lost({}) is None  # only system classes: nothing a GPU pod preempts by


def test_known_gpu_pods_decide_and_preemption_policy_never_preempts_nobody():
    pods = [{"priorityClassName": "batch-low"}]  # the only GPU pod running
    facts = preemption_of(CLASSES, pods)
    assert "above GPU pods at 100" in facts.lost({"priorityClassName": "serving-high"})
    assert facts.lost({"priorityClassName": "batch-low"}) is None  # no GPU pod above it preempts
    assert facts.lost({"priorityClassName": "serving-high", "preemptionPolicy": "Never"}) is None
    default = preemption_of([priority_class("team", 500, default=True), priority_class("low", 10)], [{}])
    assert default.of({}).value == 500  # the globalDefault class, as the Priority admission plugin gives


def run(tmp_path, *args, objects):
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return subprocess.run([sys.executable, "-m", "app", *args, "-f", str(path)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


@pytest.mark.parametrize("policy, path, warned", [
    ({}, "legacy", False),
    ("draPreemption on", "rewrite", False),
    ({"namespaces": [{"names": ["team-a"], "migratePreempting": True}]}, "rewrite", True)])
def test_plan_keeps_a_preemptor_on_the_device_plugin_unless_told(tmp_path, policy, path, warned):
    objects = [*CLASSES, workload("Job", "serving", "serving-high")]
    if policy == "draPreemption on":  # a cluster fact: the migration section, whole, with it on
        policy = {"migration": {**yaml.safe_load((ROOT / "app/data/default-policy.yaml").read_text())["migration"],
                                "draPreemption": "on"}}
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump(policy))
    result = run(tmp_path, "plan", "--policy", str(tmp_path / "policy.yaml"), "--inventory", "example", "-o", "report",
                 objects=objects)
    [job] = [r for r in json.loads(result.stdout)["objects"] if r["kind"] == "Job"]
    assert job["path"] == path, job
    text = " ".join(job["reasons"])
    assert ("preemption: it preempts" in text) == (path == "legacy" or warned), text
    if path == "legacy":
        assert "migration.draPreemption: off" in text


def test_audit_and_its_policy_report_name_the_victim(tmp_path):
    """An export with pods: the running GPU pods' priorities decide (the batch pod is preempted
    by the serving one)."""
    objects = [*CLASSES, workload("Pod", "serving", "serving-high"), workload("Pod", "batch", "batch-low")]
    report = json.loads(run(tmp_path, "audit", "-o", "json", objects=objects).stdout)
    reasons = {r["name"]: " ".join(r["reasons"]) for r in report["objects"]}
    assert "it preempts: priority 100000 (serving-high) above GPU pods at 100" in reasons["serving"]
    assert "it is preempted: GPU pods at priority 100000 (serving-high)" in reasons["batch"]
    policy_report = run(tmp_path, "audit", "-o", "policyreport", objects=objects).stdout
    assert policy_report.count("preemption:") >= 2


def test_rollout_plan_names_the_preempting_and_preempted_pods_of_each_wave(tmp_path):
    """A wave's GPU pods that preempt, or are preempted, come back on the device plugin, named."""
    from tests.unit.test_rollout import node, pod
    nodes = [node(f"gpu-{i}", {"nvidia.com/gpu": "8"}, labels={"nvidia.com/gpu.deploy.device-plugin": "true",
                                                                "nvidia.com/gpu.present": "true"}) for i in range(2)]
    serving = pod("serving", "gpu-0", {"nvidia.com/gpu": "1"}, priorityClassName="serving-high")
    batch = pod("batch", "gpu-0", {"nvidia.com/gpu": "1"}, priorityClassName="batch-low")
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": "team-a", "labels": {"dra-bridge.io/migrate": "enabled"}}}
    plan = run(tmp_path, "rollout", "plan", "-o", "json", objects=[*nodes, serving, batch, namespace, *CLASSES])
    waves = json.loads(plan.stdout)["waves"]
    notes = " ".join(n for w in waves for n in w["notes"])
    assert "preemption: 1 preempting and 1 preempted GPU pod(s) come back on the device plugin" in notes, plan.stdout
    why = {p["pod"]: p["why"] for w in waves for p in w["pods"]}
    assert "preemption: it preempts" in why["team-a/serving"]


def test_a_natively_served_pod_moved_anyway_is_warned_of_preemption_only():
    """A pod served natively is left as written: it carries the migratePreempting warning, never
    the rewrite plan's ("migrated ... to ResourceClaimTemplate ...")."""
    from app.migration import Facts, Path, decide
    from app.policy import parse_policy

    policy = parse_policy(yaml.safe_dump({"namespaces": [{"names": ["team-a"], "migratePreempting": True}]}))
    facts = Facts(served={"nvidia.com/gpu": "gpu-native"}, preemption=preemption_of(CLASSES))
    pod = workload("Pod", "serving", "serving-high")
    pod["metadata"]["annotations"] = {"hami.io/gpu-scheduler-policy": "binpack"}  # a planner note
    routed = decide(pod, "team-a", {}, policy, facts)
    assert routed.path.path is Path.NATIVE
    [warning] = routed.plan.warnings
    assert warning.startswith("moved to DRA anyway (migratePreempting): preemption: it preempts")
