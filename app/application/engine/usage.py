"""What a pod, claim or template asks for, as the admin rules judge it: every claim it names and
every device-plugin ask as the claim it would be (judging.Usage). Pure: claims the pod names
are read through a lookup the caller gives."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from app import dra
from app.common import submap
from app.common import metadata_of, view_of
from .extended import as_claim_spec, dra_extended_asks
from .judging import Claim, Subject, Usage, Violation, applies, judge
from app.migration import (MIGRATION_ANNOTATION, TEMPLATE_PREFIX, PlanStatus, legacy_asks, legacy_resources, plan_pod,
                           pod_errors, recreated, whole_devices)
from app.policy import Policy

Lookup = Callable[[str, str, str], "dict | None"]  # (namespace, kind, name) -> the object, None: not found
# namespace -> its ResourceClaims now (maxDevicesPerNamespace); None: not known, not judged
NamespaceClaims = Callable[[str], list[dict]] | None


def no_lookup(_namespace: str, _kind: str, _name: str) -> None:
    return None


class KnownClaims:
    """The claims, templates, PodGroups and pods among a set of objects (files, a cluster's listing):
    the lookup a pod's claims and group (and a scheduler's claim its pod) are read through, and
    each namespace's ResourceClaims."""

    def __init__(self, objects, default_namespace: str = "default"):
        self._by_key: dict[tuple, dict] = {}
        self._by_namespace: dict[str, list[dict]] = {}
        for obj in objects:
            view = view_of(obj)
            if (view.kind not in dra.CLAIM_KINDS and view.kind not in ("PodGroup", "Pod")) or not metadata_of(obj):
                continue
            namespace = view.namespace or default_namespace
            self._by_key[(namespace, view.kind, view.name)] = obj
            if obj["kind"] == "ResourceClaim":
                self._by_namespace.setdefault(namespace, []).append(obj)

    def lookup(self, namespace: str, kind: str, name: str) -> dict | None:
        return self._by_key.get((namespace, kind, name))

    def in_namespace(self, namespace: str) -> list[dict]:
        return self._by_namespace.get(namespace, [])


def claim_usage(obj: dict, label: str) -> Usage:
    """ClaimError when the object is malformed (the caller reports it)."""
    return Usage([Claim(label, dra.parse_claim_object(obj))])


def pod_usage(pod: dict, policy: Policy, namespace: str, lookup: Lookup = no_lookup,
              generated: Sequence[dict] = (), equivalent: list[dict] | None = None,
              classes: dict[str, dict] | None = None, scheduler_claim: Claim | None = None) -> Usage:
    """generated: templates of this admission not yet in the API (by name); equivalent: what the
    pod's device-plugin asks would be as claims (None: planned here); classes: the DeviceClasses
    (their extendedResourceName: extended resources served through DRA); scheduler_claim: the
    claim the scheduler wrote for them, counted as it is instead."""
    usage = Usage()
    spec = submap(pod, "spec")
    known = {view_of(t).name: t for t in generated}
    for i, entry in enumerate(spec.get("resourceClaims") or []):
        if not isinstance(entry, dict):
            continue
        kind, name = (("ResourceClaimTemplate", entry.get("resourceClaimTemplateName"))
                      if entry.get("resourceClaimTemplateName") else ("ResourceClaim", entry.get("resourceClaimName")))
        if not isinstance(name, str) or not name:
            continue
        label = f"spec.resourceClaims[{i}] {entry.get('name')} ({kind} {name})"
        obj = known.get(name) if kind == "ResourceClaimTemplate" else None
        ours = obj is not None
        obj = obj or lookup(namespace, kind, name)
        if obj is None and kind == "ResourceClaimTemplate" and name.startswith(TEMPLATE_PREFIX):
            # A dry run's rewrite, never written (on another replica): the template our planner
            # writes for the asks the pod's migration record keeps, if that is the name it gives.
            obj = _recorded_template(pod, policy, namespace, name)
            ours = obj is not None
        if obj is None:  # a name is no pass: what cannot be read cannot be counted (fail closed)
            usage.unresolved.append(label)
            continue
        try:
            parsed = dra.parse_claim_object(obj)
        except dra.ClaimError as exc:
            usage.unresolved.append(f"{label}: {exc}")
            continue
        if ours:
            label = f"its device-plugin asks as the claim dra-bridge writes ({_asks(parsed)})"
        usage.claims.append(Claim(label, parsed, existing=name if kind == "ResourceClaim" else ""))
    served = dra_extended_asks(spec, policy, classes or {})
    if scheduler_claim is not None:
        usage.claims.append(scheduler_claim)
    elif served:  # the claim the scheduler creates for them (KEP-5004)
        asked = ", ".join(f"{path} {resource}: {count}" for path, resource, _c, count in served)
        usage.claims.append(Claim(f"extended resources ({asked}) as the claim the scheduler creates",
                                  as_claim_spec(served)))
    legacy = legacy_resources(spec, policy.migration)
    if legacy:
        usage.legacy = [f"{c}: {r}" for c, r in legacy]
        templates = equivalent if equivalent is not None else _as_claims(pod, policy, namespace)
        specs = []
        for template in templates:
            try:
                specs.append(dra.parse_claim_object(template))
            except dra.ClaimError:
                continue  # our own planner's output: its tests keep it parseable
        if not specs:  # no claim can say it (unmigratable): the counts as the device plugin takes them
            specs = [_counted(spec, policy)]
        for parsed in filter(lambda p: p.requests, specs):
            usage.claims.append(Claim(f"device-plugin asks ({', '.join(usage.legacy)}) as a claim ({_asks(parsed)})",
                                      parsed, legacy=True))
    return usage


