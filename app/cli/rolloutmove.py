"""The steps that move one node across (or back) for `dra-bridge rollout run` / `undo`.

Each step is recorded on the node (annotations rollout.WAVE / STEP / BEFORE) before the next
starts, so a run that stopped (a PodDisruptionBudget, a timeout, Ctrl-C) is continued by running
the same wave again. A budget that forbids an eviction is asked again until the timeout, then
named: nothing is forced.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from app.common import BridgeError
from app.kube import NodeWrites
from app.migration import rollout


class Stopped(BridgeError):
    """A wave stopped before its end; running it again continues from the step recorded."""


class Mover:
    def __init__(self, writes: NodeWrites, switches: rollout.Switches, policy, say: Callable[[str], None],
                 timeout_s: float = 600.0, poll_s: float = 2.0):
        self.writes, self.switches, self.policy = writes, switches, policy
        self.say = (lambda line: say(f"[dry run] {line}")) if writes.dry_run else say
        self.timeout_s, self.poll_s = timeout_s, poll_s

    @property
    def dry_run(self) -> bool:
        return self.writes.dry_run

    def view(self, name: str) -> tuple[dict, rollout.NodeView | None, list[rollout.PodView]]:
        objects = self.writes.judged_on_node(name)
        node = self.writes.node(name)
        return (node, rollout.node_view(node, objects["resourceslices"], self.switches),
                rollout.pod_views(objects, self.policy, self.switches))

    def move(self, name: str, wave: int) -> None:
        """Device plugin -> DRA: cordon, evict its GPU pods, flip the labels, wait until NVIDIA's
        driver publishes what the device plugin advertised, uncordon."""
        node, view, _pods = self.view(name)
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        step = annotations.get(rollout.STEP)
        if step == "done":
            self.say(f"{name}: moved already (wave {annotations.get(rollout.WAVE)})")
            return
        if view is None:
            raise BridgeError(f"node {name}: no GPUs on either side")
        if rollout.BEFORE in annotations:
            before = json.loads(annotations[rollout.BEFORE])
            self.say(f"{name}: continuing from step {step}")
        else:
            before = json.loads(rollout.before_move(view, self.switches))
            self.writes.patch_node(name, {"metadata": {"annotations": {
                rollout.WAVE: str(wave), rollout.STEP: "cordoned", rollout.BEFORE: json.dumps(before, sort_keys=True)}},
                "spec": {"unschedulable": True}})
            self.say(f"{name}: cordoned ({before['gpus']} GPUs on the device plugin)")
        if step in (None, "cordoned"):
            self._drain(name)
            self._step(name, "evicted")
        if step in (None, "cordoned", "evicted"):
            s = self.switches
            self.writes.patch_node(name, {"metadata": {"labels": {s.plugin_label: s.plugin_off, s.dra_label: s.dra_on},
                                                       "annotations": {rollout.STEP: "flipped"}}})
            self.say(f"{name}: labels {s.plugin_label}={s.plugin_off}, {s.dra_label}={s.dra_on}")
        if not self.dry_run:
            self._wait(name, lambda: self._published(name, before),
                       f"NVIDIA's driver to publish the GPUs the device plugin advertised on {name}")
        self.writes.patch_node(name, {"metadata": {"annotations": {rollout.STEP: "done"}},
                                      "spec": {"unschedulable": bool(before.get("unschedulable"))}})
        self.say(f"{name}: on DRA, {before['gpus']} GPU(s) published"
                 + ("" if before.get("unschedulable") else ", uncordoned"))

    def undo(self, name: str) -> None:
        """DRA -> device plugin, for a node a wave moved: cordon, evict its GPU pods, restore the
        labels, wait until the device plugin advertises its GPUs again, uncordon, forget the wave."""
        node = self.writes.node(name)
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        if rollout.BEFORE not in annotations:
            raise BridgeError(f"node {name}: no wave moved it (annotation {rollout.BEFORE} missing)")
        before = json.loads(annotations[rollout.BEFORE])
        self.writes.patch_node(name, {"metadata": {"annotations": {rollout.STEP: "undoing"}},
                                      "spec": {"unschedulable": True}})
        self.say(f"{name}: cordoned")
        self._drain(name)
        self.writes.patch_node(name, {"metadata": {"labels": before["labels"]}})
        restored = (f"{k}={v}" if v is not None else f"{k} removed" for k, v in sorted(before["labels"].items()))
        self.say(f"{name}: labels restored ({', '.join(restored)})")
        if not self.dry_run:
            self._wait(name, lambda: self._advertised(name, before),
                       f"the device plugin to advertise {name}'s GPUs again")
        self.writes.patch_node(name, {"metadata": {"annotations": {rollout.WAVE: None, rollout.STEP: None,
                                                                   rollout.BEFORE: None}},
                                      "spec": {"unschedulable": bool(before.get("unschedulable"))}})
        self.say(f"{name}: back on the device plugin")

    def _step(self, name: str, step: str) -> None:
        self.writes.patch_node(name, {"metadata": {"annotations": {rollout.STEP: step}}})

    def _drain(self, name: str) -> None:
        """Evict the node's GPU pods; a budget that forbids one now is asked again until the
        timeout. Then wait until they are gone."""
        pods = self.view(name)[2]
        deadline, waiting = time.monotonic() + self.timeout_s, list(pods)
        while waiting:
            refused = []
            for pod in waiting:
                why = self.writes.evict(pod.namespace, pod.name)
                if why is None:
                    back = "the device plugin" if pod.path == rollout.PLUGIN else "DRA"
                    by = f"{pod.owner} recreates it" if pod.owner else "a bare pod: nothing recreates it"
                    self.say(f"{name}: evicted {pod.key} ({by}; it belongs on {back})")
                else:
                    refused.append((pod, why))
            waiting = [pod for pod, _why in refused]
            if refused and self.dry_run:  # nothing was evicted: waiting could not change the answer
                pod, why = refused[0]
                raise Stopped(f"{name}: eviction of {pod.key} would be refused now: {why}")
            if refused and time.monotonic() > deadline:
                pod, why = refused[0]
                raise Stopped(f"{name}: eviction of {pod.key} refused for {self.timeout_s:g} s: {why}. Nothing "
                              "was forced: run the wave again once the budget allows it")
            if refused:
                time.sleep(self.poll_s)
        if pods and not self.dry_run:
            keys = {p.key for p in pods}
            self._wait(name, lambda: (not keys & _keys(self.writes.on_node(name, "pods")["pods"]), "pods still there"),
                       f"the evicted pods to leave {name}")

    def _published(self, name: str, before: dict) -> tuple[bool, str]:
        view = rollout.published(self.writes.node(name), self.writes.on_node(name, "resourceslices")["resourceslices"],
                                 self.switches)
        if view is None:
            return False, "nothing published yet"
        if view.advertised:
            return False, "the device plugin still advertises " + ", ".join(
                f"{v} {k}" for k, v in sorted(view.advertised.items()))
        missing = rollout.slices_ready(view, before)
        return missing is None, missing or ""

    def _advertised(self, name: str, before: dict) -> tuple[bool, str]:
        have = rollout.plugin_advertised(self.writes.node(name))
        short = {k: v for k, v in (before.get("advertised") or {}).items() if have.get(k, 0) < v}
        return not short, ", ".join(f"{have.get(k, 0)} of {v} {k} advertised" for k, v in sorted(short.items()))

    def _wait(self, name: str, check, what: str) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            done, why = check()
            if done:
                return
            if time.monotonic() > deadline:
                raise Stopped(f"{name}: waited {self.timeout_s:g} s for {what}" + (f" ({why})" if why else "")
                              + "; run the wave again to go on waiting")
            time.sleep(self.poll_s)


def _keys(pods: list[dict]) -> set[str]:
    return {f"{(p.get('metadata') or {}).get('namespace')}/{(p.get('metadata') or {}).get('name')}" for p in pods}
