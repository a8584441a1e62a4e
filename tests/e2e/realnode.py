"""Real nodes beside an e2e control plane: per node a containerd (with Debian's runc) and a
kubelet of the control plane's release, pods on a CNI network of their own (a tap device in the
pod's namespace, nothing on the host), images built here from static Go programs with buildah.
`NodeAgents` stands in for the GPU Operator's two DaemonSets: it starts and stops NVIDIA's own
device plugin (k8s-device-plugin, over the test NVML library serving the node's description) and
the DRA kubelet plugin (tests/e2e/node/draplugin: NVIDIA's DRA driver is not served by the
module proxy) as the node labels they select on come and go."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import threading
import time

import yaml

from tests import gobuild
from tests.conftest import ROOT
from tests.e2e.cluster import _release, free_port
from tests.nvml import library as nvml_library
from tests.nvml import nvidia

HERE = pathlib.Path(__file__).resolve().parent
NODE_SOURCES = ("go.mod", "go.sum", "node/draplugin/main.go", "node/workload/main.go", "node/pause/main.go")
NODE_PACKAGES = ("k8s.io/kubernetes/cmd/kubelet", "./node/draplugin", "./node/workload", "./node/pause")
RUNTIME_PACKAGES = tuple(f"github.com/containerd/containerd/v2/cmd/{c}" for c in ("containerd", "containerd-shim-runc-v2",
                                                                                  "ctr")) + tuple(
    f"github.com/containernetworking/plugins/plugins/{p}" for p in ("ipam/host-local", "main/loopback", "main/tap"))
RUNC = "/usr/sbin/runc"
HOST_DEVICE_PLUGINS = "/var/lib/kubelet/device-plugins"
PAUSE_IMAGE, WORKLOAD_IMAGE = "dra-bridge.test/pause:1", "dra-bridge.test/workload:1"
PLUGIN_LABEL, DRA_LABEL = "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/dra-kubelet-plugin"


class NodeUnavailable(Exception):
    """What this machine lacks to run a real node (the tests skip naming it)."""


def prerequisites() -> None:
    missing = [why for ok, why in ((os.geteuid() == 0, "root (a kubelet and runc need it)"),
                                   (pathlib.Path(RUNC).exists(), f"{RUNC} (Debian's runc package)"),
                                   (shutil.which("buildah") is not None, "buildah (Debian's buildah package)"),
                                   (pathlib.Path("/dev/net/tun").exists(), "/dev/net/tun (the pod network's tap)"))
               if not ok]
    if missing:
        raise NodeUnavailable("a real node needs " + ", ".join(missing))


def build() -> tuple[pathlib.Path, pathlib.Path]:
    """(node programs with the images' OCI archives, runtime binaries), built once and cached."""
    prerequisites()
    release = _release()
    stamp = " ".join(f"-X k8s.io/component-base/version.{key}={value}" for key, value in
                     (("gitVersion", release), ("gitMajor", "1"), ("gitMinor", release.split(".")[1])))
    node = gobuild.build(HERE, NODE_SOURCES, NODE_PACKAGES, "the real node's kubelet and plugins", ldflags=stamp,
                         cache=".bin-node", env={"CGO_ENABLED": "0"})
    runtime = gobuild.build(HERE / "runtime", ("go.mod", "go.sum", "tools.go"), RUNTIME_PACKAGES,
                            "containerd and the CNI plugins")
    for image, program in ((PAUSE_IMAGE, "pause"), (WORKLOAD_IMAGE, "workload")):
        archive = node / f"{program}.oci.tar"
        if not archive.exists():
            _image(image, node / program, archive)
    return node, runtime


def _image(name: str, binary: pathlib.Path, archive: pathlib.Path) -> None:
    """An image FROM scratch holding one static binary, written as an OCI archive."""
    def buildah(*args: str) -> str:
        result = subprocess.run(["buildah", *args], capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            raise RuntimeError(f"buildah {' '.join(args)}: {result.stderr[-2000:]}")
        return result.stdout.strip()

    container = buildah("from", "scratch")
    try:
        buildah("copy", container, str(binary), f"/{binary.name}")
        buildah("config", "--entrypoint", json.dumps([f"/{binary.name}"]), container)
        image = buildah("commit", "-q", container, name)
        partial = archive.with_suffix(".partial")
        buildah("push", "-q", image, f"oci-archive:{partial}:{name}")
        partial.rename(archive)
    finally:
        buildah("rm", container)


class RealNode:
    """One node: its containerd and kubelet, each with its own directories, socket and ports."""

    def __init__(self, plane, name: str, index: int, node_bin: pathlib.Path, runtime_bin: pathlib.Path,
                 labels: dict[str, str] | None = None):
        self.plane, self.name, self.index = plane, name, index
        self.node_bin, self.runtime_bin, self.labels = node_bin, runtime_bin, labels or {}
        self.dir = plane.dir / "nodes" / name
        self.socket = self.dir / "containerd.sock"
        self.kubelet_dir = self.dir / "kubelet"
        self.cdi_dir = self.dir / "cdi"
        self.device_plugins = self.dir / "device-plugins"
        self.processes: dict[str, subprocess.Popen] = {}

    def start(self, timeout_s: float = 120) -> "RealNode":
        for folder in (self.dir / "cni", self.cdi_dir, self.kubelet_dir):
            folder.mkdir(parents=True, exist_ok=True)
        (self.dir / "cni" / "10-pods.conflist").write_text(json.dumps({
            "cniVersion": "1.0.0", "name": "pods", "plugins": [
                {"type": "tap", "ipam": {"type": "host-local", "dataDir": str(self.dir / "ipam"),
                                         "ranges": [[{"subnet": f"10.244.{self.index}.0/24"}]]}},
                {"type": "loopback"}]}))
        (self.dir / "containerd.toml").write_text(self._containerd_config())
        self._run("containerd", str(self.runtime_bin / "containerd"), "--config", str(self.dir / "containerd.toml"))
        self._wait(self.socket.exists, 30, "containerd's socket")
        for program in ("pause", "workload"):
            self.ctr("images", "import", str(self.node_bin / f"{program}.oci.tar"))
        (self.dir / "kubelet.json").write_text(json.dumps(self._kubelet_config()))
        labels = ",".join(f"{k}={v}" for k, v in self.labels.items())
        kubelet = [str(self.node_bin / "kubelet"), f"--config={self.dir / 'kubelet.json'}",
                   f"--kubeconfig={self.plane.admin_kubeconfig}", f"--root-dir={self.kubelet_dir}",
                   f"--hostname-override={self.name}", f"--cert-dir={self.dir / 'pki'}",
                   *([f"--node-labels={labels}"] if labels else []), "--v=2"]
        # The kubelet hard-codes /var/lib/kubelet/device-plugins (not under --root-dir): each one
        # gets its node's folder there, in a mount namespace of its own. Mounts it makes for pod
        # volumes stay in that namespace, out of containerd's sight: test pods mount none.
        self.device_plugins.mkdir(parents=True, exist_ok=True)
        self._run("kubelet", "unshare", "--mount", "--propagation", "private", "sh", "-c",
                  f'mkdir -p {HOST_DEVICE_PLUGINS} && mount --bind "$0" {HOST_DEVICE_PLUGINS} && exec "$@"',
                  str(self.device_plugins), *kubelet)
        self._wait(self.ready, timeout_s, f"node {self.name} Ready")
        return self

    def _containerd_config(self) -> str:
        state = self.dir / "containerd"
        # restrict_oom_score_adj: the pause container's -998 needs CAP_SYS_RESOURCE, which
        # sandboxed machines (this one) withhold; it is clamped to containerd's own score.
        return f"""version = 3
root = '{state}/root'
state = '{state}/state'
[grpc]
  address = '{self.socket}'
[ttrpc]
  address = '{self.socket}.ttrpc'
[debug]
  address = '{state}/debug.sock'
[plugins]
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = '{PAUSE_IMAGE}'
  [plugins.'io.containerd.cri.v1.runtime']
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = ['{self.cdi_dir}']
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      SystemdCgroup = false
      BinaryName = '{RUNC}'
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['{self.runtime_bin}']
      conf_dir = '{self.dir / "cni"}'
"""

    def _kubelet_config(self) -> dict:
        return {"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
                "failCgroupV1": False,  # the machine may be cgroup v1 (deprecated upstream, still served)
                "cgroupDriver": "cgroupfs", "cgroupsPerQOS": False, "enforceNodeAllocatable": [],
                "address": "127.0.0.1", "port": free_port(), "healthzPort": 0, "readOnlyPort": 0,
                # Nothing calls it: the API server would dial the node's address, not loopback
                # (a node IP cannot be loopback); tests read container logs from the files.
                "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False}},
                "authorization": {"mode": "AlwaysAllow"},
                "containerRuntimeEndpoint": f"unix://{self.socket}", "resolvConf": "",
                "protectKernelDefaults": False, "makeIPTablesUtilChains": False, "failSwapOn": False,
                "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
                "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
                "localStorageCapacityIsolation": False, "serializeImagePulls": False,
                "syncFrequency": "5s", "nodeStatusUpdateFrequency": "2s", "nodeStatusReportFrequency": "10s"}

    def ready(self) -> bool:
        found = self.plane.kubectl("get", "node", self.name, "-o", "json", check=False)
        if found.returncode != 0:
            return False
        conditions = json.loads(found.stdout).get("status", {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    @staticmethod
    def container_log(pod: dict, container: str = "main") -> str:
        """What the container printed, from the file the kubelet keeps (CRI format, one line each)."""
        meta = pod["metadata"]
        folder = pathlib.Path("/var/log/pods") / f"{meta['namespace']}_{meta['name']}_{meta['uid']}" / container
        lines = []
        for path in sorted(folder.glob("*.log")):
            lines += [line.split(" ", 3)[3] for line in path.read_text().splitlines() if line.count(" ") >= 3]
        return "\n".join(lines)

    def ctr(self, *args: str, check: bool = True) -> str:
        result = subprocess.run([str(self.runtime_bin / "ctr"), "--address", str(self.socket), "--namespace", "k8s.io",
                                 *args], capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)}: {result.stderr[-2000:]}")
        return result.stdout

    def _run(self, name: str, *command: str) -> None:
        with open(self.dir / f"{name}.log", "ab") as log:
            self.processes[name] = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "PATH": f"{self.runtime_bin}:{os.environ.get('PATH', '')}"})

    def log(self, name: str) -> str:
        path = self.dir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def _wait(self, check, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"{self.name}: {name} exited ({process.returncode}):\n{self.log(name)[-3000:]}")
            if check():
                return
            time.sleep(0.3)
        raise TimeoutError(f"{what} not reached in {timeout_s}s; kubelet log tail:\n{self.log('kubelet')[-3000:]}")

    def stop(self) -> None:
        """The kubelet, every container (a shim outlives containerd), then containerd and mounts,
        and the log folders of the pods it ran (the kubelet keeps them in /var/log/pods)."""
        bound = self.plane.kubectl("get", "pods", "-A", f"--field-selector=spec.nodeName={self.name}", "-o",
                                   "jsonpath={range .items[*]}{.metadata.namespace}_{.metadata.name}_{.metadata.uid} "
                                   "{end}", check=False).stdout.split()
        _terminate(self.processes.pop("kubelet", None))
        if "containerd" in self.processes:
            try:
                for task in self.ctr("tasks", "ls", "-q").split():
                    self.ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
                time.sleep(0.5)
                for task in self.ctr("tasks", "ls", "-q").split():
                    self.ctr("tasks", "delete", "-f", task, check=False)
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
        _terminate(self.processes.pop("containerd", None))
        for pid in _pids_mentioning(str(self.socket)):
            os.kill(pid, signal.SIGKILL)
        mounts = [line.split()[1] for line in pathlib.Path("/proc/mounts").read_text().splitlines()
                  if line.split()[1].startswith(str(self.dir))]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, timeout=30)
        for folder in bound:
            shutil.rmtree(pathlib.Path("/var/log/pods") / folder, ignore_errors=True)


