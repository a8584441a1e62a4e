"""Does each Kueue ClusterQueue's GPU quota still count what runs? Per ClusterQueue resource R
that is a legacy GPU resource: what the queue's running pods hold of R through the device plugin,
the devices their claims hold for R, what Kueue reserves of R (its status.flavorsReservation),
and how many devices escape the queue's count (`audit`, serve's queue-budget watch). Pure.

A pod belongs to a queue through its admitted Workload (owned by the pod or by its controller:
a Job admitted from its template) or, without one, its queue-name label and LocalQueue. What
escapes, per R, is the larger of:
- per Workload, devices its pods hold beyond what its admission reserved of R (Kueue admitted
  a Job's template, then the pods came to hold more than it counted);
- for a pod Kueue admits by itself with no Workload read, claim devices of a class Kueue does not
  count as R (not mapped to R, or its DynamicResourceAllocation gate off: counted as nothing);
- over the queue, devices held beyond Kueue's whole reservation of R.
A KEP-5004 pod's claim counts: Kueue reads the pod's own request of R.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from app.common import controller_ref, count_or_none, metadata_of, view_of
from app.policy import MigrationRules

from .continuity import allocated_devices, plugin_held
from .kueue import KueueView
from .quota import KUEUE_QUEUE, kueue_per_pod
from .unmigrated import running


@dataclass
class QueueUse:
    queue: str  # the ClusterQueue
    resource: str
    quota: int  # nominalQuota of R over the queue's flavors
    plugin: int = 0
    dra: int = 0
    reserved: int | None = None  # Kueue's flavorsReservation of R; None: its status was not read
    escaped: int = 0
    escaped_classes: list[str] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    @property
    def problem(self) -> str | None:
        if not self.escaped:
            return None
        reserved = "" if self.reserved is None else f", Kueue reserves {self.reserved}"
        classes = f" of DeviceClass {', '.join(self.escaped_classes)}" if self.escaped_classes else ""
        return (f"ClusterQueue {self.queue} limits {self.resource} ({self.quota}) but does not count {self.escaped} "
                f"device(s){classes} its pods hold: {self.plugin + self.dra} in use{reserved} (`dra-bridge quota` "
                "proposes Kueue's deviceClassMappings and DRA gate)")



def _quotas(queue: dict, resources: set[str] | None = None) -> dict[str, int]:
    """R -> nominalQuota over the queue's flavors (of `resources` only, where given)."""
    out: dict[str, int] = {}
    for group in ((queue.get("spec") or {}).get("resourceGroups") or []):
        for flavor in (group.get("flavors") or []) if isinstance(group, dict) else []:
            for entry in (flavor.get("resources") or []) if isinstance(flavor, dict) else []:
                name = str((entry or {}).get("name"))
                if resources is None or name in resources:
                    out[name] = out.get(name, 0) + (count_or_none(entry.get("nominalQuota")) or 0)
    return out


def _reserved(queue: dict) -> dict[str, int] | None:
    status = queue.get("status")
    if not isinstance(status, dict):
        return None
    out: dict[str, int] = {}
    for flavor in status.get("flavorsReservation") or []:
        for entry in (flavor.get("resources") or []) if isinstance(flavor, dict) else []:
            name = str((entry or {}).get("name"))
            out[name] = out.get(name, 0) + (count_or_none(entry.get("total")) or 0)
    return out


@dataclass
class _Admitted:
    queue: str
    key: str  # namespace/name of the Workload
    reserved: dict[str, int]


def _admitted(workloads: Iterable[dict]) -> dict[str, _Admitted]:
    """Owner uid -> the admitted Workload it owns (a Job's, or one per pod Kueue admits itself)."""
    out: dict[str, _Admitted] = {}
    for workload in workloads:
        admission = (workload.get("status") or {}).get("admission") or {}
        if not admission.get("clusterQueue"):
            continue
        meta = metadata_of(workload)
        reserved: dict[str, int] = {}
        for assignment in admission.get("podSetAssignments") or []:
            for name, value in ((assignment or {}).get("resourceUsage") or {}).items():
                reserved[name] = reserved.get(name, 0) + (count_or_none(value) or 0)
        found = _Admitted(str(admission["clusterQueue"]), f"{meta.get('namespace', '')}/{meta.get('name', '')}",
                          reserved)
        for owner in meta.get("ownerReferences") or []:
            if isinstance(owner, dict) and owner.get("uid"):
                out[str(owner["uid"])] = found
    return out


