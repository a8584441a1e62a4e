"""charts/dra-bridge, rendered by a real `helm template`: the objects manifests/ installs,
valid against the Kubernetes 1.34 schemas, with its options doing what values.yaml says."""

import base64
import json

import kubernetes_validate
import pytest
import yaml

from app.policy import load_policy
from tests.contract.test_manifests import render as kustomize_render
from tests.conftest import ROOT
from tests.helm.helmbin import CHART, template

# A cold build of helm takes minutes; the tests after it take seconds.
pytestmark = pytest.mark.timeout(1800)
HELM_LABELS = ("app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "helm.sh/chart")


def rendered(helm, *args, namespace="dra-bridge") -> list[dict]:
    result = template(helm, *args, namespace=namespace)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def comparable(doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))
    labels = doc["metadata"].get("labels") or {}
    for key in HELM_LABELS:
        labels.pop(key, None)
    if doc["kind"] == "ConfigMap":  # the policy: the same document (the base's file keeps comments)
        doc["data"] = {k: yaml.safe_load(v) for k, v in doc["data"].items()}
    return doc


def by_key(docs):
    return {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d for d in docs}


def test_the_chart_lints_strictly(helm):
    import subprocess

    result = subprocess.run([str(helm), "lint", "--strict", str(CHART)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_defaults_render_the_objects_manifests_install(helm):
    chart = by_key(comparable(d) for d in rendered(helm, "--set", "namespace.create=true"))
    base = by_key(comparable(d) for d in kustomize_render("manifests"))
    assert set(chart) == set(base)
    for key in base:
        assert chart[key] == base[key], key
    # Without namespace.create the Namespace is left to `helm install --create-namespace`.
    assert ("Namespace", None, "dra-bridge") not in by_key(rendered(helm))


def test_every_rendered_object_passes_the_1_34_schemas(helm, tmp_path):
    (tmp_path / "ca.crt").write_text("ca")
    docs = rendered(helm, "--set", "namespace.create=true", "--set-file", f"tls.cert={tmp_path / 'ca.crt'}",
                    "--set-file", f"tls.key={tmp_path / 'ca.crt'}", namespace="gpu-admission")
    assert any(d["kind"] == "Secret" for d in docs)
    for doc in docs:
        kubernetes_validate.validate(doc, "1.34.0", strict=True)


def test_another_namespace_moves_every_reference(helm):
    docs = rendered(helm, namespace="gpu-admission")
    hooks = [d for d in docs if d["kind"].endswith("WebhookConfiguration")]
    for hook in hooks:
        webhook, *policy = hook["webhooks"]
        assert webhook["clientConfig"]["service"]["namespace"] == "gpu-admission"
        [own] = [e for e in webhook["namespaceSelector"]["matchExpressions"] if e["key"] == "kubernetes.io/metadata.name"]
        assert own["operator"] == "NotIn" and own["values"][0] == "gpu-admission"
        for entry in policy:  # the policy ConfigMap's judge: in our namespace only
            assert entry["clientConfig"]["service"]["namespace"] == "gpu-admission"
            assert entry["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "gpu-admission"}
    [vap] = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    assert "system:serviceaccount:gpu-admission:dra-bridge-reporter" in vap["spec"]["matchConditions"][0]["expression"]
    subjects = [s for d in docs if d["kind"].endswith("RoleBinding") for s in d["subjects"]]
    assert subjects and all(s["namespace"] == "gpu-admission" for s in subjects)


def test_certificates_from_files_or_cert_manager(helm, tmp_path):
    (tmp_path / "tls.crt").write_text("CERT")
    (tmp_path / "tls.key").write_text("KEY")
    ca = base64.b64encode(b"CA").decode()
    docs = rendered(helm, "--set", f"webhook.caBundle={ca}", "--set-file", f"tls.cert={tmp_path / 'tls.crt'}",
                    "--set-file", f"tls.key={tmp_path / 'tls.key'}")
    [secret] = [d for d in docs if d["kind"] == "Secret"]
    assert base64.b64decode(secret["data"]["tls.key"]) == b"KEY" and secret["type"] == "kubernetes.io/tls"
    assert all(w["clientConfig"]["caBundle"] == ca for d in docs if d["kind"].endswith("WebhookConfiguration")
               for w in d["webhooks"])
    docs = rendered(helm, "--set", "certManager.enabled=true")
    kinds = {d["kind"] for d in docs}
    assert {"Issuer", "Certificate"} <= kinds and "Secret" not in kinds
    assert all(d["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == "dra-bridge/dra-bridge"
               for d in docs if d["kind"].endswith("WebhookConfiguration"))
    half = template(helm, "--set-file", f"tls.cert={tmp_path / 'tls.crt'}")
    assert half.returncode != 0 and "set both" in half.stderr


def test_image_by_digest_and_reporter_options(helm):
    digest = "sha256:" + "a" * 64
    docs = rendered(helm, "--set", f"image.digest={digest}", "--set", "reporter.mode=publish",
                    "--set", "reporter.extraArgs={--shareable}")
    images = {c["image"] for d in docs if d["kind"] in ("Deployment", "DaemonSet")
              for c in d["spec"]["template"]["spec"]["containers"]}
    assert images == {f"registry.example.com/dra-bridge@{digest}"}
    [ds] = [d for d in docs if d["kind"] == "DaemonSet"]
    args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--mode=publish" in args and "--shareable" in args
    assert not any(d["kind"] == "DaemonSet" for d in rendered(helm, "--set", "reporter.enabled=false"))


@pytest.mark.parametrize("setting, field", [("webhook.mdoe=warn", "/webhook"), ("reporter.mode=always", "/reporter/mode"),
                                            ("image.digest=latest", "/image/digest")])
def test_values_the_schema_refuses_name_the_field(helm, setting, field):
    result = template(helm, "--set", setting)
    assert result.returncode != 0 and field in result.stderr, result.stderr


def test_the_policy_value_is_a_policy_the_service_loads(helm, tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"policy": {"apiVersion": "dra-bridge.io/v1alpha1", "kind": "Policy",
                                                 "defaults": {"mode": "enforce"},
                                                 "namespaces": [{"names": ["research"], "mode": "audit"}]}}))
    [cm] = [d for d in rendered(helm, "-f", str(values)) if d["kind"] == "ConfigMap"]
    path = tmp_path / "policy.yaml"
    path.write_text(cm["data"]["policy.yaml"])
    policy = load_policy(str(path))
    assert policy.defaults.mode == "enforce" and policy.for_namespace("research", {}).mode == "audit"


def test_the_admins_policy_is_never_replaced_and_compiled_policies_are_a_value(helm):
    """Defaults ship no policy (the bundled default serves until the admin writes one); one from
    values is kept by an uninstall or a release without it; admissionPolicies.sync=false turns
    the compiled ValidatingAdmissionPolicies off, with their RBAC."""
    def webhook_args(docs):
        [deploy] = [d for d in docs if d["kind"] == "Deployment"]
        return deploy["spec"]["template"]["spec"]["containers"][0]["args"]

    def vap_grants(docs):
        [role] = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dra-bridge"]
        return [r for r in role["rules"] if r["apiGroups"] == ["admissionregistration.k8s.io"]]

    defaults = rendered(helm)
    assert not [d for d in defaults if d["kind"] == "ConfigMap"]
    assert "--policy-optional" in webhook_args(defaults) and "--admission-policies=sync" in webhook_args(defaults)
    assert vap_grants(defaults)
    [cm] = [d for d in rendered(helm, "--set", "policy.defaults.mode=enforce") if d["kind"] == "ConfigMap"]
    assert cm["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert yaml.safe_load(cm["data"]["policy.yaml"]) == {"defaults": {"mode": "enforce"}}
    off = rendered(helm, "--set", "admissionPolicies.sync=false")
    assert "--admission-policies=off" in webhook_args(off) and not vap_grants(off)


def test_the_image_must_be_named(helm):
    """No image is published: an install without image.repository says so instead of rendering an
    image nobody can pull."""
    result = template(helm, image=())
    assert result.returncode != 0 and "image.repository" in result.stderr and "docker build" in result.stderr


def test_operator_settings_reach_the_pods(helm, tmp_path):
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({
        "imagePullSecrets": [{"name": "regcred"}],
        "webhook": {"priorityClassName": "system-cluster-critical", "nodeSelector": {"role": "infra"},
                    "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In",
                                                                     "values": ["a"]}]}]}}},
                    "optInLabel": {"key": "example.com/gpu-migration", "value": "on"}},
        "reporter": {"priorityClassName": "system-node-critical"}}))
    docs = rendered(helm, "-f", str(values))
    for doc in docs:
        kubernetes_validate.validate(doc, "1.34.0", strict=True)
    [deploy] = [d for d in docs if d["kind"] == "Deployment"]
    [ds] = [d for d in docs if d["kind"] == "DaemonSet"]
    pod, reporter = deploy["spec"]["template"]["spec"], ds["spec"]["template"]["spec"]
    assert pod["imagePullSecrets"] == reporter["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert reporter["priorityClassName"] == "system-node-critical"
    assert pod["nodeSelector"] == {"role": "infra"} and pod["tolerations"][0]["key"] == "infra"
    assert list(pod["affinity"]) == ["nodeAffinity"]  # given: replaces the default spread
    # The opt-in label: the mutating webhook selects by it, and templates are written only there;
    # validation holds everywhere but the namespaces the admin names (never by a tenant's label).
    [mutating] = [d for d in docs if d["kind"] == "MutatingWebhookConfiguration"]
    [validating] = [d for d in docs if d["kind"] == "ValidatingWebhookConfiguration"]
    [expression, _own] = mutating["webhooks"][0]["namespaceSelector"]["matchExpressions"]
    assert expression == {"key": "example.com/gpu-migration", "operator": "In", "values": ["on"]}
    assert validating["webhooks"][0]["namespaceSelector"]["matchExpressions"] == [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["dra-bridge", "kube-system"]}]
    assert "--template-namespace-label=example.com/gpu-migration=on" in pod["containers"][0]["args"]
    # Defaults: the spread over nodes, no pull secret, no priority class, the default label unsaid.
    [deploy] = [d for d in rendered(helm) if d["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    assert "podAntiAffinity" in pod["affinity"] and "imagePullSecrets" not in pod and "priorityClassName" not in pod
    assert not any(a.startswith("--template-namespace-label") for a in pod["containers"][0]["args"])


@pytest.mark.parametrize("replicas, budget", [(1, False), (2, True), (3, True)])
def test_a_disruption_budget_only_with_more_than_one_replica(helm, replicas, budget):
    """minAvailable: 1 with one replica blocks every node drain."""
    docs = rendered(helm, "--set", f"webhook.replicas={replicas}")
    assert any(d["kind"] == "PodDisruptionBudget" for d in docs) is budget


def test_metrics_are_on_the_service_and_who_scrapes_is_a_value(helm, tmp_path):
    docs = rendered(helm)
    [service] = [d for d in docs if d["kind"] == "Service"]
    assert {"name": "metrics", "port": 8081, "targetPort": "health"} in service["spec"]["ports"]
    [policy] = [d for d in docs if d["kind"] == "NetworkPolicy"]
    scrapers = policy["spec"]["ingress"][1]["from"]
    assert {"namespaceSelector": {"matchLabels": {"dra-bridge.io/scrape": "allowed"}}} in scrapers
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"networkPolicy": {"metricsFrom": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "observability"}},
         "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]}}))
    [policy] = [d for d in rendered(helm, "-f", str(values)) if d["kind"] == "NetworkPolicy"]
    kubernetes_validate.validate(policy, "1.34.0", strict=True)
    assert policy["spec"]["ingress"][1]["from"][0]["podSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "prometheus"}
    values.write_text(yaml.safe_dump({"networkPolicy": {"metricsFrom": []}}))
    [policy] = [d for d in rendered(helm, "-f", str(values)) if d["kind"] == "NetworkPolicy"]
    assert len(policy["spec"]["ingress"]) == 1  # reviews only: nobody scrapes


def test_monitoring_objects_are_those_of_manifests_monitoring(helm):
    off = {d["kind"] for d in rendered(helm)}
    assert not {"ServiceMonitor", "PodMonitor", "PrometheusRule"} & off and ("ConfigMap", "dra-bridge-dashboard") \
        not in {(d["kind"], d["metadata"]["name"]) for d in rendered(helm)}
    on = ("--set", "monitoring.serviceMonitor.enabled=true", "--set", "monitoring.prometheusRule.enabled=true",
          "--set", "monitoring.dashboard.enabled=true", "--set", "monitoring.podMonitor.enabled=true")
    chart = by_key(comparable(d) for d in rendered(helm, *on) if d["kind"] in (
        "ServiceMonitor", "PodMonitor", "PrometheusRule") or d["metadata"]["name"] == "dra-bridge-dashboard")
    base = by_key(comparable(d) for d in kustomize_render("manifests/monitoring"))
    assert set(chart) == set(base) and len(base) == 4
    for key in base:  # the dashboard's JSON is compared decoded (comparable)
        assert chart[key] == base[key], key
    # Another namespace, and the labels a Prometheus selects by.
    docs = rendered(helm, *on, "--set", "monitoring.serviceMonitor.labels.release=kube-prometheus-stack",
                    "--set", "monitoring.serviceMonitor.interval=15s", namespace="gpu-admission")
    [monitor] = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["gpu-admission"]}
    assert monitor["spec"]["endpoints"] == [{"interval": "15s", "path": "/metrics", "port": "metrics"}]
    [service] = [d for d in docs if d["kind"] == "Service"]
    assert all(service["metadata"]["labels"][k] == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())


@pytest.mark.parametrize("setting, field", [
    ("webhook.priorityClassName=Not_A_Name", "/webhook/priorityClassName"),
    ("webhook.tolerations[0].operator=Sometimes", "/webhook/tolerations/0/operator"),
    ("imagePullSecrets[0].nme=regcred", "/imagePullSecrets/0"),
    ("monitoring.serviceMonitor.interval=soon", "/monitoring/serviceMonitor/interval"),
    ("webhook.optInLabel.value=not ok", "/webhook/optInLabel/value"),
    ("networkPolicy.monitoringNamespace=monitoring", "/networkPolicy")])
def test_operator_values_the_schema_refuses_name_the_field(helm, setting, field):
    result = template(helm, "--set", setting)
    assert result.returncode != 0 and field in result.stderr, result.stderr


def test_helm_show_readme_names_only_values_the_chart_has(helm):
    """`helm show readme` has the chart's own guide, and each value it names exists."""
    import re
    import subprocess

    shown = subprocess.run([str(helm), "show", "readme", str(CHART)], capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0 and "## Upgrade and rollback" in shown.stdout, shown.stderr
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    for name in set(re.findall(r"`((?:webhook|reporter|monitoring|admissionPolicies|policy)(?:\.\w+)*)`", shown.stdout)):
        node = values
        for part in name.split("."):
            assert isinstance(node, dict) and part in node, name
            node = node[part]


def test_the_audit_cronjob_is_that_of_manifests_audit(helm, tmp_path):
    """Issue 55: "run audit as a CronJob" shipped no CronJob. The chart's audit.cronJob and the
    certs overlay's --audit-cronjob deploy the same objects (manifests/audit)."""
    from app.cli import main
    from tests.contract.test_manifests import kustomize

    names = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "CronJob"}
    assert not [d for d in rendered(helm) if d["metadata"]["name"] == "dra-bridge-audit"]
    image = "registry.example.com/dra-bridge:0.1.0"
    docs = rendered(helm, "--set", "audit.cronJob.enabled=true", "--set", "image.tag=0.1.0")
    chart = by_key(comparable(d) for d in docs if d["metadata"]["name"] == "dra-bridge-audit")
    out = tmp_path / "overlay"
    assert main(["certs", "--out", str(out), "--inject", str(ROOT / "manifests"), "--image", image,
                 "--audit-cronjob"]) == 0
    base = by_key(comparable(d) for d in yaml.safe_load_all(kustomize(out))
                  if d and d["metadata"]["name"] == "dra-bridge-audit")
    assert {k[0] for k in base} == names and set(chart) == set(base)
    for key in base:
        assert chart[key] == base[key], key
    [job] = [d for d in docs if d["kind"] == "CronJob"]
    container = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == image and "--write-reports" in container["args"]
    moved = rendered(helm, "--set", "audit.cronJob.enabled=true", "--set", "audit.cronJob.schedule=@hourly",
                     namespace="gpu-admission")
    [job] = [d for d in moved if d["kind"] == "CronJob"]
    assert job["spec"]["schedule"] == "@hourly"
    assert "--policy-configmap=gpu-admission/dra-bridge-policy" in \
        job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    [binding] = [d for d in moved if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == "dra-bridge-audit"]
    assert binding["subjects"][0]["namespace"] == "gpu-admission"
    refused = template(helm, "--set", "audit.cronJob.schedule=soon")
    assert refused.returncode != 0 and "/audit/cronJob/schedule" in refused.stderr
