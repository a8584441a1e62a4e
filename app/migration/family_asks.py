"""One container's legacy asks, per resource family, as the migration rules read them: a device
count, a memory size, compute and memory shares, fractions; then the DeviceClass, selectors and
sharing each becomes. What cannot be said as a claim raises Unmigratable, naming the field. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from app.cel import build
from app.common import format_mebibytes, parse_count, parse_quantity, vocabulary
from app.policy import AnnotationRule, MigrationRules, ResourceRule

from . import cel_selectors as sel
from .asks import asked
from .legacy import GPU_RESOURCE_PREFIXES
from .nodelabels import NodeConstraints
from .sharing import ClusterSharing, Share, SharePlan, Unkept, plan_share

MAX_SELECTORS = vocabulary.DRA_MAX_SELECTORS
MAX_CEL_LENGTH = vocabulary.DRA_MAX_CEL_LENGTH


class Unmigratable(Exception):
    pass


@dataclass
class FamilyAsk:
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

    @property
    def devices(self) -> int:
        """The count once resolved (collect_asks sets every ask's); a bug otherwise."""
        if self.count is None:
            raise ValueError(f"{self.container}/{self.family}: device count not resolved")
        return self.count

    @property
    def resolved_rule(self) -> ResourceRule:
        if self.rule is None:
            raise ValueError(f"{self.container}/{self.family}: resource rule not resolved")
        return self.rule


def collect_asks(spec: dict, rules: MigrationRules, notes: list[str]) -> list[FamilyAsk]:
    asks: list[FamilyAsk] = []
    for list_name in ("initContainers", "containers"):
        for index, container in enumerate(spec.get(list_name) or []):
            if not isinstance(container, dict):
                continue
            sidecar = list_name == "initContainers" and container.get("restartPolicy") == "Always"
            asks.extend(_container_asks(list_name, index, container, sidecar, rules, notes))
    return asks


def _container_asks(list_name, index, container, sidecar, rules, notes) -> list[FamilyAsk]:
    name = str(container.get("name"))
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    amounts = asked(resources)
    by_family: dict[str, FamilyAsk] = {}
    for key in list(limits) + [k for k in requests if k not in limits]:
        path = f"spec.{list_name}[{index}].resources.{'limits' if key in limits else 'requests'}[{key}]"
        found = rules.rule_for(key)
        if found is None:
            if str(key).startswith(GPU_RESOURCE_PREFIXES):
                raise Unmigratable(f"{path}: no migration rule for resource {key}")
            continue
        rule, groups = found
        value = amounts[key]
        if key in limits and key in requests and str(limits[key]) != str(requests[key]):
            notes.append(f"{path}: limits and requests differ; the limit {limits[key]} is used")
        ask = by_family.setdefault(rule.family, FamilyAsk(list_name, index, name, sidecar, rule.family))
        ask.removed[key] = str(value)
        _apply_rule(ask, rule, groups, key, value, path, rules, notes)
    for ask in by_family.values():
        if ask.count is None and ask.only_dropped:
            ask.count = 0  # nothing but resources without a device meaning: removed, no device
        if ask.count is None:
            count_rule = ask.rule or rules.count_rule(ask.family)
            if count_rule is None:
                raise Unmigratable(f"spec.{list_name}[{index}]: {sorted(ask.removed)} set without a device count")
            ask.rule, ask.count = count_rule, 1
        if ask.fractions and ask.count:
            if rules.fractional == "skip":
                raise Unmigratable(f"container {name} asks for a fraction of a GPU "
                                    f"({_fraction_text(ask)}) and policy fractional is skip")
            notes.append(f"container {name}: {_fraction_text(ask)} is more than one GPU but not whole GPUs; "
                         f"it now costs {ask.count} whole devices")
    return list(by_family.values())


def _fraction_text(ask: FamilyAsk) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(ask.fractions.items()))


def resolve_share(ask: FamilyAsk, rules: MigrationRules, node_share: str | None,
                   sharing: ClusterSharing | None, notes: list[str]) -> None:
    share = ask.share
    if not share and node_share and ask.device_type == "gpu" and ask.resolved_rule.role == "count":
        share.replicas = node_share  # a plain GPU on time-sliced nodes was a time slice
        share.had.append(node_share)
    if not share:
        return
    try:
        ask.share_plan = plan_share(share, ask.container, ask.devices, ask.device_class, ask.device_type,
                                    rules.sharing, sharing, rules.driverDomain, rules.fractional)
    except Unkept as why:
        raise Unmigratable(str(why)) from why
    notes.extend(ask.share_plan.notes)


