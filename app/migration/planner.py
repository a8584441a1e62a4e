"""The migration planner: a Pod with legacy GPU requests -> planned Pod + ResourceClaimTemplate.

Pure: plain dicts in, plain dicts out, no IO. The webhook, the CLI and the tests share it.
"""

from __future__ import annotations

import copy
import enum
from dataclasses import dataclass, field

import orjson

from app.common import view_of, vocabulary
from app.policy import MigrationRules

from .claim_requests import MAX_REQUESTS, assign_requests, render_template, strip_legacy
from .family_asks import Unmigratable, collect_asks, cost, resolve_device, resolve_share
from .legacy import legacy_resources, uses_dra
from .nodelabels import translate
from .podgroups import own_entry_name, pod_group_of, unread_group_note
from .podshape import pod_errors
from .quota import kueue_per_pod
from .sharing import ClusterSharing

MIGRATION_ANNOTATION = vocabulary.MIGRATION_ANNOTATION
# DRA validation limits (k8s.io/api/resource/v1 constants).
MAX_DEVICES_PER_CLAIM = vocabulary.DRA_MAX_DEVICES_PER_CLAIM


class PlanStatus(enum.StrEnum):
    """What the planner did with one pod (the decision's Outcome is read from it and the path)."""

    MIGRATED = "migrated"  # rewritten onto the templates it wrote
    UNCHANGED = "unchanged"  # nothing to migrate (or left as written by the path choice)
    UNMIGRATABLE = "unmigratable"  # asks for GPUs no claim can say


@dataclass
class Plan:
    """The planner's result for one pod."""

    status: PlanStatus
    pod: dict | None = None
    templates: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reason: str = ""
    rewritten: dict = field(default_factory=dict)
    other_system: str = ""  # GPUs shared by another scheduler (KAI): left there, counted by audit
    shares: list[str] = field(default_factory=list)  # "container: what it asked" for each GPU share
    # Shares (and fractions above one GPU) that became whole devices: what each now costs
    costly: list[str] = field(default_factory=list)


def deep_copy(obj: dict) -> dict:
    """JSON-shaped copy; several times faster than copy.deepcopy on admission objects."""
    try:
        return orjson.loads(orjson.dumps(obj))
    except TypeError:  # YAML input may hold values JSON cannot (huge ints)
        return copy.deepcopy(obj)


def plan_pod(pod: dict, rules: MigrationRules, namespace: str | None = None,
             sharing: ClusterSharing | None = None, group_claims: frozenset[str] | None = None) -> Plan:
    """Plan the migration of one Pod (or pod template shaped like one). sharing: what the
    inventory says about shareable devices (None: nothing known, shares cost whole devices);
    group_claims: the claim names its PodGroup shares (None: not read)."""
    errors = pod_errors(pod)
    if errors:
        return Plan(PlanStatus.UNMIGRATABLE, reason=errors[0], warnings=[f"pod left unchanged: {errors[0]}"])
    spec = pod["spec"]
    legacy = legacy_resources(spec, rules)
    if uses_dra(spec):
        if legacy:
            return Plan(PlanStatus.UNCHANGED, reason="pod already uses DRA claims",
                        warnings=["pod already uses DRA resource claims; its legacy GPU requests "
                                  "are left for the device plugin"])
        return Plan(PlanStatus.UNCHANGED, reason="pod already uses DRA claims")
    if not legacy:
        kai = _kai_annotations(pod)
        if kai:
            why = (f"KAI scheduler GPU sharing ({', '.join(kai)} annotation): the KAI scheduler allocates it, "
                   "not DRA; left as it is")
            return Plan(PlanStatus.UNCHANGED, reason=why, warnings=[why], other_system="kai")
        return Plan(PlanStatus.UNCHANGED, reason="no legacy GPU requests")
    try:
        return _plan(pod, spec, rules, namespace, sharing, group_claims)
    except Unmigratable as why:
        return Plan(PlanStatus.UNMIGRATABLE, reason=str(why),
                    warnings=[f"pod left unchanged, not migrated to DRA: {why}"])


def _keep_extended_resource_tolerations(spec: dict, removed: list[str]) -> None:
    """GPU nodes are often tainted with the resource's name (nvidia.com/gpu:NoSchedule), and the API
    server's ExtendedResourceToleration plugin tolerates that for pods that *request* it. A pod that
    no longer requests it (a plan applied with kubectl, or where the plugin runs after us) carries
    the toleration itself, as the plugin writes it."""
    tolerations = spec.get("tolerations")
    tolerations = list(tolerations) if isinstance(tolerations, list) else []
    added = False
    for resource in dict.fromkeys(r for r in removed if "/" in r and not r.startswith("kubernetes.io/")):
        if any(isinstance(t, dict) and t.get("operator") == "Exists" and t.get("key") in (None, "", resource)
               and t.get("effect") in (None, "", "NoSchedule") for t in tolerations):
            continue
        tolerations.append({"key": resource, "operator": "Exists", "effect": "NoSchedule"})
        added = True
    if added:
        spec["tolerations"] = tolerations


