"""Issue 48: real nodes. A kubelet and containerd per node; NVIDIA's own device plugin (issue 58,
over the test NVML library serving h100x8.yaml) registers `nvidia.com/gpu` with the kubelet and
hands a container the UUIDs of its GPUs; the DRA kubelet plugin (tests/e2e/node/draplugin)
publishes the devices the reporter reads through that NVML and prepares claims through CDI."""

from __future__ import annotations

import pytest

import yaml

from tests.conftest import ROOT
from tests.e2e.conftest import NVIDIA_CLASSES, wait_for
from tests.e2e.realnode import DRA_LABEL, PLUGIN_LABEL, WORKLOAD_IMAGE, RealNode

pytestmark = [pytest.mark.realnode, pytest.mark.nvidia, pytest.mark.timeout(600)]
UUIDS = {g["uuid"] for g in yaml.safe_load((ROOT / "app" / "data" / "fake" / "h100x8.yaml").read_text())["gpus"]}


def pod(name, resources=None, claims=None, namespace="default", stop_delay_s=2):
    container = {"name": "main", "image": WORKLOAD_IMAGE, "imagePullPolicy": "Never",
                 "env": [{"name": "STOP_DELAY_S", "value": str(stop_delay_s)}]}
    spec = {"terminationGracePeriodSeconds": 10, "automountServiceAccountToken": False, "containers": [container]}
    if resources:
        container["resources"] = {"limits": resources}
    if claims:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claims}]
        container["resources"] = {"claims": [{"name": "gpu"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


ONE_GPU = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "one-gpu", "namespace": "default"},
           "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}}


def running(plane, name, namespace="default"):
    found = plane.json("pod", name, "-n", namespace)
    return found if found["status"].get("phase") == "Running" else None


def test_both_plugins_serve_pods_on_real_nodes(real_plane):
    plane, nodes, agents = real_plane.plane, real_plane.nodes, real_plane.agents
    plane.kubectl("label", "node", "rn-0", f"{PLUGIN_LABEL}=true", "--overwrite")
    plane.kubectl("label", "node", "rn-1", f"{DRA_LABEL}=true", "--overwrite")
    wait_for(lambda: plane.json("node", "rn-0")["status"]["allocatable"].get("nvidia.com/gpu") == "8", 60,
             "the device plugin's GPUs in rn-0's status")
    wait_for(lambda: plane.json("resourceslices", "--field-selector=spec.nodeName=rn-1")["items"], 60,
             "rn-1's slices from the DRA kubelet plugin")
    plane.apply(NVIDIA_CLASSES + [ONE_GPU, pod("legacy", resources={"nvidia.com/gpu": "2"}), pod("dra", claims="one-gpu")])
    legacy = wait_for(lambda: running(plane, "legacy"), 90, "the device plugin pod Running")
    dra = wait_for(lambda: running(plane, "dra"), 90, "the claim's pod Running")
    assert (legacy["spec"]["nodeName"], dra["spec"]["nodeName"]) == ("rn-0", "rn-1")
    # NVIDIA's plugin's Allocate: the container's environment names the two GPUs by UUID
    [visible] = [line.split("=", 1)[1] for line in RealNode.container_log(legacy).splitlines()
                 if line.startswith("NVIDIA_VISIBLE_DEVICES=")]
    assert len(set(visible.split(","))) == 2 and set(visible.split(",")) <= UUIDS, visible
    [claim] = plane.json("resourceclaims")["items"]
    [device] = [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]]
    seen = RealNode.container_log(dra).splitlines()
    # what the container sees came through CDI, written by the plugin's prepare
    assert f"NVIDIA_VISIBLE_DEVICES={device}" in seen and f"DRA_BRIDGE_TEST_CLAIM=default/{claim['metadata']['name']}" in seen
    assert agents.journal("rn-1") == [f"prepared default/{claim['metadata']['name']}"]

    plane.kubectl("delete", "pod", "dra", "legacy", "--wait=true", timeout=60)
    wait_for(lambda: agents.journal("rn-1")[-1:] == [f"unprepared default/{claim['metadata']['name']}"], 30,
             "the claim unprepared by the kubelet")
    wait_for(lambda: not plane.json("resourceclaims")["items"], 30, "the pod's claim deleted")
    assert not list(nodes["rn-1"].cdi_dir.iterdir())

    # A stopped device plugin leaves its resource in capacity (allocatable drops to 0), as real
    # kubelets do: what the rollout must not read as "still served".
    plane.kubectl("label", "node", "rn-0", f"{PLUGIN_LABEL}-")
    wait_for(lambda: plane.json("node", "rn-0")["status"]["allocatable"].get("nvidia.com/gpu") == "0", 30,
             "rn-0's GPUs gone from allocatable")
    assert plane.json("node", "rn-0")["status"]["capacity"].get("nvidia.com/gpu") == "8"
    assert agents.errors == []
