"""`dra-bridge rollout plan|run|undo|status`: move GPU nodes off the device plugin, wave by wave."""

from __future__ import annotations

import getpass
import json
import os
import re
import socket
import sys
import threading

from app import kube
from app.application import read_kueue_view, rollout, snapshot_facts
from app.common import BridgeError, InputError, view_of
from app.kube import LeaseStore, NodeWrites, rollout_snapshot
from app.migration import OptIn

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
    chosen = _selector(args.nodes)
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
        undo = _undo_plan(undoing, nodes, pods, objects, switches, drain, args.action == "plan")
        if args.action == "plan":
            return _print_plan([undo], args.output, rollout.hazards(nodes), undo=True)
    waves = rollout.plan_waves(nodes, pods, objects["poddisruptionbudgets"], args.wave_size,
                               args.max_unavailable_gpus, lambda n: chosen(n.labels), drain, fits)
    if args.action == "plan":
        return _print_plan(waves, args.output, rollout.hazards(nodes))
    mover = rollout.Mover(NodeWrites(api, dry_run=args.dry_run == "server"), switches, policy, _say, args.timeout,
                  opt_in=opt_in, drain=drain)
    # One rollout at a time: a run or undo that writes holds the Lease while it acts (a dry run writes nothing).
    holding = None if mover.dry_run else rollout.lease.Holding(
        LeaseStore(api, args.lease_namespace, rollout.lease.NAME), _identity(), args.force_takeover, dead=_dead_here)
    if holding is not None:
        refused = holding.take()
        if refused is not None:
            print(f"dra-bridge rollout: refused: {refused}", file=sys.stderr)
            return 1
    renewing = _renew_in_background(holding)
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


def _identity() -> str:
    """Who holds the lease, as another operator reads it: user, host and process."""
    return f"{getpass.getuser()}@{socket.gethostname()} pid {os.getpid()}"


def _dead_here(holder: str) -> bool:
    """A holder of this machine whose process is gone (a command killed here): its lease is free."""
    match = re.fullmatch(r".+@(?P<host>[^ ]+) pid (?P<pid>\d+)", holder)
    if not match or match["host"] != socket.gethostname():
        return False
    try:
        os.kill(int(match["pid"]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive, someone else's
    return False


def _renew_in_background(holding) -> threading.Event:
    """Renew the lease every third of its duration until the event is set."""
    done = threading.Event()
    if holding is None:
        return done

    def loop():
        while not done.wait(holding.duration_s / 3):
            try:
                if not holding.renew():
                    return
            except BridgeError as exc:  # the API hiccuped: the next round tries again
                print(f"dra-bridge rollout: could not renew Lease {rollout.lease.NAME}: {exc}", file=sys.stderr)
    threading.Thread(target=loop, name="lease", daemon=True).start()
    return done


def _only_chosen(selector: str | None, nodes: list[rollout.NodeView], names: list[str], number: int) -> None:
    """--nodes means those nodes: a wave (recorded on its nodes by an earlier run) with a node the
    selector leaves out is refused whole, nothing done."""
    if not selector:
        return
    chosen = _selector(selector)
    left_out = [n.name for n in nodes if n.name in names and not chosen(n.labels)]
    if left_out:
        raise InputError("--nodes", f"wave {number} is {', '.join(names)}, and --nodes {selector} leaves out "
                                    f"{', '.join(left_out)}: nothing was done. Continue that wave without --nodes "
                                    "(or wait for whoever runs it); a new wave for other nodes comes after it")


def _check(holding) -> None:
    """Stop between nodes once the lease is someone else's."""
    if holding is not None and holding.lost:
        raise rollout.Stopped(holding.lost)


def _run(mover: rollout.Mover, waves: list[rollout.Wave], nodes: list[rollout.NodeView], args, holding=None) -> int:
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
    _only_chosen(args.nodes, nodes, wave.nodes, wave.number)
    dry = " (server-side dry run: nothing changes)" if mover.dry_run else ""
    print(f"wave {wave.number}: {', '.join(wave.nodes)}, {wave.gpus} GPU(s), {len(wave.pods)} GPU pod(s) to "
          f"evict{dry}")
    for name in wave.nodes:
        _check(holding)
        mover.move(name, wave.number)
    return _finished(mover, wave.nodes, f"wave {wave.number}", dry)


def _undo_plan(number: int, nodes, pods, objects: dict, switches, drain, planning: bool) -> rollout.Wave:
    """Wave `number` taken back, judged before anything is done (an undo under way: only whether
    the device plugin can start again; `plan --undo` judges it whole)."""
    if not any(n.wave == number for n in nodes):
        raise InputError("--undo" if planning else "--wave", f"no node carries wave {number} ({rollout.WAVE})")
    records = {view_of(n).name: rollout.MoveRecord.of(n) for n in objects["nodes"]}
    started = any(r is not None and r.wave == number and r.step.undoing for r in records.values())
    return rollout.plan_undo(number, nodes, pods, records, objects.get("daemonsets", []),
                             objects["poddisruptionbudgets"], switches, drain, room=planning or not started)


def _undo(mover: rollout.Mover, nodes: list[rollout.NodeView], plan: rollout.Wave, holding=None,
          nodes_flag: str | None = None) -> int:
    number, moved = plan.number, plan.nodes
    _only_chosen(nodes_flag, nodes, moved, number)
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
    for _source, found in read_inputs(paths):  # files, folders, `-`; a `kind: List` comes as its items
        for _line, obj in found:
            kind = KINDS.get(obj.get("kind", ""))
            if kind:
                objects[kind].append(obj)
    if not objects["nodes"]:
        raise InputError("-f", "no Node objects in the export (kubectl get nodes,pods,namespaces,"
                               "poddisruptionbudgets,resourceslices,resourceclaims,deviceclasses,resourcequotas -A -o yaml)")
    return objects