def _terminate(process: subprocess.Popen | None, grace_s: float = 15) -> None:
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _pids_mentioning(text: str) -> list[int]:
    pids = []
    for proc in pathlib.Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if text in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    pids.append(int(proc.name))
            except OSError:
                pass
    return pids


class NodeAgents:
    """The GPU Operator's two DaemonSets, as far as a node sees them: the device plugin runs where
    PLUGIN_LABEL is "true", NVIDIA's DRA kubelet plugin where DRA_LABEL is "true"; each starts and
    stops (SIGTERM) as its label comes and goes."""

    def __init__(self, plane, nodes: dict[str, RealNode], gear: dict[str, str]):
        """gear: node -> its GPU description (app/data/fake, or a path): the NVML both plugins
        read there. plugin_flags: node -> NVIDIA's device plugin's flags there (a test sets them
        before labelling the node: --mig-strategy, --config-file)."""
        self.plane, self.nodes, self.gear = plane, nodes, gear
        self.plugin_flags: dict[str, list[str]] = {}
        self.library, self.programs = nvml_library.build(), nvidia.build()
        self.agents: dict[tuple[str, str], list[subprocess.Popen]] = {}
        self.stopping = threading.Event()
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._loop, daemon=True, name="node-agents")

    def start(self) -> "NodeAgents":
        self.thread.start()
        return self

    def _loop(self) -> None:
        while not self.stopping.wait(0.5):
            try:
                self.once()
            except Exception as exc:  # noqa: BLE001 - the test reads them
                self.errors.append(repr(exc))

    def once(self) -> None:
        listed = json.loads(self.plane.kubectl("get", "nodes", "-o", "json").stdout)["items"]
        for node in listed:
            name, labels = node["metadata"]["name"], node["metadata"].get("labels") or {}
            if name not in self.nodes:
                continue
            for kind, label in (("deviceplugin", PLUGIN_LABEL), ("draplugin", DRA_LABEL)):
                running = (name, kind) in self.agents
                if labels.get(label) == "true" and not running:
                    self.agents[(name, kind)] = self._start(self.nodes[name], kind)
                elif labels.get(label) != "true" and running:
                    for process in self.agents.pop((name, kind)):
                        _terminate(process)

    def _start(self, node: RealNode, kind: str) -> list[subprocess.Popen]:
        description = ROOT / "app" / "data" / "fake" / self.gear[node.name]
        log = open(node.dir / f"{kind}.log", "ab")
        if kind == "deviceplugin":
            # As its DaemonSet runs it, with this node's kubelet's device-plugins folder at its usual path.
            command = nvidia.as_on_its_node(description, node.dir, f"{self.programs / nvidia.DEVICE_PLUGIN} "
                                            "--fail-on-init-error=true " + " ".join(self.plugin_flags.get(node.name, [])),
                                            binds=((node.device_plugins, HOST_DEVICE_PLUGINS),))
            return [subprocess.Popen(command, env=nvml_library.environment(self.library, description), stdout=log,
                                     stderr=subprocess.STDOUT)]
        devices = node.dir / "devices.json"
        devices.write_text(json.dumps(rendered_devices(node.name, description, self.library)))
        return [subprocess.Popen([str(node.node_bin / "draplugin"), f"--node={node.name}",
                                  f"--kubeconfig={self.plane.admin_kubeconfig}", f"--kubelet-dir={node.kubelet_dir}",
                                  f"--cdi-dir={node.cdi_dir}", f"--devices={devices}",
                                  f"--journal={node.dir / 'claims.journal'}"], stdout=log, stderr=subprocess.STDOUT)]

    def journal(self, node: str) -> list[str]:
        path = self.nodes[node].dir / "claims.journal"
        return path.read_text().splitlines() if path.exists() else []

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=10)
        for processes in self.agents.values():
            for process in processes:
                _terminate(process)
        self.agents.clear()


def rendered_devices(node: str, description: pathlib.Path, library: pathlib.Path) -> list[dict]:
    """The devices our reporter reads through the node's NVML (NVIDIA's schema), as the plugin
    publishes them."""
    result = subprocess.run([sys.executable, "-m", "app", "reporter", "--backend", "nvml", "--node-name", node,
                             "--mode", "publish", "--once", "-o", "yaml"],
                            env=nvml_library.environment(library, description), capture_output=True, text=True,
                            timeout=60, cwd=ROOT)
    if result.returncode != 0:
        raise RuntimeError(f"reporter --once: {result.stderr[-2000:]}")
    slices = [d for d in yaml.safe_load_all(result.stdout) if d and d.get("kind") == "ResourceSlice"]
    return [device for s in slices for device in s["spec"].get("devices") or []]


if __name__ == "__main__":  # `make e2e` prebuilds, or says why this machine cannot run a node
    try:
        print("real node:", *build())
    except NodeUnavailable as exc:
        print(f"real node: skipped ({exc})")
