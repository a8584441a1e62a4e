"""What each webhook answers for a decision, as plain data: the server writes it on the wire
(admission.answer), the offline chain (`policy test`, `check --policy`) reads it as it is, so
both say the same words. Pure."""

from __future__ import annotations

from dataclasses import dataclass

from app.migration import MIGRATION_ANNOTATION
from app.policy import Effective

from .decision import Decision, Outcome
from .validate import Judgment, unfinished_decision


@dataclass(frozen=True)
class Answer:
    allowed: bool
    code: int | None = None
    message: str | None = None
    warnings: list[str] | None = None
    audit: dict[str, str] | None = None
    patch: bytes | None = None


def _name(kind: str, namespace: str, name: str) -> str:
    return f"dra-bridge: {kind} {namespace}/{name or '(generated)'}"


def mutate_answer(namespace: str, name: str, decision: Decision, ensure_error: str | None = None) -> Answer:
    """/mutate's answer; `ensure_error` says the template could not be created."""
    plan, settings, outcome = decision.plan, decision.settings, decision.outcome
    if outcome is Outcome.DENIED:
        return Answer(False, 422, f"{_name('pod', namespace, name)}: {decision.refused}"[:4000])
    if outcome in (Outcome.UNCHANGED, Outcome.NATIVE, Outcome.LEGACY):
        path = decision.path
        return Answer(True, warnings=plan.warnings or None,
                      audit={"path": f"{path.path}: {path.reason}"[:1000]} if path is not None else None)
    if outcome is Outcome.UNMIGRATABLE:
        if settings is not None and settings.onUnmigratable == "deny":
            return Answer(False, 403, f"dra-bridge: pod cannot be migrated to DRA: {plan.reason}")
        return Answer(True, warnings=plan.warnings)
    if ensure_error is not None:
        if settings is not None and settings.onTemplateError == "deny":
            return Answer(False, 503, f"dra-bridge: could not create ResourceClaimTemplate: {ensure_error}")
        return Answer(True, warnings=[f"pod admitted unmigrated: could not create ResourceClaimTemplate "
                                      f"({ensure_error})"])
    assert outcome is Outcome.REWRITE, outcome  # every other outcome answered above
    template = plan.rewritten.get("template", "")
    return Answer(True, patch=decision.patch, warnings=plan.warnings,
                  audit={MIGRATION_ANNOTATION.split("/")[1]: template or "removed-zero-count-requests"})


def validate_answer(kind: str, namespace: str, name: str, outcome: Judgment, settings: Effective) -> Answer:
    """/validate's answer: Deny findings refuse, Warn ones warn, Audit ones annotate; a judgment
    that could not finish is answered by the failure rule (unfinished_decision)."""
    warnings = [f.message for f in outcome.findings if f.severity == "warning"]
    denied = [f.message for f in outcome.acted("Deny")]
    if outcome.incomplete and not denied:
        found = outcome.violations
        if unfinished_decision(settings) == "deny":
            so_far = f"; found so far: {' | '.join(found)}" if found else ""
            return Answer(False, 500, f"{_name(kind, namespace, name)} not validated: {outcome.incomplete}{so_far}"[:4000],
                          warnings=warnings or None)
        return Answer(True, warnings=[f"not fully validated: {outcome.incomplete}"] + found + warnings)
    subject = f"{_name(kind, namespace, name)}: "
    if denied:
        return Answer(False, 422, (subject + " | ".join(denied))[:4000], warnings=warnings or None)
    warned = [f.message for f in outcome.acted("Warn")]
    audited = [f.message for f in outcome.acted("Audit")]
    return Answer(True, warnings=(warned + warnings) or None,
                  audit={"validation": (subject + " | ".join(audited))[:1000]} if audited else None)
