"""A running pod as its owner would create it again, and whether it is still running. Pure."""

from __future__ import annotations

import copy

import orjson

from app.common import submap
from app.common import metadata_of, view_of, vocabulary

CONTAINER_LISTS = ("initContainers", "containers")


def recreated(pod: dict) -> dict:
    """The pod as its owner creates it again: the same spec, not yet bound to a node, and where our
    webhook rewrote it, its device-plugin asks put back as its migration annotation records them
    (the owner's template still asks for them; node labels moved into the claim stay in it)."""
    meta = metadata_of(pod)
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    annotations = view_of(pod).annotations
    rewritten = _rewrite_record(annotations.get(vocabulary.MIGRATION_ANNOTATION))
    if rewritten is not None:
        spec = _unrewritten(spec, rewritten)
        annotations = {k: v for k, v in annotations.items() if k != vocabulary.MIGRATION_ANNOTATION}
    return {"metadata": {"namespace": meta.get("namespace", ""),
                         **({"annotations": annotations} if "annotations" in meta else {})},
            "spec": spec}


def _rewrite_record(text: object) -> dict | None:
    try:
        found = orjson.loads(text) if isinstance(text, str) else None
    except orjson.JSONDecodeError:
        return None
    return found if isinstance(found, dict) and isinstance(found.get("containers"), dict) else None


def _unrewritten(spec: dict, rewritten: dict) -> dict:
    spec = copy.deepcopy(spec)
    ours = {c.get("name") for c in spec.get("resourceClaims") or [] if isinstance(c, dict)
            and rewritten.get("template") and c.get("resourceClaimTemplateName") == rewritten["template"]}
    if ours:
        spec["resourceClaims"] = [c for c in spec["resourceClaims"] if not isinstance(c, dict) or c.get("name") not in ours]
        if not spec["resourceClaims"]:
            del spec["resourceClaims"]
    for list_name in CONTAINER_LISTS:
        for container in spec.get(list_name) or []:
            if not isinstance(container, dict):
                continue
            resources = submap(container, "resources")
            claims = [c for c in resources.get("claims") or [] if not isinstance(c, dict) or c.get("name") not in ours]
            resources.pop("claims", None)
            if claims:
                resources["claims"] = claims
            asked = rewritten["containers"].get(container.get("name"))
            if isinstance(asked, dict) and asked:
                resources["limits"] = {**(resources.get("limits") or {}), **asked}
            if resources:
                container["resources"] = resources
    return spec


def running(pod: dict) -> bool:
    """Neither being deleted nor finished."""
    return not view_of(pod).deleting and \
        (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
