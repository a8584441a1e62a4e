"""Device inventory from ResourceSlices, DeviceClasses and allocated claims. Pure: plain data in and out."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

from app.common.release import Release
from app.common import (InputError, submap, add_quota, allocation_results, extended_allocatable, leaving_dra, not_ready,
                        parse_quantity, view_of)

SUPPORTED = "resource.k8s.io/v1"
INVENTORY_KINDS = ("ResourceSlice", "DeviceClass", "ResourceClaim", "DeviceTaintRule")


@dataclass
class Inventory:
    slices: list[dict] = field(default_factory=list)
    classes: dict[str, dict] = field(default_factory=dict)
    source: str = ""
    nodes: dict[str, dict] | None = None  # node name -> labels; None: no Node objects were read
    # node name -> extended resource -> allocatable count (the device plugin's view); None: not read
    node_resources: dict[str, dict[str, int]] | None = None
    cordoned: frozenset = frozenset()  # nodes with spec.unschedulable: no new pod lands there
    not_ready: frozenset = frozenset()  # nodes whose kubelet reports them not Ready: their status is stale
    leaving: frozenset = frozenset()  # nodes a rollout undo is taking off DRA (common.leaving_dra)
    # namespace -> [(ResourceQuota name, hard limits on devices)]; None: no quotas were read
    quotas: dict[str, list[tuple[str, dict]]] | None = None
    # What an export (`kubectl get resourceslices,deviceclasses,resourceclaims,devicetaintrules,
    # nodes,namespaces -A -o yaml`) says beyond devices: claims holding devices (None: none read),
    # namespace labels (the admin-access rule), taints DeviceTaintRules put on devices.
    claims: list[dict] | None = None
    namespaces: dict[str, dict] | None = None
    taint_rules: list[dict] = field(default_factory=list)
    priority_classes: list[dict] | None = None  # what pods preempt by (None: none read)
    release: Release | None = None  # judged by (its allocator's rules); None: the default

    @property
    def device_count(self) -> int:
        return sum(len((s.get("spec") or {}).get("devices") or []) for s in self.slices)


def from_objects(objects: list[tuple[int, dict]], source: str) -> Inventory:
    inv = Inventory(source=source)
    for line, obj in objects:
        kind = obj.get("kind")
        where = f"{source}:{line}" if line else source
        if kind == "Node" and obj.get("apiVersion") == "v1":
            metadata = submap(obj, "metadata")
            if not isinstance(metadata.get("name"), str) or not isinstance(metadata.get("labels") or {}, dict):
                raise InputError(f"{where}.metadata", "a Node needs a name and labels as a map")
            inv.nodes = {**(inv.nodes or {}), metadata["name"]: dict(metadata.get("labels") or {})}
            inv.node_resources = {**(inv.node_resources or {}), metadata["name"]: extended_allocatable(obj)}
            if (obj.get("spec") or {}).get("unschedulable"):
                inv.cordoned = inv.cordoned | {metadata["name"]}
            if not_ready(obj):
                inv.not_ready = inv.not_ready | {metadata["name"]}
            if leaving_dra(obj):
                inv.leaving = inv.leaving | {metadata["name"]}
            continue
        if kind == "ResourceQuota" and obj.get("apiVersion") == "v1":
            inv.quotas = inv.quotas if inv.quotas is not None else {}
            add_quota(inv.quotas, obj)
            continue
        if kind == "PriorityClass" and obj.get("apiVersion") == "scheduling.k8s.io/v1":
            inv.priority_classes = [*(inv.priority_classes or []), obj]
            continue
        if kind == "Namespace" and obj.get("apiVersion") == "v1":
            metadata = submap(obj, "metadata")
            labels = metadata.get("labels") or {}
            if not isinstance(metadata.get("name"), str) or not isinstance(labels, dict):
                raise InputError(f"{where}.metadata", "a Namespace needs a name and labels as a map")
            inv.namespaces = {**(inv.namespaces or {}), metadata["name"]: dict(labels)}
            continue
        if kind not in INVENTORY_KINDS:
            continue
        if obj.get("apiVersion") != SUPPORTED:
            raise InputError(where, f"{kind} apiVersion {obj.get('apiVersion')!r} is not supported; "
                                    f"export it as {SUPPORTED} (kubectl get {kind.lower()}s.v1.resource.k8s.io -o yaml)")
        name = view_of(obj).name
        if not name:
            raise InputError(f"{where}.metadata.name", "missing")
        if kind == "DeviceClass":
            inv.classes[name] = obj
        elif kind == "ResourceClaim":
            inv.claims = (inv.claims or []) + [_allocation_of(obj, where)]
        elif kind == "DeviceTaintRule":
            inv.taint_rules.append(taint_rule(obj, where))
        else:
            devices = (obj.get("spec") or {}).get("devices")
            if devices is not None and not isinstance(devices, list):
                raise InputError(f"{where}.spec.devices", "must be a list")
            inv.slices.append(obj)
    return inv


def _allocation_of(claim: dict, where: str) -> dict:
    """What a claim holds (its allocation results): all the index needs of it."""
    results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")) or []
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise InputError(f"{where}.status.allocation.devices.results", "must be a list of results")
    return {"status": {"allocation": {"devices": {"results": results}}}} if results else {}


def taint_rule(rule: dict, where: str) -> dict:
    """What the index needs of a DeviceTaintRule: {selector, taint}."""
    spec = submap(rule, "spec")
    taint = spec.get("taint")
    if not isinstance(taint, dict) or not isinstance(taint.get("key"), str):
        raise InputError(f"{where}.spec.taint", "a DeviceTaintRule needs a taint with a key")
    selector = spec.get("deviceSelector")
    if selector is not None and not isinstance(selector, dict):
        raise InputError(f"{where}.spec.deviceSelector", "must be a map")
    return {"selector": selector, "taint": taint}


def apply_taint_rules(s: dict, rules: list[dict]) -> dict:
    """The slice with the taints of the DeviceTaintRules that select its devices, as if its
    driver had published them (upstream: an absent selector selects no device, an empty one
    every device; driver, pool and device narrow it)."""
    if not rules or not isinstance(s.get("spec"), dict):
        return s
    spec = s["spec"]
    pool = (spec.get("pool") or {}).get("name")
    devices, changed = [], False
    for device in spec.get("devices") or []:
        added = [r["taint"] for r in rules if isinstance(device, dict)
                 and rule_selects(r["selector"], spec.get("driver"), pool, device.get("name"))]
        if added:
            device = {**device, "taints": list(device.get("taints") or []) + added}
            changed = True
        devices.append(device)
    return {**s, "spec": {**spec, "devices": devices}} if changed else s


def rule_selects(selector: dict | None, driver, pool, device) -> bool:
    """Whether a DeviceTaintRule's deviceSelector selects the device."""
    if selector is None:
        return False
    return all(selector.get(field) in (None, value) for field, value in
               (("driver", driver), ("pool", pool), ("device", device)))


