"""Device inventory from ResourceSlices, DeviceClasses and allocated claims. Pure: plain data in and out."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.common import InputError

SUPPORTED = "resource.k8s.io/v1"
INVENTORY_KINDS = ("ResourceSlice", "DeviceClass")


@dataclass
class Inventory:
    slices: list[dict] = field(default_factory=list)
    classes: dict[str, dict] = field(default_factory=dict)
    source: str = ""

    @property
    def device_count(self) -> int:
        return sum(len((s.get("spec") or {}).get("devices") or []) for s in self.slices)


def from_objects(objects: list[tuple[int, dict]], source: str) -> Inventory:
    inv = Inventory(source=source)
    for line, obj in objects:
        kind = obj.get("kind")
        if kind not in INVENTORY_KINDS:
            continue
        where = f"{source}:{line}" if line else source
        if obj.get("apiVersion") != SUPPORTED:
            raise InputError(where, f"{kind} apiVersion {obj.get('apiVersion')!r} is not supported; "
                                    f"export it as {SUPPORTED} (kubectl get {kind.lower()}s.v1.resource.k8s.io -o yaml)")
        name = (obj.get("metadata") or {}).get("name")
        if not isinstance(name, str) or not name:
            raise InputError(f"{where}.metadata.name", "missing")
        if kind == "DeviceClass":
            inv.classes[name] = obj
        else:
            devices = (obj.get("spec") or {}).get("devices")
            if devices is not None and not isinstance(devices, list):
                raise InputError(f"{where}.spec.devices", "must be a list")
            inv.slices.append(obj)
    return inv


def allocated_devices(claims: list[dict]) -> set[tuple]:
    """(driver, pool, device) of every device allocated to a claim; admin access allocates nothing."""
    out = set()
    for claim in claims:
        results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")) or []
        for r in results:
            if not r.get("adminAccess"):
                out.add((r.get("driver"), r.get("pool"), r.get("device")))
    return out
