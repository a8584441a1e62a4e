"""NVIDIA's k8s-device-plugin and gpu-feature-discovery (v0.17.4, tests/nvml/nvidia/go.mod),
built from the Go module proxy and run over the test NVML library: GFD labels a described node
as it labels a real one. Both read the GPUs' PCI devices from sysfs and the device plugin MIG
devices' capabilities from /proc/driver: a private mount namespace puts folders made from the
description there (root; as_on_its_node)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import yaml

from tests import gobuild
from tests.conftest import ROOT
from tests.nvml.library import environment

HERE = pathlib.Path(__file__).resolve().parent / "nvidia"
FAKE = ROOT / "app" / "data" / "fake"
GFD = "gpu-feature-discovery"
DEVICE_PLUGIN = "nvidia-device-plugin"
# PCI device ids by product (GFD reads the vendor, class and device of every GPU it labels).
PCI_DEVICE_IDS = {"H100": "0x2330", "A100": "0x20b2", "L4": "0x27b8", "GB200": "0x2941"}


def build() -> pathlib.Path:
    return gobuild.build(HERE, ("go.mod", "go.sum", "tools.go"),
                         ("github.com/NVIDIA/k8s-device-plugin/cmd/gpu-feature-discovery",
                          "github.com/NVIDIA/k8s-device-plugin/cmd/nvidia-device-plugin"),
                         "NVIDIA's device plugin and GPU feature discovery", env={"CGO_ENABLED": "1"})


class SysfsUnavailable(Exception):
    """No private mount namespace here (not root, or no unshare): GFD cannot see the GPUs."""


def pci_devices(description: pathlib.Path, folder: pathlib.Path) -> pathlib.Path:
    """/sys/bus/pci/devices as GFD reads it for the described GPUs."""
    folder.mkdir(parents=True, exist_ok=True)
    for gpu in yaml.safe_load(description.read_text())["gpus"]:
        device = folder / gpu["pciBusID"].lower()
        device.mkdir(exist_ok=True)
        product = next((pid for name, pid in PCI_DEVICE_IDS.items() if name in gpu["productName"]), "0x2330")
        files = {"vendor": "0x10de", "class": "0x030200", "device": product, "numa_node": str(gpu.get("numaNode", -1)),
                 "resource": "0x00000000fa000000 0x00000000faffffff 0x0000000000040200"}
        for name, value in files.items():
            (device / name).write_text(value + "\n")
    return folder


def time_slicing(folder: pathlib.Path, rename: bool) -> pathlib.Path:
    """The plugin's (and GFD's) config file: every GPU time-sliced into 4 replicas; rename: served
    as nvidia.com/gpu.shared (renameByDefault)."""
    out = folder / "time-slicing.yaml"
    out.write_text("version: v1\nsharing:\n  timeSlicing:\n    renameByDefault: " + str(rename).lower() +
                   "\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n")
    return out


def uniform_mig(folder: pathlib.Path) -> pathlib.Path:
    """A description of 8 A100s, each cut into seven 1g.10gb devices: the node MIG strategy
    single serves."""
    data = yaml.safe_load((FAKE / "a100-mig.yaml").read_text())
    first = data["gpus"][0]
    for i, gpu in enumerate(data["gpus"]):
        gpu.update(migEnabled=True, migDevices=[{**mig, "uuid": f"MIG-{i:02d}{j:06d}-1111-5222-8333-444455556666"}
                                               for j, mig in enumerate(first["migDevices"])])
        gpu.pop("migProfiles", None)
    out = folder / "a100-1g.yaml"
    out.write_text(yaml.safe_dump(data))
    return out


def proc_driver(description: pathlib.Path, folder: pathlib.Path) -> pathlib.Path:
    """/proc/driver as NVIDIA's driver writes it for the described MIG devices: the device
    plugin finds each MIG device's capability device (/dev/nvidia-caps/nvidia-cap<minor>) in
    nvidia-caps/mig-minors. GPU instance ids are the test library's (position + 1), one compute
    instance (0) each."""
    lines, minor = [], 1
    for gpu in yaml.safe_load(description.read_text())["gpus"]:
        for j, _mig in enumerate(gpu.get("migDevices") or []):
            gpu_minor = gpu.get("minor", gpu["index"])
            lines += [f"gpu{gpu_minor}/gi{j + 1}/access {minor}", f"gpu{gpu_minor}/gi{j + 1}/ci0/access {minor + 1}"]
            minor += 2
    (folder / "nvidia-caps").mkdir(parents=True, exist_ok=True)
    (folder / "nvidia-caps" / "mig-minors").write_text("".join(f"{line}\n" for line in lines))
    return folder


def as_on_its_node(description: pathlib.Path, folder: pathlib.Path, program: str,
                   binds: tuple[tuple[pathlib.Path, str], ...] = ()) -> list[str]:
    """The command running `program` (with its arguments) as NVIDIA's DaemonSets run it on the
    described node: in a private mount namespace holding the GPUs' PCI devices at
    /sys/bus/pci/devices, the driver's /proc/driver, and `binds` (folder, where it goes, made if
    missing). Its environment names the node's NVML (library.environment)."""
    mounts = [(pci_devices(description, folder / "pci"), "/sys/bus/pci/devices"),
              (proc_driver(description, folder / "proc-driver"), "/proc/driver"), *binds]
    steps = [f"mkdir -p {target} && mount --bind {source} {target}" for source, target in mounts]
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", " && ".join([*steps, f"exec {program}"])]


def gfd_labels(programs: pathlib.Path, library: pathlib.Path, description: pathlib.Path, folder: pathlib.Path,
               *flags: str) -> dict[str, str]:
    """The labels GFD writes, once, for the described node (flags: --mig-strategy, --config-file)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise SysfsUnavailable("GFD reads the GPUs' PCI devices from sysfs: a private mount namespace needs root "
                               "and unshare")
    out = folder / "gfd"
    command = as_on_its_node(description, folder, f"{programs / GFD} --oneshot --no-timestamp --output-file={out} "
                             "--node-name=gpu-node-1 --driver-root-ctr-path=/ " + " ".join(flags))
    result = subprocess.run(command, env=environment(library, description), capture_output=True, text=True,
                            timeout=120)
    if result.returncode != 0 or not out.exists():
        raise RuntimeError(f"GFD failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)


if __name__ == "__main__":
    print("NVIDIA's programs:", build())
