"""Issue 34: a pod Kueue admits by itself is rewritten only onto claims Kueue counts as the
resource it asked for: the class mapped (policy or Kueue's own configuration), Kueue's DRA gate
on, and a template of the shape Kueue's DRA support counts (sigs.k8s.io/kueue v0.17 pkg/dra)."""

import pytest

from app.common import BridgeError
from app.migration.kueue import (KueueView, configuration_in, kueue_uncounted, kueue_view, manager_args)

MAPPED = KueueView({"gpu.nvidia.com": "nvidia.com/gpu"}, dra_gate=True)


def template(*requests, **devices):
    return {"metadata": {"name": "t"}, "spec": {"spec": {"devices": {"requests": list(requests), **devices}}}}


PLAIN = template({"name": "c", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount",
                                           "count": 2}})


def test_a_plain_count_of_a_mapped_class_is_counted():
    assert kueue_uncounted([PLAIN], ["nvidia.com/gpu"], [], MAPPED) is None
    assert kueue_uncounted([PLAIN], ["nvidia.com/gpu"], ["gpu.nvidia.com"], None) is None  # the policy says so


@pytest.mark.parametrize("view, why", [
    (None, "could not be read"),
    (KueueView({}, True), "do not map DeviceClass gpu.nvidia.com"),
    (KueueView({"gpu.nvidia.com": "example.com/gpu"}, True), "as example.com/gpu, not nvidia.com/gpu"),
    (KueueView({"gpu.nvidia.com": "nvidia.com/gpu"}, False), "without its DynamicResourceAllocation feature gate"),
])
def test_what_kueue_would_not_count_is_named(view, why):
    assert why in kueue_uncounted([PLAIN], ["nvidia.com/gpu"], [], view)


@pytest.mark.parametrize("shape, why", [
    (template({"name": "c", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1,
                                        "selectors": [{"cel": {"expression": "true"}}]}}), "CEL selectors"),
    (template({"name": "c", "firstAvailable": [{"name": "a", "deviceClassName": "gpu.nvidia.com"}]}),
     "firstAvailable"),
    (template({"name": "c", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}),
     "allocationMode All"),
    (template({"name": "c", "exactly": {"deviceClassName": "gpu.nvidia.com", "adminAccess": True}}), "adminAccess"),
    (template({"name": "c", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
              constraints=[{"matchAttribute": "gpu.nvidia.com/pcieRoot"}]), "constraints"),
    (template({"name": "c", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}},
              config=[{"opaque": {"driver": "gpu.nvidia.com", "parameters": {}}}]), "device config"),
])
def test_shapes_kueue_cannot_count_stay_on_the_plugin_even_when_mapped(shape, why):
    assert why in kueue_uncounted([shape], ["nvidia.com/gpu"], ["gpu.nvidia.com"], MAPPED)


def test_the_view_reads_gates_from_the_configuration_and_the_managers_flags():
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "featureGates": {"DynamicResourceAllocation": True},
              "resources": {"deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": ["a", "b"]}]}}
    view = kueue_view(config)
    assert view.dra_gate and view.mappings == {"a": "nvidia.com/gpu", "b": "nvidia.com/gpu"}
    # The flag overrides the file, as Kueue's command line does.
    assert not kueue_view(config, ["--feature-gates=DynamicResourceAllocation=false"]).dra_gate
    assert kueue_view({}, ["--feature-gates", "TopologyAwareScheduling=true,DynamicResourceAllocation=true"]).dra_gate
    assert not kueue_view({}).dra_gate


def test_configuration_comes_from_its_configmap_or_itself_and_bad_yaml_names_the_key():
    cm = {"kind": "ConfigMap", "metadata": {"name": "kueue-manager-config"},
          "data": {"controller_manager_config.yaml": "kind: Configuration\nfeatureGates: {X: true}\n"}}
    assert configuration_in(cm)["featureGates"] == {"X": True}
    assert configuration_in({"kind": "ConfigMap", "metadata": {"name": "other"}}) is None
    with pytest.raises(BridgeError, match="data.controller_manager_config.yaml is not YAML"):
        configuration_in({**cm, "data": {"controller_manager_config.yaml": "a: [\n"}})


def test_the_manager_container_is_the_one_named_manager():
    deployment = {"spec": {"template": {"spec": {"containers": [
        {"name": "proxy", "args": ["--x"]}, {"name": "manager", "command": ["/manager"], "args": ["--y"]}]}}}}
    assert manager_args(deployment) == ["/manager", "--y"]
    assert manager_args(None) == []
