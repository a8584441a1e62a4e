"""Issue 12: a review that cannot finish (a bug, the namespace's labels unreadable) is answered
by the policy's failure rule, keeps the findings already made, and is counted and logged."""

import logging

import orjson
import pytest
from starlette.testclient import TestClient

from app import kube
from app.dra import build_index
from app.server import Metrics, PolicyHolder, ServiceState, create_app
from tests.helpers import pod, review
from tests.kube.fakeapi import FakeKube, Fault
from tests.unit.device_inventory import build_inventory

POLICY = ("namespaces:\n- names: [strict]\n  mode: enforce\n  allowedDeviceClasses: [gpu.nvidia.com]\n"
          "- names: [lenient]\n  mode: enforce\n  onInternalError: allow\n- names: [advice]\n  mode: warn\n"
          "- selector: {matchLabels: {tier: prod}}\n  mode: enforce\n  migrate: false\n")


class _Exploding:
    """A device index whose node groups raise: stands for any bug in the feasibility check."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        if name == "groups":
            raise RuntimeError("boom")
        return getattr(self._real, name)


class _BrokenState(ServiceState):
    def index(self):
        return _Exploding(super().index())


@pytest.fixture
def client(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    metrics = Metrics()
    state = _BrokenState(policy=PolicyHolder(str(path), metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, inventory=build_inventory())
    with TestClient(create_app(state)) as c:
        yield c


def claim(device_class="gpu.nvidia.com"):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
            "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": device_class}}]}}}


def validate(client, obj, namespace):
    body = orjson.dumps(review(obj, kind="ResourceClaim", namespace=namespace))
    return client.post("/validate", content=body).json()["response"]


def test_findings_before_a_crash_still_deny(client, caplog):
    with caplog.at_level(logging.WARNING):
        resp = validate(client, claim("mig.nvidia.com"), "strict")
    assert resp["allowed"] is False and "is not allowed (allowed: gpu.nvidia.com)" in resp["status"]["message"]
    assert "not finished" in caplog.text and "RuntimeError" in caplog.text


def test_a_crash_denies_in_enforce_and_is_counted(client):
    resp = validate(client, claim(), "strict")
    assert resp["allowed"] is False and resp["status"]["code"] == 500
    assert "internal error in the feasibility check (RuntimeError)" in resp["status"]["message"]
    metrics = client.get("/metrics").text
    assert 'dra_bridge_unfinished_reviews_total{endpoint="validate",reason="internal_error"} 1.0' in metrics


def test_on_internal_error_allow_and_warn_mode_admit_with_a_warning(client):
    for namespace in ("lenient", "advice"):
        resp = validate(client, claim(), namespace)
        assert resp["allowed"] is True
        assert any("not fully validated" in w for w in resp["warnings"])


@pytest.fixture
def kube_api():
    fake = FakeKube().start()
    fake.namespaces.update({"prod-a": {"tier": "prod"}, "dev-a": {"tier": "dev"}})
    yield fake
    fake.stop()


def _labels_client(tmp_path, kube_api):
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    metrics = Metrics()
    api = kube.api_client(kube_api.kubeconfig(tmp_path / "kubeconfig"))
    labels = kube.NamespaceLabels(api, timeout_s=0.5, ttl_s=0.0, retry_s=0.0)
    state = ServiceState(policy=PolicyHolder(str(path), metrics), templates=kube.TemplateStore(None),
                         namespace_labels=labels, metrics=metrics, inventory=build_inventory())
    return TestClient(create_app(state))


def mutate(client, namespace):
    obj = pod()
    obj["metadata"]["namespace"] = namespace
    return client.post("/mutate", content=orjson.dumps(review(obj, namespace=namespace))).json()["response"]


def test_failed_label_lookup_keeps_the_last_known_policy(tmp_path, kube_api):
    with _labels_client(tmp_path, kube_api) as client:
        assert "patch" not in mutate(client, "prod-a")  # migrate: false by label
        assert "patch" in mutate(client, "dev-a")
        kube_api.faults.append(Fault(status=500, times=100))
        # The API fails: the labels read before still decide (was: {} -> prod-a migrated).
        assert "patch" not in mutate(client, "prod-a")
        assert "patch" in mutate(client, "dev-a")
        kube_api.faults.clear()
        kube_api.namespaces["dev-a"] = {"tier": "prod"}
        assert "patch" not in mutate(client, "dev-a")  # failures were not cached as answers


def test_unknown_labels_are_answered_by_the_failure_rule(tmp_path, kube_api):
    with _labels_client(tmp_path, kube_api) as client:
        kube_api.faults.append(Fault(status=500, times=100))
        resp = mutate(client, "prod-a")  # never read: which policy applies is unknown
        assert resp["allowed"] is True and "patch" not in resp
        assert any("admitted unmigrated" in w and "unknown" in w for w in resp["warnings"])
        denied = validate(client, claim(), "prod-a")
        assert denied["allowed"] is False and "unknown" in denied["status"]["message"]
        metrics = client.get("/metrics").text
        assert 'reason="namespace_unknown"' in metrics


def test_build_index_is_real():
    assert build_index(build_inventory()).devices  # the index the exploding one wraps
