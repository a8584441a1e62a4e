"""Issue 34: between audits, serve reports devices claims hold that their namespace's GPU quota
does not count (dra_bridge_budget_escaped_devices, alert DraBridgeBudgetEscaped)."""

from app import dra, kube
from app.server import BudgetWatch, Metrics, PolicyHolder, ServiceState
from tests.unit.test_budget_continuity import QUOTA, claim
from tests.unit.test_shadow import CLASSES, real_slices


class Live:
    ready, failing_since = True, {}

    def __init__(self, objects, claims):
        self._index = dra.build_index(dra.inventory_from_objects([(0, o) for o in objects], "test"))
        self.claims = claims

    def index(self):
        return self._index

    def claims_in(self, namespace):
        return [c for c in self.claims if c["metadata"]["namespace"] == namespace]


def watch(live) -> BudgetWatch:
    metrics = Metrics()
    state = ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, live=live)
    return BudgetWatch(state)


def test_claims_a_quota_does_not_count_are_a_metric_until_they_are_counted():
    objects = [*real_slices("h100x8", "n1"), *CLASSES.values(), QUOTA]
    budgets = watch(Live(objects, [claim("c", 3), claim("x", 2, namespace="no-quota")]))
    assert budgets.run_once() == {("team-a", "gpus"): 3}
    text = budgets.state.metrics.render().decode()
    assert 'dra_bridge_budget_escaped_devices{pod_namespace="team-a",quota="gpus"} 3.0' in text
    mapped = {**CLASSES["gpu.nvidia.com"], "spec": {**CLASSES["gpu.nvidia.com"]["spec"],
                                                    "extendedResourceName": "nvidia.com/gpu"}}
    budgets.state.live = Live([*real_slices("h100x8", "n1"), mapped, QUOTA], [claim("c", 3)])
    assert budgets.run_once() == {("team-a", "gpus"): 0}
    assert 'quota="gpus"} 0.0' in budgets.state.metrics.render().decode()


def test_nothing_is_judged_before_the_live_inventory_is_synced():
    live = Live([QUOTA], [])
    live.ready = False
    assert watch(live).run_once() is None
