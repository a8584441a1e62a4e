"""Waves of device-plugin nodes, and where every pod a wave evicts comes back. Pure.

Evicted pods are recreated at once while their node is cordoned. A pod comes back on DRA only
on a node that takes it (node selection, taints) and has room for what it asks (whole GPUs, MIG
devices per profile) on the DRA side as the waves before left it; else on the device plugin of
a node that takes it and advertises its exact resources ("for now", when it belongs on DRA).
A DaemonSet's GPU pod can only come back on its own node: it is evicted once the node publishes
on DRA (it tolerates the cordon), so it never holds a device-plugin GPU there after the flip. A
pod with nowhere to go, a bare pod or emptyDir data without the operator's flag (as `kubectl
drain`), a Job whose backoffLimit the evictions would exhaust, or a PodDisruptionBudget that
allows nothing blocks its wave, named with the reason.
"""

from __future__ import annotations

import enum

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import ValidationError

from app.common import view_of
from app.migration import PREEMPTED, PREEMPTS
from app.policy import LabelSelector

from .placement import unplaceable
from .record import Step
from .pods import PodView
from .sides import DENIED, DRA, PLUGIN, NodeView


class Back(enum.StrEnum):
    """Where an evicted pod comes back, as a wave plan says it."""

    DRA = "dra"
    DRA_AFTER = "dra, after the move"
    PLUGIN = "plugin"
    PLUGIN_FOR_NOW = "plugin, for now"
    LOST = "lost"


DRA_BACK, DRA_AFTER, PLUGIN_BACK, PLUGIN_FOR_NOW, LOST = Back.DRA, Back.DRA_AFTER, Back.PLUGIN, Back.PLUGIN_FOR_NOW, \
    Back.LOST


@dataclass(frozen=True)
class Drain:
    """`kubectl drain`'s consent flags: evict bare pods (lost), and pods with emptyDir data."""

    force: bool = False
    delete_emptydir_data: bool = False


@dataclass
class Wave:
    number: int
    nodes: list[str]
    gpus: int
    pods: list[PodView]
    blockers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    done: bool = False
    back: dict[str, str] = field(default_factory=dict)  # pod -> DRA_BACK | DRA_AFTER | PLUGIN_BACK | ...
    stuck: bool = False  # a node of it stopped mid-move


Fits = Callable[[PodView, str], bool]  # could the node's devices ever serve the pod's claims?


class Room:
    """What each side has left for recreated pods, node by node."""

    def __init__(self, nodes: list[NodeView], pods: list[PodView], fits: Fits | None = None):
        self.fits = fits or (lambda pod, node: True)
        self.view = {n.name: n for n in nodes}
        self.plugin = {n.name: Counter(n.advertised) for n in nodes if n.side == PLUGIN and not n.unschedulable}
        self.dra = {n.name: n.dra_room() for n in nodes if n.side == DRA and not n.unschedulable}
        for pod in pods:
            if pod.node in self.plugin:
                self.plugin[pod.node].subtract(pod.legacy)
            elif pod.node in self.dra:
                self.dra[pod.node].subtract(pod.dra_need())

    def dra_for(self, pod: PodView) -> str | None:
        need = pod.dra_need()
        return _most_room(self.dra, lambda n: covers(self.dra[n], need) and
                          unplaceable(pod.spec, self.view[n]) is None and self.fits(pod, n))

    def plugin_for(self, pod: PodView) -> str | None:
        need = Counter(pod.legacy)
        return _most_room(self.plugin, lambda n: covers(self.plugin[n], need) and
                          unplaceable(pod.spec, self.view[n]) is None)


def _most_room(room: dict[str, Counter], takes) -> str | None:
    """The node with the most room left (then the last name) that takes the pod: nodes are tried
    in that order, so the costly checks stop at the first that passes."""
    ranked = sorted(((sum(free.values()), n) for n, free in room.items()), reverse=True)
    return next((n for _free, n in ranked if takes(n)), None)


def covers(room: Counter | None, need: Counter) -> bool:
    return room is not None and all(room[k] >= v for k, v in need.items())


