"""One real control plane per e2e run, with dra-bridge installed as an operator would: RBAC,
ServiceAccounts and webhook configurations from manifests/, NVIDIA's DeviceClasses, GPU nodes
published by our reporter (fake backend), and our webhook serving on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
import yaml

from app import certs
from tests.conftest import ROOT
from tests.e2e.cluster import ControlPlane, GoUnavailable, build, free_port, kube_minor, kubeconfig
from tests.manifests_tree import operator_tree

# GPU nodes: name -> fake GPU description; plus one node without GPUs.
GPU_NODES = {"gpu-h100-0": "h100x8.yaml", "gpu-l4-0": "l4x4.yaml", "gpu-shared-0": "a100-mig.yaml"}
SHAREABLE_NODES = {"gpu-shared-0"}  # published with --shareable: consumable capacity
# Published by the reporter in shadow mode (as the shipped DaemonSet runs it): never allocated,
# judged by the webhook as NVIDIA's devices. GPU 3 carries a fatal XID taint.
SHADOW_NODES = {"gpu-shadow-0": "gb200x4.yaml"}
CPU_NODE = "cpu-0"
INSTALLED_KINDS = {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                   "ConfigMap", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
# NVIDIA's DRA driver chart defines these two classes (deviceclass-gpu.yaml, deviceclass-mig.yaml).
NVIDIA_CLASSES = [
    {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": f"{kind}.nvidia.com"},
     "spec": {"selectors": [{"cel": {"expression": (
         f"device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{kind}'")}}]}}
    for kind in ("gpu", "mig")]
POLICY = {"apiVersion": "dra-bridge.io/v1alpha1", "kind": "Policy",
          "defaults": {"mode": "warn"}, "namespaces": [{"names": ["strict"], "mode": "enforce"}]}
NAMESPACES = {"team-a": {"dra-bridge.io/migrate": "enabled"}, "strict": {"dra-bridge.io/migrate": "enabled"},
              "plain": {}}


def requires_kube(release: str, why: str):
    """A test that needs Kubernetes `release` or newer (`make e2e KUBE_VERSION=...` runs others):
    skipped on an older control plane, saying why."""
    minor = int(release.split(".")[1])
    return pytest.mark.skipif(kube_minor() < minor, reason=f"needs Kubernetes {release}+: {why} "
                                                            f"(this run: 1.{kube_minor()})")


def wait_for(check, timeout_s=90.0, what="condition", interval=0.5):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"{what} not reached in {timeout_s}s (last: {last!r})")


@pytest.fixture(scope="session")
def binaries():
    try:
        return build()
    except GoUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def kwok_binary():
    """KWOK (tests/e2e/kwok.py), built from the module proxy as the control plane is."""
    from tests.e2e import kwok

    try:
        return kwok.build()
    except GoUnavailable as exc:
        pytest.skip(str(exc))


@contextlib.contextmanager
def own_plane(binaries, tmp_path_factory, name: str, **flags):
    """A control plane of its own for a module (or the session), stopped however the tests end.
    flags: ControlPlane's gates and runtime_config."""
    plane = ControlPlane(tmp_path_factory.mktemp(name), binaries, **flags).start()
    try:
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def cluster(binaries, tmp_path_factory):
    with own_plane(binaries, tmp_path_factory, "control-plane") as plane:
        install(plane)
        yield plane


def rendered_manifests(plane: ControlPlane) -> list[dict]:
    text = plane.kubectl("kustomize", str(operator_tree())).stdout
    return [d for d in yaml.safe_load_all(text) if d]


def install(plane: ControlPlane) -> None:
    plane.apply([d for d in rendered_manifests(plane) if d["kind"] in INSTALLED_KINDS])
    plane.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
                 for name, labels in NAMESPACES.items()])
    nodes = [*GPU_NODES, *SHADOW_NODES, CPU_NODE]
    plane.apply([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n, "labels": {
        "kubernetes.io/hostname": n}}} for n in nodes])
    status = {"capacity": {"cpu": "64", "memory": "512Gi", "pods": "110"},
              "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"},
              "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "e2e"}]}
    for n in nodes:
        plane.kubectl("patch", "node", n, "--subresource=status", "--type=merge", "-p",
                      json.dumps({"status": status}))
    plane.apply(NVIDIA_CLASSES)
    for node, description in {**GPU_NODES, **SHADOW_NODES}.items():
        result = run_reporter(plane, node, description, reporter_kubeconfig(plane, node))
        assert result.returncode == 0, result.stderr


def reporter_kubeconfig(plane: ControlPlane, node: str) -> str:
    """Credentials as the DaemonSet's pod on `node` has them: a token bound to that pod, which
    names its node (what the reporter's admission policy checks)."""
    pod = f"reporter-{node}"
    [daemonset] = [d for d in rendered_manifests(plane) if d["kind"] == "DaemonSet"]
    template = daemonset["spec"]["template"]  # the DaemonSet's own pod, placed on `node`
    if template["spec"].get("runtimeClassName"):  # what NVIDIA's GPU operator installs on a GPU cluster
        plane.apply([{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                      "metadata": {"name": template["spec"]["runtimeClassName"]},
                      "handler": template["spec"]["runtimeClassName"]}])
    plane.apply([{"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": pod, "namespace": daemonset["metadata"]["namespace"],
                               "labels": template["metadata"].get("labels", {})},
                  "spec": {**template["spec"], "nodeName": node}}])
    token = plane.kubectl("create", "token", "dra-bridge-reporter", "-n", "dra-bridge", "--duration=2h",
                          "--bound-object-kind=Pod", f"--bound-object-name={pod}").stdout.strip()
    return kubeconfig(plane.dir / f"reporter-{node}.kubeconfig", plane.server, plane.ca, token)


