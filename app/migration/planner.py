"""The migration planner: a Pod with legacy GPU requests -> planned Pod + ResourceClaimTemplate.

Pure: plain dicts in, plain dicts out, no IO. The webhook, the CLI and the tests share it.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass, field
from decimal import Decimal

import orjson

from app.common import format_mebibytes, metadata_of, parse_count, parse_quantity, vocabulary
from app.policy import AnnotationRule, MigrationRules, ResourceRule

from . import cel_selectors
from .asks import PodAsks, pod_asks
from .nodelabels import NodeConstraints, translate
from .podshape import pod_errors
from .sharing import ClusterSharing, Share, SharePlan, Unkept, opaque, plan_share

MANAGED_BY = {"app.kubernetes.io/managed-by": "dra-bridge"}
MIGRATION_ANNOTATION = "dra-bridge.io/migration"
TEMPLATE_PREFIX = "dra-bridge-"
# DRA validation limits (k8s.io/api/resource/v1 constants).
MAX_REQUESTS = vocabulary.DRA_MAX_REQUESTS
MAX_DEVICES_PER_CLAIM = vocabulary.DRA_MAX_DEVICES_PER_CLAIM
MAX_SELECTORS = vocabulary.DRA_MAX_SELECTORS
MAX_CEL_LENGTH = vocabulary.DRA_MAX_CEL_LENGTH
# Vendor prefixes whose unknown extended resources we refuse to half-migrate.
# Resources of GPU systems we know: one without a rule is never left on a migrated pod silently.
GPU_RESOURCE_PREFIXES = ("nvidia.com/", "koordinator.sh/gpu", "volcano.sh/gpu", "volcano.sh/vgpu", "hami.io/")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass
class Plan:
    """Outcome for one pod. status: migrated | unchanged | unmigratable."""

    status: str
    pod: dict | None = None
    templates: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    reason: str = ""
    rewritten: dict = field(default_factory=dict)
    other_system: str = ""  # GPUs shared by another scheduler (KAI): left there, counted by audit
    shares: list[str] = field(default_factory=list)  # "container: what it asked" for each GPU share
    # Shares (and fractions above one GPU) that became whole devices: what each now costs
    costly: list[str] = field(default_factory=list)


class _Unmigratable(Exception):
    pass


@dataclass
class _Ask:
    """Devices one container asks for in one resource family."""

    list_name: str  # initContainers | containers
    index: int
    container: str
    sidecar: bool
    family: str
    rule: ResourceRule | None = None
    groups: dict = field(default_factory=dict)
    count: int | None = None
    memory: Decimal | None = None
    fractions: dict = field(default_factory=dict)  # resource -> percent above 100, not whole devices
    share: Share = field(default_factory=Share)
    share_plan: SharePlan | None = None
    removed: dict = field(default_factory=dict)  # resource -> original value text
    only_dropped: bool = True  # every resource seen so far has role drop
    device_class: str = ""
    device_type: str = "gpu"
    selectors: list = field(default_factory=list)

    @property
    def shape(self) -> tuple:
        return (self.device_class, tuple(self.selectors), self.share.key())


@dataclass
class _Request:
    name: str
    device_class: str
    count: int
    selectors: list
    share_key: tuple = ()
    share: SharePlan | None = None
    aligned: str | None = None  # attribute the devices should share (topology)
    require: bool = False

    @property
    def shape(self) -> tuple:
        return (self.device_class, tuple(self.selectors), self.share_key)

    def render(self) -> dict:
        exactly = _exactly(self.device_class, self.count, self.selectors)
        if self.share and self.share.variants:
            # Shares first, a whole device last: the allocator takes the first alternative that fits.
            alternatives = [{"name": name, **_exactly(self.device_class, self.count, self.selectors + extra),
                             **({"capacity": {"requests": capacity}} if capacity else {})}
                            for name, extra, capacity in self.share.variants]
            if self.share.whole:
                alternatives.append({"name": "whole", **exactly})
            if len(alternatives) == 1:
                alternatives[0].pop("name")
                return {"name": self.name, "exactly": alternatives[0]}
            return {"name": self.name, "firstAvailable": alternatives}
        if self.aligned and not self.require:
            # Aligned first, any devices second.
            return {"name": self.name, "firstAvailable": [{"name": "aligned", **exactly}, {"name": "any", **exactly}]}
        return {"name": self.name, "exactly": exactly}

    def constraint(self) -> dict | None:
        if not self.aligned:
            return None
        target = self.name if self.require else f"{self.name}/aligned"
        return {"requests": [target], "matchAttribute": self.aligned}

    def config(self, domain: str) -> dict | None:
        """NVIDIA's sharing config for the whole-device form of this request."""
        if not self.share or not self.share.config:
            return None
        target = f"{self.name}/whole" if self.share.variants else self.name
        return {"requests": [target], "opaque": opaque(domain, self.share.config)}


