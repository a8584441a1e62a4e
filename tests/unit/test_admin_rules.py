"""Admin rules hold whichever path a pod takes: the bypasses an admin found (issue 31) each
fail, every matching rule applies with its own actions, and a bad rule never loads."""

import orjson
import pytest

from app.common import PolicyError
from app.migration import OptIn
from app.policy import parse_policy
from app import application
from app.server import admission, mutation, validation
from tests.helpers import container, pod, review
from tests.unit.device_inventory import build_index
ADMIN_ACCESS = "resource.kubernetes.io/admin-access"


INDEX = build_index()
H100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
ON_H100 = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def claim(name, requests, kind="ResourceClaim"):
    spec = {"devices": {"requests": requests}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"spec": spec} if kind == "ResourceClaimTemplate" else spec}


def exactly(count=1, cls="gpu.nvidia.com", mode="ExactCount", selectors=(), **extra):
    body = {"deviceClassName": cls, "allocationMode": mode, **extra}
    if mode == "ExactCount":
        body["count"] = count
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": "gpus", "exactly": body}


def with_claims(*names, labels=None):
    obj = pod([container("main", None, None, resources={"claims": [{"name": n} for n in names]})],
              resourceClaims=[{"name": n, "resourceClaimName": n} for n in names])
    if labels:
        obj["metadata"]["labels"] = labels
    return obj


def validate(obj, policy_text, namespace="team-a", ns_labels=None, user="alice", groups=(), lookup=None):
    policy = parse_policy(policy_text)
    body = review(obj, namespace=namespace, kind=obj["kind"])
    body["request"]["userInfo"] = {"username": user, "groups": list(groups)}
    req = admission.parse_review(orjson.dumps(body))
    subject = application.subject_of(req.kind, req.obj, namespace, ns_labels, req.raw["userInfo"])
    settings = policy.for_namespace(namespace, ns_labels or {})
    if req.kind == "Pod":
        outcome = application.evaluate_pod(req.obj, policy, subject, INDEX, lookup or application.no_lookup)
    else:
        outcome = application.evaluate_claim(req.obj, policy, settings, INDEX, subject,
                                             lookup=lookup or application.no_lookup)
    return validation.respond(req, outcome, settings)["response"]


def mutate(obj, policy_text, namespace="team-a"):
    policy = parse_policy(policy_text)
    req = admission.parse_review(orjson.dumps(review(obj, namespace=namespace)))
    decision = mutation.plan_request(req, policy, {}, cache=application.PlanCache(),
                                     facts=application.cluster_facts(policy, INDEX))
    return mutation.respond(req, decision)["response"]


LIMIT_ONLY = "defaults:\n  mode: enforce\n  maxDevicesPerClaim: 4\n"


def test_a_legacy_pod_over_the_limit_is_denied_not_admitted_on_the_device_plugin():
    eight = pod([container("main", {"nvidia.com/gpu": 8})])
    denied = mutate(eight, LIMIT_ONLY)
    assert denied["allowed"] is False and "patch" not in denied
    message = denied["status"]["message"]
    assert "rule namespace-settings" in message and "8 devices exceed the limit of 4 per claim" in message
    # Where no mutation runs (a namespace not opted in), /validate judges the same ask.
    assert validate(eight, LIMIT_ONLY)["allowed"] is False
    assert mutate(pod([container("main", {"nvidia.com/gpu": 4})]), LIMIT_ONLY)["allowed"] is True


def test_two_claims_of_four_are_one_pod_of_eight():
    claims = {("team-a", "ResourceClaim", n): claim(n, [exactly(4)]) for n in ("a", "b")}
    lookup = lambda ns, kind, name: claims.get((ns, kind, name))  # noqa: E731
    resp = validate(with_claims("a", "b"), LIMIT_ONLY, lookup=lookup)
    assert resp["allowed"] is False
    assert "the pod's claims together take 8 devices" in resp["status"]["message"]
    assert validate(with_claims("a"), LIMIT_ONLY, lookup=lookup)["allowed"] is True
    # Each claim alone is within the limit.
    assert validate(claims[("team-a", "ResourceClaim", "a")], LIMIT_ONLY)["allowed"] is True


