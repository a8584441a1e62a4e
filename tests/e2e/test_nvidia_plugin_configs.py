"""Issue 58: NVIDIA's own device plugin (k8s-device-plugin v0.17.4) on a real node, over the test
NVML library, in the configurations users run: what the kubelet then advertises (the resource
names and counts dra-bridge reads: MIG strategies mixed and single, time-slicing with
renameByDefault false and true) and that a pod asking one of them runs with NVIDIA's
environment naming the device it got."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import ROOT
from tests.e2e.conftest import wait_for
from tests.e2e.realnode import PLUGIN_LABEL, WORKLOAD_IMAGE, RealNode
from tests.nvml import nvidia

pytestmark = [pytest.mark.realnode, pytest.mark.nvidia, pytest.mark.timeout(900)]
FAKE = ROOT / "app" / "data" / "fake"


def uuids(description) -> set[str]:
    gpus = yaml.safe_load((FAKE / description).read_text())["gpus"]
    return {g["uuid"] for g in gpus} | {m["uuid"] for g in gpus for m in g.get("migDevices") or []}


CASES = {
    # name: (description, plugin flags, what the kubelet advertises, the resource a pod asks)
    "default": ("h100x8.yaml", [], {"nvidia.com/gpu": "8"}, "nvidia.com/gpu"),
    "mig-mixed": ("a100-mig.yaml", ["--mig-strategy=mixed"],
                  {"nvidia.com/gpu": "6", "nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-2g.20gb": "1",
                   "nvidia.com/mig-3g.40gb": "1"}, "nvidia.com/mig-1g.10gb"),
    "mig-single": (None, ["--mig-strategy=single"], {"nvidia.com/gpu": "56"}, "nvidia.com/gpu"),
    "time-slicing": ("h100x8.yaml", ["--config-file={config}"], {"nvidia.com/gpu": "32"}, "nvidia.com/gpu"),
    "time-slicing-renamed": ("h100x8.yaml", ["--config-file={config}"], {"nvidia.com/gpu.shared": "32"},
                             "nvidia.com/gpu.shared"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_what_nvidias_plugin_advertises_and_hands_a_pod(real_plane, tmp_path, case):
    plane, agents = real_plane.plane, real_plane.agents
    description, flags, advertised, resource = CASES[case]
    description = description or str(nvidia.uniform_mig(tmp_path))
    config = nvidia.time_slicing(tmp_path, case.endswith("renamed"))
    agents.gear["rn-0"], agents.plugin_flags["rn-0"] = description, [f.format(config=config) for f in flags]
    plane.kubectl("label", "node", "rn-0", f"{PLUGIN_LABEL}=true", "--overwrite")
    try:
        def served():
            allocatable = plane.json("node", "rn-0")["status"]["allocatable"]
            offered = {k: v for k, v in allocatable.items() if k.startswith("nvidia.com/") and v != "0"}
            return offered if offered == advertised else None
        wait_for(served, 60, f"{case}: the kubelet advertising {advertised}")
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"asks-{case}", "namespace": "default"},
               "spec": {"nodeName": "rn-0", "terminationGracePeriodSeconds": 5, "automountServiceAccountToken": False,
                        "containers": [{"name": "main", "image": WORKLOAD_IMAGE, "imagePullPolicy": "Never",
                                        "resources": {"limits": {resource: "1"}}}]}}
        plane.apply([pod])
        running = wait_for(lambda: (p := plane.json("pod", f"asks-{case}"))["status"].get("phase") == "Running" and p,
                           90, f"{case}: the pod Running")
        seen = wait_for(lambda: [line for line in RealNode.container_log(running).splitlines()
                                 if line.startswith("NVIDIA_VISIBLE_DEVICES=")], 30, f"{case}: the pod's log")
        [visible] = [line.split("=", 1)[1] for line in seen]
        assert visible in uuids(description), (case, visible)
        if resource.startswith("nvidia.com/mig-") or case == "mig-single":
            assert visible.startswith("MIG-"), (case, visible)
    finally:
        plane.kubectl("delete", "pod", f"asks-{case}", "--ignore-not-found", "--wait=true", timeout=60)
        plane.kubectl("label", "node", "rn-0", f"{PLUGIN_LABEL}-")
        wait_for(lambda: not (agents.agents.get(("rn-0", "deviceplugin"))), 30, "the plugin stopped")
