"""The GPU pods a rollout touches, and where each belongs when it is recreated. Pure.

Where it belongs is the webhook's own decision (application.decide_pod) for the pod its
owner creates again: same policy, namespace rules, opt-in label and cluster facts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from app.common import ObjectView, held_devices, labels_by_name, view_of
from app.migration import DEFAULT_OPT_IN, OptIn, legacy_asks, recreated, tolerates_cordon
from app.migration import running as live
from app.policy import Policy

from ..decision import Decision, Outcome, decide_pod
from ..facts import ClusterFacts, snapshot_facts
from .placement import pinned_node
from .sides import DENIED, DRA, MIG_PREFIX, PLUGIN, Switches

# Legacy only while DRA has no room the scheduler can use (all busy, only shadowed or cordoned
# nodes have such devices): such a pod belongs on DRA and comes back there where a wave made room.
ROOM_CODES = frozenset({"dra-busy", "dra-shadow", "dra-cordoned"})


@dataclass
class PodView:
    namespace: str
    name: str
    node: str | None
    owner: str  # Kind/name of what recreates it ("" for a bare pod)
    labels: dict[str, str]
    legacy: dict[str, int]  # legacy extended resources it asks for
    devices: int  # DRA devices its claims hold
    path: str  # where it comes back when recreated: plugin | dra
    why: str
    spec: dict = field(default_factory=dict)  # what placement reads: nodeSelector, affinity, tolerations
    claims: int = 0  # resource claims it names (allocated or not)
    empty_dir: bool = False  # emptyDir volumes: their data goes with an eviction
    evictions_left: int | None = None  # its Job's backoffLimit minus failures (None: not a Job, or no limit)
    phase: str = ""
    templates: list = field(default_factory=list)  # the claim templates the webhook would give it
    # What its owner's new pod asks of the device plugin, and where that pod goes: for a pod our
    # webhook rewrote, the asks its migration annotation records (what an undo must find room for).
    recreated_asks: dict[str, int] = field(default_factory=dict)
    recreated_path: str = ""
    recreated_why: str = ""
    gates: tuple[str, ...] = ()  # spec.schedulingGates: not scheduled until they are removed (Kueue's)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def workload(self) -> str:
        """namespace/Kind/name of what recreates it ("" for a bare pod)."""
        return f"{self.namespace}/{self.owner}" if self.owner else ""

    @property
    def daemon(self) -> bool:
        return self.owner.startswith("DaemonSet/")

    @property
    def tolerates_cordon(self) -> bool:
        return tolerates_cordon(self.spec)

    @property
    def pinned(self) -> str | None:
        return pinned_node(self.spec)

    def dra_need(self) -> Counter:
        """Devices it takes on DRA: whole GPUs and MIG devices per profile (as NodeView.dra_room)."""
        need = Counter({"gpu": self.legacy.get("nvidia.com/gpu", 0)})
        need.update({f"mig:{r[len(MIG_PREFIX):]}": n for r, n in self.legacy.items() if r.startswith(MIG_PREFIX)})
        if self.devices and not self.legacy:
            need["gpu"] = self.devices
        return +need


def pod_views(objects: dict[str, list[dict]], policy: Policy, switches: Switches, facts: ClusterFacts | None = None,
              opt_in: OptIn | None = DEFAULT_OPT_IN) -> list[PodView]:
    """Every live pod that holds GPUs (legacy resources or DRA claims), with the path it takes
    when recreated, as the webhook decides it (admin rules included). facts: the cluster's
    (None: the snapshot's own, application.snapshot_facts, without judging claims against what
    is free now); opt_in: the webhooks' namespace label."""
    if facts is None:
        facts = snapshot_facts(objects, policy, judge_claims=False)[0]
    namespaces = labels_by_name(objects.get("namespaces", []))
    held = _claim_devices(objects.get("resourceclaims", []), switches.driver)
    volumes = _volume_affinity(objects.get("persistentvolumeclaims", []), objects.get("persistentvolumes", []))
    jobs = {view_of(j).namespace + "/" + view_of(j).name: j
            for j in objects.get("jobs", [])}
    out = []
    for pod in filter(live, objects.get("pods", [])):
        view, spec = view_of(pod), pod.get("spec") or {}
        namespace = view.namespace
        legacy = legacy_asks(spec, policy.migration).counts()
        claims = len(spec.get("resourceClaims") or [])
        devices = sum(held.get((namespace, c.get("resourceClaimName") or ""), 0)
                      for c in (pod.get("status") or {}).get("resourceClaimStatuses") or [])
        if not legacy and not devices and not _gpu_claims(pod, held, namespace):
            continue
        path, why, templates = _path(pod, namespace, namespaces.get(namespace), policy, facts, opt_in) \
            if legacy else (DRA, "on DRA already", [])
        asks_again = legacy or legacy_asks(recreated(pod)["spec"], policy.migration).counts()
        again_path, again_why = (path, why) if legacy or not asks_again else \
            _path(pod, namespace, namespaces.get(namespace), policy, facts, opt_in)[:2]
        owner = owner_of(view)
        out.append(PodView(
            namespace, view.name, spec.get("nodeName"), owner, view.labels, legacy, devices,
            path, why, spec={**{k: spec[k] for k in ("nodeSelector", "affinity", "tolerations") if k in spec},
                             **_pinned_by_volumes(spec, namespace, volumes)},
            claims=claims, empty_dir=any(isinstance(v, dict) and "emptyDir" in v for v in spec.get("volumes") or []),
            evictions_left=_evictions_left(jobs.get(f"{namespace}/{owner[4:]}")) if owner.startswith("Job/") else None,
            phase=(pod.get("status") or {}).get("phase") or "", templates=templates,
            recreated_asks=asks_again, recreated_path=again_path if asks_again else DRA,
            recreated_why=again_why if asks_again else "its owner asks for DRA devices itself",
            gates=tuple(str(g.get("name")) for g in spec.get("schedulingGates") or [] if isinstance(g, dict))))
    return out


