"""Issue 31 on a real control plane: the admin's bypasses each fail with a policy that sets only
the limit; the server dry run answers as the create; a bad policy is refused by `kubectl apply`
and a refused reload is seen without reading logs; audit-mode violations become PolicyReport
results."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT
from tests.e2e.conftest import POLICY, wait_for

pytestmark = pytest.mark.timeout(3600)

GUARDED = {**POLICY, "namespaces": [
    *POLICY["namespaces"],
    {"names": ["guarded", "guarded-plain"], "mode": "enforce", "maxDevicesPerClaim": 4},
    {"names": ["h100-only"], "mode": "enforce", "allowedDeviceClasses": ["h100.nvidia.com"]}],
    "rules": [{"name": "audit-big-claims", "validationActions": ["Audit"], "match": {"namespaces": ["audited"]},
               "maxDevicesPerClaim": 1},
              {"name": "guarded-eight", "validationActions": ["Deny"], "match": {"namespaces": ["guarded"]}, "maxDevicesPerNamespace": 8},
              {"name": "claims-max-4", "validationActions": ["Deny"], "match": {"namespaces": ["claims-capped"], "kinds": ["ResourceClaim"]},
               "maxDevicesPerClaim": 4},
              {"name": "pods-max-4", "validationActions": ["Deny"], "match": {"namespaces": ["pods-capped"], "kinds": ["Pod"]}, "maxDevicesPerPod": 4}]}
OPTED = {"dra-bridge.io/migrate": "enabled"}
H100 = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"


def digest(webhook) -> dict:
    return json.loads(webhook.get("/readyz")[1])["detail"]["policy"]


def use_policy(cluster, webhook, policy: dict) -> None:
    before = digest(webhook)["digest"]
    (cluster.dir / "policy.yaml").write_text(yaml.safe_dump(policy))
    wait_for(lambda: digest(webhook)["digest"] != before, 30, "the webhook to take the new policy")


@pytest.fixture(scope="module")
def guarded(cluster, webhook):
    cluster.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": labels}}
                   for n, labels in {"guarded": OPTED, "guarded-plain": {}, "h100-only": OPTED,
                                     "audited": {}, "claims-capped": {}, "pods-capped": {}}.items()])
    use_policy(cluster, webhook, GUARDED)
    try:
        yield cluster
    finally:
        use_policy(cluster, webhook, POLICY)


def gpu_pod(name, gpus):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [
        {"name": "cuda", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}


def claim(name, request):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": request}]}}}


def create(cluster, namespace, obj, *extra):
    return cluster.kubectl("create", "-n", namespace, "-f", "-", *extra, input=json.dumps(obj), check=False)


@pytest.mark.parametrize("namespace", ["guarded", "guarded-plain"], ids=["opted-in", "not-opted-in"])
def test_a_legacy_pod_over_the_limit_is_denied_and_the_dry_run_says_the_same(guarded, namespace):
    real = create(guarded, namespace, gpu_pod("eight", 8))
    dry = create(guarded, namespace, gpu_pod("eight", 8), "--dry-run=server")
    assert real.returncode != 0 and "rule namespace-settings" in real.stderr, real.stderr
    assert "8 devices exceed the limit of 4 per claim" in real.stderr
    assert dry.returncode != 0 and dry.stderr == real.stderr
    assert guarded.kubectl("get", "pod", "eight", "-n", namespace, check=False).returncode != 0
    templates = guarded.json("resourceclaimtemplates", "-n", namespace)["items"]
    assert not templates  # nothing written for a denied pod
    # within the limit: admitted (a dry run: no GPU of the shared cluster is taken from later tests)
    assert create(guarded, namespace, gpu_pod("four", 4), "--dry-run=server").returncode == 0


def test_two_claims_of_four_are_a_pod_of_eight(guarded):
    for name in ("half-a", "half-b"):
        four = claim(name, {"deviceClassName": "gpu.nvidia.com", "count": 4})
        assert create(guarded, "guarded", four).returncode == 0
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "split"}, "spec": {
        "resourceClaims": [{"name": "a", "resourceClaimName": "half-a"}, {"name": "b", "resourceClaimName": "half-b"}],
        "containers": [{"name": "cuda", "image": "cuda", "resources": {"claims": [{"name": "a"}, {"name": "b"}]}}]}}
    denied = create(guarded, "guarded", pod)
    assert denied.returncode != 0 and "the pod's claims together take 8 devices" in denied.stderr, denied.stderr


def test_a_namespace_total_counts_the_claims_it_already_has(guarded):
    """After the two claims of four above, guarded holds 8: one more device is over its 8."""
    denied = create(guarded, "guarded", claim("one-more", {"deviceClassName": "gpu.nvidia.com", "count": 1}))
    assert denied.returncode != 0 and "rule guarded-eight" in denied.stderr, denied.stderr
    assert "namespace guarded would take 9 devices (8 held or asked by its claims now" in denied.stderr


def test_allocation_mode_all_counts_what_it_would_take(guarded):
    denied = create(guarded, "guarded", claim("every-h100", {"deviceClassName": "gpu.nvidia.com",
                                                            "allocationMode": "All",
                                                            "selectors": [{"cel": {"expression": H100}}]}))
    assert denied.returncode != 0 and "8 devices exceed the limit of 4" in denied.stderr, denied.stderr


def test_allowed_classes_hold_for_a_pod_left_on_the_device_plugin(guarded):
    denied = create(guarded, "h100-only", gpu_pod("any", 1))
    assert denied.returncode != 0
    assert "DeviceClass 'gpu.nvidia.com' is not allowed (allowed: h100.nvidia.com)" in denied.stderr, denied.stderr


def test_a_malformed_policy_is_refused_when_applied(guarded):
    # No manifest ships it (the admin's): the first apply creates it.
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dra-bridge-policy",
                                                                       "namespace": "dra-bridge"}}
    bad = {**configmap, "data": {"policy.yaml": yaml.safe_dump(
        {"rules": [{"name": "x", "validations": [{"expression": "request.count <"}]}]})}}
    refused = guarded.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert refused.returncode != 0 and "rules[0]" in refused.stderr and "does not compile" in refused.stderr
    good = {**configmap, "data": {"policy.yaml": yaml.safe_dump(GUARDED)}}
    taken = guarded.kubectl("apply", "-f", "-", input=json.dumps(good))
    assert "dra-bridge policy" in taken.stderr  # the warning with its digest


def test_a_label_a_tenant_may_set_never_switches_a_deny_rule_off(guarded):
    """Issue 45: validation is left out of namespaces by name only; the old opt-out label is
    not read, so a tenant who may label her namespace cannot turn the admin's rule off."""
    guarded.kubectl("label", "namespace", "guarded-plain", "dra-bridge.io/validate=disabled")
    try:
        denied = create(guarded, "guarded-plain", gpu_pod("eight", 8), "--dry-run=server")
        assert denied.returncode != 0 and "8 devices exceed the limit of 4 per claim" in denied.stderr, denied.stderr
    finally:
        guarded.kubectl("label", "namespace", "guarded-plain", "dra-bridge.io/validate-")


