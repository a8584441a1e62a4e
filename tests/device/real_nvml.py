"""The reporter against a real NVML, run by hand on a machine with an NVIDIA GPU (not by pytest).

    OUT=/tmp/nvml python3 tests/device/real_nvml.py

Writes to $OUT: env.txt (nvidia-smi), nvml.json (every NVML call the backend makes, raw, with
its error where NVML refuses), slices-*.yaml (`reporter --once` in each rendering), daemon.json
(three publish rounds against tests/kube/fakeapi.py: exit status, slices stored, /metrics), and
checks.txt (the slices used as an inventory by `check` and `plan`). Prints a summary; exit 1 when
any step failed. Changes no GPU setting (MIG mode is only read).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time
import traceback
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = pathlib.Path(os.environ.get("OUT") or "/tmp/nvml-out")
WORK = pathlib.Path("/tmp/real-nvml-work")  # inputs the checks need; $OUT keeps only results
NODE = "h200-node"
failures: list[str] = []


BACKEND = ["--backend", os.environ.get("BACKEND", "nvml")]  # fake:FILE tries this script without a GPU


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120, **kw)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return subprocess.CompletedProcess(cmd, 127, "", str(exc))


def raw_nvml() -> dict:
    """Each call the NVML backend makes, for GPU 0 and the system, with its raw answer."""
    import ctypes

    import pynvml as nv
    out: dict = {"pynvml": getattr(nv, "__version__", None) or nv.__file__}
    nv.nvmlInit()

    def call(name, fn, *args):
        try:
            value = fn(*args)
            if hasattr(value, "_fields_"):
                value = {f[0]: _plain(getattr(value, f[0])) for f in value._fields_}
            out[name] = _plain(value)
        except Exception as exc:  # noqa: BLE001 - recorded, the point of this dump
            out[name] = f"ERROR {type(exc).__name__}: {exc}"

    call("driverVersion", nv.nvmlSystemGetDriverVersion)
    call("cudaDriverVersion_v2", nv.nvmlSystemGetCudaDriverVersion_v2)
    call("count", nv.nvmlDeviceGetCount)
    h = nv.nvmlDeviceGetHandleByIndex(0)
    for name in ("UUID", "Name", "Brand", "Architecture", "CudaComputeCapability", "MinorNumber", "NumaNodeId",
                 "MigMode", "MaxMigDeviceCount", "PciInfo", "MemoryInfo", "Attributes", "AddressingMode"):
        fn = getattr(nv, f"nvmlDeviceGet{name}", None)
        if fn is None:
            out[name] = "ERROR: not in this pynvml"
        else:
            call(name, fn, h)
    links = {}
    for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
        try:
            links[link] = nv.nvmlDeviceGetNvLinkState(h, link)
        except Exception as exc:  # noqa: BLE001
            links[link] = f"ERROR {exc}"
            break
    out["nvlinkStates"] = links
    if hasattr(nv, "c_nvmlGpuFabricInfo_t"):
        info = nv.c_nvmlGpuFabricInfo_t()
        call("GpuFabricInfo(rc)", nv.nvmlDeviceGetGpuFabricInfo, h, ctypes.byref(info))
        out["GpuFabricInfo"] = {"state": info.state, "cliqueId": info.cliqueId,
                                "clusterUuid": bytes(info.clusterUuid).hex()}
    profiles = {}
    for pid in range(17):
        try:
            info = nv.nvmlDeviceGetGpuInstanceProfileInfo(h, pid)
            profiles[pid] = {f[0]: _plain(getattr(info, f[0])) for f in info._fields_}
        except Exception as exc:  # noqa: BLE001
            profiles[pid] = f"ERROR {exc}"
    out["giProfiles"] = profiles
    try:
        events = nv.nvmlEventSetCreate()
        nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, events)
        out["xidEvents"] = "registered"
        try:
            nv.nvmlEventSetWait(events, 0)
            out["xidWait"] = "an event was pending"
        except nv.NVMLError as exc:
            out["xidWait"] = f"{exc} (no pending event)"
    except Exception as exc:  # noqa: BLE001
        out["xidEvents"] = f"ERROR {exc}"
    nv.nvmlShutdown()
    return out


def _plain(value):
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    try:
        return [_plain(v) for v in value]  # ctypes arrays
    except TypeError:
        return repr(value)


def once(variant: str, flags: list[str]) -> None:
    start = time.monotonic()
    proc = sh([sys.executable, "-m", "app", "reporter", "--once", "-o", "yaml", "--node-name", NODE, *BACKEND, *flags])
    (OUT / f"slices-{variant}.yaml").write_text(proc.stdout)
    took = time.monotonic() - start
    print(f"reporter --once {' '.join(flags) or '(plain)'}: exit {proc.returncode} in {took:.1f}s, "
          f"{proc.stdout.count('kind: ResourceSlice')} slices, {proc.stdout.count('- name: gpu-')} devices "
          f"{proc.stderr.strip()[-300:]}")
    if proc.returncode:
        failures.append(f"reporter --once {variant}: exit {proc.returncode}: {proc.stderr.strip()[-300:]}")


def daemon(mode: str) -> dict:
    sys.path.insert(0, str(ROOT))
    from tests.kube.fakeapi import FakeKube
    fake = FakeKube().start()
    fake.add_cluster_object("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "uid": "u1"}})
    kubeconfig = fake.kubeconfig(WORK / "kubeconfig")
    port = 18081 if mode == "shadow" else 18082
    proc = subprocess.Popen([sys.executable, "-m", "app", "reporter", "--node-name", NODE, "--mode", mode, *BACKEND,
                             "--kubeconfig", str(kubeconfig), "--interval", "1", "--max-rounds", "3",
                             "--health-port", str(port)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    metrics = health = None
    for _ in range(40):
        time.sleep(0.25)
        try:
            health = urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2).read().decode()
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
            break
        except OSError:
            continue
    log, _ = proc.communicate(timeout=60)
    stored = [v for k, v in fake.objects.items() if k[1] == "resourceslices"]
    fake.stop()
    result = {"exit": proc.returncode, "log": log[-3000:], "healthz": health,
              "metrics": [m for m in (metrics or "").splitlines() if m.startswith("dra_bridge_reporter")],
              "slices": stored, "writes": len(fake.writes())}
    print(f"reporter daemon {mode}: exit {proc.returncode}, {len(stored)} slices stored, "
          f"{result['writes']} writes over 3 rounds, healthz {health!r}")
    if proc.returncode or not stored:
        failures.append(f"daemon {mode}: exit {proc.returncode}, {len(stored)} slices; log: {log[-300:]}")
    return result


def checks() -> str:
    inventory = OUT / "slices-plain.yaml"
    claim = WORK / "claim.yaml"
    claim.write_text("""apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: one-h200, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu.nvidia.com
        selectors:
        - cel: {expression: "device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('h200') && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('140Gi')) >= 0"}