def _exactly(device_class: str, count: int, selectors: list[str]) -> dict:
    exactly = {"deviceClassName": device_class, "allocationMode": "ExactCount", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": expr}} for expr in selectors]
    return exactly


def deep_copy(obj: dict) -> dict:
    """JSON-shaped copy; several times faster than copy.deepcopy on admission objects."""
    try:
        return orjson.loads(orjson.dumps(obj))
    except TypeError:  # YAML input may hold values JSON cannot (huge ints)
        return copy.deepcopy(obj)


def uses_dra(spec: dict) -> bool:
    if spec.get("resourceClaims"):
        return True
    return any((c.get("resources") or {}).get("claims") for c in _all_containers(spec))


def _all_containers(spec: dict):
    for list_name in ("initContainers", "containers"):
        for container in spec.get(list_name) or []:
            if isinstance(container, dict):
                yield container


def is_legacy(resource: str, rules: MigrationRules) -> bool:
    """Whether a resource name is a legacy GPU request under these rules (or looks like one)."""
    return bool(rules.rule_for(resource)) or str(resource).startswith(GPU_RESOURCE_PREFIXES)


def legacy_asks(spec: dict, rules: MigrationRules) -> PodAsks:
    """The pod's legacy GPU asks, parsed once (asks.PodAsks: what the kubelet and quota count)."""
    return pod_asks(spec, lambda resource: is_legacy(resource, rules))


def legacy_resources(spec: dict, rules: MigrationRules) -> list[tuple[str, str]]:
    """(container, resource) pairs that are legacy GPU requests under these rules."""
    found: dict[tuple[str, str], None] = {}  # ordered set: linear in containers
    for container in _all_containers(spec):
        resources = container.get("resources") or {}
        for section in ("limits", "requests"):
            values = resources.get(section) if isinstance(resources, dict) else None
            for key in (values if isinstance(values, dict) else {}):
                if is_legacy(key, rules):
                    found[(str(container.get("name")), str(key))] = None
    return list(found)


def plan_pod(pod: dict, rules: MigrationRules, namespace: str | None = None,
             sharing: ClusterSharing | None = None) -> Plan:
    """Plan the migration of one Pod (or pod template shaped like one). sharing: what the
    inventory says about shareable devices (None: nothing known, shares cost whole devices)."""
    errors = pod_errors(pod)
    if errors:
        return Plan("unmigratable", reason=errors[0], warnings=[f"pod left unchanged: {errors[0]}"])
    spec = pod["spec"]
    legacy = legacy_resources(spec, rules)
    if uses_dra(spec):
        if legacy:
            return Plan("unchanged", reason="pod already uses DRA claims",
                        warnings=["pod already uses DRA resource claims; its legacy GPU requests "
                                  "are left for the device plugin"])
        return Plan("unchanged", reason="pod already uses DRA claims")
    if not legacy:
        kai = _kai_annotations(pod)
        if kai:
            why = (f"KAI scheduler GPU sharing ({', '.join(kai)} annotation): the KAI scheduler allocates it, "
                   "not DRA; left as it is")
            return Plan("unchanged", reason=why, warnings=[why], other_system="kai")
        return Plan("unchanged", reason="no legacy GPU requests")
    try:
        return _plan(pod, spec, rules, namespace, sharing)
    except _Unmigratable as why:
        return Plan("unmigratable", reason=str(why),
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


NUMA_ATTRIBUTE = "dra-bridge.io/numaNode"  # our reporter's; NVIDIA's driver publishes no NUMA node
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
        attribute = default[0] if default else "resource.kubernetes.io/pcieRoot"
        notes.append(f"annotation hami.io/gpu-scheduler-policy=topology-aware: GPUs of one request prefer "
                     f"sharing {attribute}")
        return attribute, default[1] if default else False
    return default


def _kai_annotations(pod: dict) -> list[str]:
    annotations = metadata_of(pod).get("annotations")
    return [k for k in KAI_ANNOTATIONS if isinstance(annotations, dict) and k in annotations]


def _plan(pod: dict, spec: dict, rules: MigrationRules, namespace: str | None,
          sharing: ClusterSharing | None) -> Plan:
    notes: list[str] = []
    asks = _collect_asks(spec, rules, notes)
    # DRA's limits before any per-ask work: each container (or sidecar) asking needs a request.
    running = {(a.list_name, a.index) for a in asks if a.count and (a.list_name == "containers" or a.sidecar)}
    if len(running) > MAX_REQUESTS:
        raise _Unmigratable(f"{len(running)} containers ask for devices: more than the DRA limit of "
                            f"{MAX_REQUESTS} requests per claim")
    constraints = translate(spec, rules)
    notes.extend(constraints.notes)
    annotations = metadata_of(pod).get("annotations") or {}
    pinned = [k for k in HAMI_INDEX_PINS if isinstance(annotations, dict) and k in annotations]
    if pinned:
        raise _Unmigratable(f"annotation {pinned[0]}={annotations[pinned[0]]!s:.40} pins the pod to GPU indexes on its "
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
            _resolve_device(ask, rules, constraints, annotations, notes)
            _resolve_share(ask, rules, node_share, sharing, notes)
    requests, refs = _assign_requests([a for a in asks if a.count], notes)
    topology = _topology(annotations, rules, notes)
    if topology is not None:
        for req in requests:
            if req.count > 1 and req.device_class != rules.migDeviceClass and not (req.share and req.share.variants):
                req.aligned, req.require = topology
    if len(requests) > MAX_REQUESTS:
        raise _Unmigratable(f"{len(requests)} device requests exceed the DRA limit of {MAX_REQUESTS} per claim")
    total = sum(r.count for r in requests)
    if total > MAX_DEVICES_PER_CLAIM:
        raise _Unmigratable(f"{total} devices exceed the DRA limit of {MAX_DEVICES_PER_CLAIM} per claim")

    planned = deep_copy(pod)
    planned_spec = planned["spec"]
    rewritten: dict = {"containers": {}}
    for ask in asks:
        container = planned_spec[ask.list_name][ask.index]
        _strip_legacy(container, ask.removed)
        rewritten["containers"].setdefault(ask.container, {}).update(ask.removed)

    templates = []
    if requests:
        # Node constraints only move to the device side when a claim carries them.
        if constraints.translated:
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
        planned_spec["resourceClaims"] = [{"name": rules.claimName, "resourceClaimTemplateName": name}]
        for (list_name, index), names in refs.items():
            resources = planned_spec[list_name][index].setdefault("resources", {})
            resources["claims"] = [{"name": rules.claimName, "request": n} for n in names]
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
    return Plan("migrated", pod=planned, templates=templates, warnings=notes, rewritten=rewritten, shares=shares,
                costly=[c for c in map(_cost, asks) if c])


def _cost(ask: _Ask) -> str | None:
    """What a share kept only as whole devices costs (None: kept as a share, or not one)."""
    if not ask.count:
        return None
    if ask.share_plan is not None and not ask.share_plan.variants:
        return f"container {ask.container}: its GPU share ({', '.join(ask.share.had)}) would cost {ask.count} whole GPU(s)"
    if ask.fractions:
        return f"container {ask.container}: {_fraction_text(ask)} would cost {ask.count} whole GPU(s)"
    return None


def _collect_asks(spec: dict, rules: MigrationRules, notes: list[str]) -> list[_Ask]:
    asks: list[_Ask] = []
    for list_name in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(list_name) or []):
            if not isinstance(container, dict):
                continue
            sidecar = list_name == "initContainers" and container.get("restartPolicy") == "Always"
            asks.extend(_container_asks(list_name, index, container, sidecar, rules, notes))
    return asks


def _container_asks(list_name, index, container, sidecar, rules, notes) -> list[_Ask]:
    name = str(container.get("name"))
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    by_family: dict[str, _Ask] = {}
    for key in list(limits) + [k for k in requests if k not in limits]:
        path = f"spec.{list_name}[{index}].resources.{'limits' if key in limits else 'requests'}[{key}]"
        found = rules.rule_for(key)
        if found is None:
            if str(key).startswith(GPU_RESOURCE_PREFIXES):
                raise _Unmigratable(f"{path}: no migration rule for resource {key}")
            continue
        rule, groups = found
        value = limits.get(key, requests.get(key))
        if key in limits and key in requests and str(limits[key]) != str(requests[key]):
            notes.append(f"{path}: limits and requests differ; the limit {limits[key]} is used")
        ask = by_family.setdefault(rule.family, _Ask(list_name, index, name, sidecar, rule.family))
        ask.removed[key] = str(value)
        _apply_rule(ask, rule, groups, key, value, path, rules, notes)
    for ask in by_family.values():
        if ask.count is None and ask.only_dropped:
            ask.count = 0  # nothing but resources without a device meaning: removed, no device
        if ask.count is None:
            count_rule = ask.rule or rules.count_rule(ask.family)
            if count_rule is None:
                raise _Unmigratable(f"spec.{list_name}[{index}]: {sorted(ask.removed)} set without a device count")
            ask.rule, ask.count = count_rule, 1
        if ask.fractions and ask.count:
            if rules.fractional == "skip":
                raise _Unmigratable(f"container {name} asks for a fraction of a GPU "
                                    f"({_fraction_text(ask)}) and policy fractional is skip")
            notes.append(f"container {name}: {_fraction_text(ask)} is more than one GPU but not whole GPUs; "
                         f"it now costs {ask.count} whole devices")
    return list(by_family.values())


def _fraction_text(ask: _Ask) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(ask.fractions.items()))


def _resolve_share(ask: _Ask, rules: MigrationRules, node_share: str | None,
                   sharing: ClusterSharing | None, notes: list[str]) -> None:
    share = ask.share
    if not share and node_share and ask.device_type == "gpu" and ask.rule.role == "count":
        share.replicas = node_share  # a plain GPU on time-sliced nodes was a time slice
        share.had.append(node_share)
    if not share:
        return
    try:
        ask.share_plan = plan_share(share, ask.container, ask.count, ask.device_class, ask.device_type,
                                    rules.sharing, sharing, rules.driverDomain, rules.fractional)
    except Unkept as why:
        raise _Unmigratable(str(why)) from None
    notes.extend(ask.share_plan.notes)


def _apply_rule(ask, rule, groups, key, value, path, rules, notes) -> None:
    ask.only_dropped = ask.only_dropped and rule.role == "drop"
    try:
        if rule.role == "drop":
            pass  # removed from the pod with its note
        elif rule.role == "count":
            count = parse_count(value)
            if rule.countAs == "one" and count > 1:
                notes.append(f"{path}: {count} replicas become 1 device")
                count = 1
            if rule.shared and count:
                ask.share.replicas = f"{key}={value}"
                ask.share.had.append(f"{key}={value}")
            ask.count, ask.rule, ask.groups = count, rule, groups
        elif rule.role == "countPercent":
            percent = parse_count(value)
            count = -(-percent // 100)
            if 0 < percent < 100:  # a share of one card, compute and memory alike
                ask.share.cores = ask.share.memory_percent = Decimal(percent)
                ask.share.had.append(f"{key}={value}")
            elif percent % 100:
                ask.fractions[key] = str(percent)
            ask.count, ask.rule, ask.groups = count, rule, groups
        elif rule.role == "memory":
            amount = parse_quantity(value)
            if amount <= 0:
                raise ValueError(f"{value!r} must be positive")
            scale = parse_quantity(f"1{rule.unit}") if rule.unit else Decimal(1)
            ask.memory = ask.share.memory = amount * scale
            ask.share.had.append(f"{key}={value}")
            if rule.deviceClass and ask.rule is None:
                ask.rule = rule
        else:
            percent = parse_quantity(value)
            if percent > 100 and rule.aboveHundred == "devices":
                if percent % 100:
                    raise ValueError(f"{value!r}: above 100 only whole devices (multiples of 100)")
                devices = int(percent // 100)
                if ask.count is not None and ask.count != devices:
                    notes.append(f"{path}: {value} is {devices} devices; the count {ask.count} is used")
                elif ask.count is None:
                    ask.count = devices
                    ask.rule = ask.rule or rules.count_rule(rule.family)
            elif not 0 <= percent <= 100:
                raise ValueError(f"{value!r} is not a percentage between 0 and 100")
            elif 0 < percent < 100:
                if rule.role == "cores":
                    ask.share.cores = percent
                else:
                    ask.share.memory_percent = percent
                ask.share.had.append(f"{key}={value}")
    except ValueError as exc:
        raise _Unmigratable(f"{path}: {exc}") from None
    if rule.note:
        notes.append(f"{key}: {rule.note}")


def _resolve_device(ask: _Ask, rules: MigrationRules, constraints: NodeConstraints,
                    annotations: dict, notes: list[str]) -> None:
    rule = ask.rule
    ask.device_class, ask.device_type = rule.deviceClass, rule.deviceType
    selectors = [_format(s, ask.groups) for s in rule.selectors]
    if ask.device_type == "gpu" and constraints.mig_profile:
        ask.device_class, ask.device_type = rules.migDeviceClass, "mig"
        selectors.append(cel_selectors.guarded_attribute(
            rules.driverDomain, "profile",
            f"{cel_selectors.attribute(rules.driverDomain, 'profile')} == "
            f"{cel_selectors.literal(constraints.mig_profile)}"))
        notes.append(f"container {ask.container}: MIG single strategy; asks for "
                     f"{constraints.mig_profile} MIG devices")
    if ask.memory is not None:
        if ask.device_type == "mig":
            notes.append(f"container {ask.container}: memory size applies to whole GPUs, not MIG devices; ignored")
        else:
            selectors.append(cel_selectors.memory_at_least(rules.driverDomain, format_mebibytes(ask.memory)))
    selectors.extend(constraints.selectors[ask.device_type])
    if ask.device_type == "mig" and constraints.mig_gaps:
        notes.append(f"container {ask.container}: node labels {constraints.mig_gaps} do not apply to MIG devices")
    for annotation in rules.annotations:
        if ask.family in annotation.families and annotations.get(annotation.key):
            selectors.append(_annotation_selector(annotation, str(annotations[annotation.key]), rules.driverDomain))
    for expr in selectors:
        if len(expr) > MAX_CEL_LENGTH:
            raise _Unmigratable(f"container {ask.container}: a selector exceeds {MAX_CEL_LENGTH} characters")
    if len(selectors) > MAX_SELECTORS:
        raise _Unmigratable(f"container {ask.container}: {len(selectors)} selectors exceed {MAX_SELECTORS}")
    ask.selectors = selectors


def _format(template: str, groups: dict) -> str:
    # Captured groups come from a resource name; quote-safe by the rule's regex, still escaped.
    safe = {k: (v or "").replace("\\", "").replace("'", "") for k, v in groups.items()}
    return template.format_map(safe)


def _annotation_selector(rule: AnnotationRule, value: str, domain: str) -> str:
    items = [v.strip() for v in value.split(",") if v.strip()]
    attr = cel_selectors.attribute(domain, rule.attribute)
    guard = cel_selectors.has_attribute(domain, rule.attribute)
    if rule.match in ("containsAny", "containsNone"):
        # HAMi matches a type when the device name contains it, case-insensitively.
        test = f"{cel_selectors.string_list(i.upper() for i in items)}.exists(t, {attr}.upperAscii().contains(t))"
    else:
        test = f"{attr} in {cel_selectors.string_list(items)}"
    if rule.match in ("containsAny", "oneOf"):
        return f"{guard} && {test}"
    return f"!({guard}) || !({test})"


def _request_name(container: str, taken: set[str]) -> str:
    base = container if _DNS_LABEL.match(container) else _dns_safe(container)
    name, n = base, 2
    while name in taken:
        suffix = f"-{n}"
        name = base[: 63 - len(suffix)].rstrip("-") + suffix
        n += 1
    taken.add(name)
    return name


def _dns_safe(text: str) -> str:
    cleaned = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:54].rstrip("-") or "c"
    return f"{cleaned}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def _assign_requests(asks: list[_Ask], notes: list[str]):
    """One request per running container; init containers reuse idle devices first.

    The device plugin hands an init container's devices on to the containers after it, so a
    pod never needs more than max(init, sum of app containers + sidecars) devices of a kind.
    """
    requests: list[_Request] = []
    refs: dict[tuple, list[str]] = {}
    taken: set[str] = set()
    by_container: dict[tuple, _Request] = {}
    for ask in asks:
        if ask.list_name == "containers" or ask.sidecar:
            req = _Request(_request_name(ask.container, taken), ask.device_class, ask.count, ask.selectors,
                           ask.share.key(), ask.share_plan)
            requests.append(req)
            by_container[(ask.list_name, ask.index, ask.family)] = req
            refs.setdefault((ask.list_name, ask.index), []).append(req.name)
    spill: list[_Request] = []
    for ask in asks:
        if ask.list_name != "initContainers" or ask.sidecar:
            continue
        reusable = [r for key, r in by_container.items()
                    if r.shape == ask.shape and (key[0] == "containers" or key[1] > ask.index)]
        reusable += [r for r in spill if r.shape == ask.shape]
        chosen, have = [], 0
        for req in reusable:
            if have >= ask.count:
                break
            chosen.append(req)
            have += req.count
        if have < ask.count:
            if len(requests) >= MAX_REQUESTS:
                raise _Unmigratable(f"more than {MAX_REQUESTS} device requests would be needed: the DRA limit "
                                    "per claim")
            own = _Request(_request_name(ask.container, taken), ask.device_class, ask.count - have, ask.selectors,
                           ask.share.key(), ask.share_plan)
            requests.append(own)
            spill.append(own)
            chosen.append(own)
            have = ask.count
        if have > ask.count:
            notes.append(f"init container {ask.container} sees {have} devices (asked {ask.count}): "
                         f"it shares {', '.join(r.name for r in chosen)} with the containers after it")
        refs.setdefault((ask.list_name, ask.index), []).extend(r.name for r in chosen)
    return requests, refs


def _strip_legacy(container: dict, removed: dict) -> None:
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        values = resources.get(section)
        if not isinstance(values, dict):
            continue
        for key in removed:
            values.pop(key, None)
        if not values:
            resources.pop(section)
    if "resources" in container and not resources:
        container.pop("resources")


def template_name(template_spec: dict) -> str:
    canonical = orjson.dumps(template_spec, option=orjson.OPT_SORT_KEYS)
    return TEMPLATE_PREFIX + hashlib.sha256(canonical).hexdigest()[:16]


def render_template(requests: list[dict], namespace: str | None, constraints: list[dict] | None = None,
                    config: list[dict] | None = None) -> dict:
    spec = {"spec": {"devices": {"requests": requests}}}
    if constraints:
        spec["spec"]["devices"]["constraints"] = constraints
    if config:
        spec["spec"]["devices"]["config"] = config
    metadata = {"name": template_name(spec), "labels": dict(MANAGED_BY)}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": metadata, "spec": spec}
