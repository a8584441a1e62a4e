"""`dra-bridge rollout`: GPU nodes move from the device plugin to NVIDIA's DRA driver in waves. Pure.

The cluster comes in as plain objects; what comes out is which side each node is on, the path
each GPU pod takes when it is recreated, and the waves: which nodes, which pods are evicted and
where they come back, and what blocks a wave. A node serves the device plugin or NVIDIA's kubelet
plugin, never both, so a wave's pods must fit elsewhere while it moves: pods that stay on the
device plugin on the nodes still on it, pods that move on the DRA side.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field

from pydantic import ValidationError

from app.common import extended_allocatable, parse_count, quota_map
from app.policy import LabelSelector, Policy

from .paths import Facts, choose, served_resources
from .planner import legacy_resources, plan_pod

PLUGIN, DRA, MOVING = "plugin", "dra", "moving"
WAVE = "dra-bridge.io/rollout-wave"  # node annotations: the wave a node moved in, its step, what it was
STEP = "dra-bridge.io/rollout-step"
BEFORE = "dra-bridge.io/rollout-before"
SHADOW_OF = "dra-bridge.io/shadow-of"
NVIDIA_DOMAIN = "gpu.nvidia.com"  # shadow slices qualify its attribute names


@dataclass(frozen=True)
class Switches:
    """The node labels that select the device plugin's and NVIDIA's kubelet plugin's DaemonSets.
    Defaults: the GPU Operator's device-plugin switch and the label NVIDIA's DRA driver chart is
    pointed at with `kubeletPlugin.nodeSelector`."""

    plugin_label: str = "nvidia.com/gpu.deploy.device-plugin"
    plugin_on: str = "true"
    plugin_off: str = "false"
    dra_label: str = "nvidia.com/dra-kubelet-plugin"
    dra_on: str = "true"
    driver: str = "gpu.nvidia.com"


@dataclass
class NodeView:
    name: str
    side: str  # plugin | dra | moving
    gpus: int  # whole GPUs: what the node serves (or will serve) on its side
    advertised: dict[str, int]  # the device plugin's extended resources (cordoned or not)
    labels: dict[str, str]
    models: tuple[str, ...] = ()  # GPU product names, as slices name them
    mig: dict[str, int] = field(default_factory=dict)  # MIG profile -> devices
    wave: int | None = None
    step: str | None = None
    unschedulable: bool = False


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

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Wave:
    number: int
    nodes: list[str]
    gpus: int
    pods: list[PodView]
    blockers: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    done: bool = False
    back: dict[str, str] = field(default_factory=dict)  # pod -> where it comes back: dra | plugin | plugin, for now


def node_view(node: dict, slices: list[dict], switches: Switches) -> NodeView | None:
    """A GPU node's side; None for a node with no GPU on either side."""
    meta = node.get("metadata") or {}
    name, labels = meta.get("name", ""), meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
    advertised = plugin_advertised(node)
    own = [s for s in slices if (s.get("spec") or {}).get("nodeName") == name]
    dra = _devices([s for s in own if s["spec"].get("driver") == switches.driver
                    and SHADOW_OF not in ((s.get("metadata") or {}).get("labels") or {})])
    shadow = _devices([s for s in own if ((s.get("metadata") or {}).get("labels") or {}).get(SHADOW_OF)])
    wave = int(annotations[WAVE]) if str(annotations.get(WAVE, "")).isdigit() else None
    step = annotations.get(STEP)
    known = shadow if shadow[0] else dra
    gpus = known[0] or _count_label(labels) or advertised.get("nvidia.com/gpu", 0) or _time_sliced(labels, advertised)
    if wave is not None and step != "done":
        side = MOVING
    elif labels.get(switches.dra_label) == switches.dra_on or (dra[0] and not advertised):
        side, gpus = DRA, dra[0]
        known = dra
    elif advertised or labels.get(switches.plugin_label) == switches.plugin_on:
        side = PLUGIN
    else:
        return None
    return NodeView(name, side, gpus, advertised, labels, known[1], known[2], wave, step, unschedulable)