def plan_waves(nodes: list[NodeView], pods: list[PodView], budgets: list[dict], wave_size: int | None = 1,
               max_gpus: int | None = None, chosen=lambda node: True, drain: Drain = Drain(),
               fits: Fits | None = None) -> list[Wave]:
    """Device-plugin nodes in waves, fewest pods that must stay on the device plugin first, then
    fewest pods to evict; each wave checked against the cluster as the waves before leave it.
    fits: our feasibility check of a pod's claims on one node's devices (None: counts only)."""
    waves = _done_waves(nodes, pods)
    number = max((n.wave for n in nodes if n.wave is not None), default=0)
    room = Room(nodes, pods, fits)
    staying = Counter(p.node for p in pods if p.path == PLUGIN)
    evictions = Counter(p.node for p in pods)
    queue = sorted((n for n in nodes if n.side == PLUGIN and chosen(n)),
                   key=lambda n: (staying[n.name], evictions[n.name], n.gpus, n.name))
    placed: dict[str, list[PodView]] = {}  # pods this plan puts on a device-plugin node
    pending = [p for p in pods if p.node is None and p.legacy]  # admitted for the device plugin, not bound yet
    serving = {n.name: n for n in nodes if n.side == PLUGIN}
    blocked_at = None
    while queue:
        members = [queue.pop(0)]
        while queue and (len(members) < (wave_size or 1) if max_gpus is None
                         else sum(n.gpus for n in members) + queue[0].gpus <= max_gpus):
            members.append(queue.pop(0))
        number += 1
        names = sorted(n.name for n in members)
        evicted = [p for p in pods if p.node in names] + [p for n in names for p in placed.pop(n, [])]
        wave = Wave(number, names, sum(n.gpus for n in members), evicted)
        _place(wave, members, room, placed, drain)
        wave.blockers += budget_blockers(evicted, budgets, wave.notes)
        wave.blockers += _pending_blockers(wave, pending, serving)
        if blocked_at is not None:
            wave.notes.append(f"planned as if wave {blocked_at} had been unblocked")
        elif wave.blockers:
            blocked_at = number
        waves.append(wave)
    return waves


def _pending_blockers(wave: Wave, pending: list[PodView], serving: dict[str, NodeView]) -> list[str]:
    """Pending pods (unbound, or held by scheduling gates such as Kueue's) were admitted asking the
    device plugin and keep asking it: a wave that moves the last device-plugin nodes that could
    ever take one strands it. `serving`: the device-plugin nodes the waves so far leave."""
    out = []
    leaving = set(wave.nodes)
    for pod in sorted(pending, key=lambda p: p.key):
        could = sorted(n.name for n in serving.values() if _could_serve(pod, n))
        if not could or not leaving.issuperset(could):
            continue  # another node can still take it (or none ever could: not this wave's doing)
        gated = f", held by scheduling gates {', '.join(pod.gates)}" if pod.gates else ""
        fix = ("delete it before this wave: its owner's new pod is rewritten onto DRA" if pod.path == DRA and pod.owner
               else "keep a node that takes it on the device plugin (--nodes), or let it finish first")
        out.append(f"{pod.key} (Pending{gated}, {_asks(pod)}) was admitted asking the device plugin; wave "
                   f"{wave.number} moves the last node(s) that could take it ({', '.join(could)}): {fix}")
    for name in leaving:
        serving.pop(name, None)
    return out


def _could_serve(pod: PodView, node: NodeView) -> bool:
    """By node selection, taints and what its device plugin advertises in all, whatever is free now."""
    return unplaceable(pod.spec, node) is None and all(node.advertised.get(r, 0) >= n for r, n in pod.legacy.items())


