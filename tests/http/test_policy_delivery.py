"""Issue 31, delivery: the policy ConfigMap is judged when applied (/validate-policy), and each
replica says which policy it enforces and that it refused a reload (readyz, metrics, an Event)."""

import hashlib

import orjson
import pytest
import yaml
from starlette.testclient import TestClient

from app import kube
from app.server import Metrics, PolicyHolder, ServiceState, create_app
from tests.helpers import review
from tests.unit.device_inventory import build_inventory

GOOD = "rules:\n- name: at-most-4\n  maxDevicesPerPod: 4\n"


class Events:
    def __init__(self):
        self.posted = []

    def post(self, event_type, reason, message):
        self.posted.append((event_type, reason, message))


@pytest.fixture
def served(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text(GOOD)
    metrics = Metrics()
    events = Events()
    holder = PolicyHolder(str(path), metrics, events)
    state = ServiceState(policy=holder, templates=kube.TemplateStore(None), namespace_labels=kube.NamespaceLabels(None),
                         metrics=metrics, inventory=build_inventory())
    with TestClient(create_app(state)) as client:
        yield client, path, holder, events


def configmap(text=None, name="dra-bridge-policy"):
    data = {"policy.yaml": text} if text is not None else {"other": "x"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "dra-bridge",
                                                                   "labels": {"dra-bridge.io/policy": "true"}},
            "data": data}


def judge(client, obj, operation="CREATE"):
    body = review(obj, operation=operation, namespace="dra-bridge", kind="ConfigMap")
    return client.post("/validate-policy", content=orjson.dumps(body)).json()["response"]


@pytest.mark.parametrize("text, said", [
    ("rules:\n- name: x\n  validations: [{expression: 'request.count <'}]\n",
     "data.policy.yaml: rules[0]: validations[0].expression: CEL does not compile"),
    ("defaults: {mode: sometimes}\n", "data.policy.yaml: defaults.mode"),
    ("defaults: [\n", "not valid YAML"),
    (None, "data.policy.yaml is missing"),
])
def test_a_bad_policy_is_refused_when_applied_naming_the_field(served, text, said):
    client = served[0]
    answer = judge(client, configmap(text))
    assert answer["allowed"] is False and answer["status"]["code"] == 422 and said in answer["status"]["message"]


def test_a_good_policy_is_admitted_with_its_digest(served):
    client = served[0]
    answer = judge(client, configmap(GOOD), "UPDATE")
    digest = hashlib.sha256(GOOD.encode()).hexdigest()[:16]
    assert answer["allowed"] is True and f"dra-bridge policy {digest}: 1 rule(s)" in answer["warnings"][0]
    # Issue 56: deleting it is refused, saying how to on purpose; annotated, it goes, with a warning.
    delete = review(None, operation="DELETE", namespace="dra-bridge", kind="ConfigMap")
    delete["request"].update(name="dra-bridge-policy", oldObject=configmap(GOOD))
    refused = client.post("/validate-policy", content=orjson.dumps(delete)).json()["response"]
    assert refused["allowed"] is False and "dra-bridge.io/allow-delete=true" in refused["status"]["message"]
    delete["request"]["oldObject"]["metadata"]["annotations"] = {"dra-bridge.io/allow-delete": "true"}
    allowed = client.post("/validate-policy", content=orjson.dumps(delete)).json()["response"]
    assert allowed["allowed"] is True and "keep enforcing the last policy" in allowed["warnings"][0]


def test_each_replica_says_its_policy_and_a_refused_reload(served):
    client, path, holder, events = served
    first = client.get("/readyz").json()["detail"]["policy"]
    assert first["digest"] == hashlib.sha256(GOOD.encode()).hexdigest()[:16]
    assert first["source"] == str(path) and first["rules"] == 1
    # Where the rule is enforced: the pod's own device asks by the API server too (issue 56); the
    # claims a pod names only here.
    [(rule, where)] = first["enforcement"].items()
    assert rule == "at-most-4" and where["apiServer"] == ["maxDevicesPerPod"]
    [only] = where["webhookOnly"]
    assert only.startswith("maxDevicesPerPod: for the claims and templates a pod names")
    assert f'dra_bridge_policy_info{{digest="{first["digest"]}"}}' in client.get("/metrics").text
    path.write_text("defaults: {mode: sometimes}\n")
    assert holder.check() is False
    status = client.get("/readyz")
    assert status.status_code == 200  # the last good policy is still enforced
    refused = status.json()["detail"]["policy"]
    assert refused["digest"] == first["digest"] and "defaults.mode" in refused["rejected"]
    text = client.get("/metrics").text
    assert "dra_bridge_policy_rejected 1.0" in text and "dra_bridge_policy_reload_errors_total 1.0" in text
    assert [(t, r) for t, r, _m in events.posted] == [("Warning", "PolicyRejected")]
    assert first["digest"] in events.posted[0][2] and "defaults.mode" in events.posted[0][2]
    path.write_text(yaml.safe_dump({"defaults": {"mode": "enforce"}}))
    assert holder.check() is True
    again = client.get("/readyz").json()["detail"]["policy"]
    assert again["digest"] != first["digest"] and "rejected" not in again
    text = client.get("/metrics").text
    assert "dra_bridge_policy_rejected 0.0" in text and first["digest"] not in text
    assert events.posted[-1][:2] == ("Normal", "PolicyLoaded")


def test_an_absent_admin_policy_is_the_bundled_default_and_its_arrival_is_taken(tmp_path, caplog):
    """The overlay and chart mount the admin's ConfigMap optional: absent, the default is in
    force (said); written, it is taken at the next check; deleted, the default again, loudly."""
    path = tmp_path / "policy.yaml"
    with pytest.raises(Exception, match="cannot read"):
        PolicyHolder(str(path))  # not optional: a missing file is an error
    holder = PolicyHolder(str(path), Metrics(), optional=True)
    assert holder.status()["source"] == f"(bundled default): {path} absent" and holder.policy.rules == []
    default = holder.digest
    path.write_text("rules:\n- name: only-gpus\n  match: {kinds: [ResourceClaim]}\n  allowedDeviceClasses: [gpu.nvidia.com]\n")
    assert holder.check() is True
    status = holder.status()
    assert status["source"] == str(path) and status["digest"] != default
    assert status["enforcement"]["only-gpus"] == {"apiServer": ["allowedDeviceClasses"], "webhookOnly": []}
    assert [o["kind"] for o in holder.vap_objects] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]
    path.unlink()
    assert holder.check() is True
    assert holder.digest == default and holder.policy.rules == [] and "absent" in holder.status()["source"]
    assert "is gone" in caplog.text