def test_a_pod_naming_a_claim_that_does_not_exist_yet_is_held_to_the_rule_that_counts_it():
    """Issue 45: pod first, claim later would escape maxDevicesPerPod (the claim's own admission
    never counts the pod). Fail closed: the rule's own action, saying the order that works."""
    resp = validate(with_claims("gone"), LIMIT_ONLY)
    assert resp["allowed"] is False
    assert "spec.resourceClaims[0] gone (ResourceClaim gone) does not exist: the pod's devices cannot be counted " \
        "without it. Create the claim (or template) first, then the pod" in resp["status"]["message"]
    warned = validate(with_claims("gone"), LIMIT_ONLY.replace("enforce", "warn"))
    assert warned["allowed"] is True and any("does not exist" in w for w in warned["warnings"])
    # A preview that was not given the namespace's claims cannot know: it says so.
    from app.application import UNKNOWN, decide_pod
    found = decide_pod(with_claims("gone"), "team-a", parse_policy(LIMIT_ONLY), UNKNOWN)
    assert found.outcome is not application.Outcome.DENIED
    assert any("is not among the claims given" in n for n in found.not_judged), found.not_judged


def test_allocation_mode_all_counts_the_devices_it_would_take():
    every_h100 = claim("all", [exactly(mode="All", selectors=[H100])])
    resp = validate(every_h100, LIMIT_ONLY)
    assert resp["allowed"] is False and "8 devices exceed the limit of 4" in resp["status"]["message"]
    per_request = validate(every_h100, "defaults:\n  mode: enforce\n  maxDevicesPerRequest: 2\n")
    assert "allocationMode All would take 8 devices" in per_request["status"]["message"]


def test_allowed_classes_hold_for_legacy_pods():
    text = "defaults:\n  mode: enforce\n  allowedDeviceClasses: [h100.nvidia.com]\n"
    one = pod([container("main", {"nvidia.com/gpu": 1})])
    resp = mutate(one, text)
    assert resp["allowed"] is False
    assert "DeviceClass 'gpu.nvidia.com' is not allowed (allowed: h100.nvidia.com)" in resp["status"]["message"]
    assert validate(one, text)["allowed"] is False


def test_validation_does_not_depend_on_the_migration_opt_in():
    eight = pod([container("main", {"nvidia.com/gpu": 8})])
    policy = parse_policy(LIMIT_ONLY)
    found = application.decide_pod(eight, "team-b", policy, application.cluster_facts(policy, INDEX),
                                   namespace_labels={}, opt_in=OptIn("dra-bridge.io/migrate", "enabled"))
    assert found.settings is None and found.refused and "8 devices exceed" in found.refused
    off = parse_policy(LIMIT_ONLY + "namespaces:\n- names: [team-a]\n  migrate: false\n")
    assert application.decide_pod(eight, "team-a", off, application.cluster_facts(off, INDEX),
                                  namespace_labels={}).refused


RULES = """
rules:
- name: h100-only-team-a
  validationActions: [Deny]
  match: {namespaces: [team-a]}
  allowedDevices: "%s"
  message: team A runs on H100 only
- name: max-two-per-pod
  validationActions: [Warn]
  maxDevicesPerPod: 2
  exclude:
    groups: [gpu-admins]
    serviceAccounts: [ci/runner]
    objectSelector: {matchLabels: {tier: batch}}
""" % H100


