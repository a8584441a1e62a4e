"""The steps that move one node across (`rollout run`) or back (`rollout undo`), against a small
node API (app.kube.NodeWrites in a cluster, a fake in tests): each finished step is written to the
node's record (record.Step) before the next starts, so the same command continues a stopped one.

run:  cordon, evict its GPU pods, flip the switch labels, wait until NVIDIA's driver publishes
      what the device plugin advertised, evict its DaemonSet GPU pods (they come back on DRA on
      this node: they tolerate the cordon), uncordon; then (finish) wait until every workload
      it evicted has its pods bound again, and only then is the node done.
undo: cordon, evict its GPU pods, its DaemonSet GPU pods too (NVIDIA's plugin must unprepare
      their claims before it goes), restore the labels, wait until the device plugin advertises
      again and the DaemonSet pods are back, restore the cordon; finish as run does, then forget.
Nothing is forced: a budget that refuses an eviction is asked again until the timeout.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from app.common import BridgeError, WriteConflict, metadata_of, view_of
from app.policy import Policy

from app.migration import DEFAULT_OPT_IN, OptIn
from .pods import PodView, bound_by_owner, pod_views
from .record import MoveRecord, Step, forget
from .sides import BEFORE, STEP, WAVE, NodeBefore, Switches, before_move, node_view, plugin_advertised, published, slices_ready
from .waves import Drain, drain_refusals, next_steps


class Stopped(BridgeError):
    """A move stopped before its end; the same command continues from the step recorded."""


class NodeAPI(Protocol):
    dry_run: bool

    def node(self, name: str) -> dict: ...

    def on_node(self, name: str, *kinds: str) -> dict[str, list[dict]]: ...

    def judged_on_node(self, name: str) -> dict[str, list[dict]]: ...

    def patch_node(self, name: str, patch: dict) -> None: ...

    def evict(self, namespace: str, name: str) -> str | None: ...

    def pods(self) -> list[dict]: ...


@dataclass
class Mover:
    api: NodeAPI
    switches: Switches
    policy: Policy
    say: Callable[[str], None]
    timeout_s: float = 600.0
    poll_s: float = 2.0
    opt_in: OptIn | None = DEFAULT_OPT_IN
    drain: Drain = field(default_factory=Drain)
    _seen: dict = field(default_factory=dict)  # node -> the record annotations this command last read or wrote
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # The webhook judges replacements on its live view, which follows a cordon within its rebuild
    # interval (1 s): an undo evicts only after that, so no replacement is rewritten onto the
    # devices of the node being taken back.
    settle_s: float = 3.0

    def __post_init__(self):
        if self.api.dry_run:
            say = self.say
            self.say = lambda line: say(f"[dry run] {line}")

    @property
    def dry_run(self) -> bool:
        return self.api.dry_run

    # -- run ------------------------------------------------------------------------------
    def move(self, name: str, wave: int) -> None:
        """Device plugin -> DRA, up to MOVED (finish takes it to DONE)."""
        node = self._saw(self.api.node(name))
        record = MoveRecord.of(node)
        if record is not None and record.step.undoing:
            raise Stopped(f"{name}: being taken back (step {record.step.label}): `rollout undo --wave {record.wave}` "
                          "continues it")
        if record is not None and record.step >= Step.MOVED:
            self.say(f"{name}: moved already (wave {record.wave})")
            return
        if record is None:
            view = node_view(node, self.api.on_node(name, "resourceslices")["resourceslices"], self.switches)
            if view is None:
                raise BridgeError(f"node {name}: no GPUs on either side")
            record = MoveRecord(wave, Step.CORDONED, before_move(view, self.switches))
            self._write(name, record, {"spec": {"unschedulable": True}})
            self.say(f"{name}: cordoned ({record.before.gpus} GPUs on the device plugin)")
        else:
            self.say(f"{name}: continuing from step {record.step.label}")
        if record.step < Step.EVICTED:
            self._evict(name, record, late=False)
            self._advance(name, record, Step.EVICTED)
        if record.step < Step.FLIPPED:
            s = self.switches
            record.step = Step.FLIPPED
            self._write(name, record, {"metadata": {"labels": {s.plugin_label: s.plugin_off, s.dra_label: s.dra_on}}})
            self.say(f"{name}: labels {s.plugin_label}={s.plugin_off}, {s.dra_label}={s.dra_on}")
        if record.step < Step.PUBLISHED:
            self._wait(name, lambda: self._published(name, record.before),
                       f"NVIDIA's driver to publish the GPUs the device plugin advertised on {name}", record)
            self._advance(name, record, Step.PUBLISHED)
        self._evict(name, record, late=True)
        record.step = Step.MOVED
        self._write(name, record, {"spec": {"unschedulable": record.before.unschedulable}})
        self.say(f"{name}: on DRA, {record.before.gpus} GPU(s) published"
                 + ("" if record.before.unschedulable else ", uncordoned"))

    # -- undo -----------------------------------------------------------------------------
    def undo(self, name: str) -> None:
        """DRA -> device plugin, up to UNDO_READY (finish forgets the record)."""
        node = self._saw(self.api.node(name))
        record = MoveRecord.of(node)
        if record is None:
            raise BridgeError(f"node {name}: no wave moved it (annotation {BEFORE} missing)")
        if record.step >= Step.UNDO_READY:
            self.say(f"{name}: back on the device plugin already")
            return
        if not record.step.undoing:
            # What the run evicted stays in the record: undo is done only once those workloads
            # are bound again too (their replacements may wait on this node's DRA side).
            record.step = Step.UNDOING
            self._write(name, record, {"spec": {"unschedulable": True}})
            self.say(f"{name}: cordoned")
            if not self.dry_run:
                self.sleep(self.settle_s)
        else:
            self.say(f"{name}: continuing from step {record.step.label}")
        if record.step < Step.UNDO_EVICTED:
            if record.switched(view_of(node).labels):  # else nothing is on DRA there: nothing to evict
                self._evict(name, record, late=False)
                # NVIDIA's kubelet plugin leaves with the labels, and a pod stops only once it has
                # unprepared its claims: the DaemonSet pods go first too. Their replacements wait
                # on the device plugin (no cordoned node is DRA room) until it is back.
                self._evict(name, record, late=True, back_here=False)
            self._advance(name, record, Step.UNDO_EVICTED)
        if record.step < Step.UNDO_RESTORED:
            record.step = Step.UNDO_RESTORED
            self._write(name, record, {"metadata": {"labels": record.before.labels}})
            restored = (f"{k}={v}" if v is not None else f"{k} removed"
                        for k, v in sorted((record.before.labels).items()))
            self.say(f"{name}: labels restored ({', '.join(restored)})")
        self._wait(name, lambda: self._advertised(name, record.before),
                   f"the device plugin to advertise {name}'s GPUs again and NVIDIA's driver to withdraw its slices",
                   record)
        daemons = {w for w in record.evicted if "/DaemonSet/" in w}
        self._wait(name, lambda: self._back_here(name, daemons), f"the DaemonSet pods to come back on {name}", record)
        record.step = Step.UNDO_READY
        self._write(name, record, {"spec": {"unschedulable": record.before.unschedulable}})
        self.say(f"{name}: the device plugin advertises its GPUs again")

    # -- both -----------------------------------------------------------------------------
    def finish(self, names: list[str]) -> dict[str, str]:
        """Wait until every workload these nodes' records name has as many pods bound as before
        its pods were evicted (a killed run's evictions included); then the nodes are done (run)
        or forgotten (undo). Returns what is still short when the time is up (nodes unchanged)."""
        records = {n: MoveRecord.of(self._saw(self.api.node(n))) for n in names}
        want: dict[str, int] = {}
        for found in filter(None, records.values()):
            for workload, count in found.evicted.items():
                want[workload] = max(want.get(workload, 0), count)
        short: dict[str, str] = {}
        if want and not self.dry_run:
            deadline = self.clock() + self.timeout_s
            while True:
                bound = bound_by_owner(self.api.pods())
                short = {w: f"{bound[w]} of {n} pod(s) bound" for w, n in sorted(want.items()) if bound[w] < n}
                if not short or self.clock() > deadline:
                    break
                self.sleep(self.poll_s)
        if short:
            return short
        for name, kept in records.items():
            if kept is None:
                continue
            if kept.step == Step.MOVED:
                self._advance(name, kept, Step.DONE)
            elif kept.step == Step.UNDO_READY:
                self._patch(name, None, forget())
                self.say(f"{name}: back on the device plugin, its workloads bound again")
        return {}

    def _evict(self, name: str, record: MoveRecord, late: bool, back_here: bool = True) -> None:
        """Evict the node's GPU pods (late: the DaemonSet pods that tolerate the cordon, which come
        back on this node), recording their workloads first; refused evictions are asked again
        until the timeout. Then wait until they are gone (and, late and back_here, bound here again)."""
        # A run moves what holds the device plugin's GPUs, an undo what holds DRA's: a pod already
        # on the side it goes to (a replacement a killed run left) stays where it is.
        pods = [p for p in self._pods(name) if (p.daemon and p.tolerates_cordon) == late
                and bool(p.legacy) != record.step.undoing]
        refusals = drain_refusals(pods, self.drain)
        if refusals:
            raise Stopped(f"{name}: {refusals[0]}" + (f" (and {len(refusals) - 1} more)" if len(refusals) > 1 else ""))
        if not pods:
            return
        bound = bound_by_owner(self.api.pods())
        for pod in pods:
            if pod.workload:
                record.evicted[pod.workload] = max(record.evicted.get(pod.workload, 0), bound[pod.workload])
        self._write(name, record)
        deadline, waiting = self.clock() + self.timeout_s, list(pods)
        while waiting:
            refused = []
            for pod in waiting:
                why = self.api.evict(pod.namespace, pod.name)
                if why is None:
                    by = f"{pod.owner} recreates it" if pod.owner else "a bare pod: lost (--force)"
                    where = "" if record.step.undoing or not pod.owner else \
                        f"; it belongs on {'the device plugin' if pod.path == 'plugin' else 'DRA'}"
                    self.say(f"{name}: evicted {pod.key} ({by}{where})")
                else:
                    refused.append((pod, why))
            waiting = [pod for pod, _why in refused]
            if refused and (self.dry_run or self.clock() > deadline):
                pod, why = refused[0]
                if self.dry_run:  # nothing was evicted: waiting could not change the answer
                    raise Stopped(f"{name}: eviction of {pod.key} would be refused now: {why}")
                raise Stopped(f"{name}: eviction of {pod.key} refused for {self.timeout_s:g} s: {why}. Nothing "
                              f"was forced: {next_steps(record.step.label, record.wave)}")
            if refused:
                self.sleep(self.poll_s)
        keys = {p.key for p in pods}
        self._wait(name, lambda: (not keys & {"/".join(view_of(p).key())
                                              for p in self.api.on_node(name, "pods")["pods"]}, "pods still there"),
                   f"the evicted pods to leave {name}", record)
        if late and back_here:
            daemons = {p.workload for p in pods}
            self._wait(name, lambda: self._back_here(name, daemons),
                       f"the DaemonSet pods to come back on {name}", record)

    def _pods(self, name: str) -> list[PodView]:
        objects = self.api.judged_on_node(name)
        return [p for p in pod_views(objects, self.policy, self.switches, opt_in=self.opt_in) if p.node == name]

    def _back_here(self, name: str, workloads: set[str]) -> tuple[bool, str]:
        missing = sorted(workloads - set(bound_by_owner(self.api.on_node(name, "pods")["pods"])))
        return not missing, f"not bound here yet: {', '.join(missing[:3])}"

    def _published(self, name: str, before: NodeBefore) -> tuple[bool, str]:
        view = published(self.api.node(name), self.api.on_node(name, "resourceslices")["resourceslices"],
                         self.switches)
        if view is None:
            return False, "nothing published yet"
        if view.advertised:
            return False, "the device plugin still advertises " + ", ".join(
                f"{v} {k}" for k, v in sorted(view.advertised.items()))
        missing = slices_ready(view, before)
        return missing is None, missing or ""

    def _advertised(self, name: str, before: NodeBefore) -> tuple[bool, str]:
        """The device plugin advertises what it did before, and NVIDIA's driver publishes nothing
        for the node (DaemonSet pods evicted next must not be rewritten onto devices leaving)."""
        have = plugin_advertised(self.api.node(name))
        short = {k: v for k, v in before.advertised.items() if have.get(k, 0) < v}
        if short:
            return False, ", ".join(f"{have.get(k, 0)} of {v} {k} advertised" for k, v in sorted(short.items()))
        view = published({"metadata": {"name": name}}, self.api.on_node(name, "resourceslices")["resourceslices"],
                         self.switches)
        left = view.gpus + sum(view.mig.values()) if view is not None else 0
        return not left, f"{left} device(s) still published by {self.switches.driver}" if left else ""

    def _wait(self, name: str, check, what: str, record: MoveRecord) -> None:
        if self.dry_run:
            return
        deadline = self.clock() + self.timeout_s
        while True:
            done, why = check()
            if done:
                return
            if self.clock() > deadline:
                again = f"rollout undo --wave {record.wave}" if record.step.undoing else f"rollout run --wave {record.wave}"
                back = "" if record.step.undoing else f", or `rollout undo --wave {record.wave}` to take it back"
                raise Stopped(f"{name}: waited {self.timeout_s:g} s for {what}" + (f" ({why})" if why else "")
                              + f"; `{again}` goes on waiting{back}")
            self.sleep(self.poll_s)

    def _advance(self, name: str, record: MoveRecord, step: Step) -> None:
        record.step = step
        self._write(name, record)

    def _write(self, name: str, record: MoveRecord, extra: dict | None = None) -> None:
        self._patch(name, extra, record.annotations())

    def _patch(self, name: str, extra: dict | None, annotations: dict) -> None:
        """Write the node's record (and `extra`) only over the record this command last saw:
        compare-and-swap on the node's resourceVersion, the record compared again whenever the
        node changed meanwhile (a kubelet's status update is no reason to stop; another rollout's
        record is)."""
        for _attempt in range(5):
            node = self.api.node(name)
            found = _record_keys(node)
            if name in self._seen and found != self._seen[name]:
                raise Stopped(f"{name}: its move record changed under this command (now step "
                              f"{found.get(STEP) or 'none'}, wave {found.get(WAVE) or 'none'}): another rollout "
                              "command acts on it; nothing more was written")
            patch = dict(extra or {})
            patch["metadata"] = {**metadata_of(patch), "annotations": annotations,
                                 "resourceVersion": view_of(node).resource_version or None}
            try:
                self.api.patch_node(name, patch)
            except WriteConflict:
                continue  # the node changed between our read and write: read it again
            if not self.dry_run:
                self._seen[name] = {k: v for k, v in annotations.items() if v is not None}
            return
        raise Stopped(f"{name}: the node kept changing under every write of its record; run the same command again")

    def _saw(self, node: dict) -> dict:
        """Remember the record this command read, the one its next write may replace."""
        self._seen[view_of(node).name] = _record_keys(node)
        return node



def _record_keys(node: dict) -> dict:
    """The annotations a move record is kept in, as the node has them."""
    annotations = view_of(node).annotations
    return {k: annotations[k] for k in (WAVE, STEP, BEFORE) if k in annotations}
