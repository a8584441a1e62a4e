"""Issue 58: NVIDIA's own device plugin (k8s-device-plugin v0.17.4) on a real node, over the test
NVML library, in the configurations users run: what the kubelet then advertises (the resource
names and counts dra-bridge reads: MIG strategies mixed and single, time-slicing with
renameByDefault false and true), that a pod asking one of them runs with NVIDIA's environment
naming the device it got, and what `dra-bridge plan --inventory live` decides for that pod when
the other node publishes the same GPUs through the DRA plugin."""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import ROOT
import json

from tests.e2e.conftest import NVIDIA_CLASSES, wait_for
from tests.e2e.realnode import DRA_LABEL, PLUGIN_LABEL, WORKLOAD_IMAGE, RealNode
from tests.e2e.twonode import dra_bridge
from tests.nvml import nvidia

pytestmark = [pytest.mark.realnode, pytest.mark.nvidia, pytest.mark.timeout(900)]
FAKE = ROOT / "app" / "data" / "fake"


def uuids(description) -> set[str]:
    gpus = yaml.safe_load((FAKE / description).read_text())["gpus"]
    return {g["uuid"] for g in gpus} | {m["uuid"] for g in gpus for m in g.get("migDevices") or []}


CASES = {
    # name: (description, plugin flags, what the kubelet advertises, the resource a pod asks,
    #        what `plan` says of that pod with the same GPUs published on the DRA side)
    "default": ("h100x8.yaml", [], {"nvidia.com/gpu": "8"}, "nvidia.com/gpu", ("migrated", "rewrite", "")),
    "mig-mixed": ("a100-mig.yaml", ["--mig-strategy=mixed"],
                  {"nvidia.com/gpu": "6", "nvidia.com/mig-1g.10gb": "8", "nvidia.com/mig-2g.20gb": "1",
                   "nvidia.com/mig-3g.40gb": "1"}, "nvidia.com/mig-1g.10gb", ("migrated", "rewrite", "")),
    # nvidia.com/gpu is a MIG device here, which only GFD's product label on the pod says: without
    # it the claim would ask for a whole GPU, and none is published: kept on the device plugin.
    "mig-single": (None, ["--mig-strategy=single"], {"nvidia.com/gpu": "56"}, "nvidia.com/gpu",
                   ("unchanged", "legacy", "the planned claim could never be satisfied here")),
    # Gap, said in issue 58's note: nothing on this pod says its node time-slices (no GFD label),
    # so it is rewritten onto a whole GPU where the plugin gave it a quarter of one.
    "time-slicing": ("h100x8.yaml", ["--config-file={config}"], {"nvidia.com/gpu": "32"}, "nvidia.com/gpu",
                     ("migrated", "rewrite", "")),
    # a share by its name: left on the device plugin until the admin prices it (fractional: legacy)
    "time-slicing-renamed": ("h100x8.yaml", ["--config-file={config}"], {"nvidia.com/gpu.shared": "32"},
                             "nvidia.com/gpu.shared", ("needs-attention", "legacy", "its GPU share (nvidia.com/gpu.shared=1)")),
}


@pytest.mark.parametrize("case", list(CASES))
def test_what_nvidias_plugin_advertises_and_hands_a_pod(real_plane, tmp_path, case):
    plane, agents = real_plane.plane, real_plane.agents
    description, flags, advertised, resource, planned = CASES[case]
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
        status, path, reasons = plan_of(plane, agents, description, tmp_path, resource)
        assert (status, path) == planned[:2] and planned[2] in " ".join(reasons), (case, status, path, reasons)
    finally:
        plane.kubectl("delete", "pod", f"asks-{case}", "--ignore-not-found", "--wait=true", timeout=60)
        plane.kubectl("label", "node", "rn-0", f"{PLUGIN_LABEL}-")
        wait_for(lambda: not (agents.agents.get(("rn-0", "deviceplugin"))), 30, "the plugin stopped")


def plan_of(plane, agents, description, folder, resource) -> tuple[str, str, list[str]]:
    """(status, path, reasons) `plan --inventory live` gives a pod asking one `resource`, with rn-1
    publishing the same GPUs through the DRA plugin."""
    agents.gear["rn-1"] = description
    plane.apply(NVIDIA_CLASSES)
    plane.kubectl("label", "node", "rn-1", f"{DRA_LABEL}=true", "--overwrite")
    try:
        wait_for(lambda: plane.json("resourceslices", "--field-selector=spec.nodeName=rn-1")["items"], 60,
                 "rn-1's slices")
        manifest = folder / "pod.yaml"
        manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "asks",
                                        "namespace": "default"}, "spec": {"containers": [{
                                            "name": "main", "image": WORKLOAD_IMAGE,
                                            "resources": {"limits": {resource: "1"}}}]}}))
        result = dra_bridge(plane, "plan", "-f", str(manifest), "--inventory", "live", "-o", "report")
        [report] = json.loads(result.stdout)["objects"]
        return report["status"], report["path"], report["reasons"]
    finally:
        plane.kubectl("label", "node", "rn-1", f"{DRA_LABEL}-")
        wait_for(lambda: not plane.json("resourceslices", "--field-selector=spec.nodeName=rn-1")["items"], 60,
                 "rn-1's slices withdrawn")