def plugin_advertised(node: dict) -> dict[str, int]:
    """NVIDIA's extended resources the node's device plugin advertises, cordoned or not."""
    return {k: v for k, v in extended_allocatable(node, cordoned_too=True).items() if k.startswith("nvidia.com/")}


def published(node: dict, slices: list[dict], switches: Switches) -> NodeView | None:
    """The node as NVIDIA's driver publishes it: its slices only (our shadow slices aside), the
    move's annotations aside."""
    meta = {**(node.get("metadata") or {}), "annotations": {}}
    theirs = [s for s in slices if SHADOW_OF not in ((s.get("metadata") or {}).get("labels") or {})]
    return node_view({**node, "metadata": meta}, theirs, switches)


def _devices(slices: list[dict]) -> tuple[int, tuple[str, ...], dict[str, int]]:
    """(whole GPUs, their product names, MIG profile -> devices) the slices publish."""
    gpus, models, mig = 0, set(), Counter()
    for device in (d for s in slices for d in (s.get("spec") or {}).get("devices") or []):
        attributes = device.get("attributes") or {}
        kind = _string(attributes, "type")
        if kind == "gpu":
            gpus += 1
            if _string(attributes, "productName"):
                models.add(_string(attributes, "productName"))
        elif kind == "mig":
            mig[_string(attributes, "profile")] += 1
    return gpus, tuple(sorted(models)), dict(mig)


def _string(attributes: dict, name: str) -> str:
    """NVIDIA's attribute, unqualified as its driver publishes it or qualified as shadow slices do."""
    value = attributes.get(name) or attributes.get(f"{NVIDIA_DOMAIN}/{name}") or {}
    return value.get("string", "") if isinstance(value, dict) else ""



def _count_label(labels: dict) -> int:
    value = labels.get("nvidia.com/gpu.count", "")
    return int(value) if str(value).isdigit() else 0


def _time_sliced(labels: dict, advertised: dict) -> int:
    replicas = labels.get("nvidia.com/gpu.replicas", "")
    shared = advertised.get("nvidia.com/gpu.shared", 0)
    return shared // int(replicas) if shared and str(replicas).isdigit() and int(replicas) else 0


def pod_views(objects: dict[str, list[dict]], policy: Policy, switches: Switches) -> list[PodView]:
    """Every live pod that holds GPUs (legacy resources or DRA claims), with the path it takes
    when recreated, as the webhook would choose it (its namespace's opt-in label and policy, the
    cluster's native classes and GPU quotas)."""
    namespaces = {(n.get("metadata") or {}).get("name"): (n.get("metadata") or {}).get("labels") or {}
                  for n in objects.get("namespaces", [])}
    classes = {(c.get("metadata") or {}).get("name"): c for c in objects.get("deviceclasses", [])}
    facts = Facts(served=served_resources(classes), quotas=quota_map(objects.get("resourcequotas", [])))
    held = _claim_devices(objects.get("resourceclaims", []), switches.driver)
    rules = policy.migration
    out = []
    for pod in filter(_live, objects.get("pods", [])):
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        namespace = meta.get("namespace", "")
        legacy = _legacy_counts(spec, rules)
        devices = sum(held.get((namespace, c.get("resourceClaimName") or ""), 0)
                      for c in (pod.get("status") or {}).get("resourceClaimStatuses") or [])
        if not legacy and not devices:
            continue
        labels = namespaces.get(namespace)
        path, why = _path(pod, namespace, labels, policy, facts) if legacy else ("dra", "on DRA already")
        out.append(PodView(namespace, meta.get("name", ""), spec.get("nodeName"), _owner(meta),
                           meta.get("labels") or {}, legacy, devices, path, why))
    return out