def _results(claims: list[dict]):
    for claim in claims:
        yield from allocation_results(claim)


def allocated_devices(claims: list[dict]) -> set[tuple]:
    """(driver, pool, device) of every device allocated whole to a claim; admin access allocates
    nothing, and a share of a device that allows multiple allocations (shareID) is not the whole."""
    return {(r.get("driver"), r.get("pool"), r.get("device")) for r in _results(claims)
            if not r.get("adminAccess") and not r.get("shareID")}


def shared_devices(claims: list[dict]) -> set[tuple]:
    """Devices with at least one share allocated (their counters are already charged)."""
    return {(r.get("driver"), r.get("pool"), r.get("device")) for r in _results(claims)
            if not r.get("adminAccess") and r.get("shareID")}


def allocated_capacity(claims: list[dict]) -> dict[tuple, dict[str, Decimal]]:
    """Capacity consumed by the shares allocated so far, summed per device and capacity name."""
    out: dict[tuple, dict[str, Decimal]] = {}
    for r in _results(claims):
        if r.get("adminAccess") or not r.get("shareID") or not isinstance(r.get("consumedCapacity"), dict):
            continue
        used = out.setdefault((r.get("driver"), r.get("pool"), r.get("device")), {})
        for name, amount in r["consumedCapacity"].items():
            try:
                used[name] = used.get(name, Decimal(0)) + parse_quantity(amount)
            except ValueError:
                continue  # the API server validated it; a value we cannot read charges nothing
    return out
