"""What Nodes and ResourceQuotas say about devices outside DRA (device plugins, quota keys). Pure."""

from __future__ import annotations

from . import vocabulary
from .quantity import parse_quantity


def extended_allocatable(node: dict, cordoned_too: bool = False) -> dict[str, int]:
    """The extended resources (a domain-prefixed name outside kubernetes.io) a Node takes new
    pods for: its status.allocatable, as a device plugin advertises it; none while cordoned,
    unless `cordoned_too` (what the node has, whether it takes pods now or not)."""
    if (node.get("spec") or {}).get("unschedulable") and not cordoned_too:
        return {}
    allocatable = (node.get("status") or {}).get("allocatable")
    out: dict[str, int] = {}
    for name, value in allocatable.items() if isinstance(allocatable, dict) else ():
        if not isinstance(name, str) or "/" not in name or name.split("/")[0].endswith("kubernetes.io"):
            continue
        try:
            count = int(parse_quantity(value))
        except (ValueError, TypeError, ArithmeticError):
            continue  # the kubelet wrote it; a value we cannot read advertises nothing
        if count > 0:
            out[name] = count
    return out


def leaving_dra(node: dict) -> bool:
    """A rollout is taking it back to the device plugin and NVIDIA's plugin is still there: no
    pod, not even one that tolerates the cordon, is to get a claim there (it could not be
    unprepared once that plugin has gone)."""
    annotations = (node.get("metadata") or {}).get("annotations")
    return isinstance(annotations, dict) and annotations.get(vocabulary.ROLLOUT_STEP) in vocabulary.ROLLOUT_LEAVING_STEPS


def not_ready(node: dict) -> bool:
    """Its kubelet reports it not Ready (False or Unknown): what its status says is stale. A node
    with no Ready condition at all (an export of a fresh or fake node) is taken as it reads."""
    conditions = (node.get("status") or {}).get("conditions")
    ready = [c for c in conditions if isinstance(c, dict) and c.get("type") == "Ready"] \
        if isinstance(conditions, list) else []
    return bool(ready) and ready[-1].get("status") != "True"


def device_quota(quota: dict) -> tuple[str, str, dict[str, str]] | None:
    """(namespace, name, hard limits on extended resources and DeviceClasses) of a ResourceQuota;
    None when it limits neither (the rest of a quota never decides a path)."""
    meta = quota.get("metadata") if isinstance(quota.get("metadata"), dict) else {}
    hard = (quota.get("spec") or {}).get("hard") if isinstance(quota.get("spec"), dict) else None
    kept = {k: str(v) for k, v in hard.items() if isinstance(k, str) and "/" in k and (
        k.startswith("requests.") or k.endswith(".resource.k8s.io/devices"))} if isinstance(hard, dict) else {}
    if not kept or not isinstance(meta.get("name"), str):
        return None
    return str(meta.get("namespace") or ""), meta["name"], kept


def add_quota(quotas: dict, quota: dict) -> None:
    """File a ResourceQuota's device limits under its namespace (none: nothing filed)."""
    found = device_quota(quota)
    if found is not None:
        quotas.setdefault(found[0], []).append(found[1:])


def quota_map(quotas) -> dict[str, list[tuple[str, dict]]]:
    """namespace -> [(ResourceQuota name, its device limits)]."""
    out: dict = {}
    for quota in quotas:
        add_quota(out, quota)
    return out
