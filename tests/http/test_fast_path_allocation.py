"""Issue 32: replicas of a decided shape stay on the fast path while the scheduler allocates
claims (each allocation is a new index), and leave it the moment an allocation changes what
the decision read (all DRA devices busy, device-plugin nodes free: the pod stays legacy)."""

import time
from concurrent.futures import ThreadPoolExecutor

import orjson
from starlette.testclient import TestClient

from app import dra, kube
from app.policy import default_policy
from app.server import Metrics, PolicyHolder, ServiceState, create_app
from app.server.decisions import CHEAP_VERDICT_S, DEAR_FOR_S, Decisions, Judged
from app.application import index_facts
from tests.helpers import review
from tests.unit.test_mixed_cluster import gpu_pod
from tests.unit.test_shadow import CLASSES, real_slices

SLICES = real_slices("h100x8", "dra-1")
NODES = {"dra-1": {}, "dp-1": {}}
PLUGIN = {"dp-1": {"nvidia.com/gpu": 8}}  # device-plugin GPUs free beside DRA: busy DRA means legacy


class CountingExecutor(ThreadPoolExecutor):
    def __init__(self):
        super().__init__(max_workers=2)
        self.submitted = 0

    def submit(self, *args, **kwargs):
        self.submitted += 1
        return super().submit(*args, **kwargs)


class Live:
    """LiveInventory's face to the service, over a LiveIndex the test updates."""
    ready, failing_since = True, {}

    def __init__(self):
        self.live = dra.LiveIndex(iter(SLICES), CLASSES, {}, NODES, PLUGIN)

    def index(self):
        return self.live.index

    def claims_in(self, namespace):
        return []

    def allocate(self, key: str, devices: int) -> None:
        results = [{"driver": "gpu.nvidia.com", "pool": s["spec"]["pool"]["name"], "device": d["name"], "request": "r"}
                   for s in SLICES for d in s["spec"]["devices"]][:devices]
        assert self.live.claim_changed(key, {"status": {"allocation": {"devices": {"results": results}}}}) is not None


def serving() -> tuple[ServiceState, Live, CountingExecutor]:
    metrics, live, executor = Metrics(), Live(), CountingExecutor()
    state = ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, live=live,
                         executors={"mutate": executor})
    return state, live, executor


def mutate(client, uid):
    return client.post("/mutate", content=orjson.dumps(review(gpu_pod(2), uid=uid))).json()["response"]


def fresh_answer(live: Live, uid: str) -> dict:
    """What a server that never saw the shape answers on the same index."""
    state, _live, _executor = serving()
    state.live = live
    with TestClient(create_app(state)) as client:
        return mutate(client, uid)


def test_an_allocation_that_changes_nothing_read_keeps_the_fast_path():
    state, live, executor = serving()
    with TestClient(create_app(state)) as client:
        first = mutate(client, "u0")
        assert "patch" in first and executor.submitted == 1
        before = live.index()
        live.allocate("ns/claim-a", 2)  # the scheduler allocated the first pod's claim
        assert live.index() is not before and live.index().epoch is before.epoch
        second = mutate(client, "u1")
    assert executor.submitted == 1 and state.decisions.rejudged == 1  # answered on the event loop
    assert 'dra_bridge_fast_path_total{result="reused"} 1.0' in state.metrics.render().decode()
    assert second == fresh_answer(live, "u1")


def test_an_allocation_that_makes_dra_busy_sends_the_replica_to_a_worker_and_to_the_plugin():
    state, live, executor = serving()
    with TestClient(create_app(state)) as client:
        assert "patch" in mutate(client, "u0")
        live.allocate("ns/claim-a", 8)  # every DRA device in use; the plugin node has room
        second = mutate(client, "u1")
    assert executor.submitted == 2
    assert 'dra_bridge_fast_path_total{result="verdict"} 1.0' in state.metrics.render().decode()
    assert "patch" not in second and "DRA cannot serve it now" in second["warnings"][0]
    assert second == fresh_answer(live, "u1")


def test_a_new_slice_is_a_new_basis_decided_in_a_worker():
    state, live, executor = serving()
    with TestClient(create_app(state)) as client:
        mutate(client, "u0")
        live.live.slice_changed("extra", real_slices("l4x4", "dra-2")[0])
        mutate(client, "u1")
    assert executor.submitted == 2 and state.decisions.rejudged == 0
    assert 'dra_bridge_fast_path_total{result="facts"} 2.0' in state.metrics.render().decode()  # first: none yet


def test_a_dear_verdict_is_judged_on_the_event_loop_once_then_left_to_workers_a_while():
    ix = dra.build_index(dra.inventory_from_objects([(0, s) for s in SLICES + list(CLASSES.values())], "t"))
    policy, calls, cost = default_policy(), [], [CHEAP_VERDICT_S * 3]

    def judge(template, tolerates_cordon=False):
        calls.append(template)
        started = time.thread_time()
        while time.thread_time() - started < cost[0]:  # CPU, not a sleep: what is measured
            pass
        return "serves", "e.g. on node dra-1"
    facts = index_facts(ix, policy.migration, judge)
    decisions = Decisions()
    decisions.put(("k",), policy, facts, ("decision",), [Judged({"metadata": {"name": "t-1"}}, False, ("serves", ""))])
    assert decisions.get(("k",), policy, facts) == (("decision",), "reused") and len(calls) == 1
    assert decisions.get(("k",), policy, facts) == (None, "dear") and len(calls) == 1  # left to a worker
    average, _when = decisions._cost["t-1"]
    decisions._cost["t-1"] = (average, time.monotonic() - DEAR_FOR_S)  # a minute later: tried again
    cost[0] = 0.0
    assert decisions.get(("k",), policy, facts) == (("decision",), "reused") and len(calls) == 2


def test_one_dear_verdict_among_cheap_ones_is_a_pause_not_the_cost():
    decisions = Decisions()
    for seconds in [0.0001] * 5 + [CHEAP_VERDICT_S * 3]:
        decisions._note_cost("t", seconds)
    assert not decisions._dear("t")
    for seconds in [CHEAP_VERDICT_S * 3] * 10:
        decisions._note_cost("t", seconds)
    assert decisions._dear("t")


def test_every_fact_a_decision_reads_is_its_basis_preemption_included():
    """Issue 57: the cache's identity was a hand-kept tuple that left out preemption (and would
    leave out any field added later): a decision kept under one set of priorities was reused
    under another. The basis is now every field of the facts."""
    from dataclasses import fields, replace

    from app.migration import Facts

    ix = dra.build_index(dra.inventory_from_objects([(0, s) for s in SLICES + list(CLASSES.values())], "t"))
    policy = default_policy()
    facts = index_facts(ix, policy.migration, lambda template, tolerates_cordon=False: ("serves", ""))
    decisions = Decisions()
    decisions.put(("k",), policy, facts, ("decision",), [])
    assert decisions.get(("k",), policy, facts) == (("decision",), "reused")
    for field in fields(Facts):
        if field.name == "dra":
            continue
        changed = replace(facts, **{field.name: object()})
        assert decisions.get(("k",), policy, changed) == (None, "basis"), field.name