def _place(wave: Wave, members: list[NodeView], room: Room, placed: dict, drain: Drain) -> None:
    names = set(wave.nodes)
    for name in names:
        room.plugin.pop(name, None)
    after = {n.name: n.dra_room() for n in members if not n.unschedulable}  # once this wave publishes
    unplaced = []
    wave.blockers += drain_refusals(wave.pods, drain)
    for pod in sorted(wave.pods, key=lambda p: (-sum(p.legacy.values()), p.key)):
        if not pod.owner:
            if drain.force:
                wave.back[pod.key] = LOST
                wave.notes.append(f"{pod.key}: a bare pod, evicted and lost (--force)")
            continue
        where = _back(pod, names, after, room, placed)
        if isinstance(where, str):
            wave.back[pod.key] = where
        else:
            unplaced.append((pod, where[0]))
    room.dra.update(after)
    for pod, why in unplaced[:5]:
        wave.blockers.append(f"{pod.key} ({pod.owner}, {_asks(pod)}) would find no room: {why}")
    if len(unplaced) > 5:
        wave.blockers.append(f"{len(unplaced) - 5} more pod(s) would find no room either")
    _preemption_note(wave)
    later = [k for k, v in wave.back.items() if v == PLUGIN_FOR_NOW]
    if later:
        wave.notes.append(f"{len(later)} pod(s) come back on the device plugin for now (no DRA room they can use "
                          f"until this wave's nodes publish) and move with their new node: {', '.join(later[:5])}")


def _preemption_note(wave: Wave) -> None:
    """The wave's pods the path choice keeps on the device plugin for preemption, by side."""
    kept = {side: [p.key for p in wave.pods if f"preemption: {side}:" in p.why] for side in (PREEMPTS, PREEMPTED)}
    if kept[PREEMPTS] or kept[PREEMPTED]:
        wave.notes.append(f"preemption: {len(kept[PREEMPTS])} preempting and {len(kept[PREEMPTED])} preempted GPU "
                          "pod(s) come back on the device plugin, where the scheduler still preempts for them "
                          f"(not for DRA devices through 1.37): {', '.join((kept[PREEMPTS] + kept[PREEMPTED])[:5])}")


def _back(pod: PodView, names: set[str], after: dict, room: Room, placed: dict):
    """Where the pod comes back (a wave.back value, its room taken), or (why not,)."""
    pin = pod.pinned
    if pod.path == DENIED:
        return (pod.why,)
    if pod.daemon and pod.tolerates_cordon:  # evicted once its node publishes: back on its own node
        node = pin or pod.node
        if pod.path != DRA:
            return (f"a DaemonSet pod comes back only on {node}, which leaves the device plugin, and the webhook "
                    f"keeps it there ({pod.why})",)
        if node in names:
            if not covers(after.get(node), pod.dra_need()) or not room.fits(pod, node):
                return (f"a DaemonSet pod comes back only on {node}, whose DRA side has no room for it",)
            after[node].subtract(pod.dra_need())
            return DRA_AFTER
    if pin in names:
        if pod.path != DRA:
            return (f"pinned to {pin} (its node selection), which leaves the device plugin, and the webhook keeps "
                    f"it there ({pod.why})",)
        if not any(covers(r, pod.dra_need()) for r in room.dra.values()):
            return (f"pinned to {pin}: recreated while {pin} is cordoned, the webhook would keep it on the device "
                    "plugin (no open DRA node has such devices), which leaves that node",)
        if not covers(after.get(pin), pod.dra_need()) or not room.fits(pod, pin):
            return (f"pinned to {pin}, whose DRA side has no room for it",)
        after[pin].subtract(pod.dra_need())
        return DRA_AFTER
    if pod.path == DRA:
        node = room.dra_for(pod)
        if node is not None:
            room.dra[node].subtract(pod.dra_need())
            return DRA_BACK
    node = room.plugin_for(pod)
    if node is None:
        side = "" if pod.path == DRA else f"it stays on the device plugin ({pod.why}); "
        return (f"{side}no node left that takes it has {_asks(pod)} free on "
                + ("either side" if pod.path == DRA else "the device plugin"),)
    room.plugin[node].subtract(pod.legacy)
    placed.setdefault(node, []).append(pod)
    return PLUGIN_BACK if pod.path == PLUGIN else PLUGIN_FOR_NOW


def _asks(pod: PodView) -> str:
    asked = pod.legacy or {"DRA devices": pod.devices}
    return ", ".join(f"{v} {r}" for r, v in sorted(asked.items()))


