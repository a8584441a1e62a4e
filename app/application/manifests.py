"""Manifest planning: each object of a set of manifests (or an export) judged as the webhook
judges the pods its templates make (decide_pod, on the one ClusterFacts), with what DRA cannot
know of it: GPU counts outside pod templates, operators' schedulers, cluster-scoped objects,
quotas. `plan` prints the result, `audit` reports it. Pure."""

from __future__ import annotations

import copy
import enum
from collections.abc import Iterable
from dataclasses import dataclass, field

from app import dra
from app.common import labels_by_name, view_of
from app.migration import (KueueView, OptIn, is_pod_spec, keep_ray_gpu_count, kueue_in_objects, left_to_admission,
                           legacy_resources, pod_templates, quota_additions)
from app.policy import MigrationRules, Policy

from .decision import Outcome, decide_pod
from .facts import ClusterFacts, cluster_facts, inventory_source

class ReportStatus(enum.StrEnum):
    """What one object of the manifests needs, read from its pods' outcomes."""

    MIGRATED = "migrated"  # its planned form differs: written onto DRA (or its quota extended)
    UNCHANGED = "unchanged"  # nothing to change
    UNSATISFIABLE = "unsatisfiable"  # rewritten, but the inventory cannot satisfy its claims
    NEEDS_ATTENTION = "needs-attention"  # not migratable as written: someone must act

    @property
    def needs_someone(self) -> bool:
        """Scripts and CI gates stop on it (exit status 1)."""
        return NEEDS_SOMEONE[self]


# Whether each status stops a script, in one place: a status added without a line here fails
# tests/unit/test_outcome_words.py.
NEEDS_SOMEONE: dict[ReportStatus, bool] = {
    ReportStatus.MIGRATED: False, ReportStatus.UNCHANGED: False, ReportStatus.UNSATISFIABLE: True,
    ReportStatus.NEEDS_ATTENTION: True}
STATUSES = tuple(ReportStatus)


@dataclass
class ObjectReport:
    source: str
    kind: str
    name: str
    namespace: str | None
    status: ReportStatus
    reasons: list[str] = field(default_factory=list)
    templates: list[str] = field(default_factory=list)
    # The Outcome of its pod templates (rewrite, native, legacy, denied, unmigratable; mixed:
    # "native+rewrite"); none: no GPU; admission: left as it is, its pods migrated at admission
    # (a controller reads its GPU count); quota: a Kueue quota on GPU resources
    path: str = "none"

    @property
    def quiet(self) -> bool:
        """Nothing to say of it: no GPU, nothing changed."""
        return self.status is ReportStatus.UNCHANGED and self.path == "none"


@dataclass
class PlanResult:
    objects: list[tuple[dict, dict]] = field(default_factory=list)  # (original, planned)
    templates: dict[tuple, dict] = field(default_factory=dict)
    reports: list[ObjectReport] = field(default_factory=list)


# Subtrees that name GPU resources without asking for any: tolerating a GPU taint (Kueue
# ResourceFlavors, node pools) or placing nodes is not a request.
NOT_REQUESTS = {"tolerations", "nodeTaints", "taints", "nodeSelector", "nodeLabels", "affinity"}
SCHEDULER_FIELDS = ("schedulerName", "batchScheduler", "batchSchedulerName")


def gpu_fields_outside_pods(obj: object, rules: MigrationRules, path: str = "", counts: bool = True) -> list[str]:
    """GPU requests in fields no pod spec holds (controller-specific shapes): legacy resource
    names as keys or values, and (counts) GPU counts of the custom resource's own (`gpu: 2`;
    not where its pod templates ask for GPUs themselves: KubeRay's num-gpus repeats them)."""
    found = []
    if isinstance(obj, dict):
        for key, value in obj.items():
            child = f"{path}.{key}" if path else str(key)
            if (key == "spec" and is_pod_spec(value)) or key in NOT_REQUESTS:
                continue
            if isinstance(key, str) and rules.rule_for(key):
                found.append(child)
            elif isinstance(value, str) and rules.rule_for(value):
                found.append(f"{child}={value}")
            # A domain-qualified name no rule knows (amd.com/gpu) is another vendor's: not ours to judge.
            elif counts and isinstance(key, str) and "/" not in key and "gpu" in key.lower() and _positive(value):
                found.append(f"{child}={value}")
            else:
                found.extend(gpu_fields_outside_pods(value, rules, child, counts))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            found.extend(gpu_fields_outside_pods(value, rules, f"{path}[{i}]", counts))
    return found


