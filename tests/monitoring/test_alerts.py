"""manifests/monitoring: the alerts fire when they should and stay quiet when they should not
(`promtool test rules`, Prometheus's own rule engine), every expression parses, and every series
they read is one the webhook exports, with the labels it exports."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess

import pytest
import yaml

from app.server import Metrics
from tests.gobuild import GoUnavailable
from tests.monitoring import promtoolbin

pytestmark = pytest.mark.timeout(1800)  # a cold build of promtool takes minutes
MONITORING = pathlib.Path(__file__).resolve().parents[2] / "manifests" / "monitoring"
RULE = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
DASHBOARD = json.loads((MONITORING / "grafana-dashboard.json").read_text())
DAY = 86400
RUNBOOK_URL = "https://github.com/dra-bridge/dra-bridge/blob/main/docs/operations.md#"
RUNBOOK = (MONITORING.parents[1] / "docs" / "operations.md").read_text()
# The API server's own series an alert reads (kube-apiserver metrics), with their labels.
API_SERVER = {"apiserver_admission_webhook_fail_open_count": {"name", "type"}}
# Labels Prometheus adds to every scraped series (the ServiceMonitor's target labels), and le.
TARGET_LABELS = {"namespace", "pod", "instance", "job", "service", "endpoint", "container", "le"}


@pytest.fixture(scope="module")
def promtool():
    try:
        return promtoolbin.build()
    except GoUnavailable as exc:
        pytest.skip(str(exc))


def rules_file(tmp_path) -> pathlib.Path:
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": RULE["spec"]["groups"]}))
    return path


def rules():
    return [r for g in RULE["spec"]["groups"] for r in g["rules"]]


def description(alert: str, severity: str) -> str:
    [rule] = [r for r in rules() if r["alert"] == alert and r["labels"]["severity"] == severity]
    return rule["annotations"]["description"]


def fired(alert, severity, summary, **labels):
    return {"exp_labels": {"severity": severity, **labels},
            "exp_annotations": {"summary": summary, "description": description(alert, severity),
                                "runbook_url": RUNBOOK_URL + alert.lower()}}


POD = {"namespace": "dra-bridge", "pod": "dra-bridge-1"}
# (name, input series, [(eval time, alert, expected firing alerts)]); series as promtool writes them.
SCENARIOS = [
    ("webhook down", [("up{job='dra-bridge', instance='a'}", "1 1 0x10")], [
        ("1m", "DraBridgeDown", []),
        ("6m", "DraBridgeDown", []),  # down 4 minutes: not yet
        ("9m", "DraBridgeDown", [fired("DraBridgeDown", "critical", "No dra-bridge replica answers scrapes.")])]),
    ("webhook up", [("up{job='dra-bridge', instance='a'}", "1x10"), ("up{job='dra-bridge', instance='b'}", "0x10")],
     [("9m", "DraBridgeDown", [])]),
    ("unfinished reviews", [("dra_bridge_unfinished_reviews_total{%s, endpoint='mutate', reason='deadline'}",
                             "0 0 0 2 2")], [
        ("2m", "DraBridgeUnfinishedReviews", []),
        ("4m", "DraBridgeUnfinishedReviews", [fired(
            "DraBridgeUnfinishedReviews", "warning",
            "dra-bridge /mutate left 2 reviews unfinished in 10 minutes (deadline).",
            namespace="dra-bridge", endpoint="mutate", reason="deadline")])]),
    ("slow reviews", [("dra_bridge_admission_duration_seconds_bucket{%s, endpoint='validate', le='2.5'}", "0+0x20"),
                      ("dra_bridge_admission_duration_seconds_bucket{%s, endpoint='validate', le='+Inf'}", "0+10x20")], [
        ("5m", "DraBridgeSlowReviews", []),  # pending for 10m
        ("16m", "DraBridgeSlowReviews", [fired("DraBridgeSlowReviews", "warning",
                                               "dra-bridge /validate answers slowly (p99 2.5s).",
                                               namespace="dra-bridge", endpoint="validate")])]),
    ("fast reviews", [("dra_bridge_admission_duration_seconds_bucket{%s, endpoint='validate', le='0.01'}", "0+10x20"),
                      ("dra_bridge_admission_duration_seconds_bucket{%s, endpoint='validate', le='+Inf'}", "0+10x20")],
     [("16m", "DraBridgeSlowReviews", [])]),
    ("template errors", [("dra_bridge_template_ensure_errors_total{%s}", "0 0 3 3")], [
        ("1m", "DraBridgeTemplateErrors", []),
        ("3m", "DraBridgeTemplateErrors", [fired(
            "DraBridgeTemplateErrors", "warning",
            "dra-bridge could not create ResourceClaimTemplates for 3 pods in 10 minutes.", namespace="dra-bridge")])]),
    ("template conflicts", [("dra_bridge_template_conflicts_total{%s}", "0 1 1")], [
        ("2m", "DraBridgeTemplateConflicts", [fired(
            "DraBridgeTemplateConflicts", "warning",
            "Templates with dra-bridge's generated names hold content it did not generate.",
            namespace="dra-bridge")])]),
    ("fields dropped", [("dra_bridge_dropped_fields_total{%s, kind='ResourceClaimTemplate', gate='DRAPrioritizedList'}",
                         "0 0 1 1")], [
        ("1m", "DraBridgeFieldsDropped", []),
        ("3m", "DraBridgeFieldsDropped", [fired(
            "DraBridgeFieldsDropped", "warning",
            "The API server dropped DRAPrioritizedList fields from a ResourceClaimTemplate dra-bridge wrote.",
            namespace="dra-bridge", kind="ResourceClaimTemplate", gate="DRAPrioritizedList")])]),
    ("the API server failed open on our webhook", [
        ("apiserver_admission_webhook_fail_open_count{job='apiserver', name='mutate.dra-bridge.io', type='admit'}",
         "0 0 2 2"),
        ("apiserver_admission_webhook_fail_open_count{job='apiserver', name='other.example.com', type='admit'}",
         "0 5 9 9")], [
        ("1m", "DraBridgeWebhookFailedOpen", []),  # another webhook's failures are not ours
        ("3m", "DraBridgeWebhookFailedOpen", [fired(
            "DraBridgeWebhookFailedOpen", "warning",
            "The API server failed open on mutate.dra-bridge.io 2 time(s) in 10 minutes.",
            name="mutate.dra-bridge.io", type="admit")])]),
    ("pods a lost review left behind", [
        ("dra_bridge_unmigrated_pods{namespace='dra-bridge', pod='a', pod_namespace='team-a'}", "0 3x20"),
        ("dra_bridge_unmigrated_pods{namespace='dra-bridge', pod='b', pod_namespace='team-a'}", "0 3x20"),
        ("dra_bridge_unmigrated_pods{namespace='dra-bridge', pod='a', pod_namespace='team-b'}", "0x20")], [
        ("5m", "DraBridgeUnmigratedPods", []),  # not yet 10 minutes
        ("12m", "DraBridgeUnmigratedPods", [fired(
            "DraBridgeUnmigratedPods", "warning",
            "3 running pod(s) in team-a hold device-plugin GPUs dra-bridge would rewrite.", pod_namespace="team-a")])]),
    ("a node served twice", [
        ("dra_bridge_nodes{namespace='dra-bridge', pod='a', state='both'}", "0 1x20"),
        ("dra_bridge_nodes{namespace='dra-bridge', pod='b', state='both'}", "0 1x20"),
        ("dra_bridge_nodes{namespace='dra-bridge', pod='a', state='dra'}", "3x20")], [
        ("5m", "DraBridgeNodeServedTwice", []),  # a move flips both sides for a moment
        ("12m", "DraBridgeNodeServedTwice", [fired(
            "DraBridgeNodeServedTwice", "warning", "1 GPU node(s) served by a device plugin and a DRA driver at once.")])]),
    ("no node served twice", [("dra_bridge_nodes{namespace='dra-bridge', pod='a', state='both'}", "0x20"),
                              ("dra_bridge_nodes{namespace='dra-bridge', pod='a', state='plugin'}", "4x20")],
     [("12m", "DraBridgeNodeServedTwice", [])]),
    ("a GPU budget escaped", [
        ("dra_bridge_budget_escaped_devices{namespace='dra-bridge', pod='a', pod_namespace='team-a', quota='gpus'}",
         "0 3x20"),
        ("dra_bridge_budget_escaped_devices{namespace='dra-bridge', pod='a', pod_namespace='team-b', quota='gpus'}",
         "0x20")], [
        ("5m", "DraBridgeBudgetEscaped", []),
        ("12m", "DraBridgeBudgetEscaped", [fired(
            "DraBridgeBudgetEscaped", "warning", "ResourceQuota team-a/gpus does not count 3 GPU(s) claims hold.",
            pod_namespace="team-a", quota="gpus")])]),
    ("a queue budget escaped", [
        ("dra_bridge_queue_budget_escaped_devices{namespace='dra-bridge', pod='a', cluster_queue='research', "
         "resource='nvidia.com/gpu'}", "0 2x20"),
        ("dra_bridge_queue_budget_escaped_devices{namespace='dra-bridge', pod='b', cluster_queue='research', "
         "resource='nvidia.com/gpu'}", "0 2x20"),
        ("dra_bridge_queue_budget_escaped_devices{namespace='dra-bridge', pod='a', cluster_queue='cpu-only', "
         "resource='nvidia.com/gpu'}", "0x20")], [
        ("5m", "DraBridgeQueueBudgetEscaped", []),
        ("12m", "DraBridgeQueueBudgetEscaped", [fired(
            "DraBridgeQueueBudgetEscaped", "warning",
            "ClusterQueue research does not count 2 nvidia.com/gpu device(s) its pods hold.",
            cluster_queue="research", resource="nvidia.com/gpu")])]),
    ("pods left on the device plugin", [("dra_bridge_migrations_total{%s, result='legacy'}", "0 4 4"),
                                        ("dra_bridge_migrations_total{%s, result='migrated'}", "0 9 9")], [
        ("2m", "DraBridgePodsLeftUnmigrated", [fired(
            "DraBridgePodsLeftUnmigrated", "info", "GPU pods were admitted on the device plugin (legacy).",
            namespace="dra-bridge", result="legacy")])]),
    ("every pod migrated", [("dra_bridge_migrations_total{%s, result='migrated'}", "0 9 9"),
                            ("dra_bridge_migrations_total{%s, result='native'}", "0 2 2")],
     [("2m", "DraBridgePodsLeftUnmigrated", [])]),
    ("inventory stale", [("dra_bridge_inventory_watch_failing_seconds{%s, resource='resourceslices'}", "0 60 120 180"),
                         ("dra_bridge_inventory_watch_failing_seconds{%s, resource='nodes'}", "0 0 0 0")], [
        ("2m", "DraBridgeInventoryStale", []),  # 120 s: not past the bound
        ("3m", "DraBridgeInventoryStale", [fired(
            "DraBridgeInventoryStale", "warning", "dra-bridge cannot watch resourceslices (for 3m 0s).",
            namespace="dra-bridge", resource="resourceslices")])]),
    # The reporter publishes every 30 s: 5 minutes without a publish is stale.
    ("a reporter stopped publishing", [
        ("dra_bridge_reporter_last_publish_timestamp_seconds{namespace='dra-bridge', pod='reporter-a'}", "60x20"),
        ("dra_bridge_reporter_last_publish_timestamp_seconds{namespace='dra-bridge', pod='reporter-b'}", "60+60x20")], [
        ("5m", "DraBridgeReporterStale", []),  # 240 s: within the bound
        ("7m", "DraBridgeReporterStale", [fired(
            "DraBridgeReporterStale", "warning", "dra-bridge reporter reporter-a has not published for 6m 0s.",
            namespace="dra-bridge", pod="reporter-a")])]),
    ("a reporter down", [("up{job='dra-bridge/dra-bridge-reporter', namespace='dra-bridge', pod='reporter-a'}", "1 0x15"),
                         ("up{job='dra-bridge/dra-bridge-reporter', namespace='dra-bridge', pod='reporter-b'}", "1x15"),
                         ("up{job='dra-bridge', namespace='dra-bridge', pod='dra-bridge-1'}", "0x15")], [
        ("5m", "DraBridgeReporterDown", []),
        ("12m", "DraBridgeReporterDown", [fired(
            "DraBridgeReporterDown", "warning", "dra-bridge reporter reporter-a does not answer scrapes.",
            namespace="dra-bridge", pod="reporter-a")])]),
    ("policy refused at reload", [("dra_bridge_policy_rejected{namespace='dra-bridge', pod='dra-bridge-a'}", "0 1 1"),
                                  ("dra_bridge_policy_rejected{namespace='dra-bridge', pod='dra-bridge-b'}", "0 0 0")], [
        ("1m", "DraBridgePolicyRejected", [fired(
            "DraBridgePolicyRejected", "warning", "dra-bridge replica dra-bridge-a refuses the policy file it was given.",
            namespace="dra-bridge", pod="dra-bridge-a")])]),
    ("compiled admission policies not written", [
        ("dra_bridge_admission_policies_failing{namespace='dra-bridge', pod='dra-bridge-a'}", "0 1x15"),
        ("dra_bridge_admission_policies_failing{namespace='dra-bridge', pod='dra-bridge-b'}", "0x15")], [
        ("5m", "DraBridgeAdmissionPoliciesNotWritten", []),
        ("12m", "DraBridgeAdmissionPoliciesNotWritten", [fired(
            "DraBridgeAdmissionPoliciesNotWritten", "warning",
            "dra-bridge replica dra-bridge-a cannot write the policy's compiled admission policies.",
            namespace="dra-bridge", pod="dra-bridge-a")])]),
    ("replicas enforce different policies", [("dra_bridge_policy_info{namespace='dra-bridge', pod='a', digest='1111'}", "1x15"),
                                             ("dra_bridge_policy_info{namespace='dra-bridge', pod='b', digest='2222'}", "1x15")], [
        ("5m", "DraBridgePoliciesDiffer", []),
        ("12m", "DraBridgePoliciesDiffer", [fired(
            "DraBridgePoliciesDiffer", "warning", "dra-bridge replicas enforce 2 different policies.",
            namespace="dra-bridge")])]),
    ("not ready", [("dra_bridge_readiness_check{%s, check='inventory'}", "1 0x15"),
                   ("dra_bridge_readiness_check{%s, check='certificates'}", "1x15")], [
        ("5m", "DraBridgeNotReady", []),
        ("12m", "DraBridgeNotReady", [fired("DraBridgeNotReady", "warning",
                                            "dra-bridge pod dra-bridge-1 is not ready: inventory.",
                                            namespace="dra-bridge", pod="dra-bridge-1", check="inventory")])]),
    # promtool's clock starts at the Unix epoch: an expiry of 20 days is 20 days after it.
    ("certificate within 30 days", [("dra_bridge_serving_certificate_expiry_timestamp_seconds{%s}", f"{20 * DAY}x5")], [
        ("0m", "DraBridgeCertificateExpiring", [fired(
            "DraBridgeCertificateExpiring", "warning", "dra-bridge's serving certificate expires in 20d 0h 0m 0s.",
            namespace="dra-bridge")])]),
    ("certificate within 7 days", [("dra_bridge_serving_certificate_expiry_timestamp_seconds{%s}", f"{5 * DAY}x5")], [
        ("0m", "DraBridgeCertificateExpiring", [
            fired("DraBridgeCertificateExpiring", "warning", "dra-bridge's serving certificate expires in 5d 0h 0m 0s.",
                  namespace="dra-bridge"),
            fired("DraBridgeCertificateExpiring", "critical", "dra-bridge's serving certificate expires in 5d 0h 0m 0s.",
                  namespace="dra-bridge")])]),
    ("certificate fresh", [("dra_bridge_serving_certificate_expiry_timestamp_seconds{%s}", f"{365 * DAY}x5")],
     [("0m", "DraBridgeCertificateExpiring", [])]),
]


def promtool_tests() -> dict:
    pod = ", ".join(f"{k}='{v}'" for k, v in POD.items())
    return {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [
        {"name": name, "interval": "1m",
         "input_series": [{"series": (series % pod if "%s" in series else series).replace("'", '"'),
                           "values": values} for series, values in series_list],
         "alert_rule_test": [{"eval_time": at, "alertname": alert, "exp_alerts": expected}
                             for at, alert, expected in checks]}
        for name, series_list, checks in SCENARIOS]}


def test_alerts_fire_when_they_should_and_only_then(promtool, tmp_path):
    rules_file(tmp_path)
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(promtool_tests(), sort_keys=False))
    result = subprocess.run([str(promtool), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_scenario_that_fires_it():
    fires = {check[1] for _n, _s, checks in SCENARIOS for check in checks if check[2]}
    assert fires == {r["alert"] for r in rules()}


def test_a_broken_rule_fails_the_check(promtool, tmp_path):
    """The test above can fail: promtool refuses what Prometheus would refuse."""
    broken = json.loads(json.dumps(RULE["spec"]["groups"]))
    broken[0]["rules"][0]["expr"] = "sum by (endpoint (dra_bridge_ready)"
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": broken}))
    result = subprocess.run([str(promtool), "check", "rules", "rules.yaml"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode != 0 and "parse error" in result.stdout + result.stderr


def dashboard_exprs() -> list[str]:
    return [t["expr"] for p in DASHBOARD["panels"] for t in p.get("targets", [])]


def test_rules_and_dashboard_expressions_parse(promtool, tmp_path):
    rules_file(tmp_path)
    # Grafana's $__rate_interval is a duration when Grafana sends the query.
    recorded = [{"record": f"dashboard:panel_{i}", "expr": e.replace("$__rate_interval", "5m")}
                for i, e in enumerate(dashboard_exprs())]
    (tmp_path / "dashboard.yaml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recorded}]}))
    result = subprocess.run([str(promtool), "check", "rules", "rules.yaml", "dashboard.yaml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(recorded)} rules found" in result.stdout


def exported() -> dict[str, set[str]]:
    """Series name -> label names, as the webhook's and the reporter's /metrics export them."""
    from app.reporter.daemon import ReporterMetrics

    out = {}
    for registry in (Metrics().registry, ReporterMetrics().registry):
        families = {}
        for metric in registry.collect():
            for sample in metric.samples:
                families.setdefault(sample.name, set()).update(sample.labels)
        names = {}
        for collector in registry._names_to_collectors.values():  # series of labelled metrics not yet set
            for suffix in ("", "_total", "_bucket", "_count", "_sum"):
                name = collector._name + suffix
                if name in registry._names_to_collectors or suffix == "":
                    names[name] = set(collector._labelnames) | ({"le"} if suffix == "_bucket" else set())
        out.update({**names, **families})
    return out


@pytest.mark.parametrize("source", ["rules", "dashboard"])
def test_every_series_read_is_exported_with_the_labels_grouped_by(source):
    exprs = [r["expr"] for r in rules()] if source == "rules" else dashboard_exprs()
    known = exported()
    for expr in exprs:
        for name in set(re.findall(r"\bdra_bridge_[a-z_]+", expr)):
            assert name in known, (name, expr)
        series_labels = set().union(*(known[n] for n in re.findall(r"\bdra_bridge_[a-z_]+", expr))) | TARGET_LABELS
        series_labels |= set().union(*(labels for name, labels in API_SERVER.items() if name in expr))
        for group in re.findall(r"\bby \(([^)]*)\)", expr):
            for label in (g.strip() for g in group.split(",")):
                assert label in series_labels, (label, expr)
        for label in re.findall(r"(\w+)=~?\"", expr):
            assert label in series_labels, (label, expr)


def test_descriptions_are_plain_text_and_summaries_carry_the_values():
    """promtool compares annotations whole: descriptions stay static, summaries are tested above."""
    for rule in rules():
        assert "{{" not in rule["annotations"]["description"], rule["alert"]
        assert rule["labels"]["severity"] in ("info", "warning", "critical")


def test_every_alert_points_at_its_own_runbook_section():
    """Each alert's runbook_url is its section of docs/operations.md, and that section exists."""
    headings = set(re.findall(r"^### (\w+)$", RUNBOOK[RUNBOOK.index("\n## Alerts"):], re.M))
    alerts = {r["alert"] for r in rules()}
    assert alerts <= headings, alerts - headings
    for rule in rules():
        assert rule["annotations"]["runbook_url"] == RUNBOOK_URL + rule["alert"].lower(), rule["alert"]
