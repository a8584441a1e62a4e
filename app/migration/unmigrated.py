"""A running pod as its owner would create it again, and whether it is still running. Pure."""

from __future__ import annotations

from app.common import metadata_of


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
