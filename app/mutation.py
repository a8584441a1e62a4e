"""/mutate decisions: admission request + policy -> plan -> AdmissionReview response. Pure.

The one IO step (ensuring templates exist) happens between `plan_request` and `respond`,
in the webhook, and its outcome is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

from app import admission, patch
from app.migrate import MIGRATION_ANNOTATION, Plan, plan_pod
from app.policy import Effective, Policy


@dataclass
class MutationPlan:
    request: admission.Request
    settings: Effective | None
    plan: Plan

    @property
    def templates(self) -> list[dict]:
        return self.plan.templates if self.plan.status == "migrated" else []

    @property
    def outcome(self) -> str:
        return self.plan.status


def plan_request(req: admission.Request, policy: Policy, namespace_labels: dict[str, str]) -> MutationPlan:
    if req.kind != "Pod" or req.operation != "CREATE" or req.obj is None:
        # Pod UPDATE is never mutated: most pod spec fields are immutable after creation.
        return MutationPlan(req, None, Plan("unchanged", reason=f"{req.kind} {req.operation} is not mutated"))
    settings = policy.for_namespace(req.namespace, namespace_labels)
    if not settings.migrate:
        return MutationPlan(req, settings, Plan("unchanged", reason="migration disabled for this namespace"))
    return MutationPlan(req, settings, plan_pod(req.obj, policy.migration, req.namespace or None))


def respond(mp: MutationPlan, ensure_error: str | None = None) -> dict:
    """The AdmissionReview response; `ensure_error` says the template could not be created."""
    req, plan, settings = mp.request, mp.plan, mp.settings
    if plan.status == "unchanged":
        return admission.response(req.uid, True, warnings=plan.warnings or None)
    if plan.status == "unmigratable":
        if settings.onUnmigratable == "deny":
            return admission.response(req.uid, False, code=403,
                                      message=f"dra-bridge: pod cannot be migrated to DRA: {plan.reason}")
        return admission.response(req.uid, True, warnings=plan.warnings)
    if ensure_error is not None:
        if settings.onTemplateError == "deny":
            return admission.response(req.uid, False, code=503,
                                      message=f"dra-bridge: could not create ResourceClaimTemplate: {ensure_error}")
        return admission.response(req.uid, True, warnings=[
            f"pod admitted unmigrated: could not create ResourceClaimTemplate ({ensure_error})"])
    template = plan.rewritten.get("template", "")
    return admission.response(
        req.uid, True, patch=patch.diff(req.obj, plan.pod), warnings=plan.warnings,
        audit={MIGRATION_ANNOTATION.split("/")[1]: template or "removed-zero-count-requests"})
