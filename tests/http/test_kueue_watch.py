"""Issue 34: serve reads Kueue's configuration (its deviceClassMappings and DRA gate) every round,
and the path choice follows it: a pod Kueue admits by itself is rewritten once Kueue counts its
claim, and goes back to the device plugin when the configuration cannot be read."""

from app import dra, kube
from app.common import BridgeError
from app.migration import decide, kueue_view
from app.server import KueueWatch, Metrics, PolicyHolder, ServiceState
from tests.unit.test_shadow import CLASSES, real_slices

MAPPED = kueue_view({"featureGates": {"DynamicResourceAllocation": True},
                     "resources": {"deviceClassMappings": [{"name": "nvidia.com/gpu",
                                                            "deviceClassNames": ["gpu.nvidia.com"]}]}})
POD = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "p", "namespace": "team-a", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
       "spec": {"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}


class Reads:
    def __init__(self, *answers):
        self.answers = list(answers)

    def __call__(self):
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_the_path_follows_what_kueue_counts_and_a_failed_read_keeps_pods_on_the_plugin():
    metrics = Metrics()
    inventory = dra.inventory_from_objects([(0, o) for o in [*real_slices("h100x8", "n1"), *CLASSES.values()]], "t")
    state = ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, inventory=inventory)
    watch = KueueWatch(state, Reads(None, MAPPED, MAPPED, BridgeError("API answered 403")))

    def path():
        found = decide(POD, "team-a", {"dra-bridge.io/migrate": "enabled"}, state.policy.policy, state.path_facts())
        return found.path.path if found.path else found.plan.status  # migrated: rewritten

    watch.run_once()
    assert state.kueue is None and path() == "legacy"
    watch.run_once()
    assert state.kueue == MAPPED and path() == "migrated"
    seen = state.kueue
    watch.run_once()
    assert state.kueue is seen  # unchanged: the same object, so kept decisions stay valid
    watch.run_once()
    assert state.kueue is None and path() == "legacy"
    assert "dra_bridge_kueue_read_failures_total 1.0" in metrics.render().decode()
