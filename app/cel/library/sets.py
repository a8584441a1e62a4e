"""cel-go's sets extension: sets.contains, sets.equivalent, sets.intersects."""

from __future__ import annotations

from .decl import function

DECLARATIONS = [function(f"sets.{name}", ("list(A)", "list(A)"), "bool", cost="pairs")
                for name in ("contains", "equivalent", "intersects")]


def _has(items, x) -> bool:
    return any(type(x) is type(y) and x == y for y in items)


FUNCTIONS = {
    "sets__contains": lambda a, b: all(_has(a, x) for x in b),
    "sets__equivalent": lambda a, b: all(_has(b, x) for x in a) and all(_has(a, y) for y in b),
    "sets__intersects": lambda a, b: any(_has(b, x) for x in a),
}
