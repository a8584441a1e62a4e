"""manifests/: renders with kustomize, validates against the OpenAPI schemas, least privilege."""

import base64
import json
import os
import shutil
import subprocess

import celpy
import kubernetes_validate
import pytest
import yaml

from app.common import read_objects
from app.migration import legacy_resources, pod_templates
from app.policy import default_policy
from tests.conftest import ROOT
from tests.manifests_tree import operator_path

KUBECTL = shutil.which("kubectl")
LEASES = ("dra-bridge-template-gc", "dra-bridge-admission-policies")  # serve's two, by name
# Each verb we grant, per ClusterRole, and the call in app/ that needs it.
GRANTED = {
    "dra-bridge": {
        ("resource.k8s.io", "resourceclaimtemplates", "create"): "kube.TemplateStore.ensure",
        ("resource.k8s.io", "resourceclaimtemplates", "get"): "kube.TemplateStore.ensure (AlreadyExists: is it ours?)",
        ("resource.k8s.io", "resourceclaimtemplates", "list"): "kube.TemplateCollector.run_once",
        ("resource.k8s.io", "resourceclaimtemplates", "watch"): "kube.TemplateWatch (forget deleted templates)",
        ("resource.k8s.io", "resourceclaimtemplates", "delete"): "kube.TemplateCollector.run_once",
        ("", "pods", "list"): "kube.TemplateCollector.run_once (templates pods name); kube.running_pods "
                              "(GpuPriorityWatch: the priorities GPU pods run at)",
        ("", "pods", "get"): "kube.ClaimReader._pod (the pod a scheduler's extended-resource claim serves)",
        ("", "namespaces", "get"): "kube.NamespaceLabels.get (policy namespace selectors)",
        ("", "namespaces", "list"): "kube.opted_in_pods (serve: dra_bridge_unmigrated_pods)",
        ("resource.k8s.io", "resourceclaims", "get"): "kube.ClaimReader (the claims a pod names: per-pod limits)",
        ("scheduling.k8s.io", "podgroups", "get"): "kube.ClaimReader (a pod's PodGroup: claims it shares, KEP-5729)",
        **{("resource.k8s.io", r, v): "live.LiveInventory list + watch"
           for r in ("resourceslices", "deviceclasses", "resourceclaims", "devicetaintrules") for v in ("list", "watch")},
        **{("", "nodes", v): "live.LiveInventory list + watch (labels for nodeSelector slices, device-plugin GPUs)"
           for v in ("list", "watch")},
        **{("", "resourcequotas", v): "live.LiveInventory list + watch (GPU quotas a rewrite must not escape)"
           for v in ("list", "watch")},
        **{("scheduling.k8s.io", "priorityclasses", v): "live.LiveInventory list + watch (preemption)"
           for v in ("list", "watch")},
        ("", "configmaps", "get"): "kube.read_kueue (Kueue's deviceClassMappings; kueue-manager-config only)",
        ("apps", "deployments", "get"): "kube.read_kueue (Kueue's --feature-gates; kueue-controller-manager only)",
        **{("kueue.x-k8s.io", r, "list"): "kube.read_queues (serve: dra_bridge_queue_budget_escaped_devices)"
           for r in ("clusterqueues", "localqueues", "workloads")},
        **{("admissionregistration.k8s.io", r, v): "kube.AdmissionPolicySync.run_once (list ours; apply: create or "
                                                   "patch; delete what no rule compiles to)"
           for r in ("validatingadmissionpolicies", "validatingadmissionpolicybindings")
           for v in ("list", "create", "patch", "delete")},
    },
    "dra-bridge-reporter": {
        ("resource.k8s.io", "resourceslices", "list"): "publish.SlicePublisher._ours",
        ("resource.k8s.io", "resourceslices", "create"): "publish.SlicePublisher.publish (new slice)",
        ("resource.k8s.io", "resourceslices", "update"): "publish.SlicePublisher.publish (generation bump)",
        ("resource.k8s.io", "resourceslices", "delete"): "publish.SlicePublisher.remove_all / shrink",
        ("", "nodes", "get"): "publish.SlicePublisher.node_uid (owner reference)",
    },
    # Bound to nobody: the admin who runs `dra-bridge rollout` binds it to themselves.
    "dra-bridge-rollout": {
        ("", "nodes", "get"): "kube.NodeWrites.node",
        ("coordination.k8s.io", "leases", "get"): "kube.LeaseStore.read (the rollout Lease, by name)",
        **{("", r, "list"): "kube.rollout_snapshot (volumes' node affinity pins pods: placement)"
           for r in ("persistentvolumeclaims", "persistentvolumes")},
        ("scheduling.k8s.io", "priorityclasses", "list"): "kube.rollout_snapshot (preemption: the path choice)",
        ("coordination.k8s.io", "leases", "update"): "kube.LeaseStore.write (renew, release, take an expired one)",
        ("coordination.k8s.io", "leases", "create"): "kube.LeaseStore.write (the first rollout)",
        ("", "nodes", "list"): "kube.rollout_snapshot",
        ("", "nodes", "patch"): "kube.NodeWrites.patch_node (cordon, labels, step annotations)",
        ("", "pods", "list"): "kube.rollout_snapshot, NodeWrites.on_node",
        ("", "pods/eviction", "create"): "kube.NodeWrites.evict",
        **{("", r, "list"): "kube.rollout_snapshot (paths: opt-in labels, GPU quotas)"
           for r in ("namespaces", "resourcequotas")},
        ("policy", "poddisruptionbudgets", "list"): "kube.rollout_snapshot (budgets a wave must keep)",
        ("", "configmaps", "get"): "kube.read_kueue (Kueue's deviceClassMappings, as serve reads them); "
                                   "policy_in_force.read_served_policy (the policy a wave judges with)",
        ("apps", "deployments", "get"): "kube.read_kueue (Kueue's --feature-gates, as serve reads them)",
        ("batch", "jobs", "list"): "kube.rollout_snapshot, NodeWrites.judged_on_node (backoffLimits evictions count "
                                   "against; Jobs short of pods)",
        **{("apps", r, "list"): "kube.rollout_snapshot (rollout status: workloads short of pods)"
           for r in ("deployments", "statefulsets")},
        ("apps", "daemonsets", "list"): "kube.rollout_snapshot (undo: a device-plugin DaemonSet takes the node back)",
        **{("resource.k8s.io", r, "list"): "kube.rollout_snapshot (published GPUs, held devices, native classes)"
           for r in ("resourceslices", "resourceclaims", "deviceclasses")},
    },
}


