"""The DRA side of GPU budgets: what a ResourceQuota or a Kueue ClusterQueue that limits legacy GPU
resources needs so that migrated pods' claims count against the same budget (`dra-bridge quota`).
Pure: objects in, proposed objects and notes out; nothing is written.

ResourceQuota (Kubernetes 1.36+, DRAExtendedResource): a claim of DeviceClass C is counted under
`C.deviceclass.resource.k8s.io/devices`, and also under `requests.R` when C declares
`extendedResourceName: R` (KEP-5004). So a quota on `requests.nvidia.com/gpu` already counts
the claims of a class that declares `nvidia.com/gpu`: one budget over both sides. For any other
class the class's own key is proposed with the same value: a second budget, as large, for the
DRA side (the note says so). Or, for one budget (`--budget one`, 1.36+), the class itself is
proposed declaring the resource.

Kueue counts a claim's devices against a ClusterQueue's resource only through its Configuration's
`resources.deviceClassMappings` (name: the resource, deviceClassNames: the classes); without one,
DRA usage counts as nothing (kueue#10504).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field

from app.common import submap
from app.common import BridgeError, metadata_of, view_of
from app.policy import MigrationRules

from .kueue import KUEUE_DRA_GATE, RESERVED_MAPPING, KueueView
from .quota import quota_additions


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass
class QuotaChange:
    quota: dict
    proposed: dict | None  # the quota with the DRA keys added; None: nothing to add
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        meta = metadata_of(self.quota)
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def clean_object(obj: dict) -> dict:
    """The object as `kubectl apply` takes it back: no status or server-set metadata."""
    out = {k: copy.deepcopy(v) for k, v in obj.items() if k != "status"}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: v for k, v in meta.items() if k in ("name", "namespace", "labels", "annotations")}
        annotations = out["metadata"].get("annotations")
        if isinstance(annotations, dict):  # kubectl's record of its last apply is not ours to propose
            out["metadata"]["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
            if not out["metadata"]["annotations"]:
                del out["metadata"]["annotations"]
    return out


def quota_changes(quotas: list[dict], rules: MigrationRules, extended: Mapping[str, str]) -> list[QuotaChange]:
    """One change per ResourceQuota that limits a legacy GPU resource (the others are not listed)."""
    out = []
    for quota in quotas:
        additions, notes = quota_additions(quota, rules, extended)
        if not notes:
            continue
        proposed = None
        if additions:
            proposed = clean_object(quota)
            proposed.setdefault("spec", {}).setdefault("hard", {}).update(additions)
        out.append(QuotaChange(clean_object(quota), proposed, notes))
    return out


def one_budget_classes(quotas: list[dict], classes: Mapping[str, dict],
                       rules: MigrationRules) -> tuple[list[dict], list[str]]:
    """DeviceClasses to apply so that every legacy GPU limit is one budget over both sides: the
    class our templates use for `requests.R` declaring `extendedResourceName: R` (1.36+, KEP-5004),
    and a note per class. A class declaring another resource already, a resource another class
    declares, or a class that stands for several resources (MIG profiles) is left alone: the
    split keys (quota_changes) still cover those."""
    declared = {c: (cls.get("spec") or {}).get("extendedResourceName") for c, cls in classes.items()}
    wanted: dict[str, set[str]] = {}  # class -> the limited resources it is the planner's class for
    for quota in quotas:
        hard = (quota.get("spec") or {}).get("hard") or {}
        for key in hard if isinstance(hard, dict) else ():
            if not str(key).startswith("requests."):
                continue
            resource = str(key)[len("requests."):]
            found = rules.rule_for(resource) if resource else None
            if found and found[0].role in ("count", "countPercent") and found[0].deviceClass:
                wanted.setdefault(found[0].deviceClass, set()).add(resource)
    proposed, notes = [], []
    for name, resources in sorted(wanted.items()):
        resource = sorted(resources)[0]
        if declared.get(name) in resources:
            continue
        if name not in classes:
            notes.append(f"DeviceClass {name} does not exist here: nothing to declare {resource} on")
        elif len(resources) > 1:
            notes.append(f"DeviceClass {name} stands for {', '.join(sorted(resources))}; a class declares one "
                         "resource: their limits keep a key of their own")
        elif declared.get(name):
            notes.append(f"DeviceClass {name} declares {declared[name]} already: {resource} keeps a key of its own")
        elif resource in declared.values():
            other = next(c for c, r in declared.items() if r == resource)
            notes.append(f"DeviceClass {other} declares {resource}: {name} cannot as well")
        else:
            changed = clean_object(classes[name])
            changed.setdefault("spec", {})["extendedResourceName"] = resource
            proposed.append(changed)
            notes.append(f"DeviceClass {name}: declare extendedResourceName {resource}, so its claims count under "
                         f"requests.{resource} with the pods still on the device plugin: one budget (Kubernetes "
                         f"1.36+). Pods asking only a count of {resource} then take the native path (KEP-5004) "
                         "where no device plugin advertises it")
    return proposed, notes


def kueue_mappings(cluster_queues: list[dict], rules: MigrationRules,
                   configured: Mapping[str, str] | None = None) -> tuple[list[dict], list[str]]:
    """deviceClassMappings to add for every legacy GPU resource a ClusterQueue covers, and notes:
    the DeviceClass our templates use for it is counted as that resource. configured: what
    Kueue's Configuration maps already (class -> resource)."""
    covered: dict[str, list[str]] = {}  # resource -> the queues covering it
    for queue in cluster_queues:
        spec = submap(queue, "spec")
        for group in spec.get("resourceGroups") or []:
            for resource in (group.get("coveredResources") or []) if isinstance(group, dict) else []:
                covered.setdefault(str(resource), []).append(view_of(queue).name or "?")
    mappings, notes, owner = [], [], dict(configured or {})
    for resource in sorted(covered):
        found = rules.rule_for(resource)
        if found is None or found[0].role not in ("count", "countPercent") or not found[0].deviceClass:
            continue
        cls = found[0].deviceClass
        queues = ", ".join(sorted(set(covered[resource])))
        if (configured or {}).get(cls) == resource:
            notes.append(f"{resource} (ClusterQueue {queues}): Kueue counts DeviceClass {cls} as {resource} already")
            continue
        if cls in owner:
            uncovered = sorted(set(covered[resource]) - set(covered.get(owner[cls], [])))
            notes.append(f"{resource} (ClusterQueue {queues}): DeviceClass {cls} is already mapped to {owner[cls]}; "
                         f"Kueue counts a class as one resource: pods asking {resource} stay on the device plugin "
                         "under Kueue" + (f"; ClusterQueue {', '.join(uncovered)} must cover {owner[cls]} too (Kueue "
                                          "0.20 charges a DRA resource name and pod overhead left under "
                                          f"{resource} alike)" if uncovered else ""))
            continue
        owner[cls] = resource
        mappings.append({"name": resource, "deviceClassNames": [cls]})
        notes.append(f"{resource} (ClusterQueue {queues}): claims of DeviceClass {cls} count as {resource}; list "
                     f"{cls} in the policy's migration.kueueDeviceClasses once Kueue runs with this mapping")
    return mappings, notes


def kueue_configuration(mappings: list[dict], view: KueueView | None) -> dict | None:
    """The part of Kueue's Configuration (ConfigMap kueue-manager-config) to merge in, in the API
    version the cluster's Configuration uses: the mappings to add, and the DRA feature gate where
    it is not on (without it Kueue counts claims as nothing); None when nothing is missing."""
    view = view or KueueView()
    if view.refused:
        raise BridgeError(view.refused)
    if any(m.get("name") == RESERVED_MAPPING for m in mappings):
        raise BridgeError(f"a deviceClassMapping would be named {RESERVED_MAPPING!r} (a migration rule's resource): "
                          "Kueue 0.20 stops its controller on that name; rename the rule's resource")
    if not mappings and (view.dra_gate or not view.mappings):
        return None
    out: dict = {"apiVersion": view.api_version, "kind": "Configuration"}
    if not view.dra_gate:
        out["featureGates"] = {KUEUE_DRA_GATE: True}
    if mappings:
        out["resources"] = {"deviceClassMappings": mappings}
    return out
