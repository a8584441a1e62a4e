"""Which of the three migration paths a pod takes (ARCHITECTURE "Three migration paths"). Pure.

- native: the cluster serves the pod's extended resources through DRA (a DeviceClass with that
  `extendedResourceName`, KEP-5004) and the pod asks for nothing more than a count of them: left
  as it is, so quotas and the controllers that read GPU counts keep working.
- rewrite: the planner's ResourceClaimTemplate, for what native cannot express.
- legacy: left on the device plugin, with the reason, where DRA cannot serve the pod here.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from app.common import tolerates, vocabulary, view_of
from app.common.release import CONSUMABLE_CAPACITY, EXTENDED_RESOURCE, WHAT_IT_DOES, Release, why_off
from app.policy import MigrationRules

from .kueue import KueueView, kueue_uncounted
from .legacy import legacy_resources
from .planner import Plan, PlanStatus
from .podshape import pod_errors
from .preemption import Preemption
from .quota import kueue_per_pod, quota_escapes
from .sharing import ClusterSharing


@dataclass(frozen=True)
class Facts:
    """What the cluster offers, as far as it is known (None: not known).

    served: extended resource -> the DeviceClass serving it natively (KEP-5004).
    dra(template, tolerates_cordon) -> (state, why): can DRA serve the template's claim with
      devices the scheduler can allocate? serves | busy (all such devices in use now) | shadow
      (only nodes our reporter shadows have them) | cordoned (only cordoned nodes have them, and
      the pod does not tolerate that) | never.
    plugin_nodes: extended resource -> nodes whose device plugin advertises it (allocatable).
    quotas: namespace -> [(ResourceQuota name, spec.hard)].
    extended: DeviceClass -> the extended resource it declares (extendedResourceName): a claim of
      that class is counted by quota under requests.<resource> too (KEP-5004, 1.37).
    kueue: Kueue's configuration as read (its deviceClassMappings and DRA gate).
    preemption: the priorities pods preempt by (app.migration.preemption).
    """

    served: dict[str, str] | None = None
    dra: Callable[..., tuple[str, str]] | None = None
    sharing: ClusterSharing | None = None  # shareable devices, time-sliced nodes
    plugin_nodes: Mapping[str, tuple[str, ...]] | None = None
    quotas: Mapping[str, list[tuple[str, dict]]] | None = None
    extended: Mapping[str, str] | None = None
    kueue: KueueView | None = None
    preemption: Preemption | None = None  # PriorityClasses and GPU pods' priorities (None: not known)
    release: Release | None = None  # the Kubernetes release judged for (None: not known, the default's rules)


class Path(enum.StrEnum):
    NATIVE = "native"
    REWRITE = "rewrite"
    LEGACY = "legacy"


@dataclass(frozen=True)
class Choice:
    path: Path
    reason: str
    code: str = ""  # why, from a closed set (the metric's label)


def extended_resources(classes: dict[str, dict]) -> dict[str, str]:
    """DeviceClass -> the extended resource it declares (extendedResourceName), for each that does."""
    out = {}
    for name, cls in classes.items():
        spec = (cls or {}).get("spec")
        resource = spec.get("extendedResourceName") if isinstance(spec, dict) else None
        if isinstance(resource, str) and resource:
            out[name] = resource
    return out


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


def _lacking(release: Release | None, gate: str) -> str:
    """": Kubernetes 1.34 keeps no ... (DRAExtendedResource is off; on by default from 1.36)", or ""."""
    if release is None or release.has(gate):
        return ""
    return f": Kubernetes {release.version} has no {WHAT_IT_DOES[gate]} ({why_off(release, gate)})"


def _native_gap(pod: dict, plan: Plan, rules: MigrationRules, served: dict[str, str],
                release: Release | None = None) -> str | None:
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
            return f"no DeviceClass serves {resource} (extendedResourceName){_lacking(release, EXTENDED_RESOURCE)}"
        expected.add(rule.deviceClass)
    other = sorted(_classes(plan) - expected)
    if other:  # e.g. nvidia.com/gpu on a MIG single-strategy node: its labels make it a MIG device
        return f"its node labels ask for {other[0]} devices, not what {resource} names"
    if plan.shares:
        return f"container {plan.shares[0]} is a share of a GPU"
    annotations = view_of(pod).annotations
    used = [r.key for r in rules.annotations if isinstance(annotations, dict) and r.key in annotations]
    if used:
        return f"annotation {used[0]} narrows the devices"
    return None


def choose(pod: dict, plan: Plan, rules: MigrationRules, path: str, facts: Facts) -> Choice:
    """The path for a pod the planner migrated or found unmigratable."""
    if path == "legacy":
        return Choice(Path.LEGACY, "policy path: legacy", "policy")
    if pod_errors(pod):
        return Choice(Path.REWRITE, "the pod's shape is not one a path can be chosen for", "shape")  # the plan says why
    spec = pod["spec"]
    if path == "auto":
        if spec.get("nodeName"):
            return Choice(Path.LEGACY, f"bound to node {spec['nodeName']} (spec.nodeName): no scheduler would "
                                    "allocate its claim", "bound")
        scheduler = spec.get("schedulerName") or "default-scheduler"
        if scheduler not in rules.draSchedulers:
            return Choice(Path.LEGACY, f"scheduler {scheduler!r} is not one the policy lists as allocating "
                                    "ResourceClaims (migration.draSchedulers)", "scheduler")
    gap: str | None
    served = facts.served
    if path == "rewrite":
        gap = "policy path: rewrite"
    elif served is None:
        gap = "no inventory"
    else:
        gap = _native_gap(pod, plan, rules, served, facts.release)
    if gap is None and served is not None:
        resources = sorted({r for _c, r in legacy_resources(spec, rules)})
        return Choice(Path.NATIVE, "served by DRA as extended resources: " +
                      ", ".join(f"{r} by DeviceClass {served[r]}" for r in resources), "native")
    gap = gap or "no inventory"  # None only beside an inventory (returned above)
    if path == "native":
        return Choice(Path.LEGACY, f"policy path native, but {gap}: left to the device plugin", "policy")
    if plan.status is not PlanStatus.MIGRATED:
        return Choice(Path.REWRITE, gap, "policy" if path == "rewrite" else "shape")
    kept = kept_on_plugin(pod, plan, rules, facts, check_dra=path == "auto")
    return kept or Choice(Path.REWRITE, gap, "policy" if path == "rewrite" else "rewrite")


def kept_on_plugin(pod: dict, plan: Plan, rules: MigrationRules, facts: Facts, check_dra: bool) -> Choice | None:
    """Why a pod the planner could rewrite must stay on the device plugin in this cluster (its
    cost, its quota, or DRA not serving it now); None when the rewrite is right."""
    resources = sorted({r for _c, r in legacy_resources(pod["spec"], rules)})
    plugin = _plugin_text(resources, facts.plugin_nodes)
    if plan.costly and rules.fractional == "legacy":
        return Choice(Path.LEGACY, f"{plan.costly[0]} on DRA (no device here allows multiple allocations"
                                f"{_lacking(facts.release, CONSUMABLE_CAPACITY)}){plugin}; "
                                "policy fractional: wholeDevice would rewrite it at that cost", "share")
    classes = sorted(_classes(plan))
    queue = kueue_per_pod(pod)
    uncounted = kueue_uncounted(plan.templates, resources, rules.kueueDeviceClasses, facts.kueue) if queue else None
    if uncounted:
        return Choice(Path.LEGACY, f"Kueue admits this pod by itself (queue {queue}) and counts its "
                                f"{', '.join(resources)}; rewritten, its claim would not be in that quota: {uncounted}"
                                f"{plugin}", "kueue")
    namespace = view_of(pod).namespace or (plan.templates[0]["metadata"].get("namespace")
                                                                 if plan.templates else None)
    escaped = quota_escapes(facts.quotas.get(namespace or "", []) if facts.quotas else [], resources, classes,
                            facts.extended)
    if escaped:
        return Choice(Path.LEGACY, f"{escaped}{plugin}", "quota")
    if not check_dra or facts.dra is None:
        return None
    cordon_ok = tolerates_cordon(pod["spec"])
    for template in plan.templates:
        state, why = facts.dra(template, cordon_ok)
        if state == "serves" or (state == "busy" and not _plugin_serves(resources, facts.plugin_nodes)):
            continue
        if state == "busy":
            return Choice(Path.LEGACY, f"DRA cannot serve it now ({why}){plugin}", "dra-busy")
        if state == "shadow":
            return Choice(Path.LEGACY, f"{why}{plugin}", "dra-shadow")
        if state == "cordoned":
            return Choice(Path.LEGACY, f"{why}{plugin}", "dra-cordoned")
        if state == "twice":
            return Choice(Path.LEGACY, f"{why}{plugin}", "dra-twice")
        return Choice(Path.LEGACY, f"the planned claim could never be satisfied here ({why}){plugin}", "dra-never")
    return None


UNSCHEDULABLE_TAINT = vocabulary.UNSCHEDULABLE_TAINT


def tolerates_cordon(spec: dict) -> bool:
    """Whether the scheduler places this pod on a cordoned node (its NodeUnschedulable filter):
    a toleration of node.kubernetes.io/unschedulable:NoSchedule, as DaemonSet pods carry."""
    cordon = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
    return any(tolerates(t, cordon) for t in spec.get("tolerations") or [] if isinstance(t, dict))


def _classes(plan: Plan) -> set[str]:
    """The DeviceClasses the plan's claims ask for, in any alternative."""
    out = set()
    for template in plan.templates:
        for request in ((template.get("spec") or {}).get("spec") or {}).get("devices", {}).get("requests", []):
            for alternative in [request.get("exactly")] + list(request.get("firstAvailable") or []):
                if isinstance(alternative, dict) and alternative.get("deviceClassName"):
                    out.add(alternative["deviceClassName"])
    return out


def _plugin_serves(resources: list[str], plugin_nodes) -> bool:
    """Unknown (no Node objects read) counts as served: our users run the device plugin today."""
    return plugin_nodes is None or all(plugin_nodes.get(r) for r in resources)


def _plugin_text(resources: list[str], plugin_nodes) -> str:
    if plugin_nodes is None:
        return ": left on the device plugin"
    missing = [r for r in resources if not plugin_nodes.get(r)]
    if missing:
        return (f": left on the device plugin, but no node's device plugin advertises {', '.join(missing)} "
                "either (it waits for one)")
    nodes = plugin_nodes[resources[0]]
    return (f": left on the device plugin ({len(nodes)} node(s) advertise {', '.join(resources)}, "
            f"e.g. {nodes[0]})")


def plugin_nodes(node_resources: Mapping[str, Mapping[str, int]] | None) -> dict[str, tuple[str, ...]] | None:
    """extended resource -> the nodes advertising it, sorted (None: Nodes not read)."""
    if node_resources is None:
        return None
    out: dict[str, list[str]] = {}
    for node in sorted(node_resources):
        for resource in node_resources[node]:
            out.setdefault(resource, []).append(node)
    return {r: tuple(n) for r, n in out.items()}
