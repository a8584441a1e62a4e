"""Issue 13: the three migration paths (native / rewrite / legacy) and why each was chosen."""

import pytest

from app.migration import Facts, choose_path, plan_pod, served_resources
from app.policy import default_policy
from tests.helpers import container, pod

RULES = default_policy().migration
NATIVE_CLASSES = {
    "gpu.nvidia.com": {"spec": {"extendedResourceName": "nvidia.com/gpu", "selectors": []}},
    "mig-1g.10gb.nvidia.com": {"spec": {"extendedResourceName": "nvidia.com/mig-1g.10gb"}},
    "other": {"spec": {}},
}
SERVED = Facts(served_resources(NATIVE_CLASSES))


WHOLE = RULES.model_copy(update={"fractional": "wholeDevice"})


def choose(obj, facts=SERVED, path="auto", rules=RULES):
    return choose_path(obj, plan_pod(obj, rules, "ns"), rules, path, facts)


def test_served_resources_come_from_extended_resource_names():
    assert served_resources(NATIVE_CLASSES) == {"nvidia.com/gpu": "gpu.nvidia.com",
                                                "nvidia.com/mig-1g.10gb": "mig-1g.10gb.nvidia.com"}


def test_plain_counts_served_by_a_class_take_the_native_path():
    choice = choose(pod([container("a", {"nvidia.com/gpu": 2}), container("b", {"nvidia.com/mig-1g.10gb": 1})]))
    assert choice.path == "native"
    assert "nvidia.com/gpu by DeviceClass gpu.nvidia.com" in choice.reason
    assert "nvidia.com/mig-1g.10gb by DeviceClass mig-1g.10gb.nvidia.com" in choice.reason


@pytest.mark.parametrize("limits, why", [
    ({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000}, "share of a device"),
    ({"nvidia.com/mig-2g.20gb": 1}, "no DeviceClass serves nvidia.com/mig-2g.20gb"),
])
def test_what_native_cannot_give_is_rewritten(limits, why):
    choice = choose(pod([container("a", limits)]), rules=WHOLE)
    assert choice.path == "rewrite" and why in choice.reason


def test_an_annotation_that_narrows_devices_is_rewritten():
    obj = pod([container("a", {"nvidia.com/gpu": 1})])
    obj["metadata"]["annotations"] = {"nvidia.com/use-gputype": "H100"}
    choice = choose(obj)
    assert choice.path == "rewrite" and "nvidia.com/use-gputype" in choice.reason


def test_no_inventory_keeps_the_rewrite_path():
    assert choose(pod(), Facts()).path == "rewrite"


def test_pods_bound_to_a_node_or_another_scheduler_stay_on_the_device_plugin():
    bound = choose(pod(nodeName="gpu-1"))
    assert bound.path == "legacy" and "spec.nodeName" in bound.reason
    other = choose(pod(schedulerName="volcano"))
    assert other.path == "legacy" and "'volcano'" in other.reason and "draSchedulers" in other.reason


def test_a_claim_that_could_never_be_satisfied_stays_legacy():
    never = Facts({}, lambda template, tolerates_cordon=False: ("never", "no device matches"))
    choice = choose(pod(), never)
    assert choice.path == "legacy" and "could never be satisfied here (no device matches)" in choice.reason
    assert choice.code == "dra-never"
    assert choose(pod(), Facts({}, lambda template, tolerates_cordon=False: ("serves", ""))).path == "rewrite"


@pytest.mark.parametrize("path, served, expected", [
    ("rewrite", SERVED, "rewrite"), ("legacy", SERVED, "legacy"),
    ("native", SERVED, "native"), ("native", Facts({}), "legacy"),
])
def test_policy_path_overrides(path, served, expected):
    assert choose(pod(), served, path).path == expected


def test_policy_path_per_namespace():
    from app.policy import parse_policy
    policy = parse_policy("namespaces:\n- names: [old]\n  path: legacy\n", "p.yaml")
    assert policy.for_namespace("old").path == "legacy"
    assert policy.for_namespace("new").path == "auto"
    rewrite_all = policy.model_copy(update={"migration": policy.migration.model_copy(update={"path": "rewrite"})})
    assert rewrite_all.for_namespace("new").path == "rewrite" and rewrite_all.for_namespace("old").path == "legacy"


def test_mig_single_strategy_labels_are_not_served_by_the_whole_gpu_class():
    """nvidia.com/gpu with a GFD MIG product label means a MIG device: native would hand out a
    whole GPU (or nothing), so the rewrite keeps the meaning."""
    obj = pod([container("a", {"nvidia.com/gpu": 1})],
              nodeSelector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"})
    choice = choose(obj)
    assert choice.path == "rewrite" and "mig.nvidia.com" in choice.reason


def test_issue_23_a_rewritten_pod_keeps_the_toleration_its_legacy_request_implied():
    """GPU nodes tainted nvidia.com/gpu:NoSchedule admit pods the ExtendedResourceToleration plugin
    tolerated for *requesting* nvidia.com/gpu; a rewritten pod requests it no more."""
    planned = plan_pod(pod([container("a", {"nvidia.com/gpu": 1})]), RULES, "ns").pod
    assert planned["spec"]["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    own = {"key": "nvidia.com/gpu", "operator": "Exists"}  # any effect: already tolerated, not doubled
    planned = plan_pod(pod([container("a", {"nvidia.com/gpu": 1})], tolerations=[own]), RULES, "ns").pod
    assert planned["spec"]["tolerations"] == [own]
    narrower = {"key": "nvidia.com/gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}
    planned = plan_pod(pod([container("a", {"nvidia.com/gpu": 1})], tolerations=[narrower]), RULES, "ns").pod
    assert planned["spec"]["tolerations"][-1]["operator"] == "Exists"
