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


# --- the node's state, by what it does ----------------------------------------------------------

import json  # noqa: E402

import yaml  # noqa: E402

from app.application import rollout  # noqa: E402
from tests.unit.test_rollout import cluster, node, slices, views  # noqa: E402

DRA_LABEL = {"nvidia.com/dra-kubelet-plugin": "true"}
PLUGIN_LABEL = {"nvidia.com/gpu.deploy.device-plugin": "true"}


def states(objects):
    return {n.name: str(n.side) for n in views(objects)[0]}


def not_ready(found, status="False"):
    found["status"]["conditions"] = [{"type": "Ready", "status": status, "reason": "KubeletStopPosting"}]
    return found


def test_a_node_is_on_the_side_it_serves_from_whatever_its_labels_say():
    objects = cluster(
        nodes=[node("plugin", {"nvidia.com/gpu": "8"}, PLUGIN_LABEL),
               node("dra", labels=DRA_LABEL),
               node("both", {"nvidia.com/gpu": "8"}, DRA_LABEL),  # hand-labelled, its device plugin still on
               node("neither", labels=PLUGIN_LABEL),  # the device plugin's switch on, nothing advertised
               node("labels-only", labels={"nvidia.com/gpu.count": "8"}),  # GFD says GPUs, nothing serves them
               not_ready(node("lost", {"nvidia.com/gpu": "8"}, PLUGIN_LABEL)),  # its status is stale
               not_ready(node("cpu-lost")), node("cpu")],
        resourceslices=slices("dra") + slices("both"))
    assert states(objects) == {"plugin": "plugin", "dra": "dra", "both": "both", "neither": "neither",
                               "labels-only": "neither", "lost": "unknown"}
    assert [h["node"] for h in rollout.hazards(views(objects)[0])] == ["both", "labels-only", "lost", "neither"]


def test_status_and_plan_name_every_hazard_and_exit_1(tmp_path, capsys):
    from app.cli.main import main

    objects = cluster(nodes=[node("p0", {"nvidia.com/gpu": "8"}, PLUGIN_LABEL),
                             node("both", {"nvidia.com/gpu": "8"}, DRA_LABEL), node("neither", labels=PLUGIN_LABEL)],
                      resourceslices=slices("both"))
    nodes, pods = views(objects)
    found = rollout.summary(nodes, pods, [], {}, default_policy().migration)
    assert found["nodes"]["both"] == ["both"] and found["nodes"]["neither"] == ["neither"]
    assert found["gpus"]["both"] == 8 and rollout.in_trouble(found)
    assert [(h["node"], h["state"]) for h in found["hazards"]] == [("both", "both"), ("neither", "neither")]
    export = tmp_path / "export.yaml"
    export.write_text(yaml.safe_dump_all(objects["nodes"] + objects["resourceslices"]))
    assert main(["rollout", "plan", "-f", str(export), "-o", "json"]) == 1
    planned = json.loads(capsys.readouterr().out)
    assert [h["node"] for h in planned["hazards"]] == ["both", "neither"]
    assert main(["rollout", "status", "-f", str(export)]) == 1
    said = capsys.readouterr().out
    assert "hazard: node both is both:" in said and "handed out twice" in said and "hazard: node neither" in said
    healthy = tmp_path / "healthy.yaml"
    healthy.write_text(yaml.safe_dump_all([objects["nodes"][0]]))
    assert main(["rollout", "plan", "-f", str(healthy)]) == 0


def test_the_webhook_counts_nodes_per_state_from_its_live_inventory():
    """dra_bridge_nodes{state} (alert DraBridgeNodeServedTwice), read with the same state rule."""
    from app.server import Metrics

    from tests.unit.test_mixed_cluster import plugin_node as dp_node

    ix = index(*real_slices("h100x8", "twice"), *real_slices("h100x8", "clean"), *CLASSES.values(),
               dp_node("twice", 8), dp_node("clean", 0), dp_node("legacy", 8),
               {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "dark", "labels": {
                   "nvidia.com/gpu.deploy.device-plugin": "true"}}, "spec": {}, "status": {"allocatable": {}}},
               not_ready(dp_node("gone", 8), "Unknown"))
    assert rollout.index_states(ix) == {"twice": "both", "clean": "dra", "legacy": "plugin", "dark": "neither",
                                        "gone": "unknown"}
    metrics = Metrics()

    class Live:
        ready, failing_since = True, {}

        def index(self):
            return ix

    from app import kube
    from app.server import PolicyHolder, ServiceState
    state = ServiceState(policy=PolicyHolder(None, metrics), templates=kube.TemplateStore(None),
                         namespace_labels=kube.NamespaceLabels(None), metrics=metrics, live=Live())
    state.tick()
    got = {s.labels["state"]: s.value for m in metrics.registry.collect() if m.name == "dra_bridge_nodes"
           for s in m.samples}
    assert got == {"plugin": 1, "dra": 1, "both": 1, "neither": 1, "unknown": 1, "moving": 0}


def test_audit_names_a_node_served_twice_and_exits_1(tmp_path, capsys):
    from app.cli.main import main

    export = tmp_path / "export.yaml"
    export.write_text(yaml.safe_dump_all([*real_slices("h100x8", "n1"), *CLASSES.values(),
                                          {**node("n1", {"nvidia.com/gpu": "8"}), "kind": "Node"}]))
    code = main(["audit", "-f", str(export), "--inventory", str(export), "-o", "json"])
    found = json.loads(capsys.readouterr().out)
    assert code == 1 and [(h["node"], h["state"]) for h in found["nodeHazards"]] == [("n1", "both")]
