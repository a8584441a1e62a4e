"""Type conversions of constants, folded as the API server plans a program: cel-go evaluates
`int('abc')`, `uint(-1)`, `duration('1x')` once when it builds the program, and a failure
refuses the expression at creation, even in a branch that never runs. Pure."""

from __future__ import annotations

import math
import re

from .library.core import BOOL_TEXT, to_string, to_timestamp
from .tree import Call, ListLit, Literal, MapLit, Node, Unary

CONVERSIONS = frozenset({"int", "uint", "double", "string", "bytes", "bool", "timestamp", "duration", "dyn", "type"})
INT64 = (-(2 ** 63), 2 ** 63 - 1)
_DURATION = re.compile(r"[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+|[-+]?0")
_FLOAT = re.compile(r"[-+]?((\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?|inf|infinity|nan)", re.IGNORECASE)
_NOT_CONSTANT = object()


def first_failure(node: Node) -> tuple[Node, str] | None:
    """(the call, why) of the first conversion of a constant that cannot be made, if any."""
    for found in _walk(node):
        if isinstance(found, Call) and found.target is None and found.name in CONVERSIONS and len(found.args) == 1:
            try:
                _value(found)
            except _Failed as exc:
                return found, str(exc)
    return None


class _Failed(Exception):
    pass


def _walk(node):
    yield node
    for value in vars(node).values():
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            for part in (item if isinstance(item, tuple) else (item,)):
                if isinstance(part, Node):
                    yield from _walk(part)


def _value(node: Node):
    """The constant's value; _NOT_CONSTANT when it is not one; _Failed when a conversion fails."""
    if isinstance(node, Literal):
        return (node.kind, node.value)
    if isinstance(node, Unary) and node.op == "-" and isinstance(node.operand, Literal) and \
            node.operand.kind in ("int", "double"):
        return (node.operand.kind, -node.operand.value)
    if isinstance(node, ListLit) and not node.optional:
        parts = [_value(e) for e in node.elements]
        return _NOT_CONSTANT if _NOT_CONSTANT in parts else ("list", parts)
    if isinstance(node, MapLit) and not any(o for _k, _v, o in node.entries):
        parts = [_value(p) for k, v, _o in node.entries for p in (k, v)]
        return _NOT_CONSTANT if _NOT_CONSTANT in parts else ("map", parts)
    if isinstance(node, Call) and node.target is None and node.name in CONVERSIONS and len(node.args) == 1:
        given = _value(node.args[0])
        return given if given is _NOT_CONSTANT else _convert(node.name, *given)
    return _NOT_CONSTANT


def _fail(source: str, target: str):
    raise _Failed(f"type conversion error from '{source}' to '{target}'")


def _convert(name: str, kind: str, value):
    """(type, value) of name(value), as cel-go converts it; _Failed as its error says."""
    if name == "dyn":
        return (kind, value)
    if name == "type":
        return ("type", kind)
    if kind in ("list", "map", "type", "null_type") and name != kind:
        _fail(kind, name)
    if name in ("int", "uint"):
        return (name, _integer(name, kind, value))
    if name == "double":
        if kind == "string" and not _FLOAT.fullmatch(value):
            _fail(kind, name)
        if kind not in ("int", "uint", "double", "string"):
            _fail(kind, name)
        return (name, float(value))
    if name == "string":
        return (name, _text(value))
    if name == "bytes":
        if kind not in ("string", "bytes"):
            _fail(kind, name)
        return (name, value.encode() if isinstance(value, str) else value)
    if name == "bool":
        if kind == "string" and value not in BOOL_TEXT:
            _fail(kind, name)
        return (name, BOOL_TEXT.get(value, value) if kind == "string" else value)
    if name == "duration" and kind == "string" and not _DURATION.fullmatch(value):
        _fail(kind, name)
    if name == "timestamp" and kind == "string" and not _timestamp(value):
        _fail(kind, name)
    return (name, value)


def _integer(name: str, kind: str, value) -> int:
    if kind == "string":
        if not re.fullmatch(r"[-+]?\d+" if name == "int" else r"\d+", value):
            _fail(kind, name)
        number = int(value)
    elif kind in ("int", "uint"):
        number = value
    elif kind == "double":
        if math.isnan(value) or math.isinf(value):
            number = 2 ** 64  # out of every range: the overflow below
        else:
            number = math.trunc(value)
    else:
        _fail(kind, name)
    low, high = INT64 if name == "int" else (0, 2 ** 64 - 1)
    if not low <= number <= high:
        raise _Failed("integer overflow" if name == "int" else "unsigned integer overflow")
    return number


def _text(value) -> str:
    try:
        return to_string(value)
    except ValueError as exc:  # invalid UTF-8: what string() says at runtime too
        raise _Failed(str(exc)) from exc


def _timestamp(value: str) -> bool:
    try:
        to_timestamp(value)
    except ValueError:
        return False
    return True
