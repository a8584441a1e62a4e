"""Issue 23: path choices in a cluster still moving off the device plugin (device-plugin nodes,
NVIDIA's driver on some nodes, our reporter shadowing the rest), with quotas and Kueue watching."""

import pytest

from app import dra
from app.common import device_quota, extended_allocatable
from app.migration import Facts, choose_path, kueue_per_pod, plan_pod, plugin_nodes
from app.policy import default_policy
from app.application import index_facts
from tests.unit.test_shadow import CLASSES, real_slices, shadow_slices

RULES = default_policy().migration
H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}  # a GFD selector: the rewrite path, not native


def plugin_node(name, gpus=8, cordoned=False, **extra):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "spec": {"unschedulable": True} if cordoned else {},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus),
                                       "hugepages-1Gi": "0", **extra}}}


def gpu_pod(count=1, labels=None, owner=None, namespace="team-a", share=False):
    limits = {"nvidia.com/gpu": count, **({"nvidia.com/gpumem": 8000} if share else {})}
    meta = {"name": "p", "namespace": namespace, "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": owner, "name": "o", "uid": "u", "controller": True}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeSelector": dict(H100),
                     "containers": [{"name": "c", "image": "cuda", "resources": {"limits": limits}}]}}


def index(slices=(), nodes=(), quotas=(), claims=()):
    objects = [(0, o) for o in list(slices) + list(CLASSES.values()) + list(nodes) + list(quotas)]
    inventory = dra.inventory_from_objects(objects, "test")
    return dra.build_index(inventory, dra.allocated_devices(list(claims)))


def choose(ix, pod, rules=RULES):
    plan = plan_pod(pod, rules, pod["metadata"]["namespace"])
    return choose_path(pod, plan, rules, "auto", index_facts(ix, rules, dra.TemplateVerdicts(ix, "spec").dra))


def allocated(slices, node_name):
    """A claim holding every device of the node's slices."""
    results = [{"driver": s["spec"]["driver"], "pool": s["spec"]["pool"]["name"], "device": d["name"], "request": "r"}
               for s in slices for d in s["spec"]["devices"] if s["spec"].get("nodeName") == node_name]
    return {"status": {"allocation": {"devices": {"results": results}}}}


def test_what_a_node_advertises_to_pods_outside_dra():
    assert extended_allocatable(plugin_node("n", 8)) == {"nvidia.com/gpu": 8}
    assert extended_allocatable(plugin_node("n", 0)) == {}  # the plugin stopped (node flipped to DRA)
    assert extended_allocatable(plugin_node("n", 8, cordoned=True)) == {}  # takes no new pods
    assert extended_allocatable(plugin_node("n", 2, **{"example.kubernetes.io/x": "3", "amd.com/gpu": "1k"})) == \
        {"nvidia.com/gpu": 2, "amd.com/gpu": 1000}
    assert extended_allocatable({"metadata": {"name": "n"}}) == {}
    assert plugin_nodes({"b": {"nvidia.com/gpu": 8}, "a": {"nvidia.com/gpu": 4}, "c": {}}) == \
        {"nvidia.com/gpu": ("a", "b")}
    assert plugin_nodes(None) is None


