"""One GPU Feature Discovery (or cloud accelerator) node label requirement -> a CEL selector per
device type (whole GPU, MIG device), or Untranslatable naming why it stays on the node. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from app.policy import MigrationRules, NodeLabelRule

from app.cel import build

from . import cel_selectors as sel


class Untranslatable(Exception):
    """This label expression stays a node constraint; the message says why."""


_MIG_SUFFIX = re.compile(r"^(?P<base>.+)-MIG-(?P<profile>[0-9]+g\.[0-9]+gb)$", re.IGNORECASE)
_SHARED_SUFFIX = "-SHARED"
_NOT_SHARED = {"none", "", "false", "exclusive"}
_MIG_PROFILE = re.compile(r"[0-9]+g\.[0-9]+gb")
# nvidia-tesla-a100, nvidia-a100-80gb, nvidia-h100-mega-80gb, nvidia-l4, nvidia-tesla-t4, nvidia-b200
_MODEL = re.compile(r"[a-z][a-z0-9-]*[0-9][a-z0-9-]*")


def _names_model(product: sel.Node, model: str) -> sel.Node:
    """CEL: the product name holds the model as a word ('NVIDIA L4' names l4, 'NVIDIA L40S' does
    not; 'NVIDIA A100-SXM4-80GB' names a100, not a10)."""
    pattern = f"(^|[^a-z0-9]){re.escape(model)}([^a-z0-9]|$)"
    return build.method(sel.lowered(product), "matches", sel.string(pattern))


_GKE_ACCELERATOR = re.compile(r"nvidia-(?:tesla-)?(?P<model>[a-z]+[0-9]+)(?:-mega)?(?:-(?P<gb>[0-9]+)gb)?")


def _ints(values: list[str], label: str) -> list[int]:
    try:
        return [int(v) for v in values]
    except (TypeError, ValueError):
        raise Untranslatable(f"{label} values {values} are not whole numbers") from None


def _single_int(op: str, values: list[str], label: str) -> int:
    if len(values) != 1:
        raise Untranslatable(f"{label} {op} needs exactly one value")
    return _ints(values, label)[0]


def _product_forms(value: str) -> list[str]:
    """GFD writes the NVML name with spaces as '-'; drivers differ on the 'NVIDIA ' prefix."""
    base = value.lower()
    if base.startswith("nvidia-"):
        base = base[len("nvidia-"):]
    return [base, "nvidia-" + base]


@dataclass
class _ProductValue:
    forms: list[str]
    mig_profile: str | None
    shared: bool


def _parse_product(value: str) -> _ProductValue:
    shared = value.upper().endswith(_SHARED_SUFFIX)
    if shared:
        value = value[: -len(_SHARED_SUFFIX)]
    mig_profile = None
    match = _MIG_SUFFIX.match(value)
    if match:
        value, mig_profile = match["base"], match["profile"].lower()
    return _ProductValue(_product_forms(value), mig_profile, shared)


class LabelTranslator:
    def __init__(self, rules: MigrationRules):
        self.domain = rules.driverDomain
        self.by_label: dict[str, NodeLabelRule] = {r.label: r for r in rules.nodeLabels}
        self.mig_profiles: set[str] = set()
        self.shared: str | None = None

    def covers(self, label: str) -> bool:
        return label in self.by_label

    def keeps(self, label: str) -> bool:
        """Stays on the node as well (cloud node-pool labels: autoscalers pick pools by them)."""
        rule = self.by_label.get(label)
        return rule is not None and rule.keepOnNode

    def expression(self, label: str, op: str, values: list[str]) -> dict[str, sel.Node | None]:
        """A CEL tree per device type for one label requirement (None: nothing to select);
        Untranslatable when it has no device equivalent."""
        rule = self.by_label[label]
        values = [str(v).strip() for v in values or []]
        if rule.translate == "product":
            return self._product(label, op, values)
        if rule.translate == "string":
            return self._both(self._string(rule.attribute or "", op, values))
        if rule.translate == "gkeAccelerator":
            return self._both(self._accelerator(label, op, values))
        if rule.translate == "gpuModel":
            return self._both(self._model(label, op, values))
        if rule.translate == "migProfile":
            return self._mig_profile(label, op, values)
        if rule.translate == "sharing":
            return self._sharing(label, op, values)
        if rule.translate == "memoryMiB":
            # On a MIG node the label is the parent GPU's memory, not the MIG device's.
            return {"gpu": self._memory(rule.capacity or "", op, values, label)}
        part = "major" if rule.translate == "versionMajor" else "minor"
        return self._both(self._version(rule.attribute or "", part, op, values, label))

    def _sharing(self, label: str, op: str, values: list[str]) -> dict[str, sel.Node | None]:
        """A device plugin's sharing labels (GFD sharing-strategy / replicas, GKE's strategy and
        clients per GPU) describe the node, not a device: no selector, but the pod wants a share."""
        if op != "In":
            raise Untranslatable(f"{label} {op}: only a sharing label's value can be kept")
        for value in values:
            if value.lower() not in _NOT_SHARED and not (value.isdigit() and int(value) <= 1):
                self.shared = self.shared or f"{label}={value}"
        return {"gpu": None, "mig": None}

    @staticmethod
    def _both(expr: sel.Node) -> dict[str, sel.Node | None]:
        return {"gpu": expr, "mig": expr}

    def _presence(self, name: str, op: str) -> sel.Node | None:
        guard = sel.has_attribute(self.domain, name)
        if op == "Exists":
            return guard
        if op == "DoesNotExist":
            return sel.negate(guard)
        return None

    def _accelerator(self, label: str, op: str, values: list[str]) -> sel.Node:
        """GKE's accelerator names (nvidia-tesla-a100, nvidia-h100-80gb, nvidia-l4): the model in
        the product name and, when the name carries it, at least that memory (NVML reports a
        little under the marketing size: 80 GB is >= 80000Mi)."""
        presence = self._presence("productName", op)
        if presence:
            return presence
        if op not in ("In", "NotIn"):
            raise Untranslatable(f"{label} {op} has no device equivalent")
        tests = []
        for value in values:
            match = _GKE_ACCELERATOR.fullmatch(value.lower())
            if not match:
                raise Untranslatable(f"{label}={value} is not a GKE NVIDIA accelerator name")
            test = _names_model(sel.attribute(self.domain, "productName"), match["model"])
            if match["gb"]:
                test = sel.all_of([test, sel.memory_at_least(self.domain, f"{int(match['gb']) * 1000}Mi")])
            tests.append(test)
        expr = sel.guarded_attribute(self.domain, "productName", sel.any_of(tests))
        return sel.negate(expr) if op == "NotIn" else expr

    def _model(self, label: str, op: str, values: list[str]) -> sel.Node:
        """A GPU model name (Karpenter's instance-gpu-name: a100, h100, l4): in the product name,
        case-blind."""
        presence = self._presence("productName", op)
        if presence:
            return presence
        if op not in ("In", "NotIn") or not all(_MODEL.fullmatch(v.lower()) for v in values):
            raise Untranslatable(f"{label} {op} {values}: only In / NotIn of GPU model names translate")
        name = sel.attribute(self.domain, "productName")
        test = sel.any_of([_names_model(name, v.lower()) for v in values])
        expr = sel.guarded_attribute(self.domain, "productName", test)
        return sel.negate(expr) if op == "NotIn" else expr

    def _mig_profile(self, label: str, op: str, values: list[str]) -> dict[str, sel.Node | None]:
        """GKE's gke-gpu-partition-size: the node's GPUs are MIG-partitioned into this profile, so
        nvidia.com/gpu there means one such MIG device (as GFD's MIG product suffix does)."""
        if op != "In" or len(values) != 1 or not _MIG_PROFILE.fullmatch(values[0].lower()):
            raise Untranslatable(f"{label} {op} {values}: only In with one MIG profile (e.g. 1g.5gb) translates")
        self.mig_profiles.add(values[0].lower())
        return {"mig": None}  # the profile selector itself comes with the MIG request

    def _product(self, label: str, op: str, values: list[str]) -> dict[str, sel.Node | None]:
        presence = self._presence("productName", op)
        if presence:
            return self._both(presence)
        if op not in ("In", "NotIn"):
            raise Untranslatable(f"{label} {op} has no device equivalent")
        parsed = [_parse_product(v) for v in values]
        shared = [v for v, p in zip(values, parsed) if p.shared]
        if shared:
            self.shared = self.shared or f"{label}={shared[0]}"
        profiles = {p.mig_profile for p in parsed if p.mig_profile}
        if profiles and op == "In":
            if len(profiles) > 1 or any(p.mig_profile is None for p in parsed):
                raise Untranslatable(f"{label} mixes MIG and non-MIG products")
            self.mig_profiles |= profiles
        forms = [f for p in parsed for f in p.forms]
        dashed = build.method(sel.attribute(self.domain, "productName"), "replace", sel.string(" "), sel.string("-"))
        test = sel.member_of(sel.lowered(dashed), forms)
        if op == "NotIn":
            return self._both(sel.absent_or_not(sel.has_attribute(self.domain, "productName"), test))
        return self._both(sel.guarded_attribute(self.domain, "productName", test))

    def _string(self, attr: str, op: str, values: list[str]) -> sel.Node:
        presence = self._presence(attr, op)
        if presence:
            return presence
        if op not in ("In", "NotIn"):
            raise Untranslatable(f"{op} on a string attribute has no device equivalent")
        # A label value has no spaces: GFD writes NVML's "Ada Lovelace" as ada-lovelace.
        forms = sorted({form for v in values for form in (v.lower(), v.lower().replace("-", " "))})
        test = sel.member_of(sel.lowered(sel.attribute(self.domain, attr)), forms)
        if op == "NotIn":
            return sel.absent_or_not(sel.has_attribute(self.domain, attr), test)
        return sel.guarded_attribute(self.domain, attr, test)

    def _memory(self, cap: str, op: str, values: list[str], label: str) -> sel.Node:
        guard = sel.has_capacity(self.domain, cap)
        if op == "Exists":
            return guard
        if op == "DoesNotExist":
            return sel.negate(guard)
        value = sel.capacity(self.domain, cap)
        if op in ("Gt", "Lt"):
            amount = _single_int(op, values, label)
            return sel.all_of([guard, sel.quantity_compare(value, ">" if op == "Gt" else "<", f"{amount}Mi")])
        if op not in ("In", "NotIn"):
            raise Untranslatable(f"{label} {op} is not a label operator")
        equal = sel.any_of(sel.quantity_compare(value, "==", f"{a}Mi") for a in _ints(values, label))
        if op == "NotIn":
            return sel.absent_or_not(guard, equal)
        return sel.all_of([guard, equal])

    def _version(self, attr: str, part: str, op: str, values: list[str], label: str) -> sel.Node:
        presence = self._presence(attr, op)
        if presence:
            return presence
        value = build.method(sel.attribute(self.domain, attr), part)
        if op in ("Gt", "Lt"):
            number = _single_int(op, values, label)
            test = build.compare(">" if op == "Gt" else "<", value, build.integer(number))
        elif op in ("In", "NotIn"):
            test = build.compare("in", value, build.integers(_ints(values, label)))
            if op == "NotIn":
                return sel.absent_or_not(sel.has_attribute(self.domain, attr), test)
        else:
            raise Untranslatable(f"{label} {op} is not a label operator")
        return sel.guarded_attribute(self.domain, attr, test)
