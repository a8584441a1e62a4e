"""Issue 32: pods admitted unmigrated because a review never reached the webhook (failurePolicy
Ignore) are counted per namespace, by the webhook's own decision, as a metric the fail-open
alert's runbook points at."""

from app import kube
from app.migration import OptIn
from app.application import UNKNOWN, per_namespace, unmigrated
from app.policy import default_policy
from app.server import Metrics, PolicyHolder, ServiceState
from app.server.unmigrated_count import UnmigratedCount
from tests.helpers import container, pod
from tests.unit.device_inventory import build_inventory

OPT_IN = OptIn("dra-bridge.io/migrate", "enabled")


def gpu_pod(name, namespace="team-a", **spec):
    p = pod([container("w", {"nvidia.com/gpu": 1})])
    p["metadata"].update(name=name, namespace=namespace)
    p["spec"].update(spec)
    return p


def state() -> ServiceState:
    metrics = Metrics()
    return ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                        namespace_labels=kube.NamespaceLabels(None), metrics=metrics, inventory=build_inventory())


def test_only_running_pods_the_webhook_would_rewrite_now_count():
    finished = gpu_pod("done")
    finished["status"] = {"phase": "Succeeded"}
    migrated = pod([container("w", {})])
    migrated["metadata"].update(name="claims", namespace="team-a")
    migrated["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    pods = [gpu_pod("missed"), gpu_pod("bound", nodeName="gpu-h100-0"), finished, migrated,
            gpu_pod("elsewhere", namespace="plain"), gpu_pod("off", namespace="off")]
    namespaces = {"team-a": {"dra-bridge.io/migrate": "enabled"}, "off": {}}
    found = list(unmigrated(pods, namespaces, default_policy(), UNKNOWN, OPT_IN))
    assert [p["metadata"]["name"] for p in found] == ["missed", "bound"]
    assert per_namespace(found) == {"team-a": 2}


def test_the_count_is_a_metric_per_opted_in_namespace_and_a_failed_read_keeps_the_last():
    service = state()
    reads = [({"team-a": {}, "team-b": {}}, [gpu_pod("missed")]), ({"team-b": {}}, [])]

    def read():
        if not reads:
            raise ConnectionError("API down")
        return reads.pop(0)
    counter = UnmigratedCount(service, read, None)
    assert counter.run_once() == {"team-a": 1}
    text = service.metrics.render().decode()
    assert 'dra_bridge_unmigrated_pods{pod_namespace="team-a"} 1.0' in text
    assert 'dra_bridge_unmigrated_pods{pod_namespace="team-b"} 0.0' in text
    assert counter.run_once() == {}  # team-a left the opt-in: its series goes
    text = service.metrics.render().decode()
    assert 'pod_namespace="team-a"' not in text and 'dra_bridge_unmigrated_pods{pod_namespace="team-b"} 0.0' in text
    assert counter.run_once() is None
    text = service.metrics.render().decode()
    assert "dra_bridge_unmigrated_count_failures_total 1.0" in text
    assert 'dra_bridge_unmigrated_pods{pod_namespace="team-b"} 0.0' in text

    def pods_then_down():  # pods read as they are consumed: the API fails on a later page
        yield gpu_pod("missed", namespace="team-b")
        raise ConnectionError("API down on the next page")
    reads.append(({"team-b": {}}, pods_then_down()))
    assert counter.run_once() is None  # the last count stays, the failure is counted
    text = service.metrics.render().decode()
    assert "dra_bridge_unmigrated_count_failures_total 2.0" in text
    assert 'dra_bridge_unmigrated_pods{pod_namespace="team-b"} 0.0' in text


def test_a_round_that_raises_is_counted_logged_and_the_rounds_go_on(caplog):
    service = state()
    counter = UnmigratedCount(service, lambda: ({}, []), None, interval_s=0.01)
    rounds = []

    def broken():
        rounds.append(1)
        if len(rounds) >= 2:
            counter.stop()
        raise RuntimeError("a planning bug")
    counter.run_once = broken
    counter._loop()
    assert len(rounds) == 2  # the first failure did not stop the rounds
    assert "dra_bridge_unmigrated_count_failures_total 2.0" in service.metrics.render().decode()
    assert "unmigrated-count round failed" in caplog.text
