"""Device index over ResourceSlices: pools, node reachability, device shapes. Pure.

Devices whose attributes and capacities are equal apart from identity (uuid, index, PCI
address, parent ids) form one *shape*; selectors that never mention an identity attribute are
evaluated once per shape, so cost grows with distinct shapes, not with devices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from . import cel
from .inventory import Inventory, allocated_devices

IDENTITY_ATTRIBUTES = frozenset({"uuid", "index", "minor", "pciBusID", "pcieRoot", "parentUUID", "parentIndex",
                                 "parentMinor", "numaNode"})
ANY_NODE = "(any node)"


@dataclass(eq=False)
class Device:
    """One device. Shape-wide facts live once in the Index; a device keeps only its identity."""

    __slots__ = ("key", "node", "identity", "shape", "complete_pool", "_index")
    key: tuple  # (driver, pool, name)
    node: str | None  # None: reachable from every node (allNodes / nodeSelector slices)
    identity: dict  # (domain, name) -> value of identity attributes only
    shape: int
    complete_pool: bool
    _index: "Index"

    @property
    def variable(self) -> dict:
        """The CEL `device`: the shape's variable with this device's identity attributes."""
        base = self._index.shapes[self.shape]
        attributes = {d: dict(names) for d, names in base["attributes"].items()}
        for (domain, name), value in self.identity.items():
            attributes.setdefault(domain, {})[name] = value
        return {**base, "attributes": attributes}

    @property
    def flat(self) -> dict:
        """"domain/name" -> value, for matchAttribute / distinctAttribute."""
        out = dict(self._index.shape_flat[self.shape])
        out.update({f"{d}/{n}": v for (d, n), v in self.identity.items()})
        return out


@dataclass
class Index:
    devices: list[Device] = field(default_factory=list)
    by_node: dict[str, list[int]] = field(default_factory=dict)
    shared: list[int] = field(default_factory=list)
    shapes: list[dict] = field(default_factory=list)  # representative CEL variable per shape
    shape_members: list[list[int]] = field(default_factory=list)
    shape_flat: list[dict] = field(default_factory=list)
    shape_taints: list[tuple] = field(default_factory=list)  # (key, value, effect) that can block allocation
    node_groups: dict[tuple, list[str]] = field(default_factory=dict)  # device signature -> nodes
    selector_cache: dict = field(default_factory=dict)  # feasibility: (expression, mask) -> results
    classes: dict[str, dict] = field(default_factory=dict)
    allocated: set = field(default_factory=set)
    incomplete_pools: set = field(default_factory=set)
    # (driver, pool, device, why) of devices left out: a value upstream could not use either
    # makes that device unusable, never the whole inventory.
    rejected: list = field(default_factory=list)

    def signature(self, local: list[int]) -> tuple:
        """Nodes with equal signatures are interchangeable for claims that ignore identity."""
        return tuple(sorted((self.devices[d].shape, self.devices[d].key in self.allocated,
                             self.devices[d].complete_pool) for d in local))

    def groups(self) -> list[tuple[list[str], list[int]]]:
        """(nodes, devices reachable from the first of them) per node group."""
        if not self.by_node:
            return [([ANY_NODE], list(self.shared))] if self.shared else []
        # Built sorted (see build): nothing to sort on the validation path.
        return [(nodes, self.by_node[nodes[0]] + self.shared) for nodes in self.node_groups.values()]

    def locations(self) -> list[tuple[str, list[int]]]:
        """(node, device indices reachable from it). Only shared devices: one abstract location."""
        if not self.by_node:
            return [(ANY_NODE, list(self.shared))] if self.shared else []
        return [(node, local + self.shared) for node, local in sorted(self.by_node.items())]


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


def build(inventory: Inventory, allocated: set | None = None) -> Index:
    index = Index(classes=dict(inventory.classes), allocated=set(allocated or ()))
    pools: dict[tuple, list[dict]] = {}
    for s in inventory.slices:
        spec = s.get("spec") or {}
        pool = spec.get("pool") or {}
        pools.setdefault((spec.get("driver"), pool.get("name")), []).append(s)
    shape_ids: dict[bytes, int] = {}
    for (driver, pool_name), slices in sorted(pools.items(), key=lambda kv: (str(kv[0][0]), str(kv[0][1]))):
        newest = max(int((s["spec"].get("pool") or {}).get("generation", 0)) for s in slices)
        current = [s for s in slices if int((s["spec"].get("pool") or {}).get("generation", 0)) == newest]
        expected = max(int((s["spec"].get("pool") or {}).get("resourceSliceCount", 1)) for s in current)
        complete = len(current) >= expected  # stale generations are ignored outright
        if not complete:
            index.incomplete_pools.add((driver, pool_name))
        for s in current:
            spec = s["spec"]
            node = spec.get("nodeName") or None
            for raw in spec.get("devices") or []:
                try:
                    shape_variable, identity = _split_identity(cel.device_variable(driver, raw))
                except (ValueError, TypeError, AttributeError) as exc:
                    name = raw.get("name") if isinstance(raw, dict) else None
                    index.rejected.append((driver, pool_name, name, str(exc)))
                    continue
                taints = _blocking_taints(raw.get("taints"))
                key = orjson.dumps([shape_variable, taints], option=orjson.OPT_SORT_KEYS)
                if key not in shape_ids:
                    shape_ids[key] = len(index.shapes)
                    index.shapes.append(shape_variable)
                    index.shape_taints.append(taints)
                    index.shape_members.append([])
                    index.shape_flat.append({f"{d}/{n}": v for d, names in shape_variable["attributes"].items()
                                             for n, v in names.items()})
                device = Device((driver, pool_name, raw.get("name")), node, identity, shape_ids[key], complete,
                                index)
                position = len(index.devices)
                index.devices.append(device)
                index.shape_members[device.shape].append(position)
                if node:
                    index.by_node.setdefault(node, []).append(position)
                else:
                    index.shared.append(position)
    for node, local in sorted(index.by_node.items()):
        index.node_groups.setdefault(index.signature(local), []).append(node)
    # Groups in order of their first node, nodes sorted within: examples stay deterministic.
    index.node_groups = dict(sorted(index.node_groups.items(), key=lambda kv: kv[1][0]))
    return index


def build_from_api(slices: list[dict], classes: dict[str, dict], claims: list[dict]) -> Index:
    """The index of objects as the API serves them (the live inventory's builder)."""
    return build(Inventory(slices=slices, classes=classes, source="live"), allocated_devices(claims))
