"""The syntax tree of a CEL expression: one node class per construct, with its position. Pure.

The parser builds it once per expression; the checker annotates it with types, the cost
estimator and the rewrites walk it, and `printer` writes it back as source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class PositionedError(Exception):
    """An error in the expression, at a character position."""

    def __init__(self, message: str, pos: int):
        super().__init__(message)
        self.pos = pos


@dataclass(eq=False)
class Node:
    pos: int


@dataclass(eq=False)
class Literal(Node):
    value: Any
    kind: str  # int, uint, double, string, bytes, bool, null_type


@dataclass(eq=False)
class Ident(Node):
    name: str


@dataclass(eq=False)
class Select(Node):
    operand: Node
    field: str
    optional: bool = False  # x.?f
    test: bool = False  # inside has()


@dataclass(eq=False)
class Index(Node):
    operand: Node
    key: Node
    optional: bool = False  # x[?k]


@dataclass(eq=False)
class Call(Node):
    name: str
    args: list
    target: Node | None = None  # the receiver of a method call


@dataclass(eq=False)
class ListLit(Node):
    elements: list
    optional: frozenset = frozenset()  # indices of [?e] elements


@dataclass(eq=False)
class MapLit(Node):
    entries: list  # (key, value, optional)


@dataclass(eq=False)
class Unary(Node):
    op: str  # "!" or "-"
    operand: Node


@dataclass(eq=False)
class Binary(Node):
    op: str  # && || == != < <= > >= in + - * / %
    left: Node
    right: Node


@dataclass(eq=False)
class Conditional(Node):
    condition: Node
    then: Node
    otherwise: Node


@dataclass(eq=False)
class Macro(Node):
    """A comprehension-like macro: all, exists, exists_one, map, filter, transformList,
    transformMap, transformMapEntry, sortBy, optMap, optFlatMap, or bind (cel.bind, no target)."""
    name: str
    target: Node | None
    variables: tuple
    args: list = field(default_factory=list)

    @property
    def receiver(self) -> Node:
        """The target of every macro but bind (which has none)."""
        if self.target is None:
            raise ValueError(f"{self.name}() has no target")
        return self.target


def children(node: Node) -> list:
    """The direct sub-expressions, in source order."""
    if isinstance(node, (Select,)):
        return [node.operand]
    if isinstance(node, Index):
        return [node.operand, node.key]
    if isinstance(node, Call):
        return ([node.target] if node.target is not None else []) + list(node.args)
    if isinstance(node, ListLit):
        return list(node.elements)
    if isinstance(node, MapLit):
        return [part for key, value, _o in node.entries for part in (key, value)]
    if isinstance(node, Unary):
        return [node.operand]
    if isinstance(node, Binary):
        return [node.left, node.right]
    if isinstance(node, Conditional):
        return [node.condition, node.then, node.otherwise]
    if isinstance(node, Macro):
        return ([node.target] if node.target is not None else []) + list(node.args)
    return []


def rebuilt(node: Node, change) -> Node:
    """A copy of `node` with `change` applied to each direct sub-expression (leaves as they are)."""
    if isinstance(node, Select):
        return Select(node.pos, change(node.operand), node.field, node.optional, node.test)
    if isinstance(node, Index):
        return Index(node.pos, change(node.operand), change(node.key), node.optional)
    if isinstance(node, Call):
        target = change(node.target) if node.target is not None else None
        return Call(node.pos, node.name, [change(a) for a in node.args], target)
    if isinstance(node, ListLit):
        return ListLit(node.pos, [change(e) for e in node.elements], node.optional)
    if isinstance(node, MapLit):
        return MapLit(node.pos, [(change(k), change(v), o) for k, v, o in node.entries])
    if isinstance(node, Unary):
        return Unary(node.pos, node.op, change(node.operand))
    if isinstance(node, Binary):
        return Binary(node.pos, node.op, change(node.left), change(node.right))
    if isinstance(node, Conditional):
        return Conditional(node.pos, change(node.condition), change(node.then), change(node.otherwise))
    if isinstance(node, Macro):
        target = change(node.target) if node.target is not None else None
        return Macro(node.pos, node.name, target, node.variables, [change(a) for a in node.args])
    return node


def walk(node: Node):
    """Every node, parents before children (iterative: deep trees do not recurse)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def chain(node: Binary) -> tuple[list, list]:
    """(operands, links) of a chain of one operator (a && b && c): the operands in source order
    and the Binary nodes joining them, found without recursion."""
    operands: list[Node] = []
    links: list[Binary] = []
    stack: list[Node] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Binary) and current.op == node.op:
            links.append(current)
            stack.extend((current.right, current.left))
        else:
            operands.append(current)
    return operands, links
