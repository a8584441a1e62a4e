"""Does each GPU budget still count what runs? Per ResourceQuota limit on a legacy GPU resource
R: the R that running pods hold on the device plugin, the devices claims hold for R (claims of
the DeviceClass the planner maps R to, or of one declaring R), and how many of those the quota
counts under none of its keys: escaped; and whether the quota's `status.used` charges more under
requests.R than its pods and claims ask for: a GPU charged twice (`audit`). Pure.

Counted, as Kubernetes 1.37's quota evaluator does: a claim of class C under `requests.R` when C
declares `extendedResourceName: R`, and under `C.deviceclass.resource.k8s.io/devices` always."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from app.common import allocation_results, count_or_none, metadata_of, view_of
from app.policy import MigrationRules

from .quota import counted_by
from .quota_charge import charged, pod_charge
from .unmigrated import running


@dataclass
class BudgetUse:
    namespace: str
    quota: str
    key: str  # requests.<resource>
    limit: str
    plugin: int = 0  # held by running pods through the device plugin
    dra: int = 0  # held by allocated claims for the same resource
    escaped: int = 0  # of `dra`, counted under none of the quota's keys
    escaped_classes: list[str] = field(default_factory=list)
    used: int | None = None  # the quota's status.used of `key`; None: not read
    charged: int = 0  # what its pods and claims are charged under `key` (migration.quota_charge)

    @property
    def twice(self) -> int:
        """Of `used`, what no pod or claim asks for: one GPU charged twice."""
        return max(0, self.used - self.charged) if self.used is not None else 0

    @property
    def twice_problem(self) -> str | None:
        if not self.twice:
            return None
        return (f"ResourceQuota {self.namespace}/{self.quota} charges {self.used} under {self.key} but its pods "
                f"and claims ask for {self.charged}: {self.twice} GPU(s) counted twice (a KEP-5004 pod and the "
                "claim made for it both charged; or a pod just deleted that the quota controller has not released "
                "yet: audit again)")

    @property
    def over(self) -> int:
        """GPUs held beyond the limit, on both sides together."""
        limit = count_or_none(self.limit)
        return max(0, self.plugin + self.dra - limit) if limit is not None else 0

    @property
    def over_problem(self) -> str | None:
        if not self.over or self.escaped:
            return None  # an escape says it already, with its cause
        return (f"ResourceQuota {self.namespace}/{self.quota} limits {self.key} to {self.limit} but its pods hold "
                f"{self.plugin + self.dra} (device plugin {self.plugin}, DRA {self.dra}): the limit was lowered "
                "below what runs, or admission and the quota controller raced (quota is eventually consistent)")

    @property
    def problem(self) -> str | None:
        if not self.escaped:
            return None
        return (f"ResourceQuota {self.namespace}/{self.quota} limits {self.key} ({self.limit}) but does not count "
                f"{self.escaped} device(s) of DeviceClass {', '.join(self.escaped_classes)} that claims hold for it"
                + (f": {self.plugin + self.dra} in use against {self.limit}" if self.over else "")
                + " (`dra-bridge quota` proposes the keys)")


def _class_of(claim: dict, request: str) -> str | None:
    base, _, sub = str(request).partition("/")
    for req in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        if not isinstance(req, dict) or req.get("name") != base:
            continue
        if sub:
            found = [a for a in req.get("firstAvailable") or [] if isinstance(a, dict) and a.get("name") == sub]
            return found[0].get("deviceClassName") if found else None
        return (req.get("exactly") or {}).get("deviceClassName")
    return None


def allocated_devices(claim: dict) -> dict[str, int]:
    """DeviceClass -> devices an allocated claim holds (none while it is not allocated)."""
    out: dict[str, int] = {}
    for result in allocation_results(claim):
        cls = _class_of(claim, result.get("request", ""))
        if cls:
            out[cls] = out.get(cls, 0) + 1
    return out


def _held(claims: list[dict]) -> dict[str, dict[str, int]]:
    """namespace -> DeviceClass -> devices allocated claims hold."""
    out: dict[str, dict[str, int]] = {}
    for claim in claims:
        by_class = out.setdefault(view_of(claim).namespace, {})
        for cls, devices in allocated_devices(claim).items():
            by_class[cls] = by_class.get(cls, 0) + devices
    return out


def plugin_held(pod: dict, resource: str) -> int:
    """The resource a running pod holds through the device plugin (0 for a KEP-5004 pod, which
    a claim serves, for one finished or being deleted, and for one not bound to a node: a pod
    Kueue gates holds nothing yet)."""
    spec = pod.get("spec") or {}
    if not running(pod) or not spec.get("nodeName") or (pod.get("status") or {}).get("extendedResourceClaimStatus"):
        return 0
    return pod_charge(pod, resource)  # the kubelet's device manager, too, gives init containers theirs


def _plugin_held(pods: list[dict], resource: str) -> dict[str, int]:
    """namespace -> R running pods hold through the device plugin."""
    out: dict[str, int] = {}
    for pod in pods:
        total = plugin_held(pod, resource)
        if total:
            namespace = view_of(pod).namespace
            out[namespace] = out.get(namespace, 0) + total
    return out


def quota_use(quotas: list[dict], pods: list[dict], claims: list[dict], rules: MigrationRules,
              extended: Mapping[str, str]) -> list[BudgetUse]:
    """One entry per ResourceQuota limit on a legacy GPU resource."""
    held = _held(claims)
    # Per resource, namespace -> its sum: each read once, not once per quota.
    plugin: dict[str, dict[str, int]] = {}
    charges: dict[str, dict[str, int]] = {}
    # A namespace whose pods were not read (an export without them) is not judged for twice.
    read = {view_of(p).namespace for p in pods}
    out = []
    for quota in quotas:
        meta = metadata_of(quota)
        hard = (quota.get("spec") or {}).get("hard") or {}
        for key, limit in hard.items() if isinstance(hard, dict) else ():
            resource = str(key)[len("requests."):] if str(key).startswith("requests.") else ""
            found = rules.rule_for(resource) if resource else None
            if found is None or found[0].role not in ("count", "countPercent"):
                continue
            classes = {c for c, r in extended.items() if r == resource} | ({found[0].deviceClass} - {None, ""})
            if resource not in plugin:
                plugin[resource] = _plugin_held(pods, resource)
            use = BudgetUse(meta.get("namespace", ""), meta.get("name", ""), str(key), str(limit),
                            plugin=plugin[resource].get(meta.get("namespace", ""), 0))
            for cls, devices in sorted(held.get(use.namespace, {}).items()):
                if cls not in classes:
                    continue
                use.dra += devices
                if counted_by(hard, resource, cls, extended) is None:
                    use.escaped += devices
                    use.escaped_classes.append(cls)
            used = ((quota.get("status") or {}).get("used") or {}).get(key)
            if used is not None and use.namespace in read:
                if resource not in charges:
                    charges[resource] = charged(pods, claims, resource, extended)
                use.used, use.charged = count_or_none(used), charges[resource].get(use.namespace, 0)
            out.append(use)
    return out
