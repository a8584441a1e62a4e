"""Which side of the move each GPU node is on, what it has there, and when a moved node is ready. Pure.

A node serves the device plugin or NVIDIA's kubelet plugin, never both. Its side comes from its
switch labels, what its device plugin advertises (Node status.allocatable) and the slices
published for it; a node a wave is moving carries the move record (app.application.rollout.record).
"""

from __future__ import annotations

import enum

import re
from collections import Counter
from dataclasses import dataclass, field

from app import dra
from app.common import NVIDIA_DRIVER as NVIDIA_DOMAIN, view_of  # shadow slices qualify its attribute names
from app.common import SHADOW_OF, extended_allocatable, metadata_of, not_ready, vocabulary


class Side(enum.StrEnum):
    """Where a node serves GPUs from, by what it does (its device plugin advertising in Node
    status, NVIDIA's driver publishing slices), and where a pod comes back when recreated
    (DENIED: the webhook would deny its owner's new pod). BOTH and NEITHER are hazards: a GPU that
    could be handed out twice, or GPU nodes nothing serves. Strings: JSON and tables print them."""

    PLUGIN = "plugin"
    DRA = "dra"
    MOVING = "moving"
    BOTH = "both"
    NEITHER = "neither"
    UNKNOWN = "unknown"  # its kubelet reports it not Ready: what its status advertises is stale
    DENIED = "denied"


PLUGIN, DRA, MOVING, BOTH, NEITHER, DENIED = Side.PLUGIN, Side.DRA, Side.MOVING, Side.BOTH, Side.NEITHER, Side.DENIED
UNKNOWN = Side.UNKNOWN
HAZARDS = (BOTH, NEITHER, UNKNOWN)
STATES = (PLUGIN, MOVING, DRA, BOTH, NEITHER, UNKNOWN)  # every state a GPU node can be in
WAVE, STEP, BEFORE = vocabulary.ROLLOUT_WAVE, vocabulary.ROLLOUT_STEP, vocabulary.ROLLOUT_BEFORE
MIG_PREFIX = "nvidia.com/mig-"


@dataclass(frozen=True)
class Switches:
    """The node labels that select the device plugin's and NVIDIA's kubelet plugin's DaemonSets.
    Defaults: the GPU Operator's device-plugin switch and the label NVIDIA's DRA driver chart is
    pointed at with `kubeletPlugin.nodeSelector`."""

    plugin_label: str = vocabulary.DEVICE_PLUGIN_SWITCH
    plugin_on: str = "true"
    plugin_off: str = "false"
    dra_label: str = vocabulary.DRA_PLUGIN_SWITCH
    dra_on: str = "true"
    driver: str = vocabulary.NVIDIA_DRIVER



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
    taints: tuple[dict, ...] = ()  # spec.taints

    def dra_room(self) -> Counter:
        """What the node serves on DRA once moved (or now, on the DRA side): whole GPUs and MIG
        devices per profile, keyed as pods' needs are (app.application.rollout.pods.dra_need)."""
        room = Counter({"gpu": self.gpus})
        mig = self.mig or {r[len(MIG_PREFIX):]: n for r, n in self.advertised.items() if r.startswith(MIG_PREFIX)}
        room.update({f"mig:{profile}": n for profile, n in mig.items()})
        return +room


def node_view(node: dict, slices: list[dict], switches: Switches) -> NodeView | None:
    """A GPU node's side; None for a node with no GPU on either side."""
    view = view_of(node)
    name, labels, annotations = view.name, view.labels, view.annotations
    unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
    advertised = plugin_advertised(node)
    # Only what the scheduler would allocate from: a pool mid-update is no room yet.
    own = dra.trusted_slices([s for s in slices if (s.get("spec") or {}).get("nodeName") == name])
    published = _devices([s for s in own if s["spec"].get("driver") == switches.driver
                    and SHADOW_OF not in view_of(s).labels])
    shadow = _devices([s for s in own if view_of(s).labels.get(SHADOW_OF)])
    wave = int(annotations[WAVE]) if str(annotations.get(WAVE, "")).isdigit() else None
    step = annotations.get(STEP)
    known = shadow if shadow[0] else published
    gpus = known[0] or _count_label(labels) or advertised.get("nvidia.com/gpu", 0) or _time_sliced(labels, advertised)
    side = state_of(any(n > 0 for n in advertised.values()), published[0] > 0 or bool(published[2]),
                    wave is not None and step != "done", gpu_node(labels, switches) or bool(shadow[0]),
                    not not_ready(node))
    if side is None:
        return None
    if side == DRA:
        gpus, known = published[0], published
    taints = tuple(t for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict))
    return NodeView(name, side, gpus, advertised, labels, known[1], known[2], wave, step, unschedulable, taints)


def state_of(advertising: bool, publishing: bool, moving: bool, gpu_node: bool, reporting: bool = True) -> Side | None:
    """A node's state from what it does: its device plugin advertising GPUs, a DRA driver
    publishing them, a wave moving it; gpu_node: its labels say it has GPUs; reporting: its
    kubelet reports it Ready. None: no GPU node."""
    if moving:
        return MOVING  # both or neither for a while, by design: the move's steps say which
    if not reporting and (advertising or publishing or gpu_node):
        return UNKNOWN  # what it advertised or published may no longer be what it does
    if advertising and publishing:
        return BOTH  # whatever the labels say: one GPU could be handed out twice
    if publishing:
        return DRA
    if advertising:
        return PLUGIN
    return NEITHER if gpu_node else None  # a GPU node whose GPUs nothing serves now


