"""Issue 22: replicas of a shape already decided are answered on the event loop from the
decision made for the first one (no worker hand-off); the answer equals a fresh decision."""

import base64

import orjson
from starlette.testclient import TestClient

from app import kube
from app.policy import default_policy, parse_policy
from app.server import Metrics, PolicyHolder, ServiceState, create_app
from tests.helpers import container, pod, review
from tests.unit.device_inventory import build_inventory
from tests.unit.test_mutation import with_token_volume


def state_with(policy=None) -> ServiceState:
    metrics = Metrics()
    holder = PolicyHolder(None, metrics)
    if policy is not None:
        holder.policy = policy
    return ServiceState(policy=holder, templates=kube.TemplateStore(None), namespace_labels=kube.NamespaceLabels(None),
                        metrics=metrics, inventory=build_inventory())


def mutate(client, obj, uid):
    return client.post("/mutate", content=orjson.dumps(review(obj, uid=uid))).json()["response"]


def test_replicas_are_answered_from_the_first_decision_and_alike():
    state = state_with()
    replicas = [with_token_volume(pod([container("w", {"nvidia.com/gpu": 2})]), s) for s in ("aaaaa", "bbbbb", "ccccc")]
    with TestClient(create_app(state)) as client:
        answers = [mutate(client, p, f"u{i}") for i, p in enumerate(replicas)]
    with TestClient(create_app(state_with())) as other:
        fresh = mutate(other, replicas[2], "u2")
    assert [a["uid"] for a in answers] == ["u0", "u1", "u2"]
    assert len(state.decisions._items) == 1
    assert answers[2] == fresh  # the remembered decision is the one a fresh server makes
    patch = orjson.loads(base64.b64decode(answers[1]["patch"]))
    assert any(op["path"] == "/spec/resourceClaims" for op in patch)
    assert 'dra_bridge_migrations_total{result="migrated"} 3.0' in state.metrics.render().decode()


def test_a_new_policy_is_never_answered_from_decisions_made_under_the_old_one():
    state = state_with()
    p = pod([container("w", {"nvidia.com/gpu": 1})])
    with TestClient(create_app(state)) as client:
        assert "patch" in mutate(client, p, "before")
        state.policy.policy = parse_policy("defaults:\n  migrate: false\n")
        assert "patch" not in mutate(client, p, "after")


def test_policies_that_read_namespace_labels_always_decide_in_a_worker():
    policy = parse_policy("namespaces:\n- selector: {matchLabels: {tier: prod}}\n  migrate: false\n")
    assert policy.needs_namespace_labels
    state = state_with(policy)
    with TestClient(create_app(state)) as client:
        mutate(client, pod([container("w", {"nvidia.com/gpu": 1})]), "x")
    assert not state.decisions._items
    assert default_policy().needs_namespace_labels is False


def test_issue_23_a_pod_kueue_admits_by_itself_is_never_answered_from_a_replica_it_does_not():
    """Same spec, same namespace: the path choice also reads the Kueue queue (rewritten, the pod
    would leave its ClusterQueue's GPU quota), so it is part of the shape."""
    state = state_with()
    plain = pod([container("w", {"nvidia.com/gpu": 2})])
    queued = pod([container("w", {"nvidia.com/gpu": 2})])
    queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
    with TestClient(create_app(state)) as client:
        assert "patch" in mutate(client, plain, "plain")
        answer = mutate(client, queued, "queued")
    assert "patch" not in answer and "Kueue admits this pod by itself (queue lq)" in answer["warnings"][0]
