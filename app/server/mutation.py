"""/mutate decisions: admission request + policy -> plan -> AdmissionReview response. Pure.

The one IO step (ensuring templates exist) happens between `plan_request` and `respond`,
in the webhook, and its outcome is passed in.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

import orjson

from app import dra
from app.migration import (MIGRATION_ANNOTATION, Choice, ClusterSharing, Facts, KueueView, Plan, ShareableDevices,
                           decide, extended_resources, kueue_per_pod, patch_diff, plan_pod, plugin_nodes,
                           served_resources)
from app.policy import Effective, MigrationRules, Policy

from . import admission, validation


@dataclass
class MutationPlan:
    request: admission.Request
    settings: Effective | None
    plan: Plan
    patch: bytes | None = None
    path: Choice | None = None  # native or legacy: the pod is left as it is
    refused: str | None = None  # the admin rules deny the pod as it would be admitted: answered with a denial

    @property
    def templates(self) -> list[dict]:
        return self.plan.templates if self.plan.status == "migrated" and self.refused is None else []

    @property
    def outcome(self) -> str:
        return self.path.path if self.path is not None else self.plan.status


def _planner_input(pod: dict, strip_volumes: bool = True) -> dict:
    # The planner reads and rewrites only these: the patch from this view equals the full one.
    meta = pod.get("metadata") if isinstance(pod.get("metadata"), dict) else {}
    view_meta = {"annotations": meta["annotations"]} if "annotations" in meta else {}
    spec = pod.get("spec")
    if strip_volumes and isinstance(spec, dict):
        spec = _without_volumes(spec)
    return {"metadata": view_meta, "spec": spec}


_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")


def _without_volumes(spec: dict) -> dict:
    """The API server gives every pod a token volume of its own name (kube-api-access-<random>)
    before we see it: volumes and volumeMounts, which the planner never reads, would make each
    pod of a workload a new shape. Left out of the view (and so of the cache key)."""
    out = {k: v for k, v in spec.items() if k != "volumes"}
    for key in _CONTAINER_LISTS:
        containers = spec.get(key)
        if isinstance(containers, list):
            out[key] = [{k: v for k, v in c.items() if k != "volumeMounts"} if isinstance(c, dict) else c
                        for c in containers]
    return out


def _touches_whole_containers(patch: bytes) -> bool:
    """An operation on the spec, a container list or a whole container would write the view
    (without volumes) over the pod: such a patch is only valid for the full view."""
    for op in orjson.loads(patch):
        parts = op.get("path", "").split("/")
        for path in filter(None, (parts, op.get("from", "").split("/") if op.get("from") else None)):
            if len(path) <= 2 or path[2] == "volumes" or (path[2] in _CONTAINER_LISTS and len(path) <= 4):
                return True
    return False


class PlanCache:
    """Pods of one workload differ only in name and labels: plan each shape once.

    Keyed by the planner's whole input (namespace, spec, annotations) under one set of rules,
    so a hit is exactly what planning again would return. New rules (a policy reload) empty it.
    Bounded LRU.
    """

    def __init__(self, size: int = 4096):
        self.size = size
        self._items: OrderedDict[tuple, tuple[Plan, bytes | None]] = OrderedDict()
        self._rules: MigrationRules | None = None
        self._sharing: ClusterSharing | None = None
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def plan(self, pod: dict, rules: MigrationRules, namespace: str | None,
             sharing: ClusterSharing | None = None) -> tuple[Plan, bytes | None]:
        view = _planner_input(pod)
        key = shape_key(pod, namespace, view)
        if key is None:
            return _plan_and_patch(view, rules, namespace, sharing, pod)[:2]
        with self._lock:
            # Holding references: an id() could be reused after a reload or a new inventory.
            if self._rules is not rules or self._sharing != sharing:
                self._items.clear()
                self._rules, self._sharing = rules, sharing
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
                self.hits += 1
                return found
        plan, patch, reusable = _plan_and_patch(view, rules, namespace, sharing, pod)
        result = (plan, patch)
        with self._lock:
            self.misses += 1
            if not reusable or self._rules is not rules or self._sharing != sharing:
                return result  # this pod's own, or rules changed while we planned: not filed
            self._items[key] = result
            if len(self._items) > self.size:
                self._items.popitem(last=False)
        return result


def _plan_and_patch(view: dict, rules: MigrationRules, namespace: str | None,
                    sharing: ClusterSharing | None, pod: dict | None = None) -> tuple[Plan, bytes | None, bool]:
    """(plan, patch, valid for every pod of this view). `pod`: the whole pod, planned instead
    when the view's patch would not be valid for it (then the result is this pod's alone)."""
    plan = plan_pod(view, rules, namespace, sharing)
    patch = patch_diff(view, plan.pod) if plan.status == "migrated" else None
    if patch is not None and pod is not None and _touches_whole_containers(patch):
        plan, patch, _ = _plan_and_patch(_planner_input(pod, strip_volumes=False), rules, namespace, sharing)
        return plan, patch, False
    return plan, patch, True


_DEFAULT_CACHE = PlanCache()


def shape_key(pod: dict, namespace: str | None, view: dict | None = None) -> tuple | None:
    """What a pod's migration depends on, beside the rules: its namespace, planner view and the
    Kueue queue that admits it by itself (the path choice reads it; None: not serializable,
    never cached)."""
    try:
        return (namespace, orjson.dumps(view if view is not None else _planner_input(pod), option=orjson.OPT_SORT_KEYS),
                kueue_per_pod(pod))
    except TypeError:
        return None


def index_facts(index: dra.Index, rules: MigrationRules, judge, kueue: KueueView | None = None) -> Facts:
    """What an inventory index tells the planner and the path choice; judge(template) -> (state, why)
    (TemplateVerdicts.dra); kueue: Kueue's configuration as read."""
    sharing_labels = [r.label for r in rules.nodeLabels if r.translate == "sharing"]
    shareable = {name: ShareableDevices(caps, sizes)
                 for name, (caps, sizes) in dra.shareable_classes(index, rules.sharing.memoryCapacity).items()}
    nodes = [node for node, positions in index.by_node.items() if positions]
    sharing = ClusterSharing(shareable, dra.time_sliced(index.node_labels, nodes, sharing_labels))
    return Facts(served_resources(index.classes), judge, sharing, plugin_nodes(index.node_resources), index.quotas,
                 extended_resources(index.classes), kueue)


