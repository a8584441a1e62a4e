import json

import pytest

from app.migration import MIGRATION_ANNOTATION, plan_pod
from app.policy import default_policy, parse_policy
from tests.helpers import claims_of, container, pod, requests_of

RULES = default_policy().migration


def plan(p, rules=RULES):
    return plan_pod(p, rules, "team-a")


def only_request(result):
    reqs = requests_of(result)
    assert len(reqs) == 1
    return reqs[0]


def selectors(request):
    return [s["cel"]["expression"] for s in request["exactly"].get("selectors", [])]


def test_gpu_limit_becomes_template_request_and_limit_is_removed():
    result = plan(pod([container("main", {"nvidia.com/gpu": 2, "cpu": "1"})]))
    assert result.status == "migrated"
    req = only_request(result)
    assert req["exactly"] == {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 2}
    main = result.pod["spec"]["containers"][0]
    assert main["resources"]["limits"] == {"cpu": "1"}
    assert claims_of(result.pod) == [{"name": "dra-bridge-gpus", "request": "main"}]
    template = result.templates[0]
    assert result.pod["spec"]["resourceClaims"] == [
        {"name": "dra-bridge-gpus", "resourceClaimTemplateName": template["metadata"]["name"]}]
    assert template["metadata"]["namespace"] == "team-a"
    assert template["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "dra-bridge"}


def test_requests_only_and_quoted_counts_are_read():
    result = plan(pod([container("main", requests={"nvidia.com/gpu": "3"})]))
    assert only_request(result)["exactly"]["count"] == 3
    assert "resources" not in result.pod["spec"]["containers"][0] or \
        "requests" not in result.pod["spec"]["containers"][0]["resources"]


def test_template_name_is_deterministic_and_depends_only_on_the_spec():
    a = plan(pod([container("main", {"nvidia.com/gpu": 1})]))
    b = plan_pod(pod([container("main", {"nvidia.com/gpu": 1})]), RULES, "other-ns")
    c = plan(pod([container("main", {"nvidia.com/gpu": 2})]))
    name = a.templates[0]["metadata"]["name"]
    assert name == b.templates[0]["metadata"]["name"]
    assert name != c.templates[0]["metadata"]["name"]
    assert name.startswith("dra-bridge-") and len(name) <= 63


def test_each_container_gets_its_own_request_so_devices_stay_distinct():
    result = plan(pod([container("a", {"nvidia.com/gpu": 1}), container("b"), container("c", {"nvidia.com/gpu": 2})]))
    names = [r["name"] for r in requests_of(result)]
    assert names == ["a", "c"]
    assert claims_of(result.pod, index=0) == [{"name": "dra-bridge-gpus", "request": "a"}]
    assert claims_of(result.pod, index=1) == []
    assert claims_of(result.pod, index=2) == [{"name": "dra-bridge-gpus", "request": "c"}]


def test_init_container_reuses_app_container_devices_like_the_device_plugin():
    # Device plugin: the pod needs max(init=1, app=2) = 2 GPUs, not 3.
    result = plan(pod([container("app", {"nvidia.com/gpu": 2})], init=[container("warmup", {"nvidia.com/gpu": 1})]))
    reqs = requests_of(result)
    assert [(r["name"], r["exactly"]["count"]) for r in reqs] == [("app", 2)]
    assert claims_of(result.pod, "initContainers") == [{"name": "dra-bridge-gpus", "request": "app"}]
    assert any("warmup sees 2 devices" in w for w in result.warnings)


def test_init_container_needing_more_than_app_adds_only_the_difference():
    result = plan(pod([container("app", {"nvidia.com/gpu": 1})], init=[container("big", {"nvidia.com/gpu": 3})]))
    counts = {r["name"]: r["exactly"]["count"] for r in requests_of(result)}
    assert counts == {"app": 1, "big": 2}
    assert sum(counts.values()) == 3  # max(3, 1)
    assert [c["request"] for c in claims_of(result.pod, "initContainers")] == ["app", "big"]


def test_init_container_alone_gets_a_request():
    result = plan(pod([container("app")], init=[container("setup", {"nvidia.com/gpu": 1})]))
    assert [(r["name"], r["exactly"]["count"]) for r in requests_of(result)] == [("setup", 1)]
    assert claims_of(result.pod) == []


def test_sidecar_runs_alongside_so_it_never_shares():
    sidecar = container("proxy", {"nvidia.com/gpu": 1}, restartPolicy="Always")
    result = plan(pod([container("app", {"nvidia.com/gpu": 1})], init=[sidecar]))
    counts = {r["name"]: r["exactly"]["count"] for r in requests_of(result)}
    assert counts == {"proxy": 1, "app": 1}


def test_init_after_sidecar_cannot_take_the_running_sidecars_devices():
    sidecar = container("side", {"nvidia.com/gpu": 1}, restartPolicy="Always")
    init = container("later-init", {"nvidia.com/gpu": 1})
    result = plan(pod([container("app")], init=[sidecar, init]))
    counts = {r["name"]: r["exactly"]["count"] for r in requests_of(result)}
    assert counts == {"side": 1, "later-init": 1}


def test_mig_mixed_strategy_names_map_to_mig_class_with_profile_selector():
    result = plan(pod([container("m", {"nvidia.com/mig-1g.10gb": 2})]))
    req = only_request(result)
    assert req["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert req["exactly"]["count"] == 2
    assert "'profile' in device.attributes['gpu.nvidia.com'] && " \
           "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'" in selectors(req)


def test_mig_single_strategy_product_label_turns_gpu_into_mig_request():
    p = pod([container("m", {"nvidia.com/gpu": 1})], nodeSelector={"nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb"})
    result = plan(p)
    req = only_request(result)
    assert req["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert any("profile == '1g.5gb'" in s for s in selectors(req))
    assert any("'a100-sxm4-40gb'" in s for s in selectors(req))
    assert "nodeSelector" not in result.pod["spec"]


def test_time_slicing_shared_resource_becomes_one_gpu_with_a_warning():
    result = plan(pod([container("t", {"nvidia.com/gpu.shared": 4})]))
    assert only_request(result)["exactly"]["count"] == 1
    assert any("4 replicas become 1 device" in w for w in result.warnings)


def test_hami_memory_becomes_capacity_selector_and_cores_warn():
    result = plan(pod([container("h", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30})]))
    req = only_request(result)
    assert req["exactly"]["count"] == 1
    assert any("memory.compareTo(quantity('3000Mi')) >= 0" in s for s in selectors(req))
    assert any("GPU share" in w and "gpucores=30" in w for w in result.warnings)
    assert "resources" not in result.pod["spec"]["containers"][0] or \
        not result.pod["spec"]["containers"][0]["resources"].get("limits")


def test_hami_exclusive_percentages_do_not_warn_about_fractions():
    result = plan(pod([container("h", {"nvidia.com/gpu": 2, "nvidia.com/gpumem-percentage": 100,
                                       "nvidia.com/gpucores": 100})]))
    assert only_request(result)["exactly"]["count"] == 2
    assert not any("share" in w for w in result.warnings)


def test_fractional_skip_policy_leaves_pod_unchanged_with_reason():
    rules = parse_policy("migration:\n  fractional: skip\n  resources: []\n").migration
    rules = rules.model_copy(update={"resources": RULES.resources})
    result = plan_pod(pod([container("h", {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30})]), rules)
    assert result.status == "unmigratable"
    assert "fractional is skip" in result.reason


def test_hami_gputype_annotations_become_product_selectors():
    p = pod([container("h", {"nvidia.com/gpu": 1})])
    p["metadata"]["annotations"] = {"nvidia.com/use-gputype": "A100,V100", "nvidia.com/nouse-gputype": "1080"}
    sel = selectors(only_request(plan(p)))
    assert any("['A100', 'V100'].exists(t," in s and s.startswith("'productName' in") for s in sel)
    assert any(s.startswith("!('productName' in") and "['1080']" in s for s in sel)


def test_hami_uuid_annotation_selects_listed_devices():
    p = pod([container("h", {"nvidia.com/gpu": 1})])
    p["metadata"]["annotations"] = {"nvidia.com/use-gpuuuid": "GPU-a, GPU-b"}
    sel = selectors(only_request(plan(p)))
    assert "'uuid' in device.attributes['gpu.nvidia.com'] && " \
           "device.attributes['gpu.nvidia.com'].uuid in ['GPU-a', 'GPU-b']" in sel


def test_volcano_vgpu_number_and_memory():
    result = plan(pod([container("v", {"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-memory": 2000})]))
    req = only_request(result)
    assert req["exactly"]["count"] == 2
    assert any("quantity('2000Mi')" in s for s in selectors(req))


def test_volcano_gpu_memory_alone_means_one_gpu():
    req = only_request(plan(pod([container("v", {"volcano.sh/gpu-memory": 1024})])))
    assert req["exactly"]["count"] == 1
    assert any("quantity('1Gi')" in s or "quantity('1024Mi')" in s for s in selectors(req))


def test_koordinator_percent_units():
    req = only_request(plan(pod([container("k", requests={"kubernetes.io/gpu": "200"})])))
    assert req["exactly"]["count"] == 2


@pytest.mark.parametrize("op, values, expected", [
    ("In", ["ampere", "hopper"], "architecture.lowerAscii() in ['ampere', 'hopper']"),
    # GFD writes NVML's "Ada Lovelace" as ada-lovelace (a label value has no spaces)
    ("In", ["ada-lovelace"], "architecture.lowerAscii() in ['ada lovelace', 'ada-lovelace']"),
    ("NotIn", ["volta"], "!('architecture' in device.attributes['gpu.nvidia.com']) || "
                         "!(device.attributes['gpu.nvidia.com'].architecture.lowerAscii() in ['volta'])"),
    ("Exists", [], "'architecture' in device.attributes['gpu.nvidia.com']"),
    ("DoesNotExist", [], "!('architecture' in device.attributes['gpu.nvidia.com'])"),
])
def test_gfd_family_operators(op, values, expected):
    term = {"matchExpressions": [{"key": "nvidia.com/gpu.family", "operator": op, "values": values}]}
    p = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}})
    result = plan(p)
    assert any(expected in s for s in selectors(only_request(result)))
    assert "affinity" not in result.pod["spec"]


