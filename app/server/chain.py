"""What the API server answers for one object with both our webhooks in its chain: /mutate
(pods: the rewrite, or a denial by the admin rules), then /validate on what /mutate admitted.
Pure: the webhooks' own functions on plain data, for offline previews (`policy test`, `check
--policy`), so a preview answers exactly as the cluster would."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import jsonpatch
import orjson

from app.common import metadata_of
from app import dra
from app.migration import Facts
from app.policy import Policy

from . import admission, mutation, validation
from .usage import Lookup, NamespaceClaims, no_lookup

RESULTS = ("allow", "audit", "warn", "deny")  # weakest to strongest


@dataclass
class Answer:
    result: str  # allow | audit | warn | deny: the strongest thing the chain did
    messages: list[str] = field(default_factory=list)  # the denial, warnings, audit annotations
    rules: set[str] = field(default_factory=set)  # admin rules that said something
    admitted: dict | None = None  # the object as stored (pods: after the rewrite); None when denied
    rewritten: bool = False  # /mutate moved the pod onto a generated ResourceClaimTemplate


def review_body(obj: dict, namespace: str, user: str, groups: list[str], dry_run: bool = False) -> bytes:
    kind = obj.get("kind", "")
    group, _, version = (obj.get("apiVersion") or "v1").rpartition("/")
    return orjson.dumps({"apiVersion": admission.API_VERSION, "kind": "AdmissionReview", "request": {
        "uid": "preview", "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "namespace": namespace, "operation": "CREATE", "name": metadata_of(obj).get("name", ""),
        "userInfo": {"username": user, "groups": groups}, "object": obj, "dryRun": dry_run}})


def answer(obj: dict, namespace: str, namespace_labels: dict | None, policy: Policy, index: dra.Index,
           facts: Facts | None = None, lookup: Lookup = no_lookup, user: str = "", groups: list[str] = (),
           namespace_claims: NamespaceClaims = None) -> Answer:
    req = admission.parse_review(review_body(obj, namespace, user, list(groups)))
    out = Answer("allow")
    rules_of = _rule_names(policy, namespace, namespace_labels)
    if req.kind == "Pod":
        mp = mutation.plan_request(req, policy, namespace_labels or {}, mutation.PlanCache(), facts, index, lookup,
                                   namespace_claims)
        response = mutation.respond(mp)["response"]
        if not _take(out, response, rules_of):
            return out
        out.rewritten = bool(mp.templates)
        if "patch" in response:
            obj = jsonpatch.apply_patch(obj, orjson.loads(base64.b64decode(response["patch"])))
        for template in mp.templates:  # written before the pod is: /validate finds them
            lookup = _with(lookup, namespace, template)
        req = admission.parse_review(review_body(obj, namespace, user, list(groups)))
    if not validation.applies(req):
        out.admitted = obj
        return out
    settings = policy.for_namespace(namespace, namespace_labels or {})
    subject = validation.subject_of(req.kind, req.obj, namespace, namespace_labels, req.raw.get("userInfo"))
    if req.kind == "Pod":
        outcome = validation.evaluate_pod(req.obj, policy, subject, index, lookup, namespace_claims)
    else:
        outcome = validation.evaluate_claim(req.obj, policy, settings, index, subject, namespace_claims)
    out.rules |= {f.rule for f in outcome.findings if f.rule and f.severity == "violation"}
    if outcome.acted("Audit"):
        out.result = "audit"
    if outcome.acted("Warn"):
        out.result = "warn"
    if _take(out, validation.respond(req, outcome, settings)["response"], rules_of):
        out.admitted = obj
    return out


def _take(out: Answer, response: dict, rules_of) -> bool:
    """Fold one webhook's answer in (its messages); False when it denied."""
    if not response["allowed"]:
        out.result = "deny"
        message = response.get("status", {}).get("message", "")
        out.messages.append(message)
        out.rules |= rules_of(message)
        return False
    out.messages.extend(f"warning: {w}" for w in response.get("warnings") or [])
    out.messages.extend(f"audit: {v}" for k, v in (response.get("auditAnnotations") or {}).items()
                        if k == "validation")
    return True


def _rule_names(policy: Policy, namespace: str, labels: dict | None):
    names = [r.name for r in policy.rules_for(namespace, labels or {})]
    return lambda text: {n for n in names if f"rule {n}:" in text}


def _with(lookup: Lookup, namespace: str, template: dict) -> Lookup:
    name = template["metadata"]["name"]

    def found(ns: str, kind: str, wanted: str):
        if (ns, kind, wanted) == (namespace, "ResourceClaimTemplate", name):
            return template
        return lookup(ns, kind, wanted)
    return found