def kustomize(folder) -> str:
    if KUBECTL is None:
        # CI puts the e2e build's kubectl on PATH and sets this: there a skip would hide the contracts.
        assert not os.environ.get("DRA_BRIDGE_REQUIRE_KUBECTL"), "DRA_BRIDGE_REQUIRE_KUBECTL is set: kubectl must be on PATH"
        pytest.skip("kubectl not installed: cannot render kustomize")
    return subprocess.run([KUBECTL, "kustomize", str(folder)], check=True, capture_output=True, text=True).stdout


def render(path: str) -> list[dict]:
    """PATH rendered as the operator's tree has it (the image named in manifests/image)."""
    return [d for d in yaml.safe_load_all(kustomize(operator_path(path))) if d]


@pytest.fixture(scope="module")
def objects():
    return render("manifests")


def by_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def test_renders_every_component(objects):
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == sorted(["Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                            "Deployment", "NetworkPolicy", "PodDisruptionBudget", "Service", "MutatingWebhookConfiguration",
                            "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet", "Role", "RoleBinding",
                            "ClusterRole",
                            "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy",
                            "ValidatingAdmissionPolicyBinding"])


def test_every_object_validates_against_the_schema(objects):
    for obj in objects:
        kubernetes_validate.validate(obj, "1.34.0", strict=True)


def test_mutating_webhook_contract(objects):
    [config] = by_kind(objects, "MutatingWebhookConfiguration")
    [hook] = config["webhooks"]
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["sideEffects"] == "NoneOnDryRun"
    assert hook["failurePolicy"] == "Ignore"
    assert hook["timeoutSeconds"] <= 10
    assert hook["rules"] == [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                              "resources": ["pods"], "scope": "Namespaced"}]
    excluded = [e for e in hook["namespaceSelector"]["matchExpressions"] if e["operator"] == "NotIn"]
    assert excluded == [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["dra-bridge"]}]
    svc = hook["clientConfig"]["service"]
    assert (svc["name"], svc["namespace"], svc["path"]) == ("dra-bridge", "dra-bridge", "/mutate")


