"""What upstream's checker refuses in `'template'.format([args])` when the template is a constant
and the arguments a list literal (cel-go's strings extension validates them at compile time):
the count of arguments, and each clause against its argument's type. Pure."""

from __future__ import annotations

import re

from . import types
from .tree import Ident, Index, ListLit, Literal, MapLit, Node, Select
from .types import DYN, STRING

VERB = re.compile(r"%(?:\.\d+)?[a-zA-Z]")  # a verb of a format() template, not CEL source
STRINGABLE = frozenset({"list", "map", "int", "uint", "double", "bool", "string", "timestamp", "bytes", "duration",
                        "type", "null_type"})
_HEX = ({"int", "uint", "string", "bytes"}, "only integers, byte buffers, and strings can be formatted as hex")
# verb -> (the kinds its clause takes, what upstream says otherwise)
CLAUSES = {
    "s": (STRINGABLE, "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, "
                      "durations, and timestamps"),
    "d": ({"int", "uint"}, "decimal clause can only be used on integers"),
    "f": ({"double", "string"}, "fixed-point clause can only be used on doubles"),
    "e": ({"double", "string"}, "scientific clause can only be used on doubles"),
    "b": ({"int", "uint", "bool"}, "only integers and bools can be formatted as binary"),
    "x": _HEX, "X": _HEX,
    "o": ({"int", "uint"}, "octal clause can only be used on integers"),
}


def problem(template: Node, args: list, type_of) -> tuple[str, Node] | None:
    """(message, where) of the first thing upstream refuses; type_of: node id -> checked type."""
    if not (isinstance(template, Literal) and template.kind == STRING and len(args) == 1
            and isinstance(args[0], ListLit)):
        return None
    verbs = VERB.findall(template.value.replace("%%", ""))
    given = args[0].elements
    if len(given) != len(verbs):
        which = "too many" if len(given) > len(verbs) else "not enough"
        return f"{which} arguments supplied to string.format (expected {len(verbs)}, got {len(given)})", args[0]
    for verb, arg in zip(verbs, given):
        allowed, said = CLAUSES.get(verb[-1], (None, ""))
        if allowed is None:
            continue
        bad = _unformattable(arg, type_of) if verb[-1] == "s" else (arg if _refused(arg, allowed, type_of) else None)
        if bad is not None:
            return (f"error during formatting: {said}, was given "
                    f"{'google.protobuf.Any' if attribute_value(bad) else types.display(type_of(id(bad)))}", bad)
    return None


def _refused(node: Node, allowed, type_of) -> bool:
    found = type_of(id(node))
    return attribute_value(node) or (found != DYN and types.kind(found) not in allowed)


def _unformattable(arg: Node, type_of) -> Node | None:
    """The (innermost) part of a %s argument no string clause takes, if any: literals are walked."""
    if _refused(arg, STRINGABLE, type_of):
        return arg
    parts = arg.elements if isinstance(arg, ListLit) else [
        part for k, v, _o in arg.entries for part in (k, v)] if isinstance(arg, MapLit) else []
    return next((bad for part in parts if (bad := _unformattable(part, type_of)) is not None), None)


def attribute_value(node: Node) -> bool:
    """device.attributes[d].name (or [name]): upstream types an attribute's value Any, not dyn."""
    depth = 0
    while isinstance(node, (Select, Index)) and not getattr(node, "optional", False):
        node, depth = node.operand, depth + 1
        if depth == 2 and isinstance(node, Select) and node.field == "attributes" and \
                isinstance(node.operand, Ident) and node.operand.name == "device":
            return True
    return False