""")
    pod = WORK / "pod.yaml"
    pod.write_text("""apiVersion: v1
kind: Pod
metadata: {name: legacy, namespace: default}
spec:
  containers:
  - name: c
    image: cuda
    resources: {limits: {nvidia.com/gpu: 1}}
""")
    text = []
    for cmd in (["check", "--inventory", str(inventory), "-f", str(claim)],
                ["plan", "--inventory", str(inventory), "-f", str(pod)]):
        proc = sh([sys.executable, "-m", "app", *cmd])
        text.append(f"$ dra-bridge {' '.join(cmd)}\nexit {proc.returncode}\n{proc.stdout}{proc.stderr}")
        print(f"dra-bridge {cmd[0]}: exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[:400]}")
    return "\n".join(text)


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    WORK.mkdir(parents=True, exist_ok=True)
    smi = sh(["nvidia-smi", "--query-gpu=name,uuid,pci.bus_id,driver_version,memory.total,mig.mode.current,"
              "compute_cap", "--format=csv"])
    (OUT / "env.txt").write_text(smi.stdout + smi.stderr + sh(["nvidia-smi", "topo", "-m"]).stdout)
    print(smi.stdout.strip())
    steps = [("nvml.json", lambda: json.dumps(raw_nvml(), indent=1, default=str))]
    for name, step in steps:
        try:
            (OUT / name).write_text(step())
        except Exception:  # noqa: BLE001
            failures.append(f"{name}: {traceback.format_exc()[-500:]}")
    for variant, flags in (("plain", []), ("partitionable", ["--partitionable"]), ("shareable", ["--shareable"]),
                           ("shadow", ["--mode", "shadow"])):
        once(variant, flags)
    try:
        (OUT / "daemon.json").write_text(json.dumps({m: daemon(m) for m in ("shadow", "publish")}, indent=1,
                                                    default=str))
    except Exception:  # noqa: BLE001
        failures.append(f"daemon: {traceback.format_exc()[-800:]}")
    try:
        (OUT / "checks.txt").write_text(checks())
    except Exception:  # noqa: BLE001
        failures.append(f"checks: {traceback.format_exc()[-800:]}")
    print("FAILED:\n  " + "\n  ".join(failures) if failures else "all steps ran")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
