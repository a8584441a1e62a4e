"""`dra-bridge rollout plan|run|undo|status`: move GPU nodes off the device plugin, wave by wave."""

from __future__ import annotations

import json
import sys

from app import kube
from app.application import read_kueue_view, rollout, snapshot_facts
from app.common import BridgeError, InputError
from app.kube import LeaseStore, NodeWrites, rollout_snapshot
from app.migration import OptIn
from app.policy import LabelSelector

from .inputs import read_inputs
from .servedpolicy import policy_for
from .output import as_yaml

KINDS = {"Node": "nodes", "Pod": "pods", "Namespace": "namespaces", "ResourceQuota": "resourcequotas",
         "PodDisruptionBudget": "poddisruptionbudgets", "ResourceSlice": "resourceslices",
         "ResourceClaim": "resourceclaims", "DeviceClass": "deviceclasses", "Job": "jobs",
         "Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets",
         "PersistentVolumeClaim": "persistentvolumeclaims", "PersistentVolume": "persistentvolumes",
         "PriorityClass": "priorityclasses"}


def run_rollout(args) -> int:
    switches = rollout.Switches(*_label(args.plugin_label, "--plugin-label", 3),
                                *_label(args.dra_label, "--dra-label", 2), driver=args.driver)
    opt_in = OptIn.parse(args.opt_in_label, "--opt-in-label")
    chosen = LabelSelector.parse(args.nodes, "--nodes")
    api = None
    if getattr(args, "filename", None):
        objects = _from_files(args.filename)
        policy = policy_for(args, None)
    else:
        found = kube.connect(args.kubeconfig, args.context, request_timeout=args.request_timeout)
        if found is None:
            raise BridgeError("rollout needs a cluster (--kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster)"
                              " or, for plan and status, -f FILE (an export)")
        api = found[0]
        try:
            objects = rollout_snapshot(api)
            objects["release"] = [kube.server_release(api)]  # its allocator's rules judge the moves
            view, note = read_kueue_view(api)  # what serve's path choice reads too
            if note:
                sys.stderr.write(f"dra-bridge: {note}\n")
            objects["kueue"] = [view]
            policy = policy_for(args, api)
        except Exception as exc:  # noqa: BLE001 - unreachable, TLS, DNS: one line naming the server
            if isinstance(exc, BridgeError):
                raise
            raise kube.unreachable(found[1], exc) from exc
    nodes = [v for v in (rollout.node_view(n, objects["resourceslices"], switches) for n in objects["nodes"]) if v]
    facts, fits = snapshot_facts(objects, policy)
    pods = rollout.pod_views(objects, policy, switches, facts, opt_in)
    if args.action == "status":
        return _status(nodes, pods, objects, policy, args.output)
    drain = rollout.Drain(args.force, args.delete_emptydir_data)
    undoing = args.wave if args.action == "undo" else getattr(args, "undo", None)
    if undoing is not None:
        undo = rollout.undo_wave(undoing, nodes, pods, objects, switches, drain, args.action == "plan")
        if args.action == "plan":
            return _print_plan([undo], args.output, rollout.hazards(nodes), undo=True)
    waves = rollout.plan_waves(nodes, pods, objects["poddisruptionbudgets"], args.wave_size,
                               args.max_unavailable_gpus, lambda n: chosen.matches(n.labels), drain, fits)
    if args.action == "plan":
        return _print_plan(waves, args.output, rollout.hazards(nodes))
    mover = rollout.Mover(NodeWrites(api, dry_run=args.dry_run == "server"), switches, policy, _say, args.timeout,
                  opt_in=opt_in, drain=drain)
    # One rollout at a time: a run or undo that writes holds the Lease while it acts (a dry run writes nothing).
    holding = None if mover.dry_run else rollout.lease.Holding(
        LeaseStore(api, args.lease_namespace, rollout.lease.NAME), kube.holder_identity(), args.force_takeover,
        dead=kube.gone_from_this_host)
    if holding is not None:
        refused = holding.take()
        if refused is not None:
            print(f"dra-bridge rollout: refused: {refused}", file=sys.stderr)
            return 1
    renewing = kube.renew_in_background(holding, lambda line: print(f"dra-bridge rollout: {line}", file=sys.stderr))
    try:
        return _run(mover, waves, nodes, args, holding) if args.action == "run" \
            else _undo(mover, nodes, undo, holding, args.nodes)
    except rollout.Stopped as exc:
        print(f"dra-bridge rollout: stopped: {exc}", file=sys.stderr)
        return 1
    finally:
        if holding is not None:
            renewing.set()
            holding.release()


