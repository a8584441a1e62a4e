"""DeviceClasses for the native path (KEP-5004): a class per extended resource the inventory can
serve, `nvidia.com/gpu` for whole GPUs and `nvidia.com/mig-<profile>` for each MIG profile the
ResourceSlices publish. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.cel import build
from app.common import vocabulary

from .inventory import Inventory

SUFFIX = "extended.dra-bridge.io"


class ClassConflict(Exception):
    """Two DeviceClasses claim one extended resource name: which serves a pod is not defined."""


@dataclass
class Generated:
    classes: list[dict] = field(default_factory=list)
    kept: dict[str, str] = field(default_factory=dict)  # resource -> existing class that serves it


def claimed(classes: dict[str, dict]) -> dict[str, list[str]]:
    """extendedResourceName -> the classes that set it."""
    out: dict[str, list[str]] = {}
    for name in sorted(classes):
        spec = (classes[name] or {}).get("spec")
        resource = spec.get("extendedResourceName") if isinstance(spec, dict) else None
        if isinstance(resource, str) and resource:
            out.setdefault(resource, []).append(name)
    return out


def _profiles(inventory: Inventory, driver: str) -> list[str]:
    seen = set()
    for s in inventory.slices:
        spec = s.get("spec") if isinstance(s, dict) else None
        if not isinstance(spec, dict) or spec.get("driver") != driver:
            continue
        for device in spec.get("devices") or []:
            attributes = (device or {}).get("attributes") or {} if isinstance(device, dict) else {}
            kind = _attribute(attributes, driver, "type")
            profile = _attribute(attributes, driver, "profile")
            if kind == "mig" and isinstance(profile, str) and profile:
                seen.add(profile)
    return sorted(seen)


def _attribute(attributes: dict, driver: str, name: str):
    raw = attributes.get(name, attributes.get(f"{driver}/{name}"))
    return raw.get("string") if isinstance(raw, dict) else None


def _device_class(name: str, resource: str, expression: str) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name, "labels": dict(vocabulary.MANAGED_BY)},
            "spec": {"extendedResourceName": resource, "selectors": [{"cel": {"expression": expression}}]}}


def _selects(driver: str, **attributes: str) -> str:
    """`device.driver == D && device.attributes[D].k == v ...`, built as a tree: a profile name a
    slice publishes can never change the expression's shape."""
    device = build.ident("device")
    published = build.index(build.field(device, "attributes"), build.string(driver))
    return build.text(build.all_of([build.compare("==", build.field(device, "driver"), build.string(driver)),
                                    *(build.compare("==", build.field(published, k), build.string(v))
                                      for k, v in attributes.items())]))


def generate(inventory: Inventory, driver: str = vocabulary.NVIDIA_DRIVER) -> Generated:
    """The classes to create; ClassConflict when the inventory's own classes already claim one
    name twice (fix that first: the scheduler would pick one of them)."""
    existing = claimed(inventory.classes)
    twice = {r: names for r, names in existing.items() if len(names) > 1}
    if twice:
        resource, names = sorted(twice.items())[0]
        raise ClassConflict(f"DeviceClasses {', '.join(names)} all set extendedResourceName {resource}: "
                            "keep one")
    wanted = [("nvidia.com/gpu", f"gpu.{SUFFIX}", _selects(driver, type="gpu"))]
    for profile in _profiles(inventory, driver):
        wanted.append((f"nvidia.com/mig-{profile}", f"mig-{profile}.{SUFFIX}", _selects(driver, type="mig",
                                                                                       profile=profile)))
    out = Generated()
    for resource, name, expression in wanted:
        if resource in existing:
            out.kept[resource] = existing[resource][0]
            continue
        out.classes.append(_device_class(name, resource, expression))
    return out


def native_gaps(classes: dict[str, dict], asked: set[str], driver: str = vocabulary.NVIDIA_DRIVER) -> list[str]:
    """Why pods asking `asked` (extended resources) are never served natively: a DeviceClass
    selects the driver's devices but declares no extendedResourceName for them (NVIDIA's GPU
    Operator renders gpu.nvidia.com so). One line per resource, with the fix."""
    served = claimed(classes)
    selecting = sorted(name for name, c in classes.items()
                       if not ((c or {}).get("spec") or {}).get("extendedResourceName") and _names_driver(c, driver))
    if not selecting:
        return []  # no class for the driver at all: nothing to name
    return [f"{resource}: DeviceClass {', '.join(selecting)} selects {driver} devices but no DeviceClass declares "
            f"extendedResourceName {resource}, so pods asking it are never served natively (KEP-5004); "
            "`dra-bridge classes --inventory live` prints one that does"
            for resource in sorted(asked) if resource not in served and
            (resource == "nvidia.com/gpu" or resource.startswith("nvidia.com/mig-"))]


def _names_driver(device_class: dict, driver: str) -> bool:
    selectors = ((device_class or {}).get("spec") or {}).get("selectors") or []
    return any(driver in str((sel or {}).get("cel", {}).get("expression", "")) for sel in selectors
               if isinstance(sel, dict))
