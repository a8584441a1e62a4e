"""Device inventory from ResourceSlices and DeviceClasses (plain data in, plain data out)."""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources

from app.documents import parse_objects, read_objects
from app.errors import InputError

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


def load_file(path: str) -> Inventory:
    return from_objects(read_objects(path), path)


def load_example() -> Inventory:
    text = resources.files("app").joinpath("data/example-inventory.yaml").read_text("utf-8")
    return from_objects(parse_objects(text, "example-inventory.yaml"), "bundled example inventory")
