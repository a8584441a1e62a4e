"""ResourceQuotas on legacy GPU resources, and the DeviceClass quota that counts migrated pods. Pure.

A quota on `requests.nvidia.com/gpu` counts pods' extended resources; a rewritten pod asks for
a ResourceClaim instead, which the quota system counts as
`<deviceclass>.deviceclass.resource.k8s.io/devices` (Kubernetes 1.34+). Without that key the
namespace's GPU budget silently stops applying to migrated pods.
"""

from __future__ import annotations

from app.policy import MigrationRules

DRA_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"


def _resource(key: str) -> str:
    return key[len("requests."):] if key.startswith("requests.") else key


def quota_additions(quota: dict, rules: MigrationRules) -> tuple[dict[str, str], list[str]]:
    """Hard limits to add (DeviceClass quota key -> value) and what each replaces."""
    hard = ((quota.get("spec") or {}).get("hard") or {}) if isinstance(quota, dict) else {}
    if not isinstance(hard, dict):
        return {}, []
    additions: dict[str, str] = {}
    notes: list[str] = []
    for key, value in hard.items():
        if not isinstance(key, str) or key.startswith("limits."):
            continue
        found = rules.rule_for(_resource(key))
        if found is None or found[0].role not in ("count", "countPercent") or not found[0].deviceClass:
            continue
        rule = found[0]
        target = f"{rule.deviceClass}{DRA_QUOTA_SUFFIX}"
        if target in hard:
            continue
        if target in additions:
            notes.append(f"{key}: shares {target} with another GPU quota; the first value is kept")
            continue
        additions[target] = str(value)
        scope = " (all MIG profiles together)" if rule.deviceType == "mig" else ""
        notes.append(f"{key}: migrated pods are counted by {target}{scope}; add it with the same value "
                     f"{value} (keep {key} for pods left on the native or legacy path)")
    return additions, notes
