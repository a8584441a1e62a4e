"""A pod's share of a GPU keeps its meaning: consumable capacity, NVIDIA's sharing config, or a
whole device with a warning that names the cost (never a silent exclusive GPU)."""

import kubernetes_validate
import pytest

from app import dra
from app.migration import plan_pod
from app.policy import SharingRule, default_policy
from app.application import index_facts
from tests.helpers import container, pod

# Most tests here describe the whole-device fallback: a choice the policy must make (issue 23).
RULES = default_policy().migration.model_copy(update={"fractional": "wholeDevice"})
NVIDIA_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                              "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}


def gpu(name, memory="80Gi", shareable=True, cores=True):
    capacity = {"memory": {"value": memory}}
    if cores:
        capacity["dra-bridge.io/cores"] = {"value": "100"}
    device = {"name": name, "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100"}},
              "capacity": capacity}
    if shareable:
        device["allowMultipleAllocations"] = True
    return device


def inventory(devices, labels=None, node="node-1"):
    s = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"},
         "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node, "generation": 1,
                                                                        "resourceSliceCount": 1},
                  "devices": devices}}
    inv = dra.Inventory(slices=[s], classes={"gpu.nvidia.com": NVIDIA_CLASS})
    if labels is not None:
        inv.nodes = {node: labels}
    return inv


def facts(inv, rules=RULES):
    ix = dra.build_index(inv)
    return ix, index_facts(ix, rules, dra.TemplateVerdicts(ix, "spec").dra)


def planned(limits, inv=None, rules=RULES, **spec):
    sharing = facts(inv, rules)[1].sharing if inv is not None else None
    return plan_pod(pod([container("w", limits)], **spec), rules, "team-a", sharing)


def the_request(result):
    [request] = result.templates[0]["spec"]["spec"]["devices"]["requests"]
    return request


def exprs(alternative):
    return [s["cel"]["expression"] for s in alternative.get("selectors", [])]


def check_schema(result):
    for template in result.templates:
        kubernetes_validate.validate(template, "1.34.0", strict=True)
        dra.parse_claim_spec(template["spec"]["spec"], "spec")


def test_hami_memory_and_cores_become_consumable_capacity_with_a_whole_device_fallback():
    result = planned({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30}, inventory([gpu("g0")]))
    request = the_request(result)
    shared, whole = request["firstAvailable"]
    assert shared["name"] == "shared" and whole["name"] == "whole"
    assert shared["capacity"] == {"requests": {"memory": "3000Mi", "dra-bridge.io/cores": "30"}}
    assert "device.allowMultipleAllocations" in exprs(shared)
    assert "capacity" not in whole and "device.allowMultipleAllocations" not in exprs(whole)
    assert any("consumable capacity" in w and "nvidia.com/gpumem=3000" in w for w in result.warnings)
    check_schema(result)


def test_the_shared_alternative_is_satisfiable_and_two_shares_fit_one_device():
    inv = inventory([gpu("g0")])
    result = planned({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 30000}, inv)
    ix = dra.build_index(inv)
    spec = dra.parse_claim_spec(result.templates[0]["spec"]["spec"], "spec")
    assert dra.check(spec, ix).status == "satisfiable"
    # One share already holds 30000Mi of the 80Gi device: a second still fits, a third would not.
    key = ("gpu.nvidia.com", "node-1", "g0")
    from decimal import Decimal
    held = dra.build_index(inv, capacity={key: {"memory": Decimal(30000 * 2**20)}}, shared={key})
    assert dra.check(spec, held).status == "satisfiable"
    only_shared = {"devices": {"requests": [{"name": "w", "exactly": {
        **result.templates[0]["spec"]["spec"]["devices"]["requests"][0]["firstAvailable"][0]}}]}}
    only_shared["devices"]["requests"][0]["exactly"].pop("name")
    full = dra.build_index(inv, capacity={key: {"memory": Decimal(60000 * 2**20)}}, shared={key})
    assert dra.check(dra.parse_claim_spec(only_shared, "spec"), full).status == "unsatisfiable-now"


def test_memory_percentage_becomes_one_alternative_per_memory_size():
    inv = inventory([gpu("g0", "80Gi"), gpu("g1", "40Gi")])
    request = the_request(planned({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 25}, inv))
    names = [a["name"] for a in request["firstAvailable"]]
    assert names == ["shared-1", "shared-2", "whole"]
    amounts = {a["capacity"]["requests"]["memory"] for a in request["firstAvailable"][:2]}
    assert amounts == {"10240Mi", "20480Mi"}
    assert any("compareTo(quantity('40960Mi')) == 0" in e for e in exprs(request["firstAvailable"][0]))


