"""Issue 45: the part of each admin rule the API server can enforce alone, compiled to
ValidatingAdmissionPolicies; their CEL evaluated here on claims and pods (the real API server
judges them in tests/e2e/test_policy_compile.py)."""

import pytest

from app import cel
from app.policy import compile_rule, parse_policy


def rule(text):
    [(found, weaker)] = parse_policy("rules:\n- name: r\n" + text).compiled_rules()
    return compile_rule(found, weaker)


def verdicts(compiled, obj, namespace="team-a", resource="resourceclaims"):
    """Each validation of the policy for `resource`, evaluated on `obj` as the API server would."""
    [policy] = [o for o in compiled.objects if o["kind"] == "ValidatingAdmissionPolicy"
                and o["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == [resource]]
    values = {"object": obj, "request": {"resource": {"resource": resource}},
              "namespaceObject": {"metadata": {"name": namespace}}}
    variables = {}
    for variable in policy["spec"].get("variables", []):
        program = cel.compile_program(variable["expression"], frozenset(values))
        variables[variable["name"]] = cel.run_program(program, values)
    names = frozenset({*values, "variables"})
    return [cel.run_program(cel.compile_program(v["expression"], names, "bool"), {**values, "variables": variables})
            for v in policy["spec"]["validations"]]


def claim(*requests):
    return {"spec": {"devices": {"requests": list(requests)}}}


def exactly(count=1, cls="gpu.nvidia.com", **extra):
    return {"name": "r", "exactly": {"deviceClassName": cls, "count": count, **extra}}


def test_each_field_is_enforced_by_the_api_server_or_said_to_stay_the_webhooks():
    found = rule("  maxDevicesPerClaim: 4\n  maxDevicesPerPod: 4\n  allowedDevices: 'true'\n")
    assert found.compiled == ["maxDevicesPerClaim"]
    assert [name for name, _why in found.webhook_only] == ["maxDevicesPerPod", "allowedDevices", "maxDevicesPerClaim"]
    # Issue 56: a device rule says what it judged against, and what would be exact.
    assert "judged against the devices published now, so a pool scaled to zero is not seen" in \
        dict(found.webhook_only)["allowedDevices"]
    assert found.webhook_only == [("maxDevicesPerPod", "needs the claims a pod names"),
                                  ("allowedDevices", dict(found.webhook_only)["allowedDevices"]),
                                  ("maxDevicesPerClaim", "for allocationMode All requests (the devices they take are "
                                                         "the inventory's)")]
    kinds = sorted(o["spec"]["matchConstraints"]["resourceRules"][0]["resources"][0] for o in found.objects
                   if o["kind"] == "ValidatingAdmissionPolicy")
    assert kinds == ["resourceclaims", "resourceclaimtemplates"]  # one policy per kind: each typed alone
    only_webhook = rule("  maxDevicesPerPod: 4\n")
    assert only_webhook.objects == [] and only_webhook.compiled == []


def test_claim_counts_add_up_requests_and_the_largest_alternative():
    found = rule("  maxDevicesPerClaim: 4\n  maxDevicesPerRequest: 3\n")
    assert verdicts(found, claim(exactly(2), exactly(2))) == [True, True]
    assert verdicts(found, claim(exactly(4))) == [False, True]  # a request of 4 > 3, the claim 4 <= 4
    assert verdicts(found, claim(exactly(3), exactly(2))) == [True, False]
    split = {"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "g", "count": 8},
                                             {"name": "b", "deviceClassName": "g", "count": 1}]}
    assert verdicts(found, claim(split)) == [False, False]
    every = {"name": "r", "exactly": {"deviceClassName": "g", "allocationMode": "All"}}
    assert verdicts(found, claim(every)) == [True, True]  # All: the webhook counts it against the inventory
    template = {"spec": {"spec": claim(exactly(8))["spec"]}}
    assert verdicts(found, template, resource="resourceclaimtemplates") == [False, False]


def test_classes_and_admin_access():
    found = rule("  allowedDeviceClasses: [gpu.nvidia.com]\n  allowAdminAccess: false\n")
    assert verdicts(found, claim(exactly())) == [True, True]
    assert verdicts(found, claim(exactly(cls="l4.nvidia.com"))) == [False, True]
    assert verdicts(found, claim(exactly(adminAccess=True))) == [True, False]
    named = rule("  adminAccessNamespaces: [ops]\n")
    assert verdicts(named, claim(exactly(adminAccess=True)), namespace="ops") == [True]
    assert verdicts(named, claim(exactly(adminAccess=True)), namespace="team-a") == [False]


@pytest.mark.parametrize("limits, allowed", [({"nvidia.com/gpu": "1"}, False), ({"cpu": "1"}, True),
                                             ({"nvidia.com/mig-1g.10gb": "1"}, False)])
def test_legacy_asks_on_pods(limits, allowed):
    found = rule("  forbidLegacy: true\n")
    pod = {"spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}
    assert verdicts(found, pod, resource="pods") == [allowed]


def test_exclusions_and_match_become_match_conditions_and_the_binding():
    found = rule("  match: {namespaces: [team-a], objectSelector: {matchLabels: {tier: gpu}}}\n"
                 "  exclude: {users: [alice], serviceAccounts: [ci/runner], groups: [ops], namespaces: [team-a-ci]}\n"
                 "  validationActions: [Warn, Audit]\n  maxDevicesPerClaim: 4\n")
    policy, binding = found.objects[:2]
    conditions = {c["name"]: c["expression"] for c in policy["spec"]["matchConditions"]}
    assert conditions["not-an-excluded-user"] == '!(request.userInfo.username in ["alice", ' \
                                                '"system:serviceaccount:ci:runner"])'
    assert binding["spec"]["validationActions"] == ["Warn", "Audit"]
    assert binding["spec"]["matchResources"] == {
        "namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-a"]},
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["team-a-ci"]}]},
        "objectSelector": {"matchLabels": {"tier": "gpu"}}}
    by_label = rule("  exclude: {namespaceSelector: {matchLabels: {x: y}}}\n  maxDevicesPerClaim: 4\n")
    assert by_label.objects == [] and by_label.webhook_only[0][0] == "exclude.namespaceSelector/objectSelector"