def _positive(value) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return False
    try:
        return float(value) > 0
    except ValueError:
        return False


def operator_scheduler(obj: object, path: str = "") -> tuple[str, str] | None:
    """(field, scheduler) a custom resource names for the pods its operator creates (Volcano's
    spec.schedulerName, Spark's spec.batchScheduler), outside any pod spec."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            child = f"{path}.{key}" if path else str(key)
            if key in SCHEDULER_FIELDS and isinstance(value, str) and value:
                return child, value
            if not (key == "spec" and is_pod_spec(value)) and key not in ("metadata", "status"):
                found = operator_scheduler(value, child)
                if found:
                    return found
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            found = operator_scheduler(value, f"{path}[{i}]")
            if found:
                return found
    return None


def objects_of(inputs) -> list[dict]:
    """Every object of the inputs ((source, [(line, object)]) as the CLI reads them)."""
    return [obj for _source, objects in inputs for _line, obj in objects if isinstance(obj, dict)]


def kueue_of_inputs(inputs) -> KueueView | None:
    """Kueue's view from an export (migration.kueue_in_objects)."""
    return kueue_in_objects(objects_of(inputs))


def manifest_facts(inputs, policy: Policy, index: dra.Index | None = None, source: str = "",
                   release=None) -> ClusterFacts:
    """The facts of a set of manifests or an export, with an inventory where one was given: the
    Namespaces, claims, DeviceClasses and Kueue configuration among them (cluster_facts), read as
    `release` (else the index's) keeps them."""
    return cluster_facts(policy, index, source=inventory_source(index, source or "inventory", release),
                         objects=objects_of(inputs), kueue=kueue_of_inputs(inputs), namespaces=namespace_labels(inputs),
                         release=release)


