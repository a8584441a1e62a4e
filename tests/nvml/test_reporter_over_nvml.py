"""Issue 58 items 1-2: the reporter's NVML backend (pynvml over ctypes) reads a node through the
real NVML C ABI, served by our library from the same description the `fake:` backend reads, and
publishes the same ResourceSlices. pcieRoot is left out of both: the reporter reads it from
sysfs, never from NVML. A library that cannot load, a driver that will not start, no GPUs and a
failing call each give the reporter's documented exit code and one line."""

import pathlib
import subprocess
import sys

import pytest
import yaml

from app.reporter import EXIT_NO_DRIVER, EXIT_NO_GPUS, EXIT_NO_LIBRARY, EXIT_NVML_CALL
from tests.conftest import ROOT
from tests.nvml.library import environment

pytestmark = pytest.mark.nvidia
DESCRIPTIONS = sorted((ROOT / "app" / "data" / "fake").glob("*.yaml"))


def without_sysfs(description: pathlib.Path, folder: pathlib.Path) -> pathlib.Path:
    data = yaml.safe_load(description.read_text())
    for gpu in data["gpus"]:
        gpu.pop("pcieRoot", None)
    out = folder / description.name
    out.write_text(yaml.safe_dump(data))
    return out


def devices_of(output: str) -> dict[str, dict]:
    return {d["name"]: d for doc in yaml.safe_load_all(output) if doc["kind"] == "ResourceSlice"
            for d in doc["spec"].get("devices", [])}


def reporter(env: dict | None, backend: str, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "reporter", "--once", "--node-name", "gpu-node-1",
                           "--backend", backend, *flags], env=env, capture_output=True, text=True, timeout=60,
                          cwd=ROOT)


@pytest.mark.parametrize("flags", [(), ("--partitionable",), ("--shareable",)], ids=["plain", "partitionable",
                                                                                     "shareable"])
@pytest.mark.parametrize("description", DESCRIPTIONS, ids=lambda p: p.stem)
def test_the_slices_read_through_nvml_are_the_ones_the_description_renders(nvml_library, tmp_path, description,
                                                                          flags):
    node = without_sysfs(description, tmp_path)
    through_nvml = reporter(environment(nvml_library, node), "nvml", *flags)
    assert through_nvml.returncode == 0, through_nvml.stderr
    described = reporter(None, f"fake:{node}", *flags)
    assert described.returncode == 0, described.stderr
    assert through_nvml.stdout == described.stdout
    devices = devices_of(through_nvml.stdout).values()
    assert devices and all(d["attributes"]["uuid"]["string"] for d in devices if "uuid" in d["attributes"])


def test_nvlink_peers_are_found_by_the_bus_ids_nvml_pads(nvml_library, tmp_path):
    """NVML writes a peer's bus id with an 8-digit domain; the GPUs are named as sysfs writes
    them. Read as written, no peer was ever found and real H100s lost their NVLink domain."""
    node = without_sysfs(ROOT / "app" / "data" / "fake" / "h100x8.yaml", tmp_path)
    out = reporter(environment(nvml_library, node), "nvml")
    domains = {d["attributes"].get("dra-bridge.io/nvlinkDomain", {}).get("string")
               for d in devices_of(out.stdout).values()}
    assert domains == {"nvlink-0000-18-00-0"}, domains


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert lines and "Traceback" not in result.stderr, result.stderr
    return lines[-1]


def test_a_library_that_cannot_be_loaded_is_exit_3(tmp_path):
    (tmp_path / "libnvidia-ml.so.1").write_bytes(b"not an ELF file")
    result = reporter(environment(tmp_path, DESCRIPTIONS[0]), "nvml")
    assert result.returncode == EXIT_NO_LIBRARY
    assert "libnvidia-ml.so not found" in one_line(result)


def test_a_driver_that_does_not_start_is_exit_4(nvml_library, tmp_path):
    result = reporter(environment(nvml_library, tmp_path / "absent.yaml"), "nvml")
    assert result.returncode == EXIT_NO_DRIVER
    assert one_line(result).startswith("dra-bridge reporter: NVML could not start: Driver Not Loaded")


