"""GPU backends: real NVML (pynvml / nvidia-ml-py) and a fake one read from YAML."""

from __future__ import annotations

import ctypes
import math
import os
import re
from typing import Protocol

import yaml

from app.common import BridgeError, InputError

from .gpuinfo import GI_PROFILE_IDS, Gpu, MigDevice, MigProfile, NodeGpus, node_from_description

# Distinct exit codes so a DaemonSet's logs and restarts say what is wrong.
EXIT_NO_LIBRARY, EXIT_NO_DRIVER, EXIT_NO_GPUS = 3, 4, 5
EXIT_NVML_CALL = 7  # an NVML call every slice needs failed (a GPU lost mid-read)


class BackendError(BridgeError):
    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class Backend(Protocol):
    def read(self) -> NodeGpus: ...

    def close(self) -> None: ...


class FakeBackend:
    """GPUs from a YAML description (app/data/fake/*.yaml), re-read on every call."""

    def __init__(self, path: str):
        self.path = path

    def read(self) -> NodeGpus:
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = yaml.safe_load(handle)
        except OSError as exc:
            raise BackendError(f"fake GPU description {self.path}: {exc.strerror}", 2) from exc
        except yaml.YAMLError as exc:
            raise BackendError(f"fake GPU description {self.path}: not valid YAML: {exc}", 2) from exc
        try:
            return node_from_description(data, self.path)
        except InputError as exc:
            raise BackendError(f"fake GPU description {exc}", 2) from exc

    def close(self) -> None:
        pass


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def sysfs_bus_id(nvml_bus_id) -> str:
    """A PCI address as sysfs writes it (0000:07:00.0): NVML pads the domain to 8 digits, in
    upper case."""
    bus_id = _text(nvml_bus_id).lower()
    if bus_id.count(":") == 2 and len(bus_id.split(":")[0]) == 8:
        bus_id = bus_id[4:]
    return bus_id


# XIDs caused by the application (13, 31, 43, 45, 68, 109): NVIDIA's device plugin and DRA
# driver skip them by default rather than mark the GPU unhealthy.
NVML_GI_PROFILE_COUNT = 17  # NVML_GPU_INSTANCE_PROFILE_1_SLICE (0) .. 2_SLICE_ALL_ME (16)
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


def pcie_root(bus_id: str, sysfs: str = "/sys") -> str | None:
    """The PCIe root complex of a PCI device ("pci0000:15"), as upstream's deviceattribute helper
    finds it: /sys/bus/pci/devices/<bdf> links to /sys/devices/<root>/.../<bdf>. None when sysfs
    does not say (NVIDIA's driver then omits the attribute)."""
    if not _BDF.match(bus_id):
        return None
    link = os.path.join(sysfs, "bus", "pci", "devices", bus_id)
    try:
        target = os.readlink(link)
    except OSError:
        return None
    target = os.path.normpath(os.path.join(os.path.dirname(link), target))
    devices = os.path.join(os.path.normpath(sysfs), "devices") + os.sep
    if not target.startswith(devices) or os.path.basename(target) != bus_id:
        return None
    root = target[len(devices):].split(os.sep)[0]
    return root if root.startswith("pci") else None


