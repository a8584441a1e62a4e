"""`dra-bridge quota`: the DRA side of GPU budgets (migration.budgets) from files or the cluster:
ResourceQuotas to apply and the Kueue Configuration part to merge, as YAML or a diff."""

from __future__ import annotations

import difflib
import sys

import orjson
import yaml
from kubernetes.client.exceptions import ApiException

from app import kube
from app.common import BridgeError, dump_documents, metadata_of
from app.migration import (configured_mappings, extended_resources, kueue_configuration, kueue_mappings,
                           quota_changes)
from app.policy import load_policy

from .inputs import read_some_inputs

KINDS = {"ResourceQuota": "/api/v1/resourcequotas", "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
         "ClusterQueue": "/apis/kueue.x-k8s.io/v1beta1/clusterqueues"}


KUEUE_CONFIG = ("kueue-system", "kueue-manager-config", "controller_manager_config.yaml")


def _kueue_configuration(obj: dict) -> dict | None:
    """Kueue's Configuration: itself, or inside its ConfigMap (kueue-manager-config)."""
    if obj.get("kind") == "Configuration":
        return obj
    if obj.get("kind") == "ConfigMap" and metadata_of(obj).get("name") == KUEUE_CONFIG[1]:
        text = (obj.get("data") or {}).get(KUEUE_CONFIG[2])
        try:
            found = yaml.safe_load(text) if isinstance(text, str) else None
        except yaml.YAMLError as exc:
            raise BridgeError(f"ConfigMap {KUEUE_CONFIG[1]}: {KUEUE_CONFIG[2]} is not YAML: {exc}") from None
        return found if isinstance(found, dict) else None
    return None


def _from_files(paths: list[str]) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {kind: [] for kind in [*KINDS, "Configuration"]}
    for _source, objects in read_some_inputs(paths):
        for _line, obj in objects:
            configuration = _kueue_configuration(obj)
            if configuration is not None:
                found["Configuration"].append(configuration)
            elif obj.get("kind") in found:
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
    namespace, name, _key = KUEUE_CONFIG
    found["Configuration"] = []
    if found["ClusterQueue"]:
        try:
            configmap = orjson.loads(kube.raw_get(connected[0], f"/api/v1/namespaces/{namespace}/configmaps/{name}").data)
        except ApiException as exc:
            if exc.status != 404:
                raise BridgeError(f"get ConfigMap {namespace}/{name}: API answered {exc.status}") from None
            configmap = {}  # Kueue configured elsewhere: every mapping is proposed
        found["Configuration"] = [c for c in [_kueue_configuration(configmap)] if c is not None]
    return found


def run_quota(args) -> int:
    rules = load_policy(args.policy).migration
    found = _from_files(args.filename) if args.filename else _from_cluster(args)
    classes = {metadata_of(c).get("name", ""): c for c in found["DeviceClass"]}
    changes = quota_changes(found["ResourceQuota"], rules, extended_resources(classes))
    configured = {cls: res for c in found["Configuration"] for cls, res in configured_mappings(c).items()}
    mappings, kueue_notes = kueue_mappings(found["ClusterQueue"], rules, configured)
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
