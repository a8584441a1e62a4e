import orjson

from app.policy import parse_policy
from app import application
from app.server import admission, validation
from tests.helpers import container, pod, review
from tests.unit.device_inventory import build_index

INDEX = build_index()


def rct(requests, api="resource.k8s.io/v1"):
    return {"apiVersion": api, "kind": "ResourceClaimTemplate", "metadata": {"name": "t", "namespace": "team-a"},
            "spec": {"spec": {"devices": {"requests": requests}}}}


def gpus(count, cls="gpu.nvidia.com", selectors=None, **extra):
    exactly = {"deviceClassName": cls, "count": count, **extra}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": "gpus", "exactly": exactly}


def decide(obj, policy_text="", namespace="team-a", kind=None, labels=None):
    policy = parse_policy(policy_text)
    req = admission.parse_review(orjson.dumps(review(obj, namespace=namespace, kind=kind or obj["kind"])))
    settings = policy.for_namespace(namespace, labels or {})
    subject = application.subject_of(req.kind, req.obj, namespace, labels, req.raw.get("userInfo"))
    if req.kind == "Pod":
        outcome = application.evaluate_pod(req.obj, policy, subject, INDEX)
    else:
        outcome = application.evaluate_claim(req.obj, policy, settings, INDEX, subject)
    return validation.respond(req, outcome, settings)["response"]


ENFORCE = "defaults:\n  mode: enforce\n"


def test_satisfiable_claim_is_allowed_silently():
    assert decide(rct([gpus(8)]), ENFORCE) == {"uid": "uid-1", "allowed": True}


def test_never_satisfiable_claim_is_denied_with_request_and_closest_devices():
    resp = decide(rct([gpus(9)]), ENFORCE)
    assert resp["allowed"] is False and resp["status"]["code"] == 422
    assert "gpus: 8 matching (needs 9)" in resp["status"]["message"]


def test_selector_mismatch_denial_names_the_selector():
    resp = decide(rct([gpus(1, selectors=["device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"])]),
                  ENFORCE)
    message = resp["status"]["message"]
    assert "spec.spec.devices.requests[0].exactly.selectors[0]" in message and "Closest devices" in message


def test_cel_compile_error_is_denied_with_the_field_path():
    resp = decide(rct([gpus(1, selectors=["device.attributes["])]), ENFORCE)
    assert resp["allowed"] is False
    assert "spec.spec.devices.requests[0].exactly.selectors[0].cel.expression" in resp["status"]["message"]


def test_warn_mode_admits_with_warnings_and_audit_mode_annotates():
    warned = decide(rct([gpus(9)]))
    assert warned["allowed"] is True and any("needs 9" in w for w in warned["warnings"])
    audited = decide(rct([gpus(9)]), "defaults:\n  mode: audit\n")
    assert audited["allowed"] is True and "needs 9" in audited["auditAnnotations"]["validation"]


def test_policy_rules_classes_counts_and_admin_access():
    text = ENFORCE + "  allowedDeviceClasses: [mig.nvidia.com]\n  maxDevicesPerRequest: 2\n  maxDevicesPerClaim: 3\n"
    resp = decide(rct([gpus(4, adminAccess=True)]), text)
    message = resp["status"]["message"]
    assert "rule namespace-settings: spec.spec.devices.requests[0].exactly: DeviceClass 'gpu.nvidia.com' is " \
        "not allowed (allowed: mig.nvidia.com)" in message
    assert "asks for 4 devices, more than the limit of 2 per request" in message
    assert "spec: 4 devices exceed the limit of 3 per claim" in message
    assert "adminAccess: admin access is not allowed here" in message


def test_admin_access_allowed_in_listed_namespaces():
    text = ENFORCE + "namespaces:\n- names: [monitoring]\n  allowAdminAccess: true\n"
    assert decide(rct([gpus(1, adminAccess=True)]), text, namespace="monitoring")["allowed"] is True
    assert decide(rct([gpus(1, adminAccess=True)]), text)["allowed"] is False


def test_admin_access_needs_the_upstream_namespace_label_whatever_the_policy_says():
    text = ENFORCE + "namespaces:\n- names: [monitoring]\n  allowAdminAccess: true\n"
    admin = rct([gpus(1, adminAccess=True)])
    labelled = {"resource.kubernetes.io/admin-access": "true"}
    assert decide(admin, text, namespace="monitoring", labels=labelled)["allowed"] is True
    refused = decide(admin, text, namespace="monitoring", labels={"team": "infra"})
    assert refused["allowed"] is False
    assert "not labelled resource.kubernetes.io/admin-access=true" in refused["status"]["message"]
    # The label never allows more than the policy: team-a is not listed.
    assert decide(admin, text, namespace="team-a", labels=labelled)["allowed"] is False
    assert application.asks_admin_access(admin) and not application.asks_admin_access(rct([gpus(1)]))


def test_v1beta1_claims_are_converted():
    legacy_shape = [{"name": "gpus", "deviceClassName": "gpu.nvidia.com", "count": 1}]
    assert decide(rct(legacy_shape, "resource.k8s.io/v1beta1"), ENFORCE)["allowed"] is True


def test_legacy_pods_denied_where_migration_is_finished():
    legacy = pod([container("c", {"nvidia.com/gpu": 1})])
    text = "namespaces:\n- names: [done]\n  mode: enforce\n  forbidLegacy: true\n"
    resp = decide(legacy, text, namespace="done")
    assert resp["allowed"] is False and "c: nvidia.com/gpu" in resp["status"]["message"]
    assert decide(legacy, text)["allowed"] is True
