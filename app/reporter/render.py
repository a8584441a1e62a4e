"""GPU facts -> ResourceSlices in the attribute schema of NVIDIA's DRA driver. Pure.

Names follow the gpu.nvidia.com driver: `type` gpu|mig, `uuid`, `productName`, `brand`,
`architecture`, `cudaComputeCapability`/`driverVersion`/`cudaDriverVersion` (versions),
`index`, `minor`, `resource.kubernetes.io/pciBusID`, `resource.kubernetes.io/pcieRoot`;
MIG devices add `profile`, `parentUUID`, `parentIndex`, `parentMinor` and engine capacities.
Facts NVIDIA does not publish (NUMA node, NVLink) go under our own `dra-bridge.io/` domain.
"""

from __future__ import annotations

import hashlib
import re

import orjson

from .gpuinfo import Gpu, MigDevice, NodeGpus

NVIDIA_DOMAIN = "gpu.nvidia.com"
EXTRA_DOMAIN = "dra-bridge.io"
MAX_DEVICES_PER_SLICE = 128  # resource.k8s.io/v1 ResourceSliceMaxDevices
MANAGED_LABEL = "app.kubernetes.io/managed-by"
SHARE_CORES = f"{EXTRA_DOMAIN}/cores"  # percent of a GPU's compute, on shareable GPUs
CONTENT_LABEL = f"{EXTRA_DOMAIN}/content"  # hash of the pool's devices: unchanged GPUs mean no write


def semver(text: str) -> str:
    """NVML versions (580.95.05, 13.0, 9.0) as semantic versions without leading zeros."""
    parts = [str(int(p)) for p in re.findall(r"\d+", text)[:3]]
    while len(parts) < 3:
        parts.append("0")
    return ".".join(parts)


class _Attrs:
    def __init__(self, qualify: bool):
        self.qualify = qualify  # shadow mode: name the NVIDIA domain explicitly
        self.out: dict = {}

    def put(self, name: str, kind: str, value) -> None:
        self.out[_qualified(name, self.qualify)] = {kind: value}


def _common(attrs: _Attrs, gpu: Gpu, node: NodeGpus) -> None:
    attrs.put("productName", "string", gpu.product_name[:64])
    attrs.put("brand", "string", gpu.brand[:64])
    attrs.put("architecture", "string", gpu.architecture[:64])
    attrs.put("cudaComputeCapability", "version", semver(gpu.compute_capability))
    attrs.put("driverVersion", "version", semver(node.driver_version))
    attrs.put("cudaDriverVersion", "version", semver(node.cuda_driver_version))
    attrs.put("resource.kubernetes.io/pciBusID", "string", gpu.pci_bus_id.lower())
    if gpu.pcie_root:  # as NVIDIA's driver: omitted when sysfs does not say
        attrs.put("resource.kubernetes.io/pcieRoot", "string", gpu.pcie_root)
    if gpu.numa_node is not None:
        attrs.put(f"{EXTRA_DOMAIN}/numaNode", "int", gpu.numa_node)


def gpu_device(gpu: Gpu, node: NodeGpus, qualify: bool, shareable: bool = False) -> dict:
    attrs = _Attrs(qualify)
    attrs.put("type", "string", "gpu")
    attrs.put("uuid", "string", gpu.uuid)
    attrs.put("index", "int", gpu.index)
    attrs.put("minor", "int", gpu.minor)
    _common(attrs, gpu, node)
    attrs.put(f"{EXTRA_DOMAIN}/nvlinkPeers", "int", len(gpu.nvlink_peers))
    capacity = {_qualified("memory", qualify): {"value": f"{gpu.memory_mib}Mi"},
                f"{EXTRA_DOMAIN}/multiprocessors": {"value": str(gpu.multiprocessors)}}
    device = {"name": f"gpu-{gpu.index}", "attributes": attrs.out, "capacity": capacity}
    if shareable:
        _make_shareable(device, gpu, qualify)
    return device


