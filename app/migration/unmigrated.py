"""Running pods that still hold device-plugin GPUs the webhook would rewrite now: admitted while
it was unreachable (failurePolicy: Ignore), or before it served them. `audit` lists them and
`serve` counts them per namespace (a metric the fail-open alert points at). Pure.
"""

from __future__ import annotations

from app.common import metadata_of
from app.policy import Policy

from .decision import Decision, OptIn, decide
from .paths import Facts
from .planner import legacy_resources


def recreated(pod: dict) -> dict:
    """The pod as its owner creates it again: the same spec, not yet bound to a node."""
    meta = metadata_of(pod)
    return {"metadata": {"namespace": meta.get("namespace", ""),
                         **({"annotations": meta["annotations"]} if "annotations" in meta else {})},
            "spec": {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}}


def running(pod: dict) -> bool:
    """Neither being deleted nor finished."""
    return not metadata_of(pod).get("deletionTimestamp") and \
        (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def rewrites(found: Decision) -> bool:
    """Whether the webhook writes a patch for the pod (a rewrite onto claims), not a denial."""
    return found.refused is None and found.plan.status == "migrated"


def unmigrated(pods: list[dict], namespaces: dict[str, dict], policy: Policy, facts: Facts | None,
               opt_in: OptIn | None) -> list[dict]:
    """The running pods with device-plugin asks that decide() would rewrite if created now.
    namespaces: name -> labels (a pod whose namespace is not there is skipped: not known)."""
    out = []
    for pod in pods:
        namespace = metadata_of(pod).get("namespace", "")
        spec = pod.get("spec")
        if namespace not in namespaces or not isinstance(spec, dict) or not running(pod) or \
                not legacy_resources(spec, policy.migration):
            continue
        if rewrites(decide(recreated(pod), namespace, namespaces[namespace], policy, facts, opt_in)):
            out.append(pod)
    return out


def per_namespace(pods: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for pod in pods:
        namespace = metadata_of(pod).get("namespace", "")
        counts[namespace] = counts.get(namespace, 0) + 1
    return counts
