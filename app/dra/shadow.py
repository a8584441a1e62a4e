"""Shadow slices judged as the devices they stand for. Pure.

Our reporter's shadow mode publishes a node's GPUs under a driver no DeviceClass selects
(`shadow.gpu.dra-bridge.io`), so the scheduler never allocates them, with the label
`dra-bridge.io/shadow-of: gpu.nvidia.com` and NVIDIA's attribute names qualified by its domain.
The validator reads such a slice as the driver named in the label would publish it: that
driver's name, its own domain's names unqualified. DeviceClasses and claims written for
NVIDIA's driver then judge shadow devices exactly as they would judge NVIDIA's; no selector is
weakened. Where the real driver publishes for a node, its slices win and the node's shadow
slices are ignored.
"""

from __future__ import annotations

from app.common import SHADOW_OF as SHADOW_LABEL
from app.common import view_of


def shadow_of(s: dict) -> str | None:
    value = view_of(s).labels.get(SHADOW_LABEL)
    return value if isinstance(value, str) and value else None


def _unqualified(names: dict, domain: str) -> dict:
    prefix = domain + "/"
    return {(k[len(prefix):] if isinstance(k, str) and k.startswith(prefix) else k): v for k, v in names.items()}


def as_served(s: dict) -> dict:
    """The slice as the driver it stands for would publish it (unchanged when not a shadow)."""
    driver = shadow_of(s)
    spec = s.get("spec")
    if driver is None or not isinstance(spec, dict):
        return s
    devices = []
    for device in spec.get("devices") or []:
        if isinstance(device, dict):
            device = dict(device)
            for key in ("attributes", "capacity"):
                if isinstance(device.get(key), dict):
                    device[key] = _unqualified(device[key], driver)
        devices.append(device)
    return {**s, "spec": {**spec, "driver": driver, "devices": devices}}