def _make_shareable(device: dict, gpu: Gpu, qualify: bool) -> None:
    """Consumable capacity (KEP-5075) for GPUs shared by time-slicing or MPS: claims take a share
    of memory and of compute (percent); a claim that names no memory takes all of it, so
    whole-GPU requests stay exclusive."""
    device["allowMultipleAllocations"] = True
    # Each share would consume the whole of a capacity without a request policy: the SM count
    # becomes a fact (attribute), the compute share is dra-bridge.io/cores.
    multiprocessors = device["capacity"].pop(f"{EXTRA_DOMAIN}/multiprocessors")
    device["attributes"][f"{EXTRA_DOMAIN}/multiprocessors"] = {"int": int(multiprocessors["value"])}
    device["capacity"][_qualified("memory", qualify)]["requestPolicy"] = {
        "default": f"{gpu.memory_mib}Mi", "validRange": {"min": "1Mi", "step": "1Mi"}}
    # A share that names no compute takes 1%: memory alone keeps whole-GPU requests exclusive.
    device["capacity"][SHARE_CORES] = {"value": "100", "requestPolicy": {
        "default": "1", "validRange": {"min": "1", "max": "100", "step": "1"}}}


def _qualified(name: str, qualify: bool) -> str:
    return f"{NVIDIA_DOMAIN}/{name}" if qualify and "/" not in name else name


def mig_device(gpu: Gpu, mig: MigDevice, node: NodeGpus, qualify: bool) -> dict:
    attrs = _Attrs(qualify)
    attrs.put("type", "string", "mig")
    attrs.put("uuid", "string", mig.uuid)
    attrs.put("profile", "string", mig.profile)
    attrs.put("parentUUID", "string", gpu.uuid)
    attrs.put("parentIndex", "int", gpu.index)
    attrs.put("parentMinor", "int", gpu.minor)
    _common(attrs, gpu, node)
    capacity = {"memory": mig.memory_mib, "multiprocessors": mig.multiprocessors,
                "copyEngines": mig.copy_engines, "decoders": mig.decoders, "encoders": mig.encoders,
                "jpegEngines": mig.jpeg_engines, "ofaEngines": mig.ofa_engines}
    profile = re.sub(r"[^a-z0-9]+", "", mig.profile.lower())
    return {"name": f"gpu-{gpu.index}-mig-{profile}-{mig.placement_start}-{mig.placement_size}",
            "attributes": attrs.out,
            "capacity": {_qualified(k, qualify): {"value": f"{v}Mi" if k == "memory" else str(v)}
                         for k, v in capacity.items()}}


def devices(node: NodeGpus, qualify: bool = False, shareable: bool = False) -> list[dict]:
    """One device per whole GPU, or per MIG device on MIG-enabled GPUs; unhealthy GPUs left out.
    shareable: whole GPUs allow multiple allocations (consumable capacity)."""
    out = []
    for gpu in sorted(node.gpus, key=lambda g: g.index):
        if not gpu.healthy:
            continue
        if gpu.mig_enabled:
            out.extend(mig_device(gpu, mig, node, qualify) for mig in gpu.mig_devices)
        else:
            out.append(gpu_device(gpu, node, qualify, shareable))
    return out


def content_hash(device_list: list[dict]) -> str:
    return hashlib.sha256(orjson.dumps(device_list, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def slices(node: NodeGpus, node_name: str, driver: str, generation: int, node_uid: str | None = None,
           qualify: bool = False, shareable: bool = False) -> list[dict]:
    """ResourceSlices for one node's pool; split at the per-slice device limit."""
    all_devices = devices(node, qualify, shareable)
    chunks = [all_devices[i:i + MAX_DEVICES_PER_SLICE]
              for i in range(0, len(all_devices), MAX_DEVICES_PER_SLICE)] or [[]]
    out = []
    for i, chunk in enumerate(chunks):
        metadata = {"name": f"{node_name}-{driver}-{i}"[:253],
                    "labels": {MANAGED_LABEL: "dra-bridge", CONTENT_LABEL: content_hash(all_devices)}}
        if node_uid:
            metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node_name,
                                            "uid": node_uid, "controller": True}]
        out.append({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": metadata,
            "spec": {"driver": driver, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": generation, "resourceSliceCount": len(chunks)},
                     "devices": chunk},
        })
    return out


def device_classes(driver: str) -> list[dict]:
    """The DeviceClasses NVIDIA's DRA driver chart installs (whole GPUs, MIG devices), for this
    driver: with them a `--once` printout is a whole inventory (`plan`/`check --inventory`)."""
    names = ("gpu.nvidia.com", "mig.nvidia.com") if driver == "gpu.nvidia.com" else (f"gpu.{driver}", f"mig.{driver}")
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
             "spec": {"selectors": [{"cel": {"expression": (
                 f"device.driver == '{driver}' && device.attributes['gpu.nvidia.com'].type == '{kind}'")}}]}}
            for name, kind in zip(names, ("gpu", "mig"))]
