"""`dra-bridge rollout plan|run|undo|status`: move GPU nodes off the device plugin, wave by wave."""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter

from app import kube
from app.common import BridgeError, InputError, read_objects
from app.kube import NodeWrites, rollout_snapshot
from app.migration import rollout
from app.policy import load_policy

from .rolloutmove import Mover, Stopped

KINDS = {"Node": "nodes", "Pod": "pods", "Namespace": "namespaces", "ResourceQuota": "resourcequotas",
         "PodDisruptionBudget": "poddisruptionbudgets", "ResourceSlice": "resourceslices",
         "ResourceClaim": "resourceclaims", "DeviceClass": "deviceclasses"}


def run_rollout(args) -> int:
    switches = rollout.Switches(*_label(args.plugin_label, "--plugin-label", 3),
                                *_label(args.dra_label, "--dra-label", 2), driver=args.driver)
    policy = load_policy(args.policy)
    chosen = _selector(args.nodes)
    api = None
    if getattr(args, "filename", None):
        objects = _from_files(args.filename)
    else:
        found = kube.connect(args.kubeconfig, args.context)
        if found is None:
            raise BridgeError("rollout needs a cluster (--kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster)"
                              " or, for plan and status, -f FILE (an export)")
        api = found[0]
        try:
            objects = rollout_snapshot(api)
        except Exception as exc:  # noqa: BLE001 - unreachable, TLS, DNS: one line naming the server
            if isinstance(exc, BridgeError):
                raise
            raise kube.unreachable(found[1], exc) from None
    nodes = [v for v in (rollout.node_view(n, objects["resourceslices"], switches) for n in objects["nodes"]) if v]
    pods = rollout.pod_views(objects, policy, switches)
    if args.action == "status":
        return _status(nodes, pods, args.output)
    waves = rollout.plan_waves(nodes, pods, objects["poddisruptionbudgets"], args.wave_size,
                               args.max_unavailable_gpus, lambda n: chosen(n.labels))
    if args.action == "plan":
        return _print_plan(waves, args.output)
    mover = Mover(NodeWrites(api, dry_run=args.dry_run == "server"), switches, policy, _say, args.timeout)
    try:
        return _run(mover, waves, nodes, pods, args) if args.action == "run" else _undo(mover, nodes, args.wave)
    except Stopped as exc:
        print(f"dra-bridge rollout: stopped: {exc}", file=sys.stderr)
        return 1


def _run(mover: Mover, waves: list[rollout.Wave], nodes: list[rollout.NodeView], pods: list[rollout.PodView],
         args) -> int:
    [wave] = [w for w in waves if w.number == args.wave] or [None]
    if wave is None:
        planned = ", ".join(str(w.number) for w in waves if not w.done) or "none"
        raise InputError("--wave", f"no wave {args.wave} (waves not done: {planned}; `rollout plan` lists them)")
    if wave.done:
        print(f"wave {wave.number}: done already ({', '.join(wave.nodes)})")
        return 0
    earlier = [w.number for w in waves if w.number < wave.number and not w.done]
    if earlier:
        raise InputError("--wave", f"wave {earlier[0]} is not done yet: waves run in order")
    if wave.blockers and not any(n.wave == wave.number for n in nodes):
        print(f"wave {wave.number} is blocked:", file=sys.stderr)
        for blocker in wave.blockers:
            print(f"  - {blocker}", file=sys.stderr)
        return 1
    dry = " (server-side dry run: nothing changes)" if mover.dry_run else ""
    print(f"wave {wave.number}: {', '.join(wave.nodes)}, {wave.gpus} GPU(s), {len(wave.pods)} GPU pod(s) to "
          f"evict{dry}")
    owners = {p.owner for p in wave.pods if p.owner}
    before = Counter(p.owner for p in pods if p.owner in owners and p.node)
    for name in wave.nodes:
        mover.move(name, wave.number)
    if mover.dry_run or not before:
        print(f"wave {wave.number}: done" + dry)
        return 0
    missing = _workloads_back(mover, before, args.timeout)
    if missing:
        print(f"wave {wave.number}: nodes moved, but not every workload is back after {args.timeout:g} s: "
              + ", ".join(f"{owner} {have} of {want} pod(s) bound" for owner, (have, want) in sorted(missing.items()))
              + ": look at their pending pods before the next wave", file=sys.stderr)
        return 1
    print(f"wave {wave.number}: done, every evicted workload's pods bound again")
    return 0


def _workloads_back(mover: Mover, before: Counter, timeout_s: float) -> dict[str, tuple[int, int]]:
    """Wait until each workload the wave evicted has as many GPU pods bound as before; what is
    still short when the time is up (a wave's GPUs come back before the next starts)."""
    deadline = time.monotonic() + timeout_s
    while True:
        bound = rollout.bound_by_owner(rollout_snapshot(mover.writes.api, ("pods",))["pods"])
        missing = {o: (bound[o], n) for o, n in before.items() if bound[o] < n}
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(mover.poll_s)


