"""GPU facts -> ResourceSlices in the schema of NVIDIA's DRA driver (k8s-dra-driver-gpu,
v0.5.0-dev, cmd/gpu-kubelet-plugin: deviceinfo.go, mig.go, partitions.go, device_health.go). Pure.

As NVIDIA publishes them:
- whole GPU `gpu-<minor>`: `type` gpu, `uuid`, `productName`, `brand`, `architecture`,
  `cudaComputeCapability` / `driverVersion` / `cudaDriverVersion` (versions), `addressingMode`
  (coherent-memory systems only), `resource.kubernetes.io/pciBusID` and `pcieRoot` (the root
  complex from sysfs, left out when unknown); capacity `memory`.
- MIG device `gpu-<minor>-mig-<profile without dots>-<GI profile id>-<placement start>`: `type`
  mig, `uuid`, `parentUUID`, `profile` and the parent's facts; capacities of its GI profile
  (`memory`, `multiprocessors`, engines) and `memorySlice<i>` per memory slice it holds.
- unhealthy GPUs stay published, tainted as NVIDIA's health monitor taints them:
  `gpu.nvidia.com/xid` (value: the XID, NoSchedule) or `gpu.nvidia.com/gpu-lost` (NoSchedule).
- partitionable MIG (`partitionable`): one slice of shared counters (`gpu-<minor>-counter-set`),
  then one slice per GPU with the full GPU and every possible MIG placement consuming them.
Facts NVIDIA does not publish go under our own domain `dra-bridge.io/`: `index`, `minor`,
`parentIndex`, `parentMinor`, `numaNode`, `nvlinkDomain` (GPUs joined by NVLink share it),
`multiprocessors`, and the sharing capacity `cores`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace

import orjson

from app.common import vocabulary
from app.common.release import CONSUMABLE_CAPACITY, DEVICE_TAINTS, PARTITIONABLE, Release, default_release
from app.common import NVIDIA_DRIVER as NVIDIA_DOMAIN

from .gpuinfo import Gpu, MigDevice, MigProfile, NodeGpus, gi_profile_id

EXTRA_DOMAIN = vocabulary.OUR_DOMAIN
MAX_DEVICES_PER_SLICE = 128  # resource.k8s.io/v1 ResourceSliceMaxDevices
MANAGED_LABEL = vocabulary.MANAGED_BY_LABEL
SHARE_CORES = vocabulary.SHARE_CORES
CONTENT_LABEL = f"{EXTRA_DOMAIN}/content"  # hash of the pool's devices: unchanged GPUs mean no write
SHADOW_LABEL = f"{EXTRA_DOMAIN}/shadow-of"  # shadow slices: the driver whose devices they stand for
SLICE_PREFIX = "dra-bridge-"  # NVIDIA's plugin names its slices <node>-<driver>-<random>: ours never collide
_BINARY = ((60, "Ei"), (50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki"))


def semver(text: str) -> str:
    """NVML versions (580.95.05, 13.0, 9.0) as semantic versions without leading zeros."""
    parts = [str(int(p)) for p in re.findall(r"\d+", text)[:3]]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts)


def binary_quantity(amount: int) -> str:
    """A byte count as apimachinery writes a BinarySI quantity: the largest exact suffix."""
    for shift, suffix in _BINARY:
        if amount and amount % (1 << shift) == 0:
            return f"{amount >> shift}{suffix}"
    return str(amount)


def _rfc1123(name: str) -> str:
    return re.sub(r"[^a-z0-9-.]", "-", name.lower()).strip("-").removesuffix(".")[:253]


def _dns_counter(name: str) -> str:
    """NVIDIA's counter name for a capacity (camelCase -> camel-case)."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1-\2", name)
    return _rfc1123(re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1-\2", name))


def mig_name(minor: int, profile: str, profile_id: int, start: int) -> str:
    return f"gpu-{minor}-mig-{_rfc1123(profile.replace('.', ''))}-{profile_id}-{start}"


class _Attrs:
    def __init__(self, qualify: bool):
        self.qualify = qualify  # shadow mode: name the NVIDIA domain explicitly
        self.out: dict = {}

    def put(self, name: str, kind: str, value) -> None:
        self.out[_qualified(name, self.qualify)] = {kind: value}


def _qualified(name: str, qualify: bool) -> str:
    return f"{NVIDIA_DOMAIN}/{name}" if qualify and "/" not in name else name


def nvlink_domains(node: NodeGpus) -> dict[int, str]:
    """GPU index -> the NVLink domain it belongs to: the fabric clique where the GPU is on an
    NVLink fabric (GB200 NVL: shared across nodes), else the GPUs its links connect on this
    node, named by the lowest PCI address among them. GPUs without links have none."""
    by_bus = {g.pci_bus_id.lower(): g for g in node.gpus}
    parent = {bus: bus for bus in by_bus}

    def root(bus: str) -> str:
        while parent[bus] != bus:
            parent[bus] = parent[parent[bus]]
            bus = parent[bus]
        return bus

    for gpu in node.gpus:
        for peer in gpu.nvlink_peers:
            a, b = root(gpu.pci_bus_id.lower()), root(peer.lower()) if peer.lower() in by_bus else None
            if b is not None and a != b:
                parent[max(a, b)] = min(a, b)
    out = {}
    for gpu in node.gpus:
        if gpu.fabric_clique:
            out[gpu.index] = f"clique-{_rfc1123(gpu.fabric_clique)}"
        elif any(p.lower() in by_bus for p in gpu.nvlink_peers):
            out[gpu.index] = f"nvlink-{root(gpu.pci_bus_id.lower()).replace(':', '-').replace('.', '-')}"
    return out


def _common(attrs: _Attrs, gpu: Gpu, node: NodeGpus) -> None:
    attrs.put("productName", "string", gpu.product_name[:64])
    attrs.put("brand", "string", gpu.brand[:64])
    attrs.put("architecture", "string", gpu.architecture[:64])
    attrs.put("cudaComputeCapability", "version", semver(gpu.compute_capability))
    attrs.put("driverVersion", "version", semver(node.driver_version))
    attrs.put("cudaDriverVersion", "version", semver(node.cuda_driver_version))
    if gpu.addressing_mode:
        attrs.put("addressingMode", "string", gpu.addressing_mode)
    attrs.put(vocabulary.PCI_BUS_ID, "string", gpu.pci_bus_id.lower())
    if gpu.pcie_root:  # as NVIDIA's driver: omitted when sysfs does not say
        attrs.put(vocabulary.PCIE_ROOT, "string", gpu.pcie_root)
    if gpu.numa_node is not None:
        attrs.put(vocabulary.NUMA_ATTRIBUTE, "int", gpu.numa_node)


def _tainted(device: dict, gpu: Gpu) -> dict:
    taints = _taints(gpu)
    if taints:
        device["taints"] = taints
    return device


def _capacity_map(values: dict[str, int], qualify: bool) -> dict:
    return {_qualified(k, qualify): {"value": _quantity(k, v)} for k, v in values.items()}


def _taints(gpu: Gpu) -> list[dict]:
    if gpu.healthy:
        return []
    if gpu.xid is not None:
        return [{"key": f"{NVIDIA_DOMAIN}/xid", "value": str(gpu.xid), "effect": "NoSchedule"}]
    return [{"key": f"{NVIDIA_DOMAIN}/gpu-lost", "effect": "NoSchedule"}]


def gpu_device(gpu: Gpu, node: NodeGpus, qualify: bool, shareable: bool = False,
               domains: dict[int, str] | None = None) -> dict:
    attrs = _Attrs(qualify)
    attrs.put("type", "string", "gpu")
    attrs.put("uuid", "string", gpu.uuid)
    _common(attrs, gpu, node)
    attrs.put(f"{EXTRA_DOMAIN}/index", "int", gpu.index)
    attrs.put(f"{EXTRA_DOMAIN}/minor", "int", gpu.minor)
    domain = (domains if domains is not None else nvlink_domains(node)).get(gpu.index)
    if domain:
        attrs.put(f"{EXTRA_DOMAIN}/nvlinkDomain", "string", domain)
    capacity = {_qualified("memory", qualify): {"value": binary_quantity(gpu.memory_mib << 20)}}
    if gpu.multiprocessors:
        capacity[f"{EXTRA_DOMAIN}/multiprocessors"] = {"value": str(gpu.multiprocessors)}
    device = {"name": f"gpu-{gpu.minor}", "attributes": attrs.out, "capacity": capacity}
    if shareable:
        _make_shareable(device, gpu, qualify)
    return _tainted(device, gpu)


def _make_shareable(device: dict, gpu: Gpu, qualify: bool) -> None:
    """Consumable capacity (KEP-5075) for GPUs shared by time-slicing or MPS: claims take a share
    of memory and of compute (percent); a claim that names no memory takes all of it, so
    whole-GPU requests stay exclusive."""
    device["allowMultipleAllocations"] = True
    # Each share would consume the whole of a capacity without a request policy: the SM count
    # becomes a fact (attribute), the compute share is dra-bridge.io/cores.
    multiprocessors = device["capacity"].pop(f"{EXTRA_DOMAIN}/multiprocessors", None)
    if multiprocessors:
        device["attributes"][f"{EXTRA_DOMAIN}/multiprocessors"] = {"int": int(multiprocessors["value"])}
    device["capacity"][_qualified("memory", qualify)]["requestPolicy"] = {
        "default": binary_quantity(gpu.memory_mib << 20), "validRange": {"min": "1Mi", "step": "1Mi"}}
    # A share that names no compute takes 1%: memory alone keeps whole-GPU requests exclusive.
    device["capacity"][SHARE_CORES] = {"value": "100", "requestPolicy": {
        "default": "1", "validRange": {"min": "1", "max": "100", "step": "1"}}}


def _mig_attrs(gpu: Gpu, profile: str, node: NodeGpus, qualify: bool) -> _Attrs:
    attrs = _Attrs(qualify)
    attrs.put("type", "string", "mig")
    attrs.put("parentUUID", "string", gpu.uuid)
    attrs.put("profile", "string", profile)
    _common(attrs, gpu, node)
    attrs.put(f"{EXTRA_DOMAIN}/parentIndex", "int", gpu.index)
    attrs.put(f"{EXTRA_DOMAIN}/parentMinor", "int", gpu.minor)
    return attrs


def _profile_capacity(p: MigDevice | MigProfile) -> dict[str, int]:
    """A GI profile's capacities, memory in bytes (NVML's MiB)."""
    return {"multiprocessors": p.multiprocessors, "copyEngines": p.copy_engines, "decoders": p.decoders,
            "encoders": p.encoders, "jpegEngines": p.jpeg_engines, "ofaEngines": p.ofa_engines,
            "memory": p.memory_mib << 20}


def _quantity(name: str, value: int) -> str:
    return binary_quantity(value) if name == "memory" else str(value)


def mig_device(gpu: Gpu, mig: MigDevice, node: NodeGpus, qualify: bool) -> dict:
    attrs = _mig_attrs(gpu, mig.profile, node, qualify)
    attrs.put("uuid", "string", mig.uuid)
    capacity = _capacity_map(_profile_capacity(mig), qualify)
    for i in range(mig.placement_start, mig.placement_start + mig.placement_size):
        capacity[_qualified(f"memorySlice{i}", qualify)] = {"value": "1"}
    profile_id = mig.gi_profile_id if mig.gi_profile_id is not None else gi_profile_id(mig.profile)
    device = {"name": mig_name(gpu.minor, mig.profile, profile_id if profile_id is not None else 0,
                               mig.placement_start),
              "attributes": attrs.out, "capacity": capacity}
    return _tainted(device, gpu)


def devices(node: NodeGpus, qualify: bool = False, shareable: bool = False) -> list[dict]:
    """One device per whole GPU, or per MIG device on MIG-enabled GPUs. shareable: whole GPUs
    allow multiple allocations (consumable capacity)."""
    out = []
    domains = nvlink_domains(node)
    for gpu in sorted(node.gpus, key=lambda g: g.minor):
        if gpu.mig_enabled:
            out.extend(sorted((mig_device(gpu, mig, node, qualify) for mig in gpu.mig_devices),
                              key=lambda d: d["name"]))
        else:
            out.append(gpu_device(gpu, node, qualify, shareable, domains))
    return out


# -- partitionable MIG (NVIDIA's DynamicMIG: KEP-4815 shared counters) -----------------------
def counter_set_name(gpu: Gpu) -> str:
    return _rfc1123(f"gpu-{gpu.minor}-counter-set")


def _max_capacity(gpu: Gpu) -> tuple[dict[str, int], int]:
    """Per capacity the largest value over all profiles and placements, and the memory slice
    count (the largest placement), as NVIDIA derives the full GPU's share of its counters."""
    caps: dict[str, int] = {}
    slices = 0
    for p in gpu.mig_profiles:
        for _start, size in p.placements:
            slices = max(slices, size)
            for name, value in _profile_capacity(p).items():
                caps[name] = max(caps.get(name, 0), value)
    return caps, slices


def _counters(caps: dict[str, int], start: int, size: int) -> dict:
    out = {_dns_counter(k): {"value": _quantity(k, v)} for k, v in caps.items()}
    out.update({f"memory-slice-{i}": {"value": "1"} for i in range(start, start + size)})
    return out


def partition_devices(gpu: Gpu, node: NodeGpus, qualify: bool) -> list[dict]:
    """The full GPU and every possible MIG placement, all drawing on the GPU's counter set."""
    caps, memory_slices = _max_capacity(gpu)
    full = gpu_device(gpu, node, qualify)
    full["capacity"] = _capacity_map(caps, qualify)
    full["consumesCounters"] = [{"counterSet": counter_set_name(gpu), "counters": _counters(caps, 0, memory_slices)}]
    out = [full]
    for p in gpu.mig_profiles:
        for start, size in p.placements:
            attrs = _mig_attrs(gpu, p.profile, node, qualify)
            capacity = _profile_capacity(p)
            out.append({"name": mig_name(gpu.minor, p.profile, p.gi_profile_id, start), "attributes": attrs.out,
                        "capacity": _capacity_map(capacity, qualify),
                        "consumesCounters": [{"counterSet": counter_set_name(gpu),
                                              "counters": _counters(capacity, start, size)}]})
    return sorted((_tainted(d, gpu) for d in out), key=lambda d: d["name"])


def content_hash(device_list: list) -> str:
    return hashlib.sha256(orjson.dumps(device_list, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def _chunks(node: NodeGpus, qualify: bool, shareable: bool, partitionable: bool,
            counters_apart: bool = True) -> list[dict]:
    """Slice specs (devices or sharedCounters) of one node's pool, in publishing order.
    counters_apart: 1.35+ wants counter sets in a slice of their own; 1.34 beside the devices
    that consume them."""
    if not partitionable or not any(g.mig_profiles for g in node.gpus):
        all_devices = devices(node, qualify, shareable)
        return [{"devices": all_devices[i:i + MAX_DEVICES_PER_SLICE]}
                for i in range(0, len(all_devices), MAX_DEVICES_PER_SLICE)] or [{"devices": []}]
    # Kubernetes 1.35+: counters in a slice of their own, then one slice per GPU.
    counter_sets, per_gpu = [], []
    domains = nvlink_domains(node)
    for gpu in sorted(node.gpus, key=lambda g: g.minor):
        if gpu.mig_profiles:
            caps, memory_slices = _max_capacity(gpu)
            counter_set = {"name": counter_set_name(gpu), "counters": _counters(caps, 0, memory_slices)}
            counter_sets.append(counter_set)
            per_gpu.append({**({} if counters_apart else {"sharedCounters": [counter_set]}),
                            "devices": partition_devices(gpu, node, qualify)})
        elif gpu.mig_enabled:  # MIG devices made by hand stay as they are
            per_gpu.append({"devices": sorted((mig_device(gpu, mig, node, qualify) for mig in gpu.mig_devices),
                                              key=lambda d: d["name"])})
        else:
            per_gpu.append({"devices": [gpu_device(gpu, node, qualify, shareable, domains)]})
    return ([{"sharedCounters": counter_sets}] if counters_apart else []) + per_gpu


def slices(node: NodeGpus, node_name: str, driver: str, generation: int, node_uid: str | None = None,
           qualify: bool = False, shareable: bool = False, partitionable: bool = False,
           shadow_of: str | None = None, release: Release | None = None) -> list[dict]:
    """ResourceSlices for one node's pool. shadow_of: the driver these devices stand for
    (shadow mode), recorded in a label the validator reads. release: write only what it keeps
    (for_release says what that changes)."""
    release = release or default_release()
    shareable, partitionable, _notes = for_release(release, shareable, partitionable)
    if not release.has(DEVICE_TAINTS):  # a taint it drops would leave a failing GPU allocatable
        node = replace(node, gpus=tuple(g for g in node.gpus if g.healthy))
    chunks = _chunks(node, qualify, shareable, partitionable, counters_apart=release.minor >= 35)
    digest = content_hash(chunks)
    out = []
    for i, chunk in enumerate(chunks):
        labels = {MANAGED_LABEL: "dra-bridge", CONTENT_LABEL: digest}
        if shadow_of:
            labels[SHADOW_LABEL] = shadow_of
        metadata = {"name": f"{SLICE_PREFIX}{node_name}-{driver}-{i}"[:253], "labels": labels}
        if node_uid:
            metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name,
                                            "uid": node_uid, "controller": True}]
        out.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": metadata,
            "spec": {"driver": driver, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": generation, "resourceSliceCount": len(chunks)},
                     **chunk},
        })
    return out


