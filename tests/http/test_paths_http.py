"""Issue 13: /mutate picks the path from the inventory it serves from."""

import copy

import orjson
import pytest
from starlette.testclient import TestClient

from app import kube
from app.server import Metrics, PolicyHolder, ServiceState, create_app
from tests.helpers import container, pod, review
from tests.unit.device_inventory import build_inventory

NATIVE = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu-native.nvidia.com"},
          "spec": {"extendedResourceName": "nvidia.com/gpu", "selectors": [{"cel": {"expression":
              "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}


def _client(native: bool):
    inventory = build_inventory()
    if native:
        inventory = copy.copy(inventory)
        inventory.classes = {**inventory.classes, NATIVE["metadata"]["name"]: NATIVE}
    metrics = Metrics()
    state = ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, inventory=inventory)
    return TestClient(create_app(state))


def mutate(client, obj):
    return client.post("/mutate", content=orjson.dumps(review(obj))).json()["response"]


def test_native_class_leaves_a_plain_pod_as_it_is():
    with _client(native=True) as client:
        resp = mutate(client, pod([container("main", {"nvidia.com/gpu": 2})]))
        assert resp["allowed"] and "patch" not in resp and "warnings" not in resp
        assert resp["auditAnnotations"]["path"].startswith("native: served by DRA as extended resources: "
                                                           "nvidia.com/gpu by DeviceClass gpu-native.nvidia.com")
        assert 'dra_bridge_migrations_total{result="native"} 1.0' in client.get("/metrics").text
        # What native cannot give goes through the rewrite, where that keeps its meaning:
        narrowed = pod([container("main", {"nvidia.com/gpu": 1})])
        narrowed["metadata"]["annotations"] = {"nvidia.com/use-gputype": "H100"}
        assert "patch" in mutate(client, narrowed)
        # a share no device here can keep stays on the device plugin, the reason counted (issue 23).
        shared = mutate(client, pod([container("main", {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 8000})]))
        assert "patch" not in shared and "would cost 1 whole GPU(s)" in shared["warnings"][0]
        metrics = client.get("/metrics").text
        assert 'dra_bridge_path_choices_total{path="legacy",reason="share"} 1.0' in metrics
        assert 'dra_bridge_path_choices_total{path="native",reason="native"} 1.0' in metrics


def test_without_a_native_class_the_pod_is_rewritten():
    with _client(native=False) as client:
        assert "patch" in mutate(client, pod([container("main", {"nvidia.com/gpu": 2})]))


@pytest.mark.parametrize("count", [20])  # the example inventory: 8 GPUs per node at most
def test_a_claim_no_node_could_ever_hold_keeps_the_pod_on_the_device_plugin(count):
    with _client(native=False) as client:
        resp = mutate(client, pod([container("main", {"nvidia.com/gpu": count})]))
        assert resp["allowed"] and "patch" not in resp
        assert any("left on the device plugin: the planned claim could never be satisfied here" in w
                   for w in resp["warnings"])
        assert 'dra_bridge_migrations_total{result="legacy"} 1.0' in client.get("/metrics").text


def test_a_pod_the_policy_refuses_is_denied_alike_for_a_dry_run_and_the_real_request(tmp_path, fake_kube):
    """Issue 30: the dry run showed a rewritten pod while the real create admitted it unmigrated.
    Issue 31: a pod over an enforce limit is denied (not admitted on the device plugin), dry run
    or not, naming the rule, and nothing is written for it."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("namespaces:\n- names: [team-a]\n  mode: enforce\n  maxDevicesPerClaim: 1\n")
    metrics = Metrics()
    state = ServiceState(policy=PolicyHolder(str(policy), metrics),
                         templates=kube.TemplateStore(kube.api_client_for_host(fake_kube.url)),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, inventory=build_inventory())
    typed = pod([container("main", {"nvidia.com/gpu": 2})])
    typed["metadata"]["annotations"] = {"nvidia.com/use-gputype": "H100"}  # rewritten, not native
    with TestClient(create_app(state)) as client:
        dry = client.post("/mutate", content=orjson.dumps(review(typed, dry_run=True))).json()["response"]
        real = client.post("/mutate", content=orjson.dumps(review(typed))).json()["response"]
        assert dry == real and not real["allowed"] and "patch" not in real
        assert "rule namespace-settings" in real["status"]["message"]
        assert "2 devices exceed the limit of 1 per claim" in real["status"]["message"]
        assert not [w for w in fake_kube.writes() if "resourceclaimtemplates" in w.path]  # never tried
        assert 'dra_bridge_migrations_total{result="denied"} 1.0' in client.get("/metrics").text  # the real one only
        policy.write_text(policy.read_text().replace("mode: enforce", "mode: warn"))
        assert state.policy.check()
        warned = client.post("/mutate", content=orjson.dumps(review(typed, dry_run=True))).json()["response"]
        assert warned["allowed"] and "patch" in warned  # warn: rewritten; /validate says the warning


def _state_with_a_serving_class() -> ServiceState:
    """The example inventory, and one preempting PriorityClass (serving-high, 100000)."""
    inventory = copy.copy(build_inventory())
    inventory.priority_classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                   "metadata": {"name": "serving-high"}, "value": 100000}]
    metrics = Metrics()
    return ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                        namespace_labels=kube.NamespaceLabels(None), metrics=metrics, inventory=inventory)


def test_issue_47_a_preempting_pod_is_left_on_the_device_plugin_with_a_warning_and_a_metric():
    """The webhook's inventory holds PriorityClasses (watched live, or in an inventory file): a pod
    that preempts keeps the device plugin, warned and counted under reason `preemption`."""
    state = _state_with_a_serving_class()
    with TestClient(create_app(state)) as client:
        preempting = pod([container("main", {"nvidia.com/gpu": 1})])
        preempting["spec"]["priorityClassName"] = "serving-high"
        resp = mutate(client, preempting)
        assert resp["allowed"] and "patch" not in resp
        assert "pod left on the device plugin: preemption: it preempts: priority 100000" in resp["warnings"][0]
        assert 'dra_bridge_path_choices_total{path="legacy",reason="preemption"} 1.0' in client.get("/metrics").text
        # A pod of the default priority is preempted by it: it stays too.
        assert "it is preempted" in mutate(client, pod([container("main", {"nvidia.com/gpu": 1})]))["warnings"][0]


def test_issue_47_the_priorities_gpu_pods_run_at_narrow_it_to_real_victims():
    """With the running pods read (GpuPriorityWatch), only GPU pods' priorities count: a
    PriorityClass no GPU pod uses makes no victim of a default-priority pod; a read that fails
    keeps the last set."""
    from app.server import GpuPriorityWatch

    state = _state_with_a_serving_class()
    running = [pod([container("main", {"nvidia.com/gpu": 1})]), pod([container("main", {"cpu": 1})])]
    running[0]["spec"].update(priority=0, preemptionPolicy="PreemptLowerPriority")
    running[1]["spec"].update(priority=100000, priorityClassName="serving-high")  # no GPU: not counted
    watch = GpuPriorityWatch(state, lambda: running)
    assert watch.run_once() == ({"priority": 0, "preemptionPolicy": "PreemptLowerPriority"},)
    with TestClient(create_app(state)) as client:
        assert "patch" in mutate(client, pod([container("main", {"nvidia.com/gpu": 1})]))  # no GPU pod above
        preempting = pod([container("main", {"nvidia.com/gpu": 1})])
        preempting["spec"]["priorityClassName"] = "serving-high"
        assert "it preempts: priority 100000 (serving-high) above GPU pods at 0" in mutate(client, preempting)["warnings"][0]

        def down():
            raise OSError("connection refused")
        kept = state.gpu_pods
        assert GpuPriorityWatch(state, down).run_once() is kept and state.gpu_pods is kept

        def first_page_then_down():  # read as consumed: the API fails on a later page
            yield pod([container("main", {"nvidia.com/gpu": 1})])
            raise OSError("connection reset")
        assert GpuPriorityWatch(state, first_page_then_down).run_once() is kept and state.gpu_pods is kept