def test_quota_keys_that_decide_a_path_are_kept_and_the_rest_ignored():
    quota = {"metadata": {"name": "gpus", "namespace": "ml"}, "spec": {"hard": {
        "requests.nvidia.com/gpu": 8, "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "8", "pods": "100",
        "requests.cpu": "64"}}}
    assert device_quota(quota) == ("ml", "gpus", {"requests.nvidia.com/gpu": "8",
                                                  "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "8"})
    assert device_quota({"metadata": {"name": "cpu"}, "spec": {"hard": {"requests.cpu": "1"}}}) is None


def test_dra_serving_now_rewrites_even_with_device_plugin_nodes_beside_it():
    slices = real_slices("h100x8", "dra-1")
    choice = choose(index(slices, [plugin_node("dp-1")]), gpu_pod(2))
    assert choice.path == "rewrite"


def test_all_dra_devices_in_use_keeps_the_pod_on_free_device_plugin_nodes():
    slices = real_slices("h100x8", "dra-1")
    busy = index(slices, [plugin_node("dp-1"), plugin_node("dp-2")], claims=[allocated(slices, "dra-1")])
    choice = choose(busy, gpu_pod(2))
    assert choice.path == "legacy" and choice.code == "dra-busy"
    assert "DRA cannot serve it now" in choice.reason and "2 node(s) advertise nvidia.com/gpu, e.g. dp-1" in choice.reason
    # An all-DRA cluster: nothing else could take it, so it waits for DRA devices on the rewrite path.
    assert choose(index(slices, [plugin_node("dra-1", 0)], claims=[allocated(slices, "dra-1")]),
                  gpu_pod(2)).path == "rewrite"


def test_more_gpus_than_any_dra_node_has_stay_on_the_device_plugin_nodes_that_have_them():
    choice = choose(index(real_slices("l4x4", "dra-1"), [plugin_node("dp-1")]), gpu_pod(8))
    assert choice.path == "legacy" and choice.code == "dra-never"
    assert "1 node(s) advertise nvidia.com/gpu, e.g. dp-1" in choice.reason
    alone = choose(index(real_slices("l4x4", "dra-1"), [plugin_node("dra-1", 0)]), gpu_pod(8))
    assert alone.path == "legacy" and "no node's device plugin advertises nvidia.com/gpu either" in alone.reason


def test_a_shadow_only_cluster_says_what_each_pod_becomes_once_nvidias_driver_serves_a_node():
    ix = index(shadow_slices("h100x8", "gpu-a") + shadow_slices("h100x8", "gpu-b"),
               [plugin_node("gpu-a"), plugin_node("gpu-b")])
    choice = choose(ix, gpu_pod(4))
    assert choice.path == "legacy" and choice.code == "dra-shadow"
    assert "rewritten once NVIDIA's driver serves node gpu-a" in choice.reason
    assert "2 node(s) advertise nvidia.com/gpu" in choice.reason


@pytest.mark.parametrize("fractional, path", [("legacy", "legacy"), ("wholeDevice", "rewrite")])
def test_a_share_costs_a_whole_gpu_only_when_the_policy_says_so(fractional, path):
    rules = RULES.model_copy(update={"fractional": fractional})
    choice = choose(index(real_slices("h100x8", "dra-1"), [plugin_node("dp-1")]), gpu_pod(1, share=True), rules)
    assert choice.path == path
    if path == "legacy":
        assert choice.code == "share" and "its GPU share (nvidia.com/gpumem=8000) would cost 1 whole GPU(s)" in choice.reason


def test_kueue_pods_admitted_one_by_one_keep_a_path_their_quota_counts():
    ix = index(real_slices("h100x8", "dra-1"), [plugin_node("dp-1")])
    queued = {"kueue.x-k8s.io/queue-name": "team-a"}
    assert kueue_per_pod(gpu_pod(labels=queued, owner="ReplicaSet")) == "team-a"
    assert kueue_per_pod(gpu_pod(labels=queued)) == "team-a"  # a plain pod
    assert kueue_per_pod(gpu_pod(labels=queued, owner="Job")) is None  # Kueue admitted the Job
    assert kueue_per_pod(gpu_pod(owner="ReplicaSet")) is None
    plain = gpu_pod(labels=queued, owner="StatefulSet")
    del plain["spec"]["nodeSelector"]
    choice = choose(ix, plain)
    assert choice.path == "legacy" and choice.code == "kueue" and "kueueDeviceClasses" in choice.reason
    assert choose(ix, gpu_pod(labels=queued, owner="Job")).path == "rewrite"
    mapped = RULES.model_copy(update={"kueueDeviceClasses": ["gpu.nvidia.com"]})
    assert choose(ix, plain, mapped).path == "rewrite"
    # The H100 nodeSelector becomes a CEL selector, which Kueue's DRA count refuses: mapped or not.
    narrowed = choose(ix, gpu_pod(labels=queued, owner="StatefulSet"), mapped)
    assert narrowed.path == "legacy" and "CEL selectors" in narrowed.reason


def test_a_quota_on_the_legacy_resource_alone_keeps_pods_where_it_counts_them():
    slices = real_slices("h100x8", "dra-1")
    legacy_only = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "team-a"},
                   "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}
    choice = choose(index(slices, [plugin_node("dp-1")], [legacy_only]), gpu_pod(2))
    assert choice.path == "legacy" and choice.code == "quota"
    assert "add gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 4" in choice.reason
    assert choose(index(slices, [plugin_node("dp-1")], [legacy_only]), gpu_pod(2, namespace="other")).path == "rewrite"
    both = {**legacy_only, "spec": {"hard": {"requests.nvidia.com/gpu": "4",
                                             "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4"}}}
    assert choose(index(slices, [plugin_node("dp-1")], [both]), gpu_pod(2)).path == "rewrite"


def test_facts_without_nodes_assume_the_device_plugin_our_users_run_today():
    facts = Facts({}, lambda template, tolerates_cordon=False: ("busy", "all in use"))
    plan = plan_pod(gpu_pod(2), RULES, "team-a")
    choice = choose_path(gpu_pod(2), plan, RULES, "auto", facts)
    assert choice.path == "legacy" and choice.reason.endswith(": left on the device plugin")


def dra_node(name, cordoned=False):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}},
            "spec": {"unschedulable": True} if cordoned else {}, "status": {"allocatable": {"cpu": "64"}}}