def for_release(release: Release, shareable: bool, partitionable: bool) -> tuple[bool, bool, list[str]]:
    """(shareable, partitionable, what the release changes of them and of health): never a field
    it drops. Without taints an unhealthy GPU is left out; without counters MIG devices are
    published as configured (a GPU and its placements offered at once would be allocated twice);
    without consumable capacity GPUs are exclusive."""
    notes = []
    name = f"Kubernetes {release.version}"
    if shareable and not release.has(CONSUMABLE_CAPACITY):
        shareable = False
        notes.append(f"--shareable: {name} keeps no allowMultipleAllocations ({CONSUMABLE_CAPACITY} is off): "
                     "whole GPUs are published exclusive; shares stay on the device plugin")
    if partitionable and not release.has(PARTITIONABLE):
        partitionable = False
        notes.append(f"--partitionable: {name} keeps no shared counters ({PARTITIONABLE} is off): MIG devices "
                     "are published as configured, never a GPU and its placements at once")
    if not release.has(DEVICE_TAINTS):
        notes.append(f"{name} keeps no device taints ({DEVICE_TAINTS} is off): unhealthy GPUs are left out of "
                     "the slices")
    return shareable, partitionable, notes


def device_classes(driver: str = NVIDIA_DOMAIN, shadow: bool = False) -> list[dict]:
    """The DeviceClasses NVIDIA's DRA driver chart installs (whole GPUs, MIG devices). With them
    a `--once` printout is a whole inventory (`plan`/`check --inventory`); shadow slices are
    judged by these classes too (the validator maps them onto NVIDIA's driver). Another driver
    name in publish mode gets classes of its own (gpu.<driver>, mig.<driver>)."""
    selected = NVIDIA_DOMAIN if shadow or driver == NVIDIA_DOMAIN else driver
    names = (vocabulary.NVIDIA_GPU_CLASS, vocabulary.NVIDIA_MIG_CLASS) if selected == NVIDIA_DOMAIN else (f"gpu.{driver}", f"mig.{driver}")
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
             "spec": {"selectors": [{"cel": {"expression": (
                 f"device.driver == '{selected}' && device.attributes['{NVIDIA_DOMAIN}'].type == '{kind}'")}}]}}
            for name, kind in zip(names, ("gpu", "mig"))]
