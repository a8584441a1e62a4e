"""Cases shaped like NVIDIA clusters (issue 24), for the oracle to judge with us.

Nodes are what our reporter publishes for its fake GPUs in NVIDIA's attribute schema (8×H100,
4×L4, 8×A100 with static and dynamic MIG on shared counters, 4×GB200 with a tainted GPU), some
with devices that allow multiple allocations; NVIDIA's two DeviceClasses; claims that hold whole
devices, MIG devices and shares; and claims written as users write them (a model, at least some
memory, a MIG profile, aligned GPUs with a fallback, a share of memory), a third of them sized to
what a node just has or just lacks, some unguarded (reading an attribute only some devices have:
a runtime error on the nodes where the search reaches such a device).
"""

from __future__ import annotations

import pathlib
from functools import lru_cache

import yaml
from hypothesis import strategies as st

from app.reporter import node_from_description, render

FAKE = pathlib.Path(__file__).resolve().parents[2] / "app" / "data" / "fake"
KINDS = ("h100x8", "l4x4", "a100-mig", "gb200x4")
D = "gpu.nvidia.com"
MODELS = {"h100x8": "H100", "l4x4": "L4", "a100-mig": "A100", "gb200x4": "GB200"}
PROFILES = ("1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb")


@lru_cache(maxsize=None)
def _description(kind: str) -> str:
    return (FAKE / f"{kind}.yaml").read_text()


def _node(kind: str, name: str):
    return node_from_description(yaml.safe_load(_description(kind)), name)


def _selector(expression: str) -> dict:
    return {"cel": {"expression": expression}}


@st.composite
def _gpu_request(draw, name: str, sizes: list[int]) -> dict:
    """Whole GPUs: a model, some memory, a compute capability, or nothing more; a count near a
    node's size a third of the time."""
    selectors = []
    pick = draw(st.integers(0, 6))
    if pick == 1:
        model = draw(st.sampled_from(sorted(set(MODELS.values()))))
        selectors.append(_selector(f"device.attributes['{D}'].productName.contains('{model}')"))
    elif pick == 2:
        memory = draw(st.sampled_from(("20Gi", "40Gi", "80Gi", "90Gi")))
        selectors.append(_selector(f"device.capacity['{D}'].memory.compareTo(quantity('{memory}')) >= 0"))
    elif pick == 3:
        version = draw(st.sampled_from(("8.0.0", "9.0.0", "10.0.0")))
        selectors.append(_selector(f"device.attributes['{D}'].cudaComputeCapability.isGreaterThan(semver('{version}'))"
                                   f" || device.attributes['{D}'].cudaComputeCapability == semver('{version}')"))
    elif pick == 5:  # unguarded, as users write it: an error wherever a device lacks the attribute
        selectors.append(_selector("device.attributes['dra-bridge.io'].nvlinkDomain != ''"))
    elif pick == 6:
        selectors.append(_selector(f"device.attributes['{D}'].profile == '1g.10gb'"))
    elif pick == 4:
        selectors.append(_selector(f"'productName' in device.attributes['{D}'] && "
                                   f"device.attributes['{D}'].productName.lowerAscii().matches('(^|[^a-z0-9])l4([^a-z0-9]|$)')"))
    count = draw(st.sampled_from(sizes + [s + 1 for s in sizes])) if draw(st.integers(0, 2)) == 0 else \
        draw(st.integers(1, 3))
    exactly = {"deviceClassName": "gpu.nvidia.com", "count": count}
    if selectors:
        exactly["selectors"] = selectors
    if draw(st.integers(0, 5)) == 0:
        exactly["tolerations"] = [{"key": f"{D}/xid", "operator": "Exists", "effect": "NoSchedule"}]
    return {"name": name, "exactly": exactly}


