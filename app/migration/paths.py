"""Which of the three migration paths a pod takes (ARCHITECTURE "Three migration paths"). Pure.

- native: the cluster serves the pod's extended resources through DRA (a DeviceClass with that
  `extendedResourceName`, KEP-5004) and the pod asks for nothing more than a count of them: left
  as it is, so quotas and the controllers that read GPU counts keep working.
- rewrite: the planner's ResourceClaimTemplate, for what native cannot express.
- legacy: left on the device plugin, with the reason, where DRA cannot serve the pod here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.policy import MigrationRules

from .planner import Plan, legacy_resources
from .podshape import pod_errors
from .sharing import ClusterSharing


@dataclass(frozen=True)
class Facts:
    """What the cluster offers, as far as it is known. served: extended resource -> DeviceClass
    (None: no inventory); never(template) -> why its claim could never be satisfied, or None."""

    served: dict[str, str] | None = None
    never: Callable[[dict], str | None] | None = None
    sharing: ClusterSharing | None = None  # shareable devices, time-sliced nodes


@dataclass(frozen=True)
class Choice:
    path: str  # native | rewrite | legacy
    reason: str


def served_resources(classes: dict[str, dict]) -> dict[str, str]:
    """extendedResourceName -> DeviceClass. Two classes claiming one name: the first by name
    (`dra-bridge classes` refuses to generate such a pair)."""
    out: dict[str, str] = {}
    for name in sorted(classes):
        spec = (classes[name] or {}).get("spec")
        resource = spec.get("extendedResourceName") if isinstance(spec, dict) else None
        if isinstance(resource, str) and resource and resource not in out:
            out[resource] = name
    return out


def _native_gap(pod: dict, plan: Plan, rules: MigrationRules, served: dict[str, str]) -> str | None:
    """Why native cannot give this pod what it asks for; None when it can."""
    spec = pod["spec"]
    expected = set()
    for container, resource in legacy_resources(spec, rules):
        found = rules.rule_for(resource)
        if found is None:
            return f"{resource} has no migration rule"
        rule, _groups = found
        # The serving class already selects the devices (a MIG profile, a model): only sharing
        # and fractions are more than native can give.
        if rule.role != "count" or rule.countAs != "devices":
            return f"container {container}: {resource} asks for a share of a device, not whole devices"
        if resource not in served:
            return f"no DeviceClass serves {resource} (extendedResourceName)"
        expected.add(rule.deviceClass)
    for template in plan.templates:
        for request in ((template.get("spec") or {}).get("spec") or {}).get("devices", {}).get("requests", []):
            device_class = (request.get("exactly") or (request.get("firstAvailable") or [{}])[0]).get("deviceClassName")
            if device_class and device_class not in expected:
                # e.g. nvidia.com/gpu on a MIG single-strategy node: its labels make it a MIG device
                return f"its node labels ask for {device_class} devices, not what {resource} names"
    if plan.shares:
        return f"container {plan.shares[0]} is a share of a GPU"
    annotations = ((pod.get("metadata") or {}).get("annotations") or {})
    used = [r.key for r in rules.annotations if isinstance(annotations, dict) and r.key in annotations]
    if used:
        return f"annotation {used[0]} narrows the devices"
    return None


def choose(pod: dict, plan: Plan, rules: MigrationRules, path: str, facts: Facts) -> Choice:
    """The path for a pod the planner migrated or found unmigratable."""
    if path == "rewrite":
        return Choice("rewrite", "policy path: rewrite")
    if path == "legacy":
        return Choice("legacy", "policy path: legacy")
    if pod_errors(pod):
        return Choice("rewrite", "the pod's shape is not one a path can be chosen for")  # the plan says why
    spec = pod["spec"]
    if path == "auto":
        if spec.get("nodeName"):
            return Choice("legacy", f"bound to node {spec['nodeName']} (spec.nodeName): no scheduler would "
                                    "allocate its claim")
        scheduler = spec.get("schedulerName") or "default-scheduler"
        if scheduler not in rules.draSchedulers:
            return Choice("legacy", f"scheduler {scheduler!r} is not one the policy lists as allocating "
                                    "ResourceClaims (migration.draSchedulers)")
    gap = _native_gap(pod, plan, rules, facts.served) if facts.served is not None else "no inventory"
    if gap is None:
        resources = sorted({r for _c, r in legacy_resources(spec, rules)})
        return Choice("native", "served by DRA as extended resources: " +
                      ", ".join(f"{r} by DeviceClass {facts.served[r]}" for r in resources))
    if path == "native":
        return Choice("legacy", f"policy path native, but {gap}: left to the device plugin")
    if plan.status == "migrated" and facts.never is not None:
        for template in plan.templates:
            why = facts.never(template)
            if why:
                return Choice("legacy", f"the planned claim could never be satisfied here ({why})")
    return Choice("rewrite", gap)