# HAMi's binpack/spread policies for GPUs and nodes: hints to HAMi's scheduler only.
# HAMi's documented pod annotations beside the device filters (use-/nouse-gputype, -gpuuuid, policy
# annotations): placement scoring, and the kind of vGPU. None has a DRA equivalent: each is named.
SCHEDULER_POLICY_ANNOTATIONS = ("hami.io/gpu-scheduler-policy", "hami.io/node-scheduler-policy",
                                "hami.io/device-scoring-weights")
HAMI_MODE = "nvidia.com/vgpu-mode"
# Pins to GPU indexes on the node: NVIDIA's driver publishes no index, so a claim cannot keep them.
HAMI_INDEX_PINS = ("nvidia.com/use-gpuindexes", "nvidia.com/nouse-gpuindexes")
KAI_ANNOTATIONS = ("gpu-fraction", "gpu-memory", "gpu-fraction-num-devices")


NUMA_ATTRIBUTE = vocabulary.NUMA_ATTRIBUTE
# Volcano's NUMA policy for a pod (its numa-aware plugin): best-effort prefers, the others require.
VOLCANO_NUMA = "volcano.sh/numa-topology-policy"
_NUMA_REQUIRE = {"best-effort": False, "restricted": True, "single-numa-node": True}


def _topology(annotations: dict, rules: MigrationRules, notes: list[str]) -> tuple[str, bool] | None:
    """(attribute the devices should share, required?) for multi-device requests, or None."""
    default = (rules.topology.attribute, rules.topology.require) if rules.topology is not None else None
    if not isinstance(annotations, dict):
        return default
    numa = str(annotations.get(VOLCANO_NUMA, "")).strip()
    if numa in _NUMA_REQUIRE:
        notes.append(f"annotation {VOLCANO_NUMA}={numa}: GPUs of one request "
                     f"{'must' if _NUMA_REQUIRE[numa] else 'should'} share {NUMA_ATTRIBUTE}")
        return NUMA_ATTRIBUTE, _NUMA_REQUIRE[numa]
    if numa and numa != "none":
        notes.append(f"annotation {VOLCANO_NUMA}={numa:.40}: not a Volcano NUMA policy; ignored")
    if str(annotations.get("hami.io/gpu-scheduler-policy", "")).strip() == "topology-aware":
        attribute = default[0] if default else vocabulary.PCIE_ROOT
        notes.append(f"annotation hami.io/gpu-scheduler-policy=topology-aware: GPUs of one request prefer "
                     f"sharing {attribute}")
        return attribute, default[1] if default else False
    return default


def _kai_annotations(pod: dict) -> list[str]:
    annotations = view_of(pod).annotations
    return [k for k in KAI_ANNOTATIONS if k in annotations]