def test_cores_without_a_cores_capacity_are_named_as_not_enforced():
    result = planned({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30},
                     inventory([gpu("g0", cores=False)]))
    assert the_request(result)["firstAvailable"][0]["capacity"] == {"requests": {"memory": "3000Mi"}}
    assert any("cores of the share not enforced" in w for w in result.warnings)


def test_without_shareable_devices_the_warning_names_the_cost():
    result = planned({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}, inventory([gpu("g0", shareable=False)]))
    request = the_request(result)
    assert request["exactly"]["count"] == 1 and "capacity" not in request["exactly"]
    [note] = [w for w in result.warnings if "GPU share" in w]
    assert "nvidia.com/gpumem=3000" in note and "1 whole device" in note and "no DRA equivalent" not in note


def test_no_inventory_means_a_whole_device_with_the_warning():
    result = planned({"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 2048})
    assert "exactly" in the_request(result)
    assert any("volcano.sh/vgpu-memory=2048" in w and "whole device" in w for w in result.warnings)


def rules_with(**sharing):
    return RULES.model_copy(update={"sharing": SharingRule(**sharing)})


def test_mps_config_keeps_the_limits_on_a_whole_gpu():
    result = planned({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30},
                     rules=rules_with(config="mps"))
    devices = result.templates[0]["spec"]["spec"]["devices"]
    assert devices["config"] == [{"requests": ["w"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
        "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
        "sharing": {"strategy": "MPS", "mpsConfig": {"defaultActiveThreadPercentage": 30,
                                                     "defaultPinnedDeviceMemoryLimit": "3000Mi"}}}}}]
    assert any("MPS config" in w and "3000Mi of memory" in w and "30% of the threads" in w for w in result.warnings)
    check_schema(result)


def test_config_applies_to_the_whole_device_alternative_when_capacity_is_preferred():
    result = planned({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}, inventory([gpu("g0")]),
                     rules=rules_with(config="timeSlicing"))
    devices = result.templates[0]["spec"]["spec"]["devices"]
    assert devices["config"][0]["requests"] == ["w/whole"]
    assert devices["config"][0]["opaque"]["parameters"]["sharing"] == {
        "strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}
    check_schema(result)


def test_by_default_a_share_never_falls_back_to_a_whole_device():
    """fractional: legacy (the default): where devices allow multiple allocations only the shared
    alternatives are asked for (a whole device would cost what the pod never had); where none
    does, the plan says what it would cost and the path choice leaves the pod on the device plugin."""
    default = default_policy().migration
    assert default.fractional == "legacy"
    kept = planned({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}, inventory([gpu("g0")]), rules=default)
    request = the_request(kept)
    assert "firstAvailable" not in request and request["exactly"]["capacity"]["requests"] == {"memory": "3000Mi"}
    assert not kept.costly
    whole = planned({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}, inventory([gpu("g0", shareable=False)]),
                    rules=default)
    assert whole.status == "migrated" and whole.costly == [
        "container w: its GPU share (nvidia.com/gpumem=3000) would cost 1 whole GPU(s)"]


def test_fractional_skip_keeps_only_the_share_or_leaves_the_pod():
    skip = RULES.model_copy(update={"fractional": "skip"})
    kept = planned({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}, inventory([gpu("g0")]), rules=skip)
    request = the_request(kept)
    assert "firstAvailable" not in request and request["exactly"]["capacity"]["requests"] == {"memory": "3000Mi"}
    left = planned({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000}, inventory([gpu("g0", shareable=False)]),
                   rules=skip)
    assert left.status == "unmigratable" and "fractional is skip" in left.reason
    replicas = planned({"nvidia.com/gpu.shared": 2}, rules=skip)
    assert replicas.status == "unmigratable"


@pytest.mark.parametrize("label,value", [
    ("nvidia.com/gpu.sharing-strategy", "time-slicing"),
    ("nvidia.com/gpu.sharing-strategy", "mps"),
    ("nvidia.com/gpu.replicas", "4"),
    ("cloud.google.com/gke-gpu-sharing-strategy", "time-sharing"),
    ("cloud.google.com/gke-max-shared-clients-per-gpu", "3"),
])
def test_a_plain_gpu_on_shared_nodes_is_a_share(label, value):
    result = planned({"nvidia.com/gpu": 1}, inventory([gpu("g0")]), nodeSelector={label: value})
    request = the_request(result)
    assert request["firstAvailable"][0]["name"] == "shared"
    assert "capacity" not in request["firstAvailable"][0]  # the device's own default share
    # GKE's labels also pick the node pool (issue 23): kept; GFD's become selectors only.
    assert ("nodeSelector" in result.pod["spec"]) == label.startswith("cloud.google.com/")
    assert result.shares == [f"w: node label {label}={value}"]


def test_not_shared_label_values_keep_whole_gpus():
    result = planned({"nvidia.com/gpu": 1}, inventory([gpu("g0")]),
                     nodeSelector={"nvidia.com/gpu.sharing-strategy": "none"})
    assert "exactly" in the_request(result) and not result.shares


def test_shared_product_suffix_marks_the_pod_as_a_share():
    result = planned({"nvidia.com/gpu": 1}, inventory([gpu("g0")]),
                     nodeSelector={"nvidia.com/gpu.product": "Tesla-T4-SHARED"})
    assert result.shares and "firstAvailable" in the_request(result)


def test_time_sliced_replicas_and_every_node_time_sliced():
    result = planned({"nvidia.com/gpu.shared": 4}, inventory([gpu("g0")]))
    assert result.shares == ["w: nvidia.com/gpu.shared=4"]
    shared_nodes = inventory([gpu("g0")], labels={"nvidia.com/gpu.sharing-strategy": "time-slicing"})
    _ix, f = facts(shared_nodes)
    assert "every GPU node is shared" in f.sharing.time_sliced
    plain = planned({"nvidia.com/gpu": 1}, shared_nodes)
    assert plain.shares and "firstAvailable" in the_request(plain)
    mixed = inventory([gpu("g0")], labels={"nvidia.com/gpu.sharing-strategy": "none"})
    assert facts(mixed)[1].sharing.time_sliced is None


def test_koordinator_percent_of_a_card_is_memory_and_cores():
    request = the_request(planned({"kubernetes.io/gpu": 50}, inventory([gpu("g0", "80Gi")])))
    assert request["firstAvailable"][0]["capacity"]["requests"] == {"dra-bridge.io/cores": "50", "memory": "40960Mi"}


def test_shareable_facts_ignore_devices_no_class_selects():
    other = gpu("g0")
    other["attributes"]["type"] = {"string": "mig"}
    _ix, f = facts(inventory([other, gpu("g1", "40Gi", shareable=False)]))
    assert f.sharing.classes == {}
    _ix, f = facts(inventory([gpu("g0", "80Gi"), gpu("g1", "40Gi", cores=False)]))
    devices = f.sharing.classes["gpu.nvidia.com"]
    assert devices.capacities == frozenset({"memory"}) and len(devices.memory) == 2


def test_a_share_never_takes_the_native_path():
    from app.migration import Facts, choose_path
    default = default_policy().migration
    p = pod([container("w", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000})])
    served = Facts(served={"nvidia.com/gpu": "gpu.nvidia.com"})
    choice = choose_path(p, plan_pod(p, default, "team-a"), default, "auto", served)
    # No device here allows multiple allocations: by default it stays on the device plugin (issue 23),
    assert choice.path == "legacy" and choice.code == "share" and "would cost 1 whole GPU(s)" in choice.reason
    # and is rewritten (never native) only when the policy accepts that cost.
    assert choose_path(p, plan_pod(p, RULES, "team-a"), RULES, "auto", served).path == "rewrite"


def test_memory_shares_of_a_rendered_shareable_gpu_fit_side_by_side():
    """What the e2e tier shows with upstream's scheduler, here with our feasibility: a second
    memory share fits next to the first on the reporter's shareable GPU (the first took its
    memory and the default 1% of compute, not all of it)."""
    import pathlib
    from decimal import Decimal

    import yaml

    from app.dra.search import consumed
    from app.reporter import node_from_description, render
    fake = pathlib.Path(__file__).resolve().parents[2] / "app" / "data" / "fake" / "l4x4.yaml"
    node = node_from_description(yaml.safe_load(fake.read_text()), "l4")
    node = type(node)(node.driver_version, node.cuda_driver_version, node.gpus[:1])
    inv = dra.Inventory(slices=render.slices(node, "node-1", "gpu.nvidia.com", 1, shareable=True),
                        classes={"gpu.nvidia.com": NVIDIA_CLASS})
    result = planned({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 10000}, inv)
    spec = dra.parse_claim_spec(result.templates[0]["spec"]["spec"], "spec")
    ix = dra.build_index(inv)
    [device] = ix.devices
    first = consumed({"memory": Decimal(10000 * 2**20)}, ix.shape_capacity[device.shape])
    held = dra.build_index(inv, capacity={device.key: first}, shared={device.key})
    verdict = dra.check(spec, held)
    assert verdict.status == "satisfiable"
