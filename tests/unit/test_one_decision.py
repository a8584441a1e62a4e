"""Issues 30 and 43: one decision. The webhook (real requests and dry runs, through the HTTP
handler that reads `dryRun`), `plan`, `audit` and `rollout` decide a pod through
application.decide_pod on facts from application.cluster_facts: for the same pod, policy and
cluster they agree, on every path and on every policy setting that changes the outcome."""

import orjson
import pytest
from starlette.testclient import TestClient

from app import dra, kube
from app.application import cluster_facts, rollout
from app.application.manifests import plan_objects
from app.policy import default_policy, parse_policy
from app.server import Metrics, PolicyHolder, ServiceState, create_app
from tests.helpers import review
from tests.unit.test_mixed_cluster import plugin_node
from tests.unit.test_shadow import CLASSES, real_slices

OPTED = {"dra-bridge.io/migrate": "enabled"}
POLICIES = {
    "default": "{}",
    "legacy everywhere": None,  # migration.path: legacy
    "namespace off": "namespaces:\n- names: [team-a]\n  migrate: false\n",
    "selector native": "namespaces:\n- selector: {matchLabels: {tier: gold}}\n  path: native\n",
    "namespace rewrite": "namespaces:\n- names: [team-a]\n  path: rewrite\n",
    # the pod as admitted (rewritten, or its device-plugin asks as a claim) breaks a rule
    "limit, enforce": "namespaces:\n- names: [team-a]\n  mode: enforce\n  maxDevicesPerClaim: 1\n",
    "limit, warn": "namespaces:\n- names: [team-a]\n  mode: warn\n  maxDevicesPerClaim: 1\n",
    "limit, off": "namespaces:\n- names: [team-a]\n  migrate: false\n  mode: enforce\n  maxDevicesPerClaim: 1\n",
}
PODS = {
    "whole": {"nvidia.com/gpu": 2},
    "model": {"nvidia.com/gpu": 1},  # with a GFD product selector
    "typed pair": {"nvidia.com/gpu": 2},  # HAMi's use-gputype narrows the devices: rewritten onto 2 of them
    "share": {"nvidia.com/gpu": 1, "nvidia.com/gpumem": 8000},
    "mig": {"nvidia.com/mig-1g.10gb": 1},
    "too many": {"nvidia.com/gpu": 64},
}


def gpu_pod(name, limits):
    spec = {"containers": [{"name": "c", "image": "cuda", "resources": {"limits": limits}}]}
    meta = {"name": name.replace(" ", "-"), "namespace": "team-a"}
    if name == "model":
        spec["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    if name == "typed pair":
        meta["annotations"] = {"nvidia.com/use-gputype": "H100"}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


@pytest.fixture(scope="module")
def cluster():
    native = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu-native"},
              "spec": {"extendedResourceName": "nvidia.com/gpu", "selectors": CLASSES["gpu.nvidia.com"]["spec"]
                       ["selectors"]}}
    objects = [(0, o) for o in real_slices("h100x8", "dra-1") + list(CLASSES.values()) + [native] +
               [plugin_node("dp-1", 8, **{"nvidia.com/mig-1g.10gb": "7"}),
                {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "dra-1", "labels": {}}, "spec": {},
                 "status": {"allocatable": {"cpu": "8"}}}]]
    return dra.build_index(dra.inventory_from_objects(objects, "test"))


def load(name):
    if POLICIES[name] is None:
        base = default_policy()
        return base.model_copy(update={"migration": base.migration.model_copy(update={"path": "legacy"})})
    return parse_policy(POLICIES[name])


class Policy(PolicyHolder):
    """A policy given as an object (the service reloads from files)."""

    def __init__(self, policy):
        super().__init__(None)
        self.policy = policy


def serving(cluster, policy, labels) -> ServiceState:
    """The webhook's own state over the test's inventory: templates kept in memory (no API)."""
    metrics = Metrics()
    namespaces = kube.NamespaceLabels(None)
    namespaces.get = lambda _name: labels
    state = ServiceState(policy=Policy(policy), templates=kube.TemplateStore(None), namespace_labels=namespaces,
                         metrics=metrics)
    state.index = lambda: cluster
    state.readiness = lambda: (True, {"inventory": True})
    return state


