"""How one pod is migrated when it is created: its path and plan (`decide`). Pure. The admin
rules' verdict is composed with it in the application layer (app.application.decide_pod), which
every caller (the webhook, dry runs, previews, the rollout) goes through.

Inputs: the pod, its namespace and that namespace's labels, the policy (its namespace rules
too), the cluster's facts (paths.Facts) and the opt-in label the mutating webhook's namespaceSelector
uses. The webhook is only called in opted-in namespaces, so it passes no opt-in; every preview
passes the one its webhook configuration has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from app.common import InputError, vocabulary
from app.policy import Effective, Policy

from .paths import Choice, Facts, Path, choose
from .legacy import legacy_resources
from .planner import Plan, PlanStatus, plan_pod
from .podshape import pod_errors

OPT_IN_LABEL = vocabulary.OPT_IN_LABEL


@dataclass(frozen=True)
class OptIn:
    """The namespace label that sends a namespace's pods to the webhook."""

    key: str
    value: str

    @classmethod
    def parse(cls, text: str, flag: str) -> OptIn | None:
        """KEY=VALUE; "" means every namespace (None)."""
        if not text:
            return None
        key, sep, value = text.partition("=")
        if not sep or not key:
            raise InputError(flag, f"expected KEY=VALUE, got {text!r}")
        return cls(key, value)

    def admits(self, labels: dict | None) -> bool:
        return (labels or {}).get(self.key) == self.value

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


DEFAULT_OPT_IN = OptIn(*OPT_IN_LABEL.split("="))


@dataclass(frozen=True)
class Routed:
    """settings: the policy in force for the namespace (None: the webhook is never called);
    plan: the planner's outcome, `unchanged` where the pod is left as written; patch: the JSON
    patch of a rewrite; path: the path choice where one was made (native or legacy: left as is);
    planned: the planner's own plan, before the path choice (None: not planned). The admin
    rules' verdict on it is the application layer's (app.application.decide_pod)."""

    settings: Effective | None
    plan: Plan
    patch: bytes | None = None
    path: Choice | None = None
    planned: Plan | None = None


# (pod, rules, namespace, sharing, group_claims) -> (plan, patch)
Planner = Callable[..., tuple[Plan, bytes | None]]


def plan_only(pod: dict, rules, namespace: str | None, sharing=None, group_claims=None) -> tuple[Plan, bytes | None]:
    """The planner without the patch (what previews that print no patch need)."""
    return plan_pod(pod, rules, namespace, sharing, group_claims), None


UNKNOWN_FACTS = Facts()  # nothing known of the cluster: the path choice judges what it can without it


def decide(pod: dict, namespace: str, namespace_labels: dict | None, policy: Policy, facts: Facts = UNKNOWN_FACTS,
           opt_in: OptIn | None = None, planner: Planner = plan_only,
           group_claims: frozenset[str] | None = None) -> Routed:
    """The migration of a pod being created. facts: what the cluster serves (UNKNOWN_FACTS: no
    inventory: the pod keeps the rewrite path unless its policy, shares or queue say otherwise);
    planner: plan_pod, or a cache of it; group_claims: the claim names the pod's PodGroup shares
    (None: not read)."""
    return _path(pod, namespace, namespace_labels, policy, facts, opt_in, planner, group_claims)


def _kept_by_policy(pod: dict, policy: Policy, keep: list[str]) -> Choice | None:
    """The policy's keepOnPlugin: resources, or families of them, left to the device plugin."""
    if not keep or pod_errors(pod):
        return None
    for _container, resource in legacy_resources(pod["spec"], policy.migration):
        found = policy.migration.rule_for(resource)
        if resource in keep or (found is not None and found[0].family in keep):
            return Choice(Path.LEGACY, f"the policy keeps {resource} on the device plugin (keepOnPlugin)", "policy")
    return None


def _preemption_lost(pod: dict, policy: Policy, facts: Facts) -> str | None:
    """What DRA takes from this pod while the scheduler does not preempt for DRA devices."""
    if policy.migration.draPreemption == "on" or facts.preemption is None:
        return None
    lost = facts.preemption.lost(pod["spec"])
    return f"preemption: {lost}; through Kubernetes 1.37 the scheduler does not preempt for DRA devices" if lost \
        else None


def _path(pod: dict, namespace: str, namespace_labels: dict | None, policy: Policy, facts: Facts,
          opt_in: OptIn | None, planner: Planner, group_claims: frozenset[str] | None) -> Routed:
    if opt_in is not None and not opt_in.admits(namespace_labels):
        return Routed(None, Plan(PlanStatus.UNCHANGED, reason=f"its namespace {namespace or '(none)'} is not opted "
                                                                  f"in ({opt_in}): the webhook is not called, the pod "
                                                                  "is created as written"))
    settings = policy.for_namespace(namespace, namespace_labels or {})
    if not settings.migrate:
        return Routed(settings, Plan(PlanStatus.UNCHANGED, reason="migration disabled for this namespace "
                                                                      "(policy migrate: false)"))
    kept = _kept_by_policy(pod, policy, settings.keepOnPlugin)
    if kept is not None:
        return Routed(settings, Plan(PlanStatus.UNCHANGED, reason=kept.reason, warnings=[
            f"pod left on the device plugin: {kept.reason}"]), path=kept)
    plan, patch = planner(pod, policy.migration, namespace or None, facts.sharing, group_claims)
    if plan.status in (PlanStatus.MIGRATED, PlanStatus.UNMIGRATABLE):
        choice = choose(pod, plan, policy.migration, settings.path, facts)
        lost = _preemption_lost(pod, policy, facts) if choice.path is not Path.LEGACY else None
        anyway = []  # the warning of a pod moved to DRA although it loses preemption there
        if lost and not settings.migratePreempting:
            choice = Choice(Path.LEGACY, f"{lost} (migration.draPreemption: off; namespaces[].migratePreempting: "
                                         "true moves it anyway)", "preemption")
        elif lost:
            anyway = [f"moved to DRA anyway (migratePreempting): {lost}"]
            plan = replace(plan, warnings=[*plan.warnings, *anyway])
        if choice.path is Path.NATIVE:  # left as written: the rewrite's own warnings are not its
            return Routed(settings, Plan(PlanStatus.UNCHANGED, reason=choice.reason, warnings=anyway), path=choice,
                          planned=plan)
        if choice.path is Path.LEGACY:
            return Routed(settings, Plan(PlanStatus.UNCHANGED, reason=choice.reason, warnings=[
                f"pod left on the device plugin: {choice.reason}"]), path=choice, planned=plan)
    return Routed(settings, plan, patch, planned=plan)
