"""A real control plane on loopback, built from upstream Kubernetes (tests/e2e/go.mod pins
k8s.io/kubernetes and its staging modules at one release): embedded etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, and kubectl of the same release. No kubelet: Node
objects are created directly, so pods get scheduled and their claims allocated, never run."""

from __future__ import annotations

import base64
import json
import os
import pathlib
import secrets
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from app import certs
from tests import gobuild
from tests.gobuild import GoUnavailable  # noqa: F401  (conftest skips on it)

HERE = pathlib.Path(__file__).resolve().parent
SOURCES = ("go.mod", "go.sum", "etcd/main.go")
PACKAGES = ("k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager",
            "k8s.io/kubernetes/cmd/kube-scheduler", "k8s.io/kubernetes/cmd/kubectl", "./etcd")
CONTROLLERS = ("serviceaccount-controller", "serviceaccount-token-controller", "namespace-controller",
               "garbage-collector-controller", "deployment-controller", "replicaset-controller",
               "job-controller", "resourceclaim-controller", "resourcequota-controller", "disruption-controller",
               "statefulset-controller", "daemonset-controller", "persistentvolume-binder-controller",
               "validatingadmissionpolicy-status-controller")


def modfile() -> str:
    """The module file of the release the e2e tier runs: go.mod (1.37.2) unless $KUBE_VERSION names
    another, each with its own go.k1XX.mod and .sum (k8s.io/kubernetes and its staging modules at
    that release): `make e2e KUBE_VERSION=1.34.4`."""
    wanted = os.environ.get("KUBE_VERSION", "").removeprefix("v")
    if not wanted or wanted == _release("go.mod").removeprefix("v"):
        return "go.mod"
    name = f"go.k1{wanted.split('.')[1]}.mod" if wanted.count(".") >= 1 else ""
    if not name or not (HERE / name).exists() or _release(name).removeprefix("v") != wanted:
        known = sorted(_release(p.name) for p in HERE.glob("go*.mod"))
        raise RuntimeError(f"KUBE_VERSION={wanted}: no tests/e2e module file pins it (pinned: {', '.join(known)})")
    return name


def _release(name: str | None = None) -> str:
    """The k8s.io/kubernetes version a module file pins (what `go build` alone would not stamp)."""
    name = name or modfile()
    for line in (HERE / name).read_text().splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "k8s.io/kubernetes":
            return parts[1]
    raise RuntimeError(f"tests/e2e/{name} does not require k8s.io/kubernetes")


def kube_minor() -> int:
    """The minor release of the control plane this run builds (34 for 1.34.4)."""
    return int(_release().split(".")[1])


def build() -> pathlib.Path:
    """The folder with the five binaries for the release's module file, stamped with its release:
    a client that reads /version (Kueue's manager) needs a real one, not v0.0.0-master. Releases
    keep apart (.bin, .bin-k134, ...); 1.38 needs Go 1.27, which the module proxy serves."""
    name, release = modfile(), _release()
    stamp = " ".join(f"-X {package}.{key}={value}" for package in ("k8s.io/component-base/version",
                                                                   "k8s.io/client-go/pkg/version")
                     for key, value in (("gitVersion", release), ("gitMajor", "1"), ("gitMinor", release.split(".")[1])))
    if name == "go.mod":
        return gobuild.build(HERE, SOURCES, PACKAGES, "the e2e control plane", ldflags=stamp)
    sums = name.removesuffix(".mod") + ".sum"
    env = {"GOFLAGS": f"-mod=readonly -modfile={name}"}
    if kube_minor() >= 38:
        env["GOTOOLCHAIN"] = "go1.27.3"
    return gobuild.build(HERE, (name, sums, "etcd/main.go"), PACKAGES, f"the e2e control plane {release}",
                         ldflags=stamp, cache=f".bin-{name.removesuffix('.mod').removeprefix('go.')}", env=env)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kubeconfig(path: pathlib.Path, server: str, ca: pathlib.Path, token: str, namespace: str = "default") -> str:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "e2e",
              "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}],
              "users": [{"name": "e2e", "user": {"token": token}}],
              "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e", "namespace": namespace}}]}
    path.write_text(json.dumps(config))
    return str(path)


