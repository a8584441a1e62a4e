"""The admin rules and upstream's own checks on one object as /validate judges it: a claim or a
template (its shape, the rules, feasibility against the inventory) or a pod (the claims it names
and its device-plugin asks as the claims they would be). Pure; what the webhook answers from it
is `answers.validate_answer`."""

from __future__ import annotations

from dataclasses import dataclass, field

from app import dra
from app.common import DeadlineExceeded, vocabulary
from app.migration import pod_errors
from app.policy import MODE_ACTIONS, Effective, Policy

from .engine import (Lookup, NamespaceClaims, Subject, Violation, claim_usage, judge, judge_pod, judge_served,
                     no_lookup, of_namespace, subject_of)


@dataclass
class Finding:
    severity: str  # violation (its actions decide) | warning (never denies)
    message: str
    actions: tuple = ()  # Deny / Warn / Audit (ValidatingAdmissionPolicyBinding's validationActions)
    rule: str = ""  # the admin rule, "" for what upstream itself refuses (a claim that cannot work)


@dataclass
class Judgment:
    findings: list[Finding] = field(default_factory=list)
    verdict: dra.Verdict | None = None
    incomplete: str | None = None  # why the evaluation stopped early; findings before it stand
    error: Exception | None = None  # the internal error behind `incomplete`, for the log

    @property
    def violations(self) -> list[str]:
        return [f.message for f in self.findings if f.severity == "violation"]

    def acted(self, action: str) -> list[Finding]:
        return [f for f in self.findings if f.severity == "violation" and action in f.actions]

    def advisory(self) -> None:
        """A verdict against an inventory that is not synced: nothing denies, Deny warns instead."""
        for f in self.findings:
            if "Deny" in f.actions:
                f.actions = tuple(a for a in f.actions if a != "Deny") + ("Warn",)


def _violations(found: list[Violation]) -> list[Finding]:
    return [Finding("violation", v.message, v.actions, v.rule) for v in found]


ADMIN_ACCESS_LABEL = vocabulary.ADMIN_ACCESS_LABEL


def asks_admin_access(obj: dict) -> bool:
    """Cheap look before parsing: does any request of this claim or template set adminAccess?"""
    def field(value, name):
        return value.get(name) if isinstance(value, dict) else None

    spec = field(obj, "spec")
    if field(obj, "kind") == "ResourceClaimTemplate":
        spec = field(spec, "spec")
    requests = field(field(spec, "devices"), "requests")
    return isinstance(requests, list) and any(
        isinstance(r, dict) and (r.get("adminAccess") or (isinstance(r.get("exactly"), dict) and
                                                          r["exactly"].get("adminAccess"))) for r in requests)


def admin_label_rule(parsed: dra.ClaimSpec, namespace: str, labels: dict | None,
                     actions: tuple = ("Deny",)) -> list[Finding]:
    """Upstream: adminAccess only in namespaces labelled resource.kubernetes.io/admin-access=true
    (the API server refuses it elsewhere); our policy can forbid more, never allow more."""
    admin = [r for alts in parsed.requests for r in alts if r.admin]
    if not admin or labels is None or labels.get(ADMIN_ACCESS_LABEL) == "true":
        return []
    return [Finding("violation", f"{admin[0].path}.adminAccess: namespace {namespace!r} is not labelled "
                                 f"{ADMIN_ACCESS_LABEL}=true, so the API server refuses admin access there", actions)]


def evaluate_claim(obj: dict, policy: Policy, settings: Effective, index: dra.Index | None,
                   subject: Subject | None = None, namespace_claims: NamespaceClaims = None,
                   lookup: Lookup = no_lookup) -> Judgment:
    """subject.namespace_labels None: not known (the admin-access label rule is not checked).
    lookup: reads the pod a scheduler's extended-resource claim serves (its per-pod rules)."""
    outcome = Judgment()
    subject = subject or subject_of(obj.get("kind", ""), obj, "", None, None)
    upstream = tuple(MODE_ACTIONS[settings.mode])
    try:
        usage = claim_usage(obj, "")  # the response names the object
    except dra.ClaimError as exc:
        outcome.findings.append(Finding("violation", str(exc), upstream))
        return outcome
    parsed = usage.claims[0].spec
    outcome.findings.extend(admin_label_rule(parsed, subject.namespace, subject.namespace_labels, upstream))
    try:
        rules = policy.rules_for(subject.namespace, subject.namespace_labels or {})
        held = of_namespace(namespace_claims, subject.namespace)
        outcome.findings.extend(_violations(judge(rules, subject, usage, index, held)))
        verdict = dra.check(parsed, index) if index is not None else None
    except DeadlineExceeded:
        outcome.incomplete = "the review ran past its time limit"
        return outcome
    except Exception as exc:  # a bug: the findings above still count (see respond)
        outcome.incomplete = f"internal error in the feasibility check ({type(exc).__name__})"
        outcome.error = exc
        return outcome
    try:
        outcome.findings.extend(_violations(judge_served(obj, parsed, subject, policy, index, lookup)))
    except Exception as exc:  # the pod's read failed (API, time limit) or a bug: not judged, said
        outcome.incomplete = f"not judged against the pod it serves ({type(exc).__name__}: {str(exc)[:120]})"
        outcome.error = exc
        return outcome
    outcome.verdict = verdict
    if verdict is None:  # a preview with no inventory: the rules are judged, feasibility is not
        outcome.findings.append(Finding("warning", "not checked against devices: no inventory was given"))
        return outcome
    if verdict.status in ("invalid", "never"):
        hint = f" Closest devices: {'; '.join(verdict.closest)}" if verdict.closest else ""
        outcome.findings.append(Finding("violation", f"{verdict.message}.{hint}" if verdict.status == "never"
                                        else verdict.message, upstream))
    elif verdict.status == "unsatisfiable-now":
        outcome.findings.append(Finding("warning", f"not satisfiable now: {verdict.message}"))
    outcome.findings.extend(Finding("warning", e) for e in verdict.errors if "runtime error" in e)
    outcome.findings.extend(Finding("warning", note) for note in verdict.notes)
    return outcome


def evaluate_pod(obj: dict, policy: Policy, subject: Subject, index: dra.Index | None,
                 lookup: Lookup = no_lookup, namespace_claims: NamespaceClaims = None) -> Judgment:
    """The admin rules on what the pod takes: the claims it names and its device-plugin asks
    as the claims they would be (a pod kept on the device plugin is no way round a rule)."""
    outcome = Judgment()
    errors = pod_errors(obj)
    if errors:
        outcome.findings.append(Finding("warning", f"pod not checked: {errors[0]}"))
        return outcome
    found = judge_pod(obj, subject, policy, index, lookup, namespace_claims=namespace_claims)
    outcome.findings.extend(_violations(found.violations))
    outcome.findings.extend(Finding("warning", f"{u}: not found, not counted toward per-pod limits")
                            for u in found.usage.unresolved)
    return outcome


def unfinished_decision(settings: Effective | None) -> str:
    """allow | deny for a review that could not finish: the namespace's onInternalError, else
    deny where the policy enforces (or where we cannot tell which policy applies)."""
    if settings is not None and settings.onInternalError:
        return settings.onInternalError
    return "deny" if settings is None or settings.mode == "enforce" else "allow"
