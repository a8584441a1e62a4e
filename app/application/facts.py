"""What every decision reads of the cluster, built by one constructor (`cluster_facts`) from what
a caller could read: an inventory (a live cluster, a file, the bundled example, or none), the
namespaces and their labels, Kueue's configuration, DeviceClasses, and the claims and templates
pods name. The webhook, its dry runs and every preview get their facts here, so they judge alike.
Pure: the shells read; this only assembles."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from app import dra
from app.common import labels_by_name, view_of
from app.common import release as releases
from app.common.release import Release
from app.migration import UNKNOWN_FACTS, ClusterSharing, Facts, KueueView, ShareableDevices, extended_resources, \
    gpu_pod_priorities, plugin_nodes, preemption_of, served_resources
from app.policy import MigrationRules, Policy

from .engine import KnownClaims, Lookup, NamespaceClaims, no_lookup


@dataclass(frozen=True)
class ClusterFacts:
    """source: what it judges against, as every command says it ("none": no inventory);
    index: the device inventory (None: not known, satisfiability not judged); path: what the path
    choice reads (UNKNOWN_FACTS: none known); namespaces: name ->
    labels (None: not known); lookup: the claims and templates a pod names; namespace_claims:
    namespace -> its ResourceClaims (None: not known, namespace totals are not judged)."""

    source: str = "none"
    index: dra.Index | None = None
    path: Facts = UNKNOWN_FACTS
    namespaces: Mapping[str, dict] | None = None
    lookup: Lookup = no_lookup
    namespace_claims: NamespaceClaims = None
    verdicts: dra.TemplateVerdicts | None = None  # the index's template verdicts, where built here
    release: Release | None = None  # the Kubernetes release judged for (None: not known: the default's rules)

    def labels_of(self, namespace: str) -> dict | None:
        return None if self.namespaces is None else self.namespaces.get(namespace)


class EveryNamespace(dict):
    """Namespaces' labels from a listing that holds every namespace: one it does not name has
    none (an offline test's resources), where a partial listing would say "not known"."""

    def get(self, key, default=None):
        return super().get(key, {})


UNKNOWN = ClusterFacts()  # nothing known: the one spelling of "no inventory, no cluster"


def index_facts(index: dra.Index, rules: MigrationRules, judge, kueue: KueueView | None = None,
                gpu_pods: tuple[dict, ...] | None = None) -> Facts:
    """What an inventory index tells the planner and the path choice; judge(template) -> (state, why)
    (TemplateVerdicts.dra); kueue: Kueue's configuration as read; gpu_pods: the priorities GPU
    pods run at (migration.gpu_pod_priorities; None: not known)."""
    sharing_labels = [r.label for r in rules.nodeLabels if r.translate == "sharing"]
    shareable = {name: ShareableDevices(caps, sizes)
                 for name, (caps, sizes) in dra.shareable_classes(index, rules.sharing.memoryCapacity).items()}
    nodes = [node for node, positions in index.by_node.items() if positions]
    sharing = ClusterSharing(shareable, dra.time_sliced(index.node_labels, nodes, sharing_labels))
    return Facts(served_resources(index.classes), judge, sharing, plugin_nodes(index.node_resources), index.quotas,
                 extended_resources(index.classes), kueue,
                 preemption_of(index.priority_classes, gpu_pods) if index.priority_classes is not None else None,
                 index.release)


def preemption_facts(priority_classes: list[dict] | None, objects: Iterable[dict], rules: MigrationRules):
    """PriorityClasses (the inventory's, and those among the objects) and, where the objects hold
    pods, the priorities of those that hold GPUs; None when no PriorityClass was read."""
    objects = list(objects)
    listed = [o for o in objects if o.get("kind") == "PriorityClass"]
    if priority_classes is None and not listed:
        return None
    pods = [o for o in objects if o.get("kind") == "Pod"]
    return preemption_of([*(priority_classes or []), *listed], gpu_pod_priorities(pods, rules) if pods else None)


def cluster_facts(policy: Policy, index: dra.Index | None = None, *, source: str = "none",
                  objects: Iterable[dict] = (), claims_known: bool | None = None, kueue: KueueView | None = None,
                  classes: list[dict] | None = None, namespaces: Mapping[str, dict] | None = None,
                  lookup: Lookup | None = None, namespace_claims: NamespaceClaims = None,
                  path: Facts | None = None, release: Release | None = None) -> ClusterFacts:
    """The one constructor. objects: what was read besides the inventory (an export, a listing):
    the claims and templates among them are what pods name and what namespaces hold, unless
    `lookup` and `namespace_claims` are given (the webhook's live readers); claims_known: whether
    those objects hold every ResourceClaim of their namespaces (a cluster listing, an export with
    claims); None: known when any ResourceClaim is among them. classes: DeviceClasses known
    without an inventory (else those among the objects). path: facts already built for this index
    (the webhook keeps them across reviews). release: the Kubernetes release judged for (else the
    index's): the objects are read as it keeps them."""
    objects = [o for o in objects if isinstance(o, dict)]
    release = release or (index.release if index is not None else None)
    if release is not None:
        objects = [releases.strip(o, release)[0] for o in objects]
        if classes is not None:
            classes = [releases.strip(c, release, "DeviceClass")[0] for c in classes]
    verdicts = None
    if path is None:
        if index is not None:
            verdicts = dra.TemplateVerdicts(index)
            path = index_facts(index, policy.migration, verdicts.dra, kueue)  # as the webhook builds them
            if any(o.get("kind") in ("Pod", "PriorityClass") for o in objects):  # an export, a listing
                path = replace(path, preemption=preemption_facts(index.priority_classes, objects, policy.migration))
        else:
            if classes is None:
                classes = [o for o in objects if o.get("kind") == "DeviceClass"]
            extended = extended_resources({view_of(c).name: c for c in classes})
            path = Facts(kueue=kueue, extended=extended or None,
                         preemption=preemption_facts(None, objects, policy.migration))
        path = replace(path, release=release)
    if lookup is None:
        known = KnownClaims(objects)
        lookup = known.lookup
        if claims_known is None:
            claims_known = any(o.get("kind") == "ResourceClaim" for o in objects)
        if namespace_claims is None and claims_known:
            namespace_claims = known.in_namespace
    return ClusterFacts(source, index, path, namespaces, lookup, namespace_claims, verdicts, release)


def inventory_source(index: dra.Index | None, where: str, release: Release | None = None) -> str:
    """What a command says it judged against: where the inventory came from, its size, and the
    Kubernetes release (given, else the index's)."""
    release = release or (index.release if index is not None else None)
    said = f"; {release.describe()}" if release is not None else ""
    if index is None:
        return f"no inventory (satisfiability and the path choice not judged){said}"
    nodes = len([n for n, positions in index.by_node.items() if n is not None and positions])
    return f"{where}, {nodes} node(s), {index.device_count} device(s){said}"


# What the path choice's inventory reads from a rollout snapshot: key, kind, apiVersion.
SNAPSHOT_INVENTORY = [("resourceslices", "ResourceSlice", "resource.k8s.io/v1"),
                      ("deviceclasses", "DeviceClass", "resource.k8s.io/v1"),
                      ("resourceclaims", "ResourceClaim", "resource.k8s.io/v1"), ("nodes", "Node", "v1"),
                      ("resourcequotas", "ResourceQuota", "v1"),
                      ("priorityclasses", "PriorityClass", "scheduling.k8s.io/v1")]


def snapshot_facts(objects: Mapping[str, list], policy: Policy, source: str = "cluster snapshot",
                   judge_claims: bool = True):
    """(The facts of a rollout snapshot (kind -> objects, as kube.rollout_snapshot reads them or an
    export gives them; "release": [the cluster's Release], whose allocator judges): the same the
    webhook builds from its live inventory, with the snapshot's claims, namespaces and Kueue view
    (an inventory with no device says nothing of what DRA serves: the path choice then judges no
    claim; judge_claims False: it never does); whether a
    node's devices, published or shadowed, could ever serve a pod's claims, None with no device
    anywhere (waves then count whole GPUs and MIG profiles).)"""
    tagged = [(0, {"kind": kind, "apiVersion": version, **obj}) for key, kind, version in SNAPSHOT_INVENTORY
              for obj in objects.get(key, [])]
    inventory = dra.inventory_from_objects(tagged, "cluster")
    inventory.release = (objects.get("release") or [None])[0]  # the cluster's (kube.server_release)
    index = dra.build_index(inventory)
    kueue = (objects.get("kueue") or [None])[0]
    namespaces = labels_by_name(objects.get("namespaces", []))
    # The claims pods name, and the pods (the priorities GPU pods run at).
    read = [{"kind": "ResourceClaim", **c} for c in objects.get("resourceclaims", [])] + \
        [{"kind": "Pod", **p} for p in objects.get("pods", [])]
    facts = cluster_facts(policy, index, source=inventory_source(index, source), objects=read, claims_known=True,
                          namespaces=namespaces, kueue=kueue)
    if not judge_claims or not index.device_count:
        # what counts, not what is free now: the planner's own room model judges; and with no
        # device anywhere yet (before the first move) nothing says what DRA will serve
        facts = replace(facts, path=replace(facts.path, dra=None))
    if not index.device_count:
        return facts, None
    known, seen = frozenset(index.views), {}

    def fits(pod, node: str) -> bool:
        """Our feasibility check on that node's devices alone (allocations aside: the plan counts
        room); a node whose devices nobody publishes or shadows is not known to lack any."""
        if node not in known:
            return True
        for template in pod.templates:
            key = (template["metadata"]["name"], node)
            if key not in seen:
                spec = dra.parse_claim_spec(template["spec"]["spec"], "spec")
                seen[key] = dra.check(spec, index, skip=known - {node}).status not in ("never", "invalid")
            if not seen[key]:
                return False
        return True
    return facts, fits