def _path(pod: dict, namespace: str, labels: dict | None, policy: Policy, facts: ClusterFacts,
          opt_in: OptIn | None) -> tuple[str, str, list]:
    """Where the pod its owner creates again belongs (the webhook's decision for it), why, and the
    claim templates it would get there."""
    found = decide_pod(recreated(pod), namespace, policy, facts, namespace_labels=labels, opt_in=opt_in)
    path, why = _where(found)
    return path, why, found.would_rewrite_as if path == DRA else []


def _where(found: Decision) -> tuple[str, str]:
    if found.outcome is Outcome.DENIED:
        return DENIED, f"the webhook would deny it: {found.refused}"
    code, reason = (found.path.code, found.path.reason) if found.path is not None else ("", "")
    if found.outcome is Outcome.NATIVE:
        return DRA, f"native: {reason}"
    if found.outcome is Outcome.LEGACY:
        if code in ROOM_CODES:
            return DRA, f"on DRA where a wave made room ({code}: {reason})"
        return PLUGIN, f"{code}: {reason}"
    if found.outcome is Outcome.REWRITE:
        return DRA, "rewritten onto a ResourceClaimTemplate (rewrite)"
    if found.outcome is Outcome.UNMIGRATABLE:
        return PLUGIN, f"cannot be migrated: {found.plan.reason}"
    return PLUGIN, found.plan.reason or "left as written"


def _evictions_left(job: dict | None) -> int | None:
    """How many more pod failures its Job takes (an eviction counts as one) before it fails with
    BackoffLimitExceeded; None when evictions do not count (a podFailurePolicy that ignores
    DisruptionTarget) or the Job is not known."""
    if job is None:
        return None
    spec = job.get("spec") or {}
    for rule in (spec.get("podFailurePolicy") or {}).get("rules") or []:
        if rule.get("action") == "Ignore" and any(c.get("type") == "DisruptionTarget"
                                                  for c in rule.get("onPodConditions") or []):
            return None
    limit = spec.get("backoffLimit", 6)
    failed = (job.get("status") or {}).get("failed") or 0
    return max(int(limit) - int(failed), 0) if isinstance(limit, int) else None


def _gpu_claims(pod: dict, held: dict, namespace: str) -> bool:
    """Names a claim of our driver's devices, or one not allocated yet (it may wait for GPUs)."""
    statuses = (pod.get("status") or {}).get("resourceClaimStatuses") or []
    named = (pod.get("spec") or {}).get("resourceClaims") or []
    return bool(named) and (len(statuses) < len(named) or any(
        held.get((namespace, s.get("resourceClaimName") or "")) is None for s in statuses))


def bound_by_owner(pods: list[dict]) -> Counter:
    """Live pods bound to a node, per namespace/Kind/name of what recreates them."""
    return Counter(f"{view_of(p).namespace}/{owner_of(view_of(p))}"
                   for p in pods if live(p) and (p.get("spec") or {}).get("nodeName"))


def _volume_affinity(claims: list[dict], volumes: list[dict]) -> dict[tuple[str, str], tuple[str, list]]:
    """(namespace, PVC) -> (its bound PersistentVolume, that volume's required node affinity terms),
    for volumes that have one (local volumes, zonal disks): the scheduler places the pod only there."""
    terms = {}
    for pv in volumes:
        required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
        if isinstance(required.get("nodeSelectorTerms"), list):
            terms[view_of(pv).name] = required["nodeSelectorTerms"]
    out = {}
    for pvc in claims:
        volume = (pvc.get("spec") or {}).get("volumeName")
        if volume in terms:
            out[view_of(pvc).key()] = (volume, terms[volume])
    return out


def _pinned_by_volumes(spec: dict, namespace: str, volumes: dict) -> dict:
    """The node affinity of the PersistentVolumes the pod's claims bind (placement reads it as
    the scheduler's VolumeBinding filter does): {"volumeAffinity": [(volume, terms)]}, or {}."""
    names = [v["persistentVolumeClaim"].get("claimName", "") for v in spec.get("volumes") or []
             if isinstance(v, dict) and isinstance(v.get("persistentVolumeClaim"), dict)]
    found = [volumes[(namespace, name)] for name in names if (namespace, name) in volumes]
    return {"volumeAffinity": found} if found else {}


def _claim_devices(claims: list[dict], driver: str) -> dict[tuple[str, str], int]:
    """(namespace, claim) -> devices of the driver it holds; unallocated claims are left out."""
    out = {}
    for claim in claims:
        if not (claim.get("status") or {}).get("allocation"):
            continue
        out[view_of(claim).key()] = len(held_devices(claim, driver))
    return out


def owner_of(view: ObjectView) -> str:
    """Kind/name of what recreates the pod: its controller (a ReplicaSet's Deployment)."""
    ref = view.owner
    if ref is None:
        return ""
    kind, name = ref.get("kind", ""), ref.get("name", "")
    hash_ = view.labels.get("pod-template-hash")
    if kind == "ReplicaSet" and hash_ and name.endswith(f"-{hash_}"):
        return f"Deployment/{name[:-len(hash_) - 1]}"
    return f"{kind}/{name}"
