"""The NVML backend's reading code against pynvml's own structures and call shapes, with the
driver calls answered by a stand-in (no GPU on the test machines; the device tool runs the real
thing when a GPU is lent)."""

import ctypes
import types

import pynvml
import pytest

from app.reporter import render
from app.reporter.backends import NvmlBackend, profile_name


class Handle:
    def __init__(self, index):
        self.index = index


def stub_module(xid_events):
    nv = types.ModuleType("pynvml")
    nv.__dict__.update({k: v for k, v in vars(pynvml).items() if not k.startswith("nvml")})
    gpus = [Handle(0), Handle(1)]
    memory = types.SimpleNamespace(total=81920 << 20)

    def placements(h, profile_id, found, count):
        known = {0: [(i, 1) for i in range(7)], 4: [(0, 8)]}.get(profile_id)
        if known is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        count._obj.value = len(known)
        if found is not None:
            for slot, (start, size) in zip(found, known):
                slot.start, slot.size = start, size
        return pynvml.NVML_SUCCESS

    def profile_info(h, profile_id):
        if profile_id not in (0, 4):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        slices, mb, sm = (1, 9856, 14) if profile_id == 0 else (7, 80896, 98)
        return types.SimpleNamespace(id=profile_id, sliceCount=slices, memorySizeMB=mb, multiprocessorCount=sm,
                                     copyEngineCount=slices, decoderCount=0, encoderCount=0, jpegCount=0, ofaCount=0)

    def fabric(h, ref):
        if h.index == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        info = ref._obj
        info.state = pynvml.NVML_GPU_FABRIC_STATE_COMPLETED
        info.cliqueId = 7
        for i in range(16):
            info.clusterUuid[i] = i + 1
        return pynvml.NVML_SUCCESS

    def event_wait(events, timeout):
        if not xid_events:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        device, xid = xid_events.pop(0)
        return types.SimpleNamespace(device=gpus[device], eventData=xid)

    def nvlink_state(h, link):
        if link >= 2:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return pynvml.NVML_FEATURE_ENABLED

    def attributes(h):  # a full GPU: NotSupported on some drivers (seen on an H200, driver 580.159.04)
        if h.index == 1:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return types.SimpleNamespace(multiprocessorCount=108)

    calls = dict(
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlEventSetCreate=lambda: object(),
        nvmlDeviceRegisterEvents=lambda h, kind, events: None, nvmlEventSetWait=event_wait,
        nvmlDeviceGetCount=lambda: len(gpus), nvmlDeviceGetHandleByIndex=lambda i: gpus[i],
        nvmlDeviceGetUUID=lambda h: f"GPU-{h.index:04d}", nvmlSystemGetDriverVersion=lambda: "580.95.05",
        nvmlSystemGetCudaDriverVersion_v2=lambda: 13000, nvmlDeviceGetCudaComputeCapability=lambda h: (8, 0),
        nvmlDeviceGetPciInfo=lambda h: types.SimpleNamespace(busId=f"00000000:0{7 + h.index}:00.0".encode()),
        nvmlDeviceGetMigMode=lambda h: (0, 0), nvmlDeviceGetMinorNumber=lambda h: h.index,
        nvmlDeviceGetName=lambda h: b"NVIDIA A100-SXM4-80GB", nvmlDeviceGetBrand=lambda h: pynvml.NVML_BRAND_NVIDIA,
        nvmlDeviceGetArchitecture=lambda h: 7, nvmlDeviceGetMemoryInfo=lambda h: memory,
        nvmlDeviceGetAttributes=attributes,
        nvmlDeviceGetNumaNodeId=lambda h: 0, nvmlDeviceGetAddressingMode=lambda h: [2, 0][h.index],
        nvmlDeviceGetGpuFabricInfo=fabric, nvmlDeviceGetGpuInstanceProfileInfo=profile_info,
        nvmlDeviceGetGpuInstancePossiblePlacements=placements, nvmlDeviceGetNvLinkState=nvlink_state,
        nvmlDeviceGetNvLinkRemotePciInfo=lambda h, link: types.SimpleNamespace(
            busId=f"00000000:0{8 - h.index}:00.0".encode()))
    nv.__dict__.update(calls)
    nv.nvmlEventTypeXidCriticalError = pynvml.nvmlEventTypeXidCriticalError
    return nv