def test_require_all_refuses_a_rule_part_that_stays_the_webhooks(tmp_path):
    import subprocess
    import sys

    from tests.conftest import ROOT
    policy = tmp_path / "policy.yaml"
    policy.write_text("rules:\n- name: c\n  allowedDeviceClasses: [gpu.nvidia.com]\n- name: pp\n"
                      "  maxDevicesPerPod: 4\n")
    run = [sys.executable, "-m", "app", "policy", "compile", "--policy", str(policy)]
    written = subprocess.run(run, cwd=ROOT, capture_output=True, text=True)
    assert written.returncode == 0 and "dra-bridge.c.resourceclaims" in written.stdout
    # Issue 56: the pod's own device asks are counted by the API server; named claims stay the webhook's.
    assert "rule pp: enforced by the API server: maxDevicesPerPod; webhook only: maxDevicesPerPod: for the " \
        "claims and templates a pod names" in written.stderr
    refused = subprocess.run(run + ["--require-all"], cwd=ROOT, capture_output=True, text=True)
    assert refused.returncode == 2 and refused.stdout == ""
    assert "rules[1].maxDevicesPerPod: rule pp: cannot be a ValidatingAdmissionPolicy" in refused.stderr


def test_serve_writes_what_changed_and_deletes_what_no_rule_compiles_to():
    """What serve's lease holder does each round, decided purely: missing or changed objects are
    written, ours no rule makes any more deleted (bindings first), unchanged ones left alone though
    the API server filled defaults into them."""
    from app.policy import compile_policy, vap_changes
    text = ("rules:\n- name: a\n  maxDevicesPerRequest: 2\n  match: {kinds: [ResourceClaim]}\n"
            "- name: b\n  allowAdminAccess: false\n  match: {kinds: [ResourceClaim]}\n")
    compiled, objects = compile_policy(parse_policy(text))
    assert [c.rule for c in compiled] == ["a", "b"] and len(objects) == 4
    assert vap_changes(objects, []) == (objects, [])
    in_cluster = []
    for obj in objects:  # as listed back: defaults filled in, status, no change of ours
        listed = {**obj, "metadata": {**obj["metadata"], "resourceVersion": "7"},
                  "spec": {**obj["spec"], "matchPolicy": "Equivalent"}, "status": {"observedGeneration": 1}}
        in_cluster.append(listed)
    assert vap_changes(objects, in_cluster) == ([], [])
    # Someone else's policy carrying our label (the shipped reporter policy's name is like ours) stays.
    foreign = {"kind": "ValidatingAdmissionPolicy", "metadata": {"name": "dra-bridge-reporter-own-node",
                                                                "labels": {"app.kubernetes.io/managed-by": "dra-bridge"}}}
    assert vap_changes(objects, [*in_cluster, foreign]) == ([], [])
    # Rule a's cap changes and rule b goes: a's two objects are rewritten, b's deleted.
    _, changed = compile_policy(parse_policy("rules:\n- name: a\n  maxDevicesPerRequest: 4\n"
                                             "  match: {kinds: [ResourceClaim]}\n"))
    write, delete = vap_changes(changed, in_cluster)
    assert [(o["kind"], o["metadata"]["name"]) for o in write] == [  # its binding is unchanged
        ("ValidatingAdmissionPolicy", "dra-bridge.a.resourceclaims")]
    assert delete == [("ValidatingAdmissionPolicyBinding", "dra-bridge.b.resourceclaims"),
                      ("ValidatingAdmissionPolicy", "dra-bridge.b.resourceclaims")]
    # An object of ours someone edited by hand is written back: a binding switched to Audit, a
    # validation dropped.
    in_cluster[1]["spec"] = {**in_cluster[1]["spec"], "validationActions": ["Audit"]}
    in_cluster[2]["spec"] = {**in_cluster[2]["spec"], "validations": []}
    assert [(o["kind"], o["metadata"]["name"]) for o in vap_changes(objects, in_cluster)[0]] == [
        ("ValidatingAdmissionPolicyBinding", "dra-bridge.a.resourceclaims"),
        ("ValidatingAdmissionPolicy", "dra-bridge.b.resourceclaims")]


