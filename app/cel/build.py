"""Building CEL syntax trees in code (the selectors we generate), printed by the one printer. Pure.

Generated expressions are trees, never pasted strings: precedence and quoting are the printer's
job, so a value can never change an expression's shape.
"""

from __future__ import annotations

from collections.abc import Iterable

from . import printer
from .tree import Binary, Call, Ident, Index, ListLit, Literal, Macro, Node, Select, Unary

GENERATED_QUOTE = "'"  # our generated selectors quote strings with ' (as upstream's examples do)


def ident(name: str) -> Node:
    return Ident(0, name)


def string(value: str) -> Node:
    return Literal(0, value, "string")


def integer(value: int) -> Node:
    return Literal(0, int(value), "int")


def boolean(value: bool) -> Node:
    return Literal(0, bool(value), "bool")


def strings(values: Iterable[str]) -> Node:
    return ListLit(0, [string(v) for v in values])


def integers(values: Iterable[int]) -> Node:
    return ListLit(0, [integer(v) for v in values])


def field(operand: Node, name: str) -> Node:
    return Select(0, operand, name)


def index(operand: Node, key: Node) -> Node:
    return Index(0, operand, key)


def call(name: str, *args: Node) -> Node:
    return Call(0, name, list(args))


def method(target: Node, name: str, *args: Node) -> Node:
    return Call(0, name, list(args), target)


def compare(op: str, left: Node, right: Node) -> Node:
    if op not in ("==", "!=", "<", "<=", ">", ">=", "in"):
        raise ValueError(f"{op!r} is not a CEL comparison")
    return Binary(0, op, left, right)


def negate(operand: Node) -> Node:
    return Unary(0, "!", operand)


def all_of(parts: Iterable[Node]) -> Node:
    return _chain("&&", list(parts), True)


def any_of(parts: Iterable[Node]) -> Node:
    return _chain("||", list(parts), False)


def exists(target: Node, variable: str, body: Node) -> Node:
    return Macro(0, "exists", target, (variable,), [body])


def text(node: Node) -> str:
    """The expression as CEL source, through the one printer."""
    return printer.source(node, GENERATED_QUOTE)


def _chain(op: str, parts: list, empty: bool) -> Node:
    if not parts:
        return boolean(empty)
    result = parts[0]
    for part in parts[1:]:
        result = Binary(0, op, result, part)  # left-nested, as the parser builds a chain
    return result