def _claim_names(pod: dict) -> set[str]:
    """The claims a pod uses: named, generated from its templates, or made for its extended resources."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    names = {str(c["resourceClaimName"]) for c in spec.get("resourceClaims") or []
             if isinstance(c, dict) and c.get("resourceClaimName")}
    names |= {str(c["resourceClaimName"]) for c in status.get("resourceClaimStatuses") or []
              if isinstance(c, dict) and c.get("resourceClaimName")}
    return names | _extended_claim(pod)


def _extended_claim(pod: dict) -> set[str]:
    name = ((pod.get("status") or {}).get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    return {str(name)} if name else set()


class _Counter:
    """Adds up one queue's use of its GPU resources, pod by pod."""

    def __init__(self, uses: dict[str, QueueUse], classes_of: Mapping[str, set[str]],
                 kueue_counts, claims: Mapping[tuple[str, str], dict]):
        self.uses, self.classes_of, self.kueue_counts, self.claims = uses, classes_of, kueue_counts, claims
        self.seen: set[tuple[str, str]] = set()  # a claim pods share holds its devices once
        # Workload -> (its admission, R -> held, R -> classes its claims hold R through)
        self.by_workload: dict[str, tuple[_Admitted, dict[str, int], dict[str, set[str]]]] = {}
        self.namespaces: set[str] = set()

    def add(self, pod: dict, admitted: _Admitted | None) -> None:
        namespace = view_of(pod).namespace
        held: dict[str, int] = {}
        through: dict[str, set[str]] = {}
        for resource, use in self.uses.items():
            held[resource] = plugin_held(pod, resource)
            use.plugin += held[resource]
        extended = _extended_claim(pod)
        for name in sorted(_claim_names(pod)):
            key = (namespace, name)
            if key in self.seen or key not in self.claims:
                continue
            self.seen.add(key)
            for cls, devices in allocated_devices(self.claims[key]).items():
                for resource, use in self.uses.items():
                    if cls not in self.classes_of[resource]:
                        continue
                    use.dra += devices
                    held[resource] += devices
                    through.setdefault(resource, set()).add(cls)
                    uncounted = name not in extended and not self.kueue_counts(cls, resource)
                    if admitted is None and kueue_per_pod(pod) and uncounted:
                        use.escaped += devices
                        if cls not in use.escaped_classes:
                            use.escaped_classes.append(cls)
                    break
        self.namespaces.add(namespace)
        if admitted is not None:
            entry = self.by_workload.setdefault(admitted.key, (admitted, {}, {}))
            for resource, devices in held.items():
                entry[1][resource] = entry[1].get(resource, 0) + devices
                entry[2].setdefault(resource, set()).update(through.get(resource, ()))

    def finish(self) -> None:
        beyond = {r: 0 for r in self.uses}
        for admitted, held, through in self.by_workload.values():
            for resource, devices in held.items():
                over = max(0, devices - admitted.reserved.get(resource, 0))
                beyond[resource] += over
                use = self.uses[resource]
                use.escaped_classes += sorted(through.get(resource, set()) - set(use.escaped_classes)) if over else []
        for resource, use in self.uses.items():
            over_queue = max(0, use.plugin + use.dra - use.reserved) if use.reserved is not None else 0
            use.escaped = max(use.escaped + beyond[resource], over_queue)
            use.namespaces = sorted(self.namespaces)


def queue_use(cluster_queues: list[dict], local_queues: list[dict], workloads: list[dict], pods: list[dict],
              claims: list[dict], rules: MigrationRules, extended: Mapping[str, str],
              view: KueueView | None, listed: Iterable[str] = ()) -> list[QueueUse]:
    """One entry per ClusterQueue resource that is a legacy GPU resource (rules: count roles).
    extended: DeviceClass -> its extendedResourceName; view: Kueue's configuration as read (None:
    not read: `listed`, the policy's migration.kueueDeviceClasses, are taken as counted)."""
    listed = set(listed)

    def kueue_counts(cls: str, resource: str) -> bool:
        if view is None:
            return cls in listed
        return view.dra_gate and view.mappings.get(cls) == resource

    gpu = {}
    for queue in cluster_queues:
        for resource in _quotas(queue):
            found = rules.rule_for(resource)
            if found is not None and found[0].role in ("count", "countPercent"):
                gpu[resource] = found[0].deviceClass
    classes_of = {r: {c for c, x in extended.items() if x == r} | ({cls} if cls else set()) |
                  {c for c, x in (view.mappings if view else {}).items() if x == r} for r, cls in gpu.items()}
    local = {(view_of(q).namespace, view_of(q).name):
             str((q.get("spec") or {}).get("clusterQueue") or "") for q in local_queues}
    admitted = _admitted(workloads)
    by_claim = {(view_of(c).namespace, view_of(c).name): c for c in claims}
    counters: dict[str, _Counter] = {}
    out: list[QueueUse] = []
    for queue in cluster_queues:
        name = view_of(queue).name
        quotas, reserved = _quotas(queue, set(gpu)), _reserved(queue)
        if not quotas:
            continue
        uses = {r: QueueUse(name, r, q, reserved=None if reserved is None else reserved.get(r, 0))
                for r, q in sorted(quotas.items())}
        counters[name] = _Counter(uses, classes_of, kueue_counts, by_claim)
        out.extend(uses.values())
    for pod in pods:
        if not running(pod):
            continue
        workload = admitted.get(str(view_of(pod).uid)) or \
            admitted.get(str((controller_ref(pod) or {}).get("uid")))
        queue_name = workload.queue if workload else local.get((view_of(pod).namespace, _label(pod)))
        if queue_name in counters:
            counters[queue_name].add(pod, workload)
    for counter in counters.values():
        counter.finish()
    return out


def _label(pod: dict) -> str:
    return str(view_of(pod).labels.get(KUEUE_QUEUE, ""))
