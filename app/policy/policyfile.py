"""Policy file: schema of the migration rules and per-namespace modes, parsing, lookup."""

from __future__ import annotations

import re
from functools import cached_property
from importlib import resources
from typing import Literal, Optional

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from app.common import PolicyError, vocabulary

from .rules import MODE_ACTIONS, LabelSelector, Rule

Mode = Literal["enforce", "warn", "audit"]
Decision = Literal["allow", "deny"]
Path = Literal["auto", "rewrite", "native", "legacy"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResourceRule(_Strict):
    """One legacy extended resource and what it means in DRA."""

    name: Optional[str] = None
    pattern: Optional[str] = None
    family: str
    # drop: the resource has no device meaning (HAMi's nvidia.com/priority): removed, with the note.
    role: Literal["count", "countPercent", "memory", "memoryPercent", "cores", "drop"]
    deviceClass: Optional[str] = None
    deviceType: Literal["gpu", "mig"] = "gpu"
    selectors: list[str] = []
    countAs: Literal["devices", "one"] = "devices"
    # cores / memoryPercent above 100: invalid, or whole devices in hundreds (Koordinator's units).
    aboveHundred: Literal["invalid", "devices"] = "invalid"
    # Each unit is a share of one device (time-slicing replicas), not a device of its own.
    shared: bool = False
    unit: str = "Mi"
    note: Optional[str] = None

    @model_validator(mode="after")
    def _name_or_pattern(self) -> "ResourceRule":
        if (self.name is None) == (self.pattern is None):
            raise ValueError("set exactly one of 'name' or 'pattern'")
        if self.pattern is not None:
            try:
                re.compile(self.pattern)
            except re.error as exc:
                raise ValueError(f"pattern is not a valid regular expression: {exc}") from exc
        if self.role in ("count", "countPercent") and not self.deviceClass:
            raise ValueError(f"role {self.role} needs a deviceClass")
        return self

    @cached_property
    def regex(self) -> re.Pattern[str] | None:
        return re.compile(self.pattern) if self.pattern else None

    def match(self, resource: str) -> dict[str, str] | None:
        """Captured groups when this rule covers `resource`, else None."""
        if self.name is not None:
            return {} if resource == self.name else None
        found = self.regex.fullmatch(resource) if self.regex is not None else None
        return found.groupdict() if found else None


class AnnotationRule(_Strict):
    """A pod annotation (HAMi style) that narrows devices by one attribute."""

    key: str
    families: list[str]
    attribute: str
    match: Literal["containsAny", "containsNone", "oneOf", "noneOf"]


class NodeLabelRule(_Strict):
    """A GPU Feature Discovery node label and the device field it stands for."""

    label: str
    translate: Literal["product", "string", "memoryMiB", "versionMajor", "versionMinor", "gkeAccelerator",
                       "gpuModel", "migProfile", "sharing"]
    attribute: Optional[str] = None
    capacity: Optional[str] = None
    # Also left on the pod's node selection: a cloud node-pool label autoscalers choose pools by.
    keepOnNode: bool = False

    @model_validator(mode="after")
    def _target(self) -> "NodeLabelRule":
        if self.translate == "memoryMiB" and not self.capacity:
            raise ValueError("translate memoryMiB needs 'capacity'")
        if self.translate in ("string", "versionMajor", "versionMinor") and not self.attribute:
            raise ValueError(f"translate {self.translate} needs 'attribute'")
        return self


class TopologyRule(_Strict):
    """Multi-device requests keep the device plugin's preference for aligned GPUs: first try
    devices that share `attribute` (PCIe root, NUMA node, NVLink domain), then any."""

    attribute: str = vocabulary.PCIE_ROOT
    require: bool = False  # only aligned sets (no fallback)


class SharingRule(_Strict):
    """How a pod's share of a GPU (HAMi/Volcano/Koordinator limits, time-slicing replicas) is
    kept: consumable capacity on devices that allow multiple allocations, else NVIDIA's sharing
    config on a whole device, else a whole device with a warning."""

    capacity: bool = True  # use devices the inventory shows with allowMultipleAllocations
    memoryCapacity: str = "memory"  # device capacity that a memory limit consumes
    coresCapacity: str = vocabulary.SHARE_CORES  # device capacity in percent of compute a cores limit consumes
    # NVIDIA's opaque GpuConfig where no shareable device serves: needs the driver's MPSSupport /
    # TimeSlicingSettings feature gates, so it is off unless the admin says the driver has them.
    config: Literal["none", "mps", "timeSlicing"] = "none"
    timeSliceInterval: Literal["Default", "Short", "Medium", "Long"] = "Default"


class MigrationRules(_Strict):
    claimName: str = "dra-bridge-gpus"
    removeTranslatedLabels: bool = True
    # A share DRA cannot keep as a share (no device allows multiple allocations): legacy leaves the
    # pod on the device plugin; wholeDevice gives it whole GPUs (a cost the admin chose); skip
    # calls the pod unmigratable (onUnmigratable decides).
    fractional: Literal["legacy", "wholeDevice", "skip"] = "legacy"
    # DeviceClasses Kueue's deviceClassMappings count: pods Kueue admits one by one (queue-name
    # label, not part of a Job) are rewritten onto these only; elsewhere they keep a path Kueue counts.
    kueueDeviceClasses: list[str] = []
    driverDomain: str = vocabulary.NVIDIA_DRIVER
    migDeviceClass: str = vocabulary.NVIDIA_MIG_CLASS
    # Which migration path pods take (per namespace: namespaces[].path): auto picks native where a
    # DeviceClass serves the resource (extendedResourceName), legacy where DRA cannot serve it.
    path: Path = "auto"
    draSchedulers: list[str] = ["default-scheduler"]  # schedulers that allocate ResourceClaims
    # Whether kube-scheduler preempts for DRA devices: no release up to 1.38.0-beta.0 does (no
    # DRAPreemption gate, KEP-5690). Off, a GPU pod that preempts or is preempted stays on the device plugin.
    draPreemption: Literal["off", "on"] = "off"
    topology: Optional[TopologyRule] = None  # None: multi-device requests take any devices
    sharing: SharingRule = SharingRule()
    resources: list[ResourceRule]
    annotations: list[AnnotationRule] = []
    nodeLabels: list[NodeLabelRule] = []

    @field_validator("claimName")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not _DNS_LABEL.fullmatch(value):
            raise ValueError("must be a DNS label (lowercase alphanumerics and '-', at most 63)")
        return value

    def count_rule(self, family: str) -> ResourceRule | None:
        """The rule that gives a family its device class (for modifier-only asks)."""
        for rule in self.resources:
            if rule.family == family and rule.deviceClass:
                return rule
        return None

    def rule_for(self, resource: str) -> tuple[ResourceRule, dict[str, str]] | None:
        for rule in self.resources:
            groups = rule.match(resource)
            if groups is not None:
                return rule, groups
        return None


class NamespaceSettings(_Strict):
    migrate: Optional[bool] = None
    path: Optional[Path] = None
    mode: Optional[Mode] = None
    onUnmigratable: Optional[Decision] = None
    onTemplateError: Optional[Decision] = None
    onInternalError: Optional[Decision] = None
    forbidLegacy: Optional[bool] = None
    allowedDeviceClasses: Optional[list[str]] = None
    maxDevicesPerRequest: Optional[int] = Field(default=None, ge=1)
    maxDevicesPerClaim: Optional[int] = Field(default=None, ge=1)
    maxDevicesPerPod: Optional[int] = Field(default=None, ge=1)
    allowAdminAccess: Optional[bool] = None
    keepOnPlugin: Optional[list[str]] = None
    migratePreempting: Optional[bool] = None


class Defaults(_Strict):
    migrate: bool = True
    mode: Mode = "warn"
    onUnmigratable: Decision = "allow"
    onTemplateError: Decision = "allow"
    # None: deny a claim we could not finish validating in an enforce namespace, admit a pod
    # we could not finish mutating (unmigrated, with a warning).
    onInternalError: Optional[Decision] = None
    forbidLegacy: bool = False
    allowedDeviceClasses: Optional[list[str]] = None  # None: any class
    maxDevicesPerRequest: Optional[int] = Field(default=None, ge=1)
    maxDevicesPerClaim: Optional[int] = Field(default=None, ge=1)
    # None: maxDevicesPerClaim, so splitting an ask over several claims does not get round it
    maxDevicesPerPod: Optional[int] = Field(default=None, ge=1)
    allowAdminAccess: bool = False
    # Resources (names) or families (migration.resources[].family) whose pods stay on the device
    # plugin: the pods are left as written (path legacy, reason policy).
    keepOnPlugin: list[str] = []
    # A GPU pod that preempts or is preempted (while migration.draPreemption is off): true moves
    # it to DRA anyway, with a warning that it loses preemption.
    migratePreempting: bool = False


class NamespaceEntry(NamespaceSettings):
    names: list[str] = []
    selector: Optional[LabelSelector] = None

    @model_validator(mode="after")
    def _matcher(self) -> "NamespaceEntry":
        if not self.names and self.selector is None:
            raise ValueError("set 'names' or 'selector'")
        return self

    def matches(self, namespace: str, labels: dict[str, str]) -> bool:
        if self.names and namespace in self.names:
            return True
        return self.selector is not None and self.selector.matches(labels)


class Effective(_Strict):
    """Settings in force for one namespace."""

    migrate: bool
    mode: Mode
    onUnmigratable: Decision
    onTemplateError: Decision
    forbidLegacy: bool
    onInternalError: Optional[Decision] = None
    path: Path = "auto"
    allowedDeviceClasses: Optional[list[str]] = None
    maxDevicesPerRequest: Optional[int] = None
    maxDevicesPerClaim: Optional[int] = None
    maxDevicesPerPod: Optional[int] = None
    allowAdminAccess: bool = False
    keepOnPlugin: list[str] = []
    migratePreempting: bool = False


class Policy(_Strict):
    apiVersion: Literal["dra-bridge.io/v1alpha1"] = "dra-bridge.io/v1alpha1"
    kind: Literal["Policy"] = "Policy"
    defaults: Defaults = Field(default_factory=lambda: default_policy().defaults)
    namespaces: list[NamespaceEntry] = []
    migration: MigrationRules = Field(default_factory=lambda: default_policy().migration)
    rules: list[Rule] = []  # admin rules: every one that matches applies, each with its own actions
    _rules_seen: dict = PrivateAttr(default_factory=dict)

    @field_validator("rules")
    @classmethod
    def _unique_names(cls, rules: list[Rule]) -> list[Rule]:
        seen = set()
        for rule in rules:
            if rule.name in seen:
                raise ValueError(f"two rules named {rule.name!r}: names must be unique (reports and metrics use them)")
            seen.add(rule.name)
        return rules

    def rules_for(self, namespace: str, labels: dict[str, str] | None = None) -> list[Rule]:
        """Every rule that can apply in the namespace: the namespace settings' limits (defaults
        with the first matching entry over them) under the namespace's mode, each later matching
        entry's limits under its own mode (a guardrail added, never one dropped), then `rules`.
        Kept per namespace and labels: each review asks, and the policy never changes."""
        key = (namespace, tuple(sorted((labels or {}).items())))
        found = self._rules_seen.get(key)
        if found is None:
            if len(self._rules_seen) > 4096:
                self._rules_seen.clear()
            found = self._rules_seen[key] = self._rules_for(namespace, labels)
        return found

    def _rules_for(self, namespace: str, labels: dict[str, str] | None) -> list[Rule]:
        found = []
        effective = self.for_namespace(namespace, labels)
        found.extend(settings_rule("namespace-settings", effective, effective.mode))
        matching = [i for i, e in enumerate(self.namespaces) if e.matches(namespace, labels or {})]
        for i in matching[1:]:
            entry = self.namespaces[i]
            found.extend(settings_rule(f"namespaces-{i}", entry, entry.mode or effective.mode))
        return found + [r if r.validationActions is not None else
                        r.model_copy(update={"validationActions": MODE_ACTIONS[effective.mode]}) for r in self.rules]

    def compiled_rules(self) -> list[tuple[Rule, str | None]]:
        """Each rule with the actions its ValidatingAdmissionPolicyBinding takes, and why they are
        weaker than the webhook's where they are: a rule that follows the namespace's mode, over
        namespaces of different modes, is compiled with the actions short of Deny (the webhook
        denies where the mode is enforce)."""
        out: list[tuple[Rule, str | None]] = []
        for rule in self.rules:
            if rule.validationActions is not None:
                out.append((rule, None))
                continue
            modes = self._modes_under(rule)
            if len(modes) == 1:
                out.append((rule.model_copy(update={"validationActions": MODE_ACTIONS[modes[0]]}), None))
                continue
            actions = sorted({a for m in modes for a in MODE_ACTIONS[m] if a != "Deny"})
            out.append((rule.model_copy(update={"validationActions": actions}),
                        f"follows each namespace's mode ({', '.join(modes)}): the API server binding takes "
                        f"{'+'.join(actions)}; dra-bridge denies where the mode is enforce"))
        return out

    def _modes_under(self, rule: Rule) -> list[str]:
        """The modes of the namespaces a rule can match (all the policy's where labels decide)."""
        if rule.match.namespaces and not any(e.selector is not None for e in self.namespaces):
            return sorted({self.for_namespace(n).mode for n in rule.match.namespaces})
        return sorted({self.defaults.mode, *(e.mode for e in self.namespaces if e.mode)})

    def for_namespace(self, namespace: str, labels: dict[str, str] | None = None) -> Effective:
        chosen = {**self.defaults.model_dump(), "path": self.migration.path}
        for entry in self.namespaces:
            if entry.matches(namespace, labels or {}):
                overrides = entry.model_dump(include=set(NamespaceSettings.model_fields))
                chosen.update({k: v for k, v in overrides.items() if v is not None})
                break
        return Effective(**chosen)

    @property
    def needs_namespace_labels(self) -> bool:
        return any(entry.selector is not None for entry in self.namespaces)


def settings_rule(name: str, settings, mode: Mode) -> list[Rule]:
    """The validation fields of defaults / a namespaces entry as one rule (none if it sets none)."""
    per_claim = settings.maxDevicesPerClaim
    fields = {"allowedDeviceClasses": settings.allowedDeviceClasses,
              "maxDevicesPerRequest": settings.maxDevicesPerRequest, "maxDevicesPerClaim": per_claim,
              "maxDevicesPerPod": settings.maxDevicesPerPod or per_claim,
              "allowAdminAccess": False if settings.allowAdminAccess is False else None,
              "forbidLegacy": True if settings.forbidLegacy else None}
    fields = {k: v for k, v in fields.items() if v is not None}
    if not fields:
        return []
    return [Rule(name=name, validationActions=MODE_ACTIONS[mode], **fields)]


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DEFAULT: Policy | None = None


def _format_validation(source: str, exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        path = ""
        for part in err["loc"]:
            path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
        lines.append(f"{source}: {path or '(top level)'}: {err['msg'].removeprefix('Value error, ')}")
    return "\n".join(lines)


def parse_policy(text: str, source: str = "policy") -> Policy:
    """Parse YAML/JSON policy text; PolicyError names the file and field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise PolicyError(f"{source}:{where} not valid YAML: {getattr(exc, 'problem', exc)}") from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PolicyError(f"{source}: (top level): expected a mapping, got {type(data).__name__}")
    try:
        return Policy.model_validate(data)
    except ValidationError as exc:
        raise PolicyError(_format_validation(source, exc)) from exc


def load_policy(path: str | None) -> Policy:
    if path is None:
        return default_policy()
    return parse_policy(read_policy_text(path), path)


def read_policy_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})") from exc


def default_policy() -> Policy:
    global _DEFAULT
    if _DEFAULT is None:
        text = resources.files("app").joinpath("data/default-policy.yaml").read_text("utf-8")
        data = yaml.safe_load(text)
        # Build sections explicitly: Policy's own defaults would recurse into us.
        _DEFAULT = Policy(
            defaults=Defaults.model_validate(data["defaults"]),
            namespaces=[NamespaceEntry.model_validate(n) for n in data.get("namespaces", [])],
            migration=MigrationRules.model_validate(data["migration"]),
        )
    return _DEFAULT
