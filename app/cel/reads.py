"""What of the device a selector looks at, read off its tree. Pure."""

from __future__ import annotations

import re

from .tree import Binary, Call, Ident, Index, Literal, Node, Select, walk

_MAPS = ("attributes", "capacity")


def analyse(tree: Node) -> tuple:
    """(domains, reads, mentions) of one tree, walked once."""
    nodes = tuple(walk(tree))
    return domains(tree, nodes), reads(tree, nodes), mentions(tree, nodes)


def _nodes(tree: Node, nodes: tuple | None) -> tuple:
    return nodes if nodes is not None else tuple(walk(tree))
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # words inside a string literal's value


def mentions(tree: Node, nodes: tuple | None = None) -> frozenset:
    """Every name the expression mentions: identifiers, fields, functions, and the words of its
    string literals (an attribute named by a computed key still shows up here)."""
    found: set[str] = set()
    for node in _nodes(tree, nodes):
        if isinstance(node, Ident):
            found.add(node.name)
        elif isinstance(node, Select):
            found.add(node.field)
        elif isinstance(node, Call):
            found.add(node.name)
        elif isinstance(node, Literal) and node.kind == "string":
            found.update(_WORD.findall(node.value))
    return frozenset(found)


def _domain(node, optional: bool = True) -> tuple | None:
    """(kind, domain) of device.attributes['d'] / device.capacity[?'d'] / device.attributes.d, else None."""
    if (isinstance(node, Select) and not node.optional and isinstance(node.operand, Select)
            and node.operand.field in _MAPS and isinstance(node.operand.operand, Ident)
            and node.operand.operand.name == "device"):
        return node.operand.field, node.field
    if (isinstance(node, Index) and (optional or not node.optional)
            and isinstance(node.key, Literal) and node.key.kind == "string"
            and isinstance(node.operand, Select) and node.operand.field in _MAPS and not node.operand.optional
            and isinstance(node.operand.operand, Ident) and node.operand.operand.name == "device"):
        return node.operand.field, node.key.value
    return None


def domains(tree: Node, nodes: tuple | None = None) -> tuple:
    """The (attributes|capacity, domain) pairs the expression names: a device lacking one gets an
    empty map there before evaluation, as upstream reads a missing domain."""
    return tuple(sorted({d for n in _nodes(tree, nodes) if (d := _domain(n)) is not None}))


def reads(tree: Node, nodes: tuple | None = None) -> tuple | None:
    """("attributes"|"capacity", domain, name) and (field,) the result can depend on; None when the
    expression uses `device` otherwise (iterates a map, passes it on): then every field counts."""
    found: set[tuple] = set()
    consumed: set[int] = set()
    nodes = _nodes(tree, nodes)
    for node in nodes:
        read = _read(node)
        if read is not None:
            found.add(read)
            device = node
            while not isinstance(device, Ident):
                device = device.right if isinstance(device, Binary) else device.operand
            consumed.add(id(device))
    devices = [n for n in nodes if isinstance(n, Ident) and n.name == "device"]
    if any(id(n) not in consumed for n in devices):
        return None
    return tuple(sorted(found))


def _read(node) -> tuple | None:
    if isinstance(node, Select) and not node.optional and not node.test:
        domain = _domain(node.operand, optional=False)
        if domain is not None:
            return (*domain, node.field)
        if isinstance(node.operand, Ident) and node.operand.name == "device" and node.field in (
                "driver", "allowMultipleAllocations"):
            return (node.field,)
    if isinstance(node, Index) and not node.optional and isinstance(node.key, Literal) and node.key.kind == "string":
        domain = _domain(node.operand, optional=False)
        if domain is not None:
            return (*domain, node.key.value)
    if (isinstance(node, Binary) and node.op == "in" and isinstance(node.left, Literal)
            and node.left.kind == "string"):
        domain = _domain(node.right, optional=False)
        if domain is not None:
            return (*domain, node.left.value)
    return None
