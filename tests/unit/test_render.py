import dataclasses
import pathlib

import kubernetes_validate
import pytest
import yaml

from app.common import InputError
from app.reporter import node_from_description, render

FAKE_DIR = pathlib.Path(__file__).resolve().parents[2] / "app" / "data" / "fake"
FAKES = sorted(FAKE_DIR.glob("*.yaml"))


def load(path):
    return node_from_description(yaml.safe_load(path.read_text()), path.name)


@pytest.mark.parametrize("path", FAKES, ids=lambda p: p.stem)
@pytest.mark.parametrize("qualify", [False, True], ids=["publish", "shadow"])
def test_rendered_slices_validate_and_respect_limits(path, qualify):
    for s in render.slices(load(path), "gpu-node-1", "gpu.nvidia.com", 3, "uid-1", qualify):
        kubernetes_validate.validate(s, "1.34.0", strict=True)
        assert len(s["spec"]["devices"]) <= render.MAX_DEVICES_PER_SLICE
        names = [d["name"] for d in s["spec"]["devices"]]
        assert len(names) == len(set(names))
        for d in s["spec"]["devices"]:
            assert len(d["name"]) <= 63
            assert len(d["attributes"]) + len(d["capacity"]) <= 32
            for value in d["attributes"].values():
                assert len(str(next(iter(value.values())))) <= 64
        assert s["spec"]["pool"] == {"name": "gpu-node-1", "generation": 3, "resourceSliceCount": 1}
        assert s["metadata"]["ownerReferences"][0]["kind"] == "Node"


