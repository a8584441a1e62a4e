"""Issue 13: `dra-bridge classes` — DeviceClasses for the native path."""

import subprocess
import sys

import kubernetes_validate
import pytest
import yaml

from app import dra
from app.cli import load_inventory
from tests.conftest import ROOT


def test_a_class_per_servable_resource_with_selectors_that_select_it():
    inventory = load_inventory(None)
    generated = dra.generate_classes(inventory)
    by_resource = {c["spec"]["extendedResourceName"]: c for c in generated.classes}
    profiles = sorted({d["attributes"]["profile"]["string"] for s in inventory.slices
                       for d in s["spec"].get("devices") or [] if "profile" in (d.get("attributes") or {})})
    assert profiles and set(by_resource) == {"nvidia.com/gpu", *(f"nvidia.com/mig-{p}" for p in profiles)}
    index = dra.build_index(dra.Inventory(slices=inventory.slices,
                                          classes={c["metadata"]["name"]: c for c in generated.classes}))
    for resource, device_class in by_resource.items():
        kubernetes_validate.validate(device_class, "1.34.0", strict=True)
        claim = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": device_class["metadata"]["name"]}}]}}
        verdict = dra.check(dra.parse_claim_spec(claim), index)
        assert verdict.status == "satisfiable", (resource, verdict.message)
    mig = by_resource[f"nvidia.com/mig-{profiles[0]}"]
    claim = {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": mig["metadata"]["name"],
                                                                "selectors": [{"cel": {"expression":
        f"device.attributes['gpu.nvidia.com'].profile != '{profiles[0]}'"}}]}}]}}
    assert dra.check(dra.parse_claim_spec(claim), index).status == "never"  # only that profile


def _native(name, resource="nvidia.com/gpu"):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"extendedResourceName": resource}}


def test_resources_already_served_are_not_claimed_again():
    inventory = load_inventory(None)
    inventory.classes["gpu.nvidia.com"] = _native("gpu.nvidia.com")  # NVIDIA's chart sets it
    generated = dra.generate_classes(inventory)
    assert generated.kept == {"nvidia.com/gpu": "gpu.nvidia.com"}
    assert "nvidia.com/gpu" not in {c["spec"]["extendedResourceName"] for c in generated.classes}


def test_two_classes_claiming_one_name_are_refused(tmp_path):
    inventory = load_inventory(None)
    inventory.classes.update({"a": _native("a"), "b": _native("b")})
    with pytest.raises(dra.ClassConflict, match="a, b all set extendedResourceName nvidia.com/gpu"):
        dra.generate_classes(inventory)
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump_all(inventory.slices + list(inventory.classes.values())))
    result = subprocess.run([sys.executable, "-m", "app", "classes", "--inventory", str(path)], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 2 and "extendedResourceName nvidia.com/gpu" in result.stderr
    assert result.stdout == ""


def test_cli_prints_classes_to_apply():
    result = subprocess.run([sys.executable, "-m", "app", "classes", "--inventory", "example"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0
    docs = list(yaml.safe_load_all(result.stdout))
    assert {d["kind"] for d in docs} == {"DeviceClass"} and docs[0]["spec"]["extendedResourceName"] == "nvidia.com/gpu"


def test_classes_say_what_hardware_they_were_judged_against():
    """Issue 46: classes of the bundled example's A100s must not look like classes for yours:
    without an inventory named, none are printed; with the example, it is said."""
    unnamed = subprocess.run([sys.executable, "-m", "app", "classes"], cwd=ROOT, capture_output=True, text=True)
    assert unnamed.returncode == 2 and not unnamed.stdout and "--inventory" in unnamed.stderr
    result = subprocess.run([sys.executable, "-m", "app", "classes", "--inventory", "example"], cwd=ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout
    assert result.stderr.startswith("judged against: the bundled EXAMPLE inventory (not your cluster), "
                                    "3 node(s), 28 device(s)")
