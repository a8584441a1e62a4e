"""Issue 44 item 4: an undo is planned like a run, and refused before it acts when the device
plugin could not start on the node again or an evicted pod would find no room."""

import json

import orjson

from app.application import rollout
from app.migration import recreated
from tests.unit.test_rollout import MIGRATE, SWITCHES, cluster, namespace, node, pod, slices, views

PLUGIN, DRA = SWITCHES.plugin_label, SWITCHES.dra_label
BEFORE = {"labels": {PLUGIN: "true", DRA: None}, "unschedulable": False, "advertised": {"nvidia.com/gpu": 8},
          "gpus": 8, "models": [], "mig": {}, "evicted": {}, "version": 1}


def moved(name, step="done", before=BEFORE):
    labels = {PLUGIN: "false", DRA: "true"} if step not in ("cordoned", "evicted") else {PLUGIN: "true"}
    return node(name, labels=labels, annotations={rollout.WAVE: "1", rollout.STEP: step,
                                                  rollout.BEFORE: json.dumps(before)})


def device_plugin(node_selector=None):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": "nvidia-device-plugin", "namespace": "gpu-operator"},
            "spec": {"template": {"spec": {"nodeSelector": node_selector or {PLUGIN: "true"}, "containers": []}}}}


def rewritten(name, node_name, gpus):
    """A pod our webhook rewrote: its claim holds `gpus` devices, its annotation records the asks."""
    found = pod(name, node_name, None, claims=f"{name}-gpu")
    found["metadata"]["annotations"] = {"dra-bridge.io/migration": orjson.dumps(
        {"containers": {"main": {"nvidia.com/gpu": str(gpus)}}, "template": "t"}).decode()}
    found["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpus"}]}
    claim = {"metadata": {"name": f"{name}-gpu", "namespace": "team-a"}, "status": {"allocation": {"devices": {
        "results": [{"driver": "gpu.nvidia.com", "pool": node_name, "device": f"gpu-{i}", "request": "gpus"}
                    for i in range(gpus)]}}}}
    return found, claim


def undo_plan(objects, daemonsets=(), number=1):
    nodes, pods = views(objects)
    records = {n["metadata"]["name"]: rollout.MoveRecord.of(n) for n in objects["nodes"]}
    return rollout.plan_undo(number, nodes, pods, records, list(daemonsets), objects.get("poddisruptionbudgets", []),
                             SWITCHES)


def test_recreated_puts_back_what_the_webhook_took_off_a_pod():
    found, _claim = rewritten("infer", "d0", 2)
    again = recreated(found)
    assert again["spec"]["containers"][0]["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    assert "resourceClaims" not in again["spec"] and "nodeName" not in again["spec"]
    assert "dra-bridge.io/migration" not in again["metadata"]["annotations"]
    assert found["spec"]["resourceClaims"]  # the pod read is left as it was


def test_undo_is_refused_when_no_device_plugin_daemonset_would_start_on_the_node():
    found, claim = rewritten("infer", "d0", 2)
    objects = cluster(nodes=[moved("d0")], resourceslices=slices("d0"), pods=[found], resourceclaims=[claim],
                      namespaces=[namespace("team-a", MIGRATE)])
    wave = undo_plan(objects)
    assert wave.nodes == ["d0"] and [p.key for p in wave.pods] == ["team-a/infer"]
    assert wave.blockers == [f"d0: no DaemonSet selects nodes by {PLUGIN}: nothing would start the device plugin "
                             f"there once its labels are restored ({PLUGIN}=true); install it (the GPU Operator's "
                             "device plugin, or NVIDIA's k8s-device-plugin chart with that nodeSelector), then undo"]
    elsewhere = device_plugin({PLUGIN: "true", "pool": "other"})
    [blocker] = undo_plan(objects, [elsewhere]).blockers
    assert blocker.startswith("d0: no device plugin DaemonSet would run there with its labels restored") \
        and "nodeSelector pool=other" in blocker
    wave = undo_plan(objects, [device_plugin()])
    assert not wave.blockers and wave.back == {"team-a/infer": "plugin"}  # its own node, back on the plugin


def test_undo_is_refused_when_an_evicted_pod_would_find_no_room_on_either_side():
    big, claim = rewritten("big", "d0", 8)
    small_before = {**BEFORE, "advertised": {"nvidia.com/gpu": 4}, "gpus": 4}
    objects = cluster(nodes=[moved("d0", before=small_before)], resourceslices=slices("d0"), pods=[big],
                      resourceclaims=[claim], namespaces=[namespace("team-a", MIGRATE)])
    [blocker] = undo_plan(objects, [device_plugin()]).blockers
    assert blocker.startswith("team-a/big (ReplicaSet/big-rs, 8 nvidia.com/gpu) would find no room on either "
                              "side once wave 1 is back on the device plugin")


def test_a_node_that_never_flipped_is_taken_back_without_evicting_or_a_daemonset():
    objects = cluster(nodes=[moved("c0", step="cordoned")], namespaces=[namespace("team-a", MIGRATE)],
                      pods=[pod("train", "c0", {"nvidia.com/gpu": "1"})])
    wave = undo_plan(objects)
    assert wave.pods == [] and wave.blockers == []
    assert wave.notes == ["c0: never left the device plugin (step cordoned): undo uncordons it and restores its "
                          "labels, evicting nothing"]


def test_selects_on_reads_node_selector_and_required_affinity():
    assert rollout.selects_on(device_plugin(), PLUGIN)
    assert not rollout.selects_on(device_plugin({"other": "x"}), PLUGIN)
    by_affinity = device_plugin()
    by_affinity["spec"]["template"]["spec"] = {"affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": PLUGIN, "operator": "In", "values": ["true"]}]}]}}}}
    assert rollout.selects_on(by_affinity, PLUGIN)



def test_undo_refuses_to_strand_a_pod_pinned_to_the_node_it_takes_back():
    pinned, claim = rewritten("local", "d0", 1)
    pinned["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "d0"}
    d1 = node("d1", labels={DRA: "true"})  # open DRA room elsewhere: the webhook would rewrite it again
    objects = cluster(nodes=[moved("d0"), d1], resourceslices=slices("d0") + slices("d1"), pods=[pinned],
                      resourceclaims=[claim], namespaces=[namespace("team-a", MIGRATE)])
    [blocker] = undo_plan(objects, [device_plugin()]).blockers
    assert blocker == ("team-a/local (ReplicaSet/local-rs) is pinned to d0: its owner's new pod would be rewritten "
                       "onto DRA (open DRA nodes have such devices) and could never run on d0 once it is back on the "
                       "device plugin")


def test_undo_after_a_budget_stop_refuses_while_a_replacement_waits_for_dra_devices_there():
    waiting = pod("web-2", None, None, claims="web-2-gpu", nodeSelector={"kubernetes.io/hostname": "c0"})
    waiting["status"]["phase"] = "Pending"
    objects = cluster(nodes=[moved("c0", step="cordoned")], namespaces=[namespace("team-a", MIGRATE)],
                      pods=[waiting], resourceclaims=[{"metadata": {"name": "web-2-gpu", "namespace": "team-a"},
                                                       "status": {}}])
    [blocker] = undo_plan(objects).blockers
    assert blocker.startswith("team-a/web-2 (ReplicaSet/web-2-rs) waits, Pending, for DRA devices on c0, which it is "
                              "pinned to: back on the device plugin, c0 could never run it. Continue the wave instead")