def drain_refusals(evicted: list[PodView], drain: Drain) -> list[str]:
    """What `kubectl drain` would refuse to evict without the operator's consent, and Jobs the
    evictions would fail: the plan's blockers and the mover's last check before it evicts."""
    out = []
    for pod in evicted:
        if not pod.owner and not drain.force:
            out.append(f"{pod.key} is a bare pod: nothing recreates it once evicted (`kubectl drain` refuses it "
                       "too): pass --force to evict and lose it, or move it yourself")
        elif pod.empty_dir and not drain.delete_emptydir_data:
            out.append(f"{pod.key} has emptyDir volumes whose data an eviction deletes: pass "
                       "--delete-emptydir-data to accept that (as `kubectl drain`)")
    return out + _job_blockers(evicted)


def _job_blockers(evicted: list[PodView]) -> list[str]:
    """A Job fails once its pods' failures pass backoffLimit; each eviction counts as one."""
    out = []
    per_job = Counter(p.namespace + "/" + p.owner for p in evicted if p.owner.startswith("Job/"))
    for job, count in sorted(per_job.items()):
        left = next(p.evictions_left for p in evicted if p.namespace + "/" + p.owner == job)
        if left is not None and count > left:
            namespace, _, owner = job.partition("/")
            out.append(f"{owner} in {namespace}: evicting {count} of its pod(s) would exceed its backoffLimit "
                       f"({left} more failure(s) allowed): the Job would fail (BackoffLimitExceeded); let it finish, "
                       "raise backoffLimit, or give it a podFailurePolicy that ignores DisruptionTarget")
    return out


def next_steps(step: str | None, wave: int | None) -> str:
    """What is safe to do with a node stopped at `step`: before its labels flipped nothing has
    moved, so undo only uncordons it (it evicts nothing a budget refused again)."""
    if Step.undo_label(step):
        return f"`rollout undo --wave {wave}` continues it"
    if not step or (step in {s.label for s in Step} and Step.parse(step) < Step.FLIPPED):
        return (f"`rollout run --wave {wave}` continues it once what stopped it allows (a budget, a pod leaving), "
                f"or `rollout undo --wave {wave}` uncordons it: nothing has moved yet, nothing is evicted again (it "
                "refuses while a pod already evicted could then never run)")
    return (f"`rollout run --wave {wave}` continues it, `rollout undo --wave {wave}` takes it back (evicting the "
            "pods already on its DRA side)")


def _done_waves(nodes: list[NodeView], pods: list[PodView]) -> list[Wave]:
    out: dict[int, Wave] = {}
    for node in sorted(nodes, key=lambda n: n.name):
        if node.wave is None:
            continue
        wave = out.setdefault(node.wave, Wave(node.wave, [], 0, [], done=True))
        wave.nodes.append(node.name)
        wave.gpus += node.gpus
        wave.done = wave.done and node.step == "done"
        wave.pods += [p for p in pods if p.node == node.name]
        if node.step != "done":
            wave.stuck = True
            wave.notes.append(f"{node.name}: stopped at step {node.step or 'start'}: " + next_steps(node.step, node.wave))
    return [out[k] for k in sorted(out)]


def budget_blockers(evicted: list[PodView], budgets: list[dict], notes: list[str]) -> list[str]:
    out = []
    for budget in budgets:
        view, spec = view_of(budget), budget.get("spec") or {}
        hit = [p for p in evicted if p.namespace == view.namespace and _selects(spec.get("selector"), p.labels)]
        if not hit:
            continue
        status = budget.get("status") or {}
        allowed = int(status.get("disruptionsAllowed") or 0)
        where = f"PodDisruptionBudget {view.namespace}/{view.name}"
        if allowed == 0:
            out.append(f"{where} allows no disruption now ({status.get('currentHealthy', 0)} healthy, "
                       f"{status.get('desiredHealthy', 0)} desired): evicting {hit[0].key} would break it")
        elif len(hit) > allowed:
            notes.append(f"{where} allows {allowed} disruption(s): its {len(hit)} pods here are evicted as "
                         "replacements become ready")
    return out


def _selects(selector: dict | None, labels: dict[str, str]) -> bool:
    """A PodDisruptionBudget's selector against labels (policy/v1: empty selects every pod, null none)."""
    if not isinstance(selector, dict):
        return False
    try:
        return LabelSelector.model_validate(selector).matches(labels)
    except ValidationError:
        return False  # the API server would not have stored it
