"""Issue 34: `dra-bridge quota` proposes the DRA side of every GPU budget: ResourceQuota keys
(none where a DeviceClass declares the limited resource: 1.37 counts its claims there already)
and the Kueue deviceClassMappings for the GPU resources ClusterQueues cover."""

import yaml

from app.cli import main
from app.migration.budgets import kueue_mappings, quota_changes
from app.policy import default_policy

RULES = default_policy().migration
QUOTA = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "team-a",
                                                                    "resourceVersion": "7"},
         "spec": {"hard": {"requests.nvidia.com/gpu": "4", "pods": "100"}}, "status": {"used": {}}}
CPU_QUOTA = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "cpu", "namespace": "team-a"},
             "spec": {"hard": {"requests.cpu": "4"}}}
QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "research"},
         "spec": {"resourceGroups": [{"coveredResources": ["cpu", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb",
                                                           "nvidia.com/mig-2g.20gb"]}]}}
MAPPED = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
          "spec": {"extendedResourceName": "nvidia.com/gpu"}}


def test_a_quota_on_legacy_gpus_gets_the_class_key_with_its_value_and_server_fields_go():
    [change] = quota_changes([QUOTA, CPU_QUOTA], RULES, {})
    assert change.proposed["spec"]["hard"]["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"] == "4"
    assert "status" not in change.proposed and "resourceVersion" not in change.proposed["metadata"]
    assert "twice 4" in change.notes[0]


def test_a_class_declaring_the_resource_needs_nothing_added():
    [change] = quota_changes([QUOTA], RULES, {"gpu.nvidia.com": "nvidia.com/gpu"})
    assert change.proposed is None and "counts migrated pods already" in change.notes[0]


def test_kueue_maps_each_class_once():
    mappings, notes = kueue_mappings([QUEUE], RULES)
    assert mappings[0] == {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}
    classes = [c for m in mappings for c in m["deviceClassNames"]]
    assert len(classes) == len(set(classes))  # Kueue counts a class as one resource
    assert any("already mapped" in n for n in notes)


def test_the_command_prints_what_to_apply_and_exits_1(tmp_path, capsys):
    source = tmp_path / "budgets.yaml"
    source.write_text(yaml.safe_dump_all([QUOTA, CPU_QUOTA, QUEUE]))
    assert main(["quota", "-f", str(source)]) == 1
    out = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in out] == ["ResourceQuota", "Configuration"]
    assert main(["quota", "-f", str(source), "-o", "diff"]) == 1
    assert "+    gpu.nvidia.com.deviceclass.resource.k8s.io/devices: '4'" in capsys.readouterr().out


def test_nothing_to_do_exits_0(tmp_path, capsys):
    source = tmp_path / "budgets.yaml"
    source.write_text(yaml.safe_dump_all([QUOTA, MAPPED]))
    assert main(["quota", "-f", str(source)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "one budget" in captured.err


def kueue_configmap(**extra):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kueue-manager-config",
                                                               "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": yaml.safe_dump({
                "apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
                "resources": {"deviceClassMappings": [{"name": "nvidia.com/gpu",
                                                       "deviceClassNames": ["gpu.nvidia.com"]}]}, **extra})}}


GPU_QUEUE = {**QUEUE, "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"]}]}}
MANAGER = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system"},
           "spec": {"template": {"spec": {"containers": [
               {"name": "manager", "args": ["--config=/cfg", "--feature-gates=DynamicResourceAllocation=true"]}]}}}}


def test_mappings_kueue_has_already_are_not_proposed_again(tmp_path, capsys):
    source = tmp_path / "budgets.yaml"
    gated = kueue_configmap(featureGates={"DynamicResourceAllocation": True})
    source.write_text(yaml.safe_dump_all([GPU_QUEUE, gated]))
    assert main(["quota", "-f", str(source)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "counts DeviceClass gpu.nvidia.com as nvidia.com/gpu already" in captured.err
    # The gate may be on through the manager's flag instead.
    source.write_text(yaml.safe_dump_all([GPU_QUEUE, kueue_configmap(), MANAGER]))
    assert main(["quota", "-f", str(source)]) == 0


def test_a_mapping_without_kueues_dra_gate_gets_the_gate_in_the_configurations_version(tmp_path, capsys):
    source = tmp_path / "budgets.yaml"
    source.write_text(yaml.safe_dump_all([GPU_QUEUE, kueue_configmap()]))
    assert main(["quota", "-f", str(source)]) == 1
    [configuration] = yaml.safe_load_all(capsys.readouterr().out)
    assert configuration == {"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
                             "featureGates": {"DynamicResourceAllocation": True}}


NVIDIA_GPU = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com",
                                                                                     "resourceVersion": "3"},
              "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}


def test_one_budget_proposes_the_class_declaring_the_resource_and_no_second_key(tmp_path, capsys):
    source = tmp_path / "budgets.yaml"
    source.write_text(yaml.safe_dump_all([QUOTA, NVIDIA_GPU]))
    assert main(["quota", "-f", str(source), "--budget", "one"]) == 1
    captured = capsys.readouterr()
    [cls] = yaml.safe_load_all(captured.out)
    assert cls["kind"] == "DeviceClass" and cls["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert cls["spec"]["selectors"] == NVIDIA_GPU["spec"]["selectors"] and "resourceVersion" not in cls["metadata"]
    assert "one budget" in captured.err and "native path" in captured.err
    assert main(["quota", "-f", str(source), "--budget", "one", "-o", "diff"]) == 1
    assert "+  extendedResourceName: nvidia.com/gpu" in capsys.readouterr().out
    # split (the default, 1.34+): the class key instead, the class untouched
    assert main(["quota", "-f", str(source)]) == 1
    [quota] = yaml.safe_load_all(capsys.readouterr().out)
    assert quota["kind"] == "ResourceQuota"


def test_one_budget_leaves_a_class_that_declares_another_resource_to_the_split_key():
    from app.migration.budgets import one_budget_classes
    other = {**NVIDIA_GPU, "spec": {**NVIDIA_GPU["spec"], "extendedResourceName": "example.com/gpu"}}
    proposed, notes = one_budget_classes([QUOTA], {"gpu.nvidia.com": other}, RULES)
    assert proposed == [] and "declares example.com/gpu already" in notes[0]
    proposed, notes = one_budget_classes([QUOTA], {}, RULES)
    assert proposed == [] and "does not exist here" in notes[0]


def test_a_proposal_drops_kubectls_last_applied_record_and_keeps_the_admins_annotations():
    from app.migration import clean_object
    obj = {**NVIDIA_GPU, "metadata": {"name": "c", "uid": "u", "annotations": {
        "kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "gpu"}}}
    assert clean_object(obj)["metadata"] == {"name": "c", "annotations": {"team": "gpu"}}
    only = {**obj, "metadata": {"name": "c", "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}}
    assert clean_object(only)["metadata"] == {"name": "c"}


def test_previews_read_kueues_configuration_from_an_export_as_serve_reads_it_from_the_cluster():
    from app.application.manifests import kueue_of_inputs
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team-a",
                                                          "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    gated = kueue_configmap(featureGates={"DynamicResourceAllocation": True})
    view = kueue_of_inputs([("f", [(1, gated), (2, pod)])])
    assert view.mappings == {"gpu.nvidia.com": "nvidia.com/gpu"} and view.dra_gate
    assert kueue_of_inputs([("f", [(1, pod)])]) is None
