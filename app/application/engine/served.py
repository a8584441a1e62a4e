"""The claim the scheduler creates for a pod's extended resources (KEP-5004), judged on its CREATE
against the pod it serves: the pod's per-pod rules count this claim as it is written, with the
pod's other claims. A pod admitted before a rule (or while nothing judged it) gets no devices
past it. Pure: the pod is read through the caller's lookup."""

from __future__ import annotations

from dataclasses import replace

from app.common import view_of, vocabulary
from app.dra import ClaimSpec
from app.policy import Policy

from .judging import Claim, Subject, Violation, applies, judge
from .usage import Lookup, judgeable, pod_usage

EXTENDED_CLAIM_ANNOTATION = vocabulary.EXTENDED_CLAIM_ANNOTATION


def served_pod(claim: dict) -> str | None:
    """The name of the pod a scheduler's extended-resource claim serves; None: not such a claim."""
    view = view_of(claim)
    if view.kind != "ResourceClaim" or view.annotations.get(EXTENDED_CLAIM_ANNOTATION) != "true":
        return None
    owner = view.owner
    if owner is None or owner.get("kind") != "Pod" or not isinstance(owner.get("name"), str):
        return None
    return owner["name"]


def judge_served(claim: dict, spec: ClaimSpec, claim_subject: Subject, policy: Policy, index,
                 lookup: Lookup) -> list[Violation]:
    """Violations of the per-pod rules of the pod `claim` serves, with `spec` (the claim parsed) in
    place of what the pod's extended resources were modelled as. Rules that exempt users, groups
    or service accounts are left out: who created the pod is not known here (it was judged then).
    A pod that cannot be found refuses under each per-pod rule of the namespace: nothing to count."""
    name = served_pod(claim)
    if name is None:
        return []
    namespace = claim_subject.namespace
    pod = lookup(namespace, "Pod", name)
    label = f"the scheduler's claim {view_of(claim).name or '(generated)'} for pod {name}'s extended resources"
    if not isinstance(pod, dict) or not isinstance(pod.get("spec"), dict):
        stand_in = replace(claim_subject, kind="Pod", labels={}, obj=None)
        return [Violation(r.name, tuple(r.validationActions or ()),
                          f"rule {r.name}: {label}: the pod it serves cannot be read, so its devices cannot be counted")
                for r in policy.rules_for(namespace, claim_subject.namespace_labels or {})
                if r.maxDevicesPerPod and applies(r, stand_in)]
    subject = Subject("Pod", namespace, claim_subject.namespace_labels, view_of(pod).labels, obj=pod)
    usage = pod_usage(pod, policy, namespace, lookup, classes=index.classes if index is not None else None,
                      scheduler_claim=Claim(label, spec, existing=view_of(claim).name))
    rules, _said = judgeable(policy.rules_for(namespace, subject.namespace_labels or {}), subject,
                             requester_known=False, claims_known=False)
    return judge([_pod_part(r, claim_subject) for r in rules if applies(r, subject)], subject, usage, index)


CLAIM_FIELDS: dict[str, object] = {"maxDevicesPerRequest": None, "maxDevicesPerClaim": None, "allowedDeviceClasses": None,
                "allowAdminAccess": None, "adminAccessNamespaces": None, "requireSelectors": [],
                "allowedDevices": None, "validations": []}


def _pod_part(rule, claim_subject: Subject):
    """What of a rule the pod adds: a rule that judges the claim itself too keeps only its per-pod
    count (the rest was judged on the claim); the namespace total and the pod's device-plugin
    asks are not this claim's (judged on the claim, and on the pod when it was admitted)."""
    keep: dict[str, object] = {"maxDevicesPerNamespace": None, "forbidLegacy": None}
    if applies(rule, claim_subject):
        keep.update(CLAIM_FIELDS)
    return rule.model_copy(update=keep)
