"""`dra-bridge quota`: the DRA side of GPU budgets (migration.budgets) from files or the cluster:
ResourceQuotas to apply and the Kueue Configuration part to merge, as YAML or a diff."""

from __future__ import annotations

import difflib
import sys

import yaml

from app import kube
from app.common import BridgeError, dump_documents, metadata_of
from app.migration import extended_resources, kueue_configuration, kueue_mappings, quota_changes
from app.policy import load_policy

from .inputs import read_some_inputs

KINDS = {"ResourceQuota": "/api/v1/resourcequotas", "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
         "ClusterQueue": "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"}


def _from_files(paths: list[str]) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    for _source, objects in read_some_inputs(paths):
        for _line, obj in objects:
            if obj.get("kind") in found:
                found[obj["kind"]].append(obj)
    return found


def _from_cluster(args) -> dict[str, list[dict]]:
    connected = kube.connect(args.kubeconfig, args.context, timeout_retries=False)
    if connected is None:
        raise BridgeError("quota needs -f FILE or a cluster: --kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster; "
                          "none was found")
    found = {}
    for kind, path in KINDS.items():
        try:
            found[kind] = kube.list_items(connected[0], path)
        except BridgeError:
            if kind != "ClusterQueue":
                raise
            found[kind] = []  # Kueue is not installed: no queue to map
    return found


def run_quota(args) -> int:
    rules = load_policy(args.policy).migration
    found = _from_files(args.filename) if args.filename else _from_cluster(args)
    classes = {metadata_of(c).get("name", ""): c for c in found["DeviceClass"]}
    changes = quota_changes(found["ResourceQuota"], rules, extended_resources(classes))
    mappings, kueue_notes = kueue_mappings(found["ClusterQueue"], rules)
    for change in changes:
        for note in change.notes:
            sys.stderr.write(f"ResourceQuota {change.name}: {note}\n")
    for note in kueue_notes:
        sys.stderr.write(f"Kueue: {note}\n")
    proposed = [c.proposed for c in changes if c.proposed is not None]
    if args.output == "diff":
        for change in changes:
            if change.proposed is not None:
                sys.stdout.writelines(difflib.unified_diff(
                    yaml.safe_dump(change.quota, sort_keys=False).splitlines(True),
                    yaml.safe_dump(change.proposed, sort_keys=False).splitlines(True),
                    f"ResourceQuota {change.name}", f"ResourceQuota {change.name} (proposed)"))
    else:
        documents = proposed + ([kueue_configuration(mappings)] if mappings else [])
        if documents:
            sys.stdout.write(dump_documents(documents))
    if not changes and not found["ClusterQueue"]:
        sys.stderr.write("no ResourceQuota or ClusterQueue limits a legacy GPU resource\n")
    return 1 if proposed or mappings else 0
