"""What happens to one pod when it is created: the migration decision (migration.decide: path
and plan) composed with the admin rules' verdict on the pod as it would be admitted, read once
into a frozen `Decision`. The webhook (real requests and dry runs), `plan`, `audit`, `check
--policy`, `policy test`, `rollout` and the unmigrated count all take it from `decide_pod`. Pure."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from app.migration import Choice, OptIn, Path, Plan, Planner, PlanStatus, decide, group_claim_names, plan_only, pod_group_of
from app.policy import Effective, Policy

from .facts import UNKNOWN, ClusterFacts
from .engine import Violation, judge_pod, subject_of


class Outcome(str, enum.Enum):
    REWRITE = "rewrite"  # the pod is patched onto generated ResourceClaimTemplates
    NATIVE = "native"  # left as written: a DeviceClass serves its extended resources (KEP-5004)
    LEGACY = "legacy"  # left on the device plugin, for the reason given
    DENIED = "denied"  # the admin rules refuse it as it would be admitted
    UNMIGRATABLE = "unmigratable"  # it asks for GPUs no claim can say
    UNCHANGED = "unchanged"  # nothing to migrate, migration off, or the webhook is not called

    @property
    def metric(self) -> str:
        """dra_bridge_migrations_total's label (kept from before the enum)."""
        return SAID[self][0]

    @property
    def routine(self) -> bool:
        """Counted, not logged one by one: the pod went as planned."""
        return SAID[self][1]


# How each outcome is said, in one place: its metric label and whether it is routine. An
# outcome added without a line here fails tests/unit/test_outcome_words.py.
SAID: dict[Outcome, tuple[str, bool]] = {
    Outcome.REWRITE: ("migrated", True), Outcome.NATIVE: ("native", True), Outcome.LEGACY: ("legacy", False),
    Outcome.DENIED: ("denied", False), Outcome.UNMIGRATABLE: ("unmigratable", False),
    Outcome.UNCHANGED: ("unchanged", True)}


# The paths that leave a pod as written, and the outcome each is.
LEFT_AS_WRITTEN = {Path.NATIVE: Outcome.NATIVE, Path.LEGACY: Outcome.LEGACY}


@dataclass(frozen=True)
class Decision:
    """settings: the policy in force for the namespace (None: the webhook is never called);
    plan: the pod as admitted (`unchanged` where left as written); patch: a rewrite's JSON
    patch; path: the path choice where one was made; planned: the planner's own plan before the
    path choice (None: not planned); refused: the admin rules' denial; violations: every rule
    the pod as admitted breaks (deny, warn or audit); not_judged: what this decision could not
    know (a preview's requester, a namespace's claims), said, never assumed allowed."""

    outcome: Outcome
    settings: Effective | None
    plan: Plan
    patch: bytes | None = None
    path: Choice | None = None
    planned: Plan | None = None
    refused: str | None = None
    violations: tuple[Violation, ...] = ()
    not_judged: tuple[str, ...] = ()

    @property
    def templates(self) -> list[dict]:
        """The templates a rewrite writes (none otherwise)."""
        return self.plan.templates if self.outcome is Outcome.REWRITE else []

    @property
    def would_rewrite_as(self) -> list[dict]:
        """The templates the planner writes for it, whichever path it takes (none if it could not)."""
        return _planned_templates(self.planned) or []


def _planned_templates(planned: Plan | None) -> list[dict] | None:
    """The templates of the planner's own plan; None where it wrote none (not planned, or unmigratable)."""
    return planned.templates if planned is not None and planned.status is PlanStatus.MIGRATED else None


_FROM_FACTS: dict = {}  # decide_pod's default: the namespace's labels as the facts know them


def decide_pod(pod: dict, namespace: str, policy: Policy, facts: ClusterFacts = UNKNOWN, *,
               namespace_labels: dict | None = _FROM_FACTS, opt_in: OptIn | None = None, planner: Planner = plan_only,
               requester: dict | None = None) -> Decision:
    """The decision for a pod being created. namespace_labels: its namespace's labels (None: not
    known; default: the facts'); opt_in: the webhooks' namespace label (None: the webhook is
    called, as it is for every review it gets); requester: the review's userInfo (None: a
    preview, where who creates the pod is not known: rules that exempt users are named as not
    judged)."""
    labels = facts.labels_of(namespace) if namespace_labels is _FROM_FACTS else namespace_labels
    found = decide(pod, namespace, labels, policy, facts.path, opt_in, planner, _group_claims(pod, namespace, facts))
    migrated = found.plan.status is PlanStatus.MIGRATED
    admitted = found.plan.pod if migrated and found.plan.pod is not None else pod
    subject = subject_of("Pod", pod, namespace, labels, requester)
    # Admitted rewritten: its templates are this admission's; left as written: its device-plugin
    # asks judged as the claims the planner would write for them.
    judged = judge_pod(admitted, subject, policy, facts.index, facts.lookup,
                       found.plan.templates if migrated else [], None if migrated else _planned_templates(found.planned),
                       facts.namespace_claims, requester_known=requester is not None)
    refused = judged.denial
    return Decision(_outcome(found, refused), found.settings, found.plan, None if refused else found.patch,
                    found.path, found.planned, refused, tuple(judged.violations), tuple(judged.not_judged))


def _group_claims(pod: dict, namespace: str, facts: ClusterFacts) -> frozenset[str] | None:
    """The claim names the pod's PodGroup shares (empty: in none; None: the group was not found)."""
    group = pod_group_of(pod)
    if group is None:
        return frozenset()
    found = facts.lookup(namespace, "PodGroup", group)
    return None if found is None else group_claim_names(found)


def _outcome(found, refused: str | None) -> Outcome:
    if refused is not None:
        return Outcome.DENIED
    if found.path is not None and found.path.path in LEFT_AS_WRITTEN:
        return LEFT_AS_WRITTEN[found.path.path]
    if found.plan.status is PlanStatus.MIGRATED:
        return Outcome.REWRITE
    if found.plan.status is PlanStatus.UNMIGRATABLE:
        return Outcome.UNMIGRATABLE
    return Outcome.UNCHANGED
