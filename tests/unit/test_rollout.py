"""`dra-bridge rollout`'s planning (pure): which side each node is on, where each GPU pod comes
back when its node moves, and waves that keep every workload somewhere to run."""

from __future__ import annotations

import json
from dataclasses import replace
import subprocess
import sys

import pytest
import yaml

from app.application import rollout
from app.common import InputError
from app.policy import default_policy
from app.reporter import node_from_description, render
from tests.conftest import ROOT

SWITCHES = rollout.Switches()
FAKE = ROOT / "app" / "data" / "fake"
MIGRATE = {"dra-bridge.io/migrate": "enabled"}


def node(name, allocatable=None, labels=None, annotations=None, unschedulable=False):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                         "annotations": annotations or {}},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"allocatable": {"cpu": "64", **(allocatable or {})}}}


def slices(node_name, mode="publish", description="h100x8.yaml"):
    gpus = node_from_description(yaml.safe_load((FAKE / description).read_text()), description)
    if mode == "publish":
        return render.slices(gpus, node_name, "gpu.nvidia.com", 1)
    return render.slices(gpus, node_name, "shadow.gpu.dra-bridge.io", 1, qualify=True, shadow_of="gpu.nvidia.com")


def pod(name, node_name, limits, namespace="team-a", owner="auto", labels=None, claims=None, **spec_extra):
    """A running pod; owner "" for a bare pod (by default a ReplicaSet of its own recreates it)."""
    meta = {"name": name, "namespace": namespace, "labels": labels or {}}
    if owner == "auto":
        owner = f"ReplicaSet/{name}-rs"
    if owner:
        kind, owner_name = owner.split("/")
        meta["ownerReferences"] = [{"kind": kind, "name": owner_name, "controller": True, "apiVersion": "apps/v1",
                                    "uid": "u"}]
    spec = {"nodeName": node_name, "containers": [{"name": "main", "image": "cuda",
                                                    "resources": {"limits": limits} if limits else {}}]}
    spec.update(spec_extra)
    status = {"phase": "Running"}
    if claims:
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "t"}]
        status["resourceClaimStatuses"] = [{"name": "gpus", "resourceClaimName": claims}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def namespace(name, labels=None):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}


def budget(name, labels, allowed, namespace_="team-a"):
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace_},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1}}


def cluster(**objects) -> dict[str, list[dict]]:
    base = {k: [] for k in ("nodes", "pods", "namespaces", "resourcequotas", "poddisruptionbudgets", "resourceslices",
                            "resourceclaims", "deviceclasses")}
    base.update(objects)
    return base


def views(objects):
    nodes = [v for v in (rollout.node_view(n, objects["resourceslices"], SWITCHES) for n in objects["nodes"]) if v]
    return nodes, rollout.pod_views(objects, default_policy(), SWITCHES)


def test_each_node_is_on_one_side_with_its_physical_gpus():
    objects = cluster(
        nodes=[node("p0", {"nvidia.com/gpu": "8"}), node("p1", {"nvidia.com/gpu": "8"}, unschedulable=True),
               node("ts", {"nvidia.com/gpu.shared": "32"}, {"nvidia.com/gpu.replicas": "4"}),
               node("d0", labels={"nvidia.com/dra-kubelet-plugin": "true"}),
               node("m0", {"nvidia.com/gpu": "8"}, annotations={rollout.WAVE: "1", rollout.STEP: "evicted"}),
               node("cpu")],
        resourceslices=slices("p0", "shadow") + slices("d0"))
    nodes = {n.name: n for n in views(objects)[0]}
    assert set(nodes) == {"p0", "p1", "ts", "d0", "m0"}  # a node with no GPU is on no side
    assert nodes["p0"].side == "plugin" and nodes["p0"].gpus == 8
    assert nodes["p0"].models == ("NVIDIA H100 80GB HBM3",)  # from our shadow slices
    assert nodes["p1"].side == "plugin" and nodes["p1"].advertised == {"nvidia.com/gpu": 8}  # cordoned: still its GPUs
    assert nodes["ts"].gpus == 8  # 32 time-sliced replicas of 4
    assert nodes["d0"].side == "dra" and nodes["d0"].gpus == 8
    assert nodes["m0"].side == "moving" and nodes["m0"].wave == 1