class ControlPlane:
    def __init__(self, workdir: pathlib.Path, binaries: pathlib.Path, gates: dict[str, bool] | None = None,
                 runtime_config: str = ""):
        """gates: feature gates turned on or off in every component; runtime_config: API
        versions the API server serves beside its defaults (--runtime-config)."""
        self.dir, self.bin = workdir, binaries
        gate_flag = ",".join(f"{k}={str(v).lower()}" for k, v in (gates or {}).items())
        self.gate_args = [f"--feature-gates={gate_flag}"] if gate_flag else []
        self.api_args = [*self.gate_args, *([f"--runtime-config={runtime_config}"] if runtime_config else [])]
        self.processes: dict[str, subprocess.Popen] = {}
        self.admin_token = secrets.token_hex(16)
        self.server = ""
        self.ca = self.dir / "pki" / "ca.crt"
        self.admin_kubeconfig = ""

    # -- lifecycle -------------------------------------------------------------------------
    def start(self, timeout_s: float = 180) -> "ControlPlane":
        pki = self.dir / "pki"
        bundle = certs.write_bundle(str(pki), ["localhost", "127.0.0.1"])
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        (pki / "sa.key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                       serialization.PrivateFormat.TraditionalOpenSSL,
                                                       serialization.NoEncryption()))
        (pki / "sa.pub").write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                                   serialization.PublicFormat.SubjectPublicKeyInfo))
        (pki / "tokens.csv").write_text(f'{self.admin_token},admin,admin-uid,"system:masters"\n')
        etcd_port, api_port = free_port(), free_port()
        self._run("etcd", "--data-dir", str(self.dir / "etcd"), "--listen-client-url", f"http://127.0.0.1:{etcd_port}",
                  "--listen-peer-url", f"http://127.0.0.1:{free_port()}")
        self.server = f"https://127.0.0.1:{api_port}"
        self._run("kube-apiserver", f"--etcd-servers=http://127.0.0.1:{etcd_port}", "--bind-address=127.0.0.1",
                  "--advertise-address=127.0.0.1", f"--secure-port={api_port}", f"--tls-cert-file={bundle.cert}",
                  f"--tls-private-key-file={bundle.key}", f"--token-auth-file={pki / 'tokens.csv'}",
                  "--authorization-mode=RBAC", "--service-account-issuer=https://kubernetes.default.svc",
                  f"--service-account-key-file={pki / 'sa.pub'}",
                  f"--service-account-signing-key-file={pki / 'sa.key'}",
                  "--service-cluster-ip-range=10.0.0.0/24", "--enable-priority-and-fairness=false",
                  # No kubelet or node lifecycle controller would ever lift the not-ready taint.
                  "--disable-admission-plugins=TaintNodesByCondition",
                  "--endpoint-reconciler-type=none", "--profiling=false", "--v=1", *self.api_args)
        self.admin_kubeconfig = kubeconfig(self.dir / "admin.kubeconfig", self.server, self.ca, self.admin_token)
        self._wait(lambda: self.get("/readyz") == "ok", timeout_s, "kube-apiserver /readyz")
        self._run("kube-controller-manager", f"--kubeconfig={self.admin_kubeconfig}",
                  f"--authentication-kubeconfig={self.admin_kubeconfig}",
                  f"--authorization-kubeconfig={self.admin_kubeconfig}", f"--secure-port={free_port()}",
                  f"--controllers={','.join(CONTROLLERS)}", f"--service-account-private-key-file={pki / 'sa.key'}",
                  f"--root-ca-file={self.ca}", "--leader-elect=false",
                  "--use-service-account-credentials=true",  # each controller as itself, as kubeadm runs them
                  # Quota usage a racing recount left stale is corrected at the next full sync
                  # (default 5 min): the brownfield test waits for it, so sync often.
                  "--resource-quota-sync-period=5s",
                  "--v=1", *self.gate_args)
        self._run("kube-scheduler", f"--kubeconfig={self.admin_kubeconfig}",
                  f"--authentication-kubeconfig={self.admin_kubeconfig}",
                  f"--authorization-kubeconfig={self.admin_kubeconfig}", f"--secure-port={free_port()}",
                  "--leader-elect=false", "--v=1", *self.gate_args)
        # Pods need the default ServiceAccount, which the controller-manager creates.
        self._wait(lambda: self.kubectl("get", "serviceaccount", "default", check=False).returncode == 0,
                   timeout_s, "default ServiceAccount")
        return self

    def stop(self) -> None:
        for name in ("kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            process = self.processes.pop(name, None)
            if process is not None and process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()

    def _run(self, name: str, *args: str) -> None:
        log = open(self.dir / f"{name}.log", "wb")
        self.processes[name] = subprocess.Popen([str(self.bin / name), *args], stdout=log, stderr=subprocess.STDOUT)

    def log(self, name: str) -> str:
        return (self.dir / f"{name}.log").read_text(errors="replace")

    def _wait(self, check, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited ({process.returncode}):\n{self.log(name)[-3000:]}")
            try:
                if check():
                    return
            except (OSError, urllib.error.URLError, ssl.SSLError):
                pass
            time.sleep(0.3)
        raise TimeoutError(f"{what} not ready after {timeout_s}s")

    # -- clients ---------------------------------------------------------------------------
    def get(self, path: str, token: str | None = None) -> str:
        request = urllib.request.Request(self.server + path,
                                         headers={"Authorization": f"Bearer {token or self.admin_token}"})
        context = ssl.create_default_context(cafile=str(self.ca))
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.read().decode()

    def kubectl(self, *args: str, input: str | None = None, check: bool = True, kubeconfig: str | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess:
        result = subprocess.run([str(self.bin / "kubectl"), f"--kubeconfig={kubeconfig or self.admin_kubeconfig}",
                                 *args], input=input, capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}): {result.stderr}")
        return result

    def apply(self, objects: list[dict], *extra: str, kubeconfig: str | None = None) -> subprocess.CompletedProcess:
        return self.kubectl("apply", "-f", "-", *extra, input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                           "items": objects}), kubeconfig=kubeconfig)

    def json(self, *args: str) -> dict:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def token(self, service_account: str, namespace: str) -> str:
        return self.kubectl("create", "token", service_account, "-n", namespace, "--duration=2h").stdout.strip()

    def ca_bundle(self, path: pathlib.Path) -> str:
        return base64.b64encode(path.read_bytes()).decode()