def gpu_node(labels: dict, switches: Switches) -> bool:
    """Its labels say it has GPUs: a switch label on, or GPU Feature Discovery's count."""
    return labels.get(switches.dra_label) == switches.dra_on or \
        labels.get(switches.plugin_label) == switches.plugin_on or bool(_count_label(labels))


def index_states(index) -> dict[str, Side]:
    """node -> state, from a device index (the webhook's live view: Node status, published and
    shadow slices, Node labels with the default switches; a move's record is not read)."""
    switches, out = Switches(), {}
    advertising = dra.plugin_advertising(index)
    names = set(index.node_labels or {}) | set(index.node_resources or {}) | set(index.views)
    for node in names:
        labels = (index.node_labels or {}).get(node) or {}
        state = state_of(node in advertising, dra.publishes(index, node), False,
                         gpu_node(labels, switches) or node in index.shadow_nodes, node not in index.not_ready)
        if state is not None:
            out[node] = state
    return out


def plugin_advertised(node: dict) -> dict[str, int]:
    """NVIDIA's extended resources the node's device plugin advertises, cordoned or not."""
    return {k: v for k, v in extended_allocatable(node, cordoned_too=True).items() if k.startswith("nvidia.com/")}


def published(node: dict, slices: list[dict], switches: Switches) -> NodeView | None:
    """The node as NVIDIA's driver publishes it: its slices only (our shadow slices aside), the
    move's annotations aside."""
    meta = {**metadata_of(node), "annotations": {}}
    theirs = [s for s in slices if SHADOW_OF not in view_of(s).labels]
    return node_view({**node, "metadata": meta}, theirs, switches)


def _devices(slices: list[dict]) -> tuple[int, tuple[str, ...], dict[str, int]]:
    """(whole GPUs, their product names, MIG profile -> devices) the slices publish."""
    gpus, models, mig = 0, set(), Counter[str]()
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


@dataclass(frozen=True)
class NodeBefore:
    """What a move keeps of its node: the switch labels as they were (None: absent), the cordon,
    and the node's GPUs as the device plugin (or our shadow slices) described them: what undo
    restores and what the DRA side must publish."""

    labels: dict[str, str | None] = field(default_factory=dict)
    unschedulable: bool = False
    advertised: dict[str, int] = field(default_factory=dict)
    gpus: int = 0
    models: tuple[str, ...] = ()
    mig: dict[str, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: dict, where: str) -> NodeBefore:
        """From a record's JSON; ValueError naming the field for what no dra-bridge writes."""
        def whole(value, field_name: str) -> int:
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{where}.{field_name}: expected a whole number, got {value!r}")
            return value

        def counts(name: str) -> dict[str, int]:
            found = data.get(name) or {}
            if not isinstance(found, dict):
                raise ValueError(f"{where}.{name}: expected a map")
            return {str(k): whole(v, f"{name}.{k}") for k, v in found.items()}
        labels = data.get("labels") or {}
        models = data.get("models") or []
        if not isinstance(labels, dict) or not all(v is None or isinstance(v, str) for v in labels.values()):
            raise ValueError(f"{where}.labels: expected a map of label values (null: absent)")
        if not isinstance(models, list):
            raise ValueError(f"{where}.models: expected a list")
        return cls({str(k): v for k, v in labels.items()}, bool(data.get("unschedulable")), counts("advertised"),
                   whole(data.get("gpus") or 0, "gpus"), tuple(map(str, models)), counts("mig"))

    def as_json(self) -> dict:
        return {"labels": dict(self.labels), "unschedulable": self.unschedulable, "advertised": dict(self.advertised),
                "gpus": self.gpus, "models": list(self.models), "mig": dict(self.mig)}


def slices_ready(node: NodeView, before: NodeBefore) -> str | None:
    """None once a moved node's DRA side publishes what its device plugin advertised (as many
    whole GPUs, the same models, the same MIG layout); otherwise what is still missing."""
    if node.gpus < before.gpus:
        return f"{node.gpus} of {before.gpus} GPUs published"
    missing = [m for m in before.models if _model(m) not in {_model(x) for x in node.models}]
    if missing:
        return f"model {missing[0]} not published (published: {', '.join(node.models) or 'none'})"
    for profile, count in before.mig.items():
        if node.mig.get(profile, 0) < count:
            return f"MIG {profile}: {node.mig.get(profile, 0)} of {count} devices published"
    return None


def _model(name: str) -> str:
    """GFD writes `NVIDIA-H100-80GB-HBM3`, NVML `NVIDIA H100 80GB HBM3`: one spelling."""
    return re.sub(r"[\s_-]+", "-", name.strip().lower()).removesuffix("-shared")


def before_move(node: NodeView, switches: Switches) -> NodeBefore:
    """What the move keeps of the node, taken before it changes anything."""
    return NodeBefore({k: node.labels.get(k) for k in (switches.plugin_label, switches.dra_label)},
                      node.unschedulable, dict(node.advertised), node.gpus, tuple(node.models), dict(node.mig))
