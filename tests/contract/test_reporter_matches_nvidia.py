"""Our slices, field by field, against what NVIDIA's DRA driver publishes for the same GPUs.

The expected devices are reconstructed by hand from NVIDIA/k8s-dra-driver-gpu main (v0.5.0-dev,
commit 2240711, May 2026), cmd/gpu-kubelet-plugin: GpuInfo.GetDevice / Attributes and
fullGpuCapacity (deviceinfo.go, partitions.go), MigDeviceInfo.GetDevice, CommonAttributesMig,
CommonCapacitiesMig and MigSpecTuple.ToCanonicalName (mig.go), healthEventToTaint
(device_health.go), PartGetDevice / PartSharedCounterSets / PartConsumesCounters and
generateSplitResourceSlices (partitions.go, driver.go). Quantities are written as apimachinery
writes BinarySI (memory in bytes: 40192Mi, 79Gi).
Only our own domain (dra-bridge.io/) may add to what NVIDIA publishes.
"""

import pathlib

import kubernetes_validate
import yaml

from app.reporter import node_from_description, render

FAKE = pathlib.Path(__file__).resolve().parents[2] / "app" / "data" / "fake"
VERSIONS = {"cudaComputeCapability": {"version": "8.0.0"}, "driverVersion": {"version": "580.95.5"},
            "cudaDriverVersion": {"version": "13.0.0"}}
A100 = {"productName": {"string": "NVIDIA A100-SXM4-80GB"}, "brand": {"string": "Nvidia"},
        "architecture": {"string": "Ampere"}, **VERSIONS}


def node(name):
    return node_from_description(yaml.safe_load((FAKE / f"{name}.yaml").read_text()), name)


def nvidia_view(device: dict) -> dict:
    """The device without the facts we add under our own domain."""
    ours = render.EXTRA_DOMAIN + "/"
    out = {k: v for k, v in device.items() if k not in ("attributes", "capacity")}
    out["attributes"] = {k: v for k, v in device["attributes"].items() if not k.startswith(ours)}
    out["capacity"] = {k: v for k, v in device["capacity"].items() if not k.startswith(ours)}
    return out


def by_name(devices):
    return {d["name"]: d for d in devices}