def run_reporter(plane: ControlPlane, node: str, description: str, config: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "reporter", "--backend",
                           f"fake:{ROOT / 'app' / 'data' / 'fake' / description}", "--node-name", node,
                           "--mode", "shadow" if node in SHADOW_NODES else "publish", "--kubeconfig", config, "--max-rounds", "1",
                           "--health-port", "0", *(["--shareable"] if node in SHAREABLE_NODES else [])],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)


class Webhook:
    """`dra-bridge serve` on loopback with the webhook ServiceAccount's token and a live inventory."""

    def __init__(self, plane: ControlPlane, *extra: str, bundle=None, name: str = "webhook"):
        """extra: more `serve` flags; by default template collection every second (tests see it).
        bundle: the certificates of another replica (one Secret, as a Deployment mounts it)."""
        self.plane, self.name = plane, name
        self.extra = extra or ("--template-gc-grace", "3", "--template-gc-interval", "1")
        self.port = free_port()
        self.pki = plane.dir / "webhook-pki"
        self.bundle = bundle or certs.write_bundle(str(self.pki), ["localhost", "127.0.0.1"])
        (plane.dir / "policy.yaml").write_text(yaml.safe_dump(POLICY))
        self.kubeconfig = kubeconfig(plane.dir / "webhook.kubeconfig", plane.server, plane.ca,
                                     plane.token("dra-bridge", "dra-bridge"))
        self.process = None

    def start(self) -> "Webhook":
        env = {k: v for k, v in os.environ.items() if not k.startswith("DRA_BRIDGE_")}
        self.log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--tls-cert", self.bundle.cert, "--tls-key", self.bundle.key, "--inventory", "live",
             "--kubeconfig", self.kubeconfig, "--policy", str(self.plane.dir / "policy.yaml"),
             "--policy-configmap", "dra-bridge/dra-bridge-policy",
             # the API server keeps idle connections 90 s: a test's teardown does not wait for them
             *(() if "--drain-seconds" in self.extra else ("--drain-seconds", "0")), *self.extra],
            stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        wait_for(self.ready, 60, "webhook /readyz")
        return self

    @property
    def log_path(self) -> pathlib.Path:
        return self.plane.dir / f"{self.name}.log"

    def get(self, path: str, timeout: float = 5) -> tuple[int, str]:
        """(status, body) of a GET on the webhook's own port (/readyz, /metrics)."""
        import ssl
        import urllib.error
        import urllib.request

        context = ssl.create_default_context(cafile=self.bundle.ca_cert)
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}{path}", context=context,
                                        timeout=timeout) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def ready(self) -> bool:
        try:
            return self.get("/readyz", timeout=2)[0] == 200
        except OSError as exc:
            if self.process.poll() is not None:
                raise AssertionError(f"webhook exited:\n{self.log_path.read_text()[-3000:]}") from exc
            return False

    def stop(self, timeout: float = 20) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(timeout=timeout)

    def configurations(self) -> list[dict]:
        """The webhook configurations from manifests/, pointed at this server."""
        out = []
        for doc in rendered_manifests(self.plane):
            if doc["kind"] not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                continue
            for hook in doc["webhooks"]:
                path = hook["clientConfig"]["service"]["path"]
                hook["clientConfig"] = {"url": f"https://127.0.0.1:{self.port}{path}",
                                        "caBundle": self.plane.ca_bundle(pathlib.Path(self.bundle.ca_cert))}
            out.append(doc)
        return out


@pytest.fixture(scope="session")
def webhook(cluster):
    server = Webhook(cluster).start()
    cluster.apply(server.configurations())
    yield server
    server.stop()


@pytest.fixture(scope="session")
def node_binaries():
    """(node programs, runtime) for the tests marked realnode; they skip, naming what is missing,
    where the machine cannot run a kubelet, except where DRA_BRIDGE_REQUIRE_REALNODE is set (CI)."""
    from tests.e2e import realnode

    try:
        return realnode.build()
    except realnode.NodeUnavailable as exc:
        if os.environ.get("DRA_BRIDGE_REQUIRE_REALNODE"):
            raise
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def real_plane(binaries, node_binaries, tmp_path_factory):
    """A control plane with real nodes rn-0 and rn-1 (no GPU agents running until a test labels
    the node)."""
    from types import SimpleNamespace

    from tests.e2e import realnode

    node_bin, runtime_bin = node_binaries
    with own_plane(binaries, tmp_path_factory, "real-nodes") as plane:
        nodes, agents = {}, None
        try:
            for index, name in enumerate(("rn-0", "rn-1")):
                nodes[name] = realnode.RealNode(plane, name, index, node_bin, runtime_bin).start()
            agents = realnode.NodeAgents(plane, nodes, {n: "h100x8.yaml" for n in nodes}).start()
            yield SimpleNamespace(plane=plane, nodes=nodes, agents=agents)
        finally:
            if agents is not None:
                agents.stop()
            for node in nodes.values():
                node.stop()