class NvmlBackend:
    """Reads every GPU through NVML. Critical XID events mark a GPU unhealthy until restart."""

    def __init__(self, sysfs: str = "/sys", partitionable: bool = False):
        self.sysfs, self.partitionable = sysfs, partitionable
        try:
            import pynvml
        except ImportError:
            raise BackendError("NVML Python bindings missing: pip install nvidia-ml-py", EXIT_NO_LIBRARY) from None
        self.nvml = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError_LibraryNotFound:
            raise BackendError("libnvidia-ml.so not found: is the NVIDIA driver installed and mounted "
                               "into this container?", EXIT_NO_LIBRARY) from None
        except pynvml.NVMLError as exc:
            raise BackendError(f"NVML could not start: {exc} (no NVIDIA driver loaded?)", EXIT_NO_DRIVER) from exc
        self.unhealthy: dict[str, int] = {}  # uuid -> the critical XID seen
        self._sm_counts: dict[str, int | None] = {}  # uuid -> SM count (fixed while the process runs)
        self._events = None
        self._watch_xid()

    def _watch_xid(self) -> None:
        nv = self.nvml
        try:
            self._events = nv.nvmlEventSetCreate()
            for i in range(nv.nvmlDeviceGetCount()):
                handle = nv.nvmlDeviceGetHandleByIndex(i)
                try:
                    nv.nvmlDeviceRegisterEvents(handle, nv.nvmlEventTypeXidCriticalError, self._events)
                except nv.NVMLError:
                    pass  # not supported on this GPU: health then comes from disappearance only
        except nv.NVMLError:
            self._events = None

    def _drain_xid(self) -> None:
        nv = self.nvml
        while self._events is not None:
            try:
                event = nv.nvmlEventSetWait(self._events, 0)
            except nv.NVMLError:
                return  # timeout: no pending event
            xid = int(getattr(event, "eventData", 0) or 0)
            if xid in APPLICATION_XIDS:
                continue  # the application's fault, not the GPU's (as NVIDIA's health monitor skips them)
            self.unhealthy.setdefault(_text(nv.nvmlDeviceGetUUID(event.device)), xid)

    def read(self) -> NodeGpus:
        nv = self.nvml
        self._drain_xid()
        where = "the node's driver and GPU count"
        try:
            driver = _text(nv.nvmlSystemGetDriverVersion())
            cuda = nv.nvmlSystemGetCudaDriverVersion_v2()  # e.g. 13000
            count = nv.nvmlDeviceGetCount()
            if count == 0:
                raise BackendError("NVML sees no GPUs on this node", EXIT_NO_GPUS)
            gpus = []
            for index in range(count):
                where = f"GPU {index}"
                gpus.append(self._gpu(index))
        except nv.NVMLError as exc:  # a fact every slice needs: nothing is published from half a read
            raise BackendError(f"NVML failed reading {where}: {exc}", EXIT_NVML_CALL) from exc
        return NodeGpus(driver_version=driver, cuda_driver_version=f"{cuda // 1000}.{(cuda % 1000) // 10}",
                        gpus=tuple(gpus))

    def _optional(self, fn, *args, default=None):
        try:
            return fn(*args)
        except (self.nvml.NVMLError, AttributeError):
            return default

    def _gpu(self, index: int) -> Gpu:
        nv = self.nvml
        h = nv.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nv.nvmlDeviceGetUUID(h))
        major, minor_cc = nv.nvmlDeviceGetCudaComputeCapability(h)
        bus_id = sysfs_bus_id(nv.nvmlDeviceGetPciInfo(h).busId)
        mig_current = self._optional(lambda: nv.nvmlDeviceGetMigMode(h)[0], default=0)
        return Gpu(
            index=index, minor=self._optional(nv.nvmlDeviceGetMinorNumber, h, default=index), uuid=uuid,
            product_name=_text(nv.nvmlDeviceGetName(h)),
            brand=_brand(nv, self._optional(nv.nvmlDeviceGetBrand, h)),
            architecture=_architecture(nv, self._optional(nv.nvmlDeviceGetArchitecture, h)),
            compute_capability=f"{major}.{minor_cc}",
            memory_mib=nv.nvmlDeviceGetMemoryInfo(h).total // (1024 * 1024),
            multiprocessors=self._multiprocessors(h, uuid),
            pci_bus_id=bus_id, pcie_root=pcie_root(bus_id, self.sysfs), numa_node=self._optional(nv.nvmlDeviceGetNumaNodeId, h),
            mig_enabled=bool(mig_current), mig_devices=self._migs(h) if mig_current else (),
            nvlink_peers=self._nvlinks(h), healthy=uuid not in self.unhealthy, xid=self.unhealthy.get(uuid),
            addressing_mode=self._addressing_mode(h), fabric_clique=self._fabric_clique(h),
            mig_profiles=self._mig_profiles(h) if self.partitionable else ())

    def _multiprocessors(self, h, uuid: str) -> int | None:
        """The GPU's SM count. NVML answers nvmlDeviceGetAttributes only for MIG devices on some
        drivers (an H200 on 580.159: NotSupported); the full-GPU GI profile then says it. None
        (capacity left out) where neither does: 0 would be a wrong fact selectors compare."""
        if uuid not in self._sm_counts:
            nv = self.nvml
            count = self._optional(lambda: nv.nvmlDeviceGetAttributes(h).multiprocessorCount)
            if count is None:
                infos = [self._optional(nv.nvmlDeviceGetGpuInstanceProfileInfo, h, p)
                         for p in range(NVML_GI_PROFILE_COUNT)]
                full = max((i for i in infos if i is not None), key=lambda i: i.sliceCount, default=None)
                count = full.multiprocessorCount if full is not None else None
            self._sm_counts[uuid] = count or None
        return self._sm_counts[uuid]

    def _addressing_mode(self, h) -> str | None:
        """NVIDIA's addressingMode: HMM | ATS, "None" where the platform supports it but it is
        off, and no attribute where NVML says the platform does not support it."""
        nv = self.nvml
        get = getattr(nv, "nvmlDeviceGetAddressingMode", None)
        mode = self._optional(get, h) if get else None
        return {0: "None", 1: "HMM", 2: "ATS"}.get(mode) if isinstance(mode, int) else None

    def _fabric_clique(self, h) -> str | None:
        """'<clusterUUID>.<cliqueId>' of a GPU on a completed NVLink fabric (GB200 NVL)."""
        nv = self.nvml
        if not hasattr(nv, "c_nvmlGpuFabricInfo_t"):
            return None
        info = nv.c_nvmlGpuFabricInfo_t()
        if self._optional(nv.nvmlDeviceGetGpuFabricInfo, h, ctypes.byref(info)) is None:
            return None
        if info.state != getattr(nv, "NVML_GPU_FABRIC_STATE_COMPLETED", 3) or not any(info.clusterUuid):
            return None
        text = bytes(info.clusterUuid).hex()
        return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:32]}.{info.cliqueId}"

    def _placements(self, h, profile_id: int) -> tuple[tuple[int, int], ...]:
        nv = self.nvml
        count = ctypes.c_uint(0)
        if self._optional(nv.nvmlDeviceGetGpuInstancePossiblePlacements, h, profile_id, None,
                          ctypes.byref(count)) is None or not count.value:
            return ()
        found = (nv.c_nvmlGpuInstancePlacement_t * count.value)()
        if self._optional(nv.nvmlDeviceGetGpuInstancePossiblePlacements, h, profile_id, found,
                          ctypes.byref(count)) is None:
            return ()
        return tuple((p.start, p.size) for p in found[:count.value])

    def _mig_profiles(self, h) -> tuple[MigProfile, ...]:
        """The GI profiles this GPU supports and their possible placements (partitionable MIG)."""
        nv = self.nvml
        out = []
        total = nv.nvmlDeviceGetMemoryInfo(h).total
        for profile_id in range(NVML_GI_PROFILE_COUNT):
            info = self._optional(nv.nvmlDeviceGetGpuInstanceProfileInfo, h, profile_id)
            if info is None:
                continue
            placements = self._placements(h, info.id)
            out.append(MigProfile(
                profile=profile_name(profile_id, info.sliceCount, info.memorySizeMB, total),
                gi_profile_id=profile_id, memory_mib=info.memorySizeMB, multiprocessors=info.multiprocessorCount,
                copy_engines=info.copyEngineCount, decoders=info.decoderCount, encoders=info.encoderCount,
                jpeg_engines=info.jpegCount, ofa_engines=info.ofaCount,
                placements=placements))
        return tuple(p for p in out if p.placements)

    def _migs(self, parent) -> tuple[MigDevice, ...]:
        nv = self.nvml
        out = []
        parent_total = nv.nvmlDeviceGetMemoryInfo(parent).total
        for i in range(self._optional(nv.nvmlDeviceGetMaxMigDeviceCount, parent, default=0)):
            mig = self._optional(nv.nvmlDeviceGetMigDeviceHandleByIndex, parent, i)
            if mig is None:
                continue
            attrs = nv.nvmlDeviceGetAttributes(mig)
            memory_mib = attrs.memorySizeMB  # the GI profile's memory, as NVIDIA announces it
            start, size, profile_id = 0, attrs.gpuInstanceSliceCount, None
            gi_id = self._optional(nv.nvmlDeviceGetGpuInstanceId, mig)
            if gi_id is not None:
                gi = self._optional(nv.nvmlDeviceGetGpuInstanceById, parent, gi_id)
                info = self._optional(nv.nvmlGpuInstanceGetInfo, gi) if gi is not None else None
                if info is not None:
                    start, size, profile_id = info.placement.start, info.placement.size, info.profileId
            out.append(MigDevice(
                uuid=_text(nv.nvmlDeviceGetUUID(mig)),
                profile=profile_name(profile_id, attrs.gpuInstanceSliceCount, attrs.memorySizeMB,
                                     parent_total, attrs.computeInstanceSliceCount),
                gi_profile_id=profile_id,
                memory_mib=memory_mib, multiprocessors=attrs.multiprocessorCount, placement_start=start,
                placement_size=size, copy_engines=attrs.sharedCopyEngineCount, decoders=attrs.sharedDecoderCount,
                encoders=attrs.sharedEncoderCount, jpeg_engines=attrs.sharedJpegCount, ofa_engines=attrs.sharedOfaCount))
        return tuple(out)

    def _nvlinks(self, h) -> tuple[str, ...]:
        nv = self.nvml
        peers = []
        for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
            state = self._optional(nv.nvmlDeviceGetNvLinkState, h, link)
            if state is None:
                break
            if state == nv.NVML_FEATURE_ENABLED:
                remote = self._optional(nv.nvmlDeviceGetNvLinkRemotePciInfo, h, link)
                if remote is not None:  # named as the GPUs are, or no peer is ever found
                    peers.append(sysfs_bus_id(remote.busId))
        return tuple(peers)

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except self.nvml.NVMLError:
            pass


