"""The real ResourceSlices in the corpus load; older API versions get a clear error."""

import pytest

from app import dra
from app.cli import load_inventory
from app.common import InputError


@pytest.mark.parametrize("name, devices", [
    ("draex-readme-resourceslice-list.yaml", 8),
    # Every field set, sharedCounters too: upstream allocates no device from a counter slice.
    ("k8sapi-testdata-v1-resourceslice.yaml", 0),
    ("vks-nvidia-gpu-resourceslice-list.yaml", 2),
])
def test_v1_slices_load_and_index(corpus, name, devices):
    ix = dra.build_index(load_inventory(str(corpus / "slices" / name)))
    assert len(ix.devices) == devices


@pytest.mark.parametrize("name, version", [
    ("k8sapi-testdata-v1beta1-resourceslice.yaml", "v1beta1"),
    ("nvidia-dra-imex-resourceslice-v1alpha3.yaml", "v1alpha3"),
])
def test_older_versions_are_refused_with_the_way_out(corpus, name, version):
    with pytest.raises(InputError) as err:
        load_inventory(str(corpus / "slices" / name))
    assert f"resource.k8s.io/{version}" in str(err.value) and "resourceslices.v1.resource.k8s.io" in str(err.value)
    assert f"{name}:" in str(err.value)  # file and line


def test_real_nvidia_driver_slices_satisfy_a_one_gpu_claim(corpus):
    inv = load_inventory(str(corpus / "slices" / "vks-nvidia-gpu-resourceslice-list.yaml"))
    inv.classes["gpu.nvidia.com"] = {"metadata": {"name": "gpu.nvidia.com"}, "spec": {"selectors": [
        {"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}
    spec = dra.parse_claim_spec({"devices": {"requests": [{"name": "g", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression":
            "device.attributes['gpu.nvidia.com'].productName.matches('A100') && "
            "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('10Gi')) >= 0"}}]}}]}})
    verdict = dra.check(spec, dra.build_index(inv))
    assert verdict.status == "satisfiable" and verdict.nodes == 2
