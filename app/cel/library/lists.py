"""Kubernetes' lists library (isSorted, sum, min, max, indexOf, lastIndexOf), cel-go's lists
extension (slice, flatten, sort, distinct, reverse, first, last, lists.range; sortBy is a
macro) and includes() of list-typed attributes (DRAListTypeAttributes)."""

from __future__ import annotations

from ..values import optional
from .decl import each, function, method

_L = "list(A)"
# Upstream declares these per element type: a list of lists (or of quantities) has no min().
COMPARABLE = ("int", "uint", "double", "bool", "duration", "timestamp", "string", "bytes")
SUMMABLE = ("int", "uint", "double", "duration")
DECLARATIONS = [
    *each(COMPARABLE, lambda t: method("isSorted", f"list({t})", (), "bool", engine="isSorted", cost="compare_list")),
    *each(SUMMABLE, lambda t: method("sum", f"list({t})", (), t, engine="sum", cost="compare_list")),
    *each(COMPARABLE, lambda t: method("min", f"list({t})", (), t, engine="min", cost="compare_list")),
    *each(COMPARABLE, lambda t: method("max", f"list({t})", (), t, engine="max", cost="compare_list")),
    method("indexOf", _L, ("A",), "int", cost="compare_list"),
    method("lastIndexOf", _L, ("A",), "int", cost="compare_list"),
    method("slice", _L, ("int", "int"), _L, cost="walk_list"),
    method("flatten", "list(list(A))", (), _L, cost="walk_list"),
    method("flatten", "list(dyn)", ("int",), "list(dyn)", cost="walk_list"),
    *each(COMPARABLE, lambda t: method("sort", f"list({t})", (), f"list({t})", engine="sort", cost="walk_list")),
    method("distinct", _L, (), _L, cost="walk_list"),
    method("reverse", _L, (), _L, cost="walk_list"),
    method("first", _L, (), "optional(A)"), method("last", _L, (), "optional(A)"),
    function("lists.range", ("int",), "list(int)", cost="walk_list"),
    method("includes", "dyn", ("dyn",), "bool", cost="includes", feature="listTypeAttributes"),
]


def _range(n: int) -> list[int]:
    if n < 0:
        raise ValueError(f"lists.range: size must be non-negative, got {n}")
    return list(range(n))


def _list(value, name):
    if not isinstance(value, list):
        raise ValueError(f"{name}() needs a list")
    return value


def _extreme(pick):
    def apply(receiver, *more):
        items = [receiver, *more] if more else _list(receiver, pick.__name__)
        if not items:
            raise ValueError(f"{pick.__name__}() of an empty list")
        return pick(items)
    return apply


def _flatten(items, depth=1):
    out = []
    for item in _list(items, "flatten"):
        if isinstance(item, list) and depth > 0:
            out.extend(_flatten(item, depth - 1))
        else:
            out.append(item)
    return out


def _distinct(items):
    out = []
    for item in _list(items, "distinct"):
        if not any(type(item) is type(o) and item == o for o in out):
            out.append(item)
    return out


def _slice(items, start, end):
    if not 0 <= start <= end <= len(_list(items, "slice")):
        raise ValueError(f"slice({start}, {end}) out of range")
    return items[start:end]


def _end(pick: int):
    def end(items):
        items = _list(items, "first" if pick == 0 else "last")
        return optional(items[pick]) if items else optional(present=False)
    return end


def _equal(a, b) -> bool:
    return type(a) is type(b) and a == b


def _includes(receiver, item) -> bool:
    """Membership for a list attribute, equality for a scalar one."""
    if isinstance(receiver, list):
        return any(_equal(v, item) for v in receiver)
    return _equal(receiver, item)


FUNCTIONS = {
    "isSorted": lambda items: list(items) == sorted(items), "sum": lambda items: sum(items),
    "max": _extreme(max), "min": _extreme(min), "sort": lambda items: sorted(_list(items, "sort")),
    "distinct": _distinct, "slice": _slice, "flatten": _flatten, "reverse": lambda v: _list(v, "reverse")[::-1],
    "lists__range": _range, "first": _end(0), "last": _end(-1), "includes": _includes,
}