def test_rules_apply_by_namespace_and_exempt_by_user_group_account_and_label():
    l4 = claim("l4", [exactly(1, selectors=["device.attributes['gpu.nvidia.com'].productName.contains('L4')"])])
    resp = validate(l4, RULES)
    assert resp["allowed"] is False and "team A runs on H100 only" in resp["status"]["message"]
    assert "gpu-l4-0/gpu-0" in resp["status"]["message"]
    assert validate(l4, RULES, namespace="team-b")["allowed"] is True
    h100 = claim("h", [exactly(1, selectors=[H100])])
    assert validate(h100, RULES)["allowed"] is True

    three = pod([container("main", {"nvidia.com/gpu": 3})], nodeSelector=ON_H100)
    warned = validate(three, RULES, namespace="team-b")
    assert warned["allowed"] is True and any("rule max-two-per-pod" in w for w in warned["warnings"])
    assert "warnings" not in validate(three, RULES, namespace="team-b", groups=["gpu-admins"])
    assert "warnings" not in validate(three, RULES, namespace="team-b", user="system:serviceaccount:ci:runner")
    batch = {**three, "metadata": {**three["metadata"], "labels": {"tier": "batch"}}}
    assert "warnings" not in validate(batch, RULES, namespace="team-b")


def test_audit_action_annotates_and_every_matching_namespace_entry_applies():
    text = ("namespaces:\n- names: [team-a]\n  mode: warn\n"
            "- selector: {matchLabels: {guard: strict}}\n  mode: audit\n  maxDevicesPerClaim: 2\n")
    big = claim("c", [exactly(3)])
    resp = validate(big, text, ns_labels={"guard": "strict"})
    assert resp["allowed"] is True and "3 devices exceed the limit of 2" in resp["auditAnnotations"]["validation"]
    assert "auditAnnotations" not in validate(big, text)


def test_required_selectors_and_cel_validations():
    text = """
rules:
- name: model-required
  validationActions: [Deny]
  requireSelectors: [gpu.nvidia.com/productName]
- name: no-all-mode
  validationActions: [Deny]
  validations:
  - expression: "request.allocationMode != 'All'"
    messageExpression: "'request ' + request.name + ' would take ' + string(request.devices) + ' devices'"
"""
    bare = validate(claim("c", [exactly(1)]), text)
    assert "needs a selector on gpu.nvidia.com/productName" in bare["status"]["message"]
    # Fail closed: a selector whose reads are not known narrows nothing the rule can name.
    vague = validate(claim("c", [exactly(1, selectors=["device.attributes.size() > 0"])]), text)
    assert "needs a selector on gpu.nvidia.com/productName" in vague["status"]["message"]
    assert validate(claim("c", [exactly(1, selectors=[H100])]), text)["allowed"] is True
    everything = validate(claim("c", [exactly(mode="All", selectors=[H100])]), text)
    assert "request gpus would take 8 devices" in everything["status"]["message"]
    # A legacy pod whose node selector names the model gets that selector as a claim.
    model = pod([container("main", {"nvidia.com/gpu": 1})], nodeSelector=ON_H100)
    assert validate(model, text)["allowed"] is True
    assert validate(pod([container("main", {"nvidia.com/gpu": 1})]), text)["allowed"] is False


@pytest.mark.parametrize("text, where", [
    ("rules:\n- name: x\n  validations: [{expression: 'request.count <'}]\n", "validations[0].expression"),
    ("rules:\n- name: x\n  allowedDevices: 'foo.bar'\n", "allowedDevices"),
    ("rules:\n- name: x\n  maxDevicesPerPod: 1\n- name: x\n  maxDevicesPerPod: 2\n", "two rules named 'x'"),
    ("rules:\n- name: x\n  validationActions: [Deny, Warn]\n  maxDevicesPerPod: 1\n", "Deny and Warn together"),
    ("rules:\n- name: x\n", "checks nothing"),
    ("rules:\n- name: x\n  validations: [{expression: 'size(request.selectors)'}]\n",
     "validations[0].expression: CEL does not compile: must evaluate to bool, not int"),
    ("rules:\n- name: x\n  validations: [{expression: 'true', messageExpression: '1 + 2'}]\n",
     "validations[0].messageExpression: CEL does not compile: must evaluate to string, not int"),
    ("rules:\n- name: x\n  requireSelectors: [productName]\n", "expected a qualified name"),
    ("rules:\n- name: x\n  exclude: {serviceAccounts: [runner]}\n  maxDevicesPerPod: 1\n", "expected namespace/name"),
])
def test_a_bad_rule_never_loads_and_the_error_names_the_field(text, where):
    with pytest.raises(PolicyError) as caught:
        parse_policy(text, "policy.yaml")
    assert "rules" in str(caught.value) and where in str(caught.value)