def test_each_gpu_pod_comes_back_where_the_webhook_would_put_it():
    objects = cluster(
        nodes=[node("p0", {"nvidia.com/gpu": "8", "nvidia.com/gpu.shared": "8"})],
        namespaces=[namespace("team-a", MIGRATE), namespace("quota-ns", MIGRATE), namespace("other")],
        resourcequotas=[{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "quota-ns"},
                         "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}],
        pods=[pod("infer-abc-1", "p0", {"nvidia.com/gpu": "1"}, owner="ReplicaSet/infer-abc",
                  labels={"pod-template-hash": "abc"}),
              pod("ts-1", "p0", {"nvidia.com/gpu.shared": "1"}),
              pod("q-1", "p0", {"nvidia.com/gpu": "1"}, namespace="quota-ns"),
              pod("o-1", "p0", {"nvidia.com/gpu": "1"}, namespace="other"),
              pod("web", "p0", None)])
    pods = {p.name: p for p in views(objects)[1]}
    assert set(pods) == {"infer-abc-1", "ts-1", "q-1", "o-1"}  # pods without GPUs are not moved
    assert pods["infer-abc-1"].path == "dra" and pods["infer-abc-1"].owner == "Deployment/infer"
    assert pods["ts-1"].path == "plugin" and pods["ts-1"].why.startswith("share:")
    assert pods["q-1"].path == "plugin" and pods["q-1"].why.startswith("quota:")
    assert pods["o-1"].path == "plugin" and "not opted in" in pods["o-1"].why


def test_waves_move_nodes_with_fewest_staying_pods_first_and_check_they_fit():
    objects = cluster(
        nodes=[node(f"p{i}", {"nvidia.com/gpu": "8", "nvidia.com/gpu.shared": "8"}) for i in range(3)],
        namespaces=[namespace("team-a", MIGRATE)],
        pods=[pod("ts-0", "p0", {"nvidia.com/gpu.shared": "3"}), pod("ts-1", "p1", {"nvidia.com/gpu.shared": "5"}),
              pod("gpu-2", "p2", {"nvidia.com/gpu": "8"})])
    waves = rollout.plan_waves(*views(objects), [])
    assert [w.nodes for w in waves] == [["p2"], ["p0"], ["p1"]]
    # No DRA node yet: the pod the webhook would rewrite comes back on the device plugin for now.
    assert waves[0].back == {"team-a/gpu-2": "plugin, for now"} and not waves[0].blockers
    assert "come back on the device plugin for now" in waves[0].notes[0]
    assert waves[1].back["team-a/ts-0"] == "plugin" and not waves[1].blockers  # beside ts-1's 5 on p1 (8)
    # The last device-plugin node: the shares have nowhere to go, each named with why.
    assert len(waves[2].blockers) == 2
    assert waves[2].blockers[1].startswith("team-a/ts-0 (ReplicaSet/ts-0-rs, 3 nvidia.com/gpu.shared) would find no "
                                           "room: it stays on the device plugin (share:")
    assert waves[2].blockers[1].endswith("no node left that takes it has 3 nvidia.com/gpu.shared free on the "
                                         "device plugin")
    # The GPUs per wave bound the size instead: both 8-GPU nodes fit in 16.
    assert [w.nodes for w in rollout.plan_waves(*views(objects), [], max_gpus=16)][0] == ["p0", "p2"]


def test_pods_come_back_on_dra_only_where_earlier_waves_made_room():
    objects = cluster(nodes=[node("small", {"nvidia.com/gpu": "1"}), node("big", {"nvidia.com/gpu": "8"})],
                      namespaces=[namespace("team-a", MIGRATE)],
                      pods=[pod("a", "big", {"nvidia.com/gpu": "4"}), pod("b", "big", {"nvidia.com/gpu": "4"})])
    waves = rollout.plan_waves(*views(objects), [])
    assert waves[0].nodes == ["small"] and not waves[0].blockers
    # Recreated at once, the two pods need 8 GPUs while big moves: DRA has 1 (small), nothing else.
    assert waves[1].nodes == ["big"] and waves[1].blockers == [
        f"team-a/{p} (ReplicaSet/{p}-rs, 4 nvidia.com/gpu) would find no room: no node left that takes it has 4 "
        "nvidia.com/gpu free on either side" for p in "ab"]
    objects["nodes"].append(node("spare", {"nvidia.com/gpu": "8"}))
    waves = rollout.plan_waves(*views(objects), [])
    assert [w.nodes for w in waves] == [["small"], ["spare"], ["big"]]
    assert waves[2].back == {"team-a/a": "dra", "team-a/b": "dra"} and not waves[2].blockers


def test_a_budget_that_allows_no_disruption_blocks_the_wave_and_is_named():
    objects = cluster(nodes=[node("p0", {"nvidia.com/gpu": "8"}), node("p1", {"nvidia.com/gpu": "8"})],
                      namespaces=[namespace("team-a", MIGRATE)],
                      pods=[pod("db-0", "p0", {"nvidia.com/gpu": "1"}, owner="StatefulSet/db", labels={"app": "db"})])
    nodes, pods = views(objects)
    first, second = rollout.plan_waves(nodes, pods, [budget("db", {"app": "db"}, 0)])
    assert first.nodes == ["p1"] and not first.blockers
    assert second.blockers == ["PodDisruptionBudget team-a/db allows no disruption now (1 healthy, 1 desired): "
                               "evicting team-a/db-0 would break it"]
    assert second.back == {"team-a/db-0": "dra"}
    _first, second = rollout.plan_waves(nodes, pods, [budget("db", {"app": "db"}, 1), budget("other", {"app": "x"}, 0)])
    assert not second.blockers


def test_waves_already_run_are_listed_and_numbering_goes_on():
    objects = cluster(nodes=[node("p0", {"nvidia.com/gpu": "8"}),
                             node("d0", labels={"nvidia.com/dra-kubelet-plugin": "true"},
                                  annotations={rollout.WAVE: "1", rollout.STEP: "done"}),
                             node("m1", annotations={rollout.WAVE: "2", rollout.STEP: "evicted",
                                                     rollout.BEFORE: "{}"}, allocatable={"nvidia.com/gpu": "8"})],
                      resourceslices=slices("d0"))
    waves = rollout.plan_waves(*views(objects), [])
    assert [(w.number, w.nodes, w.done) for w in waves] == [(1, ["d0"], True), (2, ["m1"], False), (3, ["p0"], False)]
    assert "stopped at step evicted" in waves[1].notes[0]


def test_a_moved_node_is_ready_once_nvidias_driver_publishes_what_the_plugin_advertised():
    before = rollout.before_move(rollout.node_view(node("n", {"nvidia.com/gpu": "8"}), slices("n", "shadow"),
                                                   SWITCHES), SWITCHES)
    assert before.gpus == 8 and before.models == ("NVIDIA H100 80GB HBM3",)
    flipped = node("n", labels={"nvidia.com/dra-kubelet-plugin": "true"}, annotations={rollout.WAVE: "1"})
    assert rollout.slices_ready(rollout.published(flipped, slices("n", "shadow"), SWITCHES), before) == \
        "0 of 8 GPUs published"  # our shadow slices do not count
    assert rollout.slices_ready(rollout.published(flipped, slices("n"), SWITCHES), before) is None
    other = rollout.published(flipped, slices("n", description="l4x4.yaml"), SWITCHES)
    assert rollout.slices_ready(other, replace(before, gpus=4)).startswith("model NVIDIA H100 80GB HBM3 not published")
    gfd = replace(before, models=("NVIDIA-H100-80GB-HBM3",))  # GFD's spelling of the same model
    assert rollout.slices_ready(rollout.published(flipped, slices("n"), SWITCHES), gfd) is None
    mig = rollout.published(flipped, slices("n", description="a100-mig.yaml"), SWITCHES)
    assert rollout.slices_ready(mig, rollout.NodeBefore(gpus=0, mig={"1g.10gb": 99})).startswith("MIG 1g.10gb:")


def test_plan_and_status_from_an_export(tmp_path):
    objects = cluster(nodes=[node("p0", {"nvidia.com/gpu": "8"}), node("p1", {"nvidia.com/gpu": "8"})],
                      namespaces=[namespace("team-a", MIGRATE)],
                      pods=[pod("db-0", "p0", {"nvidia.com/gpu": "1"}, owner="StatefulSet/db", labels={"app": "db"})],
                      poddisruptionbudgets=[budget("db", {"app": "db"}, 0)])
    export = tmp_path / "cluster.yaml"
    export.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                      "items": [o for kind in objects.values() for o in kind]}))

    def run(*args):
        return subprocess.run([sys.executable, "-m", "app", "rollout", *args, "-f", str(export)], capture_output=True,
                              text=True, cwd=ROOT, timeout=60)

    planned = run("plan")
    assert planned.returncode == 1, planned.stderr  # a wave is blocked
    assert planned.stdout.splitlines()[0] == "wave 1 [ready]: p1 (8 GPUs, 0 GPU pods)"
    assert "wave 2 [BLOCKED]: p0 (8 GPUs, 1 GPU pods)" in planned.stdout
    assert "team-a/db-0 (StatefulSet/db) -> DRA (rewritten onto a ResourceClaimTemplate (" in planned.stdout
    assert "blocked: PodDisruptionBudget team-a/db allows no disruption now" in planned.stdout
    data = json.loads(run("plan", "-o", "json", "--wave-size", "2").stdout)
    assert [w["nodes"] for w in data["waves"]] == [["p0", "p1"]]
    status = run("status").stdout
    assert status.splitlines()[0].split() == ["device", "plugin", "2", "node(s)", "16", "GPU(s)", "p0,", "p1"]
    bad = run("plan", "--nodes", "a=b=c")
    assert bad.returncode == 2 and bad.stderr.startswith("dra-bridge: error: --nodes:")


