"""Issue 34: `audit` adds up each GPU quota's use on both sides (device-plugin pods and the
devices claims hold) and names a budget that DRA usage escapes."""

import json

import yaml

from app.cli import main
from app.migration import quota_use
from app.policy import default_policy

RULES = default_policy().migration
QUOTA = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "team-a"},
         "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}


def pod(name, gpus, namespace="team-a", **status):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": "n1",
                     "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
            "status": status}


def claim(name, devices, cls="gpu.nvidia.com", namespace="team-a"):
    results = [{"request": "gpu/aligned", "driver": "gpu.nvidia.com", "pool": "n1", "device": f"gpu-{i}"}
               for i in range(devices)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
                {"name": "aligned", "deviceClassName": cls, "count": devices}]}]}},
            "status": {"allocation": {"devices": {"results": results}}}}


def test_devices_claims_hold_escape_a_quota_that_counts_them_under_no_key():
    [use] = quota_use([QUOTA], [pod("a", 2), pod("done", 8, phase="Succeeded"), pod("elsewhere", 8, "team-b")],
                      [claim("c", 3), claim("other-team", 5, namespace="team-b")], RULES, {})
    assert (use.plugin, use.dra, use.escaped) == (2, 3, 3)
    assert "does not count 3 device(s) of DeviceClass gpu.nvidia.com" in use.problem
    assert "5 in use against 4" in use.problem


def test_a_class_declaring_the_resource_or_its_own_key_counts_them():
    [mapped] = quota_use([QUOTA], [], [claim("c", 3)], RULES, {"gpu.nvidia.com": "nvidia.com/gpu"})
    assert (mapped.dra, mapped.escaped, mapped.problem) == (3, 0, None)
    keyed = {**QUOTA, "spec": {"hard": {"requests.nvidia.com/gpu": "4",
                                         "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "4"}}}
    [own] = quota_use([keyed], [], [claim("c", 3)], RULES, {})
    assert own.escaped == 0


def test_a_native_pod_served_by_a_claim_is_not_counted_on_the_plugin_side():
    native = pod("n", 2, extendedResourceClaimStatus={"resourceClaimName": "n-gpu"})
    [use] = quota_use([QUOTA], [native], [], RULES, {})
    assert use.plugin == 0


def test_a_pod_not_bound_to_a_node_holds_no_device_plugin_gpu():
    waiting = pod("gated", 2)
    del waiting["spec"]["nodeName"]
    [use] = quota_use([QUOTA], [waiting, pod("bound", 1)], [], RULES, {})
    assert use.plugin == 1


def test_audit_names_the_escaped_budget_and_exits_1(tmp_path, capsys):
    source = tmp_path / "cluster.yaml"
    source.write_text(yaml.safe_dump_all([QUOTA, claim("c", 3)]))
    assert main(["audit", "-f", str(source)]) == 1
    assert "escaped budget: ResourceQuota team-a/gpus limits requests.nvidia.com/gpu" in capsys.readouterr().out
    assert main(["audit", "-f", str(source), "-o", "json"]) == 1
    [budget] = json.loads(capsys.readouterr().out)["budgets"]
    assert budget["escaped"] == 3 and budget["problem"]


def test_the_implicit_class_key_counts_only_a_class_declaring_an_extended_resource():
    # kubernetes pkg/quota/v1/evaluator/core/resource_claims.go: MatchingResources takes
    # requests.deviceclass.resource.kubernetes.io/<class> only where the class maps a resource.
    implicit = {**QUOTA, "spec": {"hard": {"requests.nvidia.com/gpu": "4",
                                            "requests.deviceclass.resource.kubernetes.io/gpu.nvidia.com": "4"}}}
    [unmapped] = quota_use([implicit], [], [claim("c", 3)], RULES, {})
    assert unmapped.escaped == 3
    [other] = quota_use([implicit], [], [claim("c", 3)], RULES, {"gpu.nvidia.com": "example.com/gpu"})
    assert other.escaped == 0


def test_plan_judges_a_quota_by_the_classes_in_the_export_and_a_class_asks_for_nothing(tmp_path, capsys):
    # What `dra-bridge quota --budget one` proposes, planned with the quota it is for: the class
    # counts claims under requests.nvidia.com/gpu, so no key is to be added, and the class
    # (declaring nvidia.com/gpu) is no GPU request of its own.
    klass = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
             "spec": {"extendedResourceName": "nvidia.com/gpu"}}
    source = tmp_path / "cluster.yaml"
    source.write_text(yaml.safe_dump_all([QUOTA, klass]))
    assert main(["plan", "-f", str(source), "-o", "report"]) == 0
    reports = {r["kind"]: r for r in json.loads(capsys.readouterr().out)["objects"]}
    assert reports["ResourceQuota"]["status"] == "unchanged" and reports["DeviceClass"]["status"] == "unchanged"
    source.write_text(yaml.safe_dump_all([QUOTA]))
    assert main(["plan", "-f", str(source), "-o", "report"]) == 0
    [report] = json.loads(capsys.readouterr().out)["objects"]
    assert report["status"] == "migrated"
    assert main(["audit", "-f", str(source)]) == 0


def test_a_budget_held_beyond_its_limit_is_named_even_where_every_key_counts(tmp_path, capsys):
    lowered = {**QUOTA, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}}
    [use] = quota_use([lowered], [pod("a", 2)], [claim("c", 1)], RULES, {"gpu.nvidia.com": "nvidia.com/gpu"})
    assert (use.escaped, use.over, use.problem) == (0, 1, None)
    assert "limits requests.nvidia.com/gpu to 2 but its pods hold 3 (device plugin 2, DRA 1)" in use.over_problem
    [fits] = quota_use([QUOTA], [pod("a", 2)], [claim("c", 1)], RULES, {"gpu.nvidia.com": "nvidia.com/gpu"})
    assert (fits.over, fits.over_problem) == (0, None)
    source = tmp_path / "cluster.yaml"
    source.write_text(yaml.safe_dump_all([lowered, pod("a", 3)]))
    assert main(["audit", "-f", str(source)]) == 1
    assert "over budget: ResourceQuota team-a/gpus limits requests.nvidia.com/gpu to 2" in capsys.readouterr().out