def _recorded_template(pod: dict, policy: Policy, namespace: str, name: str) -> dict | None:
    if not view_of(pod).annotations.get(MIGRATION_ANNOTATION):
        return None
    return next((t for t in _as_claims(recreated(pod), policy, namespace) if view_of(t).name == name), None)


def _asks(parsed: dra.ClaimSpec) -> str:
    return ", ".join(f"{r.name}: {'all matching' if r.mode == 'All' else r.count}x {r.device_class}"
                     for alts in parsed.requests for r in alts[:1])


def _counted(spec: dict, policy: Policy) -> dra.ClaimSpec:
    """Whole devices per container from the count resources, where the planner cannot write a claim."""
    requests = []
    for ask in legacy_asks(spec, policy.migration).asks:
        found = policy.migration.rule_for(ask.resource)
        if found is None or found[0].role not in ("count", "countPercent") or not found[0].deviceClass:
            continue
        count = whole_devices(found[0], ask.count)
        if count > 0:
            requests.append([dra.Request(ask.container, found[0].deviceClass, [], count=count,
                                         path=f"{ask.path} {ask.resource}")])
    return dra.ClaimSpec(requests)


def _as_claims(pod: dict, policy: Policy, namespace: str) -> list[dict]:
    """The templates the planner would write for the pod's device-plugin asks alone."""
    spec = {k: v for k, v in pod["spec"].items() if k != "resourceClaims"}
    for key in ("containers", "initContainers"):
        if isinstance(spec.get(key), list):
            spec[key] = [_without_claims(c) for c in spec[key]]
    plan = plan_pod({"metadata": metadata_of(pod), "spec": spec}, policy.migration, namespace or None)
    return plan.templates if plan.status is PlanStatus.MIGRATED else []


def _without_claims(container):
    if not isinstance(container, dict) or not isinstance(container.get("resources"), dict):
        return container
    return {**container, "resources": {k: v for k, v in container["resources"].items() if k != "claims"}}


def subject_of(kind: str, obj: dict, namespace: str, namespace_labels: dict | None, user_info: dict | None) -> Subject:
    labels = view_of(obj).labels
    info = user_info if isinstance(user_info, dict) else {}
    groups = info.get("groups")
    groups = groups if isinstance(groups, list) else []
    return Subject(kind, namespace, namespace_labels, labels, str(info.get("username") or ""),
                   tuple(map(str, groups)), obj)


@dataclass
class PodJudgment:
    violations: list[Violation]
    usage: Usage
    not_judged: list[str] = field(default_factory=list)  # rules (or parts) nobody could judge here

    @property
    def denial(self) -> str | None:
        denied = [v.message for v in self.violations if "Deny" in v.actions]
        return " | ".join(denied) if denied else None


def judge_pod(pod: dict, subject: Subject, policy: Policy, index: dra.Index | None, lookup: Lookup = no_lookup,
              generated: Sequence[dict] = (), equivalent: list[dict] | None = None,
              namespace_claims: NamespaceClaims = None, requester_known: bool = True) -> PodJudgment:
    """requester_known False (a preview): rules that exempt users, groups or service accounts
    are not judged and are named instead (who creates the pod decides them)."""
    if pod_errors(pod):
        return PodJudgment([], Usage())
    usage = pod_usage(pod, policy, subject.namespace, lookup, generated, equivalent,
                      index.classes if index is not None else None)
    claims_known = namespace_claims is not None
    rules, not_judged = judgeable(policy.rules_for(subject.namespace, subject.namespace_labels or {}), subject,
                                  requester_known, claims_known)
    violations = judge(rules, subject, usage, index, of_namespace(namespace_claims, subject.namespace))
    counted = [r for r in rules if (r.maxDevicesPerPod or r.maxDevicesPerNamespace) and applies(r, subject)]
    for rule in counted if usage.unresolved else ():
        if claims_known or requester_known:  # the request itself (or every claim was read): it is not there
            violations.append(Violation(rule.name, tuple(rule.validationActions), (
                f"rule {rule.name}: {usage.unresolved[0]} does not exist: the pod's devices cannot be counted "
                "without it. Create the claim (or template) first, then the pod")))
        else:
            not_judged.append(f"rule {rule.name}: not judged: {usage.unresolved[0]} is not among the claims given")
    return PodJudgment(violations, usage, not_judged)


def needs_requester(rule) -> bool:
    """Whether who sends the object decides the rule (its exclude names users, groups or accounts)."""
    ex = rule.exclude
    return ex is not None and bool(ex.users or ex.groups or ex.serviceAccounts)


def judgeable(rules: list, subject: Subject, requester_known: bool, claims_known: bool) -> tuple[list, list[str]]:
    """(The rules that can be judged here, what of the applying ones cannot, said.)"""
    out, said = [], []
    for rule in rules:
        if not requester_known and needs_requester(rule):
            if applies(rule, subject):
                said.append(f"rule {rule.name}: not judged: depends on the requester (it exempts users, groups or "
                            "service accounts)")
            continue
        if rule.maxDevicesPerNamespace and not claims_known and subject.kind != "ResourceClaimTemplate" \
                and applies(rule, subject):
            said.append(f"rule {rule.name}: maxDevicesPerNamespace not judged: the namespace's claims are not known "
                        "(give them: kubectl get resourceclaims -A -o yaml)")
        out.append(rule)
    return out, said


def of_namespace(namespace_claims: NamespaceClaims, namespace: str):
    """The guard's `namespace_claims` for one namespace (None stays None: not judged)."""
    return None if namespace_claims is None else (lambda: namespace_claims(namespace))