def _check(holding) -> None:
    """Stop between nodes once the lease is someone else's."""
    if holding is not None and holding.lost:
        raise rollout.Stopped(holding.lost)


def _run(mover: rollout.Mover, waves: list[rollout.Wave], nodes: list[rollout.NodeView], args, holding=None) -> int:
    order = rollout.wave_to_run(waves, args.wave, nodes, args.nodes)
    wave = order.wave
    if order.done:
        print(f"wave {wave.number}: done already ({', '.join(wave.nodes)})")
        return 0
    if order.blocked:
        print(f"wave {wave.number} is blocked:", file=sys.stderr)
        for blocker in wave.blockers:
            print(f"  - {blocker}", file=sys.stderr)
        return 1
    dry = " (server-side dry run: nothing changes)" if mover.dry_run else ""
    print(f"wave {wave.number}: {', '.join(wave.nodes)}, {wave.gpus} GPU(s), {len(wave.pods)} GPU pod(s) to "
          f"evict{dry}")
    for name in wave.nodes:
        _check(holding)
        mover.move(name, wave.number)
    return _finished(mover, wave.nodes, f"wave {wave.number}", dry)


def _undo(mover: rollout.Mover, nodes: list[rollout.NodeView], plan: rollout.Wave, holding=None,
          nodes_flag: str | None = None) -> int:
    number, moved = plan.number, plan.nodes
    rollout.whole_wave(nodes_flag, nodes, moved, number)
    if plan.blockers:
        print(f"undo wave {number} refused, nothing done:", file=sys.stderr)
        for blocker in plan.blockers:
            print(f"  - {blocker}", file=sys.stderr)
        return 1
    dry = " (server-side dry run: nothing changes)" if mover.dry_run else ""
    print(f"undo wave {number}: {', '.join(moved)}{dry}")
    for name in moved:
        _check(holding)
        mover.undo(name)
    return _finished(mover, moved, f"undo wave {number}", dry)


def _finished(mover: rollout.Mover, names: list[str], what: str, dry: str) -> int:
    """Done only once every workload the nodes' evictions touched (a killed run's too) has its
    pods bound again; else exit 1 naming what is short."""
    short = mover.finish(names)
    if short:
        print(f"{what}: nodes {'moved back' if what.startswith('undo') else 'moved'}, but not every workload it "
              f"evicted is back after {mover.timeout_s:g} s: "
              + ", ".join(f"{w} {have}" for w, have in short.items())
              + ": look at their pending pods; the same command goes on waiting", file=sys.stderr)
        return 1
    print(f"{what}: done" + (dry or ", every evicted workload's pods bound again"))
    return 0


def _say(line: str) -> None:
    print(f"  {line}", flush=True)


BACK = {rollout.DRA_BACK: "DRA", rollout.DRA_AFTER: "DRA on its node, after the move",
        rollout.PLUGIN_BACK: "device plugin", rollout.PLUGIN_FOR_NOW: "device plugin for now",
        rollout.LOST: "lost (a bare pod, --force)", None: "no room"}


