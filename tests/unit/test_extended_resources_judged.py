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


def scheduler_claim(count, pod_name="p"):
    """The claim kube-scheduler writes for a pod's extended resources (KEP-5004)."""
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {
        "generateName": f"{pod_name}-extended-resources-", "namespace": "team-a",
        "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": "u", "controller": True}]},
        "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": count}}]}}}


def test_the_schedulers_claim_is_judged_against_the_pod_it_serves():
    """Issue 56 item 1: a pod admitted before the rule asks six GPUs by its class's resource; the
    claim the scheduler writes for it is refused on CREATE, counted with the pod's other claims."""
    served = pod([container("main", {IMPLICIT: 6})])
    found = {("team-a", "Pod", "p"): served}
    lookup = lambda ns, kind, name: found.get((ns, kind, name))  # noqa: E731
    denied = validate(scheduler_claim(6), PER_POD, lookup=lookup)
    assert denied["allowed"] is False, denied
    assert "the scheduler's claim (generated) for pod p's extended resources" in denied["status"]["message"]
    assert validate(scheduler_claim(2), PER_POD, lookup=lookup)["allowed"] is True
    # Counted with what else the pod names: 3 + a 2-device claim > 4.
    two = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "two"},
           "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]}}}
    found[("team-a", "Pod", "p")] = pod([container("main", {IMPLICIT: 3})],
                                        resourceClaims=[{"name": "more", "resourceClaimName": "two"}])
    found[("team-a", "ResourceClaim", "two")] = two
    assert validate(scheduler_claim(3), PER_POD, lookup=lookup)["allowed"] is False
    # The pod gone (or unreadable as such): nothing to count it with, refused, said.
    gone = validate(scheduler_claim(1, pod_name="gone"), PER_POD, lookup=lookup)
    assert gone["allowed"] is False and "the pod it serves cannot be read" in gone["status"]["message"], gone
    # A tenant's own claim with no such annotation is judged as a claim only.
    plain = scheduler_claim(6)
    plain["metadata"]["annotations"] = {}
    assert validate(plain, PER_POD, lookup=lookup)["allowed"] is True


def test_who_created_the_pod_is_not_known_so_rules_exempting_users_are_left_out():
    found = {("team-a", "Pod", "p"): pod([container("main", {IMPLICIT: 6})])}
    exempting = ("rules:\n- name: capped\n  validationActions: [Deny]\n  maxDevicesPerPod: 4\n"
                 "  exclude: {users: [ops]}\n")
    assert validate(scheduler_claim(6), exempting, lookup=lambda ns, k, n: found.get((ns, k, n)))["allowed"] is True


def test_a_pod_read_that_fails_leaves_the_claim_unfinished_not_admitted_unjudged():
    from app import application
    from app.policy import parse_policy
    from tests.unit.test_admin_rules import INDEX as index

    def broken(_ns, _kind, _name):
        raise TimeoutError("API too slow")
    policy = parse_policy(PER_POD)
    subject = application.subject_of("ResourceClaim", scheduler_claim(6), "team-a", {}, None)
    outcome = application.evaluate_claim(scheduler_claim(6), policy, policy.for_namespace("team-a", {}), index,
                                         subject, lookup=broken)
    assert outcome.incomplete and "not judged against the pod it serves (TimeoutError" in outcome.incomplete
    assert application.unfinished_decision(policy.for_namespace("team-a", {})) == "deny"
