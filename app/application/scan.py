"""A background scan: the admin rules on objects that already exist (pods, claims, templates), as
PolicyReport results. Pure. Who created an object is not known after the fact, so rules that
exempt users, groups or service accounts are left out (Kyverno's background scans do the same)."""

from __future__ import annotations

from dataclasses import dataclass

from app.common import view_of
from app import dra
from app.migration import pod_errors
from app.policy import Policy

from .engine import (KnownClaims, Violation, claim_usage, judge, needs_requester, of_namespace, pod_usage,
                     subject_of)

SCANNED = ("Pod", "ResourceClaim", "ResourceClaimTemplate")


@dataclass
class Found:
    kind: str
    namespace: str
    name: str
    violation: Violation


def scan(objects: list[dict], policy: Policy, index: dra.Index | None, namespaces: dict[str, dict]) -> list[Found]:
    """The claims pods name, and each namespace's claims, are read from `objects` themselves."""
    known = KnownClaims(objects)
    out = []
    for obj in objects:
        view = view_of(obj)
        kind = view.kind
        if kind not in SCANNED:
            continue
        namespace = view.namespace or "default"
        labels = namespaces.get(namespace, {})
        subject = subject_of(kind, obj, namespace, labels, None)
        rules = [r for r in policy.rules_for(namespace, labels) if not needs_requester(r)]
        if kind == "Pod" and pod_errors(obj):
            continue
        try:
            usage = pod_usage(obj, policy, namespace, known.lookup, classes=index.classes if index else None) \
                if kind == "Pod" else claim_usage(obj, "")
        except dra.ClaimError:
            continue  # upstream refused such objects; nothing of the rules' to say
        # an existing object: the guard counts its own claims (and itself) once, with it
        held = of_namespace(known.in_namespace, namespace)
        for violation in judge(rules, subject, usage, index, held):
            out.append(Found(kind, namespace, view.name, violation))
    return out

