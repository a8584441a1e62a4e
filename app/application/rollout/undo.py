"""An undo planned like a run: before a wave's nodes go back to the device plugin, what must hold
for nothing to be stranded. Pure.

A node goes back only where the device plugin can start on it again (a DaemonSet that selects on
the plugin switch label takes the node once its labels are restored) and where every pod the undo
evicts (those holding DRA devices there) finds room: on DRA elsewhere if the webhook would
rewrite its owner's new pod, else on the device plugin of a node that takes it (the restored
nodes included, once uncordoned). A node that never flipped has no DRA pods: nothing is evicted
from it. Budgets and `kubectl drain`'s consent flags block as in a run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from app.common import view_of

from .pods import PodView
from .placement import unplaceable
from .record import MoveRecord, Step
from .sides import DRA, PLUGIN, NodeView, Switches
from .waves import DRA_BACK, PLUGIN_BACK, Drain, Room, Wave, budget_blockers, covers, drain_refusals

# The DaemonSet controller adds these tolerations to every DaemonSet pod.
DAEMON_TOLERATIONS = [{"key": f"node.kubernetes.io/{k}", "operator": "Exists"} for k in
                      ("not-ready", "unreachable", "disk-pressure", "memory-pressure", "pid-pressure",
                       "unschedulable", "network-unavailable")]


def plan_undo(number: int, nodes: list[NodeView], pods: list[PodView], records: dict[str, MoveRecord | None],
              daemonsets: list[dict], budgets: list[dict], switches: Switches, drain: Drain | None = None,
              room: bool = True) -> Wave:
    """Wave `number` taken back: the pods it evicts, where each comes back, and what blocks it.
    room: judge where evicted pods come back (an undo already under way has evicted some: only
    the device plugin's DaemonSet is judged then)."""
    drain = drain or Drain()
    members = [n for n in nodes if n.wave == number]
    names = sorted(n.name for n in members)
    restored = {n.name: _restored(n, records.get(n.name)) for n in members}
    flipped = {n for n in names if _plugin_turned_off(records.get(n))}
    evicted = [p for p in pods if p.node in flipped and not p.legacy]
    wave = Wave(number, names, sum(n.gpus for n in members), evicted)
    for name in sorted(flipped):
        wave.blockers += _plugin_blockers(restored[name], daemonsets, switches)
    wave.blockers += _stranded_replacements(number, pods, set(names))
    for name in sorted(set(names) - flipped):
        record = records.get(name)
        step = record.step.label if record is not None else "start"
        wave.notes.append(f"{name}: never left the device plugin (step {step}): undo uncordons it and restores its "
                          "labels, evicting nothing")
    if room:
        wave.blockers += drain_refusals(evicted, drain)
        _place(wave, nodes, pods, restored, evicted)
        wave.blockers += budget_blockers(evicted, budgets, wave.notes)
    return wave


def _stranded_replacements(number: int, pods: list[PodView], names: set[str]) -> list[str]:
    """Pods waiting, Pending, for a claim on one of these nodes they are pinned to (a run's
    evicted pod rewritten onto DRA, its node cordoned when a budget stopped the run): once the
    node is back on the device plugin they could never run."""
    return [f"{p.key} ({p.owner or 'bare pod'}) waits, Pending, for DRA devices on {p.pinned}, which it is pinned "
            f"to: back on the device plugin, {p.pinned} could never run it. Continue the wave instead (`rollout "
            f"run --wave {number}` once what stopped it allows)"
            for p in sorted(pods, key=lambda p: p.key)
            if p.node is None and not p.legacy and (p.claims or p.devices) and p.pinned in names]


def _plugin_turned_off(record: MoveRecord | None) -> bool:
    """The move got as far as switching the device plugin off (an undo under way counts: its
    device plugin must start again), so its DaemonSet must take the node back."""
    return record is not None and record.step >= Step.FLIPPED


def _restored(node: NodeView, record: MoveRecord | None) -> NodeView:
    """The node as the device plugin side will have it: labels and cordon as before the move."""
    if record is None:
        return node
    labels = dict(node.labels)
    for key, value in record.before.labels.items():
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    return replace(node, side=PLUGIN, labels=labels, advertised=dict(record.before.advertised),
                   unschedulable=record.before.unschedulable, wave=None, step=None)


def selects_on(daemonset: dict, label: str) -> bool:
    """Its pods' node selection requires `label` (as the GPU Operator's device-plugin DaemonSet)."""
    spec = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
    if label in (spec.get("nodeSelector") or {}):
        return True
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")) or []
    return bool(terms) and all(any(e.get("key") == label for e in (t.get("matchExpressions") or []))
                               for t in terms if isinstance(t, dict))


def _plugin_blockers(node: NodeView, daemonsets: list[dict], switches: Switches) -> list[str]:
    label = switches.plugin_label
    wanted = f"{label}={node.labels.get(label, '(removed)')}"
    ours = [d for d in daemonsets if selects_on(d, label)]
    if not ours:
        return [f"{node.name}: no DaemonSet selects nodes by {label}: nothing would start the device plugin there "
                f"once its labels are restored ({wanted}); install it (the GPU Operator's device plugin, or "
                "NVIDIA's k8s-device-plugin chart with that nodeSelector), then undo"]
    why = []
    for daemonset in ours:
        spec = dict(((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {})
        spec["tolerations"] = list(spec.get("tolerations") or []) + DAEMON_TOLERATIONS
        refused = unplaceable(spec, node)
        if refused is None:
            return []
        why.append(f"{'/'.join(view_of(daemonset).key())}: {refused}")
    return [f"{node.name}: no device plugin DaemonSet would run there with its labels restored ({wanted}): "
            + "; ".join(why[:3])]


def _place(wave: Wave, nodes: list[NodeView], pods: list[PodView], restored: dict[str, NodeView],
           evicted: list[PodView]) -> None:
    after = [restored.get(n.name, n) for n in nodes]
    leaving = {p.key for p in evicted}
    # What they ask again: their owner's new pod (a rewritten pod's annotation records it).
    asking = [replace(p, legacy=p.recreated_asks) if p.recreated_asks else p for p in evicted]
    room = Room(after, [p for p in pods if p.key not in leaving])
    for pod in sorted(asking, key=lambda p: (-sum(p.dra_need().values()), p.key)):
        if not pod.owner:
            continue  # a bare pod: drain_refusals named it, or --force loses it
        to_dra = pod.recreated_path == DRA  # rewritten, native, or legacy only while DRA is busy
        pin = pod.pinned
        if to_dra and pin in restored and any(covers(r, pod.dra_need()) for r in room.dra.values()):
            wave.blockers.append(f"{pod.key} ({pod.owner}) is pinned to {pin}: its owner's new pod would be rewritten "
                                 f"onto DRA (open DRA nodes have such devices) and could never run on {pin} once it "
                                 "is back on the device plugin")
            continue
        node = room.dra_for(pod) if to_dra else None
        if node is not None:
            room.dra[node].subtract(pod.dra_need())
            wave.back[pod.key] = DRA_BACK
            continue
        node = room.plugin_for(pod) if pod.recreated_asks else None
        if node is not None:
            room.plugin[node].subtract(Counter(pod.recreated_asks))
            wave.back[pod.key] = PLUGIN_BACK
            continue
        asks = ", ".join(f"{v} {r}" for r, v in sorted(pod.recreated_asks.items())) or f"{pod.devices} DRA device(s)"
        where = "either side" if to_dra and pod.recreated_asks else "DRA" if to_dra else "the device plugin"
        wave.blockers.append(f"{pod.key} ({pod.owner}, {asks}) would find no room on {where} once wave "
                             f"{wave.number} is back on the device plugin ({pod.recreated_why})")