def test_a_cordoned_dra_node_is_no_room_so_pods_an_undo_evicts_stay_on_the_device_plugin():
    # Issue 30: undoing the only DRA node, its evicted pods came back rewritten onto its devices
    # (cordoned, about to leave DRA) and stayed Pending. The scheduler places no pod there.
    ix = index(real_slices("h100x8", "dra-1"), [dra_node("dra-1", cordoned=True)])
    choice = choose(ix, gpu_pod(1))
    assert choice.path == "legacy" and choice.code == "dra-cordoned"
    assert "only cordoned nodes have such devices (e.g. dra-1" in choice.reason
    open_ix = index(real_slices("h100x8", "dra-1"), [dra_node("dra-1")])
    assert choose(open_ix, gpu_pod(1)).path == "rewrite"
    both = index(real_slices("h100x8", "dra-1") + real_slices("h100x8", "dra-2"),
                 [dra_node("dra-1", cordoned=True), dra_node("dra-2")])
    assert choose(both, gpu_pod(1)).path == "rewrite"  # room on an open node


@pytest.mark.parametrize("toleration, tolerates", [
    ({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}, True),
    ({"operator": "Exists"}, True),  # tolerates every taint
    ({"key": "node.kubernetes.io/unschedulable", "effect": "NoExecute", "operator": "Exists"}, False),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, False),
])
def test_a_pod_that_tolerates_the_cordon_as_daemonset_pods_do_may_use_cordoned_nodes(toleration, tolerates):
    ix = index(real_slices("h100x8", "dra-1"), [dra_node("dra-1", cordoned=True)])
    pod = gpu_pod(1)
    pod["spec"]["tolerations"] = [toleration]
    assert (choose(ix, pod).path == "rewrite") is tolerates


@pytest.mark.parametrize("step, leaving", [("undoing", True), ("undo-evicted", True), ("undo-restored", True),
                                           ("undo-ready", False), ("moved", False), ("done", False)])
def test_a_node_a_rollout_takes_off_dra_is_no_room_even_for_pods_that_tolerate_its_cordon(step, leaving):
    # Issue 48, on real kubelets: a DaemonSet pod rewritten onto a node whose NVIDIA plugin is
    # about to leave keeps its claim prepared, and cannot stop once the plugin has gone.
    node = dra_node("dra-1", cordoned=True)
    node["metadata"]["annotations"] = {"dra-bridge.io/rollout-step": step}
    pod = gpu_pod(1)
    pod["spec"]["tolerations"] = [{"operator": "Exists"}]
    choice = choose(index(real_slices("h100x8", "dra-1"), [node]), pod)
    assert (choice.path == "legacy") is leaving
    if leaving:
        assert choice.code == "dra-cordoned" and "only nodes a rollout is taking back to the device plugin have such " \
            "devices (e.g. dra-1)" in choice.reason


def test_the_steps_that_leave_dra_are_the_undo_steps_before_the_device_plugin_is_back():
    from app.application.rollout.record import Step
    from app.common import vocabulary

    assert vocabulary.ROLLOUT_LEAVING_STEPS == {s.label for s in Step if s.undoing and s < Step.UNDO_READY}
