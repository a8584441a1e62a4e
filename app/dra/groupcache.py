"""What feasibility keeps on an index between claims, by what each entry depends on: a group of
interchangeable nodes (its position), one node's view, or the claim's constraint attributes.
A live update carries over the entries whose group or node it did not touch. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class GroupCache:
    groups: list | None = None  # (nodes, the first node's view) per group
    shapes: dict[int, list[int]] = field(default_factory=dict)  # group -> device shapes its view holds
    histograms: dict[int, list] = field(default_factory=dict)  # group -> (shape, allocated, count)
    ordered: dict[str, bytes] = field(default_factory=dict)  # node -> its view's signature in allocation order
    refined: dict[tuple, list] = field(default_factory=dict)  # (group, part, attributes, exact, skip) -> nodes
    constraints: dict[tuple, tuple] = field(default_factory=dict)  # (node, attributes, exact) -> pattern

    def carried(self, old_signatures: list, new_positions: dict, changed: set) -> "GroupCache":
        """The entries still true after an update that re-placed the nodes in `changed`:
        per-group ones follow their group's signature to its new position, per-node ones stay
        for untouched nodes; the group list and the splits by constraint are rebuilt."""
        def moved(by_group: dict) -> dict:
            out = {}
            for gi, value in by_group.items():
                new = new_positions.get(old_signatures[gi]) if gi < len(old_signatures) else None
                if new is not None:
                    out[new] = value
            return out
        return GroupCache(shapes=moved(self.shapes), histograms=moved(self.histograms),
                          ordered={n: v for n, v in self.ordered.items() if n not in changed},
                          constraints={k: v for k, v in self.constraints.items() if k[0] not in changed})