def test_the_shipped_example_export_plans_offline_from_a_folder(capsys):
    """Issue 46: `rollout plan -f` can be tried without a cluster: examples/cluster/ is an export
    (Nodes, shadow slices, NVIDIA's classes, pods, a budget), read as a folder."""
    from app.cli.main import main

    assert main(["rollout", "plan", "-f", str(ROOT / "examples" / "cluster"), "-o", "json"]) == 1  # blocked
    planned = json.loads(capsys.readouterr().out)
    waves = planned["waves"]
    assert [w["nodes"] for w in waves] == [["gpu-2"], ["gpu-0"], ["gpu-1"]]
    assert any("research/notebook is a bare pod" in b for b in waves[2]["blockers"])


def test_a_dra_node_counts_room_only_from_pools_the_scheduler_allocates_from():
    """Issue 47: a pool whose resourceSliceCount says more slices than are published, or whose
    slices are of an older generation than another of its slices, is no room (upstream's
    GatherPools): the node serves nothing on DRA until its driver has published the rest."""
    whole = slices("n")
    assert (rollout.node_view(node("n"), whole, SWITCHES).side, rollout.node_view(node("n"), whole, SWITCHES).gpus) \
        == (rollout.DRA, 8)
    incomplete = [json.loads(json.dumps(s)) for s in whole]
    for s in incomplete:
        s["spec"]["pool"]["resourceSliceCount"] += 1
    view = rollout.node_view(node("n", labels={"nvidia.com/gpu.count": "8"}), incomplete, SWITCHES)
    assert view.side == rollout.NEITHER  # a GPU node (its labels say) whose GPUs nothing serves now
    stale = [json.loads(json.dumps(s)) for s in whole]
    newer = json.loads(json.dumps(whole[0]))
    newer["metadata"]["name"] += "-next"
    newer["spec"]["pool"]["generation"] += 1
    newer["spec"]["pool"]["resourceSliceCount"] = 1
    newer["spec"]["devices"] = newer["spec"]["devices"][:2]
    assert rollout.node_view(node("n"), stale + [newer], SWITCHES).gpus == 2  # the older generation is gone


def test_a_move_record_is_typed_and_round_trips_and_a_bad_one_names_its_field():
    """Issue 57 item 5: what a move keeps of its node is a NodeBefore, written as JSON once and
    read back as the same; a record no dra-bridge wrote is refused naming the field."""
    before = rollout.NodeBefore({"nvidia.com/gpu.deploy.device-plugin": "true", "dra": None}, True,
                                {"nvidia.com/gpu": 8}, 8, ("NVIDIA H100",), {"1g.10gb": 7})
    record = rollout.MoveRecord(3, rollout.Step.CORDONED, before, {"team-a/Deployment/web": 2})
    again = rollout.MoveRecord.of({"metadata": {"name": "n", "annotations": record.annotations()}})
    assert again == record
    bad = {**record.annotations(), rollout.BEFORE: json.dumps({"gpus": "eight"})}
    with pytest.raises(InputError, match=r"\.gpus: expected a whole number"):
        rollout.MoveRecord.of({"metadata": {"name": "n", "annotations": bad}})
