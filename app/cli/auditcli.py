"""`dra-bridge audit`: which pods and workloads still use legacy GPU resources, and what then.

Reads a live cluster (read-only list calls) or files; reports per object the migration it would
get and whether the inventory satisfies it, as a table, JSON, or wgpolicyk8s.io PolicyReports.
"""

from __future__ import annotations

import json
import sys
import time

import urllib3

from app import dra, kube
from app.application.engine import report as policy_report
from app.application import (ClusterFacts, Outcome, admin_access, claim_objects, rollout, cluster_facts,
                             inventory_source, read_kueue_view, scan, unmigrated)
from app.application.manifests import ObjectReport, ReportStatus, exit_status, kueue_of_inputs, namespace_labels, \
    objects_of, plan_objects
from app.common import BridgeError, InputError, by_kind, controller_ref, dump_documents, labels_by_name, view_of
from app.common import release as releases
from app.migration import (OptIn, extended_resources, legacy_resources, pod_templates, queue_use, quota_use,
                           unserved_versions)

from .inputs import choose_inventory, flag_release, read_some_inputs
from .servedpolicy import policy_for
from .output import as_yaml, clip

# Workloads whose pod templates we read; bare pods are audited, pods owned by these are not.
WORKLOADS = [("/api/v1", "pods", "Pod"), ("/apis/apps/v1", "deployments", "Deployment"),
             ("/apis/apps/v1", "statefulsets", "StatefulSet"), ("/apis/apps/v1", "daemonsets", "DaemonSet"),
             ("/apis/apps/v1", "replicasets", "ReplicaSet"), ("/apis/batch/v1", "jobs", "Job"),
             ("/apis/batch/v1", "cronjobs", "CronJob"),
             ("/api/v1", "resourcequotas", "ResourceQuota")]  # GPU quotas that stop counting migrated pods
def _controlled(obj: dict) -> bool:
    return controller_ref(obj) is not None


def live_objects(api, namespace: str | None = None) -> tuple[list[tuple[str, list[tuple[int, dict]]]], list[dict]]:
    """(what is audited: bare pods and workloads, the pods controllers made)."""
    out, controlled = [], []
    scope = f"/namespaces/{namespace}" if namespace else ""
    for prefix, resource, kind in WORKLOADS:
        items = []
        for item in kube.list_items(api, f"{prefix}{scope}/{resource}"):
            item.setdefault("kind", kind)
            if not _controlled(item):
                items.append(item)
            elif kind == "Pod":
                controlled.append(item)
        out.append((f"cluster:{resource}", [(0, i) for i in items]))
    return out, controlled


def priority_classes(api) -> list[dict]:
    return [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", **item}
            for item in kube.list_items(api, "/apis/scheduling.k8s.io/v1/priorityclasses")]


def unmigrated_pods(pods: list[dict], policy, facts: ClusterFacts, namespaces: dict, opt_in) -> list[dict]:
    """Running pods of controllers that still hold legacy GPU requests the webhook would rewrite
    now (application.unmigrated, as `serve` counts them)."""
    out = []
    for pod in unmigrated(pods, namespaces, policy, facts, opt_in):
        view = view_of(pod)
        owner = view.owner or {}
        out.append({"namespace": view.namespace, "name": view.name,
                    "owner": f"{owner.get('kind', '?')}/{owner.get('name', '?')}"})
    return out


def _unmigrated_line(pods: list[dict]) -> str:
    owners: dict[str, int] = {}
    for p in pods:
        kind, _, name = p["owner"].partition("/")
        key = f"{kind} {p['namespace']}/{name}"
        owners[key] = owners.get(key, 0) + 1
    listed = ", ".join(f"{k} ({n})" for k, n in sorted(owners.items(), key=lambda kv: -kv[1])[:5])
    more = f" and {len(owners) - 5} more" if len(owners) > 5 else ""
    return (f"{len(pods)} running pod(s) still hold legacy GPU requests the webhook would rewrite now (admitted "
            f"while it was unreachable, or before it served them): {listed}{more}; recreate them to migrate "
            "(kubectl rollout restart)\n")


