"""What the API server answers for one object with both our webhooks in its chain: /mutate
(pods: the rewrite, or a denial by the admin rules), then /validate on what /mutate admitted.
Pure: the webhooks' own decisions and answers on plain objects, for offline previews (`policy
test`, `check --policy`), so a preview answers exactly as the cluster would."""

from __future__ import annotations

from collections.abc import Sequence

from dataclasses import dataclass, field

import jsonpatch
import orjson

from app.common import view_of
from app.dra import CLAIM_KINDS
from app.policy import Policy

from .answers import Answer as WebhookAnswer
from .answers import mutate_answer, validate_answer
from .decision import decide_pod
from .facts import ClusterFacts
from .planning import plan_with_patch
from .engine import Lookup, subject_of
from .validate import evaluate_claim, evaluate_pod

RESULTS = ("allow", "audit", "warn", "deny")  # weakest to strongest


@dataclass
class Answer:
    result: str  # allow | audit | warn | deny: the strongest thing the chain did
    messages: list[str] = field(default_factory=list)  # the denial, warnings, audit annotations
    rules: set[str] = field(default_factory=set)  # admin rules that said something
    admitted: dict | None = None  # the object as stored (pods: after the rewrite); None when denied
    rewritten: bool = False  # /mutate moved the pod onto a generated ResourceClaimTemplate


def answer(obj: dict, namespace: str, policy: Policy, facts: ClusterFacts, user: str = "",
           groups: Sequence[str] = ()) -> Answer:
    """The chain's answer to a CREATE of `obj` by `user` (with `groups`) in `namespace`."""
    requester = {"username": user, "groups": list(groups)}
    labels = facts.labels_of(namespace)
    name = view_of(obj).name
    kind = obj.get("kind", "")
    out = Answer("allow")
    lookup = facts.lookup
    if kind == "Pod":
        decision = decide_pod(obj, namespace, policy, facts, planner=plan_with_patch, requester=requester)
        out.rules |= {v.rule for v in decision.violations if "Deny" in v.actions and decision.refused}
        said = mutate_answer(namespace, name, decision)
        if not _take(out, said):
            return out
        out.rewritten = bool(decision.templates)
        if said.patch is not None:
            obj = jsonpatch.apply_patch(obj, orjson.loads(said.patch))
        for template in decision.templates:  # written before the pod is: /validate finds them
            lookup = _with(lookup, namespace, template)
    if not (kind == "Pod" or kind in CLAIM_KINDS):
        out.admitted = obj
        return out
    settings = policy.for_namespace(namespace, labels or {})
    subject = subject_of(kind, obj, namespace, labels, requester)
    if kind == "Pod":
        outcome = evaluate_pod(obj, policy, subject, facts.index, lookup, facts.namespace_claims)
    else:
        outcome = evaluate_claim(obj, policy, settings, facts.index, subject, facts.namespace_claims, lookup)
    out.rules |= {f.rule for f in outcome.findings if f.rule and f.severity == "violation"}
    if outcome.acted("Audit"):
        out.result = "audit"
    if outcome.acted("Warn"):
        out.result = "warn"
    if _take(out, validate_answer(kind, namespace, name, outcome, settings)):
        out.admitted = obj
    return out


def _take(out: Answer, said: WebhookAnswer) -> bool:
    """Fold one webhook's answer in (its messages); False when it denied."""
    if not said.allowed:
        out.result = "deny"
        out.messages.append(said.message or "")
        return False
    out.messages.extend(f"warning: {w}" for w in said.warnings or [])
    out.messages.extend(f"audit: {v}" for k, v in (said.audit or {}).items() if k == "validation")
    return True


def _with(lookup: Lookup, namespace: str, template: dict) -> Lookup:
    name = template["metadata"]["name"]

    def found(ns: str, kind: str, wanted: str):
        if (ns, kind, wanted) == (namespace, "ResourceClaimTemplate", name):
            return template
        return lookup(ns, kind, wanted)
    return found
