"""Issue 56: a pod naming a template that did not exist was admitted unjudged when the name began
with `dra-bridge-`, and the template created afterwards gave it 8 devices. A name is no pass now:
a template is judged as the API holds it; where none exists, only the template our planner writes
for the pod's own migration record (a dry run's rewrite on another replica) stands in for it."""

import base64
import copy

import jsonpatch
import orjson

from tests.helpers import container, pod
from tests.unit.test_admin_rules import mutate, validate

PER_POD = "defaults:\n  mode: enforce\n  maxDevicesPerPod: 4\n"


def rewritten(gpus: int) -> dict:
    answer = mutate(pod([container("main", {"nvidia.com/gpu": gpus})]), PER_POD)
    assert answer["allowed"] is True and "patch" in answer, answer
    return jsonpatch.apply_patch(pod([container("main", {"nvidia.com/gpu": gpus})]),
                                 orjson.loads(base64.b64decode(answer["patch"])))


def test_a_made_up_generated_name_that_does_not_exist_is_not_counted_as_nothing():
    forged = pod([container("main", None, resources={"claims": [{"name": "gpus"}]})],
                 resourceClaims=[{"name": "gpus", "resourceClaimTemplateName": "dra-bridge-0123456789abcdef"}])
    refused = validate(forged, PER_POD)
    assert refused["allowed"] is False and "does not exist" in refused["status"]["message"], refused


def test_a_dry_run_rewrite_is_judged_as_the_template_its_record_gives_on_any_replica():
    admitted = rewritten(2)
    assert validate(admitted, PER_POD)["allowed"] is True  # no replica remembers it, the API has none
    # The record edited to ask 8: our planner names that template otherwise, so it stands for nothing.
    tampered = copy.deepcopy(admitted)
    notes = tampered["metadata"]["annotations"]
    [key] = [k for k in notes if k.endswith("/migration")]
    notes[key] = notes[key].replace('"nvidia.com/gpu":"2"', '"nvidia.com/gpu":"8"').replace(
        '"nvidia.com/gpu": "2"', '"nvidia.com/gpu": "8"').replace('"nvidia.com/gpu":2', '"nvidia.com/gpu":8')
    assert notes[key] != admitted["metadata"]["annotations"][key], notes[key]
    refused = validate(tampered, PER_POD)
    assert refused["allowed"] is False and "does not exist" in refused["status"]["message"], refused


def test_a_template_the_api_holds_is_judged_as_it_is_whatever_its_name():
    admitted = rewritten(2)
    name = admitted["spec"]["resourceClaims"][0]["resourceClaimTemplateName"]
    eight = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
             "metadata": {"name": name, "namespace": "team-a"},
             "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": {
                 "deviceClassName": "gpu.nvidia.com", "count": 8}}]}}}}
    taken_over = validate(admitted, PER_POD, lookup=lambda ns, kind, n: eight if n == name else None)
    assert taken_over["allowed"] is False and "8 devices" in taken_over["status"]["message"], taken_over


def test_a_selector_our_cel_cannot_compile_is_refused_by_a_device_rule_not_waved_through(monkeypatch):
    """Issue 56: a selector we could not compile matched no device in our eyes, so allowedDevices
    ("no H100 here") let the claim through. Now a device rule refuses what it cannot judge."""
    from app import cel
    from tests.unit.test_admin_rules import H100, claim, exactly

    rule = "rules:\n- name: h100-only\n  validationActions: [Deny]\n  allowedDevices: \"%s\"\n" % H100
    odd = "device.attributes['gpu.nvidia.com'].existsOne(k, v, k == 'productName')"
    assert validate(claim("c", [exactly(1, selectors=[odd])]), rule)["allowed"] is False  # an L4 may match
    real = cel.compile_selector

    def gap(expression):
        if "existsOne" in expression:
            raise cel.CelError("undeclared reference to 'k'")
        return real(expression)
    monkeypatch.setattr(cel, "compile_selector", gap)
    refused = validate(claim("c", [exactly(1, selectors=[odd, H100])]), rule)
    assert refused["allowed"] is False and "cannot judge the devices it may get" in refused["status"]["message"]
    monkeypatch.setattr(cel, "compile_selector", real)
    assert validate(claim("c", [exactly(1, selectors=[odd, H100])]), rule)["allowed"] is True
