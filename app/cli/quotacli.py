"""`dra-bridge quota`: the DRA side of GPU budgets (migration.budgets) from files or the cluster:
ResourceQuotas to apply and the Kueue Configuration part to merge, as YAML or a diff."""

from __future__ import annotations

import difflib
import sys

import yaml

from app import kube
from app.common import BridgeError, dump_documents, metadata_of, view_of
from app.migration import (KueueView, clean_object, extended_resources, kueue_configuration, kueue_in_objects,
                           kueue_mappings, kueue_view_of, one_budget_classes, quota_changes, unserved_versions)
from app.common import release as releases

from .servedpolicy import policy_for
from .inputs import flag_release, read_some_inputs, refuse_without_extended_resources
from .output import as_json_list, clip

KINDS = {"ResourceQuota": "/api/v1/resourcequotas", "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses"}
API_VERSIONS = {"ResourceQuota": "v1", "DeviceClass": "resource.k8s.io/v1"}


def _from_files(paths: list[str]) -> tuple[dict[str, list[dict]], KueueView | None]:
    found: dict[str, list[dict]] = {kind: [] for kind in [*KINDS, "ClusterQueue"]}
    every = [obj for _source, objects in read_some_inputs(paths) for _line, obj in objects]
    for obj in every:
        if obj.get("kind") in found:
            found[obj["kind"]].append(obj)
    return found, kueue_in_objects(every)


def _from_cluster(args) -> tuple[dict[str, list[dict]], KueueView | None]:
    connected = kube.connect(args.kubeconfig, args.context, timeout_retries=False,
                             request_timeout=args.request_timeout)
    if connected is None:
        raise BridgeError("quota needs -f FILE or a cluster: --kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster; "
                          "none was found")
    args.release = flag_release(args, kube.server_release(connected[0]))
    args.rules = policy_for(args, connected[0]).migration
    # List items carry no apiVersion or kind: what is proposed from them must, for `kubectl apply`.
    found = {kind: [{"apiVersion": API_VERSIONS[kind], "kind": kind, **item}
                    for item in kube.list_items(connected[0], path)] for kind, path in KINDS.items()}
    found["ClusterQueue"] = kube.list_kueue(connected[0], "clusterqueues")
    # Without a queue nothing is mapped; where the ConfigMap is absent every mapping is proposed.
    return found, kueue_view_of(kube.read_kueue(connected[0])) if found["ClusterQueue"] else None


def run_quota(args) -> int:
    found, view = _from_files(args.filename) if args.filename else _from_cluster(args)
    rules = getattr(args, "rules", None) or policy_for(args, None).migration
    release = getattr(args, "release", None) or flag_release(args)
    sys.stderr.write(f"judged against: {release.describe()}\n")
    if args.budget == "one":
        refuse_without_extended_resources(release, "--budget one")
    # The classes as the release keeps them: without extendedResourceName no class counts a resource.
    classes = {view_of(c).name: releases.strip(c, release, "DeviceClass")[0] for c in found["DeviceClass"]}
    proposed_classes, class_notes = ([], []) if args.budget == "split" else \
        one_budget_classes(found["ResourceQuota"], classes, rules)
    diffs = [(f"DeviceClass {metadata_of(c)['name']}", classes[metadata_of(c)["name"]], c) for c in proposed_classes]
    for changed in proposed_classes:  # the quota keys are judged as they will be once applied
        classes[metadata_of(changed)["name"]] = changed
    for note in class_notes:
        sys.stderr.write(f"{note}\n")
    changes = quota_changes(found["ResourceQuota"], rules, extended_resources(classes))
    mappings, kueue_notes = kueue_mappings(found["ClusterQueue"], rules, view.mappings if view else None)
    old = unserved_versions(found["ClusterQueue"])
    kueue_notes += [old] if old else []
    configuration = kueue_configuration(mappings, view) if found["ClusterQueue"] else None
    for change in changes:
        for note in change.notes:
            sys.stderr.write(f"ResourceQuota {change.name}: {note}\n")
    for note in kueue_notes:
        sys.stderr.write(f"Kueue: {note}\n")
    proposed = proposed_classes + [c.proposed for c in changes if c.proposed is not None]
    if args.output == "diff":
        diffs += [(f"ResourceQuota {c.name}", c.quota, c.proposed) for c in changes if c.proposed is not None]
        for label, before, after in diffs:
            sys.stdout.writelines(difflib.unified_diff(
                yaml.safe_dump(clean_object(before), sort_keys=False).splitlines(True),
                yaml.safe_dump(after, sort_keys=False).splitlines(True), label, f"{label} (proposed)"))
    elif args.output in ("table", "wide"):
        _table(proposed_classes, changes, configuration, class_notes + kueue_notes, args.output == "wide")
    else:
        documents = proposed + ([configuration] if configuration else [])
        if documents:
            sys.stdout.write(dump_documents(documents) if args.output == "yaml" else as_json_list(documents))
    if not changes and not found["ClusterQueue"]:
        sys.stderr.write("no ResourceQuota or ClusterQueue limits a legacy GPU resource\n")
    return 1 if proposed or configuration else 0


def _table(classes: list[dict], changes, configuration: dict | None, notes: list[str], wide: bool) -> None:
    """One row per object proposed or judged: what changes (the DRA keys a quota gains) and why."""
    rows = [("DeviceClass", metadata_of(c)["name"], "extendedResourceName " + str(c["spec"].get("extendedResourceName")),
             "") for c in classes]
    for change in changes:
        before = (change.quota.get("spec") or {}).get("hard") or {}
        after = ((change.proposed or {}).get("spec") or {}).get("hard") or {}
        added = ", ".join(f"{k}={v}" for k, v in after.items() if k not in before) or "none"
        rows.append(("ResourceQuota", change.name, f"adds {added}", "; ".join(change.notes)))
    if configuration is not None:
        rows.append(("Configuration", "kueue-manager-config", "deviceClassMappings", "; ".join(notes)))
    width = max([len(f"{kind}/{name}") for kind, name, _c, _d in rows] + [6])
    changed = max([len(change) for _k, _n, change, _d in rows] + [6])
    sys.stdout.write(f"{'OBJECT':{width}s} {'CHANGE':{changed}s} DETAIL\n")
    for kind, name, change, detail in rows:
        sys.stdout.write(f"{kind + '/' + name:{width}s} {change:{changed}s} {detail if wide else clip(detail, 120)}\n")
