"""The planner with its patch, and a cache of it: pods of one workload differ only in name and
labels, so each shape is planned once (the webhook's cache; the offline chain plans uncached).
Pure but for the cache's lock."""

from __future__ import annotations

import threading
from collections import OrderedDict

import orjson

from app.common import metadata_of
from app.migration import ClusterSharing, Plan, PlanStatus, kueue_per_pod, patch_diff, plan_pod
from app.policy import MigrationRules


def _planner_input(pod: dict, strip_volumes: bool = True) -> dict:
    # The planner reads and rewrites only these: the patch from this view equals the full one.
    meta = metadata_of(pod)
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
             sharing: ClusterSharing | None = None, group_claims: frozenset[str] | None = None
             ) -> tuple[Plan, bytes | None]:
        view = _planner_input(pod)
        key = shape_key(pod, namespace, view)
        if key is None:
            return _plan_and_patch(view, rules, namespace, sharing, pod, group_claims)[:2]
        key = (*key, group_claims)
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
        plan, patch, reusable = _plan_and_patch(view, rules, namespace, sharing, pod, group_claims)
        result = (plan, patch)
        with self._lock:
            self.misses += 1
            if not reusable or self._rules is not rules or self._sharing != sharing:
                return result  # this pod's own, or rules changed while we planned: not filed
            self._items[key] = result
            if len(self._items) > self.size:
                self._items.popitem(last=False)
        return result


def _plan_and_patch(view: dict, rules: MigrationRules, namespace: str | None, sharing: ClusterSharing | None,
                    pod: dict | None = None, group_claims: frozenset[str] | None = None
                    ) -> tuple[Plan, bytes | None, bool]:
    """(plan, patch, valid for every pod of this view). `pod`: the whole pod, planned instead
    when the view's patch would not be valid for it (then the result is this pod's alone)."""
    plan = plan_pod(view, rules, namespace, sharing, group_claims)
    patch = patch_diff(view, plan.pod) if plan.status is PlanStatus.MIGRATED and plan.pod is not None else None
    if patch is not None and pod is not None and _touches_whole_containers(patch):
        plan, patch, _ = _plan_and_patch(_planner_input(pod, strip_volumes=False), rules, namespace, sharing,
                                         group_claims=group_claims)
        return plan, patch, False
    return plan, patch, True


def shape_key(pod: dict, namespace: str | None, view: dict | None = None) -> tuple | None:
    """What a pod's migration depends on, beside the rules: its namespace, planner view and the
    Kueue queue that admits it by itself (the path choice reads it; None: not serializable,
    never cached)."""
    try:
        return (namespace, orjson.dumps(view if view is not None else _planner_input(pod), option=orjson.OPT_SORT_KEYS),
                kueue_per_pod(pod))
    except TypeError:
        return None




def plan_with_patch(pod: dict, rules: MigrationRules, namespace: str | None, sharing: ClusterSharing | None = None,
                    group_claims: frozenset[str] | None = None) -> tuple[Plan, bytes | None]:
    """The planner and the rewrite's JSON patch, uncached (decide_pod's planner)."""
    return _plan_and_patch(_planner_input(pod), rules, namespace, sharing, pod, group_claims)[:2]
