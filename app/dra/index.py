"""Device index over ResourceSlices: pools, node reachability, device shapes. Pure.

Devices whose attributes, capacities and taints are equal apart from identity (uuid, index, PCI
address, parent ids) form one *shape*; selectors that never mention an identity attribute are
evaluated once per shape, so cost grows with distinct shapes, not with devices.

Each node gets the view upstream's allocator builds for it (GatherPools): the pools its slices
reach, in allocation order, each complete, incomplete or invalid. Nodes whose views are equal
up to device identity form one group and are decided once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal

import orjson

from app.common import extended_allocatable, metadata_of, parse_quantity

from . import cel, shadow
from .groupcache import GroupCache
from .inventory import Inventory, allocated_capacity, allocated_devices, apply_taint_rules, shared_devices
from app.common import node_matches

IDENTITY_ATTRIBUTES = frozenset({"uuid", "index", "minor", "pciBusID", "pcieRoot", "parentUUID", "parentIndex",
                                 "parentMinor", "numaNode"})
ANY_NODE = "(any node)"


@dataclass(eq=False)
class Device:
    """One device. Shape-wide facts live once in the Index; a device keeps only its identity."""

    __slots__ = ("key", "node", "identity", "shape", "consumes", "binding", "placement", "_tables")
    key: tuple  # (driver, pool, name)
    node: str | None  # the slice's nodeName; None: network-attached (allNodes / selector / per device)
    identity: dict  # (domain, name) -> value of identity attributes only
    shape: int
    consumes: tuple  # ((counterSet, ((counter, Decimal), ...)), ...)
    binding: bool  # has bindingConditions: allocation waits for them
    placement: tuple | None  # per-device node selection: ("name", n) | ("all",) | ("selector", s)
    # (shapes, shape_flat) of the Index: lists every snapshot of a live index shares, so a device
    # never keeps an old snapshot (its views, groups, caches) alive.
    _tables: tuple

    @property
    def variable(self) -> dict:
        """The CEL `device`: the shape's variable with this device's identity attributes."""
        base = self._tables[0][self.shape]
        attributes = {d: dict(names) for d, names in base["attributes"].items()}
        for (domain, name), value in self.identity.items():
            attributes.setdefault(domain, {})[name] = value
        return {**base, "attributes": attributes}

    def attribute(self, qualified: str):
        """matchAttribute's lookup: the fully qualified name, or the bare name when its domain is
        the device's driver (upstream's lookupAttribute). None when the device lacks it."""
        domain, _, name = qualified.partition("/")
        if not name:
            return None
        value = self.identity.get((domain, name))
        if value is None:
            value = self._tables[1][self.shape].get(qualified)
        return value


@dataclass(eq=False)
class PoolView:
    """One pool as a node sees it, in the order upstream allocates from."""

    key: tuple  # (driver, pool)
    status: str  # ok | incomplete | invalid
    devices: tuple = ()  # device positions of the slices targeting the node, slice-name order
    selectable: frozenset | None = None  # per-device node selection: the positions this node may use
    counters: dict = field(default_factory=dict)  # counterSet -> counter -> Decimal (total)
    allocated_use: dict = field(default_factory=dict)  # counterSet -> counter -> Decimal used by allocated devices
    binding: bool = False
    reason: str = ""
    local: bool = False  # the pool's slices name this node


@dataclass
class Index:
    devices: list[Device] = field(default_factory=list)
    shapes: list[dict] = field(default_factory=list)  # representative CEL variable per shape
    shape_members: list[list[int]] = field(default_factory=list)
    shape_flat: list[dict] = field(default_factory=list)
    shape_taints: list[tuple] = field(default_factory=list)  # (key, value, effect) that can block allocation
    shape_capacity: list[dict] = field(default_factory=list)  # name -> (Decimal value, request policy or None)
    views: dict[str, list[PoolView]] = field(default_factory=dict)  # node -> its pools in allocation order
    # Nodes whose views hold the same devices in any order (canonical signature); the exact order
    # matters only when an error can stop upstream, and is compared then (ordered_signature).
    node_groups: dict[tuple, list[str]] = field(default_factory=dict)
    group_cache: GroupCache = field(default_factory=GroupCache)  # feasibility's, kept between claims
    node_labels_known: bool = False  # Node objects were read: nodeSelector slices are matched for real
    node_labels: dict | None = None  # node -> labels, as read (None: not read)
    node_resources: dict | None = None  # node -> extended resource -> allocatable (None: not read)
    quotas: dict | None = None  # namespace -> [(ResourceQuota name, device limits)] (None: not read)
    selector_slices: int = 0  # slices placed by a nodeSelector (whole slice or per device)
    selector_cache: dict = field(default_factory=dict)  # feasibility: expression -> per-shape results
    classes: dict[str, dict] = field(default_factory=dict)
    allocated: set = field(default_factory=set)  # (driver, pool, device) allocated whole
    allocated_capacity: dict = field(default_factory=dict)  # key -> capacity name -> Decimal, shared devices
    shared_in_use: set = field(default_factory=set)  # keys of allow-multiple devices with a share allocated
    incomplete_pools: set = field(default_factory=set)
    invalid_pools: dict = field(default_factory=dict)  # (driver, pool) -> why
    # (driver, pool, device, why) of devices left out: a value upstream could not use either
    # makes that device unusable, never the whole inventory.
    rejected: list = field(default_factory=list)
    # Nodes judged by our reporter's shadow slices: validation treats them as NVIDIA's driver
    # would publish them, but nothing can be allocated there (no DRA driver serves them yet).
    shadow_nodes: frozenset = frozenset()
    # Cordoned nodes: the scheduler places there only pods that tolerate
    # node.kubernetes.io/unschedulable (DaemonSet pods), so they are no room for the rest.
    cordoned: frozenset = frozenset()
    # Shared by the snapshots that differ only in what is allocated (claim updates): what the
    # path choice reads besides verdicts (classes, devices, nodes, quotas) is the same in all.
    epoch: object = field(default_factory=object)

    @property
    def device_count(self) -> int:
        """Devices in the inventory; `devices` also keeps the positions incremental updates retired."""
        return sum(map(len, self.shape_members))

    @property
    def by_node(self) -> dict[str, list[int]]:
        """Node -> positions of the devices in slices that name it."""
        return {node: [d for p in view if p.local for d in p.devices] for node, view in self.views.items()}

    def groups(self) -> list[tuple[list[str], list[PoolView]]]:
        """(nodes, the first node's view) per group of interchangeable nodes."""
        if self.group_cache.groups is None:
            self.group_cache.groups = [(nodes, self.views[nodes[0]]) for nodes in self.node_groups.values()]
        return self.group_cache.groups

    def ordered_signature(self, node: str) -> tuple:
        """The node's view with its devices in allocation order (computed when first needed)."""
        ordered = self.group_cache.ordered
        if node not in ordered:
            ordered[node] = _view_signature(self.views[node], self, ordered=True)
        return ordered[node]


def _split_identity(variable: dict) -> tuple[dict, dict]:
    attributes, identity = {}, {}
    for domain, names in variable["attributes"].items():
        attributes[domain] = {}
        for name, value in names.items():
            if name in IDENTITY_ATTRIBUTES:
                identity[(domain, name)] = value
            else:
                attributes[domain][name] = value
    return {**variable, "attributes": attributes}, identity


def _blocking_taints(raw) -> tuple:
    """Taints that keep a device from being allocated unless tolerated: NoSchedule and NoExecute
    (upstream ignores None and unknown effects)."""
    if not isinstance(raw, list):
        return ()
    return tuple(sorted((str(t.get("key", "")), str(t.get("value", "")), t["effect"]) for t in raw
                        if isinstance(t, dict) and t.get("effect") in ("NoSchedule", "NoExecute")))


def _policy(raw) -> dict | None:
    """A capacity's requestPolicy with quantities parsed (default, validValues, validRange)."""
    if not isinstance(raw, dict):
        return None
    out: dict = {}
    if raw.get("default") is not None:
        out["default"] = parse_quantity(raw["default"])
    if raw.get("validValues"):
        out["validValues"] = [parse_quantity(v) for v in raw["validValues"]]
    if isinstance(raw.get("validRange"), dict):
        out["validRange"] = {k: parse_quantity(v) for k, v in raw["validRange"].items()
                             if k in ("min", "max", "step") and v is not None}
    return out


def _capacity(raw) -> dict:
    out = {}
    for name, cap in (raw or {}).items():
        if isinstance(cap, dict):
            out[name] = (parse_quantity(cap.get("value")), _policy(cap.get("requestPolicy")))
    return out


def _consumes(raw) -> tuple:
    out = []
    for use in raw or ():
        if not isinstance(use, dict):
            raise ValueError("consumesCounters entries must be objects")
        counters = tuple(sorted((name, parse_quantity((c or {}).get("value")))
                                for name, c in (use.get("counters") or {}).items()))
        out.append((str(use.get("counterSet", "")), counters))
    return tuple(out)


def _placement(raw: dict) -> tuple | None:
    if raw.get("nodeName"):
        return ("name", raw["nodeName"])
    if raw.get("allNodes"):
        return ("all",)
    if raw.get("nodeSelector") is not None:
        return ("selector", raw["nodeSelector"])
    return ("none",)


def pool_key(s: dict) -> tuple:
    """(driver, pool name) of a slice (as kept or as served)."""
    spec = s["spec"]
    return (spec.get("driver"), (spec.get("pool") or {}).get("name"))


def _generation(s: dict) -> int:
    return int((s["spec"].get("pool") or {}).get("generation", 0) or 0)


def _slice_count(s: dict) -> int:
    return int((s["spec"].get("pool") or {}).get("resourceSliceCount", 1) or 0)


class _Builder:
    def __init__(self, inventory: Inventory, index: Index):
        self.index = index
        self.shape_ids: dict[bytes, int] = {}
        self.positions: dict[int, list[int]] = {}  # id(slice) -> device positions
        self.pools: dict[tuple, list[dict]] = {}
        self.node_labels = inventory.nodes
        self.copied: set[int] | None = None  # incremental updates: shapes whose member list was copied

    def members(self, shape: int) -> list[int]:
        """The member list of a shape, to append to; copied first when readers may hold it."""
        if self.copied is not None and shape not in self.copied and shape < len(self.index.shape_members):
            self.index.shape_members[shape] = list(self.index.shape_members[shape])
            self.copied.add(shape)
        return self.index.shape_members[shape]

    def add_slice(self, full: dict) -> dict:
        """Index the slice's devices; what is kept of the slice (its spec without the device
        bodies), so a large inventory is never all decoded at once."""
        spec = full["spec"]
        devices = spec.get("devices") or []
        s = {"metadata": {"name": metadata_of(full).get("name")},
             "spec": {**{k: v for k, v in spec.items() if k != "devices"},
                      "deviceNames": [d.get("name") if isinstance(d, dict) else None for d in devices]}}
        driver, pool_name = spec.get("driver"), (spec.get("pool") or {}).get("name")
        self.pools.setdefault((driver, pool_name), []).append(s)
        positions = self.positions.setdefault(id(s), [])
        if spec.get("nodeSelector") is not None or spec.get("perDeviceNodeSelection"):
            self.index.selector_slices += 1
        if spec.get("sharedCounters"):
            return s  # a counter slice: its devices are not allocatable (upstream)
        per_device = bool(spec.get("perDeviceNodeSelection"))
        for raw in devices:
            if not isinstance(raw, dict):
                continue
            try:
                shape_variable, identity = _split_identity(cel.device_variable(driver, raw))
                capacity = _capacity(raw.get("capacity"))
                consumes = _consumes(raw.get("consumesCounters"))
            except (ValueError, TypeError, AttributeError) as exc:
                self.index.rejected.append((driver, pool_name, raw.get("name"), str(exc)))
                continue
            taints = _blocking_taints(raw.get("taints"))
            key = orjson.dumps([shape_variable, taints, {k: [str(v), repr(p)] for k, (v, p) in capacity.items()}],
                               option=orjson.OPT_SORT_KEYS)
            index = self.index
            if key not in self.shape_ids:
                self.shape_ids[key] = len(index.shapes)
                index.shapes.append(shape_variable)
                index.shape_taints.append(taints)
                index.shape_capacity.append(capacity)
                index.shape_members.append([])
                index.shape_flat.append({f"{d}/{n}": v for d, names in shape_variable["attributes"].items()
                                         for n, v in names.items()})
            device = Device((driver, pool_name, raw.get("name")), spec.get("nodeName") or None, identity,
                            self.shape_ids[key], consumes, bool(raw.get("bindingConditions")),
                            _placement(raw) if per_device else None, (index.shapes, index.shape_flat))
            position = len(index.devices)
            index.devices.append(device)
            self.members(device.shape).append(position)
            positions.append(position)
        return s

    # -- per node: upstream's GatherPools --------------------------------------------------
    def reaches(self, s: dict, node: str) -> bool:
        spec = s["spec"]
        if spec.get("nodeName"):
            return spec["nodeName"] == node
        if spec.get("allNodes"):
            return True
        if spec.get("nodeSelector") is not None:
            return self.selector_matches(spec["nodeSelector"], node)
        if spec.get("perDeviceNodeSelection"):
            return any(self.device_reaches(d, node) for d in self.positions[id(s)])
        return False  # nothing known was set: some future extension, ignored

    def selector_matches(self, selector, node: str) -> bool:
        if self.node_labels is None:
            return True  # no Node objects read: assumed reachable (the verdict says so)
        return node_matches(selector, node, self.node_labels.get(node) or {})

    def device_reaches(self, position: int, node: str) -> bool:
        placement = self.index.devices[position].placement
        if placement is None:
            return True
        kind = placement[0]
        if kind == "name":
            return placement[1] == node
        if kind == "all":
            return True
        if kind == "selector":
            return self.selector_matches(placement[1], node)
        return False

    def view(self, node: str, local: list[dict], shared: list[dict]) -> list[PoolView]:
        targeting: dict[tuple, list[dict]] = {}
        for s in local + shared:
            if not self.reaches(s, node):
                continue
            key = pool_key(s)
            current = targeting.get(key)
            if current is None or _generation(s) > _generation(current[0]):
                targeting[key] = [s]
            elif _generation(s) == _generation(current[0]):
                current.append(s)
        ready, waiting = [], []
        for key, slices in targeting.items():
            pool = self.pool_view(node, key, slices)
            if pool is not None:
                (waiting if pool.binding else ready).append(pool)
        order = lambda p: (str(p.key[0]), str(p.key[1]))  # noqa: E731 - upstream sorts pools by ID
        return sorted(ready, key=order) + sorted(waiting, key=order)

    def pool_view(self, node: str, pool_key: tuple, slices: list[dict]) -> PoolView | None:
        count, generation = _slice_count(slices[0]), _generation(slices[0])
        local = slices[0]["spec"].get("nodeName") == node
        by_name = sorted(slices, key=lambda s: str(metadata_of(s).get("name", "")))
        device_slices = [s for s in by_name if not s["spec"].get("sharedCounters")]
        devices = tuple(p for s in device_slices for p in self.positions[id(s)])
        per_device = {p for s in device_slices if s["spec"].get("perDeviceNodeSelection")
                      for p in self.positions[id(s)]}
        selectable = None
        if per_device:
            selectable = frozenset(p for p in devices if p not in per_device or self.device_reaches(p, node))
        everything = None
        if len(slices) != count:
            all_slices = self.pools[pool_key]
            if any(_generation(s) > generation for s in all_slices):
                return None  # being replaced by a newer generation: ignored
            everything = [s for s in all_slices if _generation(s) == generation]
            if len(everything) != count:
                self.index.incomplete_pools.add(pool_key)
                # Devices and counters kept: once complete the pool may serve (the "not now" verdict).
                pool = PoolView(pool_key, "incomplete", devices, selectable, local=local)
                self.invalid(device_slices, [s for s in everything if s["spec"].get("sharedCounters")], [], pool)
                return pool
        targeting_ids = {id(s) for s in slices}
        counter_slices = [s for s in (everything or slices) if s["spec"].get("sharedCounters")]
        others = [s for s in everything or () if id(s) not in targeting_ids and not s["spec"].get("sharedCounters")]
        pool = PoolView(pool_key, "ok", devices, selectable, local=local,
                        binding=any(self.index.devices[p].binding for p in devices))
        why = self.invalid(device_slices, counter_slices, others, pool)
        if why:
            self.index.invalid_pools[pool_key] = why
            return PoolView(pool_key, "invalid", reason=why, local=pool.local)
        return pool

    def invalid(self, device_slices, counter_slices, others, pool: PoolView) -> str:
        names = set()
        for s in device_slices:
            for name in s["spec"]["deviceNames"]:
                if name in names:
                    return f"duplicate device name {name}"
                names.add(name)
        for s in counter_slices:
            for counter_set in s["spec"].get("sharedCounters") or []:
                name = (counter_set or {}).get("name")
                if name in pool.counters:
                    return f"duplicate counter set name {name}"
                try:
                    pool.counters[name] = {c: parse_quantity((v or {}).get("value"))
                                           for c, v in ((counter_set or {}).get("counters") or {}).items()}
                except ValueError as exc:
                    return f"counter set {name}: {exc}"
        allocated = self.index.allocated
        for s in device_slices + others:
            for p in self.positions[id(s)]:
                device = self.index.devices[p]
                for set_name, counters in device.consumes:
                    if set_name not in pool.counters:
                        return f"counter set {set_name} not found"
                    for counter, amount in counters:
                        if counter not in pool.counters[set_name]:
                            return f"counter {counter} not found in counter set {set_name}"
                        if device.key in allocated or device.key in self.index.shared_in_use \
                                or device.key in self.index.allocated_capacity:
                            use = pool.allocated_use.setdefault(set_name, {})
                            use[counter] = use.get(counter, Decimal(0)) + amount
        return ""


def _view_signature(view: list[PoolView], index: Index, ordered: bool) -> tuple:
    """Equal for nodes whose views differ only in device identity and local pool names (and,
    unless `ordered`, in the order of devices and pools)."""
    out = []
    for pool in view:
        devices = [(index.devices[p].shape, index.devices[p].key in index.allocated,
                    index.devices[p].key in index.shared_in_use,
                    tuple(sorted(index.allocated_capacity.get(index.devices[p].key, {}).items())),
                    index.devices[p].consumes, index.devices[p].binding,
                    pool.selectable is None or p in pool.selectable) for p in pool.devices]
        name = pool.key[1] if not pool.local else None
        out.append((pool.key[0], name, pool.status, pool.reason, tuple(devices if ordered else sorted(devices)),
                    tuple(sorted((k, tuple(sorted(v.items()))) for k, v in pool.counters.items())),
                    tuple(sorted((k, tuple(sorted(v.items()))) for k, v in pool.allocated_use.items()))))
    return tuple(out if ordered else sorted(out, key=repr))


class Build:
    """A full build, with the state an incremental update needs (app.dra.live)."""

    def __init__(self, inventory: Inventory, allocated: set | None = None, capacity: dict | None = None,
                 shared: set | None = None):
        index = Index(classes=dict(inventory.classes), allocated=set(allocated or ()),
                      allocated_capacity=dict(capacity or {}), shared_in_use=set(shared or ()),
                      node_labels_known=inventory.nodes is not None, node_labels=inventory.nodes,
                      node_resources=inventory.node_resources, quotas=inventory.quotas,
                      cordoned=frozenset(inventory.cordoned))
        self.index, self.inventory = index, inventory
        self.builder = _Builder(inventory, index)
        self.local: dict[str, list[dict]] = {}
        self.network: list[dict] = []
        self.by_name: dict[str, dict] = {}  # slice name -> what is kept of it
        self.rejected_by_slice: dict[str, list] = {}
        self.signature_of: dict[str, tuple] = {}  # node -> its group's signature
        self.shadow_nodes: set[str] = set()  # nodes judged by shadow slices (app.dra.shadow)
        self.shadowed = 0  # shadow slices ignored: the real driver publishes for their node
        shadows = []
        for full in inventory.slices:  # may be a generator: each slice is decoded, indexed, let go
            if isinstance(full.get("spec"), dict):
                if shadow.shadow_of(full):
                    shadows.append(full)
                else:
                    self.add(full)
        for full in shadows:
            served = shadow.as_served(full)
            node = served["spec"].get("nodeName")
            if any(s["spec"].get("driver") == served["spec"]["driver"] for s in self.local.get(node, ())):
                self.shadowed += 1
                continue
            if node:
                self.shadow_nodes.add(node)
            self.add(served)
        # The nodes slices name, and every Node object (one with no devices of its own can still
        # reach network-attached ones); without Node objects, a stand-in for network-attached devices.
        named = set(self.local) | {d.placement[1] for d in index.devices if d.placement and d.placement[0] == "name"}
        if inventory.nodes is not None:
            nodes = sorted(named | set(inventory.nodes))
        else:
            nodes = sorted(named) or ([ANY_NODE] if self.network else [])
        for node in nodes:
            if self.place(node):
                index.node_groups.setdefault(self.signature_of[node], []).append(node)
        # Groups in order of their first node (nodes are sorted): examples stay deterministic.
        index.node_groups = dict(sorted(index.node_groups.items(), key=lambda kv: kv[1][0]))
        index.shadow_nodes = frozenset(self.shadow_nodes)

    def add(self, full: dict) -> dict:
        before = len(self.index.rejected)
        s = self.builder.add_slice(apply_taint_rules(full, self.inventory.taint_rules))
        name = s["metadata"]["name"]
        self.by_name[name] = s
        if len(self.index.rejected) > before:
            self.rejected_by_slice[name] = self.index.rejected[before:]
        node = s["spec"].get("nodeName")
        (self.local.setdefault(node, []) if node else self.network).append(s)
        return s

    def place(self, node: str) -> bool:
        """(Re)compute a node's view and signature; False when the node has nothing to see."""
        index = self.index
        view = self.builder.view(node, self.local.get(node, []), self.network)
        if not view and self.inventory.nodes is None:
            index.views.pop(node, None)
            self.signature_of.pop(node, None)
            return False
        index.views[node] = view
        self.signature_of[node] = _view_signature(view, index, ordered=False)
        return True


def build(inventory: Inventory, allocated: set | None = None, capacity: dict | None = None,
          shared: set | None = None) -> Index:
    """allocated, capacity, shared: what claims hold; by default what the inventory's claims hold."""
    if allocated is None and inventory.claims:
        claims = inventory.claims
        allocated, capacity, shared = allocated_devices(claims), allocated_capacity(claims), shared_devices(claims)
    return Build(inventory, allocated, capacity, shared).index


def build_from_api(slices, classes: dict[str, dict], claims: list[dict], nodes: list[dict] | None = None) -> Index:
    """The index of objects as the API serves them (the live inventory's builder); `slices` may
    be a generator, consumed once."""
    labels = None if nodes is None else {
        metadata_of(n).get("name"): dict(metadata_of(n).get("labels") or {}) for n in nodes}
    resources = None if nodes is None else {metadata_of(n).get("name"): extended_allocatable(n) for n in nodes}
    cordoned = frozenset(metadata_of(n).get("name") for n in nodes or ()
                         if (n.get("spec") or {}).get("unschedulable"))
    inventory = Inventory(slices=slices, classes=classes, source="live", nodes=labels, node_resources=resources,
                          cordoned=cordoned)
    return build(inventory, allocated_devices(claims), allocated_capacity(claims), shared_devices(claims))
