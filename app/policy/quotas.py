"""The ResourceQuotas that make a rule's maxDevicesPerNamespace exact: the webhook's count is
best-effort (claims admitted at the same moment do not count each other), the quota
controller's is not. One quota per namespace the rule names, a limit per DeviceClass. Pure."""

from __future__ import annotations

from app.common import vocabulary

QUOTA_KEY = "{}.deviceclass.resource.k8s.io/devices"


def namespace_quotas(policy) -> tuple[list[dict], list[str]]:
    """(the quotas, what each rule's quota does and does not cover, said)."""
    quotas, said = [], []
    counted = sorted({r.deviceClass for r in policy.migration.resources if r.deviceClass})
    for rule in policy.rules:
        limit = rule.maxDevicesPerNamespace
        if not limit:
            continue
        classes = sorted(rule.allowedDeviceClasses) if rule.allowedDeviceClasses is not None else counted
        excluded = set(rule.exclude.namespaces) if rule.exclude is not None else set()
        namespaces = [n for n in rule.match.namespaces or () if n not in excluded]
        if not namespaces or not classes:
            why = "it names no namespaces (write one per namespace its selector picks)" if not namespaces else \
                "no DeviceClass to count (set allowedDeviceClasses)"
            said.append(f"rule {rule.name}: no quota written: {why}")
            continue
        for namespace in namespaces:
            quotas.append({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {
                "name": f"dra-bridge-{rule.name}", "namespace": namespace, "labels": dict(vocabulary.MANAGED_BY),
                "annotations": {vocabulary.POLICY_RULE_ANNOTATION: rule.name}},
                "spec": {"hard": {QUOTA_KEY.format(c): str(limit) for c in classes}}})
        scope = (f"exact: {limit} devices of {classes[0]}" if len(classes) == 1 else
                 f"at most {limit} devices of each of {', '.join(classes)} (up to {limit * len(classes)} in all; "
                 "exact with one class in allowedDeviceClasses)")
        limits = []
        if rule.exclude is not None and (rule.exclude.users or rule.exclude.groups or rule.exclude.serviceAccounts):
            limits.append("a quota exempts no user, group or service account")
        if rule.match.namespaceSelector is not None or rule.match.objectSelector is not None:
            limits.append("a quota holds in the whole namespace, whatever the rule's selectors")
        said.append(f"rule {rule.name}: quota in {', '.join(namespaces)}: {scope}"
                    + (f"; {'; '.join(limits)}" if limits else ""))
    return quotas, said
