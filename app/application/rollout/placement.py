"""Could the scheduler place this pod on that node? What rollout planning asks before it counts a
node as room: the pod's node selection (nodeSelector; required node affinity, including the
metadata.name field DaemonSet pods are pinned by) and its tolerations of the node's taints. Pure.
Resources are counted by the caller; a cordon is the caller's too (tolerates_cordon)."""

from __future__ import annotations

from app.common import node_matches, tolerates

from .sides import NodeView


def unplaceable(spec: dict, node: NodeView) -> str | None:
    """None when the pod may go to the node; otherwise why not, in the scheduler's terms."""
    selector = spec.get("nodeSelector") or {}
    for key, value in sorted(selector.items()) if isinstance(selector, dict) else ():
        if node.labels.get(key) != value:
            return f"nodeSelector {key}={value}"
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms"))
    if isinstance(terms, list) and not node_matches({"nodeSelectorTerms": terms}, node.name, node.labels):
        return "required node affinity " + _describe(terms)
    for volume, volume_terms in spec.get("volumeAffinity") or ():
        if not node_matches({"nodeSelectorTerms": volume_terms}, node.name, node.labels):
            return f"PersistentVolume {volume}'s node affinity " + _describe(volume_terms)
    for taint in node.taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
                tolerates(t, taint) for t in spec.get("tolerations") or [] if isinstance(t, dict)):
            return f"taint {taint.get('key')}{'=' + str(taint['value']) if taint.get('value') else ''}:" \
                   f"{taint.get('effect')} not tolerated"
    return None


def pinned_node(spec: dict) -> str | None:
    """The one node a pod can run on, where its node selection names one (a DaemonSet pod's
    metadata.name field, a kubernetes.io/hostname pin, a local PersistentVolume's node); None
    otherwise."""
    for _volume, volume_terms in spec.get("volumeAffinity") or ():
        pin = _one_name(volume_terms)
        if pin is not None:
            return pin
    hostname = (spec.get("nodeSelector") or {}).get("kubernetes.io/hostname")
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")) or []
    return (_one_name(terms) if terms else None) or hostname


def _one_name(terms: list) -> str | None:
    """The node every term pins to by name (hostname or metadata.name In [one]); None where a term
    is not pinned to one name (the pod may go elsewhere) or the terms name several."""
    names = set()
    for term in terms if isinstance(terms, list) else ():
        reqs = (term.get("matchFields") or []) + (term.get("matchExpressions") or []) if isinstance(term, dict) else []
        pin = next((r["values"][0] for r in reqs if r.get("key") in ("metadata.name", "kubernetes.io/hostname")
                    and r.get("operator") == "In" and len(r.get("values") or []) == 1), None)
        if pin is None:
            return None
        names.add(pin)
    return names.pop() if len(names) == 1 else None


def _describe(terms: list) -> str:
    parts = []
    for term in terms[:2]:
        reqs = (term.get("matchExpressions") or []) + (term.get("matchFields") or []) if isinstance(term, dict) else []
        parts.append(" and ".join(f"{r.get('key')} {r.get('operator')} {','.join(map(str, r.get('values') or []))}"
                                  .rstrip() for r in reqs[:3]))
    return " or ".join(f"({p})" for p in parts)