def _from_cluster(found, read, *args):
    """`read(api, *args)`; a cluster it cannot reach is one line naming the server and context
    (an error status is already one line: kube.list_items names the list and the status)."""
    api, target = found
    try:
        return read(api, *args)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise kube.unreachable(target, exc) from exc


def _row(report: ObjectReport) -> dict:
    return {"namespace": report.namespace or "", "kind": report.kind, "name": report.name, "status": report.status,
            "path": report.path, "templates": report.templates, "reasons": report.reasons, "source": report.source}


def policy_reports(rows: list[dict], checked: bool, violations: list | None = None,
                   audited: list[str] = ()) -> list[dict]:
    """The migration status of each workload, and a result per admin-rule violation found.
    audited: every namespace judged gets its report, an empty one where nothing is left, so
    applying the output replaces a report that has become clean; never an empty output."""
    now = {"seconds": int(time.time()), "nanos": 0}
    by_namespace: dict[str, list[dict]] = policy_report.results(violations or [], now)
    for namespace in audited:
        by_namespace.setdefault(namespace, [])
    for row in rows:
        # native: DRA serves it as it is; rewrite: admission migrates it; legacy and the rest: work left.
        # quota: a Kueue quota on GPUs, reported for what it means to migrated pods.
        result = "pass" if row["path"] == Outcome.NATIVE else "skip" if row["path"] == "quota" else \
            "warn" if row["status"] == ReportStatus.MIGRATED else "fail"
        by_namespace.setdefault(row["namespace"], []).append({
            "policy": "dra-bridge/legacy-gpu-resources", "rule": "migrate-to-dra", "result": result,
            "severity": "medium" if result == "warn" else "high", "source": "dra-bridge", "timestamp": now,
            "category": "DRA migration",
            "message": "; ".join(row["reasons"])[:1000] or row["status"],
            "resources": [{"kind": row["kind"], "name": row["name"], "namespace": row["namespace"]}],
            "properties": {"status": row["status"], "path": row["path"], "templates": ",".join(row["templates"]),
                           "inventoryChecked": str(checked).lower()},
        })
    return policy_report.reports(by_namespace or {"": []})  # nothing audited: one empty cluster report


def _asked(objects: list[dict], policy) -> set[str]:
    """The legacy GPU resources the objects' pod templates ask for."""
    return {resource for obj in objects for _path, holder in pod_templates(obj)
            for _container, resource in legacy_resources(holder.get("spec") or {}, policy.migration)}


