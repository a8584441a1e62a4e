"""Issue 45 on a control plane of its own: a tenant whose RBAC lets her label only her own
namespace, acting through impersonated requests, cannot switch an admin's Deny rule off, neither
while dra-bridge serves nor while it is stopped (serve keeps the policy's compiled
ValidatingAdmissionPolicies in step, and the API server enforces them alone); a policy change is
carried to them; what only the webhook can judge is said on /readyz."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.e2e.cluster import ControlPlane
from tests.e2e.conftest import INSTALLED_KINDS, NVIDIA_CLASSES, Webhook, rendered_manifests, requires_kube, wait_for
from tests.e2e.test_brownfield import report, set_allocatable

pytestmark = pytest.mark.timeout(900)
TENANT = ("--as", "alice", "--as-group", "tenants")
POLICY = {"rules": [
    {"name": "claims-max-4", "validationActions": ["Deny"], "match": {"namespaces": ["tenant-a"], "kinds": ["ResourceClaim"]},
     "maxDevicesPerClaim": 4},
    {"name": "admin-access-in-ops-only", "validationActions": ["Deny"], "match": {"kinds": ["ResourceClaim"]}, "adminAccessNamespaces": ["ops"]},
    {"name": "pods-max-4", "validationActions": ["Deny"], "match": {"namespaces": ["tenant-a"], "kinds": ["Pod"]}, "maxDevicesPerPod": 4}]}
OURS = "app.kubernetes.io/managed-by=dra-bridge"
# Alice may label her own namespace (get/patch it, by name) and work with claims and pods in it.
TENANT_RBAC = [
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "label-tenant-a"},
     "rules": [{"apiGroups": [""], "resources": ["namespaces"], "resourceNames": ["tenant-a"],
                "verbs": ["get", "patch"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "label-tenant-a"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "label-tenant-a"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "work", "namespace": "tenant-a"},
     "rules": [{"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"],
                "verbs": ["create", "get", "list", "delete"]},
               {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "delete"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "work", "namespace": "tenant-a"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "work"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "tenants"}]}]


@pytest.fixture(scope="module")
def served(binaries, tmp_path_factory):
    plane = ControlPlane(tmp_path_factory.mktemp("tenant"), binaries).start()
    webhook = None
    try:
        plane.apply([d for d in rendered_manifests(plane) if d["kind"] in INSTALLED_KINDS])
        plane.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
                     for n in ("tenant-a", "tenant-b", "ops")])
        plane.apply(NVIDIA_CLASSES + TENANT_RBAC)
        webhook = Webhook(plane, "--admission-policies", "sync", "--reload-interval", "1",
                          "--template-gc-grace", "0")
        (plane.dir / "policy.yaml").write_text(yaml.safe_dump(POLICY))
        webhook.start()
        plane.apply(webhook.configurations())
        yield plane, webhook
    finally:
        if webhook is not None:
            webhook.stop()
        plane.stop()


def claim(name, count, admin=False):
    request = {"deviceClassName": "gpu.nvidia.com", "count": count, **({"adminAccess": True} if admin else {})}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": request}]}}}


def as_tenant(plane, obj, *extra):
    return plane.kubectl("create", "-n", "tenant-a", "-f", "-", *TENANT, *extra, input=json.dumps(obj), check=False)


def refused_once_loaded(plane, obj, what):
    """Waits on dry runs (they persist nothing) until the API server refuses `obj`, then makes the
    real request: a retried real create could land before the policy loads and then only say
    AlreadyExists."""
    wait_for(lambda: as_tenant(plane, obj, "--dry-run=server").returncode != 0, 60, what)
    return as_tenant(plane, obj)


def policy_status(webhook) -> dict:
    return json.loads(webhook.get("/readyz")[1])["detail"]["policy"]


def ours(plane) -> dict:
    return {d["metadata"]["name"]: d for d in plane.json("validatingadmissionpolicies", "-l", OURS)["items"]}


def test_a_tenant_cannot_switch_an_admins_rule_off_up_or_down(served):
    plane, webhook = served
    # serve wrote the compiled part of each rule; /readyz says what stays the webhook's.
    synced = wait_for(lambda: (s := policy_status(webhook)).get("compiledPolicies", {}).get("syncedPolicy")
                      == s["digest"] and s, 60, "the compiled admission policies written")
    # A pod's own device asks are the API server's too (issue 56); the claims it names, ours only.
    pods = synced["enforcement"]["pods-max-4"]
    assert pods["apiServer"] == ["maxDevicesPerPod"] and len(pods["webhookOnly"]) == 1
    assert pods["webhookOnly"][0].startswith("maxDevicesPerPod: for the claims and templates a pod names")
    assert synced["enforcement"]["claims-max-4"]["apiServer"] == ["maxDevicesPerClaim"]
    # pods-max-4 on claims: the claim the scheduler writes for a pod's extended resources.
    assert set(ours(plane)) == {"dra-bridge.claims-max-4.resourceclaims", "dra-bridge.pods-max-4.pods",
                                "dra-bridge.pods-max-4.resourceclaims",
                                "dra-bridge.admin-access-in-ops-only.resourceclaims"}
    # Her RBAC: her own namespace's labels, nobody else's.
    plane.kubectl("label", "namespace", "tenant-a", *TENANT, "dra-bridge.io/validate=disabled",
                  "resource.kubernetes.io/admin-access=true")
    other = plane.kubectl("label", "namespace", "tenant-b", *TENANT, "x=y", check=False)
    assert other.returncode != 0 and "forbidden" in other.stderr.lower()

    def refused_both_ways():
        for obj, rule in ((claim("eight", 8), "rule claims-max-4"),
                          (claim("peek", 1, admin=True), "rule admin-access-in-ops-only")):
            # The API server loads a new admission policy on its own time; until then the webhook
            # alone answers (in its own words): the real request and its dry run are compared once
            # the policy answers first, as it does from then on.
            real = wait_for(lambda: "ValidatingAdmissionPolicy" in (r := as_tenant(plane, obj)).stderr and r, 60,
                            f"the API server enforcing {rule}")
            assert real.returncode != 0 and rule in real.stderr, real.stderr
            dry = as_tenant(plane, obj, "--dry-run=server")
            assert dry.returncode != 0 and dry.stderr == real.stderr

    refused_both_ways()  # dra-bridge serving
    webhook.stop()
    try:
        refused_both_ways()  # dra-bridge stopped: the API server alone
        assert as_tenant(plane, claim("two", 2)).returncode == 0  # within the rule: admitted
    finally:
        webhook.start()
    # An admin's change reaches the API server: the cap goes to 2, the admin-access rule goes.
    tighter = {"rules": [{**POLICY["rules"][0], "maxDevicesPerClaim": 2}, POLICY["rules"][2]]}
    (plane.dir / "policy.yaml").write_text(yaml.safe_dump(tighter))
    wait_for(lambda: set(ours(plane)) == {"dra-bridge.claims-max-4.resourceclaims", "dra-bridge.pods-max-4.pods",
                                          "dra-bridge.pods-max-4.resourceclaims"},
             60, "the admin-access rule's policy deleted")
    wait_for(lambda: "<= 2" in json.dumps(ours(plane)["dra-bridge.claims-max-4.resourceclaims"]["spec"]), 60,
             "the new cap written")
    webhook.stop()
    try:
        three = refused_once_loaded(plane, claim("three", 3), "the new cap enforced by the API server")
        assert three.returncode != 0 and "rule claims-max-4" in three.stderr, three.stderr
    finally:
        webhook.start()


def gpu_pod(name, limits=None, template=None):
    container = {"name": "main", "image": "cuda"}
    spec = {"containers": [container]}
    if limits:
        container["resources"] = {"limits": limits}
    if template:
        container["resources"] = {"claims": [{"name": "gpus"}]}
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_no_spelling_of_a_gpu_and_no_made_up_name_gets_past_a_per_pod_rule(served):
    """Issue 56, as the tenant: six GPUs asked through the class's own extended resource (KEP-5004)
    are refused with dra-bridge up and with it stopped (the compiled policy); a pod naming a
    `dra-bridge-*` template that does not exist is no longer admitted unjudged."""
    plane, webhook = served
    six = gpu_pod("six", {"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "6"})
    probe = as_tenant(plane, gpu_pod("one", {"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "1"}),
                      "--dry-run=server")
    if "deviceclass.resource.kubernetes.io" in probe.stderr and probe.returncode != 0:
        pytest.skip(f"this API server refuses the class resource name (KEP-5004 off): {probe.stderr.strip()}")
    assert probe.returncode == 0, probe.stderr
    up = as_tenant(plane, six)
    assert up.returncode != 0 and "pods-max-4" in up.stderr, up.stderr
    webhook.stop()
    try:
        down = refused_once_loaded(plane, six, "the compiled policy")
        assert down.returncode != 0 and "rule pods-max-4: the pod asks for more than 4 devices" in down.stderr, down.stderr
    finally:
        webhook.start()
    made_up = as_tenant(plane, gpu_pod("made-up", template="dra-bridge-0123456789abcdef"))
    assert made_up.returncode != 0 and "does not exist" in made_up.stderr, made_up.stderr


@requires_kube("1.36", "the scheduler writes claims for class extended resources (DRAExtendedResource)")
def test_the_schedulers_claim_for_a_pod_admitted_before_the_rule_is_refused_up_or_down(served):
    """Issue 56 item 1: pods asking GPUs by their class's own resource were admitted while no rule
    covered their namespace (held back by a scheduling gate); the rule comes, the gates go. The
    scheduler's claim for "up" (2, beside a 3-GPU claim it names: 5) is refused by dra-bridge,
    which counts it with the pod's claims; with dra-bridge stopped, the claim for "down" (5) by
    the compiled policy. Neither gets a claim or a node; a pod within the rule is bound."""
    plane, webhook = served
    plane.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "late"}},
                 {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "dra-0", "labels": {
                     "kubernetes.io/hostname": "dra-0"}}}])
    set_allocatable(plane, "dra-0", {})
    assert report(plane, "dra-0", "publish").returncode == 0

    def class_pod(name, count):
        pod = gpu_pod(name, {"deviceclass.resource.kubernetes.io/gpu.nvidia.com": str(count)})
        pod["spec"]["schedulingGates"] = [{"name": "example.com/hold"}]
        return {**pod, "metadata": {"name": name, "namespace": "late"}}
    # "up" asks 2 through the class and names a 3-GPU claim: the compiled policy sees a claim of 2
    # (within 4), only dra-bridge counts the pod's 5, so it is dra-bridge that refuses it.
    three = {**claim("three", 3), "metadata": {"name": "three", "namespace": "late"}}
    up = class_pod("up", 2)
    up["spec"]["resourceClaims"] = [{"name": "more", "resourceClaimName": "three"}]
    up["spec"]["containers"][0]["resources"]["claims"] = [{"name": "more"}]
    plane.apply([three, up, class_pod("down", 5), class_pod("two", 2)])  # 8 GPUs on dra-0, 3 held by "three"
    before = policy_status(webhook)["digest"]
    rules = [{**r, "match": {**r["match"], "namespaces": ["tenant-a", "late"]}} if r["name"] == "pods-max-4" else r
             for r in POLICY["rules"]]
    (plane.dir / "policy.yaml").write_text(yaml.safe_dump({"rules": rules}))

    def covers_late():
        found = plane.json("validatingadmissionpolicybindings", "-l", OURS)["items"]
        return {b["metadata"]["name"] for b in found if "late" in json.dumps(b["spec"])} == {
            "dra-bridge.pods-max-4.pods", "dra-bridge.pods-max-4.resourceclaims"}
    wait_for(covers_late, 60, "the rule covering namespace late, compiled")
    wait_for(lambda: (s := policy_status(webhook))["digest"] != before and
             s.get("compiledPolicies", {}).get("syncedPolicy") == s["digest"], 60, "serve judging with the new rule")

    def release(name):
        plane.kubectl("patch", "pod", name, "-n", "late", "--type=json",
                      "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')

    def refused(name, says):
        def seen():
            events = plane.json("events", "-n", "late", "--field-selector", f"involvedObject.name={name}")["items"]
            return [e["message"] for e in events if says in e.get("message", "")]
        found = wait_for(seen, 90, f"the scheduler's claim for pod {name} refused ({says})")
        assert not plane.json("pod", name, "-n", "late")["spec"].get("nodeName")
        mine = [c for c in plane.json("resourceclaims", "-n", "late")["items"]
                if any(o["name"] == name for o in c["metadata"].get("ownerReferences", []))]
        assert mine == [], mine
        return found
    release("up")
    said = refused("up", "rule pods-max-4")
    assert any("take 5 devices" in m and "pod up's extended resources" in m for m in said), said
    webhook.stop()
    try:
        release("down")
        refused("down", "ValidatingAdmissionPolicy 'dra-bridge.pods-max-4.resourceclaims'")
    finally:
        webhook.start()
    release("two")
    wait_for(lambda: plane.json("pod", "two", "-n", "late")["spec"].get("nodeName"), 90, "the pod within the rule bound")