def test_gpu_attributes_follow_nvidia_schema():
    node = load(next(p for p in FAKES if p.stem == "h100x8"))
    [s] = render.slices(node, "n", "gpu.nvidia.com", 1)
    gpu0 = s["spec"]["devices"][0]
    attrs = gpu0["attributes"]
    assert attrs["type"] == {"string": "gpu"}
    assert attrs["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert attrs["architecture"] == {"string": "Hopper"}
    assert attrs["cudaComputeCapability"] == {"version": "9.0.0"}
    assert attrs["driverVersion"] == {"version": "580.95.5"}
    assert attrs["cudaDriverVersion"] == {"version": "13.0.0"}
    assert attrs["resource.kubernetes.io/pciBusID"] == {"string": "0000:18:00.0"}
    assert attrs["resource.kubernetes.io/pcieRoot"] == {"string": "pci0000:15"}  # the root complex, not the bus
    assert attrs["dra-bridge.io/numaNode"] == {"int": 0}
    assert attrs["dra-bridge.io/nvlinkDomain"] == {"string": "nvlink-0000-18-00-0"}  # all-to-all: one domain
    assert gpu0["capacity"]["memory"] == {"value": "81559Mi"}
    assert gpu0["name"] == "gpu-0" and "index" not in attrs and "minor" not in attrs


def test_mig_enabled_gpus_publish_their_mig_devices_instead():
    node = load(next(p for p in FAKES if p.stem == "a100-mig"))
    devices = render.devices(node)
    migs = [d for d in devices if d["attributes"]["type"]["string"] == "mig"]
    gpus = [d for d in devices if d["attributes"]["type"]["string"] == "gpu"]
    assert len(migs) == 10 and len(gpus) == 6
    m = migs[0]["attributes"]
    assert m["profile"] == {"string": "1g.10gb"} and m["dra-bridge.io/parentIndex"] == {"int": 0}
    assert "parentIndex" not in m and "parentMinor" not in m
    assert m["parentUUID"]["string"].startswith("GPU-")
    assert migs[0]["capacity"]["multiprocessors"] == {"value": "14"}
    assert migs[0]["capacity"]["memory"] == {"value": "9728Mi"}


def test_shadow_mode_names_the_nvidia_domain_explicitly():
    node = load(FAKES[0])
    attrs = render.devices(node, qualify=True)[0]["attributes"]
    assert "gpu.nvidia.com/productName" in attrs and "productName" not in attrs
    assert "resource.kubernetes.io/pciBusID" in attrs
    assert "gpu.nvidia.com/memory" in render.devices(node, qualify=True)[0]["capacity"]


def test_large_nodes_split_into_several_slices_of_one_pool():
    node = load(next(p for p in FAKES if p.stem == "l4x4"))
    many = dataclasses.replace(node, gpus=tuple(dataclasses.replace(node.gpus[0], index=i, minor=i, uuid=f"GPU-{i}")
                                               for i in range(300)))
    out = render.slices(many, "big", "gpu.nvidia.com", 2)
    assert [len(s["spec"]["devices"]) for s in out] == [128, 128, 44]
    assert {s["spec"]["pool"]["resourceSliceCount"] for s in out} == {3}
    assert len({s["metadata"]["name"] for s in out}) == 3


def test_unhealthy_gpus_stay_published_with_nvidias_taints():
    node = load(next(p for p in FAKES if p.stem == "h100x8"))
    sick = dataclasses.replace(node, gpus=(dataclasses.replace(node.gpus[0], healthy=False, xid=79),
                                           dataclasses.replace(node.gpus[1], healthy=False)) + node.gpus[2:])
    devices = render.devices(sick)
    assert len(devices) == len(render.devices(node))
    assert devices[0]["taints"] == [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    assert devices[1]["taints"] == [{"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}]
    assert "taints" not in devices[2]


@pytest.mark.parametrize("text, field", [
    ("driverVersion: '1'\ncudaDriverVersion: '1'\ngpus: [{index: 0}]\n", "gpus[0].uuid"),
    ("driverVersion: '1'\ncudaDriverVersion: '1'\ngpus: [{index: x}]\n", "gpus[0].index"),
    ("driverVersion: '1'\ngpus: []\n", "cudaDriverVersion"),
    ("driverVersion: '1'\ncudaDriverVersion: '1'\ngpus: []\nextra: 1\n", "extra"),
])
def test_bad_fake_descriptions_name_the_field(text, field):
    with pytest.raises(InputError) as err:
        node_from_description(yaml.safe_load(text), "f.yaml")
    assert field in str(err.value)


def test_semver_normalises_nvml_versions():
    assert render.semver("580.95.05") == "580.95.5"
    assert render.semver("13.0") == "13.0.0"
    assert render.semver("9") == "9.0.0"


def test_pcie_root_is_read_from_sysfs_as_upstream_does(tmp_path):
    from app.reporter.backends import pcie_root
    devices = tmp_path / "bus" / "pci" / "devices"
    devices.mkdir(parents=True)
    deep = tmp_path / "devices" / "pci0000:15" / "0000:15:01.0" / "0000:16:00.0" / "0000:18:00.0"
    deep.mkdir(parents=True)
    (devices / "0000:18:00.0").symlink_to("../../../devices/pci0000:15/0000:15:01.0/0000:16:00.0/0000:18:00.0")
    assert pcie_root("0000:18:00.0", str(tmp_path)) == "pci0000:15"
    assert pcie_root("0000:19:00.0", str(tmp_path)) is None  # no such device: attribute omitted
    (devices / "0000:1a:00.0").symlink_to("../../../elsewhere/0000:1a:00.0")
    assert pcie_root("0000:1a:00.0", str(tmp_path)) is None
    assert pcie_root("not-a-bdf", str(tmp_path)) is None


def test_gpus_behind_one_root_share_the_attribute_and_unknown_roots_are_omitted():
    node = load(FAKE_DIR / "h100x8.yaml")
    roots = [d["attributes"]["resource.kubernetes.io/pcieRoot"]["string"] for d in render.devices(node)]
    assert roots == ["pci0000:15"] * 4 + ["pci0000:97"] * 4
    unknown = dataclasses.replace(node, gpus=tuple(dataclasses.replace(g, pcie_root=None) for g in node.gpus))
    assert all("resource.kubernetes.io/pcieRoot" not in d["attributes"] for d in render.devices(unknown))


def test_shareable_gpus_allow_multiple_allocations_and_whole_requests_stay_exclusive():
    from decimal import Decimal

    from app import dra
    from app.dra.search import consumed
    [device] = render.devices(load(FAKE_DIR / "l4x4.yaml"), shareable=True)[:1]
    assert device["allowMultipleAllocations"] is True
    memory = device["capacity"]["memory"]
    assert memory["requestPolicy"]["default"] == memory["value"]
    assert device["capacity"]["dra-bridge.io/cores"]["value"] == "100"
    for s in render.slices(load(FAKE_DIR / "l4x4.yaml"), "n", "gpu.nvidia.com", 1, shareable=True):
        kubernetes_validate.validate(s, "1.34.0", strict=True)
    ix = dra.build_index(dra.Inventory(slices=render.slices(load(FAKE_DIR / "l4x4.yaml"), "n", "gpu.nvidia.com", 1,
                                                            shareable=True)))
    capacity = ix.shape_capacity[ix.devices[0].shape]
    # No amount asked: the whole device by the request policy's default; a share takes its amount.
    assert consumed(None, capacity)["memory"] == capacity["memory"][0]
    share = consumed({"memory": Decimal(3000 * 2**20)}, capacity)
    assert share["memory"] == Decimal(3000 * 2**20) and share["dra-bridge.io/cores"] == 1


@pytest.mark.parametrize("path", FAKES, ids=lambda p: p.stem)
def test_every_capacity_of_a_shareable_gpu_has_a_request_policy(path):
    # Without one, each share would consume the whole capacity and the GPU could not be shared.
    for device in render.devices(load(path), shareable=True):
        if device.get("allowMultipleAllocations"):
            assert all("requestPolicy" in c for c in device["capacity"].values()), device["name"]