def webhook_path(client, state, pod, dry_run):
    """What the webhook's answer does to the pod, the answer itself, and the templates it wrote."""
    before = dict(state.templates.offline)
    body = review(pod, dry_run=dry_run)
    answer = client.post("/mutate", content=orjson.dumps(body)).json()["response"]
    written = {k: v for k, v in state.templates.offline.items() if k not in before}
    if not answer["allowed"]:
        return "denied", answer, written
    if "patch" in answer:
        return "rewrite", answer, written
    said = (answer.get("auditAnnotations") or {}).get("path", "")
    if not said and answer.get("warnings"):  # admitted as written, saying why it cannot move
        return "unmigratable", answer, written
    return (said.split(":")[0] or "legacy"), answer, written


@pytest.mark.parametrize("policy_name", sorted(POLICIES))
@pytest.mark.parametrize("pod_name", sorted(PODS))
@pytest.mark.parametrize("labels", [OPTED, {**OPTED, "tier": "gold"}], ids=["opted", "gold"])
def test_webhook_dry_run_plan_audit_and_rollout_take_the_same_decision(cluster, policy_name, pod_name, labels):
    policy = load(policy_name)
    pod = gpu_pod(pod_name, PODS[pod_name])
    state = serving(cluster, policy, labels)
    with TestClient(create_app(state)) as client:
        dry, dry_answer, dry_written = webhook_path(client, state, pod, True)
        real, answer, written = webhook_path(client, state, pod, False)
    assert (dry, dry_answer) == (real, answer)  # byte for byte
    assert dry_written == {}, "a dry run writes nothing"
    assert bool(written) == (real == "rewrite"), written  # the real request writes what its patch names
    if policy_name.startswith("limit, ") and PODS[pod_name].get("nvidia.com/gpu", 1) > 1:
        assert (real == "denied") == (policy_name != "limit, warn"), answer  # whichever path it would take
    facts = cluster_facts(policy, cluster, namespaces={"team-a": labels})
    result = plan_objects([("pod.yaml", [(1, pod)])], policy, "team-a", facts)
    report = result.reports[0]
    if real == "denied":
        assert report.path == "denied" and report.status == "needs-attention", report.reasons
    elif real == "unmigratable":
        assert report.status == "needs-attention", report.reasons
    else:
        assert (report.path if report.path != "none" else "legacy") == real, report.reasons
    bound = {**pod, "spec": {**pod["spec"], "nodeName": "dp-1"}, "status": {"phase": "Running"}}
    objects = {"pods": [bound], "namespaces": [{"metadata": {"name": "team-a", "labels": labels}}]}
    [view] = rollout.pod_views(objects, policy, rollout.Switches(), facts)
    room = any(code in view.why for code in rollout.ROOM_CODES)
    assert (view.path == "dra") == (real in ("rewrite", "native") or room), view.why
    assert (view.path == "denied") == (real == "denied"), view.why


def test_a_namespace_not_opted_in_is_left_as_written_by_audit_and_rollout_alike(cluster):
    policy = parse_policy("{}")
    facts = cluster_facts(policy, cluster, namespaces={"team-a": {}})
    pod = gpu_pod("whole", PODS["whole"])
    result = plan_objects([("pod.yaml", [(1, pod)])], policy, "team-a", facts, rollout.pods.DEFAULT_OPT_IN)
    assert result.reports[0].path == "legacy"
    assert "not opted in (dra-bridge.io/migrate=enabled)" in result.reports[0].reasons[0]
    objects = {"pods": [{**pod, "spec": {**pod["spec"], "nodeName": "dp-1"}}],
               "namespaces": [{"metadata": {"name": "team-a", "labels": {}}}]}
    [view] = rollout.pod_views(objects, policy, rollout.Switches(), facts)
    assert view.path == "plugin" and "not opted in" in view.why
