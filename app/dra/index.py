"""Device index over ResourceSlices: pools, node reachability, device shapes. Pure.

Devices whose attributes, capacities and taints are equal apart from identity (uuid, index, PCI
address, parent ids) form one *shape*; selectors that never mention an identity attribute are
evaluated once per shape, so cost grows with distinct shapes, not with devices.

Each node gets the view upstream's allocator builds for it (GatherPools): the pools its slices
reach, in allocation order, each complete, incomplete or invalid. Nodes whose views are equal
up to device identity form one group and are decided once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from app.common.release import Release

from .groupcache import GroupCache

EMPTY: Mapping = MappingProxyType({})
ANY_NODE = "(any node)"


@dataclass(eq=False)
class Device:
    """One device. Shape-wide facts live once in the Index; a device keeps only its identity."""

    __slots__ = ("key", "node", "identity", "shape", "consumes", "binding", "placement", "_tables")
    key: tuple  # (driver, pool, name)
    node: str | None  # the slice's nodeName; None: network-attached (allNodes / selector / per device)
    # Identity attributes only, flat: ((domain, name), value, (domain, name), value, ...); a
    # dict per device was a fifth of a 100,000-device index.
    identity: tuple
    shape: int
    consumes: tuple  # ((counterSet, ((counter, Decimal), ...)), ...)
    binding: bool  # has bindingConditions: allocation waits for them
    placement: tuple | None  # per-device node selection: ("name", n) | ("all",) | ("selector", s)
    # (shapes, shape_flat) of the Index: lists every snapshot of a live index shares, so a device
    # never keeps an old snapshot (its views, groups, caches) alive.
    _tables: tuple

    def identity_value(self, domain: str, name: str, default=None):
        identity = self.identity
        for i in range(0, len(identity), 2):
            if identity[i] == (domain, name):
                return identity[i + 1]
        return default

    @property
    def variable(self) -> dict:
        """The CEL `device`: the shape's variable with this device's identity attributes."""
        base = self._tables[0][self.shape]
        attributes = {d: dict(names) for d, names in base["attributes"].items()}
        identity = self.identity
        for i in range(0, len(identity), 2):
            domain, name = identity[i]
            attributes.setdefault(domain, {})[name] = identity[i + 1]
        return {**base, "attributes": attributes}

    def attribute(self, qualified: str):
        """matchAttribute's lookup: the fully qualified name, or the bare name when its domain is
        the device's driver (upstream's lookupAttribute). None when the device lacks it."""
        domain, _, name = qualified.partition("/")
        if not name:
            return None
        value = self.identity_value(domain, name)
        if value is None:
            value = self._tables[1][self.shape].get(qualified)
        return value


@dataclass(eq=False, slots=True)
class PoolView:
    """One pool as a node sees it, in the order upstream allocates from."""

    key: tuple  # (driver, pool)
    status: str  # ok | incomplete | invalid
    devices: tuple = ()  # device positions of the slices targeting the node, slice-name order
    selectable: frozenset | None = None  # per-device node selection: the positions this node may use
    # Read-only; pools without counters share one empty mapping (12,500 empty dicts were 1.6 MB).
    counters: Mapping = field(default_factory=lambda: EMPTY)  # counterSet -> counter -> Decimal total
    # counterSet -> counter -> Decimal used by allocated devices
    allocated_use: Mapping = field(default_factory=lambda: EMPTY)
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
    node_groups: dict[bytes, list[str]] = field(default_factory=dict)
    group_cache: GroupCache = field(default_factory=GroupCache)  # feasibility's, kept between claims
    node_labels_known: bool = False  # Node objects were read: nodeSelector slices are matched for real
    node_labels: dict | None = None  # node -> labels, as read (None: not read)
    node_resources: dict | None = None  # node -> extended resource -> allocatable (None: not read)
    quotas: dict | None = None  # namespace -> [(ResourceQuota name, device limits)] (None: not read)
    priority_classes: list | None = None  # PriorityClass objects (None: not read)
    selector_slices: int = 0  # slices placed by a nodeSelector (whole slice or per device)
    selector_cache: dict = field(default_factory=dict)  # feasibility: expression -> per-shape results
    classes: dict[str, dict] = field(default_factory=dict)
    allocated: set = field(default_factory=set)  # (driver, pool, device) allocated whole
    allocated_capacity: dict = field(default_factory=dict)  # key -> capacity name -> Decimal, shared devices
    shared_in_use: set = field(default_factory=set)  # keys of allow-multiple devices with a share allocated
    incomplete_pools: dict = field(default_factory=dict)  # (driver, pool) -> what is missing
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
    not_ready: frozenset = frozenset()  # nodes whose kubelet reports them not Ready (rollout's `unknown`)
    leaving: frozenset = frozenset()  # nodes a rollout undo takes off DRA: room for no pod at all
    # Shared by the snapshots that differ only in what is allocated (claim updates): what the
    # path choice reads besides verdicts (classes, devices, nodes, quotas) is the same in all.
    epoch: object = field(default_factory=object)
    release: Release | None = None  # whose allocator is followed; None: the default

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

    def ordered_signature(self, node: str) -> bytes:
        """The node's view with its devices in allocation order (computed when first needed)."""
        ordered = self.group_cache.ordered
        if node not in ordered:
            ordered[node] = view_signature(self.views[node], self, ordered=True)
        return ordered[node]


def view_signature(view: list[PoolView], index: Index, ordered: bool) -> bytes:
    """Equal for nodes whose views differ only in device identity and local pool names (and,
    unless `ordered`, in the order of devices and pools). A 128-bit digest: only ever compared,
    and 12,500 nodes' full signatures were 25 MB of a 100,000-device index."""
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
    parts = [repr(pool) for pool in out]
    return hashlib.blake2b("\n".join(parts if ordered else sorted(parts)).encode(), digest_size=16).digest()


