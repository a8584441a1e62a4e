"""`rollout status`: nodes and GPUs per side, and every GPU pod counted where it really is. Pure.

Pods in trouble are counted and named, never left out of the totals: Pending with claims not
allocated, Pending for a legacy resource, on the device plugin of a node that no longer
advertises what they hold, and workloads with fewer pods bound than they want.
"""

from __future__ import annotations

from app.common import view_of
from app.policy import MigrationRules

from app.migration import legacy_resources
from .pods import PodView
from .sides import BOTH, HAZARDS, NEITHER, PLUGIN, STATES, UNKNOWN, NodeView

NAMED = 5  # pods named per line


# Where a GPU pod is, as `rollout status -o json` keys it, and the line its table prints.
PLUGIN_STAYING, PLUGIN_MOVING, ON_DRA = "pluginStaying", "pluginMoving", "dra"
PLUGIN_NOT_ADVERTISED, PENDING_CLAIMS, PENDING_LEGACY = "pluginNotAdvertised", "pendingClaims", "pendingLegacy"
POD_STATES = {
    PLUGIN_STAYING: "on the device plugin, staying there",
    PLUGIN_MOVING: "on the device plugin, moving with their node",
    ON_DRA: "on DRA",
    PLUGIN_NOT_ADVERTISED: "on the device plugin of a node that no longer advertises it",
    PENDING_CLAIMS: "Pending: claims not allocated",
    PENDING_LEGACY: "Pending: legacy GPU resources not free",
}
TROUBLE = frozenset({PLUGIN_NOT_ADVERTISED, PENDING_CLAIMS, PENDING_LEGACY})


def summary(nodes: list[NodeView], pods: list[PodView], workloads: list[dict], bound: dict,
            rules: MigrationRules, named: int | None = NAMED) -> dict:
    """workloads: Deployments/StatefulSets/Jobs to compare with `bound` (pods.bound_by_owner);
    rules: the policy's migration rules, which say what a legacy GPU resource is; named: pods
    named per state in trouble (None: every one). Keys are identifiers (POD_STATES says each in
    words)."""
    sides = {side: [n for n in nodes if n.side == side] for side in STATES}
    by_name = {n.name: n for n in nodes}
    groups: dict[str, list[str]] = {key: [] for key in POD_STATES}
    for pod in pods:
        node = by_name.get(pod.node or "")
        if not pod.node:
            key = PENDING_LEGACY if pod.legacy else PENDING_CLAIMS
        elif pod.legacy and (node is None or node.side != PLUGIN or not _advertises(node, pod)):
            key = PLUGIN_NOT_ADVERTISED
        elif pod.legacy:
            key = PLUGIN_STAYING if pod.path == PLUGIN else PLUGIN_MOVING
        elif pod.claims > pod.devices and pod.phase == "Pending":
            key = PENDING_CLAIMS
        else:
            key = ON_DRA
        groups[key].append(pod.key)
    short = _short(workloads, bound, rules)
    return {"nodes": {side: sorted(n.name for n in members) for side, members in sides.items()},
            "gpus": {side: sum(n.gpus for n in members) for side, members in sides.items()},
            "pods": {key: len(keys) for key, keys in groups.items()},
            "named": {key: sorted(keys)[:named] for key, keys in groups.items() if keys and key in TROUBLE},
            "workloadsShort": short,
            "hazards": hazards(nodes)}


HAZARD_TEXT = {
    BOTH: ("its device plugin advertises GPUs while a DRA driver publishes them: one GPU could be handed out "
           "twice. Stop one of them (the device plugin's switch label off, or the kubelet plugin's off) before "
           "pods land there; meanwhile dra-bridge rewrites no pod onto it"),
    NEITHER: ("neither its device plugin advertises GPUs nor a DRA driver publishes them: its GPUs serve no pod. "
              "Check the device plugin's and NVIDIA's kubelet plugin's DaemonSets on it and their switch labels"),
    UNKNOWN: ("its kubelet reports it not Ready: what it advertised or published is stale, so it is counted on "
              "neither side and left out of the waves. Bring it back (or remove it), then plan again"),
}


def hazards(nodes: list[NodeView]) -> list[dict]:
    """Nodes in a state no rollout leaves a node in: served twice, or served by neither side;
    each with what to do."""
    return state_hazards({n.name: n.side for n in nodes})


def state_hazards(states: dict) -> list[dict]:
    """node -> state (rollout.index_states, or node views) as hazards, each with what to do."""
    return [{"node": node, "state": str(state), "what": HAZARD_TEXT[state]}
            for node, state in sorted(states.items()) if state in HAZARDS]


def in_trouble(found: dict) -> bool:
    return any(found["pods"][k] for k in TROUBLE) or bool(found["workloadsShort"]) or bool(found["hazards"])


def _advertises(node: NodeView, pod: PodView) -> bool:
    return all(node.advertised.get(r, 0) > 0 for r in pod.legacy)


def _short(workloads: list[dict], bound: dict, rules: MigrationRules) -> dict[str, str]:
    """Kind namespace/name -> 'have of want bound' for GPU workloads below their replicas."""
    out = {}
    for obj in workloads:
        view, spec = view_of(obj), obj.get("spec") or {}
        kind = view.kind
        owner = f"{view.namespace}/{kind}/{view.name}"
        pod_spec = (spec.get("template") or {}).get("spec") or {}
        if not (pod_spec.get("resourceClaims") or legacy_resources(pod_spec, rules)):
            continue
        want = spec.get("replicas", 1) if kind != "Job" else min(spec.get("parallelism", 1) or 1, max(
            (spec.get("completions") or 1) - ((obj.get("status") or {}).get("succeeded") or 0), 0))
        have = bound.get(owner, 0)
        if isinstance(want, int) and have < want and not (kind == "Job" and _finished(obj)):
            out[f"{kind} {view.namespace}/{view.name}"] = f"{have} of {want} pod(s) bound"
    return out


def _finished(job: dict) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])