def test_whole_gpu_is_published_as_nvidia_publishes_it():
    [h100] = [d for d in render.devices(node("h100x8")) if d["name"] == "gpu-0"]
    assert nvidia_view(h100) == {
        "name": "gpu-0",
        "attributes": {
            "type": {"string": "gpu"}, "uuid": {"string": "GPU-8c1e2d3f-0000-4a5b-9c6d-7e8f9a0b1c00"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"}, "brand": {"string": "Nvidia"},
            "architecture": {"string": "Hopper"}, "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "580.95.5"}, "cudaDriverVersion": {"version": "13.0.0"},
            "resource.kubernetes.io/pciBusID": {"string": "0000:18:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:15"}},
        "capacity": {"memory": {"value": "81559Mi"}}}


def test_mig_device_name_attributes_and_capacities_match_nvidias():
    mig = by_name(render.devices(node("a100-mig")))["gpu-1-mig-3g40gb-2-0"]
    assert nvidia_view(mig) == {
        "name": "gpu-1-mig-3g40gb-2-0",  # gpu-<parent minor>-mig-<profile without dots>-<GI profile id>-<start>
        "attributes": {
            "type": {"string": "mig"}, "uuid": {"string": "MIG-0b100000-1111-5222-8333-444455550000"},
            "parentUUID": {"string": "GPU-5a6b7c8d-0001-4e1f-8a2b-3c4d5e6f7a01"}, "profile": {"string": "3g.40gb"},
            **A100, "resource.kubernetes.io/pciBusID": {"string": "0000:08:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}},
        "capacity": {"multiprocessors": {"value": "42"}, "copyEngines": {"value": "3"}, "decoders": {"value": "2"},
                     "encoders": {"value": "0"}, "jpegEngines": {"value": "0"}, "ofaEngines": {"value": "0"},
                     "memory": {"value": "40192Mi"},
                     **{f"memorySlice{i}": {"value": "1"} for i in range(4)}}}


def test_coherent_memory_fabric_gpus_and_nvidias_health_taints():
    devices = by_name(render.devices(node("gb200x4")))
    gpu0 = devices["gpu-0"]
    assert gpu0["attributes"]["addressingMode"] == {"string": "ATS"}
    assert "taints" not in gpu0
    # Fatal XID: NVIDIA's health monitor taints the device (key in its domain, value the XID).
    assert devices["gpu-3"]["taints"] == [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    # One NVLink fabric clique: the GPUs share a domain the planner's matchAttribute can use.
    domains = {d["attributes"]["dra-bridge.io/nvlinkDomain"]["string"] for d in devices.values()}
    assert domains == {"clique-3f1c0a2b-1d2e-4f50-8a9b-0c1d2e3f4a5b.7"}


def test_no_attribute_nvidia_does_not_publish_sits_in_its_domain():
    nvidia_gpu = {"type", "uuid", "productName", "brand", "architecture", "cudaComputeCapability", "driverVersion",
                  "cudaDriverVersion", "addressingMode", "resource.kubernetes.io/pciBusID",
                  "resource.kubernetes.io/pcieRoot"}
    nvidia_mig = (nvidia_gpu | {"parentUUID", "profile"})
    for fake in FAKE.glob("*.yaml"):
        for device in render.devices(node(fake.stem)):
            names = set(nvidia_view(device)["attributes"])
            allowed = nvidia_mig if device["attributes"]["type"]["string"] == "mig" else nvidia_gpu
            assert names <= allowed, (fake.stem, device["name"], names - allowed)


def test_partitionable_mig_is_rendered_as_nvidias_dynamic_mig():
    slices = render.slices(node("a100-mig"), "n", "gpu.nvidia.com", 1, partitionable=True)
    for s in slices:
        kubernetes_validate.validate(s, "1.34.0", strict=True)
    counters_slice, *device_slices = slices
    assert "devices" not in counters_slice["spec"]  # 1.35+: counters in a slice of their own, first
    [counter_set] = counters_slice["spec"]["sharedCounters"]
    assert counter_set["name"] == "gpu-2-counter-set"
    # The per-capacity maximum over all profiles (7g.80gb here) plus one counter per memory slice.
    assert counter_set["counters"] == {
        "multiprocessors": {"value": "98"}, "copy-engines": {"value": "7"}, "decoders": {"value": "5"},
        "encoders": {"value": "0"}, "jpeg-engines": {"value": "1"}, "ofa-engines": {"value": "1"},
        "memory": {"value": "79Gi"}, **{f"memory-slice-{i}": {"value": "1"} for i in range(8)}}
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in slices} == {len(slices)}
    devices = by_name(d for s in device_slices for d in s["spec"]["devices"])
    full = devices["gpu-2"]
    assert full["consumesCounters"] == [{"counterSet": "gpu-2-counter-set", "counters": counter_set["counters"]}]
    assert nvidia_view(full)["capacity"] == {
        "multiprocessors": {"value": "98"}, "copyEngines": {"value": "7"}, "decoders": {"value": "5"},
        "encoders": {"value": "0"}, "jpegEngines": {"value": "1"}, "ofaEngines": {"value": "1"},
        "memory": {"value": "79Gi"}}
    media = devices["gpu-2-mig-1g10gb-me-7-3"]  # 1g.10gb+me: GI profile 7, placement 3
    assert nvidia_view(media) == {
        "name": "gpu-2-mig-1g10gb-me-7-3",
        "attributes": {"type": {"string": "mig"}, "parentUUID": {"string": "GPU-5a6b7c8d-0002-4e1f-8a2b-3c4d5e6f7a02"},
                       "profile": {"string": "1g.10gb+me"}, **A100,
                       "resource.kubernetes.io/pciBusID": {"string": "0000:09:00.0"},
                       "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"}},
        "capacity": {"multiprocessors": {"value": "14"}, "copyEngines": {"value": "1"}, "decoders": {"value": "1"},
                     "encoders": {"value": "0"}, "jpegEngines": {"value": "1"}, "ofaEngines": {"value": "1"},
                     "memory": {"value": "9856Mi"}},
        "consumesCounters": [{"counterSet": "gpu-2-counter-set", "counters": {
            "multiprocessors": {"value": "14"}, "copy-engines": {"value": "1"}, "decoders": {"value": "1"},
            "encoders": {"value": "0"}, "jpeg-engines": {"value": "1"}, "ofa-engines": {"value": "1"},
            "memory": {"value": "9856Mi"}, "memory-slice-3": {"value": "1"}}}]}
    # GPUs already split by hand keep their MIG devices; whole GPUs stay whole.
    assert "gpu-0-mig-1g10gb-0-0" in devices and "gpu-3" in devices
    assert sum(1 for n in devices if n.startswith("gpu-2-mig-")) == 7 + 7 + 3 + 2 + 1