def whole_devices(rule: ResourceRule, amount: int) -> int:
    """Whole devices a count ask takes, for the planner and the admin rules alike: a percent of
    a device rounded up (countPercent); at most one where each unit is a replica of one device
    (count with countAs one)."""
    if rule.role == "countPercent":
        return -(-amount // 100)
    return min(amount, 1) if rule.countAs == "one" else amount


def _apply_rule(ask, rule, groups, key, value, path, rules, notes) -> None:
    ask.only_dropped = ask.only_dropped and rule.role == "drop"
    try:
        if rule.role == "drop":
            pass  # removed from the pod with its note
        elif rule.role == "count":
            asked = parse_count(value)
            count = whole_devices(rule, asked)
            if count < asked:
                notes.append(f"{path}: {asked} replicas become 1 device")
            if rule.shared and count:
                ask.share.replicas = f"{key}={value}"
                ask.share.had.append(f"{key}={value}")
            ask.count, ask.rule, ask.groups = count, rule, groups
        elif rule.role == "countPercent":
            percent = parse_count(value)
            count = whole_devices(rule, percent)
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
            share_percent = parse_quantity(value)
            if share_percent > 100 and rule.aboveHundred == "devices":
                if share_percent % 100:
                    raise ValueError(f"{value!r}: above 100 only whole devices (multiples of 100)")
                devices = int(share_percent // 100)
                if ask.count is not None and ask.count != devices:
                    notes.append(f"{path}: {value} is {devices} devices; the count {ask.count} is used")
                elif ask.count is None:
                    ask.count = devices
                    ask.rule = ask.rule or rules.count_rule(rule.family)
            elif not 0 <= share_percent <= 100:
                raise ValueError(f"{value!r} is not a percentage between 0 and 100")
            elif 0 < share_percent < 100:
                if rule.role == "cores":
                    ask.share.cores = share_percent
                else:
                    ask.share.memory_percent = share_percent
                ask.share.had.append(f"{key}={value}")
    except ValueError as exc:
        raise Unmigratable(f"{path}: {exc}") from exc
    if rule.note:
        notes.append(f"{key}: {rule.note}")


def resolve_device(ask: FamilyAsk, rules: MigrationRules, constraints: NodeConstraints,
                    annotations: dict, notes: list[str]) -> None:
    rule = ask.resolved_rule
    ask.device_class, ask.device_type = rule.deviceClass or "", rule.deviceType
    selectors = [_format(s, ask.groups) for s in rule.selectors]
    if ask.device_type == "gpu" and constraints.mig_profile:
        ask.device_class, ask.device_type = rules.migDeviceClass, "mig"
        profile = sel.attribute(rules.driverDomain, "profile")
        selectors.append(sel.text(sel.guarded_attribute(
            rules.driverDomain, "profile", build.compare("==", profile, sel.string(constraints.mig_profile)))))
        notes.append(f"container {ask.container}: MIG single strategy; asks for "
                     f"{constraints.mig_profile} MIG devices")
    if ask.memory is not None:
        if ask.device_type == "mig":
            notes.append(f"container {ask.container}: memory size applies to whole GPUs, not MIG devices; ignored")
        else:
            selectors.append(sel.text(sel.memory_at_least(rules.driverDomain, format_mebibytes(ask.memory))))
    selectors.extend(sel.text(tree) for tree in constraints.selectors[ask.device_type])
    if ask.device_type == "mig" and constraints.mig_gaps:
        notes.append(f"container {ask.container}: node labels {constraints.mig_gaps} do not apply to MIG devices")
    for annotation in rules.annotations:
        if ask.family in annotation.families and annotations.get(annotation.key):
            tree = _annotation_selector(annotation, str(annotations[annotation.key]), rules.driverDomain)
            selectors.append(sel.text(tree))
    for expr in selectors:
        if len(expr) > MAX_CEL_LENGTH:
            raise Unmigratable(f"container {ask.container}: a selector exceeds {MAX_CEL_LENGTH} characters")
    if len(selectors) > MAX_SELECTORS:
        raise Unmigratable(f"container {ask.container}: {len(selectors)} selectors exceed {MAX_SELECTORS}")
    ask.selectors = selectors


def _format(template: str, groups: dict) -> str:
    # Captured groups come from a resource name; quote-safe by the rule's regex, still escaped.
    safe = {k: (v or "").replace("\\", "").replace("'", "") for k, v in groups.items()}
    return template.format_map(safe)


def _annotation_selector(rule: AnnotationRule, value: str, domain: str) -> sel.Node:
    items = [v.strip() for v in value.split(",") if v.strip()]
    attr = sel.attribute(domain, rule.attribute)
    guard = sel.has_attribute(domain, rule.attribute)
    if rule.match in ("containsAny", "containsNone"):
        # HAMi matches a type when the device name contains it, case-insensitively.
        contains = build.method(build.method(attr, "upperAscii"), "contains", build.ident("t"))
        test = build.exists(sel.strings(i.upper() for i in items), "t", contains)
    else:
        test = sel.member_of(attr, items)
    if rule.match in ("containsAny", "oneOf"):
        return sel.all_of([guard, test])
    return sel.absent_or_not(guard, test)


def cost(ask: FamilyAsk) -> str | None:
    """What a share kept only as whole devices costs (None: kept as a share, or not one)."""
    if not ask.count:
        return None
    if ask.share_plan is not None and not ask.share_plan.variants:
        return f"container {ask.container}: its GPU share ({', '.join(ask.share.had)}) would cost {ask.count} whole GPU(s)"
    if ask.fractions:
        return f"container {ask.container}: {_fraction_text(ask)} would cost {ask.count} whole GPU(s)"
    return None
