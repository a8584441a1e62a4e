"""Issue 43: previews say what the webhook does. One export (a namespace, a claim holding 3 GPUs,
a pod asking for 2) and one policy (at most 4 devices per namespace): the webhook denies the pod,
and so do `plan`, `audit`, `check --policy` and the rollout's view of it, all through the one
facts constructor and the one decision. What a preview cannot know (who creates the pod) is said
as "not judged", never assumed allowed."""

import json

import orjson
import pytest
import yaml
from starlette.testclient import TestClient

from app import application, kube
from app.application import rollout
from app.cli.inputs import load_inventory
from app.cli.main import main
from app.dra import build_index
from app.migration import gpu_pod_priorities
from app.policy import parse_policy
from app.server import Metrics, PolicyHolder, ServiceState, create_app
from tests.conftest import ROOT
from tests.helpers import review

OPTED = {"dra-bridge.io/migrate": "enabled"}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": OPTED}}
HELD = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "held", "namespace": "team-a"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                          "count": 3}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpus", "driver": "gpu.nvidia.com", "pool": "gpu-h100-0", "device": f"gpu-{i}"}
            for i in range(3)]}}}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace": "team-a"},
       "spec": {"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}
HIGH = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "serve", "namespace": "team-b"},
        "spec": {"priorityClassName": "high", "priority": 1000, "nodeName": "gpu-node-0",
                 "containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
LIMIT = """rules:
- name: team-budget
  match: {namespaces: [team-a]}
  maxDevicesPerNamespace: 4
  validationActions: [Deny]
"""
BY_REQUESTER = """rules:
- name: one-gpu-unless-ci
  match: {namespaces: [team-a]}
  maxDevicesPerPod: 1
  exclude: {users: [ci-bot]}
  validationActions: [Deny]
"""


@pytest.fixture()
def files(tmp_path):
    def write(policy_text, *objects):
        export = tmp_path / "export.yaml"
        export.write_text(yaml.safe_dump_all(objects))
        policy = tmp_path / "policy.yaml"
        policy.write_text(policy_text)
        return str(export), str(policy)
    return write


class Holder(PolicyHolder):
    def __init__(self, policy):
        super().__init__(None)
        self.policy = policy


def webhook(policy_text, claims, user="alice", index=None, gpu_pods=None):
    """/mutate of the pod by `user`, on the example inventory (or `index`), with the namespace's
    claims as the live inventory's watch would give them."""
    index = index or build_index(load_inventory(None))
    known = application.KnownClaims(claims)
    reader = kube.ClaimReader(None)  # what it generates, remembered as serve's reader does
    state = ServiceState(policy=Holder(parse_policy(policy_text)), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=Metrics(), claims=reader)
    state.claims = _Claims(known, reader)
    state.namespace_labels.get = lambda _name: OPTED
    state.index = lambda: index
    state.readiness = lambda: (True, {"inventory": True})
    state.namespace_claims = lambda: known.in_namespace
    state.gpu_pods = gpu_pods  # as GpuPriorityWatch reads them (None: not read)
    body = review(POD, namespace="team-a")
    body["request"]["userInfo"] = {"username": user, "groups": []}
    with TestClient(create_app(state)) as client:
        return client.post("/mutate", content=orjson.dumps(body)).json()["response"]


class _Claims:
    """The claims given, then what this replica generated (as kube.ClaimReader remembers it)."""

    def __init__(self, known, reader):
        self.known, self.reader = known, reader

    def __call__(self, namespace, kind, name):
        return self.known.lookup(namespace, kind, name) or self.reader(namespace, kind, name)

    def remember(self, namespace, obj):
        self.reader.remember(namespace, obj)


def run(capsys, *argv) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def test_a_namespace_budget_denial_is_said_alike_by_webhook_plan_audit_check_and_rollout(files, capsys):
    export, policy = files(LIMIT, NAMESPACE, HELD, POD)
    denied = webhook(LIMIT, [HELD])
    assert denied["allowed"] is False and "team-budget" in denied["status"]["message"]

    code, out = run(capsys, "plan", "-f", export, "--policy", policy, "-o", "report")
    [pod] = [o for o in json.loads(out)["objects"] if o["kind"] == "Pod"]
    assert (pod["path"], pod["status"]) == ("denied", "needs-attention") and code == 1, pod
    assert any("namespace team-a would take 5 devices" in r for r in pod["reasons"]), pod

    code, out = run(capsys, "audit", "-f", export, "--policy", policy, "-o", "json")
    [row] = [o for o in json.loads(out)["objects"] if o["kind"] == "Pod"]
    assert row["path"] == "denied" and row["status"] != "migrated" and code == 1, row

    code, out = run(capsys, "check", "-f", export, "--policy", policy, "-o", "json", "--inventory", "example")
    [checked] = [r for r in json.loads(out) if r["kind"] == "Pod"]
    assert checked["policy"] == "deny" and code == 1, checked

    snapshot = {"pods": [POD], "namespaces": [NAMESPACE], "resourceclaims": [HELD]}
    facts, _fits = application.snapshot_facts(snapshot, parse_policy(LIMIT))
    [view] = rollout.pod_views(snapshot, parse_policy(LIMIT), rollout.Switches(), facts)
    assert view.path == rollout.DENIED and "team-budget" in view.why


def test_without_the_claim_the_budget_holds_everywhere(files, capsys):
    export, policy = files(LIMIT, NAMESPACE, POD)
    assert webhook(LIMIT, [])["allowed"] is True
    code, out = run(capsys, "plan", "-f", export, "--policy", policy, "-o", "report")
    [pod] = [o for o in json.loads(out)["objects"] if o["kind"] == "Pod"]
    assert pod["path"] == "rewrite", pod


def test_a_rule_that_exempts_users_is_not_judged_by_a_preview_and_says_so(files, capsys):
    export, policy = files(BY_REQUESTER, NAMESPACE, POD)
    assert webhook(BY_REQUESTER, [], user="alice")["allowed"] is False
    assert webhook(BY_REQUESTER, [], user="ci-bot")["allowed"] is True
    code, out = run(capsys, "plan", "-f", export, "--policy", policy, "-o", "report")
    [pod] = [o for o in json.loads(out)["objects"] if o["kind"] == "Pod"]
    assert pod["path"] != "denied", pod
    assert any("one-gpu-unless-ci: not judged: depends on the requester" in r for r in pod["reasons"]), pod


def test_a_namespace_total_without_the_namespaces_claims_is_said_not_judged(files, capsys):
    export, policy = files(LIMIT, NAMESPACE, POD)  # no claims exported: the total is not known
    code, out = run(capsys, "plan", "-f", export, "--policy", policy, "-o", "report")
    [pod] = [o for o in json.loads(out)["objects"] if o["kind"] == "Pod"]
    assert any("team-budget: maxDevicesPerNamespace not judged" in r for r in pod["reasons"]), pod


def test_the_offline_chain_validates_the_pod_as_the_rewrite_left_it():
    """check --policy and policy test run /validate on what /mutate admitted: the rewritten pod,
    naming the generated template, not the pod as sent."""
    from app.application import chain

    policy = parse_policy("{}")
    facts = application.cluster_facts(policy, build_index(load_inventory(None)), namespaces={"team-a": OPTED})
    found = chain.answer(POD, "team-a", policy, facts, user="alice")
    assert found.rewritten and found.result == "allow", found.messages
    spec = found.admitted["spec"]
    assert spec["resourceClaims"][0]["resourceClaimTemplateName"].startswith("dra-bridge-")
    assert "nvidia.com/gpu" not in str(spec["containers"][0].get("resources", {}).get("limits", {}))


def test_a_claim_previewed_without_an_inventory_is_judged_by_the_rules_not_refused():
    """Found typing app/application (issue 57): with no inventory the offline chain's claim check
    raised inside the feasibility check, so `policy test` denied every claim as an internal
    error. The rules are judged; feasibility is said not checked."""
    from app.application import chain

    policy = parse_policy("defaults:\n  mode: enforce\n  maxDevicesPerClaim: 4\n")
    facts = application.cluster_facts(policy, None)

    def claim(count):
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
                "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                             "count": count}}]}}}
    within = chain.answer(claim(2), "team-a", policy, facts)
    assert within.result == "allow", within.messages
    assert within.messages == ["warning: not checked against devices: no inventory was given"]
    over = chain.answer(claim(8), "team-a", policy, facts)
    assert over.result == "deny" and "8 devices exceed the limit of 4" in over.messages[0], over.messages


def test_classes_without_devices_are_judged_alike_by_the_webhook_and_plan(tmp_path, capsys):
    """Issue 57: with DeviceClasses but no device, the webhook kept the pod on the device plugin
    ("never satisfiable") while plan rewrote it: the preview had dropped the verdicts. Both now
    build path facts one way (index_facts) and agree."""
    listed = yaml.safe_load((ROOT / "app/data/example-inventory.yaml").read_text())["items"]
    classes = [d for d in listed if d.get("kind") == "DeviceClass"]
    assert classes
    inventory = tmp_path / "classes.yaml"
    inventory.write_text(yaml.safe_dump_all(classes))
    answer = webhook("{}", [], index=build_index(load_inventory(str(inventory))))
    kept = answer["allowed"] is True and "patch" not in answer
    export = tmp_path / "pod.yaml"
    export.write_text(yaml.safe_dump_all([NAMESPACE, POD]))
    _code, out = run(capsys, "plan", "-f", str(export), "--inventory", str(inventory), "-o", "report")
    [pod] = [o for o in json.loads(out)["objects"] if o["kind"] == "Pod"]
    assert kept and pod["path"] == "legacy", (answer, pod)


def _inventories(tmp_path) -> dict[str, str | None]:
    """Inventory files: none at all, classes only, the example, and the example with what changes
    a path choice besides devices (a GPU quota; PriorityClasses with a GPU pod running high)."""
    listed = yaml.safe_load((ROOT / "app/data/example-inventory.yaml").read_text())["items"]
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "gpus", "namespace": "team-a"},
             "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}}
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
            "value": 1000}
    sets = {"classes": [d for d in listed if d["kind"] == "DeviceClass"], "example": listed,
            "quota": [*listed, quota], "priorities": [*listed, high]}
    out = {}
    for name, objects in sets.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        out[name] = str(path)
    return out