def test_per_pod_limits_count_the_pods_own_device_asks_and_say_what_they_cannot_see():
    """Issue 56: /readyz said maxDevicesPerPod held with dra-bridge down, but no policy judged pods.
    The pod's whole-device extended resources (the policy's count resources, every class's own
    resource) are summed over containers and init containers; shares are left to the webhook."""
    from app.policy import compile_policy

    found, _objects = compile_policy(parse_policy("rules:\n- name: r\n  validationActions: [Deny]\n"
                                                  "  maxDevicesPerPod: 4\n  forbidLegacy: false\n"))
    [compiled] = found
    assert compiled.compiled == ["maxDevicesPerPod"]
    [(name, why)] = compiled.webhook_only
    assert name == "maxDevicesPerPod" and "claims and templates a pod names" in why

    def pod(*containers, init=()):
        return {"spec": {"containers": [{"name": f"c{i}", "resources": {"limits": limits}}
                                        for i, limits in enumerate(containers)],
                         **({"initContainers": [{"name": "i", "resources": {"limits": init}}]} if init else {})}}
    assert verdicts(compiled, pod({"nvidia.com/gpu": "2"}, {"nvidia.com/mig-1g.10gb": "2"}), resource="pods") == [True]
    assert verdicts(compiled, pod({"nvidia.com/gpu": "3"}, {"nvidia.com/gpu": "2"}), resource="pods") == [False]
    assert verdicts(compiled, pod({"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "6"}),
                    resource="pods") == [False]
    assert verdicts(compiled, pod({"cpu": "64"}, init={"nvidia.com/gpu": "5"}), resource="pods") == [False]
    # Shares are not whole devices: the webhook judges them, the API server never counts more.
    assert verdicts(compiled, pod({"nvidia.com/gpu.shared": "8", "nvidia.com/gpumem": "80000"}),
                    resource="pods") == [True]
    assert verdicts(compiled, pod({"cpu": "1"}), resource="pods") == [True]


def test_a_namespace_total_says_it_is_best_effort_and_what_is_exact():
    """Issue 56: concurrent claims were all admitted under a namespace total; it is said where the
    rule is shown (policy compile, /readyz's enforcement) with the exact alternative."""
    found = rule("  maxDevicesPerNamespace: 8\n")
    [(name, why)] = found.webhook_only
    assert name == "maxDevicesPerNamespace" and "best-effort" in why
    assert "deviceclass.resource.k8s.io/devices" in why


def test_a_rule_left_to_the_webhook_does_not_say_the_api_server_counts_its_pods():
    from app.policy import compile_policy

    [compiled], objects = compile_policy(parse_policy(
        "rules:\n- name: r\n  validationActions: [Deny]\n  maxDevicesPerPod: 4\n"
        "  exclude: {namespaceSelector: {matchLabels: {x: y}}}\n"))
    assert objects == [] and compiled.compiled == []
    assert ("maxDevicesPerPod", "needs the claims a pod names") in compiled.webhook_only


def test_the_schedulers_claim_for_a_pods_extended_resources_is_held_to_the_per_pod_limit():
    """Issue 56: a pod admitted before the rule (or while nothing judged it) asks six GPUs through
    its class's own resource; the claim the scheduler writes for it is refused with dra-bridge
    down. Other claims are not the per-pod rule's; a rule selecting pods by labels cannot pick it."""
    from app.policy import compile_policy

    [compiled], objects = compile_policy(parse_policy(
        "rules:\n- name: r\n  validationActions: [Deny]\n  match: {kinds: [Pod]}\n  maxDevicesPerPod: 4\n"))
    assert {o["metadata"]["name"] for o in objects} == {"dra-bridge.r.pods", "dra-bridge.r.resourceclaims"}
    extended = {"annotations": {"resource.kubernetes.io/extended-resource-claim": "true"}}
    six = {"metadata": extended, **claim(exactly(4), exactly(2, cls="other"))}
    assert verdicts(compiled, six) == [False]
    assert verdicts(compiled, {**six, "metadata": {}}) == [True]  # a tenant's claim: claim rules judge it
    assert verdicts(compiled, {"metadata": extended, **claim(exactly(4))}) == [True]
    [labelled], objects = compile_policy(parse_policy(
        "rules:\n- name: r\n  validationActions: [Deny]\n  match: {kinds: [Pod], objectSelector: {matchLabels: {a: b}}}\n"
        "  maxDevicesPerPod: 4\n"))
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "ValidatingAdmissionPolicy"] == ["dra-bridge.r.pods"]
    assert "the scheduler's claims for the pods it selects by labels" in dict(labelled.webhook_only)["maxDevicesPerPod"]
    # A rule on claims and pods: one policy for claims, its claim checks and the scheduler's claim.
    [both], _objects = compile_policy(parse_policy(
        "rules:\n- name: r\n  validationActions: [Deny]\n  maxDevicesPerClaim: 8\n  maxDevicesPerPod: 4\n"))
    assert verdicts(both, six) == [True, False]


def test_quotas_make_a_namespace_total_exact_where_the_rule_names_namespaces(tmp_path):
    """Issue 56 item 6: `policy compile --quotas` writes the ResourceQuota the quota controller
    holds exactly (concurrent claims count each other), and says what each one covers."""
    from app.cli import main

    policy = tmp_path / "p.yaml"
    policy.write_text("rules:\n- name: team-cap\n  validationActions: [Deny]\n  match: {namespaces: [a, b]}\n"
                      "  allowedDeviceClasses: [gpu.nvidia.com]\n  maxDevicesPerNamespace: 8\n"
                      "- name: wide\n  validationActions: [Deny]\n  match: {namespaces: [c]}\n"
                      "  allowedDeviceClasses: [gpu.nvidia.com, mig.nvidia.com]\n  maxDevicesPerNamespace: 4\n"
                      "- name: picked\n  validationActions: [Deny]\n  match: {namespaceSelector: {matchLabels: {t: g}}}\n"
                      "  maxDevicesPerNamespace: 4\n")
    import contextlib
    import io

    import yaml
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["policy", "compile", "--policy", str(policy), "--quotas"]) == 0
    quotas = [d for d in yaml.safe_load_all(out.getvalue()) if d["kind"] == "ResourceQuota"]
    assert [(q["metadata"]["namespace"], q["spec"]["hard"]) for q in quotas] == [
        ("a", {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "8"}),
        ("b", {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "8"}),
        ("c", {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4",
               "mig.nvidia.com.deviceclass.resource.k8s.io/devices": "4"})]
    said = err.getvalue()
    assert "rule team-cap: quota in a, b: exact: 8 devices of gpu.nvidia.com" in said
    assert "rule wide: quota in c: at most 4 devices of each of gpu.nvidia.com, mig.nvidia.com (up to 8 in all" in said
    assert "rule picked: no quota written: it names no namespaces" in said
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["policy", "compile", "--policy", str(policy)]) == 0
    assert "ResourceQuota" not in out.getvalue()  # only when asked
