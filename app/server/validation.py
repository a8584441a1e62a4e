"""/validate decisions: claim or pod + policy + inventory -> verdict -> AdmissionReview response. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from app import dra
from app.common import DeadlineExceeded
from app.migration import legacy_resources, pod_errors
from app.policy import Effective, Policy

from . import admission


@dataclass
class Finding:
    severity: str  # violation (mode decides) | warning (never denies)
    message: str


@dataclass
class Outcome:
    findings: list[Finding] = field(default_factory=list)
    verdict: dra.Verdict | None = None
    incomplete: str | None = None  # why the evaluation stopped early; findings before it stand
    error: Exception | None = None  # the internal error behind `incomplete`, for the log

    @property
    def violations(self) -> list[str]:
        return [f.message for f in self.findings if f.severity == "violation"]


def _policy_rules(parsed: dra.ClaimSpec, settings: Effective) -> list[Finding]:
    out = []
    total = 0
    for alternatives in parsed.requests:
        most = 0
        for req in alternatives:
            if settings.allowedDeviceClasses is not None and req.device_class not in settings.allowedDeviceClasses:
                out.append(Finding("violation", f"{req.path}.deviceClassName: DeviceClass {req.device_class!r} is not "
                                                f"allowed here (allowed: {', '.join(settings.allowedDeviceClasses)})"))
            if req.admin and not settings.allowAdminAccess:
                out.append(Finding("violation", f"{req.path}.adminAccess: not allowed in this namespace"))
            if settings.maxDevicesPerRequest and req.mode == "ExactCount" and req.count > settings.maxDevicesPerRequest:
                out.append(Finding("violation", f"{req.path}.count: {req.count} exceeds the limit of "
                                                f"{settings.maxDevicesPerRequest} devices per request"))
            most = max(most, req.count)
        total += most
    if settings.maxDevicesPerClaim and total > settings.maxDevicesPerClaim:
        out.append(Finding("violation", f"spec: {total} devices exceed the limit of {settings.maxDevicesPerClaim} "
                                        "per claim"))
    return out


def template_refusal(template: dict, settings: Effective) -> str | None:
    """Why /validate would deny creating this generated ResourceClaimTemplate (a policy rule, in
    enforce mode); None when it would be created. The mutation asks before it writes, so a dry
    run answers as the real request does (migration.decide's `refuse`)."""
    if settings.mode != "enforce":
        return None
    try:
        parsed = dra.parse_claim_object(template)
    except dra.ClaimError as exc:
        return str(exc)
    violations = [f.message for f in _policy_rules(parsed, settings) if f.severity == "violation"]
    return f"the policy refuses the generated template: {violations[0]}" if violations else None


ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"


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


def admin_label_rule(parsed: dra.ClaimSpec, namespace: str, labels: dict | None) -> list[Finding]:
    """Upstream: adminAccess only in namespaces labelled resource.kubernetes.io/admin-access=true
    (the API server refuses it elsewhere); our policy can forbid more, never allow more."""
    admin = [r for alts in parsed.requests for r in alts if r.admin]
    if not admin or labels is None or labels.get(ADMIN_ACCESS_LABEL) == "true":
        return []
    return [Finding("violation", f"{admin[0].path}.adminAccess: namespace {namespace!r} is not labelled "
                                 f"{ADMIN_ACCESS_LABEL}=true, so the API server refuses admin access there")]


def evaluate_claim(obj: dict, settings: Effective, index: dra.Index, namespace: str = "",
                   namespace_labels: dict | None = None) -> Outcome:
    """namespace_labels None: not known (the admin-access label rule is not checked)."""
    outcome = Outcome()
    try:
        parsed = dra.parse_claim_object(obj)
    except dra.ClaimError as exc:
        outcome.findings.append(Finding("violation", str(exc)))
        return outcome
    outcome.findings.extend(admin_label_rule(parsed, namespace, namespace_labels))
    outcome.findings.extend(_policy_rules(parsed, settings))
    try:
        verdict = dra.check(parsed, index)
    except DeadlineExceeded:
        outcome.incomplete = "the review ran past its time limit"
        return outcome
    except Exception as exc:  # a bug: the findings above still count (see respond)
        outcome.incomplete = f"internal error in the feasibility check ({type(exc).__name__})"
        outcome.error = exc
        return outcome
    outcome.verdict = verdict
    if verdict.status in ("invalid", "never"):
        hint = f" Closest devices: {'; '.join(verdict.closest)}" if verdict.closest else ""
        outcome.findings.append(Finding("violation", f"{verdict.message}.{hint}" if verdict.status == "never"
                                        else verdict.message))
    elif verdict.status == "unsatisfiable-now":
        outcome.findings.append(Finding("warning", f"not satisfiable now: {verdict.message}"))
    outcome.findings.extend(Finding("warning", e) for e in verdict.errors if "runtime error" in e)
    outcome.findings.extend(Finding("warning", note) for note in verdict.notes)
    return outcome


def evaluate_pod(obj: dict, settings: Effective, policy: Policy) -> Outcome:
    outcome = Outcome()
    errors = pod_errors(obj)
    if errors:
        outcome.findings.append(Finding("warning", f"pod not checked: {errors[0]}"))
        return outcome
    legacy = legacy_resources(obj["spec"], policy.migration)
    if legacy and settings.forbidLegacy:
        names = ", ".join(f"{c}: {r}" for c, r in legacy)
        outcome.findings.append(Finding("violation", f"spec.containers: legacy GPU requests are no longer allowed in "
                                                     f"this namespace ({names}); use resourceClaims"))
    return outcome


def applies(req: admission.Request) -> bool:
    if req.kind in dra.CLAIM_KINDS:
        return req.operation in ("CREATE", "UPDATE") and req.obj is not None
    return req.kind == "Pod" and req.operation == "CREATE" and req.obj is not None


def unfinished_decision(settings: Effective | None) -> str:
    """allow | deny for a review that could not finish: the namespace's onInternalError, else
    deny where the policy enforces (or where we cannot tell which policy applies)."""
    if settings is not None and settings.onInternalError:
        return settings.onInternalError
    return "deny" if settings is None or settings.mode == "enforce" else "allow"


def respond(req: admission.Request, outcome: Outcome, settings: Effective) -> dict:
    warnings = [f.message for f in outcome.findings if f.severity == "warning"]
    violations = outcome.violations
    if outcome.incomplete and not (violations and settings.mode == "enforce"):
        if unfinished_decision(settings) == "deny":
            found = f"; found so far: {' | '.join(violations)}" if violations else ""
            return admission.response(req.uid, False, code=500, message=(
                f"dra-bridge: {req.kind} {req.namespace}/{req.name or '(generated)'} not validated: "
                f"{outcome.incomplete}{found}")[:4000], warnings=warnings or None)
        warnings = [f"not fully validated: {outcome.incomplete}"] + violations + warnings
        return admission.response(req.uid, True, warnings=warnings)
    if not violations:
        return admission.response(req.uid, True, warnings=warnings or None)
    subject = f"{req.kind} {req.namespace}/{req.name or '(generated)'}"
    text = f"dra-bridge: {subject}: " + " | ".join(violations)
    if settings.mode == "enforce":
        return admission.response(req.uid, False, code=422, message=text[:4000], warnings=warnings or None)
    if settings.mode == "warn":
        return admission.response(req.uid, True, warnings=violations + warnings)
    return admission.response(req.uid, True, warnings=warnings or None,
                              audit={"validation": text[:1000]})
