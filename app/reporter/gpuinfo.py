"""GPU facts as plain data: what a backend (NVML or fake) reports about one node."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.common import InputError


@dataclass(frozen=True)
class MigDevice:
    uuid: str
    profile: str  # e.g. 1g.10gb
    memory_mib: int
    multiprocessors: int
    placement_start: int = 0
    placement_size: int = 1
    copy_engines: int = 0
    decoders: int = 0
    encoders: int = 0
    jpeg_engines: int = 0
    ofa_engines: int = 0


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
    multiprocessors: int
    pci_bus_id: str  # 0000:18:00.0
    pcie_root: str | None = None  # the PCIe root complex (pci0000:15) from sysfs; None: unknown
    numa_node: int | None = None
    mig_enabled: bool = False
    mig_devices: tuple[MigDevice, ...] = ()
    nvlink_peers: tuple[str, ...] = ()  # remote PCI bus ids of active links
    healthy: bool = True


@dataclass(frozen=True)
class NodeGpus:
    driver_version: str  # 580.95.05
    cuda_driver_version: str  # 13.0
    gpus: tuple[Gpu, ...] = field(default_factory=tuple)


_GPU_FIELDS = {"index", "minor", "uuid", "productName", "brand", "architecture", "computeCapability",
               "memoryMiB", "multiprocessors", "pciBusID", "pcieRoot", "numaNode", "migEnabled", "migDevices",
               "nvlinkPeers", "healthy"}
_MIG_FIELDS = {"uuid", "profile", "memoryMiB", "multiprocessors", "placementStart", "placementSize",
               "copyEngines", "decoders", "encoders", "jpegEngines", "ofaEngines"}


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
                ofa_engines=_take(m, "ofaEngines", int, mwhere, 0, False)))
        index = _take(raw, "index", int, where)
        gpus.append(Gpu(
            index=index, minor=_take(raw, "minor", int, where, index, False), uuid=_take(raw, "uuid", str, where),
            product_name=_take(raw, "productName", str, where), brand=_take(raw, "brand", str, where, "Nvidia", False),
            architecture=_take(raw, "architecture", str, where),
            compute_capability=str(_take(raw, "computeCapability", (str, float), where)),
            memory_mib=_take(raw, "memoryMiB", int, where), multiprocessors=_take(raw, "multiprocessors", int, where),
            pci_bus_id=_take(raw, "pciBusID", str, where), pcie_root=_take(raw, "pcieRoot", str, where, None, False),
            numa_node=_take(raw, "numaNode", int, where, None, False),
            mig_enabled=_take(raw, "migEnabled", bool, where, bool(migs), False), mig_devices=tuple(migs),
            nvlink_peers=tuple(_take(raw, "nvlinkPeers", list, where, [], False)),
            healthy=_take(raw, "healthy", bool, where, True, False)))
    return NodeGpus(driver_version=str(_take(data, "driverVersion", str, source)),
                    cuda_driver_version=str(_take(data, "cudaDriverVersion", (str, float), source)),
                    gpus=tuple(gpus))