def profile_name(gi_profile_id: int | None, gi_slices: int, memory_mb: int, total_bytes: int,
                 ci_slices: int | None = None) -> str:
    """The MIG profile name as NVIDIA's go-nvlib derives it: <g>g.<GB>gb (GB: the memory
    fraction rounded up to eighths of the card, times the card's GiB), the GI profile's
    attribute (+me, +me.all, +gfx, -me), and <c>c. when compute is split."""
    fraction = math.ceil(memory_mb * 1024 * 1024 / total_bytes * 8) / 8 if total_bytes else 0
    # Half away from zero, as Go's math.Round (Python's round() would name H200's 3g.71gb 3g.70gb).
    gb = math.floor(fraction * ((total_bytes + (1 << 30) - 1) >> 30) + 0.5)
    suffix = next((s for (g, s), pid in GI_PROFILE_IDS.items() if pid == gi_profile_id), "")
    name = f"{gi_slices}g.{gb}gb{suffix}"
    return name if ci_slices in (None, 0, gi_slices) else f"{ci_slices}c.{name}"


_ARCHITECTURES = {2: "Kepler", 3: "Maxwell", 4: "Pascal", 5: "Volta", 6: "Turing", 7: "Ampere",
                  8: "Ada Lovelace", 9: "Hopper", 10: "Blackwell"}


def _architecture(nv, value) -> str:
    return _ARCHITECTURES.get(value, "Unknown") if value is not None else "Unknown"


def _brand(nv, value) -> str:
    names = {getattr(nv, k): k.replace("NVML_BRAND_", "").title().replace("_", "")
             for k in dir(nv) if k.startswith("NVML_BRAND_") and k != "NVML_BRAND_COUNT"}
    return names.get(value, "Nvidia") if value is not None else "Nvidia"


def open_backend(spec: str, partitionable: bool = False) -> Backend:
    """'nvml' or 'fake:PATH'. partitionable: also read the MIG profiles each GPU could take."""
    if spec == "nvml":
        return NvmlBackend(partitionable=partitionable)
    if spec.startswith("fake:"):
        return FakeBackend(spec[len("fake:"):])
    raise BackendError(f"--backend: expected 'nvml' or 'fake:FILE', got {spec!r}", 2)
