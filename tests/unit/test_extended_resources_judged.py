"""Issue 56: a GPU asked through an extended resource a DeviceClass serves (KEP-5004: every
class's `deviceclass.resource.kubernetes.io/<class>`, and its `extendedResourceName`) was counted
by no rule: the scheduler's claim for it escaped per-pod limits and class rules. Now the pod is
judged with those asks as the claim the scheduler creates."""

import dataclasses

import pytest

from app import application
from app.policy import parse_policy
from tests.helpers import container, pod
from tests.unit.test_admin_rules import INDEX, validate

PER_POD = "defaults:\n  mode: enforce\n  maxDevicesPerPod: 4\n"
H100_ONLY = ("rules:\n- name: h100-only\n  validationActions: [Deny]\n  allowedDeviceClasses: [h100.nvidia.com]\n")
IMPLICIT = "deviceclass.resource.kubernetes.io/gpu.nvidia.com"


@pytest.mark.parametrize("where", ["containers", "initContainers"])
def test_the_implicit_class_resource_counts_toward_per_pod_limits(where):
    asked = pod([container("main", {IMPLICIT: 6})])
    if where == "initContainers":
        asked["spec"]["initContainers"] = asked["spec"].pop("containers")
        asked["spec"]["containers"] = [container("app", None)]
    denied = validate(asked, PER_POD)
    assert denied["allowed"] is False, denied
    message = denied["status"]["message"]
    assert "take 6 devices" in message and IMPLICIT in message, message
    assert validate(pod([container("main", {IMPLICIT: 2})]), PER_POD)["allowed"] is True


def test_a_class_extended_resource_name_is_counted_and_judged_by_class_rules(monkeypatch):
    classes = {**INDEX.classes, "gpu.nvidia.com": {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
        "spec": {**(INDEX.classes.get("gpu.nvidia.com") or {}).get("spec", {}),
                 "extendedResourceName": "example.com/accelerator"}}}
    index = dataclasses.replace(INDEX, classes=classes)
    monkeypatch.setattr("tests.unit.test_admin_rules.INDEX", index)
    asked = pod([container("main", {"example.com/accelerator": 6})])
    assert validate(asked, PER_POD)["allowed"] is False
    refused = validate(pod([container("main", {"example.com/accelerator": 1})]), H100_ONLY)
    assert refused["allowed"] is False and "h100-only" in refused["status"]["message"], refused
    # An extended resource no class serves is not a device this rule can see.
    assert validate(pod([container("main", {"example.com/nic": 6})]), PER_POD)["allowed"] is True


def test_a_migrated_resource_a_class_also_serves_is_counted_once():
    classes = {**INDEX.classes, "gpu.nvidia.com": {
        "metadata": {"name": "gpu.nvidia.com"}, "spec": {"extendedResourceName": "nvidia.com/gpu"}}}
    index = dataclasses.replace(INDEX, classes=classes)
    usage = application.engine.usage.pod_usage(pod([container("main", {"nvidia.com/gpu": 3})]),
                                               parse_policy(PER_POD), "team-a", classes=index.classes)
    [only] = usage.claims  # the device-plugin ask as its claim; no second one for the class's name
    assert only.legacy and "nvidia.com/gpu" in only.label


def test_the_background_scan_finds_them_by_the_same_engine():
    """Issue 56 item 7: `audit --policy` reports what admission would refuse, class resources too."""
    from app.application import scan

    existing = pod([container("main", {IMPLICIT: 6})])
    found = scan.scan([existing], parse_policy(PER_POD), INDEX, {"team-a": {}})
    assert [(f.kind, f.name, f.violation.rule) for f in found] == [("Pod", "p", "namespace-settings")]
    assert scan.scan([pod([container("main", {IMPLICIT: 2})])], parse_policy(PER_POD), INDEX, {"team-a": {}}) == []