@st.composite
def _claim(draw, sizes: list[int]) -> dict:
    kind = draw(st.sampled_from(("gpu", "gpu", "mig", "share", "aligned", "two")))
    constraints = []
    if kind == "gpu":
        requests = [draw(_gpu_request("gpus", sizes))]
    elif kind == "mig":
        profile = draw(st.sampled_from(PROFILES))
        requests = [{"name": "mig", "exactly": {"deviceClassName": "mig.nvidia.com", "count": draw(st.integers(1, 3)),
                                                "selectors": [_selector(f"device.attributes['{D}'].profile == '{profile}'")]}}]
    elif kind == "share":
        amount = draw(st.sampled_from(("10Gi", "40Gi", "70Gi")))
        requests = [{"name": "share", "firstAvailable": [
            {"name": "shared", "deviceClassName": "gpu.nvidia.com", "selectors": [_selector("device.allowMultipleAllocations")],
             "capacity": {"requests": {"memory": amount}}},
            {"name": "whole", "deviceClassName": "gpu.nvidia.com"}][:draw(st.integers(1, 2))]}]
    elif kind == "aligned":
        count = draw(st.sampled_from((2, 4, 8)))
        attribute = draw(st.sampled_from(("resource.kubernetes.io/pcieRoot", "dra-bridge.io/numaNode",
                                          "dra-bridge.io/nvlinkDomain")))
        requests = [{"name": "gpus", "firstAvailable": [
            {"name": "aligned", "deviceClassName": "gpu.nvidia.com", "count": count},
            {"name": "any", "deviceClassName": "gpu.nvidia.com", "count": count}][:draw(st.integers(1, 2))]}]
        constraints = [{"requests": ["gpus/aligned"], "matchAttribute": attribute}]
    else:
        requests = [draw(_gpu_request("a", sizes)), draw(_gpu_request("b", sizes))]
        if draw(st.booleans()):
            constraints = [{"requests": ["a", "b"], "matchAttribute": f"{D}/productName"}]
    devices = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "claim", "namespace": "default", "uid": "uid-claim"}, "spec": {"devices": devices}}


def _holder(n: int, results: list[dict]) -> dict:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": f"holder-{n}", "namespace": "default", "uid": f"uid-holder-{n}"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": {"allocation": {"devices": {"results": results}}}}


@st.composite
def nvidia_case(draw) -> dict:
    slices, nodes, devices, sizes = [], [], [], []
    for i in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(KINDS))
        name = f"node-{i}"
        shareable = kind in ("h100x8", "l4x4") and draw(st.integers(0, 2)) == 0
        partitionable = kind == "a100-mig" and draw(st.booleans())
        published = render.slices(_node(kind, name), name, D, 1, shareable=shareable, partitionable=partitionable)
        slices += published
        nodes.append({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}})
        node_devices = [(name, d) for s in published for d in s["spec"].get("devices") or []]
        devices += node_devices
        sizes.append(sum(1 for _n, d in node_devices if d["attributes"]["type"]["string"] == "gpu"))
    holders = []
    for node, device in devices:
        if draw(st.integers(0, 5)) != 0:
            continue
        result = {"request": "r", "driver": D, "pool": node, "device": device["name"]}
        if device.get("allowMultipleAllocations"):
            result.update(shareID=f"share-{len(holders)}", consumedCapacity={"memory": draw(st.sampled_from(("10Gi", "60Gi")))})
        holders.append(_holder(len(holders), [result]))
    return {"nodes": nodes, "classes": render.device_classes(), "slices": slices, "claims": [draw(_claim(sorted(set(sizes))))],
            "allocated": [], "allocated_claims": holders, "node": nodes[0], "features_used": ["nvidia"]}


def export(case: dict) -> list[tuple[int, dict]]:
    """The case as `kubectl get ... -o yaml` would export it: what `check --inventory FILE` reads."""
    objects = list(case["slices"]) + list(case["classes"]) + list(case["allocated_claims"])
    objects += [{"apiVersion": "v1", "kind": "Node", **n} for n in case["nodes"]]
    return [(0, o) for o in objects]