def run_audit(args) -> int:
    opt_in = OptIn.parse(args.opt_in_label, "--opt-in-label")
    if args.write_reports and (args.output != "policyreport" or args.filename):
        raise InputError("--write-reports", "only with -o policyreport on a cluster (not -f): it writes the "
                                            "reports of what it read there")
    found = None
    if not args.filename or args.inventory == "live":
        found = kube.connect(args.kubeconfig, args.context, timeout_retries=False,
                             request_timeout=args.request_timeout)
        if found is None:
            raise BridgeError("audit needs -f FILE or a cluster: --kubeconfig, $KUBECONFIG, ~/.kube/config "
                              "or in-cluster; none was found")
    policy = _from_cluster(found, lambda api: policy_for(args, api)) if found else policy_for(args, None)
    controlled: list[dict] = []
    if args.filename:
        inputs = read_some_inputs(args.filename)
        namespaces = namespace_labels(inputs)
    else:
        inputs, controlled = _from_cluster(found, live_objects, args.namespace)
        namespaces = _from_cluster(found, lambda api: labels_by_name(kube.list_items(api, "/api/v1/namespaces")))
    inventory, where = choose_inventory(args.inventory, lambda: found, args)
    ix = dra.build_index(inventory) if inventory is not None else None
    release = inventory.release if inventory is not None else \
        flag_release(args, _from_cluster(found, kube.server_release) if not args.filename else None)
    sys.stderr.write(f"judged against: {inventory_source(ix, where, release)}\n")
    # Objects that name no namespace land in the default one, as kubectl would put them.
    if args.filename:
        kueue = kueue_of_inputs(inputs)
    else:
        kueue, note = _from_cluster(found, read_kueue_view)
        if note:
            sys.stderr.write(f"dra-bridge: {note}\n")
    existing = objects_of(inputs) + controlled
    classes = [o for o in existing if o.get("kind") == "DeviceClass"] or \
        ([] if args.filename else _from_cluster(found, lambda api: kube.list_items(api, DEVICE_CLASSES)))
    if not args.filename:
        existing += _from_cluster(found, claim_objects, args.namespace)
        existing += _from_cluster(found, priority_classes)  # what preemption is decided by
    _default_namespace(existing, args.namespace or "default")
    facts = cluster_facts(policy, ix, source=inventory_source(ix, where, release), objects=existing, kueue=kueue,
                          classes=classes, namespaces=namespaces, claims_known=True if not args.filename else None,
                          release=release)
    result = plan_objects(inputs, policy, args.namespace or "default", facts, opt_in)
    rows = [_row(r) for r in result.reports if not r.quiet]
    running = unmigrated_pods(controlled, policy, facts, namespaces, opt_in) if controlled else []
    # GPU nodes served twice or by neither side, as `rollout status` names them (the inventory's view).
    hazards = rollout.state_hazards(rollout.index_states(ix)) if ix is not None else []
    violations = scan.scan(existing, policy, ix, namespaces or {})
    if not args.filename:
        existing += _from_cluster(found, kube.list_queues, args.namespace)
    budgets, queues = _budgets(existing, classes, policy, kueue)
    for note in filter(None, [kueue.refused if kueue else None, unserved_versions(existing)]):
        sys.stderr.write(f"Kueue: {note}\n")
    old_dra = releases.old_dra_objects(existing)
    if old_dra:
        sys.stderr.write(f"DRA: {old_dra}\n")
    exposure = admin_access(namespaces or {}, existing, policy)
    native = dra.native_gaps({view_of(c).name: c for c in classes}, _asked(objects_of(inputs) + controlled, policy))
    if args.output in ("json", "yaml"):  # one content, two spellings (kubectl's)
        report = {"inventoryChecked": ix is not None, "objects": rows, "unmigratedPods": running,
                  "nodeHazards": hazards,
                  "violations": [{"kind": v.kind, "namespace": v.namespace, "name": v.name, "rule": v.violation.rule,
                                  "actions": list(v.violation.actions), "message": v.violation.message}
                                 for v in violations],
                  "budgets": [_budget_json(b) for b in budgets],
                  "queueBudgets": [vars(q) | {"problem": q.problem} for q in queues],
                  "adminAccess": exposure.as_json(), "nativePath": native}
        sys.stdout.write(json.dumps(report, indent=2) + "\n" if args.output == "json" else as_yaml(report))
    elif args.output == "policyreport":
        audited = [args.namespace] if args.namespace and not args.filename else sorted(namespaces or {})
        reports = policy_reports(rows, ix is not None, violations, audited)
        if args.write_reports:  # the findings are in the reports: a run that wrote them all succeeded
            for line in _from_cluster(found, kube.write_reports, reports, args.request_timeout):
                sys.stdout.write(f"wrote {line}\n")
            return 0
        sys.stdout.write(dump_documents(reports))
    else:
        width = max([len(f"{r['kind']}/{r['name']}") for r in rows] + [6])
        sys.stdout.write(f"{'NAMESPACE':16s} {'OBJECT':{width}s} {'STATUS':16s} {'PATH':14s} DETAIL\n")
        wide = args.output == "wide"
        for r in rows:
            detail = "; ".join(r["reasons"] if wide else r["reasons"][:2])
            sys.stdout.write(f"{r['namespace'][:16]:16s} {r['kind'] + '/' + r['name']:{width}s} {r['status']:16s} "
                             f"{r['path']:14s} {detail if wide else clip(detail, 140)}\n")
        sys.stdout.write(f"{len(rows)} object(s) use legacy GPU resources"
                         f"{'' if ix is not None else ' (satisfiability not checked: pass --inventory)'}\n")
        for line in native:
            sys.stdout.write(f"native path: {line}\n")
        for hazard in hazards:
            sys.stdout.write(f"hazard: node {hazard['node']} is {hazard['state']}: {hazard['what']}\n")
        for line in exposure.lines():
            sys.stdout.write(line + "\n")
        if running:
            sys.stdout.write(_unmigrated_line(running))
        for v in violations[:20] if wide else violations[:5]:
            sys.stdout.write(f"violation: {v.kind} {v.namespace}/{v.name}: {clip(v.violation.message, 300)}\n")
        if violations:
            sys.stdout.write(f"{len(violations)} existing object(s) break the policy's rules (-o policyreport "
                             "lists each)\n")
        for b in budgets:
            sys.stdout.write(f"budget: ResourceQuota {b.namespace}/{b.quota} {b.key} {b.limit}: device plugin "
                             f"{b.plugin}, DRA {b.dra}" + (f", escaped {b.escaped}" if b.escaped else "")
                             + (f", counted twice {b.twice}\n" if b.twice else "\n"))
            if b.problem:
                sys.stdout.write(f"escaped budget: {b.problem}\n")
            if b.twice_problem:
                sys.stdout.write(f"budget counted twice: {b.twice_problem}\n")
            if b.over_problem:
                sys.stdout.write(f"over budget: {b.over_problem}\n")
        for q in queues:
            reserved = "" if q.reserved is None else f", Kueue reserves {q.reserved}"
            sys.stdout.write(f"budget: ClusterQueue {q.queue} {q.resource} {q.quota}: device plugin {q.plugin}, "
                             f"DRA {q.dra}{reserved}" + (f", escaped {q.escaped}\n" if q.escaped else "\n"))
            if q.problem:
                sys.stdout.write(f"escaped budget: {q.problem}\n")
    budget_broken = any(b.escaped or b.twice or b.over for b in budgets) or any(q.escaped for q in queues)
    return max(exit_status([r["status"] for r in rows]), 1 if violations or budget_broken or hazards or old_dra else 0)