def test_no_gpus_is_exit_5(nvml_library, tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("driverVersion: 580.95.05\ncudaDriverVersion: '13.0'\ngpus: []\n")
    result = reporter(environment(nvml_library, empty), "nvml")
    assert result.returncode == EXIT_NO_GPUS
    assert "no GPUs" in one_line(result)


def test_a_failing_call_every_slice_needs_is_exit_7_naming_the_gpu(nvml_library):
    result = reporter(environment(nvml_library, DESCRIPTIONS[0], fail="nvmlDeviceGetUUID"), "nvml")
    assert result.returncode == EXIT_NVML_CALL
    assert one_line(result) == "dra-bridge reporter: NVML failed reading GPU 0: Unknown Error"


def test_an_optional_fact_nvml_does_not_support_is_left_out(nvml_library, tmp_path):
    node = without_sysfs(ROOT / "app" / "data" / "fake" / "l4x4.yaml", tmp_path)
    result = reporter(environment(nvml_library, node, fail="nvmlDeviceGetNumaNodeId=3"), "nvml")
    assert result.returncode == 0, result.stderr
    assert "numa" not in result.stdout.lower()
    assert "numa" in reporter(environment(nvml_library, node), "nvml").stdout.lower()


PROBE = """
import pynvml
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByIndex(0)
print(pynvml.nvmlDeviceGetUUID(handle))
for call in (lambda: pynvml.nvmlDeviceGetPowerUsage(handle), lambda: pynvml.nvmlDeviceGetHandleByIndex(99)):
    try:
        call()
    except pynvml.NVMLError as exc:
        print(exc.value)
try:
    pynvml.nvmlDeviceGetPowerUsage(handle)  # asked again: said once
except pynvml.NVMLError:
    pass
pynvml.nvmlShutdown()
"""


def test_a_function_not_served_is_nvmls_own_error_never_a_crash(nvml_library):
    """Every function NVIDIA's header declares is exported (go-nvml binds them all; a missing one
    kills its caller): one we do not serve answers NOT_SUPPORTED and says so once on stderr."""
    import pynvml

    result = subprocess.run([sys.executable, "-c", PROBE], env=environment(nvml_library, DESCRIPTIONS[0]),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    uuid, not_served, bad_index = result.stdout.split()
    assert uuid == yaml.safe_load(DESCRIPTIONS[0].read_text())["gpus"][0]["uuid"]
    assert (int(not_served), int(bad_index)) == (pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_INVALID_ARGUMENT)
    assert result.stderr.count("nvmlDeviceGetPowerUsage is not served") == 1


def test_an_applications_xid_leaves_the_gpu_healthy_any_other_taints_it(nvml_library, tmp_path):
    data = yaml.safe_load(without_sysfs(ROOT / "app" / "data" / "fake" / "l4x4.yaml", tmp_path).read_text())
    data["gpus"][0]["xid"] = 13  # the application's fault: NVIDIA's health check skips it
    data["gpus"][1].update(healthy=False, xid=79)  # fell off the bus
    node = tmp_path / "node.yaml"
    node.write_text(yaml.safe_dump(data))
    through_nvml = reporter(environment(nvml_library, node), "nvml")
    assert through_nvml.stdout == reporter(None, f"fake:{node}").stdout
    devices = devices_of(through_nvml.stdout)
    assert "taints" not in devices["gpu-0"] and "taints" not in devices["gpu-2"]
    assert devices["gpu-1"]["taints"] == [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]


SM_NODE = """
driverVersion: 580.95.05
cudaDriverVersion: '13.0'
gpus:
- {index: 0, uuid: GPU-00000000-0000-4000-8000-000000000000, productName: NVIDIA A100-SXM4-80GB,
   architecture: Ampere, computeCapability: '8.0', memoryMiB: 81920, multiprocessors: 108,
   pciBusID: '0000:07:00.0', migEnabled: false,
   migProfiles: [{profile: 1g.10gb, giProfileId: 0, memoryMiB: 9856, multiprocessors: 14,
                  placements: [[0, 1], [1, 1]]},
                 {profile: 7g.80gb, giProfileId: 4, memoryMiB: 80896, multiprocessors: 98, placements: [[0, 8]]}]}
"""


@pytest.mark.parametrize("failing, multiprocessors", [
    ("", "108"),  # the GPU's own attributes
    ("nvmlDeviceGetAttributes_v2=3", "98"),  # NotSupported for a whole GPU (an H200 on 580.159): the 7g profile's
    ("nvmlDeviceGetAttributes_v2=3,nvmlDeviceGetGpuInstanceProfileInfoV=3", None),  # neither: left out, never 0
])
def test_the_sm_count_comes_from_nvml_where_it_answers_and_is_never_zero(nvml_library, tmp_path, failing,
                                                                        multiprocessors):
    node = tmp_path / "node.yaml"
    node.write_text(SM_NODE)
    result = reporter(environment(nvml_library, node, fail=failing), "nvml")
    assert result.returncode == 0, result.stderr
    capacity = devices_of(result.stdout)["gpu-0"]["capacity"]
    assert capacity.get("dra-bridge.io/multiprocessors", {}).get("value") == multiprocessors


@pytest.mark.parametrize("release", ["1.34.0", "1.37.0"])
def test_what_nvml_reads_validates_against_the_releases_schema(nvml_library, tmp_path, release):
    import kubernetes_validate

    node = without_sysfs(ROOT / "app" / "data" / "fake" / "a100-mig.yaml", tmp_path)
    result = reporter(environment(nvml_library, node), "nvml", "--partitionable", "--kube-version", release)
    assert result.returncode == 0, result.stderr
    for doc in yaml.safe_load_all(result.stdout):
        kubernetes_validate.validate(doc, release, strict=True)
