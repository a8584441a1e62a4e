"""A small brownfield cluster for budget tests, on a control plane of its own: one node on the
device plugin (8 nvidia.com/gpu advertised), one whose GPUs NVIDIA's driver publishes, NVIDIA's
DeviceClasses, dra-bridge's RBAC; and what the tests read back (GPUs a pod holds, our CLI)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT
from tests.e2e.cluster import ControlPlane
from tests.e2e.conftest import INSTALLED_KINDS, NVIDIA_CLASSES, rendered_manifests
from tests.e2e.test_brownfield import report, set_allocatable

PLUGIN_NODE, DRA_NODE = "plugin-0", "dra-0"


def install(plane: ControlPlane, namespaces: dict[str, dict]) -> None:
    """namespaces: name -> labels."""
    plane.apply([d for d in rendered_manifests(plane) if d["kind"] in INSTALLED_KINDS])
    plane.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
                 for name, labels in namespaces.items()])
    plane.apply([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {
        "kubernetes.io/hostname": n}}} for n in (PLUGIN_NODE, DRA_NODE)])
    set_allocatable(plane, PLUGIN_NODE, {"nvidia.com/gpu": "8"})
    set_allocatable(plane, DRA_NODE, {})
    plane.apply(NVIDIA_CLASSES)
    assert report(plane, DRA_NODE, "publish").returncode == 0


def gpus_held(plane: ControlPlane, pod: dict) -> int:
    """GPUs a bound pod holds: device-plugin GPUs it asks for, devices its allocated claims hold
    (a claim deleted meanwhile holds none)."""
    if not pod["spec"].get("nodeName"):
        return 0
    limits = pod["spec"]["containers"][0]["resources"].get("limits") or {}
    devices = 0
    for status in pod.get("status", {}).get("resourceClaimStatuses") or []:
        found = plane.kubectl("get", "resourceclaim", status["resourceClaimName"], "-n", pod["metadata"]["namespace"],
                              "-o", "json", check=False)
        if found.returncode == 0:
            allocation = (json.loads(found.stdout).get("status") or {}).get("allocation") or {}
            devices += len((allocation.get("devices") or {}).get("results") or [])
    return int(limits.get("nvidia.com/gpu", 0)) + devices


def dra_bridge(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess:
    """Our CLI against the cluster, as its admin."""
    return subprocess.run([sys.executable, "-m", "app", *args, "--kubeconfig", plane.admin_kubeconfig],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
