"""Syntax tree back to CEL source, with parentheses where precedence needs them. Pure."""

from __future__ import annotations

from .tree import (
    Binary,
    Call,
    Conditional,
    Ident,
    Index,
    ListLit,
    Literal,
    Macro,
    MapLit,
    Node,
    Select,
    Unary,
)

_PRECEDENCE = {"||": 1, "&&": 2, "==": 3, "!=": 3, "<": 3, "<=": 3, ">": 3, ">=": 3, "in": 3,
               "+": 4, "-": 4, "*": 5, "/": 5, "%": 5}
_UNARY, _PRIMARY = 6, 7
_ESCAPE = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def string_literal(value: str, quote: str = '"') -> str:
    """A CEL string literal in `quote` (the one writer: the printer's and our generated selectors')."""
    escapes = {**_ESCAPE, quote: "\\" + quote}
    return quote + "".join(escapes.get(c) or (f"\\u{ord(c):04x}" if ord(c) < 32 or ord(c) == 127 else c)
                           for c in value) + quote


def literal(value, kind: str, quote: str = '"') -> str:
    if kind == "bool":
        return "true" if value else "false"
    if kind == "null_type":
        return "null"
    if kind == "int":
        return str(value)
    if kind == "uint":
        return f"{value}u"
    if kind == "double":
        text = repr(float(value))
        return text if any(c in text for c in ".en") else text + ".0"
    if kind == "bytes":
        return 'b"' + "".join(chr(b) if 32 <= b < 127 and chr(b) not in '\\"' else f"\\x{b:02x}" for b in value) + '"'
    return string_literal(value, quote)


def source(node: Node, quote: str = '"') -> str:
    """CEL source for `node`; string literals in `quote` (the generated selectors use ')."""
    if isinstance(node, Literal):
        return literal(node.value, node.kind, quote)
    if isinstance(node, Ident):
        return node.name
    if isinstance(node, Select):
        text = f"{_operand(node.operand, _PRIMARY, quote)}.{'?' if node.optional else ''}{node.field}"
        return f"has({text})" if node.test else text
    if isinstance(node, Index):
        return f"{_operand(node.operand, _PRIMARY, quote)}[{'?' if node.optional else ''}{source(node.key, quote)}]"
    if isinstance(node, Call):
        args = ", ".join(source(a, quote) for a in node.args)
        return f"{_operand(node.target, _PRIMARY, quote)}.{node.name}({args})" if node.target is not None else \
            f"{node.name}({args})"
    if isinstance(node, ListLit):
        marked = (("?" if i in node.optional else "") + source(e, quote) for i, e in enumerate(node.elements))
        return "[" + ", ".join(marked) + "]"
    if isinstance(node, MapLit):
        entries = (f"{'?' if o else ''}{source(k, quote)}: {source(v, quote)}" for k, v, o in node.entries)
        return "{" + ", ".join(entries) + "}"
    if isinstance(node, Unary):
        # cel-go drops pairs of one unary operator (--x is x) and folds a minus into a number
        # literal (-(1) is a call, -1 a literal): a unary operand, and a number under a minus, keep
        # their parentheses.
        number = isinstance(node.operand, Literal) and node.operand.kind in ("int", "uint", "double")
        return f"{node.op}{_operand(node.operand, _PRIMARY + 1 if number and node.op == '-' else _PRIMARY, quote)}"
    if isinstance(node, Binary):
        level = _PRECEDENCE[node.op]
        return f"{_operand(node.left, level, quote)} {node.op} {_operand(node.right, level + 1, quote)}"
    if isinstance(node, Conditional):
        return f"{_operand(node.condition, 1, quote)} ? {_operand(node.then, 1, quote)} : {source(node.otherwise, quote)}"
    if isinstance(node, Macro):
        args = ", ".join([*node.variables, *(source(a, quote) for a in node.args)])
        if node.target is None:
            return f"cel.{node.name}({args})"
        return f"{_operand(node.target, _PRIMARY, quote)}.{node.name}({args})"
    raise TypeError(f"cannot print {type(node).__name__}")


def _level(node: Node) -> int:
    if isinstance(node, Binary):
        return _PRECEDENCE[node.op]
    if isinstance(node, Conditional):
        return 0
    if isinstance(node, Unary) or (isinstance(node, Literal) and node.kind in ("int", "double") and node.value < 0):
        return _UNARY  # a negative literal is printed with its sign
    return _PRIMARY


def _operand(node: Node, needed: int, quote: str) -> str:
    """`node` where an expression of precedence `needed` or higher must stand."""
    text = source(node, quote)
    return text if _level(node) >= needed else f"({text})"
