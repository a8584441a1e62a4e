"""What the facts are read from in a cluster: the listings `audit` and `rollout` make (read-only)
for the one constructor (facts.cluster_facts). The IO edge of this layer: kube does the calls."""

from __future__ import annotations

from app import dra, kube
from app.common import BridgeError
from app.migration import KueueView, kueue_view_of

# What the path choice reads: devices, classes, the GPUs device plugins advertise, GPU quotas.
INVENTORY_PATHS = [("/apis/resource.k8s.io/v1", "resourceslices", "ResourceSlice"),
                   ("/apis/resource.k8s.io/v1", "deviceclasses", "DeviceClass"),
                   ("/api/v1", "nodes", "Node"), ("/api/v1", "resourcequotas", "ResourceQuota")]
CLAIM_PATHS = [("/apis/resource.k8s.io/v1", "resourceclaims", "ResourceClaim"),
               ("/apis/resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate")]


def _listed(api, paths, scope: str = "") -> list[dict]:
    out = []
    for prefix, resource, kind in paths:
        for item in kube.list_items(api, f"{prefix}{scope}/{resource}"):
            item.setdefault("kind", kind)  # a list's items carry neither
            item.setdefault("apiVersion", prefix.split("/", 2)[-1])
            out.append(item)
    return out


def live_inventory(api) -> dra.Inventory:
    return dra.inventory_from_objects([(0, item) for item in _listed(api, INVENTORY_PATHS)], "cluster")


def claim_objects(api, namespace: str | None = None) -> list[dict]:
    return _listed(api, CLAIM_PATHS, f"/namespaces/{namespace}" if namespace else "")


def read_kueue_view(api) -> tuple[KueueView | None, str | None]:
    """(Kueue's configuration as `serve` reads it, None where it cannot be read; what to say then:
    as serve then judges, only the policy's migration.kueueDeviceClasses count.)"""
    try:
        return kueue_view_of(kube.read_kueue(api)), None
    except BridgeError as exc:
        return None, f"{exc}: pods Kueue admits by itself are judged on migration.kueueDeviceClasses"
