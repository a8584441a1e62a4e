"""/mutate on the wire: the review's pod to the one decision (application.decide_pod) and its
answer (application.mutate_answer) back to an AdmissionReview. The one IO step (ensuring
templates exist) happens between `plan_request` and `respond`, in the webhook, and its outcome
is passed in."""

from __future__ import annotations

from app.application import UNKNOWN, ClusterFacts, Decision, Outcome, PlanCache, decide_pod, mutate_answer
from app.migration import Plan
from app.policy import Policy

from . import admission


def not_mutated(req: admission.Request) -> Decision:
    # Pod UPDATE is never mutated: most pod spec fields are immutable after creation.
    return Decision(Outcome.UNCHANGED, None, Plan("unchanged", reason=f"{req.kind} {req.operation} is not mutated"))


_DEFAULT_CACHE = PlanCache()


def plan_request(req: admission.Request, policy: Policy, namespace_labels: dict[str, str],
                 cache: PlanCache = _DEFAULT_CACHE, facts: ClusterFacts = UNKNOWN) -> Decision:
    """The decision for the review's pod, real request or dry run alike (a dry run differs only
    in what the webhook writes: nothing). A pod the admin rules deny as it would be admitted is
    denied here, and nothing is written for it."""
    if req.kind != "Pod" or req.operation != "CREATE" or req.obj is None:
        return not_mutated(req)
    return decide_pod(req.obj, req.namespace, policy, facts, namespace_labels=namespace_labels or {},
                      planner=cache.plan,
                      requester=req.raw.get("userInfo") if isinstance(req.raw.get("userInfo"), dict) else {})


def respond(req: admission.Request, decision: Decision, ensure_error: str | None = None) -> dict:
    """The AdmissionReview response; `ensure_error` says the template could not be created."""
    return admission.answer(req.uid, mutate_answer(req.namespace, req.name, decision, ensure_error))