def plan_request(req: admission.Request, policy: Policy, namespace_labels: dict[str, str],
                 cache: PlanCache = _DEFAULT_CACHE, facts: Facts | None = None, index: dra.Index | None = None,
                 lookup: validation.Lookup = validation.no_lookup,
                 namespace_claims: validation.NamespaceClaims = None) -> MutationPlan:
    """facts: what the cluster serves (paths.Facts); None keeps every pod on the rewrite path.
    The decision is migration.decide's, as every preview takes it; a pod the admin rules deny
    (as it would be admitted: rewritten, or as the claims its device-plugin asks would be) is
    denied here, real request or dry run alike, and nothing is written for it."""
    if req.kind != "Pod" or req.operation != "CREATE" or req.obj is None:
        # Pod UPDATE is never mutated: most pod spec fields are immutable after creation.
        return MutationPlan(req, None, Plan("unchanged", reason=f"{req.kind} {req.operation} is not mutated"))
    found = decide(req.obj, req.namespace, namespace_labels, policy, facts, planner=cache.plan,
                   refuse=validation.refusal(index, lookup, req.raw.get("userInfo"), namespace_claims))
    return MutationPlan(req, found.settings, found.plan, found.patch, found.path, found.refused)


def respond(mp: MutationPlan, ensure_error: str | None = None) -> dict:
    """The AdmissionReview response; `ensure_error` says the template could not be created."""
    req, plan, settings = mp.request, mp.plan, mp.settings
    if mp.refused is not None:
        return admission.response(req.uid, False, code=422, message=(
            f"dra-bridge: pod {req.namespace}/{req.name or '(generated)'}: {mp.refused}")[:4000])
    if plan.status == "unchanged":
        audit = {"path": f"{mp.path.path}: {mp.path.reason}"[:1000]} if mp.path is not None else None
        return admission.response(req.uid, True, warnings=plan.warnings or None, audit=audit)
    if plan.status == "unmigratable":
        if settings.onUnmigratable == "deny":
            return admission.response(req.uid, False, code=403,
                                      message=f"dra-bridge: pod cannot be migrated to DRA: {plan.reason}")
        return admission.response(req.uid, True, warnings=plan.warnings)
    if ensure_error is not None:
        if settings.onTemplateError == "deny":
            return admission.response(req.uid, False, code=503,
                                      message=f"dra-bridge: could not create ResourceClaimTemplate: {ensure_error}")
        return admission.response(req.uid, True, warnings=[
            f"pod admitted unmigrated: could not create ResourceClaimTemplate ({ensure_error})"])
    template = plan.rewritten.get("template", "")
    return admission.response(
        req.uid, True, patch=mp.patch, warnings=plan.warnings,
        audit={MIGRATION_ANNOTATION.split("/")[1]: template or "removed-zero-count-requests"})