def _plan(pod: dict, spec: dict, rules: MigrationRules, namespace: str | None,
          sharing: ClusterSharing | None, group_claims: frozenset[str] | None) -> Plan:
    notes: list[str] = []
    asks = collect_asks(spec, rules, notes)
    # DRA's limits before any per-ask work: each container (or sidecar) asking needs a request.
    running = {(a.list_name, a.index) for a in asks if a.count and (a.list_name == "containers" or a.sidecar)}
    if len(running) > MAX_REQUESTS:
        raise Unmigratable(f"{len(running)} containers ask for devices: more than the DRA limit of "
                            f"{MAX_REQUESTS} requests per claim")
    constraints = translate(spec, rules)
    notes.extend(constraints.notes)
    annotations = view_of(pod).annotations
    pinned = [k for k in HAMI_INDEX_PINS if isinstance(annotations, dict) and k in annotations]
    if pinned:
        raise Unmigratable(f"annotation {pinned[0]}={annotations[pinned[0]]!s:.40} pins the pod to GPU indexes on its "
                            "node: NVIDIA's DRA driver publishes no index, so a claim would lose the pin (left on the "
                            "device plugin)")
    for key in SCHEDULER_POLICY_ANNOTATIONS:
        if isinstance(annotations, dict) and key in annotations and annotations[key] != "topology-aware":
            notes.append(f"annotation {key}={annotations[key]!s:.40}: HAMi's placement policy has no DRA "
                         "equivalent; the scheduler places DRA claims its own way")
    if isinstance(annotations, dict) and HAMI_MODE in annotations:
        notes.append(f"annotation {HAMI_MODE}={annotations[HAMI_MODE]!s:.40}: HAMi's choice of vGPU kind (hami-core, "
                     "mig, mps) is not translated: the claim asks for the devices its resources name (a MIG "
                     "device only through an nvidia.com/mig-* resource)")
    node_share = constraints.shared and f"node label {constraints.shared}" or (
        sharing.time_sliced if sharing is not None else None)
    for ask in asks:
        if ask.count:
            resolve_device(ask, rules, constraints, annotations, notes)
            resolve_share(ask, rules, node_share, sharing, notes)
    requests, refs = assign_requests([a for a in asks if a.count], notes)
    topology = _topology(annotations, rules, notes)
    if topology is not None and not topology[1] and kueue_per_pod(pod) and any(r.count > 1 for r in requests):
        # Kueue charges a firstAvailable only when every alternative is the same count of one
        # logical resource, and not with constraints (0.20, KueueDRAIntegrationPrioritizedList):
        # one alternative, the shape it charges, instead of a preference it would refuse.
        notes.append(f"Kueue admits this pod by itself: one request per ask, without the preference for "
                     f"devices sharing {topology[0]} (a firstAvailable with constraints is not charged by Kueue)")
        topology = None
    if topology is not None:
        for req in requests:
            if req.count > 1 and req.device_class != rules.migDeviceClass and not (req.share and req.share.variants):
                req.aligned, req.require = topology
    if len(requests) > MAX_REQUESTS:
        raise Unmigratable(f"{len(requests)} device requests exceed the DRA limit of {MAX_REQUESTS} per claim")
    total = sum(r.count for r in requests)
    if total > MAX_DEVICES_PER_CLAIM:
        raise Unmigratable(f"{total} devices exceed the DRA limit of {MAX_DEVICES_PER_CLAIM} per claim")

    planned = deep_copy(pod)
    planned_spec = planned["spec"]
    rewritten: dict = {"containers": {}}
    for ask in asks:
        container = planned_spec[ask.list_name][ask.index]
        strip_legacy(container, ask.removed)
        rewritten["containers"].setdefault(ask.container, {}).update(ask.removed)

    templates = []
    if requests:
        # Node constraints only move to the device side when a claim carries them.
        if constraints.translated and constraints.spec_after is not None:
            for key in ("nodeSelector", "affinity"):
                if key in constraints.spec_after:
                    planned_spec[key] = constraints.spec_after[key]
                else:
                    planned_spec.pop(key, None)
            rewritten["nodeLabels"] = constraints.translated
        template = render_template([r.render() for r in requests], namespace,
                                   [c for c in (r.constraint() for r in requests) if c],
                                   [c for c in (r.config(rules.driverDomain) for r in requests) if c])
        templates.append(template)
        name = template["metadata"]["name"]
        entry = own_entry_name(rules.claimName, group_claims or ())
        unread = unread_group_note(pod, rules.claimName) if group_claims is None else None
        shared = (f"claim entry named {entry}: PodGroup {pod_group_of(pod)} shares a claim named {rules.claimName}, "
                  "which would give the whole group this pod's devices") if entry != rules.claimName else None
        notes.extend(note for note in (unread, shared) if note)
        planned_spec["resourceClaims"] = [{"name": entry, "resourceClaimTemplateName": name}]
        for (list_name, index), names in refs.items():
            resources = planned_spec[list_name][index].setdefault("resources", {})
            resources["claims"] = [{"name": entry, "request": n} for n in names]
        rewritten["template"] = name
        _keep_extended_resource_tolerations(planned_spec, [r for a in asks for r in a.removed])
        summary = ", ".join(f"{r.name}: {r.count}x {r.device_class}" for r in requests)
        notes.insert(0, f"migrated legacy GPU requests to DRA ResourceClaimTemplate {name} ({summary})")
    else:
        notes.insert(0, "removed zero-count legacy GPU requests; no devices are needed")
    metadata = planned.setdefault("metadata", {})
    existing = metadata.get("annotations")
    metadata["annotations"] = {**(existing if isinstance(existing, dict) else {}),
                               MIGRATION_ANNOTATION: orjson.dumps(rewritten, option=orjson.OPT_SORT_KEYS).decode()}
    shares = [f"{a.container}: {', '.join(a.share.had)}" for a in asks if a.share_plan is not None]
    return Plan(PlanStatus.MIGRATED, pod=planned, templates=templates, warnings=notes, rewritten=rewritten, shares=shares,
                costly=[c for c in map(cost, asks) if c])


