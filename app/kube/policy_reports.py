"""Writes `audit`'s PolicyReports into the cluster (what the shipped CronJob runs): server-side
apply under one field manager, each answer read back, so a CronJob run that wrote less than it
audited fails naming what."""

from __future__ import annotations

from urllib.parse import quote

from kubernetes.client.exceptions import ApiException

from app.common import ClusterUnreachable

from .client import api_message, raw_send

GROUP_VERSION = "wgpolicyk8s.io/v1alpha2"
FIELD_MANAGER = "dra-bridge-audit"
CRD_NOTE = ("the PolicyReport CRDs (policyreports and clusterpolicyreports.wgpolicyk8s.io, v1alpha2) are not "
            "installed: Kyverno installs them, or apply config/crds/policyreport/ of the kyverno repository")


def report_path(report: dict) -> str:
    meta = report["metadata"]
    if report["kind"] == "ClusterPolicyReport":
        return f"/apis/{GROUP_VERSION}/clusterpolicyreports/{quote(meta['name'])}"
    return f"/apis/{GROUP_VERSION}/namespaces/{quote(meta['namespace'])}/policyreports/{quote(meta['name'])}"


def write_reports(api, reports: list[dict], timeout_s: float = 30.0) -> list[str]:
    """Applies each report; returns 'KIND NAMESPACE/NAME: N results' per report written. A report
    the server stored with fewer results than sent is an error (nothing is reported written)."""
    written = []
    for report in reports:
        try:
            stored = raw_send(api, "PATCH", report_path(report), report,
                              query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
                              content_type="application/apply-patch+yaml", timeout=timeout_s)
        except ApiException as exc:
            where = f"{report['kind']} {report['metadata'].get('namespace', '')}/{report['metadata']['name']}"
            body = exc.body or b""
            # A group the server does not serve answers a bare 404 page (1.38: a Status whose message
            # is that page's text); a missing namespace, a Status naming the namespace.
            if exc.status == 404 and (b'"Status"' not in body or b"could not find the requested resource" in body
                                      or b"404 page not found" in body):
                raise ClusterUnreachable(f"writing {where}: {CRD_NOTE}") from exc
            raise ClusterUnreachable(f"writing {where}: {api_message(exc)}") from exc
        sent, kept = len(report.get("results") or []), len(stored.get("results") or [])
        name = f"{report['kind']} {report['metadata'].get('namespace') or '-'}/{report['metadata']['name']}"
        if kept != sent:
            raise ClusterUnreachable(f"{name}: the server kept {kept} of {sent} results (schema drift?)")
        written.append(f"{name}: {sent} results")
    return written
