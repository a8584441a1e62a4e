"""The DRA `device` vocabulary of the selectors we generate, as CEL trees (app.cel.build). Pure.

Callers compose trees; `text` prints the finished selector through the CEL package's one printer.
"""

from __future__ import annotations

from collections.abc import Iterable

from app.cel import build

Node = build.Node
text = build.text
any_of, all_of, negate, strings, string = build.any_of, build.all_of, build.negate, build.strings, build.string


def _device_map(kind: str, domain: str) -> Node:
    return build.index(build.field(build.ident("device"), kind), build.string(domain))


def attribute(domain: str, name: str) -> Node:
    return build.field(_device_map("attributes", domain), name)


def capacity(domain: str, name: str) -> Node:
    return build.field(_device_map("capacity", domain), name)


def has_attribute(domain: str, name: str) -> Node:
    # Guard first: a missing attribute is a runtime error that fails the whole allocation.
    return build.compare("in", build.string(name), _device_map("attributes", domain))


def has_capacity(domain: str, name: str) -> Node:
    return build.compare("in", build.string(name), _device_map("capacity", domain))


def guarded_attribute(domain: str, name: str, test: Node) -> Node:
    return all_of([has_attribute(domain, name), test])


def guarded_capacity(domain: str, name: str, test: Node) -> Node:
    return all_of([has_capacity(domain, name), test])


def absent_or_not(guard: Node, test: Node) -> Node:
    """NotIn / containsNone: a device without the attribute passes, as a node without the label does."""
    return any_of([negate(guard), negate(test)])


def quantity_compare(value: Node, op: str, amount: str) -> Node:
    """`value.compareTo(quantity(amount)) <op> 0`."""
    return build.compare(op, build.method(value, "compareTo", build.call("quantity", build.string(amount))),
                         build.integer(0))


def memory_at_least(domain: str, amount: str) -> Node:
    return guarded_capacity(domain, "memory", quantity_compare(capacity(domain, "memory"), ">=", amount))


def lowered(value: Node) -> Node:
    return build.method(value, "lowerAscii")


def member_of(value: Node, values: Iterable[str]) -> Node:
    return build.compare("in", value, strings(values))
