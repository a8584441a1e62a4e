"""ResourceQuotas on legacy GPU resources, and the DeviceClass quota that counts migrated pods. Pure.

A quota on `requests.nvidia.com/gpu` counts pods' extended resources; a rewritten pod asks for
a ResourceClaim instead, which the quota system counts as
`<deviceclass>.deviceclass.resource.k8s.io/devices` (Kubernetes 1.34+). Without that key the
namespace's GPU budget silently stops applying to migrated pods.
"""

from __future__ import annotations

from app.common import submap
from app.common import controller_ref, metadata_of, vocabulary
from collections.abc import Mapping

from app.policy import MigrationRules

DRA_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"
# KEP-5004's implicit extended resource of a class, as a quota key (requests.<that>).
IMPLICIT_CLASS_KEY = "requests.deviceclass.resource.kubernetes.io/"
KUEUE_QUEUE = vocabulary.KUEUE_QUEUE_LABEL
KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_MANAGED = "kueue.x-k8s.io/managed"
# Owners whose pods Kueue admits one by one (its pod, Deployment, StatefulSet and LeaderWorkerSet
# integrations): it builds each Workload from the pod after admission webhooks ran. A Job-like
# owner is admitted from its own template, before its pods exist.
PER_POD_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "LeaderWorkerSet"})


def kueue_per_pod(pod: dict) -> str | None:
    """The queue of a pod Kueue admits by itself (its quota counts this pod's requests); None
    when Kueue does not, or admits the Job that owns it."""
    meta = metadata_of(pod)
    labels = submap(meta, "labels")
    queue = labels.get(KUEUE_QUEUE)
    if not queue and labels.get(KUEUE_MANAGED) != "true":
        return None
    controller = controller_ref(pod)
    if controller is not None and controller.get("kind") not in PER_POD_OWNERS and KUEUE_GROUP not in labels:
        return None
    return str(queue or "(managed)")


def counted_by(hard: Mapping, resource: str, device_class: str, extended: Mapping[str, str] | None) -> str | None:
    """The key of a quota's `hard` under which a claim of `device_class` is counted against its
    limit on `resource` (Kubernetes 1.36+): requests.<resource> when the class declares it as its
    extendedResourceName, else the class's own key where limited, or its implicit extended
    resource key (which quota matches only for a class declaring an extendedResourceName); None:
    not counted."""
    if (extended or {}).get(device_class) == resource:
        return f"requests.{resource}"
    own = f"{device_class}{DRA_QUOTA_SUFFIX}"
    if own in hard:
        return own
    implicit = f"{IMPLICIT_CLASS_KEY}{device_class}"
    return implicit if device_class in (extended or {}) and implicit in hard else None


def quota_escapes(quotas: list[tuple[str, dict]], resources: list[str], classes: list[str],
                  extended: Mapping[str, str] | None = None) -> str | None:
    """Why a rewritten pod would escape a ResourceQuota of its namespace: it limits a legacy
    resource that the claim's DeviceClass is counted by neither way, by the class's own key or
    (1.36+, KEP-5004) under requests.<resource> because the class declares it as its
    extendedResourceName; None when every GPU quota counts it."""
    for name, hard in quotas:
        for resource in resources:
            key = f"requests.{resource}"
            if key not in hard:
                continue
            for cls in classes:
                if counted_by(hard, resource, cls, extended):
                    continue
                own = f"{cls}{DRA_QUOTA_SUFFIX}"
                return (f"ResourceQuota {name} limits {key} but not {own}, and DeviceClass {cls} does not declare "
                        f"extendedResourceName {resource}: the rewritten pod's claim would not be counted (add "
                        f"{own}: {hard[key]}, as `dra-bridge plan` proposes)")
    return None


def _resource(key: str) -> str:
    return key[len("requests."):] if key.startswith("requests.") else key


def quota_additions(quota: dict, rules: MigrationRules,
                    extended: Mapping[str, str] | None = None) -> tuple[dict[str, str], list[str]]:
    """Hard limits to add (DeviceClass quota key -> value) and a note per legacy GPU limit.
    extended: DeviceClass -> its extendedResourceName (a class declaring the limited resource is
    counted under that limit already, Kubernetes 1.36+)."""
    hard = ((quota.get("spec") or {}).get("hard") or {}) if isinstance(quota, dict) else {}
    if not isinstance(hard, dict):
        return {}, []
    additions: dict[str, str] = {}
    notes: list[str] = []
    for key, value in hard.items():
        if not isinstance(key, str) or key.startswith("limits."):
            continue
        found = rules.rule_for(_resource(key))
        device_class = found[0].deviceClass if found is not None else None
        if found is None or found[0].role not in ("count", "countPercent") or not device_class:
            continue
        rule = found[0]
        target = f"{device_class}{DRA_QUOTA_SUFFIX}"
        counted = counted_by(hard, _resource(key), device_class, extended)
        if counted == f"requests.{_resource(key)}":  # through the class's extendedResourceName
            notes.append(f"{key}: counts migrated pods already: DeviceClass {rule.deviceClass} declares "
                         f"extendedResourceName {_resource(key)}, so its claims count under {key} (one budget)")
            continue
        if counted is not None:
            notes.append(f"{key}: migrated pods are counted by {target}, limited to {hard[target]}")
            continue
        if target in additions:
            notes.append(f"{key}: shares {target} with another GPU quota; the first value is kept")
            continue
        additions[target] = str(value)
        scope = " (all MIG profiles together)" if rule.deviceType == "mig" else ""
        notes.append(f"{key}: migrated pods are counted by {target}{scope}; add it with the same value "
                     f"{value} (keep {key} for pods left on the native or legacy path). The two limits are "
                     f"apart: pods on both sides can hold up to twice {value} together, unless DeviceClass "
                     f"{rule.deviceClass} declares extendedResourceName {_resource(key)} (Kubernetes 1.36+: its "
                     f"claims then count under {key} too, one budget)")
    return additions, notes