def test_validating_webhook_contract(objects):
    [config] = by_kind(objects, "ValidatingWebhookConfiguration")
    hook, policy = config["webhooks"]
    # The policy ConfigMap is judged when applied: ours only; with dra-bridge down an install or
    # upgrade still applies (a bad file is then refused at reload, and said).
    assert policy["clientConfig"]["service"]["path"] == "/validate-policy" and policy["failurePolicy"] == "Ignore"
    # By name: the documented update (`kubectl create configmap ... | kubectl apply`) drops labels.
    assert "objectSelector" not in policy and policy["matchConditions"] == [
        {"name": "the-policy-configmap", "expression": "request.name == 'dra-bridge-policy'"}]
    # Issue 56: deleting it is judged too (refused unless annotated).
    assert policy["rules"][0]["operations"] == ["CREATE", "UPDATE", "DELETE"]
    assert policy["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "dra-bridge"}}
    assert hook["admissionReviewVersions"] == ["v1"] and hook["sideEffects"] == "NoneOnDryRun"
    assert hook["clientConfig"]["service"]["path"] == "/validate"
    resources = {r for rule in hook["rules"] for r in rule["resources"]}
    assert resources == {"resourceclaims", "resourceclaimtemplates", "pods"}
    # Left out by name only (ours and kube-system): no label a tenant may set turns a rule off.
    assert hook["namespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["dra-bridge", "kube-system"]}]}


def test_ca_bundle_overlay_reaches_both_webhooks_and_leaves_the_base_alone(tmp_path):
    from app.cli import main

    before = {p: p.read_bytes() for p in (ROOT / "manifests").rglob("*.yaml")}
    out = tmp_path / "deploy"
    assert main(["certs", "--out", str(out), "--inject", str(ROOT / "manifests"),
                 "--image", "registry.example/dra-bridge:dev"]) == 0
    assert {p: p.read_bytes() for p in (ROOT / "manifests").rglob("*.yaml")} == before
    rendered = [d for d in yaml.safe_load_all(kustomize(out)) if d]
    ca = base64.b64encode((out / "ca.crt").read_bytes()).decode()
    hooks = [d for d in rendered if d["kind"].endswith("WebhookConfiguration")]
    assert len(hooks) == 2 and all(w["clientConfig"]["caBundle"] == ca for h in hooks for w in h["webhooks"])
    [secret] = [d for d in rendered if d["kind"] == "Secret"]
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"], secret["type"]) == \
        ("dra-bridge-tls", "dra-bridge", "kubernetes.io/tls")
    assert base64.b64decode(secret["data"]["tls.key"]) == (out / "tls.key").read_bytes()
    images = {c["image"] for d in rendered if d["kind"] in ("Deployment", "DaemonSet")
              for c in d["spec"]["template"]["spec"]["containers"]}
    assert images == {"registry.example/dra-bridge:dev"}
    for doc in rendered:
        kubernetes_validate.validate(doc, "1.34.0", strict=True)


CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                  "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


def test_certs_namespace_moves_every_object_and_every_reference(tmp_path):
    """Issue 46: `certs --namespace gpu-system --inject manifests/` once moved only the Secret. Now
    every namespaced object, the Service references, the subjects, the webhooks' namespace
    selectors, the policy ConfigMap flag and the reporter policy's service account all move."""
    from app.cli import main

    out = tmp_path / "deploy"
    assert main(["certs", "--out", str(out), "--namespace", "gpu-system", "--inject", str(ROOT / "manifests"),
                 "--image", "registry.example/dra-bridge:dev"]) == 0
    rendered = [d for d in yaml.safe_load_all(kustomize(out)) if d]
    assert len(rendered) == len(render("manifests")) + 1  # the Secret
    for doc in rendered:
        if doc["kind"] == "Namespace":
            assert doc["metadata"]["name"] == "gpu-system"
        elif doc["kind"] not in CLUSTER_SCOPED:
            assert doc["metadata"]["namespace"] == "gpu-system", (doc["kind"], doc["metadata"]["name"])
        for subject in doc.get("subjects") or []:
            assert subject["namespace"] == "gpu-system"
        for hook in doc.get("webhooks") or []:
            assert hook["clientConfig"]["service"]["namespace"] == "gpu-system"
        # No namespace name of the base is left anywhere a namespace is named.
        text = json.dumps({k: v for k, v in doc.items() if k != "metadata"})
        for named in ('"namespace": "dra-bridge"', '"kubernetes.io/metadata.name": "dra-bridge"', "=dra-bridge/",
                      "serviceaccount:dra-bridge:"):
            assert named not in text, (doc["kind"], doc["metadata"]["name"], named)
    hooks = {d["kind"]: d for d in rendered if d["kind"].endswith("WebhookConfiguration")}
    [_mutate, validate, policy] = hooks["MutatingWebhookConfiguration"]["webhooks"] + \
        hooks["ValidatingWebhookConfiguration"]["webhooks"]
    assert validate["namespaceSelector"]["matchExpressions"][0]["values"] == ["gpu-system", "kube-system"]
    assert policy["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "gpu-system"}}
    header = (out / "kustomization.yaml").read_text()
    assert f"# The base is {ROOT / 'manifests'}" in header  # where it comes from, and how to update


# The background scan's ClusterRole (manifests/audit): what `audit --inventory live -o policyreport
# --write-reports` calls, run as that service account in tests/e2e/test_audit_cronjob.py.
AUDIT_GRANTED = {
    **{("", r, "list"): "auditcli.live_objects (bare pods, controllers' pods; GPU quotas)" for r in ("pods", "resourcequotas")},
    **{("apps", r, "list"): "auditcli.live_objects (workloads' pod templates)"
       for r in ("deployments", "statefulsets", "daemonsets", "replicasets")},
    **{("batch", r, "list"): "auditcli.live_objects (workloads' pod templates)" for r in ("jobs", "cronjobs")},
    ("", "namespaces", "list"): "auditcli.run_audit (labels: opt-in, policy selectors; every namespace reported)",
    ("", "nodes", "list"): "application.live_inventory (device-plugin GPUs)",
    **{("resource.k8s.io", r, "list"): "application.live_inventory, claim_objects"
       for r in ("resourceslices", "deviceclasses", "resourceclaims", "resourceclaimtemplates")},
    ("scheduling.k8s.io", "priorityclasses", "list"): "auditcli.priority_classes (preemption: the path choice)",
    ("", "configmaps", "get"): "servedpolicy.policy_for (policy in force, last good copy); kube.read_kueue",
    ("apps", "deployments", "get"): "kube.read_kueue (Kueue's --feature-gates)",
    **{("kueue.x-k8s.io", r, "list"): "kube.list_queues (queue budgets)" for r in ("clusterqueues", "localqueues", "workloads")},
    **{("wgpolicyk8s.io", r, v): "kube.write_reports (server-side apply; create: the first apply)"
       for r in ("policyreports", "clusterpolicyreports") for v in ("create", "patch")},
}


def test_the_audit_cronjobs_rbac_grants_only_what_audit_uses(tmp_path):
    from app.cli import main

    out = tmp_path / "overlay"
    assert main(["certs", "--out", str(out), "--inject", str(ROOT / "manifests"), "--image", "r/x:1",
                 "--audit-cronjob"]) == 0
    rendered = [d for d in yaml.safe_load_all(kustomize(out)) if d]
    [role] = [d for d in by_kind(rendered, "ClusterRole") if d["metadata"]["name"] == "dra-bridge-audit"]
    granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]
               for v in rule["verbs"]}
    assert granted == set(AUDIT_GRANTED), granted ^ set(AUDIT_GRANTED)
    [names] = [rule["resourceNames"] for rule in role["rules"] if rule["resources"] == ["configmaps"]]
    assert set(names) == {"dra-bridge-policy", "dra-bridge-policy-last-good", "kueue-manager-config"}
    assert not [d for d in render("manifests") if d["metadata"]["name"] == "dra-bridge-audit"]  # opt-in only


def test_rbac_grants_only_what_the_code_uses(objects):
    roles = {r["metadata"]["name"]: r for r in by_kind(objects, "ClusterRole")}
    assert set(roles) == set(GRANTED)
    for name, role in roles.items():
        granted = {(g, r, v) for rule in role["rules"] for g in rule["apiGroups"]
                   for r in rule["resources"] for v in rule["verbs"]}
        assert granted == set(GRANTED[name]), f"{name}: unexplained grants {granted - set(GRANTED[name])}"
    [role] = by_kind(objects, "Role")  # the collector's and the admission policies' leases, ours only
    assert role["metadata"]["namespace"] == "dra-bridge"
    assert {(r["resources"][0], v, tuple(r.get("resourceNames", ()))) for r in role["rules"] for v in r["verbs"]} == {
        ("leases", "create", ()), ("leases", "get", LEASES), ("leases", "update", LEASES),
        ("events", "create", ()), ("configmaps", "get", ("dra-bridge-policy",)),  # kube.EventSink, with its uid
        # kube.LastGoodPolicy: the last policy taken, by name only once created
        ("configmaps", "create", ()), ("configmaps", "get", ("dra-bridge-policy-last-good",)),
        ("configmaps", "update", ("dra-bridge-policy-last-good",))}
    [rb] = by_kind(objects, "RoleBinding")
    assert rb["roleRef"]["name"] == "dra-bridge-template-gc" and rb["subjects"][0]["name"] == "dra-bridge"
    bindings = {b["roleRef"]["name"]: b["subjects"][0]["name"] for b in by_kind(objects, "ClusterRoleBinding")}
    assert bindings == {"dra-bridge": "dra-bridge", "dra-bridge-reporter": "dra-bridge-reporter"}


def test_reporter_daemonset_runs_on_gpu_nodes_unprivileged(objects):
    [ds] = by_kind(objects, "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert spec["securityContext"]["runAsNonRoot"] is True
    [c] = spec["containers"]
    assert c["args"][0] == "reporter" and "--mode=shadow" in c["args"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert any(e["name"] == "NODE_NAME" for e in c["env"])


def test_deployment_is_hardened_and_highly_available(objects):
    [deploy] = by_kind(objects, "Deployment")  # the webhook
    spec = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] == 2
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["affinity"]["podAntiAffinity"]
    [c] = spec["containers"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # Probes on the plain health port, so --client-ca on the review port cannot break them.
    health = next(p for p in c["ports"] if p["name"] == "health")
    assert f"--health-port={health['containerPort']}" in c["args"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"]["port"] == "health" and "scheme" not in c[probe]["httpGet"]
    [pdb] = by_kind(objects, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    # Graceful drain in process (serve --drain-seconds, 100 by default: past the API server's 90 s
    # idle timeout) well inside the grace period; no preStop needed.
    from app.cli.main import build_parser
    drain = build_parser().parse_args(c["args"]).drain_seconds
    assert 90 < drain and spec["terminationGracePeriodSeconds"] >= drain + 10 and "lifecycle" not in c


def test_reporter_writes_are_limited_to_its_own_node(objects):
    """RBAC lets the reporter write any ResourceSlice; the admission policy narrows it to the
    node its pod-bound token names (enforced by a real API server in tests/e2e)."""
    [policy] = by_kind(objects, "ValidatingAdmissionPolicy")
    [binding] = by_kind(objects, "ValidatingAdmissionPolicyBinding")
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}
    [ds] = by_kind(objects, "DaemonSet")
    account = ds["spec"]["template"]["spec"]["serviceAccountName"]
    [condition] = policy["spec"]["matchConditions"]
    assert f'"system:serviceaccount:{ds["metadata"]["namespace"]}:{account}"' in condition["expression"]
    assert policy["spec"]["failurePolicy"] == "Fail"


def test_network_policy_admits_reviews_and_keeps_metrics_to_scrapers(objects):
    [policy] = by_kind(objects, "NetworkPolicy")
    [deploy] = by_kind(objects, "Deployment")
    assert policy["spec"]["podSelector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]
    rules = {rule["ports"][0]["port"]: rule.get("from") for rule in policy["spec"]["ingress"]}
    assert rules[8443] is None  # the API server's address is not selectable
    # Scrapers: the namespace `monitoring`, or any labelled dra-bridge.io/scrape=allowed (issue 25).
    assert rules[8081] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
                           {"namespaceSelector": {"matchLabels": {"dra-bridge.io/scrape": "allowed"}}}]
    [service] = by_kind(objects, "Service")
    [metrics_port] = [p for p in service["spec"]["ports"] if p["name"] == "metrics"]
    [container] = deploy["spec"]["template"]["spec"]["containers"]
    [health] = [p for p in container["ports"] if p["name"] == metrics_port["targetPort"]]
    assert health["containerPort"] == 8081 and "--health-port=8081" in container["args"]


def test_monitoring_scrapes_the_metrics_port_of_the_webhook_service(objects):
    monitoring = render("manifests/monitoring")
    [monitor] = by_kind(monitoring, "ServiceMonitor")
    [service] = by_kind(objects, "Service")
    assert monitor["metadata"]["namespace"] == service["metadata"]["namespace"]
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    [dashboard] = by_kind(monitoring, "ConfigMap")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(dashboard["data"]["dra-bridge.json"])["uid"] == "dra-bridge"
    kubernetes_validate.validate(dashboard, "1.34.0", strict=True)


def test_no_manifest_ships_the_admins_policy(objects):
    """The admin's ConfigMap is theirs: the base ships none (a re-apply of a newer base would put
    the default back over it), mounts it optional and serves the bundled default while absent."""
    assert not [o for o in by_kind(objects, "ConfigMap") if o["metadata"]["name"] == "dra-bridge-policy"]
    [deploy] = by_kind(objects, "Deployment")
    spec = deploy["spec"]["template"]["spec"]
    [volume] = [v for v in spec["volumes"] if v["name"] == "policy"]
    assert volume["configMap"] == {"name": "dra-bridge-policy", "optional": True}
    args = spec["containers"][0]["args"]
    assert {"--policy=/etc/dra-bridge/policy/policy.yaml", "--policy-optional", "--admission-policies=sync"} <= set(args)


def test_cert_manager_overlay_injects_ca(objects):
    rendered = render("manifests/cert-manager")
    [config] = by_kind(rendered, "MutatingWebhookConfiguration")
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "dra-bridge/dra-bridge"
    assert by_kind(rendered, "Certificate")[0]["spec"]["secretName"] == "dra-bridge-tls"


def test_certs_cert_manager_writes_an_overlay_with_no_key_and_no_tracked_edit(tmp_path):
    """Issue 55: the cert-manager path once needed the tracked manifests/image edited. Now `certs
    --cert-manager --inject` writes an overlay of its own: the same Issuer and Certificate as
    manifests/cert-manager (for the namespace asked), the CA injection on both webhook
    configurations, the image; no key, so the folder can be committed."""
    from app.cli import main

    before = {p: p.read_bytes() for p in (ROOT / "manifests").rglob("*.yaml")}
    default = tmp_path / "default"
    assert main(["certs", "--cert-manager", "--out", str(default), "--inject", str(ROOT / "manifests"),
                 "--image", "registry.example/dra-bridge:dev"]) == 0
    assert {p: p.read_bytes() for p in (ROOT / "manifests").rglob("*.yaml")} == before
    assert sorted(p.name for p in default.iterdir()) == ["certificate.yaml", "kustomization.yaml"]
    shipped = [d for d in yaml.safe_load_all((ROOT / "manifests/cert-manager/certificate.yaml").read_text()) if d]
    assert [d for d in yaml.safe_load_all((default / "certificate.yaml").read_text()) if d] == shipped
    # The same objects as the tracked path, but for its image component's bookkeeping annotation.
    assert _without_image_note(render("manifests/cert-manager"), "registry.example/dra-bridge:dev") == \
        [d for d in yaml.safe_load_all(kustomize(default)) if d]

    moved = tmp_path / "moved"
    assert main(["certs", "--cert-manager", "--out", str(moved), "--inject", str(ROOT / "manifests"),
                 "--namespace", "gpu-system", "--host", "10.0.0.7", "--image", "registry.example/dra-bridge:dev"]) == 0
    rendered = [d for d in yaml.safe_load_all(kustomize(moved)) if d]
    hooks = [d for d in rendered if d["kind"].endswith("WebhookConfiguration")]
    assert len(hooks) == 2
    for hook in hooks:
        assert hook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "gpu-system/dra-bridge"
    [certificate] = by_kind(rendered, "Certificate")
    assert certificate["metadata"]["namespace"] == "gpu-system"
    assert "dra-bridge.gpu-system.svc" in certificate["spec"]["dnsNames"]
    assert certificate["spec"]["ipAddresses"] == ["10.0.0.7"]
    assert certificate["spec"]["issuerRef"]["name"] == by_kind(rendered, "Issuer")[0]["metadata"]["name"]
    for doc in rendered:
        if doc["kind"] not in CLUSTER_SCOPED:
            assert doc["metadata"].get("namespace", doc["metadata"]["name"]) == "gpu-system", doc["kind"]
    images = {c["image"] for d in rendered if d["kind"] in ("Deployment", "DaemonSet")
              for c in d["spec"]["template"]["spec"]["containers"]}
    assert images == {"registry.example/dra-bridge:dev"}


def _without_image_note(objects: list[dict], image: str) -> list[dict]:
    for obj in objects:
        notes = obj["metadata"].get("annotations") or {}
        notes.pop("dra-bridge.io/image", None)
        if "annotations" in obj["metadata"] and not notes:
            del obj["metadata"]["annotations"]
        for container in obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            container["image"] = image
    return objects


def test_match_condition_selects_exactly_the_pods_we_migrate(objects, corpus):
    [config] = by_kind(objects, "MutatingWebhookConfiguration")
    [condition] = config["webhooks"][0]["matchConditions"]
    env = celpy.Environment()
    program = env.program(env.compile(condition["expression"]))
    rules = default_policy().migration
    seen = {True: 0, False: 0}
    for folder in ("legacy", "hami", "dra-claims"):
        for path in sorted((corpus / folder).glob("*.yaml")):
            for _line, obj in read_objects(str(path)):
                for _where, holder in pod_templates(obj):
                    expected = bool(legacy_resources(holder["spec"], rules))
                    got = bool(program.evaluate({"object": celpy.json_to_cel({"spec": holder["spec"]})}))
                    assert got == expected, f"{path.name}: matchCondition {got}, planner {expected}"
                    seen[got] += 1
    assert seen[True] > 20 and seen[False] > 5


def validating_admits(validating: dict):
    """admits(group, resource, obj, user, operation): every matchCondition holds, as the API
    server requires before it calls the webhook."""
    env = celpy.Environment()
    programs = [env.program(env.compile(c["expression"])) for c in validating["webhooks"][0]["matchConditions"]]

    def admits(group: str, resource: str, obj: dict, user: str = "alice", operation: str = "CREATE",
               old: dict | None = None) -> bool:
        request = {"resource": {"group": group, "version": "v1", "resource": resource}, "operation": operation,
                   "userInfo": {"username": user}}
        bindings = {"request": celpy.json_to_cel(request), "object": celpy.json_to_cel(obj),
                    "oldObject": celpy.json_to_cel(old)}
        return all(bool(p.evaluate(bindings)) for p in programs)
    return admits


def test_claims_the_controller_stamps_from_templates_are_validated_like_any_claim(objects):
    """Issue 45: a claim rule holds for the claims the resourceclaim controller stamps from
    templates too (a template of 8 must not leave an 8-device claim a claim rule refuses)."""
    [validating] = by_kind(objects, "ValidatingWebhookConfiguration")
    admits = validating_admits(validating)
    stamped = {"metadata": {"generateName": "trainer-0-gpus-", "annotations": {
        "resource.kubernetes.io/pod-claim-name": "gpus"}}, "spec": {"devices": {"requests": []}}}
    written = {"metadata": {"name": "mine"}, "spec": {"devices": {"requests": []}}}
    for controller in ("system:serviceaccount:kube-system:resource-claim-controller", "system:kube-controller-manager"):
        assert admits("resource.k8s.io", "resourceclaims", stamped, controller) is True
        assert admits("resource.k8s.io", "resourceclaims", written, controller) is True
    assert admits("resource.k8s.io", "resourceclaims", stamped, "alice") is True  # forged annotation: checked
    assert admits("resource.k8s.io", "resourceclaimtemplates", stamped, "system:kube-controller-manager") is True
    # An UPDATE judges nothing new unless the (immutable) spec changed: finalizers come off as pods go.
    unfinalized = {**written, "metadata": {"name": "mine", "finalizers": []}}
    assert admits("resource.k8s.io", "resourceclaims", unfinalized, "alice", "UPDATE", written) is False
    respec = {**written, "spec": {"devices": {"requests": [{"name": "r"}]}}}
    assert admits("resource.k8s.io", "resourceclaims", respec, "alice", "UPDATE", written) is True


def test_validating_match_condition_passes_claims_and_exactly_the_gpu_pods(objects):
    [mutating] = by_kind(objects, "MutatingWebhookConfiguration")
    [validating] = by_kind(objects, "ValidatingWebhookConfiguration")
    env = celpy.Environment()
    pods_only = env.program(env.compile(mutating["webhooks"][0]["matchConditions"][0]["expression"]))
    admits = validating_admits(validating)

    rules = default_policy().migration
    pods = 0
    for path in sorted((ROOT / "examples").rglob("*.yaml")):
        for _line, obj in read_objects(str(path)):
            if obj.get("kind") in ("ResourceClaim", "ResourceClaimTemplate"):
                assert admits("resource.k8s.io", obj["kind"].lower() + "s", obj), path
            for _where, holder in pod_templates(obj):
                pod = {"spec": holder["spec"]}
                legacy = bool(legacy_resources(holder["spec"], rules))
                assert legacy == bool(pods_only.evaluate({"object": celpy.json_to_cel(pod)})), path
                # /validate also judges pods that name claims (per-pod limits)
                assert admits("", "pods", pod) == (legacy or bool(holder["spec"].get("resourceClaims"))), path
                pods += 1
    assert admits("", "pods", {"spec": {"containers": [{"name": "web", "image": "nginx"}]}}) is False
    assert pods >= 5
    # Issue 56: every spelling a DeviceClass serves reaches /validate (KEP-5004), init containers too.
    for resource in ("deviceclass.resource.kubernetes.io/gpu.nvidia.com", "example.com/accelerator"):
        for where in ("containers", "initContainers"):
            asked = {"spec": {"containers": [{"name": "main"}],
                              where: [{"name": "c", "resources": {"limits": {resource: "6"}}}]}}
            assert admits("", "pods", asked), (resource, where)
    plain = {"spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi",
                                                                           "hugepages-2Mi": "1Gi"}}}]}}
    assert admits("", "pods", plain) is False


