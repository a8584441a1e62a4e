"""Issue 48: real nodes. A kubelet and containerd per node, NVIDIA's two node agents played by
real plugins (tests/e2e/node/): the device plugin registers `nvidia.com/gpu` with the kubelet,
the DRA kubelet plugin publishes the node's devices and prepares claims through CDI."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import NVIDIA_CLASSES, wait_for
from tests.e2e.realnode import DRA_LABEL, PLUGIN_LABEL, WORKLOAD_IMAGE, RealNode

pytestmark = [pytest.mark.realnode, pytest.mark.timeout(600)]


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
    assert RealNode.container_log(legacy).count(",") == 1  # two devices from Allocate
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
