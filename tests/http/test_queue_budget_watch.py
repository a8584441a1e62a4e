"""Issue 34: between audits, serve reports devices a Kueue ClusterQueue's pods hold that its GPU
quota does not count (dra_bridge_queue_budget_escaped_devices, alert DraBridgeQueueBudgetEscaped)."""

from app.common import BridgeError
from app.migration import KueueView
from app.server import QueueBudgetWatch
from tests.http.test_budget_watch import Live, watch
from tests.unit.test_queue_budgets import GPU_CLASS, LOCAL, claim, cluster_queue, pod
from tests.unit.test_shadow import CLASSES, real_slices

QUEUED_POD = pod("p", claims=["p-gpu"], owner=("ReplicaSet", "rs"))


def queue_watch(objects, claims, kueue=None):
    state = watch(Live([*real_slices("h100x8", "n1"), *CLASSES.values()], claims)).state
    state.kueue = kueue
    reads = iter(objects)

    def read():
        found = next(reads)
        if isinstance(found, Exception):
            raise found
        return found
    return QueueBudgetWatch(state, read)


def test_a_queues_uncounted_claims_are_a_metric_until_kueue_counts_them():
    objects = [cluster_queue(reserved=0), LOCAL, QUEUED_POD]
    budgets = queue_watch([objects, BridgeError("list Kueue's workloads: forbidden"), objects, []],
                          [claim("p-gpu", 2)], KueueView({GPU_CLASS: "nvidia.com/gpu"}))  # its DRA gate off
    assert budgets.run_once() == {("research", "nvidia.com/gpu"): 2}
    metrics = budgets.state.metrics
    assert 'dra_bridge_queue_budget_escaped_devices{cluster_queue="research",resource="nvidia.com/gpu"} 2.0' in \
        metrics.render().decode()
    # A refused read is counted; the last value stays.
    assert budgets.run_once() is None
    assert metrics.kueue_read_failures._value.get() == 1
    assert 'resource="nvidia.com/gpu"} 2.0' in metrics.render().decode()
    # Kueue now runs with its gate on and reserves what the pod holds.
    budgets.state.kueue = KueueView({GPU_CLASS: "nvidia.com/gpu"}, dra_gate=True)
    objects[0] = cluster_queue(reserved=2)
    assert budgets.run_once() == {("research", "nvidia.com/gpu"): 0}
    assert budgets.run_once() == {}  # Kueue gone: the series goes
    assert "dra_bridge_queue_budget_escaped_devices{" not in metrics.render().decode()


def test_nothing_is_judged_before_the_live_inventory_is_synced():
    budgets = queue_watch([[cluster_queue()]], [])
    budgets.state.live.ready = False
    assert budgets.run_once() is None