@pytest.mark.parametrize("name", ["classes", "example", "quota", "priorities"])
def test_the_webhook_and_every_preview_decide_alike_over_a_table_of_inventories(name, tmp_path, capsys):
    """Issue 57 item 1: the same cluster fed to the webhook (its cached path facts), the preview
    constructor (cluster_facts, as check and policy test build it) and `plan` gives one decision."""
    inventory = _inventories(tmp_path)[name]
    index = build_index(load_inventory(inventory))
    policy = parse_policy("{}")
    # The same pods everywhere: plan reads the export's, the webhook its watch's. With the
    # PriorityClasses, a GPU pod runs above ours: it would be preempted, which DRA cannot do.
    running = [POD, HIGH] if name == "priorities" else [POD]
    answer = webhook("{}", [], index=index, gpu_pods=gpu_pod_priorities(running, policy.migration))
    facts = application.cluster_facts(policy, index, objects=[NAMESPACE, *running], namespaces={"team-a": OPTED})
    decided = application.decide_pod(POD, "team-a", policy, facts)
    rewritten = "patch" in answer
    assert rewritten == (decided.outcome is application.Outcome.REWRITE), (name, answer, decided.outcome)
    if not rewritten:
        said = answer.get("auditAnnotations", {}).get("path", "")
        assert decided.path is not None and said.startswith(f"{decided.path.path}: {decided.path.reason}"[:60]), \
            (name, said, decided.path)
    export = tmp_path / "pod.yaml"
    export.write_text(yaml.safe_dump_all([NAMESPACE, *running]))
    _code, out = run(capsys, "plan", "-f", str(export), "--inventory", inventory, "-o", "report")
    [pod] = [o for o in json.loads(out)["objects"] if o["kind"] == "Pod" and o["name"] == "train"]
    assert pod["path"] == ("rewrite" if rewritten else decided.path.path), (name, pod, decided.outcome)
    assert (name == "priorities") == (decided.path is not None and decided.path.code == "preemption")