def test_a_pod_created_before_its_claim_is_held_to_the_per_pod_rule(guarded):
    """Issue 45: docs/policy.md's policy 1 (`kinds: [Pod]`, maxDevicesPerPod 4). A pod naming a
    claim that does not exist yet is refused, saying the order that works (else a claim of 8
    created afterwards would give it 8 GPUs); in that order, the rule counts the claim."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "early"}, "spec": {
        "resourceClaims": [{"name": "gpus", "resourceClaimName": "later"}],
        "containers": [{"name": "cuda", "image": "cuda", "resources": {"claims": [{"name": "gpus"}]}}]}}
    early = create(guarded, "pods-capped", pod)
    dry = create(guarded, "pods-capped", pod, "--dry-run=server")
    assert early.returncode != 0 and "rule pods-max-4" in early.stderr, early.stderr
    assert "(ResourceClaim later) does not exist" in early.stderr and "Create the claim (or template) first" \
        in early.stderr and dry.stderr == early.stderr
    assert create(guarded, "pods-capped", claim("later", {"deviceClassName": "gpu.nvidia.com", "count": 8})) \
        .returncode == 0  # no rule on claims here
    then = create(guarded, "pods-capped", pod, "--dry-run=server")
    assert then.returncode != 0 and "8 devices" in then.stderr and "rule pods-max-4" in then.stderr, then.stderr


def test_a_claim_stamped_from_a_template_is_held_to_claim_rules(guarded):
    """Issue 45: a `kinds: [ResourceClaim]` cap of 4; a template of 8 is not a claim, but the
    claim the resourceclaim controller stamps from it for a pod is, and is refused."""
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "eight"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                    "deviceClassName": "gpu.nvidia.com", "count": 8}}]}}}}
    assert create(guarded, "claims-capped", template).returncode == 0
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big"}, "spec": {
        "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "eight"}],
        "containers": [{"name": "cuda", "image": "cuda", "resources": {"claims": [{"name": "gpus"}]}}]}}
    assert create(guarded, "claims-capped", pod).returncode == 0
    refused = wait_for(lambda: [e["message"] for e in guarded.json("events", "-n", "claims-capped")["items"]
                                if "claims-max-4" in e.get("message", "")], 60, "the stamped claim refused")
    assert "8 devices exceed the limit of 4 per claim" in refused[0], refused
    assert not guarded.json("resourceclaims", "-n", "claims-capped")["items"]
    # Gone before the policy is put back: the controller retries the claim, and without the rule
    # its 8 GPUs would be allocated from the shared cluster later tests use.
    guarded.kubectl("delete", "pod", "big", "-n", "claims-capped")


def test_a_policy_that_does_not_type_check_is_refused_by_the_documented_update(guarded):
    """Issue 45: a validation that is not bool is refused naming the field and the type, and the
    documented update (`kubectl create configmap ... | kubectl apply`, no labels) is judged."""
    bad = guarded.dir / "non-bool.yaml"
    bad.write_text(yaml.safe_dump({"rules": [{"name": "x", "validations": [
        {"expression": "size(request.selectors)"}]}]}))
    rendered = guarded.kubectl("-n", "dra-bridge", "create", "configmap", "dra-bridge-policy",
                               f"--from-file=policy.yaml={bad}", "--dry-run=client", "-o", "yaml").stdout
    refused = guarded.kubectl("apply", "-f", "-", input=rendered, check=False)
    assert refused.returncode != 0, refused.stdout
    assert "rules[0]: validations[0].expression" in refused.stderr and "must evaluate to bool, not int" in refused.stderr


def test_a_refused_reload_is_seen_on_readyz_the_metric_and_an_event(guarded, webhook):
    guarded.apply([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dra-bridge-policy",
                                                                           "namespace": "dra-bridge"},
                    "data": {"policy.yaml": yaml.safe_dump(GUARDED)}}])
    kept = digest(webhook)["digest"]
    (guarded.dir / "policy.yaml").write_text("defaults: {mode: sometimes}\n")
    try:
        wait_for(lambda: "rejected" in digest(webhook), 30, "the refused reload on /readyz")
        assert digest(webhook)["digest"] == kept and "defaults.mode" in digest(webhook)["rejected"]
        assert "dra_bridge_policy_rejected 1.0" in webhook.get("/metrics")[1]
        wait_for(lambda: any(e["reason"] == "PolicyRejected" for e in guarded.json(
            "events", "-n", "dra-bridge", "--field-selector", "involvedObject.name=dra-bridge-policy")["items"]),
            30, "a PolicyRejected Event on the ConfigMap")
        # Where the runbook points: the Event names the ConfigMap's uid, so describe lists it.
        described = guarded.kubectl("describe", "configmap", "dra-bridge-policy", "-n", "dra-bridge").stdout
        assert "PolicyRejected" in described and "defaults.mode" in described, described
    finally:
        (guarded.dir / "policy.yaml").write_text(yaml.safe_dump(GUARDED))
        wait_for(lambda: "rejected" not in digest(webhook), 30, "the good policy again")


def test_every_replica_restarted_on_a_refused_policy_starts_on_the_last_good_one(guarded, webhook):
    """Issue 55: the refused file lands while dra-bridge is down (the policy webhook is Ignore),
    then the replica restarts (a drain, an OOM kill): it starts on the policy it last took, kept
    in the ConfigMap beside the admin's, and goes on migrating pods and enforcing rules."""
    enforced = digest(webhook)["digest"]
    wait_for(lambda: guarded.kubectl("get", "configmap", "dra-bridge-policy-last-good", "-n", "dra-bridge",
                                     "-o", "jsonpath={.data.digest}", check=False).stdout == enforced, 30,
             "the policy in force kept beside the admin's")
    webhook.stop()
    (guarded.dir / "policy.yaml").write_text("defaults: {mode: sometimes}\n")
    try:
        webhook.start()  # ready, or it raises with the replica's log
        status = digest(webhook)
        assert status["digest"] == enforced and "defaults.mode" in status["rejected"], status
        assert "last good policy kept in ConfigMap dra-bridge/dra-bridge-policy-last-good" in status["source"]
        assert "dra_bridge_policy_rejected 1.0" in webhook.get("/metrics")[1]
        refused = create(guarded, "guarded", gpu_pod("eight-after-restart", 8))
        assert refused.returncode != 0 and "rule namespace-settings" in refused.stderr, refused.stderr
        assert create(guarded, "guarded", gpu_pod("one-after-restart", 1)).returncode == 0
        rewritten = guarded.json("pod", "one-after-restart", "-n", "guarded")
        assert rewritten["spec"].get("resourceClaims"), rewritten["spec"]
    finally:
        (guarded.dir / "policy.yaml").write_text(yaml.safe_dump(GUARDED))
        wait_for(lambda: "rejected" not in digest(webhook), 30, "the good policy again")


def test_audit_mode_violations_become_policy_report_results(guarded, webhook, tmp_path):
    created = create(guarded, "audited", claim("two", {"deviceClassName": "gpu.nvidia.com", "count": 2}))
    assert created.returncode == 0 and "Warning" not in created.stderr  # audit: admitted silently
    assert 'rule="audit-big-claims"' in webhook.get("/metrics")[1]
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump(GUARDED))
    out = subprocess.run([sys.executable, "-m", "app", "audit", "--kubeconfig", guarded.admin_kubeconfig,
                          "--policy", str(policy), "-n", "audited", "-o", "policyreport"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 1, out.stderr  # something breaks the rules
    [report] = [d for d in yaml.safe_load_all(out.stdout) if d and d["metadata"].get("namespace") == "audited"]
    [result] = [r for r in report["results"] if r["rule"] == "audit-big-claims"]
    assert result["resources"] == [{"kind": "ResourceClaim", "name": "two", "namespace": "audited"}]
    assert result["result"] == "fail" and result["properties"]["validationActions"] == "Audit"