@pytest.mark.parametrize("entry", ["manifests", "manifests/cert-manager"])
def test_an_entry_point_without_a_named_image_refuses_to_render_saying_how(entry):
    """Issue 46: `kubectl apply -k manifests/` once deployed the placeholder image. Now it, and
    the cert-manager path, fail to render with one line naming the file to set it in; named there,
    both webhook and reporter run it and the Deployment's annotation records it."""
    kustomize(ROOT / "manifests/base")  # skips without kubectl
    result = subprocess.run([KUBECTL, "kustomize", str(ROOT / entry)], capture_output=True, text=True)
    assert result.returncode != 0
    [line] = result.stderr.strip().splitlines()
    assert "no image set. Name yours in manifests/image/kustomization.yaml (newName, newTag)" in line
    rendered = render(entry)
    images = {c["image"] for d in rendered if d["kind"] in ("Deployment", "DaemonSet")
              for c in d["spec"]["template"]["spec"]["containers"]}
    assert images == {"registry.example.com/dra-bridge:0.1.0"}
    [deployment] = [d for d in rendered if d["kind"] == "Deployment"]
    assert deployment["metadata"]["annotations"] == {"dra-bridge.io/image": "registry.example.com/dra-bridge:0.1.0"}


@pytest.mark.parametrize("image", [{"newName": "reg.local/db", "digest": "sha256:" + "a" * 64},
                                   {"newName": "reg.local:5000/db", "newTag": "v2"}])
def test_a_tag_or_digest_is_an_image_named(tmp_path, image):
    kustomize(ROOT / "manifests/base")
    tree = tmp_path / "manifests"
    shutil.copytree(ROOT / "manifests", tree, symlinks=True)
    path = tree / "image" / "kustomization.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["images"][0].update(image)
    path.write_text(yaml.safe_dump(doc))
    [deployment] = [d for d in yaml.safe_load_all(kustomize(tree)) if d and d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"].startswith(image["newName"])
