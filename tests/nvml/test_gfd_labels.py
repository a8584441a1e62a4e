"""Issue 58: what NVIDIA's GPU feature discovery (v0.17.4, the real program over the test NVML
library) labels a node with, read by dra-bridge as it reads a pod's nodeSelector: each label the
policy translates becomes a selector that picks exactly the devices the reporter publishes for
that same node (through NVML) that the label describes. A label GFD writes in a form we parse
wrongly (a case, a unit, a suffix) selects too few or too many here."""

import pathlib
import subprocess
import sys

import pytest
import yaml

from app import dra
from app.dra.diagnosis import candidates
from app.migration import plan_pod
from app.policy import default_policy
from tests.conftest import ROOT
from tests.nvml import nvidia
from tests.nvml.library import environment

pytestmark = pytest.mark.nvidia
FAKE = ROOT / "app" / "data" / "fake"
RULES = default_policy().migration
TRANSLATED = {rule.label for rule in RULES.nodeLabels if rule.label.startswith("nvidia.com/")}


def labels_of(programs, library, description, tmp_path, *flags) -> dict[str, str]:
    try:
        return nvidia.gfd_labels(programs, library, description, tmp_path, *flags)
    except nvidia.SysfsUnavailable as exc:
        pytest.skip(str(exc))


def published(library, description: pathlib.Path) -> dra.Index:
    """The node's devices as the reporter publishes them through NVML, with NVIDIA's classes."""
    out = subprocess.run([sys.executable, "-m", "app", "reporter", "--once", "--node-name", "gpu-node-1",
                          "--backend", "nvml"], env=environment(library, description), capture_output=True,
                         text=True, timeout=60, cwd=ROOT, check=True).stdout
    objects = [(0, doc) for doc in yaml.safe_load_all(out)]
    return dra.build_index(dra.inventory_from_objects(objects, "nvml"))


def plan_for(labels: dict[str, str], resource: str):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
           "spec": {"nodeSelector": labels, "containers": [{"name": "c", "image": "i",
                                                            "resources": {"limits": {resource: 1}}}]}}
    return plan_pod(pod, RULES, "ml")


def picked(index: dra.Index, labels: dict[str, str], resource: str = "nvidia.com/gpu") -> set[str]:
    """The devices a pod asking for one `resource` with these labels in its nodeSelector may get."""
    plan = plan_for(labels, resource)
    assert plan.status == "migrated", plan.reason
    [template] = plan.templates
    spec = dra.parse_claim_object(template)
    return {index.devices[p].key[2] for alternatives in spec.requests for req in alternatives
            for p in candidates(index, req)}


@pytest.mark.parametrize("name", ["h100x8", "l4x4", "gb200x4", "a100-mig"])
def test_every_translated_label_gfd_writes_picks_the_gpus_it_describes(nvidia_programs, nvml_library, tmp_path,
                                                                      name):
    description = FAKE / f"{name}.yaml"
    labels = labels_of(nvidia_programs, nvml_library, description, tmp_path)
    index = published(nvml_library, description)
    every = picked(index, {})
    assert every, "the node publishes GPUs"
    read = sorted(TRANSLATED & set(labels))
    assert {"nvidia.com/gpu.product", "nvidia.com/gpu.family", "nvidia.com/gpu.memory",
            "nvidia.com/gpu.compute.major", "nvidia.com/cuda.driver.major"} <= set(read), labels
    for key in read:
        assert picked(index, {key: labels[key]}) == every, f"{key}={labels[key]}"
    assert picked(index, {key: labels[key] for key in read}) == every  # all at once, as GFD labels the node




@pytest.mark.parametrize("rename, resource, product", [
    ("false", "nvidia.com/gpu", "NVIDIA-H100-80GB-HBM3-SHARED"),  # the product says it is shared
    ("true", "nvidia.com/gpu.shared", "NVIDIA-H100-80GB-HBM3"),  # the resource name does
])
def test_time_sliced_gpus_are_read_as_shares_of_the_gpus_gfd_names(nvidia_programs, nvml_library, tmp_path, rename,
                                                                 resource, product):
    config = nvidia.time_slicing(tmp_path, rename == "true")
    description = FAKE / "h100x8.yaml"
    labels = labels_of(nvidia_programs, nvml_library, description, tmp_path, f"--config-file={config}")
    assert (labels["nvidia.com/gpu.product"], labels["nvidia.com/gpu.replicas"],
            labels["nvidia.com/gpu.sharing-strategy"]) == (product, "4", "time-slicing")
    index = published(nvml_library, description)
    read = {key: labels[key] for key in sorted(TRANSLATED & set(labels))}
    plan = plan_for(read, resource)
    assert plan.shares, "a pod on a time-sliced node asks for a share of a GPU"
    assert picked(index, read, resource) == picked(index, {})
    for key in ("nvidia.com/gpu.product", "nvidia.com/gpu.replicas", "nvidia.com/gpu.sharing-strategy"):
        unsuffixed = key == "nvidia.com/gpu.product" and rename == "true"
        assert bool(plan_for({key: labels[key]}, "nvidia.com/gpu").shares) is not unsuffixed, f"{key}={labels[key]}"


def test_mig_single_labels_make_nvidia_gpu_a_mig_device_of_that_profile(nvidia_programs, nvml_library, tmp_path):
    description = nvidia.uniform_mig(tmp_path)
    labels = labels_of(nvidia_programs, nvml_library, description, tmp_path, "--mig-strategy=single")
    assert (labels["nvidia.com/gpu.product"], labels["nvidia.com/gpu.count"]) == (
        "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "56")
    index = published(nvml_library, description)
    read = {key: labels[key] for key in sorted(TRANSLATED & set(labels))}
    got = picked(index, read)
    assert len(got) == 56 and all(name.startswith("gpu-") and "-mig-" in name for name in got), sorted(got)[:3]


def test_mig_single_on_mixed_geometry_is_named_invalid_and_never_read_as_a_gpu(nvidia_programs, nvml_library,
                                                                              tmp_path):
    labels = labels_of(nvidia_programs, nvml_library, FAKE / "a100-mig.yaml", tmp_path, "--mig-strategy=single")
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-INVALID"
    assert labels["nvidia.com/gpu.count"] == "0"
    index = published(nvml_library, FAKE / "a100-mig.yaml")
    assert picked(index, {"nvidia.com/gpu.product": labels["nvidia.com/gpu.product"]}) == set()
