"""Shadow slices are judged as the NVIDIA devices they stand for."""

import pathlib

import yaml

from app import dra
from app.dra.shadow import SHADOW_LABEL
from app.reporter import SHADOW_DRIVER, node_from_description, render

FAKE = pathlib.Path(__file__).resolve().parents[2] / "app" / "data" / "fake"
CLASSES = {c["metadata"]["name"]: c for c in render.device_classes()}


def node(name):
    return node_from_description(yaml.safe_load((FAKE / f"{name}.yaml").read_text()), name)


def shadow_slices(fake, node_name):
    return render.slices(node(fake), node_name, SHADOW_DRIVER, 1, qualify=True, shadow_of="gpu.nvidia.com")


def claim(count, selector="device.attributes['gpu.nvidia.com'].productName.contains('H100')",
          device_class="gpu.nvidia.com", capacity=None):
    exactly = {"deviceClassName": device_class, "count": count, "selectors": [{"cel": {"expression": selector}}]}
    if capacity:
        exactly["capacity"] = {"requests": capacity}
    return dra.parse_claim_spec({"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}})


def test_the_label_is_the_one_the_reporter_writes():
    assert SHADOW_LABEL == render.SHADOW_LABEL
    [s] = shadow_slices("h100x8", "n1")
    assert s["metadata"]["labels"][SHADOW_LABEL] == "gpu.nvidia.com" and s["spec"]["driver"] == SHADOW_DRIVER


def test_nvidia_classes_judge_shadow_devices_as_nvidias():
    ix = dra.build_index(dra.Inventory(slices=shadow_slices("h100x8", "n1"), classes=CLASSES))
    assert dra.check(claim(8), ix).status == "satisfiable"
    # Capacity names in NVIDIA's domain are NVIDIA's bare names again: requests name them so.
    assert dra.check(claim(1, capacity={"memory": "79Gi"}), ix).status == "satisfiable"
    impossible = dra.check(claim(9), ix)
    assert impossible.status == "never" and "gpus" in impossible.message
    # Without the label the same slices are another driver's: NVIDIA's classes select nothing.
    unlabelled = shadow_slices("h100x8", "n1")
    del unlabelled[0]["metadata"]["labels"][SHADOW_LABEL]
    assert dra.check(claim(1), dra.build_index(dra.Inventory(slices=unlabelled, classes=CLASSES))).status == "never"


def test_real_nvidia_slices_win_over_shadows_of_the_same_node():
    real = render.slices(node("l4x4"), "n1", "gpu.nvidia.com", 1)
    shadows = shadow_slices("h100x8", "n1") + shadow_slices("h100x8", "n2")
    ix = dra.build_index(dra.Inventory(slices=shadows + real, classes=CLASSES))
    assert ix.device_count == 4 + 8  # n1: NVIDIA's 4 L4s; n2: the shadow's 8 H100s
    assert dra.check(claim(8), ix).example_node == "n2"


def test_the_live_index_takes_shadow_changes_by_full_builds():
    first = shadow_slices("h100x8", "n1")
    live = dra.LiveIndex(first, CLASSES, {}, None)
    assert dra.check(claim(8), live.index).status == "satisfiable"
    assert live.slice_changed(first[0]["metadata"]["name"], None) is None  # a full build decides
    real = render.slices(node("l4x4"), "n1", "gpu.nvidia.com", 1)
    assert live.slice_changed(real[0]["metadata"]["name"], real[0]) is None  # a node shadows stand in for
    ix = live.rebuild(first + real)
    assert ix.device_count == 4


def test_a_tainted_gpu_is_named_when_it_is_why_a_claim_cannot_fit():
    ix = dra.build_index(dra.Inventory(slices=shadow_slices("gb200x4", "n1"), classes=CLASSES))
    gb200 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA GB200'"
    assert dra.check(claim(3, selector=gb200), ix).status == "satisfiable"
    verdict = dra.check(claim(4, selector=gb200), ix)  # GPU 3 carries gpu.nvidia.com/xid=79:NoSchedule
    assert verdict.status == "never" and "4 matching (needs 4), 1 of them tainted" in verdict.message


def real_slices(fake, node_name):
    return render.slices(node(fake), node_name, "gpu.nvidia.com", 1)


def path_of(ix, pod_obj):
    from app.migration import choose_path, plan_pod
    from app.policy import default_policy
    from app.application import index_facts

    rules = default_policy().migration
    plan = plan_pod(pod_obj, rules, "team-a")
    return choose_path(pod_obj, plan, rules, "auto", index_facts(ix, rules, dra.TemplateVerdicts(ix, "spec").dra))


def gpu_pod(count=1):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a"},
            "spec": {"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": count}}}]}}


def test_issue_23_a_shadow_only_cluster_keeps_pods_on_the_device_plugin():
    """The device plugin serves every GPU node, our reporter shadows them, NVIDIA's driver serves
    none: a rewritten pod would wait for devices nothing can allocate. It stays legacy, saying why."""
    ix = dra.build_index(dra.Inventory(slices=shadow_slices("h100x8", "gpu-a") + shadow_slices("h100x8", "gpu-b"),
                                       classes=CLASSES))
    assert dra.check(claim(8), ix).status == "satisfiable"  # validation still judges them as NVIDIA's
    choice = path_of(ix, gpu_pod(2))
    assert choice.path == "legacy"
    assert "only nodes no DRA driver serves yet have such devices (2 shadowed" in choice.reason
    assert "it would be rewritten once NVIDIA's driver serves node gpu-a" in choice.reason
    assert choice.code == "dra-shadow"


def test_issue_23_where_nvidias_driver_serves_a_node_pods_are_rewritten_onto_it():
    ix = dra.build_index(dra.Inventory(slices=shadow_slices("h100x8", "gpu-a") + real_slices("h100x8", "gpu-b"),
                                       classes=CLASSES))
    assert path_of(ix, gpu_pod(2)).path == "rewrite"
    # More GPUs than the served node has, fewer than a shadowed one offers: not served by DRA now.
    ix = dra.build_index(dra.Inventory(slices=shadow_slices("h100x8", "gpu-a") + real_slices("l4x4", "gpu-b"),
                                       classes=CLASSES))
    assert path_of(ix, gpu_pod(8)).path == "legacy"


def test_issue_23_no_device_class_means_legacy_not_a_rewrite():
    ix = dra.build_index(dra.Inventory(slices=real_slices("h100x8", "gpu-a"), classes={}))
    choice = path_of(ix, gpu_pod(1))
    assert choice.path == "legacy" and "DeviceClass 'gpu.nvidia.com' does not exist" in choice.reason