def plan_objects(inputs, policy: Policy, namespace: str | None, facts: ClusterFacts | None = None,
                 opt_in: OptIn | None = None) -> PlanResult:
    """facts: the cluster's (cluster_facts: the inventory, the namespaces' labels where known,
    the claims pods name and namespaces hold, Kueue's view; None: manifest_facts of the inputs
    alone); opt_in: the webhooks' namespace label, judged where the namespaces' labels are known."""
    if facts is None:
        facts = manifest_facts(inputs, policy)
    rules = policy.migration
    result = PlanResult()
    verdicts = facts.verdicts
    if facts.namespaces is None:
        opt_in = None
    for source, objects in inputs:
        for line, obj in objects:
            obj = _reviewed_object(obj)
            view = view_of(obj)
            ns = view.namespace or namespace
            report = ObjectReport(f"{source}:{line}", view.kind or "?", view.shown(), ns, ReportStatus.UNCHANGED)
            planned = copy.deepcopy(obj)
            if obj.get("kind") == "ResourceQuota":
                additions, notes = quota_additions(obj, rules, facts.path.extended)
                if additions:
                    planned.setdefault("spec", {}).setdefault("hard", {}).update(additions)
                    report.status, report.path = ReportStatus.MIGRATED, Outcome.REWRITE.value
                    report.reasons.extend(notes)
                result.objects.append((obj, planned))
                result.reports.append(report)
                continue
            if str(obj.get("apiVersion", "")).startswith("resource.k8s.io/") or _describes_nodes(obj):
                # DRA's own objects (a DeviceClass declaring nvidia.com/gpu) and Nodes (what the
                # device plugin advertises, in a cluster export) are inventory: they request nothing.
                result.objects.append((obj, planned))
                result.reports.append(report)
                continue
            asks_gpus = any(legacy_resources(h.get("spec") or {}, rules) for _p, h in pod_templates(obj))
            if str(obj.get("kind", "")).startswith("Cluster") and asks_gpus:
                # Its pods run in whichever namespaces use it: no namespaced template fits them all.
                report.status = ReportStatus.NEEDS_ATTENTION
                report.reasons.append(f"cluster-scoped {obj['kind']}: its pods run in the namespaces that use it; "
                                      "left as it is, they are migrated at admission there")
                result.objects.append((obj, planned))
                result.reports.append(report)
                continue
            named = operator_scheduler(obj) if obj.get("kind") != "Pod" else None
            if named and named[1] not in rules.draSchedulers and (asks_gpus or gpu_fields_outside_pods(obj, rules)):
                report.path = Outcome.LEGACY.value
                report.reasons.append(f"{named[0]}={named[1]}: its operator gives its pods scheduler {named[1]!r}, "
                                      "not one the policy lists as allocating ResourceClaims (migration.draSchedulers): "
                                      "left on the device plugin")
                result.objects.append((obj, planned))
                result.reports.append(report)
                continue
            why = left_to_admission(obj)
            if why and asks_gpus:
                report.path = "admission"
                report.reasons.append(f"left for the admission webhook: {why}")
                result.objects.append((obj, planned))
                result.reports.append(report)
                continue
            paths = []
            replicas = (obj.get("spec") or {}).get("replicas") if isinstance(obj.get("spec"), dict) else None
            for path, holder in list(pod_templates(planned)):
                original = copy.deepcopy(holder)
                chosen_path = _plan_template(holder, path or "spec", policy, ns, verdicts, report, result, facts,
                                             replicas if isinstance(replicas, int) and replicas > 1 else 1, opt_in)
                note = keep_ray_gpu_count(planned, path, original) if chosen_path is Outcome.REWRITE else None
                if note:
                    report.reasons.append(f"{path}: {note}")
                paths.append(chosen_path)
            chosen = sorted({p.value for p in paths if p})
            report.path = "+".join(chosen) if chosen else "none"
            outside = gpu_fields_outside_pods(obj, rules, counts=not asks_gpus)
            if outside and str(obj.get("apiVersion", "")).startswith("kueue.x-k8s.io/"):
                report.path = "quota"
                report.reasons.append(f"Kueue quota on GPU resources ({', '.join(outside[:3])}): Jobs are admitted from "
                                      "their templates (still counted); pods Kueue admits one by one are rewritten only "
                                      "onto DeviceClasses Kueue counts as the resource (its deviceClassMappings, or "
                                      "migration.kueueDeviceClasses); `audit` adds up each queue's use")
            elif outside:
                report.status = ReportStatus.NEEDS_ATTENTION
                report.reasons.append(f"GPU requests outside a pod template ({', '.join(outside[:3])}): the operator "
                                      "that renders its pods decides how many GPUs they ask for; dra-bridge migrates "
                                      "those pods at admission")
            if report.status is ReportStatus.UNCHANGED and planned != obj:
                report.status = ReportStatus.MIGRATED
            if planned != obj and ns and not view.namespace and report.templates:
                # The templates go to `ns`: the object must too, or its pods miss them.
                planned.setdefault("metadata", {})["namespace"] = ns
            result.objects.append((obj, planned))
            result.reports.append(report)
    return result


def _describes_nodes(obj: dict) -> bool:
    return obj.get("apiVersion") == "v1" and obj.get("kind") == "Node"


# Left on the device plugin until the admin acts: a policy choice (a share's cost), a quota key,
# a Kueue mapping.
NEEDS_ADMIN = frozenset({"share", "quota", "kueue"})


