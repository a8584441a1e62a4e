"""Issue 44: a node whose device plugin still advertises GPUs while a DRA driver publishes them
(hand-edited labels, a half-finished move) is served twice: the path choice never counts its
devices, whatever its labels say, so no new pod is rewritten onto GPUs the plugin hands out too."""

from app import application, dra
from app.migration import plan_pod
from app.migration import choose_path
from app.policy import default_policy
from tests.unit.test_mixed_cluster import plugin_node
from tests.unit.test_shadow import CLASSES, real_slices

RULES = default_policy().migration
POD = {"metadata": {"name": "p", "namespace": "team-a"},
       "spec": {"containers": [{"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}


def index(*objects):
    return dra.build_index(dra.inventory_from_objects([(0, o) for o in objects], "test"))


def choice(ix):
    facts = application.index_facts(ix, RULES, dra.TemplateVerdicts(ix, "spec").dra)
    return choose_path(POD, plan_pod(POD, RULES, "team-a"), RULES, "auto", facts)


def test_devices_of_a_node_its_device_plugin_still_serves_are_never_counted():
    both = index(*real_slices("h100x8", "n1"), *CLASSES.values(), plugin_node("n1", 8))
    assert dra.TemplateVerdicts(both).twice == {"n1"}
    found = choice(both)
    assert (found.path, found.code) == ("legacy", "dra-twice") and "n1" in found.reason, found


def test_a_clean_dra_node_beside_it_serves_the_pod():
    mixed = index(*real_slices("h100x8", "n1"), *real_slices("h100x8", "n2"), *CLASSES.values(),
                  plugin_node("n1", 8))
    assert choice(mixed).path == "rewrite"
    verdict = dra.TemplateVerdicts(mixed)(plan_pod(POD, RULES, "team-a").templates[0], allocatable_only=True)
    assert verdict.status == "satisfiable" and verdict.example_node == "n2"


def test_a_node_that_stopped_advertising_is_dra_again():
    moved = index(*real_slices("h100x8", "n1"), *CLASSES.values(), plugin_node("n1", 0))
    assert not dra.TemplateVerdicts(moved).twice and choice(moved).path == "rewrite"
