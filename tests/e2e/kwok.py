"""KWOK (sigs.k8s.io/kwok, pinned in tests/kwok/go.mod) beside an e2e control plane: it plays the
kubelet of fake nodes, those annotated kwok.x-k8s.io/node=fake. Its default stages mark such a
node Ready, start the pods bound to it (Running, an IP) and finish the ones being deleted once
their grace period is over. Built from the module proxy, cached as the control plane is."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

from tests import gobuild

HERE = pathlib.Path(__file__).resolve().parents[1] / "kwok"
FAKE = ("kwok.x-k8s.io/node", "fake")


def build() -> pathlib.Path:
    return gobuild.build(HERE, ("go.mod", "go.sum", "tools.go"), ("sigs.k8s.io/kwok/cmd/kwok",), "KWOK") / "kwok"


def default_stages() -> str:
    """KWOK's own "fast" stages (node Ready; pods Running, completed, finished when deleted), read
    from the module's source in the Go module cache (`go build` put it there)."""
    found = subprocess.run([gobuild.go_command("KWOK"), "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"], cwd=HERE,
                           capture_output=True, text=True, timeout=120, env={**os.environ, "GOFLAGS": "-mod=readonly"})
    if found.returncode != 0:
        raise RuntimeError(f"KWOK's module is not in the module cache: {found.stderr[-2000:]}")
    stages = pathlib.Path(found.stdout.strip()) / "kustomize" / "stage"
    files = sorted((stages / "node" / "fast").glob("*.yaml")) + sorted((stages / "pod" / "fast").glob("*.yaml"))
    return "\n---\n".join(f.read_text() for f in files if f.name != "kustomization.yaml")


def fake_node(name: str, allocatable: dict[str, str], labels: dict[str, str] | None = None) -> dict:
    """A Node KWOK manages, with what its kubelet would advertise (device plugins' resources too)."""
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", **allocatable}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {FAKE[0]: FAKE[1]},
                         "labels": {"kubernetes.io/hostname": name, "type": "kwok", **(labels or {})}},
            "status": {"allocatable": resources, "capacity": resources}}


class Kwok:
    """The kwok process for one control plane."""

    def __init__(self, plane, binary: pathlib.Path):
        self.plane, self.binary, self.process = plane, binary, None
        self.log_path = plane.dir / "kwok.log"

    def start(self) -> "Kwok":
        config = self.plane.dir / "kwok.yaml"
        config.write_text(default_stages())
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