def _reviewed_object(obj: dict) -> dict:
    """An AdmissionReview stands for the object it reviews (its namespace kept)."""
    request = obj.get("request") if obj.get("kind") == "AdmissionReview" else None
    reviewed = request.get("object") if isinstance(request, dict) else None
    if not isinstance(reviewed, dict) or not isinstance(request, dict):
        return obj
    reviewed = copy.deepcopy(reviewed)
    meta = reviewed.setdefault("metadata", {})
    if isinstance(meta, dict) and request.get("namespace") and not meta.get("namespace"):
        meta["namespace"] = request["namespace"]
    return reviewed


def _plan_template(holder, where, policy: Policy, ns, verdicts, report, result, facts: ClusterFacts,
                   replicas: int = 1, opt_in: OptIn | None = None) -> Outcome | None:
    """Plan one pod template in place, as the webhook decides its pods (decide_pod); the outcome
    it reports (None: nothing to migrate)."""
    found = decide_pod(holder, ns or "", policy, facts, opt_in=opt_in)
    outcome, plan, choice = found.outcome, found.planned, found.path
    report.reasons.extend(f"{where}: {said}" for said in found.not_judged if said not in report.reasons)
    if outcome is Outcome.DENIED:  # as the webhook answers it: a denial
        report.status = ReportStatus.NEEDS_ATTENTION
        report.reasons.append(f"{where}: its pods are denied: {found.refused}")
        return outcome
    if outcome in (Outcome.NATIVE, Outcome.LEGACY) and choice is not None:  # left as it is
        report.reasons.append(f"{where}: {choice.path}: {choice.reason}")
        if choice.code in NEEDS_ADMIN:
            report.status = ReportStatus.NEEDS_ATTENTION
            if choice.code == "share" and replicas > 1 and plan is not None:
                report.reasons.append(f"{where}: for {replicas} replicas: {_whole_gpus(plan) * replicas} whole "
                                      "GPU(s) where the device plugin shared fewer")
        return outcome
    if plan is None:  # not planned: the webhook leaves the namespace's pods as written
        if legacy_resources(holder.get("spec") or {}, policy.migration):
            report.reasons.append(f"{where}: legacy: {found.plan.reason}")
            return Outcome.LEGACY  # its GPUs stay on the device plugin
        return None
    if outcome is Outcome.UNMIGRATABLE:
        report.status = ReportStatus.NEEDS_ATTENTION
        report.reasons.append(f"{where}: {plan.reason}")
        return outcome
    report.reasons.extend(f"{where}: {w}" for w in plan.warnings)
    if plan.other_system:
        return Outcome.LEGACY  # GPUs another scheduler shares (KAI): counted, left as they are
    if outcome is not Outcome.REWRITE:
        return None
    holder.clear()
    holder.update(plan.pod)
    for template in plan.templates:
        meta = template["metadata"]
        result.templates[(meta.get("namespace", ""), meta["name"])] = template
        report.templates.append(meta["name"])
        if verdicts is not None:
            verdict = verdicts(template)  # judged once: the path choice may have asked already
            if verdict.status != "satisfiable":
                report.status = ReportStatus.UNSATISFIABLE
                hint = f" (closest: {verdict.closest[0]})" if verdict.closest else ""
                report.reasons.append(f"{where}: {verdict.status}: {verdict.message}{hint}")
    return outcome


def _whole_gpus(plan) -> int:
    """Devices one pod's claims ask for (what a share now costs per replica), counted as the
    policy engine counts a claim (ClaimSpec.most_devices)."""
    return sum(dra.parse_claim_object(template).most_devices() for template in plan.templates)


def namespace_labels(inputs) -> dict[str, dict] | None:
    """The labels of the Namespace objects among the inputs (None: none given): their policy
    rules and the opt-in label then decide, as for the webhook."""
    return labels_by_name(o for _source, objects in inputs for _line, o in objects
                          if o.get("kind") == "Namespace") or None


def exit_status(statuses: Iterable[str]) -> int:
    """1 when an object needs someone (unsatisfiable here, or not migratable as written): scripts
    and CI gates stop on it; 0 otherwise (migrated, or unchanged)."""
    return 1 if any(ReportStatus(s).needs_someone for s in statuses) else 0