def _undo(mover: Mover, nodes: list[rollout.NodeView], number: int) -> int:
    moved = sorted(n.name for n in nodes if n.wave == number)
    if not moved:
        raise InputError("--wave", f"no node carries wave {number} ({rollout.WAVE})")
    print(f"undo wave {number}: {', '.join(moved)}" + (" (server-side dry run)" if mover.dry_run else ""))
    for name in moved:
        mover.undo(name)
    print(f"undo wave {number}: done")
    return 0


def _say(line: str) -> None:
    print(f"  {line}", flush=True)


def _print_plan(waves: list[rollout.Wave], output: str) -> int:
    if output == "json":
        sys.stdout.write(json.dumps({"waves": [{
            "wave": w.number, "done": w.done, "nodes": w.nodes, "gpus": w.gpus, "blockers": w.blockers,
            "notes": w.notes, "pods": [{"pod": p.key, "owner": p.owner, "comesBackOn": w.back.get(p.key, p.path),
                                        "belongsOn": p.path, "why": p.why} for p in w.pods]} for w in waves]},
            indent=2) + "\n")
    else:
        for w in waves:
            state = "done" if w.done else "BLOCKED" if w.blockers else "ready"
            print(f"wave {w.number} [{state}]: {', '.join(w.nodes)} ({w.gpus} GPUs, {len(w.pods)} GPU pods)")
            for pod in w.pods:
                back = w.back.get(pod.key)
                where = {"dra": "DRA", "plugin": "device plugin", "plugin, for now": "device plugin for now",
                         None: "no room"}[back] if not w.done else "moved"
                print(f"    {pod.key} ({pod.owner or 'bare pod'}) -> {where} ({pod.why})")
            for blocker in w.blockers:
                print(f"    blocked: {blocker}")
            for note in w.notes:
                print(f"    note: {note}")
        if not waves:
            print("no GPU node left on the device plugin")
    return 1 if any(w.blockers for w in waves if not w.done) else 0


def _status(nodes, pods, output: str) -> int:
    found = rollout.summary(nodes, pods)
    if output == "json":
        sys.stdout.write(json.dumps(found, indent=2) + "\n")
        return 0
    for side, label in (("plugin", "device plugin"), ("moving", "moving"), ("dra", "DRA")):
        names = found["nodes"][side]
        print(f"{label:14s} {len(names):3d} node(s) {found['gpus'][side]:5d} GPU(s)  {', '.join(names)}".rstrip())
    for what, count in found["pods"].items():
        print(f"pods {what}: {count}")
    return 0


def _label(text: str, flag: str, parts: int) -> tuple[str, ...]:
    """KEY=ON[,OFF] as the switch labels are given."""
    key, _, values = text.partition("=")
    found = [v for v in values.split(",") if v]
    if not key or len(found) != parts - 1:
        raise InputError(flag, f"expected KEY={'ON,OFF' if parts == 3 else 'VALUE'}, got {text!r}")
    return (key, *found)


def _selector(text: str | None):
    """A label selector of `k=v`, `k!=v`, `k` and `!k` terms, as a predicate over labels."""
    terms = []
    for term in (t.strip() for t in (text or "").split(",") if t.strip()):
        match = re.fullmatch(r"(!?)([\w./-]+)(?:(!=|==|=)([\w.-]*))?", term)
        if not match:
            raise InputError("--nodes", f"not a label selector term: {term!r}")
        terms.append(match.groups())

    def chosen(labels: dict) -> bool:
        for negated, key, operator, value in terms:
            if operator is None and (key in labels) == bool(negated):
                return False
            if operator in ("=", "==") and labels.get(key) != value:
                return False
            if operator == "!=" and labels.get(key) == value:
                return False
        return True
    return chosen


def _from_files(paths: list[str]) -> dict[str, list[dict]]:
    """An export (`kubectl get nodes,pods,... -A -o yaml`) as the snapshot a cluster gives."""
    objects: dict[str, list[dict]] = {kind: [] for kind in KINDS.values()}
    for path in paths:
        for _line, obj in read_objects(path):  # a `kind: List` comes as its items
            kind = KINDS.get(obj.get("kind", ""))
            if kind:
                objects[kind].append(obj)
    if not objects["nodes"]:
        raise InputError("-f", "no Node objects in the export (kubectl get nodes,pods,namespaces,"
                               "poddisruptionbudgets,resourceslices,resourceclaims,deviceclasses,resourcequotas -A -o yaml)")
    return objects