def test_a_background_scan_reports_existing_violations_in_audit_mode_as_policy_report_results():
    from app.cli.auditcli import policy_reports
    from app.application import scan

    text = ("namespaces:\n- names: [team-a]\n  mode: audit\n  maxDevicesPerClaim: 4\n"
            "rules:\n- name: exempt-by-user\n  maxDevicesPerPod: 1\n  exclude: {users: [alice]}\n")
    policy = parse_policy(text)
    claims = [claim(n, [exactly(3)]) for n in ("a", "b")]
    stamped = claim("stamped", [exactly(8)])
    stamped["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpus"}
    objects = [with_claims("a", "b"), *claims, stamped, pod([container("main", {"nvidia.com/gpu": 2})])]
    found = scan.scan(objects, policy, INDEX, {})
    # The pod of two 3-device claims breaks the per-pod limit (its claims alone do not); a claim
    # the controller stamped from a template is judged like any claim (issue 45); the user
    # exemption cannot be judged after the fact.
    assert [(f.kind, f.name, f.violation.rule) for f in found] == [("Pod", "p", "namespace-settings"),
                                                                   ("ResourceClaim", "stamped", "namespace-settings")]
    [report] = policy_reports([], True, found)
    result, stamped_result = report["results"]
    assert (report["kind"], report["metadata"]["namespace"], result["result"], result["severity"]) == \
        ("PolicyReport", "team-a", "fail", "low")
    assert result["rule"] == "namespace-settings" and "6 devices" in result["message"]
    assert "8 devices" in stamped_result["message"] and report["summary"]["fail"] == 2


# A dry run's rewrite on another replica, and a made-up generated name: tests/unit/test_judge_what_is.py.


def test_a_namespace_total_counts_what_its_claims_hold_or_ask_and_this_object():
    text = "rules:\n- name: team-a-six\n  validationActions: [Deny]\n  maxDevicesPerNamespace: 6\n"
    held = claim("held", [exactly(3)])
    held["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "gpu-h100-0", "device": f"gpu-{i}"}
        for i in range(3)]}}}
    pending = claim("pending", [exactly(2)])
    mine = claim("mine", [exactly(1)])
    stamped = claim("p-gpus", [exactly(4)])
    stamped["metadata"]["ownerReferences"] = [{"kind": "Pod", "name": "p", "apiVersion": "v1", "uid": "u"}]
    existing = [held, pending, mine]
    by_name = {("team-a", "ResourceClaim", c["metadata"]["name"]): c for c in existing}

    def answer(obj):
        policy = parse_policy(text)
        body = review(obj, kind=obj["kind"])
        req = admission.parse_review(orjson.dumps(body))
        subject = application.subject_of(req.kind, req.obj, "team-a", {}, None)
        settings = policy.for_namespace("team-a", {})
        namespace_claims = lambda ns: existing + [stamped]  # noqa: E731
        if req.kind == "Pod":
            outcome = application.evaluate_pod(req.obj, policy, subject, INDEX,
                                              lambda ns, k, n: by_name.get((ns, k, n)), namespace_claims)
        else:
            outcome = application.evaluate_claim(req.obj, policy, settings, INDEX, subject, namespace_claims)
        return validation.respond(req, outcome, settings)["response"]

    # 3 held + 2 asked + 1 (mine) = 6 now; the stamped claim is the pod p's own, counted with it.
    denied = answer(pod([container("main", {"nvidia.com/gpu": 2})]))
    assert denied["allowed"] is False
    assert "namespace team-a would take 8 devices (6 held or asked by its claims now, 2 by this Pod)" in \
        denied["status"]["message"]
    assert answer(with_claims("mine"))["allowed"] is True  # its claim is already counted once
    assert answer(claim("more", [exactly(1)]))["allowed"] is False
    assert answer(claim("more", [exactly(1)], kind="ResourceClaimTemplate"))["allowed"] is True  # takes nothing


