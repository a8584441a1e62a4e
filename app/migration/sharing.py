"""A pod's share of a GPU kept in DRA (ARCHITECTURE "Sharing and topology keep their meaning"). Pure.

In order of preference: consumable capacity on devices that allow multiple allocations (the
inventory says which); NVIDIA's sharing config (MPS limits or time-slicing) on a whole device;
a whole device with a warning naming what the pod had and what it now costs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal

from app.common import format_mebibytes
from app.policy import SharingRule

from . import cel_selectors as sel

MEBIBYTE = Decimal(1024 * 1024)
# firstAvailable holds at most 8 subrequests: one per memory size and the whole-device one.
MAX_SIZES = 7
SHARED_SELECTOR = "device.allowMultipleAllocations"


@dataclass(frozen=True)
class ShareableDevices:
    """Devices of one DeviceClass that allow multiple allocations."""

    capacities: frozenset[str]  # capacity names every one of them publishes
    memory: tuple[Decimal, ...] = ()  # their distinct memory capacities, bytes


@dataclass(frozen=True)
class ClusterSharing:
    """What the inventory says about sharing: shareable devices per class, and why plain GPU
    requests are shares here (every GPU node time-sliced by the device plugin), if they are."""

    classes: Mapping[str, ShareableDevices] = field(default_factory=dict)
    time_sliced: str | None = None


@dataclass
class Share:
    """What one container asked for of a device, beyond whole devices."""

    memory: Decimal | None = None  # bytes
    memory_percent: Decimal | None = None
    cores: Decimal | None = None  # percent of compute
    replicas: str | None = None  # time-slicing replicas: why this is a share
    had: list[str] = field(default_factory=list)  # the pod's own words, for messages

    def __bool__(self) -> bool:
        return any(v is not None for v in (self.memory, self.memory_percent, self.cores, self.replicas))

    def key(self) -> tuple:
        return (self.memory, self.memory_percent, self.cores, bool(self.replicas))


@dataclass
class SharePlan:
    variants: list[tuple[str, list[str], dict]] = field(default_factory=list)  # (name, selectors, capacity)
    whole: bool = True  # a whole-device alternative (last, or the only one)
    config: dict | None = None  # NVIDIA GpuConfig sharing for the whole device
    notes: list[str] = field(default_factory=list)


class Unkept(Exception):
    """The share cannot be kept and policy says not to give a whole device instead."""


def plan_share(share: Share, container: str, count: int, device_class: str, device_type: str,
               rule: SharingRule, cluster: ClusterSharing | None, domain: str, fractional: str) -> SharePlan:
    """fractional (policy): only wholeDevice lets a share fall back to a whole device where no
    shareable device has room; skip refuses a share no device can keep; legacy plans it whole
    (the path choice then leaves the pod on the device plugin, saying what it would cost)."""
    had = ", ".join(share.had)
    out = SharePlan()
    devices = cluster.classes.get(device_class) if cluster is not None and rule.capacity else None
    lost: list[str] = []
    if devices is not None:
        out.variants, lost = _capacity_variants(share, devices, rule, domain)
    if out.variants:
        skip = fractional != "wholeDevice"
        if skip:
            out.whole = False
        else:
            out.config, _ = _config(share, rule, device_type)
        fallback = "" if skip else (" or, when none has room, a whole device" +
                                    (" under NVIDIA's sharing config" if out.config else ""))
        out.notes.append(f"container {container}: its GPU share ({had}) becomes consumable capacity on "
                         f"{device_class} devices that allow multiple allocations{fallback}")
        if lost:
            out.notes.append(f"container {container}: {' and '.join(lost)} of the share not enforced: "
                             "the shareable devices publish no capacity for it")
        return out
    if fractional == "skip":
        raise Unkept(f"container {container} asks for a share of a GPU ({had}), no device here allows "
                     "multiple allocations, and policy fractional is skip")
    out.config, config_lost = _config(share, rule, device_type)
    cost = f"now costs {count} whole device(s)"
    if out.config:
        kept = f"; NVIDIA's {out.config['strategy']} config on it enforces {_enforced(out.config)}"
        if config_lost:
            kept += f" ({' and '.join(config_lost)} not enforced)"
        out.notes.append(f"container {container}: its GPU share ({had}) {cost}: no {device_class} device "
                         f"in the inventory allows multiple allocations{kept}")
    else:
        out.notes.append(f"container {container}: its GPU share ({had}) {cost}: no {device_class} device "
                         "in the inventory allows multiple allocations (consumable capacity), and policy "
                         "migration.sharing.config is none (mps or timeSlicing keep limits on a whole GPU)")
    return out


def _capacity_variants(share: Share, devices: ShareableDevices, rule: SharingRule,
                       domain: str) -> tuple[list, list[str]]:
    requests: dict[str, str] = {}
    lost: list[str] = []
    has_memory = rule.memoryCapacity in devices.capacities
    if share.memory is not None:
        if has_memory:
            requests[rule.memoryCapacity] = format_mebibytes(share.memory)
        else:
            lost.append("memory")
    if share.cores is not None:
        if rule.coresCapacity in devices.capacities:
            requests[rule.coresCapacity] = _plain(share.cores)
        else:
            lost.append("cores")
    if share.memory_percent is None or share.memory is not None:
        return [("shared", [SHARED_SELECTOR], requests)], lost
    if not has_memory or not devices.memory or len(devices.memory) > MAX_SIZES:
        return [("shared", [SHARED_SELECTOR], requests)], lost + ["memory percentage"]
    # A percentage of memory is a different amount on each memory size: one alternative per size.
    variants = []
    for i, size in enumerate(devices.memory):
        amount = (size * share.memory_percent / 100 / MEBIBYTE).to_integral_value(ROUND_CEILING) * MEBIBYTE
        same_size = sel.text(sel.guarded_capacity(domain, rule.memoryCapacity, sel.quantity_compare(
            sel.capacity(domain, rule.memoryCapacity), "==", format_mebibytes(size))))
        variants.append((f"shared-{i + 1}" if len(devices.memory) > 1 else "shared", [SHARED_SELECTOR, same_size],
                         {**requests, rule.memoryCapacity: format_mebibytes(amount)}))
    return variants, lost


def _config(share: Share, rule: SharingRule, device_type: str) -> tuple[dict | None, list[str]]:
    """NVIDIA's GpuConfig sharing for a whole GPU, and the parts of the share it cannot enforce."""
    if rule.config == "none" or device_type != "gpu":
        return None, []
    if rule.config == "timeSlicing":
        lost = [n for n, v in (("memory", share.memory), ("memory percentage", share.memory_percent),
                               ("cores", share.cores)) if v is not None]
        return {"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": rule.timeSliceInterval}}, lost
    mps: dict = {}
    if share.cores is not None:
        mps["defaultActiveThreadPercentage"] = int(share.cores.to_integral_value(ROUND_CEILING))
    if share.memory is not None:
        mps["defaultPinnedDeviceMemoryLimit"] = format_mebibytes(share.memory)
    lost = ["memory percentage"] if share.memory_percent is not None and share.memory is None else []
    return {"strategy": "MPS", "mpsConfig": mps}, lost


def _enforced(config: dict) -> str:
    mps = config.get("mpsConfig") or {}
    parts = []
    if "defaultPinnedDeviceMemoryLimit" in mps:
        parts.append(f"{mps['defaultPinnedDeviceMemoryLimit']} of memory")
    if "defaultActiveThreadPercentage" in mps:
        parts.append(f"{mps['defaultActiveThreadPercentage']}% of the threads")
    if config["strategy"] == "TimeSlicing":
        parts.append(f"{config['timeSlicingConfig']['interval']} time slices with the other containers of the claim")
    return " and ".join(parts) or "MPS with the other containers of the claim"


def _plain(value: Decimal) -> str:
    return format(value.normalize(), "f")


def opaque(domain: str, sharing: dict) -> dict:
    """The claim config NVIDIA's kubelet plugin reads (resource.nvidia.com/v1beta1 GpuConfig)."""
    return {"driver": domain, "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                                             "sharing": sharing}}
