"""GPU facts as plain data: what a backend (NVML or fake) reports about one node."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from app.common import InputError


@dataclass(frozen=True)
class MigDevice:
    uuid: str
    profile: str  # e.g. 1g.10gb, 1g.10gb+me (as NVIDIA's go-nvlib names it)
    memory_mib: int  # the GPU instance profile's memory
    multiprocessors: int
    placement_start: int = 0
    placement_size: int = 1
    copy_engines: int = 0
    decoders: int = 0
    encoders: int = 0
    jpeg_engines: int = 0
    ofa_engines: int = 0
    gi_profile_id: int | None = None  # NVML GPU instance profile id; None: derived from the profile name


# NVML GPU instance profile ids (nvml.h NVML_GPU_INSTANCE_PROFILE_*) by (slices, attribute suffix).
GI_PROFILE_IDS = {(1, ""): 0, (2, ""): 1, (3, ""): 2, (4, ""): 3, (7, ""): 4, (8, ""): 5, (6, ""): 6,
                  (1, "+me"): 7, (2, "+me"): 8, (1, "+gfx"): 10, (2, "+gfx"): 11, (4, "+gfx"): 12,
                  (1, "-me"): 13, (2, "-me"): 14, (1, "+me.all"): 15, (2, "+me.all"): 16}
_PROFILE = re.compile(r"^(?:(?P<c>\d+)c\.)?(?P<g>\d+)g\.(?P<gb>\d+)gb(?P<suffix>[+-][a-z.]+)?$")


def gi_profile_id(profile: str) -> int | None:
    """The GPU instance profile id a profile name stands for (1g.10gb -> 0, 1g.10gb+me -> 7)."""
    match = _PROFILE.match(profile)
    if not match:
        return None
    return GI_PROFILE_IDS.get((int(match["g"]), match["suffix"] or ""))


@dataclass(frozen=True)
class MigProfile:
    """A MIG profile the GPU can create, with its possible placements (for partitionable MIG)."""

    profile: str
    gi_profile_id: int
    memory_mib: int
    multiprocessors: int
    copy_engines: int = 0
    decoders: int = 0
    encoders: int = 0
    jpeg_engines: int = 0
    ofa_engines: int = 0
    placements: tuple[tuple[int, int], ...] = ()  # (start, size) in memory slices


@dataclass(frozen=True)
class Gpu:
    index: int
    minor: int
    uuid: str
    product_name: str
    brand: str
    architecture: str
    compute_capability: str  # "9.0"
    memory_mib: int
    multiprocessors: int | None  # None: NVML does not say (the capacity is left out)
    pci_bus_id: str  # 0000:18:00.0
    pcie_root: str | None = None  # the PCIe root complex (pci0000:15) from sysfs; None: unknown
    addressing_mode: str | None = None  # HMM | ATS | None on coherent-memory systems; None: not supported
    fabric_clique: str | None = None  # NVLink fabric "<clusterUUID>.<cliqueId>" (GB200 NVL); None: no fabric
    numa_node: int | None = None
    mig_enabled: bool = False
    mig_devices: tuple[MigDevice, ...] = ()
    mig_profiles: tuple[MigProfile, ...] = ()  # what it could be partitioned into
    nvlink_peers: tuple[str, ...] = ()  # remote PCI bus ids of active links
    healthy: bool = True
    xid: int | None = None  # the critical XID that made it unhealthy; None with healthy False: lost


@dataclass(frozen=True)
class NodeGpus:
    driver_version: str  # 580.95.05
    cuda_driver_version: str  # 13.0
    gpus: tuple[Gpu, ...] = field(default_factory=tuple)


_GPU_FIELDS = {"index", "minor", "uuid", "productName", "brand", "architecture", "computeCapability",
               "memoryMiB", "multiprocessors", "pciBusID", "pcieRoot", "numaNode", "migEnabled", "migDevices",
               "nvlinkPeers", "healthy", "xid", "addressingMode", "fabricClique", "migProfiles"}
_MIG_FIELDS = {"uuid", "profile", "memoryMiB", "multiprocessors", "placementStart", "placementSize",
               "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines",
               "giProfileId"}


_PROFILE_FIELDS = {"profile", "giProfileId", "memoryMiB", "multiprocessors", "copyEngines", "decoders", "encoders",
                   "jpegEngines", "ofaEngines", "placements"}


def _mig_profile(m, where: str) -> MigProfile:
    if not isinstance(m, dict):
        raise InputError(where, "expected a mapping")
    _unknown(m, _PROFILE_FIELDS, where)
    placements = []
    for k, p in enumerate(_take(m, "placements", list, where)):
        if not (isinstance(p, list) and len(p) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in p)):
            raise InputError(f"{where}.placements[{k}]", "expected [start, size]")
        placements.append((p[0], p[1]))
    return MigProfile(
        profile=_take(m, "profile", str, where), gi_profile_id=_take(m, "giProfileId", int, where),
        memory_mib=_take(m, "memoryMiB", int, where), multiprocessors=_take(m, "multiprocessors", int, where),
        copy_engines=_take(m, "copyEngines", int, where, 0, False), decoders=_take(m, "decoders", int, where, 0, False),
        encoders=_take(m, "encoders", int, where, 0, False), jpeg_engines=_take(m, "jpegEngines", int, where, 0, False),
        ofa_engines=_take(m, "ofaEngines", int, where, 0, False), placements=tuple(placements))


def _take(data: dict, key: str, kind: type, where: str, default=None, required=True):
    if key not in data:
        if required:
            raise InputError(f"{where}.{key}", "missing")
        return default
    value = data[key]
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        expected = " or ".join(k.__name__ for k in kind) if isinstance(kind, tuple) else kind.__name__
        raise InputError(f"{where}.{key}", f"expected {expected}, got {type(value).__name__}")
    return value


def _unknown(data: dict, allowed: set, where: str) -> None:
    extra = sorted(set(data) - allowed)
    if extra:
        raise InputError(f"{where}.{extra[0]}", "unknown field")


def node_from_description(data: object, source: str) -> NodeGpus:
    """Parse a fake backend YAML description (see app/data/fake/*.yaml); errors name the field."""
    if not isinstance(data, dict):
        raise InputError(source, "expected a mapping with driverVersion, cudaDriverVersion, gpus")
    _unknown(data, {"driverVersion", "cudaDriverVersion", "gpus"}, source)
    gpus = []
    for i, raw in enumerate(_take(data, "gpus", list, source)):
        where = f"{source}: gpus[{i}]"
        if not isinstance(raw, dict):
            raise InputError(where, "expected a mapping")
        _unknown(raw, _GPU_FIELDS, where)
        migs = []
        for j, m in enumerate(_take(raw, "migDevices", list, where, [], False)):
            mwhere = f"{where}.migDevices[{j}]"
            if not isinstance(m, dict):
                raise InputError(mwhere, "expected a mapping")
            _unknown(m, _MIG_FIELDS, mwhere)
            migs.append(MigDevice(
                uuid=_take(m, "uuid", str, mwhere), profile=_take(m, "profile", str, mwhere),
                memory_mib=_take(m, "memoryMiB", int, mwhere), multiprocessors=_take(m, "multiprocessors", int, mwhere),
                placement_start=_take(m, "placementStart", int, mwhere, 0, False),
                placement_size=_take(m, "placementSize", int, mwhere, 1, False),
                copy_engines=_take(m, "copyEngines", int, mwhere, 0, False),
                decoders=_take(m, "decoders", int, mwhere, 0, False),
                encoders=_take(m, "encoders", int, mwhere, 0, False),
                jpeg_engines=_take(m, "jpegEngines", int, mwhere, 0, False),
                ofa_engines=_take(m, "ofaEngines", int, mwhere, 0, False),
                gi_profile_id=_take(m, "giProfileId", int, mwhere, None, False)))
        profiles = [_mig_profile(m, f"{where}.migProfiles[{j}]")
                    for j, m in enumerate(_take(raw, "migProfiles", list, where, [], False))]
        index = _take(raw, "index", int, where)
        gpus.append(Gpu(
            index=index, minor=_take(raw, "minor", int, where, index, False), uuid=_take(raw, "uuid", str, where),
            product_name=_take(raw, "productName", str, where), brand=_take(raw, "brand", str, where, "Nvidia", False),
            architecture=_take(raw, "architecture", str, where),
            compute_capability=str(_take(raw, "computeCapability", (str, float), where)),
            memory_mib=_take(raw, "memoryMiB", int, where), multiprocessors=_take(raw, "multiprocessors", int, where),
            pci_bus_id=_take(raw, "pciBusID", str, where), pcie_root=_take(raw, "pcieRoot", str, where, None, False),
            numa_node=_take(raw, "numaNode", int, where, None, False),
            mig_enabled=_take(raw, "migEnabled", bool, where, bool(migs), False), mig_devices=tuple(migs), mig_profiles=tuple(profiles),
            nvlink_peers=tuple(_take(raw, "nvlinkPeers", list, where, [], False)),
            healthy=_take(raw, "healthy", bool, where, True, False), xid=_take(raw, "xid", int, where, None, False),
            addressing_mode=_take(raw, "addressingMode", str, where, None, False),
            fabric_clique=_take(raw, "fabricClique", str, where, None, False)))
    return NodeGpus(driver_version=str(_take(data, "driverVersion", str, source)),
                    cuda_driver_version=str(_take(data, "cudaDriverVersion", (str, float), source)),
                    gpus=tuple(gpus))
