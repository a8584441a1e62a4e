"""Issue 57 item 4: the rollout's ordering rules are pure functions of the plan (no CLI), and
one label-selector parser (kubectl's -l syntax) serves --nodes and the policy alike."""

import pytest

from app.application import rollout
from app.common import InputError
from app.policy import LabelSelector


def wave(number, nodes, done=False, blockers=()):
    return rollout.Wave(number, list(nodes), 8 * len(nodes), [], blockers=list(blockers), done=done)


def view(name, labels=None, wave_number=None):
    return rollout.NodeView(name=name, side=rollout.PLUGIN, gpus=8, advertised={"nvidia.com/gpu": 8},
                            labels=labels or {}, wave=wave_number)


def test_waves_run_in_order_a_done_wave_is_done_and_a_blocked_one_refused():
    waves = [wave(1, ["a"], done=True), wave(2, ["b"]), wave(3, ["c"], blockers=["pdb web allows 0"])]
    nodes = [view("a", wave_number=1), view("b"), view("c")]
    assert rollout.wave_to_run(waves, 1, nodes).done
    assert rollout.wave_to_run(waves, 2, nodes).wave.nodes == ["b"]
    with pytest.raises(InputError, match="wave 2 is not done yet: waves run in order"):
        rollout.wave_to_run(waves, 3, nodes)
    assert rollout.wave_to_run([waves[0], waves[2]], 3, nodes).blocked  # wave 2 done meanwhile
    started = [view("a", wave_number=1), view("b"), view("c", wave_number=3)]
    assert not rollout.wave_to_run([waves[0], waves[2]], 3, started).blocked  # under way: it goes on
    with pytest.raises(InputError, match=r"no wave 9 \(waves not done: 2, 3"):
        rollout.wave_to_run(waves, 9, nodes)


def test_a_selector_never_splits_a_wave_recorded_on_its_nodes():
    nodes = [view("a", {"pool": "x"}, 4), view("b", {"pool": "y"}, 4)]
    with pytest.raises(InputError, match="wave 4 is a, b, and --nodes pool=x leaves out b: nothing was done"):
        rollout.whole_wave("pool=x", nodes, ["a", "b"], 4)
    rollout.whole_wave("pool in (x,y)", nodes, ["a", "b"], 4)  # every node chosen: fine
    rollout.whole_wave(None, nodes, ["a", "b"], 4)


@pytest.mark.parametrize("text, labels, chosen", [
    ("pool=x", {"pool": "x"}, True), ("pool==x", {"pool": "y"}, False),
    ("pool!=x", {}, True), ("pool!=x", {"pool": "x"}, False),  # as kubectl: absent counts as not x
    ("gpu", {"gpu": ""}, True), ("!gpu", {"gpu": "1"}, False),
    ("pool in (x, y),zone notin (z)", {"pool": "y", "zone": "w"}, True),
    ("pool in (x, y),zone notin (z)", {"pool": "y", "zone": "z"}, False),
    ("", {"any": "thing"}, True),
])
def test_one_label_selector_parser_reads_kubectls_syntax(text, labels, chosen):
    assert LabelSelector.parse(text, "--nodes").matches(labels) is chosen


def test_a_bad_selector_term_names_the_flag():
    with pytest.raises(InputError, match="--nodes: not a label selector term: 'pool=x y'"):
        LabelSelector.parse("pool=x y", "--nodes")
