"""Device index over ResourceSlices: pools, node reachability, device shapes. Pure.

Devices whose attributes and capacities are equal apart from identity (uuid, index, PCI
address, parent ids) form one *shape*; selectors that never mention an identity attribute are
evaluated once per shape, so cost grows with distinct shapes, not with devices.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from app import cel
from app.inventory import Inventory

IDENTITY_ATTRIBUTES = frozenset({"uuid", "index", "minor", "pciBusID", "pcieRoot", "parentUUID", "parentIndex",
                                 "parentMinor", "numaNode"})
ANY_NODE = "(any node)"


@dataclass
class Device:
    key: tuple  # (driver, pool, name)
    node: str | None  # None: reachable from every node (allNodes / nodeSelector slices)
    variable: dict  # the CEL `device`
    flat: dict  # "domain/name" -> value, for constraints
    shape: int
    complete_pool: bool


@dataclass
class Index:
    devices: list[Device] = field(default_factory=list)
    by_node: dict[str, list[int]] = field(default_factory=dict)
    shared: list[int] = field(default_factory=list)
    shapes: list[dict] = field(default_factory=list)  # representative CEL variable per shape
    shape_members: list[list[int]] = field(default_factory=list)
    classes: dict[str, dict] = field(default_factory=dict)
    allocated: set = field(default_factory=set)
    incomplete_pools: set = field(default_factory=set)

    def locations(self) -> list[tuple[str, list[int]]]:
        """(node, device indices reachable from it). Only shared devices: one abstract location."""
        if not self.by_node:
            return [(ANY_NODE, list(self.shared))] if self.shared else []
        return [(node, local + self.shared) for node, local in sorted(self.by_node.items())]


def _shape_key(variable: dict) -> bytes:
    attributes = {d: {k: v for k, v in names.items() if k not in IDENTITY_ATTRIBUTES}
                  for d, names in variable["attributes"].items()}
    return orjson.dumps({**variable, "attributes": attributes}, option=orjson.OPT_SORT_KEYS)


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
                variable = cel.device_variable(driver, raw)
                key = _shape_key(variable)
                if key not in shape_ids:
                    shape_ids[key] = len(index.shapes)
                    index.shapes.append(variable)
                    index.shape_members.append([])
                flat = {}
                for domain, names in variable["attributes"].items():
                    for name, value in names.items():
                        flat[f"{domain}/{name}"] = value
                device = Device((driver, pool_name, raw.get("name")), node, variable, flat,
                                shape_ids[key], complete)
                position = len(index.devices)
                index.devices.append(device)
                index.shape_members[device.shape].append(position)
                if node:
                    index.by_node.setdefault(node, []).append(position)
                else:
                    index.shared.append(position)
    return index
