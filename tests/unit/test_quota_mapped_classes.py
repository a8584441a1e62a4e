"""Issue 34: in 1.37 a claim of a DeviceClass that declares extendedResourceName R is counted by
ResourceQuota under requests.R too (KEP-5004; the quota evaluator's addExtendedResourceQuota).
A namespace whose GPU quota limits requests.nvidia.com/gpu then counts rewritten pods already:
they are rewritten, not kept on the device plugin for their quota."""

import copy

from app import dra
from app.migration import choose_path, plan_pod, quota_escapes
from app.application import index_facts
from tests.unit.test_mixed_cluster import RULES, gpu_pod, plugin_node
from tests.unit.test_shadow import CLASSES, real_slices

QUOTA = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "team-a"},
         "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}


def choice(classes, path="auto"):
    objects = [*real_slices("h100x8", "dra-1"), *classes.values(), plugin_node("dp-1"), QUOTA]
    ix = dra.build_index(dra.inventory_from_objects([(0, o) for o in objects], "test"))
    pod = gpu_pod(2)
    plan = plan_pod(pod, RULES, "team-a")
    return choose_path(pod, plan, RULES, path, index_facts(ix, RULES, dra.TemplateVerdicts(ix, "spec").dra))


def mapped(resource):
    classes = copy.deepcopy(CLASSES)
    classes["gpu.nvidia.com"]["spec"]["extendedResourceName"] = resource
    return classes


def test_a_class_that_declares_the_quotas_resource_is_counted_by_it():
    assert choice(mapped("nvidia.com/gpu"), "rewrite").path == "rewrite"
    assert choice(mapped("nvidia.com/gpu")).path == "native"  # KEP-5004 serves it as written, counted too


def test_without_the_mapping_the_pod_stays_on_the_plugin_for_its_quota():
    kept = choice(CLASSES, "rewrite")
    assert kept.path == "legacy" and kept.code == "quota"
    assert "does not declare extendedResourceName nvidia.com/gpu" in kept.reason
    other = choice(mapped("example.com/gpu"), "rewrite")
    assert other.path == "legacy" and other.code == "quota"


def test_escapes_reads_each_limited_resource_against_each_class():
    hard = {"requests.nvidia.com/gpu": "4"}
    assert quota_escapes([("q", hard)], ["nvidia.com/gpu"], ["gpu.nvidia.com"], {"gpu.nvidia.com": "nvidia.com/gpu"}) \
        is None
    assert quota_escapes([("q", {**hard, "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4"})],
                         ["nvidia.com/gpu"], ["gpu.nvidia.com"]) is None
    found = quota_escapes([("q", hard)], ["nvidia.com/gpu"], ["gpu.nvidia.com", "mig.nvidia.com"],
                          {"gpu.nvidia.com": "nvidia.com/gpu"})
    assert found is not None and "mig.nvidia.com.deviceclass.resource.k8s.io/devices" in found
