"""/validate-policy: the policy ConfigMap is judged by the parser that will load it, when it is
applied, so `kubectl apply` of a bad policy fails with the field named, and nothing lands that a
replica would refuse at reload. Pure."""

from __future__ import annotations

import hashlib

from app.common import PolicyError, view_of
from app.policy import parse_policy

from . import admission

POLICY_KEY = "policy.yaml"  # the ConfigMap key the deployment mounts as the policy file


# An admin deletes the policy on purpose by first annotating it so (a forgotten overlay never does).
DELETE_ANNOTATION = "dra-bridge.io/allow-delete"


def review_policy(req: admission.Request) -> tuple[dict, str]:
    if req.kind == "ConfigMap" and req.operation == "DELETE":
        return _review_delete(req)
    if req.kind != "ConfigMap" or req.operation not in ("CREATE", "UPDATE") or req.obj is None:
        return admission.response(req.uid, True), "skipped"
    data = req.obj.get("data")
    text = data.get(POLICY_KEY) if isinstance(data, dict) else None
    if not isinstance(text, str):
        return admission.response(req.uid, False, code=422, message=(
            f"dra-bridge: ConfigMap {req.namespace}/{req.name}: data.{POLICY_KEY} is missing: the webhook reads "
            "its policy from that key")), "denied"
    try:
        policy = parse_policy(text, f"data.{POLICY_KEY}")
    except PolicyError as exc:
        return admission.response(req.uid, False, code=422, message=(
            f"dra-bridge: ConfigMap {req.namespace}/{req.name}: policy refused, the replicas keep the one in "
            f"force: {exc}")[:4000]), "denied"
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return admission.response(req.uid, True, warnings=[
        f"dra-bridge policy {digest}: {len(policy.rules)} rule(s); replicas take it within a minute "
        "(kubectl get --raw on /readyz, or dra_bridge_policy_info, says which each enforces)"]), "allowed"


def _review_delete(req: admission.Request) -> tuple[dict, str]:
    """Deleting the policy is a change like any other: refused unless the admin said so on it.
    Either way the replicas keep enforcing the last policy they took (its copy beside it)."""
    notes = view_of(req.old or {}).annotations
    if notes.get(DELETE_ANNOTATION) == "true":
        return admission.response(req.uid, True, warnings=[
            f"dra-bridge: ConfigMap {req.namespace}/{req.name} deleted: the replicas keep enforcing the last policy "
            f"they took (ConfigMap {req.name}-last-good); delete that too and restart them for the bundled "
            "default"]), "allowed"
    return admission.response(req.uid, False, code=403, message=(
        f"dra-bridge: ConfigMap {req.namespace}/{req.name} holds the cluster's GPU policy: deleting it would not "
        f"drop its rules (the replicas keep the last one they took), so it is refused. To delete it on purpose: "
        f"kubectl -n {req.namespace} annotate configmap {req.name} {DELETE_ANNOTATION}=true, then delete it")), \
        "denied"
