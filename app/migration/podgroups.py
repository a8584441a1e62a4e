"""A pod in a PodGroup (KEP-5729, DRAWorkloadResourceClaims): a pod claim whose name and
template equal one of the group's claims resolves to the one claim the whole group shares. The
rewrite asks devices for this pod alone, so its claim entry takes a name the group does not use.
Pure."""

from __future__ import annotations

from app.common import submap
from collections.abc import Iterable


def pod_group_of(pod: dict) -> str | None:
    """The PodGroup a pod belongs to (spec.schedulingGroup.podGroupName), None: none."""
    spec = submap(pod, "spec")
    group = spec.get("schedulingGroup")
    name = group.get("podGroupName") if isinstance(group, dict) else None
    return name if isinstance(name, str) and name else None


def group_claim_names(group: dict | None) -> frozenset[str]:
    """The claim names a PodGroup shares among its pods (none where it does not exist)."""
    spec = (group or {}).get("spec")
    claims = spec.get("resourceClaims") if isinstance(spec, dict) else None
    return frozenset(c["name"] for c in claims or [] if isinstance(c, dict) and isinstance(c.get("name"), str))


def own_entry_name(wanted: str, taken: Iterable[str]) -> str:
    """wanted, or wanted-2, wanted-3...: the first the group does not share (a DNS label)."""
    taken = set(taken)
    if wanted not in taken:
        return wanted
    n = 2
    while True:
        suffix = f"-{n}"
        candidate = wanted[:63 - len(suffix)].rstrip("-") + suffix
        if candidate not in taken:
            return candidate
        n += 1


def unread_group_note(pod: dict, wanted: str) -> str | None:
    """What is said where the pod's PodGroup was not found or not read (None: in no group)."""
    group = pod_group_of(pod)
    if group is None:
        return None
    return (f"PodGroup {group} was not found or not read: where it shares a claim named {wanted}, the webhook "
            "names this pod's own claim entry differently, so the group never shares this pod's devices (a PodGroup "
            "created after the pod is not seen)")