def _print_plan(waves: list[rollout.Wave], output: str, hazards: list[dict], undo: bool = False) -> int:
    """Exit 1 when a wave is blocked or stopped, or a node is in a hazard state."""
    if output in ("json", "yaml"):  # one content, two spellings (kubectl's)
        report = {"hazards": hazards, "undo": undo, "waves": [{
            "wave": w.number, "done": w.done, "stopped": w.stuck, "nodes": w.nodes, "gpus": w.gpus,
            "blockers": w.blockers, "notes": w.notes,
            "pods": [{"pod": p.key, "owner": p.owner, "comesBackOn": w.back.get(p.key),
                      "belongsOn": p.recreated_path if undo else p.path, "why": p.recreated_why if undo else p.why}
                     for p in w.pods]} for w in waves]}
        sys.stdout.write(json.dumps(report, indent=2) + "\n" if output == "json" else as_yaml(report))
    else:
        for w in waves:
            state = "done" if w.done else "STOPPED" if w.stuck else "BLOCKED" if w.blockers else "ready"
            print(f"{'undo ' if undo else ''}wave {w.number} [{state}]: {', '.join(w.nodes)} ({w.gpus} GPUs, "
                  f"{len(w.pods)} GPU pods{' to evict' if undo else ''})")
            for pod in w.pods:
                where = BACK[w.back.get(pod.key)] if not (w.done or w.stuck) else "moved"
                print(f"    {pod.key} ({pod.owner or 'bare pod'}) -> {where} "
                      f"({pod.recreated_why if undo else pod.why})")
            for blocker in w.blockers:
                print(f"    blocked: {blocker}")
            for note in w.notes:
                print(f"    note: {note}")
        for hazard in hazards:
            print(f"hazard: node {hazard['node']} is {hazard['state']}: {hazard['what']}")
        if not waves and not hazards:
            print("no GPU node left on the device plugin")
    return 1 if hazards or any(w.blockers or w.stuck for w in waves if not w.done) else 0


def _status(nodes, pods, objects: dict, policy, output: str) -> int:
    """Exit 1 when a GPU pod is in trouble or a GPU workload is short of pods."""
    workloads = [{"kind": kind, **o} for key, kind in (("deployments", "Deployment"), ("statefulsets", "StatefulSet"),
                                                       ("jobs", "Job")) for o in objects.get(key, [])]
    found = rollout.summary(nodes, pods, workloads, rollout.bound_by_owner(objects["pods"]), policy.migration,
                            named=None if output == "wide" else rollout.NAMED)
    if output in ("json", "yaml"):  # one content, two spellings
        sys.stdout.write(json.dumps(found, indent=2) + "\n" if output == "json" else as_yaml(found))
        return 1 if rollout.in_trouble(found) else 0
    for side, label in (("plugin", "device plugin"), ("moving", "moving"), ("dra", "DRA"), ("both", "BOTH (unsafe)"),
                        ("neither", "NEITHER"), ("unknown", "UNKNOWN")):
        names = found["nodes"][side]
        if names or side in ("plugin", "moving", "dra"):
            print(f"{label:14s} {len(names):3d} node(s) {found['gpus'][side]:5d} GPU(s)  {', '.join(names)}".rstrip())
    for what, count in found["pods"].items():
        named = found["named"].get(what)
        print(f"pods {rollout.POD_STATES[what]}: {count}" + (f" ({', '.join(named)}{', ...' if count > len(named) else ''})"
                                                            if named else ""))
    for workload, have in found["workloadsShort"].items():
        print(f"workload short: {workload}: {have}")
    for hazard in found["hazards"]:
        print(f"hazard: node {hazard['node']} is {hazard['state']}: {hazard['what']}")
    return 1 if rollout.in_trouble(found) else 0


def _label(text: str, flag: str, parts: int) -> tuple[str, ...]:
    """KEY=ON[,OFF] as the switch labels are given."""
    key, _, values = text.partition("=")
    found = [v for v in values.split(",") if v]
    if not key or len(found) != parts - 1:
        raise InputError(flag, f"expected KEY={'ON,OFF' if parts == 3 else 'VALUE'}, got {text!r}")
    return (key, *found)


def _from_files(paths: list[str]) -> dict[str, list[dict]]:
    """An export (`kubectl get nodes,pods,... -A -o yaml`) as the snapshot a cluster gives."""
    objects: dict[str, list[dict]] = {kind: [] for kind in KINDS.values()}
    for _source, found in read_inputs(paths):  # files, folders, `-`; a `kind: List` comes as its items
        for _line, obj in found:
            kind = KINDS.get(obj.get("kind", ""))
            if kind:
                objects[kind].append(obj)
    if not objects["nodes"]:
        raise InputError("-f", "no Node objects in the export (kubectl get nodes,pods,namespaces,"
                               "poddisruptionbudgets,resourceslices,resourceclaims,deviceclasses,resourcequotas -A -o yaml)")
    return objects