def bound_by_owner(pods: list[dict]) -> Counter:
    """Live pods bound to a node, per Kind/name of what recreates them."""
    return Counter(_owner(p.get("metadata") or {}) for p in pods if _live(p) and (p.get("spec") or {}).get("nodeName"))


def _live(pod: dict) -> bool:
    """Neither being deleted nor finished."""
    return not (pod.get("metadata") or {}).get("deletionTimestamp") and \
        (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _path(pod: dict, namespace: str, labels: dict | None, policy: Policy, facts: Facts) -> tuple[str, str]:
    if labels is None or labels.get("dra-bridge.io/migrate") != "enabled":
        return PLUGIN, "its namespace is not opted in (dra-bridge.io/migrate=enabled): recreated as written"
    settings = policy.for_namespace(namespace, labels)
    if not settings.migrate:
        return PLUGIN, "the policy does not migrate its namespace (migrate: false)"
    # As its controller will create it again: not yet bound to a node.
    template = {"metadata": {k: v for k, v in (pod.get("metadata") or {}).items() if k == "annotations"},
                "spec": {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}}
    plan = plan_pod(template, policy.migration, namespace)
    if plan.status == "unmigratable":
        return PLUGIN, f"cannot be migrated: {plan.reason}"
    choice = choose({**template, "metadata": {**template["metadata"], "namespace": namespace}}, plan,
                    policy.migration, settings.path, facts)
    if choice.path == "legacy":
        return PLUGIN, f"{choice.code}: {choice.reason}"
    if choice.path == "native":
        return DRA, f"native: {choice.reason}"
    return DRA, f"rewritten onto a ResourceClaimTemplate ({choice.reason})"


def _legacy_counts(spec: dict, rules) -> dict[str, int]:
    counts: Counter = Counter()
    containers = {str(c.get("name")): c for key in ("initContainers", "containers")
                  for c in spec.get(key) or [] if isinstance(c, dict)}
    for name, resource in legacy_resources(spec, rules):
        resources = containers.get(name, {}).get("resources") or {}
        value = (resources.get("limits") or {}).get(resource, (resources.get("requests") or {}).get(resource))
        try:
            counts[resource] += parse_count(value)
        except (ValueError, TypeError, ArithmeticError):
            counts[resource] += 1
    return dict(counts)


def _claim_devices(claims: list[dict], driver: str) -> dict[tuple[str, str], int]:
    out = {}
    for claim in claims:
        meta = claim.get("metadata") or {}
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []
        out[(meta.get("namespace", ""), meta.get("name", ""))] = len(
            {(r.get("pool"), r.get("device")) for r in results if r.get("driver") == driver})
    return out


def _owner(meta: dict) -> str:
    for ref in meta.get("ownerReferences") or []:
        if ref.get("controller"):
            kind, name = ref.get("kind", ""), ref.get("name", "")
            hash_ = (meta.get("labels") or {}).get("pod-template-hash")
            if kind == "ReplicaSet" and hash_ and name.endswith(f"-{hash_}"):
                return f"Deployment/{name[:-len(hash_) - 1]}"
            return f"{kind}/{name}"
    return ""


def plan_waves(nodes: list[NodeView], pods: list[PodView], budgets: list[dict], wave_size: int | None = 1,
               max_gpus: int | None = None, chosen=lambda node: True) -> list[Wave]:
    """Waves of device-plugin nodes: fewest pods that must stay on the device plugin first, then
    fewest pods to evict. Evicted pods are recreated at once, while their node is still moving:
    a pod the webhook would rewrite comes back on DRA only where the DRA side has room already
    (nodes moved in earlier waves), else on the device plugin for now (the webhook leaves it
    there while DRA cannot serve it); every pod must find room on one side or the wave is
    blocked. Each wave is checked against the cluster as the waves before it leave it."""
    waves = _done_waves(nodes, pods)
    number = max((n.wave for n in nodes if n.wave is not None), default=0)
    side = {n.name: n.side for n in nodes}
    free = {n.name: Counter(n.advertised) for n in nodes if n.side == PLUGIN}
    dra_room = sum(n.gpus for n in nodes if n.side == DRA)
    for pod in pods:
        if pod.node in free:
            free[pod.node].subtract(pod.legacy)
        elif side.get(pod.node or "") == DRA:
            dra_room -= pod.devices or _whole(pod.legacy)
    staying = Counter(p.node for p in pods if p.path == PLUGIN)
    evictions = Counter(p.node for p in pods)
    queue = sorted((n for n in nodes if n.side == PLUGIN and chosen(n)),
                   key=lambda n: (staying[n.name], evictions[n.name], n.gpus, n.name))
    placed: dict[str, list[PodView]] = {}  # pods this plan puts on a device-plugin node
    blocked_at = None
    while queue:
        members = [queue.pop(0)]
        while queue and (len(members) < (wave_size or 1) if max_gpus is None
                         else sum(n.gpus for n in members) + queue[0].gpus <= max_gpus):
            members.append(queue.pop(0))
        number += 1
        names = sorted(n.name for n in members)
        evicted = [p for p in pods if p.node in names] + [p for n in names for p in placed.pop(n, [])]
        wave = Wave(number, names, sum(n.gpus for n in members), evicted)
        for name in names:
            free.pop(name, None)
        unplaced = []
        for pod in sorted(evicted, key=lambda p: (-_whole(p.legacy), p.key)):
            need = pod.devices or _whole(pod.legacy)
            if pod.path == DRA and need <= dra_room:
                dra_room -= need
                wave.back[pod.key] = "dra"
                continue
            target = max((n for n, room in free.items() if all(room[r] >= v for r, v in pod.legacy.items())),
                         key=lambda n: (sum(free[n].values()), n), default=None)
            if target is None:
                unplaced.append(pod)
                continue
            free[target].subtract(pod.legacy)
            placed.setdefault(target, []).append(pod)
            wave.back[pod.key] = "plugin" if pod.path == PLUGIN else "plugin, for now"
        if unplaced:
            wave.blockers.append(
                f"{len(unplaced)} pod(s) would find no room on either side (DRA has {max(dra_room, 0)} GPU(s) free "
                "before this wave publishes; the device-plugin nodes left lack their resources): "
                + "; ".join(f"{p.key} ({', '.join(f'{v} {r}' for r, v in sorted(p.legacy.items()))}): {p.why}"
                            for p in unplaced[:3]))
        later = [p.key for p in evicted if wave.back.get(p.key) == "plugin, for now"]
        if later:
            wave.notes.append(f"{len(later)} pod(s) come back on the device plugin for now (no DRA room until this "
                              f"wave's nodes publish) and move with their new node: {', '.join(later[:5])}")
        wave.blockers += _budget_blockers(evicted, budgets, wave.notes)
        if blocked_at is not None:
            wave.notes.append(f"planned as if wave {blocked_at} had been unblocked")
        elif wave.blockers:
            blocked_at = number
        dra_room += wave.gpus
        waves.append(wave)
    return waves


def _whole(legacy: dict[str, int]) -> int:
    return legacy.get("nvidia.com/gpu", 0) + sum(v for k, v in legacy.items() if k.startswith("nvidia.com/mig-"))


def _done_waves(nodes: list[NodeView], pods: list[PodView]) -> list[Wave]:
    out: dict[int, Wave] = {}
    for node in sorted((n for n in nodes if n.wave is not None), key=lambda n: n.name):
        wave = out.setdefault(node.wave, Wave(node.wave, [], 0, [], done=True))
        wave.nodes.append(node.name)
        wave.gpus += node.gpus
        wave.done = wave.done and node.step == "done"
        wave.pods += [p for p in pods if p.node == node.name]
        if node.step != "done":
            wave.notes.append(f"{node.name}: stopped at step {node.step or 'start'}: `rollout run --wave "
                              f"{node.wave}` continues it")
    return [out[k] for k in sorted(out)]


def _budget_blockers(evicted: list[PodView], budgets: list[dict], notes: list[str]) -> list[str]:
    out = []
    for budget in budgets:
        meta, spec = budget.get("metadata") or {}, budget.get("spec") or {}
        hit = [p for p in evicted if p.namespace == meta.get("namespace") and _selects(spec.get("selector"), p.labels)]
        if not hit:
            continue
        status = budget.get("status") or {}
        allowed = int(status.get("disruptionsAllowed") or 0)
        where = f"PodDisruptionBudget {meta.get('namespace')}/{meta.get('name')}"
        if allowed == 0:
            out.append(f"{where} allows no disruption now ({status.get('currentHealthy', 0)} healthy, "
                       f"{status.get('desiredHealthy', 0)} desired): evicting {hit[0].key} would break it")
        elif len(hit) > allowed:
            notes.append(f"{where} allows {allowed} disruption(s): its {len(hit)} pods here are evicted as "
                         "replacements become ready")
    return out


def _selects(selector: dict | None, labels: dict[str, str]) -> bool:
    """A PodDisruptionBudget's selector against labels (policy/v1: empty selects every pod, null none)."""
    if not isinstance(selector, dict):
        return False
    try:
        return LabelSelector.model_validate(selector).matches(labels)
    except ValidationError:
        return False  # the API server would not have stored it


def slices_ready(node: NodeView, before: dict) -> str | None:
    """None once a moved node's DRA side publishes what its device plugin advertised (as many
    whole GPUs, the same models, the same MIG layout); otherwise what is still missing."""
    want_gpus = int(before.get("gpus") or 0)
    if node.gpus < want_gpus:
        return f"{node.gpus} of {want_gpus} GPUs published"
    missing = [m for m in before.get("models") or [] if _model(m) not in {_model(x) for x in node.models}]
    if missing:
        return f"model {missing[0]} not published (published: {', '.join(node.models) or 'none'})"
    for profile, count in (before.get("mig") or {}).items():
        if node.mig.get(profile, 0) < count:
            return f"MIG {profile}: {node.mig.get(profile, 0)} of {count} devices published"
    return None


def _model(name: str) -> str:
    """GFD writes `NVIDIA-H100-80GB-HBM3`, NVML `NVIDIA H100 80GB HBM3`: one spelling."""
    return re.sub(r"[\s_-]+", "-", name.strip().lower()).removesuffix("-shared")


def before_move(node: NodeView, switches: Switches) -> str:
    """What undo restores and what the DRA side must publish: the switch labels as they were, the
    cordon, and the node's GPUs as the device plugin (or our shadow slices) described them."""
    return json.dumps({"labels": {k: node.labels.get(k) for k in (switches.plugin_label, switches.dra_label)},
                       "unschedulable": node.unschedulable, "advertised": node.advertised, "gpus": node.gpus,
                       "models": list(node.models), "mig": node.mig}, sort_keys=True)


def summary(nodes: list[NodeView], pods: list[PodView]) -> dict:
    """`rollout status`: nodes and GPUs per side, pods per path."""
    sides = {side: [n for n in nodes if n.side == side] for side in (PLUGIN, MOVING, DRA)}
    on = {n.name: n.side for n in nodes}
    return {"nodes": {side: sorted(n.name for n in members) for side, members in sides.items()},
            "gpus": {side: sum(n.gpus for n in members) for side, members in sides.items()},
            "pods": {"on the device plugin, staying there": sum(1 for p in pods if on.get(p.node or "") == PLUGIN
                                                                 and p.path == PLUGIN),
                     "on the device plugin, moving with their node": sum(
                         1 for p in pods if on.get(p.node or "") == PLUGIN and p.path == DRA),
                     "on DRA": sum(1 for p in pods if on.get(p.node or "") == DRA),
                     "not bound": sum(1 for p in pods if not p.node)}}