@pytest.mark.parametrize("op, sign", [("Gt", ">"), ("Lt", "<")])
def test_gfd_memory_gt_lt(op, sign):
    term = {"matchExpressions": [{"key": "nvidia.com/gpu.memory", "operator": op, "values": ["40000"]}]}
    p = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}})
    sel = selectors(only_request(plan(p)))
    assert f"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40000Mi')) {sign} 0" in sel[0]


def test_gfd_compute_capability_and_driver_major():
    p = pod(nodeSelector={"nvidia.com/gpu.compute.major": "9", "nvidia.com/cuda.driver.major": "580",
                          "kubernetes.io/arch": "amd64"})
    result = plan(p)
    sel = selectors(only_request(result))
    assert any("cudaComputeCapability.major() in [9]" in s for s in sel)
    assert any("driverVersion.major() in [580]" in s for s in sel)
    assert result.pod["spec"]["nodeSelector"] == {"kubernetes.io/arch": "amd64"}


def test_non_gfd_affinity_expressions_stay_on_the_node():
    exprs = [{"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]},
             {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]
    p = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": exprs}]}}})
    result = plan(p)
    kept = result.pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert kept["nodeSelectorTerms"] == [{"matchExpressions": [exprs[1]]}]
    assert any("'h100-80gb-hbm3'" in s for s in selectors(only_request(result)))


def test_several_gfd_only_terms_become_one_disjunction():
    terms = [{"matchExpressions": [{"key": "nvidia.com/gpu.family", "operator": "In", "values": ["ampere"]}]},
             {"matchExpressions": [{"key": "nvidia.com/gpu.family", "operator": "In", "values": ["hopper"]}]}]
    p = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
    result = plan(p)
    sel = selectors(only_request(result))
    assert len(sel) == 1 and " || " in sel[0] and "'ampere'" in sel[0] and "'hopper'" in sel[0]
    assert "affinity" not in result.pod["spec"]


def test_mixed_terms_are_left_on_the_node_with_a_note():
    terms = [{"matchExpressions": [{"key": "nvidia.com/gpu.family", "operator": "In", "values": ["ampere"]}]},
             {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}]
    p = pod(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
    result = plan(p)
    assert result.pod["spec"]["affinity"] == p["spec"]["affinity"]
    assert "selectors" not in only_request(result)["exactly"]
    assert any("kept on the node" in w for w in result.warnings)


def test_removing_translated_labels_can_be_turned_off():
    text = "migration:\n  removeTranslatedLabels: false\n  resources: []\n"
    rules = parse_policy(text).migration.model_copy(
        update={"resources": RULES.resources, "nodeLabels": RULES.nodeLabels})
    p = pod(nodeSelector={"nvidia.com/gpu.family": "ampere"})
    result = plan_pod(p, rules)
    assert result.pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.family": "ampere"}
    assert selectors(only_request(result))


def test_zero_gpus_removes_the_request_without_a_claim():
    result = plan(pod([container("cpu", {"nvidia.com/gpu": 0})]))
    assert result.status == "migrated"
    assert result.templates == []
    assert "resourceClaims" not in result.pod["spec"]
    assert "resources" not in result.pod["spec"]["containers"][0]


def test_pods_already_on_dra_are_unchanged():
    p = pod([container("a", {"nvidia.com/gpu": 1})])
    p["spec"]["resourceClaims"] = [{"name": "x", "resourceClaimTemplateName": "t"}]
    result = plan(p)
    assert result.status == "unchanged" and result.pod is None
    assert result.warnings  # the hybrid is worth telling the user about


def test_pods_without_gpu_requests_are_unchanged_silently():
    result = plan(pod([container("a", {"cpu": "1", "amd.com/gpu": 1})]))
    assert result.status == "unchanged" and not result.warnings


@pytest.mark.parametrize("value, fragment", [
    ("0.5", "not a whole number"), (-1, "negative"), ("abc", "not a valid quantity"), (True, "expected a quantity"),
])
def test_bad_counts_leave_the_pod_unchanged_naming_the_field(value, fragment):
    result = plan(pod([container("a", {"nvidia.com/gpu": value})]))
    assert result.status == "unmigratable"
    assert "spec.containers[0].resources.limits[nvidia.com/gpu]" in result.reason
    assert fragment in result.reason


def test_unknown_nvidia_resource_is_not_half_migrated():
    result = plan(pod([container("a", {"nvidia.com/gpu": 1, "nvidia.com/fancy": 1})]))
    assert result.status == "unmigratable"
    assert "nvidia.com/fancy" in result.reason


def test_more_devices_than_a_claim_may_hold_is_unmigratable():
    result = plan(pod([container("a", {"nvidia.com/gpu": "1e9"})]))
    assert result.status == "unmigratable"
    assert "32" in result.reason


def test_annotation_records_what_was_rewritten():
    p = pod([container("a", {"nvidia.com/gpu": 1})], nodeSelector={"nvidia.com/gpu.family": "hopper"})
    result = plan(p)
    record = json.loads(result.pod["metadata"]["annotations"][MIGRATION_ANNOTATION])
    assert record["containers"] == {"a": {"nvidia.com/gpu": "1"}}
    assert record["template"] == result.templates[0]["metadata"]["name"]
    assert record["nodeLabels"] == ["nodeSelector[nvidia.com/gpu.family]"]


def test_planner_does_not_mutate_its_input():
    p = pod([container("a", {"nvidia.com/gpu": 1})], nodeSelector={"nvidia.com/gpu.family": "hopper"})
    before = json.dumps(p, sort_keys=True)
    plan(p)
    assert json.dumps(p, sort_keys=True) == before


def test_odd_container_names_still_give_dns_label_request_names():
    long_name = "a" * 63
    result = plan(pod([container(long_name, {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 1})]))
    names = [r["name"] for r in requests_of(result)]
    assert len(set(names)) == 2
    assert all(len(n) <= 63 for n in names)


@pytest.mark.parametrize("init, app", [(0, 40_000), (10_000, 10_000), (20_000, 0)])
def test_planning_is_linear_in_containers(init, app):
    """Issue 12: 40,000 containers took 30 s and 10k init + 10k app 48 s (quadratic scans)."""
    import time

    def many(n, prefix):
        return [{"name": f"{prefix}{i}", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}
                for i in range(n)]
    big = {"metadata": {}, "spec": {"initContainers": many(init, "i"), "containers": many(app, "c")}}
    started = time.perf_counter()
    plan = plan_pod(big, RULES, "ns")
    assert time.perf_counter() - started < 3  # measured 0.1-0.3 s
    if app > 32:
        assert plan.status == "unmigratable" and "DRA limit of 32" in plan.reason
    else:
        assert plan.status == "migrated"  # init containers run one at a time: one request serves all
        assert len(plan.templates[0]["spec"]["spec"]["devices"]["requests"]) == 1


def _legacy_left(plan):
    """GPU resources of any system still on a migrated pod: a double allocation waiting to happen."""
    from app.migration import legacy_resources
    return legacy_resources(plan.pod["spec"], RULES)


@pytest.mark.parametrize("limits, devices", [
    ({"koordinator.sh/gpu": 100}, 1),
    ({"koordinator.sh/gpu": 200}, 2),
    ({"koordinator.sh/gpu-core": 100, "koordinator.sh/gpu-memory-ratio": 100}, 1),
    ({"koordinator.sh/gpu-core": 200, "koordinator.sh/gpu-memory-ratio": 200}, 2),  # Koordinator's units
    ({"koordinator.sh/gpu": 100, "koordinator.sh/gpu-core": 100}, 1),  # was: legacy kept AND a claim
    ({"volcano.sh/gpu-number": 2}, 2),
    ({"nvidia.com/gpu": 1, "nvidia.com/priority": 0}, 1),  # HAMi priority does not block migration
])
def test_other_systems_gpu_resources_are_migrated_without_leftovers(limits, devices):
    plan = plan_pod(pod([container("w", limits)]), RULES, "ns")
    assert plan.status == "migrated", plan.reason
    assert _legacy_left(plan) == []
    assert sum(r["exactly"]["count"] for r in requests_of(plan)) == devices


def test_priority_alone_is_removed_without_asking_for_a_device():
    plan = plan_pod(pod([container("w", {"nvidia.com/priority": 1})]), RULES, "ns")
    assert plan.status == "migrated" and not plan.templates and _legacy_left(plan) == []
    assert any("PriorityClass" in w for w in plan.warnings)


@pytest.mark.parametrize("limits", [{"koordinator.sh/gpu-core": 150}, {"volcano.sh/gpu-whatever": 1},
                                    {"koordinator.sh/gpu-unknown": 1}])
def test_unknown_or_partial_forms_are_never_left_on_a_migrated_pod(limits):
    plan = plan_pod(pod([container("w", {"nvidia.com/gpu": 1, **limits})]), RULES, "ns")
    assert plan.status == "unmigratable"  # not migrated with the unknown resource still on it


def test_gke_partition_size_label_means_one_mig_device_of_that_profile():
    p = pod([container("m", {"nvidia.com/gpu": 1})], nodeSelector={
        "cloud.google.com/gke-gpu-partition-size": "1g.5gb", "cloud.google.com/gke-accelerator": "nvidia-tesla-a100"})
    result = plan(p)
    req = only_request(result)
    assert req["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert any("profile == '1g.5gb'" in s for s in selectors(req))
    # Issue 23: both labels also pick (and autoscale) GKE's node pool: they stay on the pod.
    assert result.pod["spec"]["nodeSelector"] == p["spec"]["nodeSelector"]


@pytest.mark.parametrize("value, matches, misses", [
    ("nvidia-h100-80gb", ("NVIDIA H100 80GB HBM3", "81559Mi"), ("NVIDIA H100 PCIe 40GB", "40960Mi")),
    ("nvidia-tesla-a100", ("NVIDIA A100-SXM4-40GB", "40960Mi"), ("NVIDIA L4", "23034Mi")),
    ("nvidia-l4", ("NVIDIA L4", "23034Mi"), ("NVIDIA L40S", "46068Mi")),  # the model as a word, not a prefix
])
def test_gke_accelerator_label_becomes_a_product_selector(value, matches, misses):
    from app import cel
    result = plan(pod([container("m", {"nvidia.com/gpu": 1})], nodeSelector={"cloud.google.com/gke-accelerator": value}))
    [expr] = [s for s in selectors(only_request(result)) if "matches" in s]

    def device(product, memory):
        return cel.device_variable("gpu.nvidia.com", {"name": "g", "attributes": {"productName": {"string": product}},
                                                      "capacity": {"memory": {"value": memory}}})
    selector = cel.compile_selector(expr)
    assert selector.matches(device(*matches)) and not selector.matches(device(*misses))
    # Issue 23: it also selects (and autoscales) the GKE node pool: kept on the pod.
    assert result.pod["spec"]["nodeSelector"] == {"cloud.google.com/gke-accelerator": value}


@pytest.mark.parametrize("value, matches, misses", [
    ("l4", "NVIDIA L4", "NVIDIA L40S"), ("a10g", "NVIDIA A10G", "NVIDIA A100-SXM4-40GB"),
    ("a100", "NVIDIA A100-SXM4-80GB", "NVIDIA A10G"), ("t4", "Tesla T4", "NVIDIA L4"),
])
def test_issue_23_karpenter_gpu_name_becomes_a_model_selector_and_stays_on_the_node(value, matches, misses):
    """EKS with Karpenter: karpenter.k8s.aws/instance-gpu-name picks the instance type it launches."""
    from app import cel
    selector_in = {"karpenter.k8s.aws/instance-gpu-name": value}
    result = plan(pod([container("m", {"nvidia.com/gpu": 1})], nodeSelector=selector_in))
    [expr] = selectors(only_request(result))

    def device(product):
        return cel.device_variable("gpu.nvidia.com", {"name": "g", "attributes": {"productName": {"string": product}}})
    selector = cel.compile_selector(expr)
    assert selector.matches(device(matches)) and not selector.matches(device(misses))
    assert result.pod["spec"]["nodeSelector"] == selector_in
    # AKS's accelerator label says nothing about the model: left as it is, not translated.
    aks = plan(pod([container("m", {"nvidia.com/gpu": 1})], nodeSelector={"kubernetes.azure.com/accelerator": "nvidia"}))
    assert aks.pod["spec"]["nodeSelector"] == {"kubernetes.azure.com/accelerator": "nvidia"}
    assert not selectors(only_request(aks))


def test_mig_single_strategy_keeps_the_memory_label_on_the_node():
    """GFD single strategy labels gpu.memory with the MIG slice's memory: never dropped on both
    sides (it used to be removed from the pod and become no selector)."""
    p = pod([container("m", {"nvidia.com/gpu": 1})], nodeSelector={
        "nvidia.com/gpu.product": "A100-SXM4-40GB-MIG-1g.5gb", "nvidia.com/gpu.memory": "4864"})
    result = plan(p)
    req = only_request(result)
    assert req["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert result.pod["spec"]["nodeSelector"] == {"nvidia.com/gpu.memory": "4864"}
    assert any("kept on the node" in w for w in result.warnings)


def test_gke_partition_size_in_required_affinity():
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "cloud.google.com/gke-gpu-partition-size", "operator": "In",
                               "values": ["2g.10gb"]}]}]}}}
    req = only_request(plan(pod([container("m", {"nvidia.com/gpu": 1})], affinity=affinity)))
    assert req["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert all(s.strip() for s in selectors(req)) and any("'2g.10gb'" in s for s in selectors(req))


def test_hami_placement_policy_annotations_warn():
    p = pod([container("w", {"nvidia.com/gpu": 1})])
    p["metadata"]["annotations"] = {"hami.io/gpu-scheduler-policy": "binpack"}
    result = plan(p)
    assert result.status == "migrated"
    assert any("hami.io/gpu-scheduler-policy=binpack" in w and "no DRA equivalent" in w for w in result.warnings)


# Every pod annotation HAMi documents (docs/config.md, "Pod configs: annotations"), with a value.
HAMI_POD_ANNOTATIONS = {
    "nvidia.com/use-gpuuuid": "GPU-AAA,GPU-BBB", "nvidia.com/nouse-gpuuuid": "GPU-CCC",
    "nvidia.com/use-gputype": "A100", "nvidia.com/nouse-gputype": "Tesla V100-PCIE-32GB",
    "hami.io/node-scheduler-policy": "spread", "hami.io/gpu-scheduler-policy": "binpack",
    "hami.io/device-scoring-weights": "slot=1,core=1,memory=3", "nvidia.com/vgpu-mode": "mig",
}


@pytest.mark.parametrize("key", sorted(HAMI_POD_ANNOTATIONS))
def test_issue_23_no_hami_annotation_is_dropped_silently(key):
    """Each becomes a selector of the claim or is named in a warning."""
    p = pod([container("w", {"nvidia.com/gpu": 1})])
    p["metadata"]["annotations"] = {key: HAMI_POD_ANNOTATIONS[key]}
    result = plan(p)
    assert result.status == "migrated"
    first = HAMI_POD_ANNOTATIONS[key].split(",")[0].upper()  # product names are matched case-blind
    in_selectors = any(first in sel.upper() for sel in selectors(only_request(result)))
    assert in_selectors or any(key in w for w in result.warnings), result.warnings


def test_fraction_warning_names_the_cost_and_never_claims_dra_cannot_share():
    result = plan(pod([container("w", {"nvidia.com/gpu": 1, "nvidia.com/gpucores": 30})]))
    [note] = [w for w in result.warnings if "GPU share" in w]
    assert "gpucores=30" in note and "1 whole device" in note and "no DRA equivalent" not in note


def _topology_rules(require=False):
    from app.policy import TopologyRule
    return RULES.model_copy(update={"topology": TopologyRule(require=require)})


def test_multi_gpu_requests_prefer_an_aligned_set_then_any():
    import kubernetes_validate

    from app import dra
    from app.cli import load_inventory
    result = plan_pod(pod([container("w", {"nvidia.com/gpu": 4}), container("one", {"nvidia.com/gpu": 1})]),
                      _topology_rules(), "ns")
    [template] = result.templates
    devices = template["spec"]["spec"]["devices"]
    multi, single = devices["requests"]
    assert [s["name"] for s in multi["firstAvailable"]] == ["aligned", "any"]
    assert all(s["count"] == 4 and s["deviceClassName"] == "gpu.nvidia.com" for s in multi["firstAvailable"])
    assert single["exactly"]["count"] == 1  # one device needs no alignment
    assert devices["constraints"] == [{"requests": [f"{multi['name']}/aligned"],
                                       "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    kubernetes_validate.validate(template, "1.34.0", strict=True)
    claims = result.pod["spec"]["containers"][0]["resources"]["claims"]
    assert claims == [{"name": RULES.claimName, "request": multi["name"]}]
    verdict = dra.check(dra.parse_claim_spec(template["spec"]["spec"]), dra.build_index(load_inventory(None)))
    assert verdict.status == "satisfiable", verdict.message


def test_policy_can_require_alignment():
    result = plan_pod(pod([container("w", {"nvidia.com/gpu": 2})]), _topology_rules(require=True), "ns")
    devices = result.templates[0]["spec"]["spec"]["devices"]
    [request] = devices["requests"]
    assert request["exactly"]["count"] == 2
    assert devices["constraints"] == [{"requests": [request["name"]], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]


def _aligned(result):
    devices = result.templates[0]["spec"]["spec"]["devices"]
    return devices["requests"][0], devices.get("constraints")


def test_volcano_numa_policy_maps_to_a_numa_constraint():
    p = pod([container("w", {"volcano.sh/vgpu-number": 2})], schedulerName="volcano")
    for policy, required in (("best-effort", False), ("single-numa-node", True), ("restricted", True)):
        p["metadata"]["annotations"] = {"volcano.sh/numa-topology-policy": policy}
        request, constraints = _aligned(plan(p))
        assert constraints[0]["matchAttribute"] == "dra-bridge.io/numaNode"
        assert ("firstAvailable" not in request) == required, policy
    p["metadata"]["annotations"] = {"volcano.sh/numa-topology-policy": "none"}
    assert _aligned(plan(p))[1][0]["matchAttribute"] == "resource.kubernetes.io/pcieRoot"  # policy default


def test_hami_topology_aware_policy_prefers_aligned_gpus_even_with_topology_off():
    rules = RULES.model_copy(update={"topology": None})
    p = pod([container("w", {"nvidia.com/gpu": 4})])
    assert _aligned(plan(p, rules))[1] is None
    p["metadata"]["annotations"] = {"hami.io/gpu-scheduler-policy": "topology-aware"}
    result = plan(p, rules)
    request, constraints = _aligned(result)
    assert constraints == [{"requests": ["w/aligned"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    assert not any("no DRA equivalent" in w for w in result.warnings)
