"""Issue 30: the mover's state machine against a fake node API (no cluster): every step resumed
after a kill, undo from every step, dry runs, refused evictions, timeouts, and a finish that
checks what a killed run evicted."""

import copy

import pytest

from app.application import rollout
from app.common import InputError, leaving_dra
from app.application.rollout.mover import Mover, Stopped
from app.application.rollout.record import MoveRecord, Step
from app.policy import default_policy
from tests.unit.test_rollout import MIGRATE, SWITCHES, namespace, node, pod, slices
from tests.unit.test_rollout_fleet import ds_pod


class Killed(Exception):
    """kill -9 at a chosen write."""


class FakeCluster:
    """Nodes, pods and slices; controllers recreate evicted pods (bound where `place` says, or
    Pending); NVIDIA's driver publishes a node once its label says so; the device plugin
    advertises while its label is on."""

    def __init__(self, dry_run=False):
        self.dry_run = dry_run
        self.nodes = {n["metadata"]["name"]: n for n in (node("p0", {"nvidia.com/gpu": "8"}),
                                                         node("p1", {"nvidia.com/gpu": "8"}))}
        for n in self.nodes.values():
            n["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"] = "true"
        self.pod_list = [pod("infer-1", "p0", {"nvidia.com/gpu": "1"}), ds_pod("agent-p0", "p0", {"nvidia.com/gpu": "1"})]
        self.slices, self.log, self.refuse, self.kill_at, self.writes = [], [], {}, None, 0
        self.place = lambda pod: "p1"  # where a recreated (rewritten) pod is bound; None: Pending
        self.publishes, self.withdraws = True, True

    # -- the NodeAPI ------------------------------------------------------------------------
    def node(self, name):
        self._tick(name)
        return copy.deepcopy(self.nodes[name])

    def on_node(self, name, *kinds):
        self._tick(name)
        out = {}
        if "pods" in kinds:
            out["pods"] = [p for p in self.pod_list if p["spec"].get("nodeName") == name]
        if "resourceslices" in kinds:
            out["resourceslices"] = [s for s in self.slices if s["spec"].get("nodeName") == name]
        return copy.deepcopy(out)

    def judged_on_node(self, name):
        return {"namespaces": [namespace("team-a", MIGRATE)], "resourcequotas": [], "deviceclasses": [],
                "resourceclaims": [], "jobs": [], **self.on_node(name, "pods", "resourceslices")}

    def pods(self):
        return copy.deepcopy(self.pod_list)

    def _write(self):
        """Every write to the API (a node patch, an eviction) is a place a kill -9 can fall."""
        self.writes += 1
        if self.kill_at is not None and self.writes > self.kill_at:
            raise Killed(f"killed before write {self.writes}")

    def patch_node(self, name, patch):
        self._write()
        self.log.append(("patch", name, copy.deepcopy(patch)))
        if not self.dry_run:
            _merge(self.nodes[name], patch)

    def evict(self, namespace_, name):
        if name in self.refuse:
            return self.refuse[name]
        self._write()
        self.log.append(("evict", name))
        if self.dry_run:
            return None
        [gone] = [p for p in self.pod_list if p["metadata"]["name"] == name]
        self.pod_list.remove(gone)
        if gone["metadata"].get("ownerReferences"):
            again = copy.deepcopy(gone)
            again["metadata"]["name"] = name + "-r"
            is_daemon = gone["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
            # The webhook: onto a claim, unless it is pinned to a node leaving DRA (left as written).
            if is_daemon and leaving_dra(self.nodes[gone["spec"]["nodeName"]]):
                again["spec"].pop("resourceClaims", None)
                again["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
            else:
                again["spec"]["containers"][0]["resources"] = {}
                again["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "dra-bridge-t"}]
            again["spec"]["nodeName"] = gone["spec"]["nodeName"] if is_daemon else self.place(again)
            self.pod_list.append(again)
        return None

    def _tick(self, name):
        """NVIDIA's driver and the device plugin follow the node's labels."""
        n = self.nodes[name]
        labels, allocatable = n["metadata"]["labels"], n["status"]["allocatable"]
        if labels.get("nvidia.com/dra-kubelet-plugin") == "true":
            allocatable.pop("nvidia.com/gpu", None)
            if self.publishes and not any(s["spec"]["nodeName"] == name for s in self.slices):
                self.slices += slices(name)
        elif labels.get("nvidia.com/gpu.deploy.device-plugin") == "true":
            allocatable["nvidia.com/gpu"] = "8"
            if self.withdraws:
                self.slices = [s for s in self.slices if s["spec"]["nodeName"] != name]


def _merge(target, patch):
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            _merge(target.setdefault(key, {}), value)
        else:
            target[key] = value


def mover(fake, **kw):
    clock = {"now": 0.0}

    def sleep(s):
        clock["now"] += s
    lines = []
    m = Mover(fake, SWITCHES, default_policy(), lines.append, timeout_s=30, poll_s=1, clock=lambda: clock["now"],
              sleep=sleep, **kw)
    m.lines = lines
    return m


def step(fake, name="p0"):
    record = MoveRecord.of(fake.nodes[name])
    return record.step if record else None


def test_a_move_runs_every_step_and_is_done_only_once_its_workloads_are_bound_again():
    fake = FakeCluster()
    m = mover(fake)
    m.move("p0", 1)
    assert step(fake) == Step.MOVED and not fake.nodes["p0"]["spec"]["unschedulable"]
    assert m.finish(["p0"]) == {} and step(fake) == Step.DONE
    labels = fake.nodes["p0"]["metadata"]["labels"]
    assert labels["nvidia.com/dra-kubelet-plugin"] == "true" and labels["nvidia.com/gpu.deploy.device-plugin"] == "false"
    events = [e[1] if e[0] == "evict" else e[2].get("metadata", {}).get("annotations", {}).get(rollout.STEP)
              for e in fake.log]
    # The DaemonSet pod leaves only once the node publishes on DRA: it never holds a plugin GPU after the flip.
    assert events.index("agent-p0") > events.index("published") > events.index("flipped") > events.index("infer-1")
    record = MoveRecord.of(fake.nodes["p0"])
    assert record.version == 1 and record.evicted == {"team-a/ReplicaSet/infer-1-rs": 1,
                                                      "team-a/DaemonSet/gpu-agent": 1}


def _writes(undo: bool) -> int:
    """How many writes a whole run (move and finish), or a whole undo after one, makes: every one
    of them is a place to be killed at."""
    fake = FakeCluster()
    m = mover(fake)
    if undo:
        m.move("p0", 1)
        m.finish(["p0"])
        fake.place = lambda pod: "p0" if pod["spec"].get("containers")[0]["resources"] else "p1"
    before = fake.writes
    m = mover(fake)
    if undo:
        m.undo("p0")
    else:
        m.move("p0", 1)
    m.finish(["p0"])
    return fake.writes - before


RUN_WRITES, UNDO_WRITES = _writes(undo=False), _writes(undo=True)


def test_every_write_of_a_run_and_an_undo_is_a_kill_point():
    assert RUN_WRITES >= 7 and UNDO_WRITES >= 7, (RUN_WRITES, UNDO_WRITES)


@pytest.mark.parametrize("kill_at", range(RUN_WRITES))
def test_a_move_killed_at_any_write_is_finished_by_the_same_command(kill_at):
    fake = FakeCluster()
    fake.kill_at = kill_at
    with pytest.raises(Killed):
        mover(fake).move("p0", 1)
        mover(fake).finish(["p0"])
    fake.kill_at = None
    m = mover(fake)
    m.move("p0", 1)
    assert m.finish(["p0"]) == {} and step(fake) == Step.DONE
    assert sorted(p["metadata"]["name"] for p in fake.pod_list) == ["agent-p0-r", "infer-1-r"]


def test_a_resumed_run_checks_what_the_killed_run_evicted():
    fake = FakeCluster()
    fake.place = lambda pod: None  # its replacement stays Pending
    fake.kill_at = 2  # killed right after the evictions were recorded and done
    with pytest.raises(Killed):
        mover(fake).move("p0", 1)
    fake.kill_at = None
    m = mover(fake)
    m.move("p0", 1)
    assert m.finish(["p0"]) == {"team-a/ReplicaSet/infer-1-rs": "0 of 1 pod(s) bound"}
    assert step(fake) == Step.MOVED  # not done: `rollout run` says so and exits 1


@pytest.mark.parametrize("kill_at", range(UNDO_WRITES))
def test_undo_from_any_step_ends_back_on_the_device_plugin(kill_at):
    fake = FakeCluster()
    m = mover(fake)
    m.move("p0", 1)
    m.finish(["p0"])
    fake.place = lambda pod: "p0" if pod["spec"].get("containers")[0]["resources"] else "p1"
    fake.kill_at = fake.writes + kill_at
    with pytest.raises(Killed):
        mover(fake).undo("p0")
        mover(fake).finish(["p0"])
    fake.kill_at = None
    if kill_at:  # the undo started: a run must not pick the node up again
        with pytest.raises(Stopped, match="being taken back .*`rollout undo --wave 1` continues it"):
            mover(fake).move("p0", 1)
    m = mover(fake)
    m.undo("p0")
    assert m.finish(["p0"]) == {}
    meta = fake.nodes["p0"]["metadata"]
    assert rollout.STEP not in meta["annotations"] and not fake.nodes["p0"]["spec"]["unschedulable"]
    assert meta["labels"]["nvidia.com/gpu.deploy.device-plugin"] == "true"
    assert "nvidia.com/dra-kubelet-plugin" not in meta["labels"]


def test_a_dry_run_changes_nothing_and_says_so():
    fake = FakeCluster(dry_run=True)
    before = copy.deepcopy(fake.nodes)
    m = mover(fake)
    m.move("p0", 1)
    assert m.finish(["p0"]) == {}
    assert fake.nodes == before and len(fake.pod_list) == 2
    assert all(line.startswith("[dry run] ") for line in m.lines)


def test_a_refused_eviction_stops_the_run_after_the_timeout_and_nothing_is_forced():
    fake = FakeCluster()
    fake.refuse["infer-1"] = "Cannot evict pod as it would violate the pod's disruption budget."
    with pytest.raises(Stopped, match="eviction of team-a/infer-1 refused for 30 s: Cannot evict"):
        mover(fake).move("p0", 1)
    assert step(fake) == Step.CORDONED and len(fake.pod_list) == 2
    assert MoveRecord.of(fake.nodes["p0"]).evicted["team-a/ReplicaSet/infer-1-rs"] == 1
    del fake.refuse["infer-1"]
    m = mover(fake)
    m.move("p0", 1)
    assert m.finish(["p0"]) == {} and step(fake) == Step.DONE


def test_a_driver_that_never_publishes_stops_the_run_and_offers_undo():
    fake = FakeCluster()
    fake.publishes = False
    with pytest.raises(Stopped, match=r"waited 30 s for NVIDIA's driver .* `rollout run --wave 1` goes on waiting, "
                                      r"or `rollout undo --wave 1` to take it back"):
        mover(fake).move("p0", 1)
    assert step(fake) == Step.FLIPPED


def test_a_bare_pod_stops_the_move_before_anything_is_evicted_unless_forced():
    fake = FakeCluster()
    fake.pod_list.append(pod("bare", "p0", {"nvidia.com/gpu": "1"}, owner=""))
    with pytest.raises(Stopped, match="team-a/bare is a bare pod"):
        mover(fake).move("p0", 1)
    assert not [e for e in fake.log if e[0] == "evict"]
    m = mover(fake, drain=rollout.Drain(force=True))
    m.move("p0", 1)
    assert m.finish(["p0"]) == {} and "bare" not in {p["metadata"]["name"] for p in fake.pod_list}


def test_undo_evicts_daemonset_pods_while_nvidias_plugin_can_still_unprepare_their_claims():
    """Found on real kubelets (issue 48): a pod holding a claim stops only once NVIDIA's plugin
    has unprepared it, and that plugin leaves with the labels. So an undo evicts the DaemonSet
    pods first; their replacements, pinned to a node leaving DRA, wait on the device plugin."""
    fake = FakeCluster()
    m = mover(fake)
    m.move("p0", 1)
    m.finish(["p0"])
    fake.log.clear()
    fake.withdraws = False  # the kubelet plugin's slices linger
    with pytest.raises(Stopped, match="NVIDIA's driver to withdraw its slices .*8 device.s. still published"):
        mover(fake).undo("p0")
    restore = next(i for i, e in enumerate(fake.log) if e[0] == "patch" and "labels" in e[2].get("metadata", {}))
    assert ("evict", "agent-p0-r") in fake.log[:restore]
    [replacement] = [p for p in fake.pod_list if p["metadata"]["name"] == "agent-p0-r-r"]
    assert not replacement["spec"].get("resourceClaims")  # on the device plugin, never a claim there
    fake.withdraws = True
    m = mover(fake)
    m.undo("p0")
    assert m.finish(["p0"]) == {}
    assert fake.nodes["p0"]["metadata"]["annotations"].get(rollout.STEP) is None


@pytest.mark.parametrize("before, field", [
    ('{"version": 2}', "version 2 is not one this dra-bridge reads"),  # a newer dra-bridge wrote it
    ('{"version": "1"}', "version '1' is not one"),
    ('[1]', "not a JSON object"),
    ('{"version": 1, "evicted": {"team-a/Job/j": "two"}}', "whole numbers"),
])
def test_a_move_record_this_version_cannot_read_is_refused_naming_the_annotation(before, field):
    fake = FakeCluster()
    fake.nodes["p0"]["metadata"]["annotations"] = {rollout.WAVE: "1", rollout.STEP: "cordoned", rollout.BEFORE: before}
    with pytest.raises(InputError) as refused:
        MoveRecord.of(fake.nodes["p0"])
    assert rollout.BEFORE in str(refused.value) and field in str(refused.value)
    with pytest.raises(InputError):
        mover(fake).move("p0", 1)  # nothing acts on a record it cannot read
    assert fake.writes == 0


def test_a_record_without_a_version_is_read_as_the_first():
    fake = FakeCluster()
    fake.nodes["p0"]["metadata"]["annotations"] = {rollout.WAVE: "1", rollout.STEP: "cordoned", rollout.BEFORE: "{}"}
    assert MoveRecord.of(fake.nodes["p0"]).version == 0


def test_nodes_means_those_nodes_a_recorded_wave_with_others_is_refused_whole():
    """Issue 44: B's `run --wave 1 --nodes kubernetes.io/hostname=a-1` while A's wave 1 (a-0) is
    recorded must not drive a-0."""
    _only_chosen = rollout.whole_wave  # issue 57: the rule lives with the rollout, not the CLI

    nodes = [rollout.NodeView("a-0", "moving", 8, {}, {"kubernetes.io/hostname": "a-0"}, wave=1, step="flipped"),
             rollout.NodeView("a-1", "plugin", 8, {"nvidia.com/gpu": 8}, {"kubernetes.io/hostname": "a-1"})]
    with pytest.raises(InputError) as refused:
        _only_chosen("kubernetes.io/hostname=a-1", nodes, ["a-0"], 1)
    assert "--nodes" in str(refused.value) and "leaves out a-0" in str(refused.value)
    _only_chosen("kubernetes.io/hostname=a-0", nodes, ["a-0"], 1)  # those nodes: allowed
    _only_chosen(None, nodes, ["a-0"], 1)  # no selector: the wave as planned


class VersionedCluster(FakeCluster):
    """Nodes carry a resourceVersion; a patch naming an older one is refused (409), as the API
    server refuses it. `bump` plays a kubelet's status update before the next patch."""

    def __init__(self):
        super().__init__()
        self.version, self.bumps, self.conflicts = 1, 0, 0
        for n in self.nodes.values():
            n["metadata"]["resourceVersion"] = "1"

    def patch_node(self, name, patch):
        from app.common import WriteConflict
        if self.bumps:
            self.bumps -= 1
            self.version += 1
            self.nodes[name]["metadata"]["resourceVersion"] = str(self.version)
        sent = (patch.get("metadata") or {}).get("resourceVersion")
        if sent is not None and sent != self.nodes[name]["metadata"]["resourceVersion"]:
            self.conflicts += 1
            raise WriteConflict(f"node {name}: API answered 409: the object has been modified")
        patch = copy.deepcopy(patch)
        patch["metadata"].pop("resourceVersion", None)
        super().patch_node(name, patch)
        self.version += 1
        self.nodes[name]["metadata"]["resourceVersion"] = str(self.version)


def test_a_status_update_between_read_and_write_is_retried_not_a_stop():
    fake = VersionedCluster()
    fake.bumps = 2  # the kubelet writes the node twice while the run acts
    m = mover(fake)
    m.move("p0", 1)
    assert m.finish(["p0"]) == {} and step(fake) == Step.DONE and fake.conflicts == 2


def test_a_record_another_command_wrote_stops_this_one_before_it_writes_more():
    """Issue 44 item 2: two rollouts acting on one node; the second writer loses, naming why."""
    fake = VersionedCluster()
    real_evict = fake.evict

    def evict_and_meddle(namespace_, name):
        fake.nodes["p0"]["metadata"]["annotations"][rollout.STEP] = "undoing"  # another command's undo
        return real_evict(namespace_, name)
    fake.evict = evict_and_meddle
    before = fake.writes
    with pytest.raises(Stopped, match="its move record changed under this command .*step undoing"):
        mover(fake).move("p0", 1)
    flipped = fake.nodes["p0"]["metadata"]["labels"].get("nvidia.com/dra-kubelet-plugin")
    assert flipped is None and fake.writes - before == 3  # cordon, the evictions recorded, one eviction: no flip


def test_undo_keeps_what_the_run_evicted_and_waits_for_those_workloads_too():
    """Issue 44 item 4: undo forgot the run's evictions, so it could end with their pods Pending."""
    fake = FakeCluster()
    m = mover(fake)
    m.move("p0", 1)
    m.finish(["p0"])
    fake.place = lambda pod: "p0" if pod["spec"].get("containers")[0]["resources"] else "p1"
    undoing = mover(fake)
    undoing.undo("p0")
    assert "team-a/ReplicaSet/infer-1-rs" in MoveRecord.of(fake.nodes["p0"]).evicted
    for p in fake.pod_list:  # the run's workload lost its pod meanwhile: undo is not done
        if p["metadata"]["name"].startswith("infer-1"):
            p["spec"].pop("nodeName", None)
    assert undoing.finish(["p0"]) == {"team-a/ReplicaSet/infer-1-rs": "0 of 1 pod(s) bound"}


def test_an_undo_evicts_only_once_the_webhook_can_have_seen_the_cordon():
    """Replacements are judged on the webhook's live view: evicted before it follows the cordon,
    one would be rewritten onto the devices of the node being taken back."""
    fake = FakeCluster()
    m = mover(fake)
    m.move("p0", 1)
    m.finish(["p0"])
    seen, before = [], len(fake.log)
    m = mover(fake, settle_s=5.0)
    sleep = m.sleep
    m.sleep = lambda s: (seen.append(("sleep", s, len(fake.log))), sleep(s))
    m.undo("p0")
    cordoned = next(i for i, entry in enumerate(fake.log) if i >= before and entry[0] == "patch"
                    and entry[2].get("spec", {}).get("unschedulable") is True)
    first_eviction = next(i for i, entry in enumerate(fake.log) if entry[0] == "evict" and i > cordoned)
    assert any(s == 5.0 and cordoned < at <= first_eviction for _what, s, at in seen), seen


def test_an_undo_of_a_node_that_never_flipped_evicts_nothing():
    """A run stopped before the flip (a budget at the cordon): its pods are on the device plugin
    still; undo uncordons and restores it and evicts none of them again."""
    fake = FakeCluster()
    # A pod bound there that names a claim (no legacy asks): an undo evicts such pods from a node
    # whose DRA side was switched on, never from one whose labels are as before.
    waiting = pod("claims-1", "p0", None, claims="c-1")
    waiting["status"]["resourceClaimStatuses"] = []
    fake.pod_list.append(waiting)
    fake.kill_at = 1  # killed right after the cordon and the record
    with pytest.raises(Killed):
        mover(fake).move("p0", 1)
    fake.kill_at = None
    assert step(fake) == Step.CORDONED
    before = len(fake.log)
    m = mover(fake)
    m.undo("p0")
    assert not [entry for entry in fake.log[before:] if entry[0] == "evict"]
    assert m.finish(["p0"]) == {} and not fake.nodes["p0"]["spec"]["unschedulable"]
