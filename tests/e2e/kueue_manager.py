"""Kueue's manager, built from its Go module (tests/e2e/kueue/go.mod pins sigs.k8s.io/kueue), run
on loopback against an e2e control plane: its CRDs and webhooks from the module's own config/,
its webhooks pointed at this process, its Configuration both in the file it starts with and in
ConfigMap kueue-system/kueue-manager-config (where dra-bridge reads it)."""

from __future__ import annotations

import os
import pathlib
import subprocess

import yaml

from app import certs
from tests import gobuild
from tests.e2e.cluster import ControlPlane, free_port

HERE = pathlib.Path(__file__).resolve().parent / "kueue"
SOURCES = ("go.mod", "go.sum", "tools.go")
METRICS_CERTS = pathlib.Path("/etc/kueue/metrics/certs")
# Kinds whose webhooks the manager serves with the integrations below.
SERVED = {"jobs", "pods", "clusterqueues", "localqueues", "resourceflavors", "workloads", "cohorts"}


def build() -> pathlib.Path:
    return gobuild.build(HERE, SOURCES, ("sigs.k8s.io/kueue/cmd/kueue",), "Kueue's manager") / "kueue"


def module_dir() -> pathlib.Path:
    go = gobuild.go_command("Kueue's manager")
    out = subprocess.run([go, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kueue"], cwd=HERE, capture_output=True,
                         text=True, check=True, env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"})
    return pathlib.Path(out.stdout.strip())


def configuration(mappings: list[dict] | None, webhook_port: int, cert_dir: str, namespaces: list[str],
                  dra_gate: bool = True) -> dict:
    out = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kueue-system",
           "health": {"healthProbeBindAddress": f"127.0.0.1:{free_port()}"},
           "metrics": {"bindAddress": "0"},
           "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": cert_dir},
           "leaderElection": {"leaderElect": False},
           "internalCertManagement": {"enable": False},
           "managedJobsNamespaceSelector": {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                                                  "operator": "In", "values": namespaces}]},
           "integrations": {"frameworks": ["batch/job", "pod"]},
           "featureGates": {"DynamicResourceAllocation": dra_gate, "VisibilityOnDemand": False}}
    if mappings:
        out["resources"] = {"deviceClassMappings": mappings}
    return out


class Kueue:
    def __init__(self, plane: ControlPlane, binary: pathlib.Path, namespaces: list[str]):
        self.plane, self.binary, self.namespaces = plane, binary, namespaces
        self.port = free_port()
        self.pki = plane.dir / "kueue-pki"
        self.bundle = certs.write_bundle(str(self.pki), ["localhost", "127.0.0.1"])
        # controller-runtime's webhook server reads tls.crt / tls.key from its certDir.
        (self.pki / "tls.crt").write_bytes(pathlib.Path(self.bundle.cert).read_bytes())
        (self.pki / "tls.key").write_bytes(pathlib.Path(self.bundle.key).read_bytes())
        self.process = None
        self.log_path = plane.dir / "kueue.log"
        # Without its internal cert management the manager reads its metrics certificate from a
        # fixed path (cmd/kueue/main.go), even with metrics off.
        METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        for name in ("tls.crt", "tls.key"):
            if not (METRICS_CERTS / name).exists():
                (METRICS_CERTS / name).write_bytes((self.pki / name).read_bytes())

    def install(self) -> None:
        """CRDs, namespace, and Kueue's own webhooks pointed at this process (served kinds only)."""
        source = module_dir() / "config" / "components"
        for crd in sorted((source / "crd" / "bases").glob("*.yaml")):
            self.plane.kubectl("apply", "--server-side", "-f", str(crd), timeout=120)
        self.plane.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
        self.plane.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}])
        ca = self.plane.ca_bundle(pathlib.Path(self.bundle.ca_cert))
        hooks = []
        for doc in yaml.safe_load_all((source / "webhook" / "manifests.yaml").read_text()):
            doc["metadata"]["name"] = "kueue-" + doc["metadata"]["name"]
            kept = []
            for hook in doc["webhooks"]:
                if not {r for rule in hook["rules"] for r in rule["resources"]} & SERVED:
                    continue
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{self.port}{path}", "caBundle": ca}
                if "pods" in {r for rule in hook["rules"] for r in rule["resources"]}:
                    hook["namespaceSelector"] = {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                                                       "operator": "In", "values": self.namespaces}]}
                kept.append(hook)
            doc["webhooks"] = kept
            hooks.append(doc)
        self.hooks = hooks

    def start(self, mappings: list[dict] | None = None, dra_gate: bool = True) -> "Kueue":
        """dra_gate False: Kueue counts claims as nothing (kueue#10504)."""
        config = configuration(mappings, self.port, str(self.pki), self.namespaces, dra_gate)
        path = self.plane.dir / "kueue-config.yaml"
        path.write_text(yaml.safe_dump(config))
        self.plane.apply([{"apiVersion": "v1", "kind": "ConfigMap",
                           "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                           "data": {"controller_manager_config.yaml": yaml.safe_dump(config)}}])
        self.log = open(self.log_path, "ab")
        env = {**os.environ, "KUBECONFIG": self.plane.admin_kubeconfig}
        self.process = subprocess.Popen([str(self.binary), f"--config={path}"],
                                        stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.plane.apply(self.hooks)
        return self

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=20)

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    @staticmethod
    def queue_objects(namespace: str, gpus: int) -> list[dict]:
        """A ResourceFlavor, a ClusterQueue with `gpus` of nvidia.com/gpu, and a LocalQueue `lq`."""
        api = "kueue.x-k8s.io/v1beta2"
        return [{"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
                {"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": "gpus"},
                 "spec": {"namespaceSelector": {}, "resourceGroups": [
                     {"coveredResources": ["cpu", "nvidia.com/gpu"], "flavors": [{"name": "default", "resources": [
                         {"name": "cpu", "nominalQuota": "64"},
                         {"name": "nvidia.com/gpu", "nominalQuota": str(gpus)}]}]}]}},
                {"apiVersion": api, "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": namespace},
                 "spec": {"clusterQueue": "gpus"}}]

    def usage(self) -> int:
        """nvidia.com/gpu the ClusterQueue has admitted (reserved), as Kueue reports it."""
        status = self.plane.json("clusterqueue", "gpus").get("status") or {}
        total = 0
        for flavor in status.get("flavorsReservation") or status.get("flavorsUsage") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") == "nvidia.com/gpu":
                    total += int(str(resource.get("total", "0")))
        return total
