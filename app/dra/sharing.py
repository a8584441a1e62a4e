"""What the inventory says about GPU sharing, for the planner's sharing path. Pure.

- shareable_classes: per DeviceClass, its devices that allow multiple allocations (consumable
  capacity): the capacity names all of them publish and their distinct memory sizes.
- time_sliced: why plain GPU requests are shares here, when every node with devices carries a
  device plugin sharing label (GFD's sharing-strategy / replicas, GKE's sharing strategy).
"""

from __future__ import annotations

from decimal import Decimal

from .claims import Request
from .selection import Selection
from .index import Index

_NOT_SHARED = {"none", "", "false", "exclusive", "0", "1"}


def shareable_classes(index: Index, memory_capacity: str = "memory") -> dict[str, tuple[frozenset, tuple]]:
    """DeviceClass -> (capacity names every shareable device of it has, distinct memory sizes)."""
    # Members first: a live index's shape table is shared with newer snapshots, which may have
    # added shapes this snapshot has no member list for.
    multi = [s for s, members in enumerate(index.shape_members)
             if members and index.shapes[s].get("allowMultipleAllocations")]
    if not multi:
        return {}
    selection = Selection(index)
    out: dict[str, tuple[frozenset, tuple]] = {}
    for name in sorted(index.classes):
        req = Request(name="probe", device_class=name, selectors=[], path=f"deviceclasses/{name}")
        selection.prepare(req)
        per_device = any(r is not None and r.per_device for _l, r in selection.parts[req.path])
        shapes = [s for s in multi
                  if any(not selection.failed_parts(req, p)
                         for p in (index.shape_members[s] if per_device else index.shape_members[s][:1]))]
        if not shapes:
            continue
        capacities = frozenset.intersection(*(frozenset(index.shape_capacity[s]) for s in shapes))
        sizes = sorted({index.shape_capacity[s][memory_capacity][0] for s in shapes
                        if memory_capacity in index.shape_capacity[s]})
        out[name] = (capacities, tuple(Decimal(v) for v in sizes))
    return out


def time_sliced(node_labels: dict[str, dict] | None, nodes_with_devices, labels: list[str]) -> str | None:
    """'label=value' when every node with devices carries one of these sharing labels with a
    sharing value; None when any does not, or Node labels were not read."""
    if not node_labels or not labels:
        return None
    seen = None
    for node in nodes_with_devices:
        mine = node_labels.get(node) or {}
        found = next((f"{k}={mine[k]}" for k in labels if str(mine.get(k, "")).lower() not in _NOT_SHARED), None)
        if found is None:
            return None
        seen = seen or found
    return seen and f"every GPU node is shared by the device plugin (node label {seen})"