@pytest.fixture
def backend(monkeypatch):
    events = [(0, 13), (1, 79)]  # 13: the application's fault; 79: the GPU fell off the bus
    monkeypatch.setitem(__import__("sys").modules, "pynvml", stub_module(events))
    yield NvmlBackend(sysfs="/nonexistent", partitionable=True)


def test_gpu_facts_read_through_pynvml(backend):
    node = backend.read()
    first, second = node.gpus
    assert node.driver_version == "580.95.05" and node.cuda_driver_version == "13.0"
    assert first.pci_bus_id == "0000:07:00.0" and first.pcie_root is None  # no sysfs here: omitted
    assert first.addressing_mode == "ATS" and second.addressing_mode == "None"
    assert first.fabric_clique == "01020304-0506-0708-090a-0b0c0d0e0f10.7" and second.fabric_clique is None
    assert first.healthy and (second.healthy, second.xid) == (False, 79)
    # GPU 1's own attributes are NotSupported: its SM count is the full-GPU GI profile's
    assert (first.multiprocessors, second.multiprocessors) == (108, 98)
    assert [(p.profile, p.gi_profile_id, len(p.placements)) for p in first.mig_profiles] == [
        ("1g.10gb", 0, 7), ("7g.80gb", 4, 1)]


def test_what_nvml_reads_renders_and_validates(backend):
    import kubernetes_validate
    node = backend.read()
    for s in render.slices(node, "n", "gpu.nvidia.com", 1, partitionable=True):
        kubernetes_validate.validate(s, "1.34.0", strict=True)
    devices = {d["name"]: d for d in render.devices(node)}
    assert devices["gpu-1"]["taints"][0]["value"] == "79"
    assert devices["gpu-0"]["attributes"]["dra-bridge.io/nvlinkDomain"]["string"].startswith("clique-")
    assert ctypes.sizeof(pynvml.c_nvmlGpuInstancePlacement_t) > 0


def test_an_sm_count_nvml_does_not_give_is_left_out_not_published_as_zero(monkeypatch):
    nv = stub_module([])
    nv.nvmlDeviceGetGpuInstanceProfileInfo = lambda h, p: (_ for _ in ()).throw(
        pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED))  # no MIG: no GI profiles either
    monkeypatch.setitem(__import__("sys").modules, "pynvml", nv)
    node = NvmlBackend(sysfs="/nonexistent").read()
    assert node.gpus[1].multiprocessors is None
    plain = {d["name"]: d for d in render.devices(node)}
    assert "dra-bridge.io/multiprocessors" not in plain["gpu-1"]["capacity"]
    assert plain["gpu-0"]["capacity"]["dra-bridge.io/multiprocessors"] == {"value": "108"}
    shared = {d["name"]: d for d in render.devices(node, shareable=True)}
    assert "dra-bridge.io/multiprocessors" not in shared["gpu-1"]["attributes"]


# What NVML answered on a real H200 (143771 MiB, driver 580.159.04), with NVML's own names.
H200_GI_PROFILES = [(0, 1, 16384, "1g.18gb"), (1, 2, 33280, "2g.35gb"), (2, 3, 71424, "3g.71gb"),
                    (3, 4, 71424, "4g.71gb"), (4, 7, 143360, "7g.141gb"), (7, 1, 16384, "1g.18gb+me"),
                    (9, 1, 33280, "1g.35gb")]


@pytest.mark.parametrize("profile_id,slices,memory_mb,nvml_name", H200_GI_PROFILES)
def test_mig_profile_names_match_nvml_on_a_real_h200(profile_id, slices, memory_mb, nvml_name):
    # 3g/4g: 70.5 GB rounds half away from zero (Go's math.Round), as go-nvlib names them
    assert profile_name(profile_id, slices, memory_mb, 143771 << 20) == nvml_name
