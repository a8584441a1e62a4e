"""KWOK (sigs.k8s.io/kwok, pinned in tests/kwok/go.mod) beside an e2e control plane: it plays the
kubelet of fake nodes, those annotated kwok.x-k8s.io/node=fake. Its default stages mark such a
node Ready, start the pods bound to it (Running, an IP) and finish the ones being deleted once
their grace period is over. Built from the module proxy, cached as the control plane is."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import threading

from tests import gobuild

HERE = pathlib.Path(__file__).resolve().parents[1] / "kwok"
FAKE = ("kwok.x-k8s.io/node", "fake")


def build() -> pathlib.Path:
    return gobuild.build(HERE, ("go.mod", "go.sum", "tools.go"), ("sigs.k8s.io/kwok/cmd/kwok",), "KWOK") / "kwok"


def default_stages(jobs_complete: bool = True) -> str:
    """KWOK's own "fast" stages (node Ready; pods Running, completed, finished when deleted), read
    from the module's source in the Go module cache (`go build` put it there). jobs_complete
    False leaves out the stage that completes a Job's pod as soon as it runs: Jobs then run
    until deleted, as a long training job does."""
    found = subprocess.run([gobuild.go_command("KWOK"), "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"], cwd=HERE,
                           capture_output=True, text=True, timeout=120, env={**os.environ, "GOFLAGS": "-mod=readonly"})
    if found.returncode != 0:
        raise RuntimeError(f"KWOK's module is not in the module cache: {found.stderr[-2000:]}")
    stages = pathlib.Path(found.stdout.strip()) / "kustomize" / "stage"
    files = sorted((stages / "node" / "fast").glob("*.yaml")) + sorted((stages / "pod" / "fast").glob("*.yaml"))
    skipped = {"kustomization.yaml"} | (set() if jobs_complete else {"pod-complete.yaml"})
    return "\n---\n".join(f.read_text() for f in files if f.name not in skipped)


def fake_node(name: str, allocatable: dict[str, str], labels: dict[str, str] | None = None) -> dict:
    """A Node KWOK manages, with what its kubelet would advertise (device plugins' resources too)."""
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", **allocatable}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {FAKE[0]: FAKE[1]},
                         "labels": {"kubernetes.io/hostname": name, "type": "kwok", **(labels or {})}},
            "status": {"allocatable": resources, "capacity": resources}}


class Kwok:
    """The kwok process for one control plane."""

    def __init__(self, plane, binary: pathlib.Path, jobs_complete: bool = True):
        self.plane, self.binary, self.process, self.jobs_complete = plane, binary, None, jobs_complete
        self.log_path = plane.dir / "kwok.log"

    def start(self) -> "Kwok":
        config = self.plane.dir / "kwok.yaml"
        config.write_text(default_stages(self.jobs_complete))
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(self.binary), f"--kubeconfig={self.plane.admin_kubeconfig}", f"--config={config}",
                 f"--manage-nodes-with-annotation-selector={FAKE[0]}={FAKE[1]}", "--node-lease-duration-seconds=40",
                 "--cidr=10.200.0.0/16", "--server-address=127.0.0.1:0"],
                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "HOME": str(self.plane.dir)})
        return self

    def add_nodes(self, nodes: list[dict]) -> None:
        """Create the nodes; their status is KWOK's to keep, from what they were created with."""
        self.plane.apply([{k: v for k, v in n.items() if k != "status"} for n in nodes])
        for node in nodes:
            self.plane.kubectl("patch", "node", node["metadata"]["name"], "--subresource=status", "--type=merge",
                               "-p", json.dumps({"status": node["status"]}))

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)


class GpuAgents:
    """What the GPU Operator's two DaemonSets would do on KWOK nodes, from their node labels: the
    device plugin advertises `advertised(node)` while `plugin_label` is on (when it goes,
    allocatable drops to 0 and capacity stays, as a real kubelet shows it); NVIDIA's kubelet
    plugin publishes the node's ResourceSlices (`publish(node)`) while `dra_label` is on, and the
    kubelet deletes them once it goes. KWOK runs pods, not DaemonSets' programs, so nothing else
    reacts to a rollout's label flips there (tests/e2e/realnode.py runs the real plugins)."""

    def __init__(self, plane, advertised, publish, plugin_label: str, dra_label: str,
                 driver: str = "gpu.nvidia.com", interval_s: float = 0.5):
        self.plane, self.advertised, self.publish, self.driver = plane, advertised, publish, driver
        self.plugin_label, self.dra_label, self.interval_s = plugin_label, dra_label, interval_s
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="kwok-gpu-agents")
        self.errors: list[str] = []
        self.reactions = 0

    def start(self) -> "GpuAgents":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=30)

    def _run(self) -> None:
        while not self.stop_event.wait(self.interval_s):
            try:
                self.once()
            except Exception as exc:  # noqa: BLE001 - the caller reads them
                self.errors.append(repr(exc))

    def once(self) -> None:
        nodes = [n for n in self.plane.json("nodes")["items"]
                 if (n["metadata"].get("annotations") or {}).get(FAKE[0]) == FAKE[1]]
        published = {s["spec"].get("nodeName") for s in self.plane.json("resourceslices")["items"]
                     if s["spec"].get("driver") == self.driver}
        for node in nodes:
            name, labels = node["metadata"]["name"], node["metadata"].get("labels") or {}
            resources = self.advertised(name)
            allocatable = node.get("status", {}).get("allocatable") or {}
            wanted = labels.get(self.plugin_label) == "true"
            if wanted and any(allocatable.get(k) != v for k, v in resources.items()):
                self.set_status(name, {"allocatable": resources, "capacity": resources})
            elif not wanted and any(allocatable.get(k, "0") != "0" for k in resources):
                self.set_status(name, {"allocatable": {k: "0" for k in resources}})
            serving = labels.get(self.dra_label) == "true"
            if serving and name not in published:
                self.publish(name)
                self.reactions += 1
            elif not serving and name in published:
                self.plane.kubectl("delete", "resourceslices",
                                   f"--field-selector=spec.nodeName={name},spec.driver={self.driver}")
                self.reactions += 1

    def set_status(self, node: str, status: dict) -> None:
        self.plane.kubectl("patch", "node", node, "--subresource=status", "--type=merge",
                           "-p", json.dumps({"status": status}))
        self.reactions += 1
