"""Violations as wgpolicyk8s.io PolicyReports (what Kyverno and policy-reporter read): a result
per violation, and one report per namespace (cluster-scoped objects: a ClusterPolicyReport). Pure."""

from __future__ import annotations

from app.common import vocabulary


def results(found: list, now: dict) -> dict[str, list[dict]]:
    """namespace -> wgpolicyk8s.io results, one per violation (each with .kind, .namespace, .name,
    .violation: the scan's findings)."""
    out: dict[str, list[dict]] = {}
    for f in found:
        actions = f.violation.actions
        result = "warn" if "Warn" in actions and "Deny" not in actions else "fail"
        severity = "high" if "Deny" in actions else "medium" if "Warn" in actions else "low"
        out.setdefault(f.namespace, []).append({
            "policy": "dra-bridge-policy", "rule": f.violation.rule, "result": result, "severity": severity,
            "source": "dra-bridge", "timestamp": now, "category": "GPU admin rules",
            "message": f.violation.message[:1000],
            "resources": [{"kind": f.kind, "name": f.name, "namespace": f.namespace}],
            "properties": {"validationActions": ",".join(actions)}})
    return out


def reports(by_namespace: dict[str, list[dict]]) -> list[dict]:
    """One PolicyReport per namespace of results ("": a ClusterPolicyReport), with its summary."""
    out = []
    for namespace, found in sorted(by_namespace.items()):
        summary = {k: sum(r["result"] == k for r in found) for k in ("pass", "fail", "warn", "error", "skip")}
        kind = "PolicyReport" if namespace else "ClusterPolicyReport"
        metadata = {"name": "dra-bridge-legacy-gpu", "labels": dict(vocabulary.MANAGED_BY)}
        if namespace:
            metadata["namespace"] = namespace
        out.append({"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": kind, "metadata": metadata,
                    "results": found, "summary": summary})
    return out