DEVICE_CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"


def _budget_json(use) -> dict:
    return vars(use) | {"problem": use.problem, "twice": use.twice, "twiceProblem": use.twice_problem,
                        "over": use.over, "overProblem": use.over_problem}


def _budgets(objects: list[dict], classes: list[dict], policy, kueue) -> tuple[list, list]:
    """Each GPU quota's use on both sides (migration.continuity), and each ClusterQueue's against
    Kueue's count (migration.queue_budgets), from what was read."""
    found = by_kind(objects)
    extended = extended_resources({view_of(c).name: c for c in classes})
    pods, claims = found.get("Pod", []), found.get("ResourceClaim", [])
    return (quota_use(found.get("ResourceQuota", []), pods, claims, policy.migration, extended),
            queue_use(found.get("ClusterQueue", []), found.get("LocalQueue", []), found.get("Workload", []), pods,
                      claims, policy.migration, extended, kueue, policy.migration.kueueDeviceClasses))


def _default_namespace(objects: list[dict], namespace: str) -> None:
    """Objects that name no namespace are in `namespace`, as kubectl would put them."""
    for obj in objects:
        meta = obj.setdefault("metadata", {}) if isinstance(obj.get("metadata", {}), dict) else {}
        meta.setdefault("namespace", namespace)
