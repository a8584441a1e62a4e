"""Issue 47: Kueue 0.20's rules, unit-tested against its documented behaviour (the e2e Kueue is
the version the module proxy serves, 0.17). Kueue's CHANGELOG/CHANGELOG-0.20.md, v0.20.0,
"Actions Required Before Upgrading": kueue.x-k8s.io/v1beta1 is no longer served (#14558); a DRA
device-class mapping under the reserved resource name `pods` makes kueue-controller-manager fail
to start (#13989); Pod overhead and transformation outputs sharing a DRA resource name are now
charged, so ClusterQueues must cover mapped logical resources and what is still charged under
the original names (#14154)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from app.common import BridgeError
from app.migration import KueueView, kueue_configuration, kueue_mappings, unserved_versions
from app.policy import default_policy
from tests.conftest import ROOT

RULES = default_policy().migration


def queue(name, covered, version="v1beta2"):
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"resourceGroups": [{"coveredResources": covered}]}}


def test_a_mapping_named_pods_is_refused_naming_the_class():
    view = KueueView(mappings={"gpu.nvidia.com": "pods"}, dra_gate=True)
    assert "DeviceClass gpu.nvidia.com" in view.refused and "'pods'" in view.refused
    with pytest.raises(BridgeError, match="gpu.nvidia.com.*'pods'"):
        kueue_configuration([], view)
    with pytest.raises(BridgeError, match="named 'pods'"):
        kueue_configuration([{"name": "pods", "deviceClassNames": ["x"]}], KueueView(dra_gate=True))
    assert KueueView(mappings={"gpu.nvidia.com": "nvidia.com/gpu"}).refused is None


def test_v1beta1_objects_are_named_and_never_written():
    note = unserved_versions([queue("research", ["nvidia.com/gpu"], "v1beta1"), queue("prod", ["cpu"])])
    assert "1 Kueue object(s) are kueue.x-k8s.io/v1beta1 (ClusterQueue/research)" in note
    assert unserved_versions([queue("prod", ["cpu"])]) is None
    written = kueue_configuration([{"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}], None)
    assert written["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"


def test_a_queue_must_cover_the_mapped_name_beside_the_extended_resource():
    """A class Kueue already maps to `gpu`: pods still charging nvidia.com/gpu (and overhead left
    under it) and claims charging `gpu` need both in the queue."""
    cls = RULES.rule_for("nvidia.com/gpu")[0].deviceClass
    _mappings, notes = kueue_mappings([queue("research", ["nvidia.com/gpu"])], RULES, {cls: "gpu"})
    assert any("ClusterQueue research must cover gpu too" in n for n in notes), notes
    _mappings, notes = kueue_mappings([queue("research", ["nvidia.com/gpu", "gpu"])], RULES, {cls: "gpu"})
    assert not any("must cover" in n for n in notes), notes


def test_quota_refuses_a_configuration_kueue_would_not_start_with(tmp_path):
    configmap = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kueue-manager-config",
                                                                     "namespace": "kueue-system"},
                 "data": {"controller_manager_config.yaml": yaml.safe_dump({
                     "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
                     "resources": {"deviceClassMappings": [{"name": "pods", "deviceClassNames": ["gpu.nvidia.com"]}]}})}}
    path = tmp_path / "export.yaml"
    path.write_text(yaml.safe_dump_all([queue("research", ["nvidia.com/gpu"]), configmap]))
    result = subprocess.run([sys.executable, "-m", "app", "quota", "-f", str(path)], capture_output=True, text=True,
                            cwd=ROOT, timeout=60)
    assert result.returncode == 2 and "'pods'" in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_a_pod_kueue_admits_gets_one_alternative_kueue_charges(tmp_path):
    """Kueue charges a firstAvailable only when its alternatives are the same count of one logical
    resource, and never with constraints (0.20's KueueDRAIntegrationPrioritizedList, #14130; 0.17
    not at all): a multi-GPU pod Kueue admits by itself gets the one plain request, and plan says
    the topology preference was left out. Other pods keep the preference."""
    policy = yaml.safe_load((ROOT / "app/data/default-policy.yaml").read_text())
    policy["migration"]["kueueDeviceClasses"] = ["gpu.nvidia.com"]
    (tmp_path / "policy.yaml").write_text(yaml.safe_dump({"migration": policy["migration"]}))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "infer", "namespace": "team-a"},
                  "spec": {"selector": {"matchLabels": {"app": "i"}}, "template": {
                      "metadata": {"labels": {"app": "i", "kueue.x-k8s.io/queue-name": "research"}},
                      "spec": {"containers": [{"name": "c", "image": "x",
                                               "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}}}
    plain = json.loads(json.dumps(deployment))
    plain["metadata"]["name"] = "plain"
    del plain["spec"]["template"]["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    (tmp_path / "in.yaml").write_text(yaml.safe_dump_all([deployment, plain]))
    result = subprocess.run([sys.executable, "-m", "app", "plan", "--policy", str(tmp_path / "policy.yaml"), "-f",
                             str(tmp_path / "in.yaml"), "-o", "report"], capture_output=True, text=True, cwd=ROOT,
                            timeout=60)
    report = json.loads(result.stdout)
    rows = {r["name"]: r for r in report["objects"]}
    assert (rows["infer"]["status"], rows["infer"]["path"]) == ("migrated", "rewrite"), rows["infer"]
    assert any("without the preference for devices sharing" in r for r in rows["infer"]["reasons"])
    by_name = {t["metadata"]["name"]: t for t in report["templates"]}
    [kueue_template] = [by_name[n] for n in rows["infer"]["templates"]]
    [request] = kueue_template["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["count"] == 2 and "constraints" not in kueue_template["spec"]["spec"]["devices"]
    [plain_template] = [by_name[n] for n in rows["plain"]["templates"]]
    assert "firstAvailable" in plain_template["spec"]["spec"]["devices"]["requests"][0]
