"""Issue 24: an inventory file (an export of the cluster) is read as live mode reads the cluster:
allocated ResourceClaims hold their devices, Namespaces carry the admin-access label, and
DeviceTaintRules taint the devices they select."""

import json

import pytest
import yaml

from app import dra
from app.common import InputError, parse_objects
from tests.unit.test_cli import run

CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}
SLICE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n1"},
         "spec": {"driver": "gpu.nvidia.com", "nodeName": "n1", "pool": {"name": "n1", "generation": 1,
                                                                          "resourceSliceCount": 1},
                  "devices": [{"name": "g0"}, {"name": "g1"}]}}


def held(*devices, namespace="a", **result):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "held", "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"driver": "gpu.nvidia.com", "pool": "n1", "device": d, "request": "r", **result} for d in devices]}}}}


def rule(selector, effect="NoSchedule"):
    spec = {"taint": {"key": "gpu.nvidia.com/xid", "value": "79", "effect": effect}}
    if selector is not None:
        spec["deviceSelector"] = selector
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"}, "spec": spec}


def export(*objects) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [CLASS, SLICE, *objects]})


def verdict(*objects, count=2):
    ix = dra.build_index(dra.inventory_from_objects(parse_objects(export(*objects), "x.yaml"), "x.yaml"))
    claim = dra.parse_claim_spec({"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu",
                                                                                      "count": count}}]}})
    return dra.check(claim, ix).status


def test_allocated_claims_in_an_export_hold_their_devices():
    assert verdict() == "satisfiable"
    assert verdict(held("g0")) == "unsatisfiable-now"
    assert verdict(held("g0"), count=1) == "satisfiable"
    assert verdict(held("g0", adminAccess=True)) == "satisfiable"  # admin access allocates nothing
    unallocated = held("g0")
    del unallocated["status"]
    assert verdict(unallocated) == "satisfiable"


@pytest.mark.parametrize("selector, status", [
    (None, "satisfiable"),  # no selector: no device
    ({}, "never"),  # empty: every device
    ({"driver": "gpu.nvidia.com", "pool": "n1", "device": "g1"}, "never"),
    ({"pool": "n1"}, "never"),
    ({"device": "g9"}, "satisfiable"),
    ({"driver": "other.example.com"}, "satisfiable"),
])
def test_device_taint_rules_taint_the_devices_they_select(selector, status):
    assert verdict(rule(selector)) == status


def test_a_taint_rule_without_effect_on_allocation_blocks_nothing():
    assert verdict(rule({}, effect="None")) == "satisfiable"


def test_claims_of_another_api_version_are_named():
    old = {**held("g0"), "apiVersion": "resource.k8s.io/v1beta1"}
    with pytest.raises(InputError, match="ResourceClaim apiVersion 'resource.k8s.io/v1beta1' is not supported"):
        dra.inventory_from_objects(parse_objects(export(old), "x.yaml"), "x.yaml")


def test_check_on_an_export_judges_admin_access_by_the_namespace_label(tmp_path):
    inventory = tmp_path / "export.yaml"
    inventory.write_text(export(held("g0"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {
        "name": "ops", "labels": {"resource.kubernetes.io/admin-access": "true"}}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}))
    claims = tmp_path / "claims.yaml"
    admin = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "monitor"},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": 2,
                                                                         "adminAccess": True}}]}}}
    plain = {**admin, "metadata": {"name": "two", "namespace": "team-a"},
             "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu", "count": 2}}]}}}
    claims.write_text(yaml.safe_dump_all([{**admin, "metadata": {"name": "monitor", "namespace": "ops"}},
                                          {**admin, "metadata": {"name": "monitor", "namespace": "team-a"}}, plain]))
    result = run("check", "-f", str(claims), "--inventory", str(inventory), "-o", "json")
    rows = json.loads(result.stdout)
    assert [r["status"] for r in rows] == ["satisfiable", "invalid", "unsatisfiable-now"], rows
    assert "namespace 'team-a' is not labelled resource.kubernetes.io/admin-access=true" in rows[1]["message"]
    assert result.returncode == 1