def test_a_count_too_large_for_a_claim_is_counted_exactly_not_an_internal_error():
    """Found by the fuzzer: 10^30 percent of a card made the Decimal division raise, and the
    review was answered by the failure rule (admitted unvalidated)."""
    huge = pod([container("main", {"kubernetes.io/gpu": str(10**30)})])
    resp = validate(huge, LIMIT_ONLY)
    assert resp["allowed"] is False and f"{10**28} devices exceed the limit of 4" in resp["status"]["message"]


def test_admin_access_only_in_namespaces_the_policy_names():
    """Issue 45: upstream's admin-access label can be set by whoever may label a namespace; a
    rule names by name where admin access is allowed."""
    text = "rules:\n- name: ops-only-admin\n  validationActions: [Deny]\n  adminAccessNamespaces: [ops]\n"
    admin = claim("debug", [exactly(1, adminAccess=True)])
    labelled = {ADMIN_ACCESS: "true"}
    denied = validate(admin, text, namespace="team-a", ns_labels=labelled)
    assert denied["allowed"] is False
    assert "admin access is allowed only in the namespaces this policy names (ops), not team-a" in \
        denied["status"]["message"]
    assert validate(admin, text, namespace="ops", ns_labels=labelled)["allowed"] is True
    assert validate(claim("plain", [exactly(1)]), text, namespace="team-a")["allowed"] is True


def test_audit_reports_who_can_use_admin_access():
    from app.application import admin_access

    policy = parse_policy("rules:\n- name: ops-only-admin\n  adminAccessNamespaces: [ops]\n")
    found = admin_access({"ops": {ADMIN_ACCESS: "true"}, "team-a": {ADMIN_ACCESS: "true"}, "other": {}},
                         [claim("debug", [exactly(1, adminAccess=True)]), claim("plain", [exactly(1)])], policy)
    assert found.namespaces == ("ops", "team-a") and found.requests == ("ResourceClaim team-a/debug",)
    assert found.lines()[1].endswith("(no rule's adminAccessNamespaces names it)")
    assert "names it" not in found.lines()[0]


def test_a_rule_without_actions_follows_the_namespaces_mode_and_so_does_its_binding():
    """Issue 55: warn mode warns. A rule that names no validationActions takes the mode of the
    namespace judged, and its compiled binding never denies where dra-bridge would only warn."""
    from app.policy import compile_policy

    text = "rules:\n- name: at-most-two\n  maxDevicesPerClaim: 2\n"
    three = claim("c", [exactly(3)])
    warned = validate(three, text)  # the bundled defaults: warn
    assert warned["allowed"] is True and any("rule at-most-two" in w for w in warned["warnings"])
    strict = text + "namespaces:\n- names: [strict]\n  mode: enforce\n"
    assert validate(three, strict, namespace="strict")["allowed"] is False
    assert validate(three, strict)["allowed"] is True
    [only_warn] = compile_policy(parse_policy(text))[0]
    assert actions(only_warn.objects) == {("Warn",)}
    assert not any(name == "validationActions" for name, _why in only_warn.webhook_only)
    [mixed] = compile_policy(parse_policy(strict))[0]
    assert actions(mixed.objects) == {("Warn",)}
    assert ("validationActions", "follows each namespace's mode (enforce, warn): the API server binding takes "
            "Warn; dra-bridge denies where the mode is enforce") in mixed.webhook_only
    enforced = parse_policy("defaults: {mode: enforce}\n" + text)
    assert actions(compile_policy(enforced)[1]) == {("Deny",)}
    named = parse_policy(strict.replace("maxDevicesPerClaim: 2", "maxDevicesPerClaim: 2\n  match: {namespaces: [strict]}"))
    assert actions(compile_policy(named)[1]) == {("Deny",)}  # it matches only enforce namespaces


def actions(objects) -> set:
    return {tuple(o["spec"]["validationActions"]) for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"}
